# Sourced by build.sh and publish.sh: $cli, the official devcontainer CLI
# ($DEVCONTAINER_CLI, else the one under $DEVCONTAINER_CLI_PREFIX, default
# /opt/csb-devcontainer-cli, installed there from the npm registry when
# missing). Its version is printed: the release workflow's log and the
# rehearsal's then name the CLI that published.
cli="${DEVCONTAINER_CLI:-}"
if [ -z "$cli" ]; then
    prefix="${DEVCONTAINER_CLI_PREFIX:-/opt/csb-devcontainer-cli}"
    cli="$prefix/node_modules/.bin/devcontainer"
    [ -x "$cli" ] || npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error @devcontainers/cli
fi
echo "devcontainer CLI $("$cli" --version)" >&2
