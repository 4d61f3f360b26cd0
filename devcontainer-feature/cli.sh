# Sourced by build.sh and publish.sh: $cli, the official devcontainer CLI
# ($DEVCONTAINER_CLI, else /opt/csb-devcontainer-cli's, installed from the
# npm registry when missing).
cli="${DEVCONTAINER_CLI:-}"
if [ -z "$cli" ]; then
    cli=/opt/csb-devcontainer-cli/node_modules/.bin/devcontainer
    [ -x "$cli" ] || npm install --prefix /opt/csb-devcontainer-cli --no-audit --no-fund --loglevel=error @devcontainers/cli
fi
