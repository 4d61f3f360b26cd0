#!/bin/sh
# devcontainer feature install script for claude-sandbox (runs as root during
# the image build; no Rust toolchain needed: the binary ships prebuilt, static).
# Options arrive as upper-cased environment variables.
set -eu

say() { printf 'claude-sandbox feature: %s\n' "$*"; }
die() { printf 'claude-sandbox feature: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (it is a devcontainer feature install script)"

. /etc/os-release 2>/dev/null || die "no /etc/os-release: only Debian and Ubuntu bases are supported"
case " ${ID:-} ${ID_LIKE:-} " in
    *" debian "*|*" ubuntu "*) ;;
    *) die "only Debian and Ubuntu bases are supported (this is '${ID:-unknown}'); bubblewrap and passt come from their packages" ;;
esac

here=$(cd "$(dirname "$0")" && pwd)
case "$(uname -m)" in
    x86_64|amd64) bin="$here/claude-sandbox-x86_64" ;;
    aarch64|arm64) bin="$here/claude-sandbox-aarch64" ;;
    *) die "unsupported architecture $(uname -m)" ;;
esac
[ -x "$bin" ] || die "$bin is missing from the feature; it was packaged without its binary (just feature)"

EGRESSJAIL="${EGRESSJAIL:-true}"
EGRESS="${EGRESS:-}"
ALLOWDOMAIN="${ALLOWDOMAIN:-}"
ALLOWDOMAINS="${ALLOWDOMAINS:-}"
ALLOWIP="${ALLOWIP:-}"
ALLOWWRITE="${ALLOWWRITE:-}"
PASSENV="${PASSENV:-}"
NOFORGE="${NOFORGE:-false}"
WORKSPACEROOT="${WORKSPACEROOT:-}"
CLAUDEVERSION="${CLAUDEVERSION:-2.1.330}"
CLAUDESOURCE="${CLAUDESOURCE:-npm}"
PUBLISHPORTS="${PUBLISHPORTS:-}"
PIDSLIMIT="${PIDSLIMIT:-}"
TMPFSSIZE="${TMPFSSIZE:-}"
PRIVATESTATEMAX="${PRIVATESTATEMAX:-}"
BROKER="${BROKER:-true}"
user="${_REMOTE_USER:-root}"

case "$CLAUDESOURCE" in
    npm|existing) ;;
    *) die "claudeSource must be npm or existing, not '$CLAUDESOURCE'" ;;
esac
getent passwd "$user" >/dev/null \
    || die "the remote user '$user' does not exist yet; create it first (e.g. with the common-utils feature, which this feature installs after)"

# Only what is missing: an image that has everything builds without the network.
export DEBIAN_FRONTEND=noninteractive
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
missing=""
for p in bubblewrap passt iproute2 git ca-certificates; do
    installed "$p" || missing="$missing $p"
done
if [ "$CLAUDESOURCE" = npm ] && ! command -v npm >/dev/null 2>&1; then
    missing="$missing npm"
fi
if [ -n "$missing" ]; then
    say "installing packages:$missing"
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
    rm -rf /var/lib/apt/lists/*
fi

# The configuration, from the options (validated by the installer). Lists
# are split on commas and blanks, never glob-expanded.
set -f
conf=$(mktemp)
trap 'rm -f "$conf"' EXIT
{
    echo "# /etc/claude-sandbox.conf, written by the claude-sandbox devcontainer feature"
    [ "$EGRESSJAIL" = false ] && echo "egress-jail = 0"
    [ -n "$EGRESS" ] && echo "egress = $EGRESS"
    for d in $(printf '%s' "$ALLOWDOMAIN" | tr ',' ' '); do echo "allow-domain = $d"; done
    [ -n "$ALLOWDOMAINS" ] && echo "allow-domains = $ALLOWDOMAINS"
    [ "$NOFORGE" = true ] && echo "no-forge"
    [ -n "$WORKSPACEROOT" ] && echo "workspace-root = $WORKSPACEROOT"
    [ -n "$PASSENV" ] && echo "pass-env = $PASSENV"
    [ -n "$PUBLISHPORTS" ] && echo "publish-port = $PUBLISHPORTS"
    [ -n "$PIDSLIMIT" ] && echo "pids-limit = $PIDSLIMIT"
    [ -n "$TMPFSSIZE" ] && echo "tmpfs-size = $TMPFSSIZE"
    [ -n "$PRIVATESTATEMAX" ] && echo "private-state-max = $PRIVATESTATEMAX"
    [ "$BROKER" = false ] && echo "broker = off"
    for ip in $(printf '%s' "$ALLOWIP" | tr ',' ' '); do echo "allow-ip = $ip"; done
    for p in $(printf '%s' "$ALLOWWRITE" | tr ',' ' '); do echo "allow-write = $p"; done
} > "$conf"
set +f

set -- install --no-packages --config "$conf" --user "$user"
case "$CLAUDESOURCE" in
    npm) set -- "$@" --claude-version "$CLAUDEVERSION" ;;
    existing)
        home=$(getent passwd "$user" | cut -d: -f6)
        [ -x "$home/.local/bin/claude" ] || [ -x /usr/libexec/claude-sandbox/claude ] \
            || die "claudeSource is 'existing' but $home/.local/bin/claude does not exist; install Claude Code for $user first, or use claudeSource npm"
        ;;
esac
# The container's entrypoint (the metadata's "entrypoint"): the egress jail
# needs /dev/net/tun, which a feature cannot pass with runArgs. Made at every
# start when missing (an explicit --device=/dev/net/tun leaves it as it is):
# Docker's default device rules let a container's root create and open it,
# a node of the container's own, mode 0666 whatever the host's is. Where
# no device node can be made (rootless Podman, an engine without CAP_MKNOD),
# /dev/net/tun becomes a link to the host's device, which the metadata's
# "mounts" binds at /dev/net/host-tun. The container's command then runs.
install -d -m 0755 /usr/local/share/claude-sandbox-feature
cat > /usr/local/share/claude-sandbox-feature/entrypoint.sh <<'ENTRYPOINT'
#!/bin/sh
# claude-sandbox devcontainer feature: provide /dev/net/tun, then run the command.
if [ ! -c /dev/net/tun ]; then
    if [ "$(id -u)" -eq 0 ] && mkdir -p /dev/net && mknod -m 0666 /dev/net/tun c 10 200 2>/dev/null; then
        :
    elif [ -c /dev/net/host-tun ] && ln -sfn host-tun /dev/net/tun 2>/dev/null; then
        :
    else
        echo "claude-sandbox feature: could not provide /dev/net/tun (the egress jail needs it); add \"runArgs\": [\"--device=/dev/net/tun\"] to devcontainer.json" >&2
    fi
fi
exec "$@"
ENTRYPOINT
chmod 0755 /usr/local/share/claude-sandbox-feature/entrypoint.sh

say "installing claude-sandbox for user $user"
"$bin" "$@"
say "done; \`claude\` now runs sandboxed (check: /usr/libexec/claude-sandbox/claude-sandbox doctor)"
