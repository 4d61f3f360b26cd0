#!/usr/bin/env bash
# bench/launch.sh [BINARY]: the launch latency of `claude --version` through
# the shadow, as root and as an unprivileged user, jail off, jail on and jail
# on with a brokered credential (decision 0016), from
# a repository workspace (issue #23 item 3), with hyperfine. Smaller than
# `just bench`: for measuring one change to the launch path before and after.
# BINARY defaults to target/release/claude-sandbox (built if missing).
# CSB_LAUNCH_CONF: extra lines for /etc/claude-sandbox.conf (e.g.
# "root-view-max-entries = 0"); CSB_LAUNCH_RUNS: hyperfine runs (40).
#
# Like bench/bench.sh it runs as root inside a private site network
# (tests/testnet/lan.sh) and a private mount namespace with overlays over
# /etc, /usr/libexec and /usr/local/bin: the machine is unchanged afterwards.
# The unprivileged user exists only in the overlay's /etc/passwd.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
[ "$(id -u)" -eq 0 ] || exec sudo --preserve-env=PATH,CSB_REAL_CLAUDE bash "$0" "$@"
command -v hyperfine >/dev/null || { echo "launch.sh: hyperfine missing: sudo apt-get install hyperfine" >&2; exit 1; }
real="${CSB_REAL_CLAUDE:-/opt/csb-claude/node_modules/@anthropic-ai/claude-code-linux-x64/claude}"
[ -x "$real" ] || { echo "launch.sh: real Claude Code not found at $real" >&2; exit 1; }
bin="${1:-}"
if [ -z "$bin" ]; then
    cargo build --release --quiet
    bin=target/release/claude-sandbox
fi
[ -x "$bin" ] || { echo "launch.sh: $bin is not an executable" >&2; exit 1; }
runs="${CSB_LAUNCH_RUNS:-40}"
conf_extra="${CSB_LAUNCH_CONF:-}"
work=$(mktemp -d /var/tmp/csb-launch-XXXXXX)
# Root-only entries (overlays, root's homes) outside /var, as in bench.sh:
# root's real home is not under /var either.
state=$(mktemp -d /tmp/csb-launch-state-XXXXXX)
prefix="csbl$$"
servers=()
cleanup() {
    for p in "${servers[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    bash tests/testnet/lan.sh down "$prefix" >/dev/null 2>&1 || true
    rm -rf "$work" "$state"
}
trap cleanup EXIT
bash tests/testnet/lan.sh up "$prefix" >/dev/null
ip netns exec "$prefix-lan" python3 tests/testnet/netprobe.py dns 10.77.0.1 600 &
servers+=($!)
chmod 755 "$work"
chmod 755 "$state"; mkdir -p "$state/ov" "$state/root-home" "$state/user-home"
# "jail on, brokered": the same launch from a home that holds gh's token,
# so the credential broker and its proxy on the jail's loopback start
# (decision 0016). A made-up token: nothing here talks to a forge.
for who in root user; do
    mkdir -p "$state/$who-home-b/.config/gh"
    printf 'github.com:\n    oauth_token: gho_%s\n    user: bench\n' "$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')" > "$state/$who-home-b/.config/gh/hosts.yml"
done
cp "$bin" "$work/claude-sandbox"
# The repository workspace: this project's history, an editor and a
# devcontainer folder, a nested repository (as bench/bench.sh makes it).
for who in root user; do
    git clone -q --no-hardlinks "$repo" "$work/repo-$who"
    mkdir -p "$work/repo-$who/.vscode" "$work/repo-$who/.devcontainer" "$work/repo-$who/vendor-lib"
    echo '{}' > "$work/repo-$who/.vscode/settings.json"
    git -C "$work/repo-$who/vendor-lib" init -q
done

cat > "$work/inner.sh" <<INNER
set -e
. $repo/bench/private-system.sh
private_system $state
rm -rf /usr/local/bin/claude /usr/libexec/claude-sandbox /etc/claude-sandbox.conf /etc/claude-gitconfig /etc/claude-code
mkdir -p /usr/libexec/claude-sandbox
install -m 0755 $work/claude-sandbox /usr/libexec/claude-sandbox/claude-sandbox
cp "$real" /usr/libexec/claude-sandbox/claude
ln -sfn /usr/libexec/claude-sandbox/claude-sandbox /usr/local/bin/claude
install -m 0644 $repo/etc/claude-gitconfig /etc/claude-gitconfig
# "jail off" turns the jail off from the environment: allowed only here.
printf 'allow-env-overrides\n%s\n' "$conf_extra" > /etc/claude-sandbox.conf
rm -f /etc/resolv.conf; echo 'nameserver 10.77.0.1' > /etc/resolv.conf
/usr/libexec/claude-sandbox/claude-sandbox install --repin >/dev/null 2>&1 || true
useradd -l -u 4243 -U -M -d $state/user-home -s /bin/sh csbbench
chown -R 4243:4243 $state/user-home $state/user-home-b $work/repo-user
# pasta as a non-root user needs /dev/net/tun: a private node (containers
# give it 0666), never the host's changed.
if [ -c /dev/net/tun ]; then mount -t tmpfs -o mode=755 tmpfs /dev/net && mknod -m 666 /dev/net/tun c 10 200; fi
as_root="env -i HOME=$state/root-home PATH=/usr/local/bin:/usr/bin:/bin USER=root"
as_user="setpriv --reuid=4243 --regid=4243 --init-groups env -i HOME=$state/user-home PATH=/usr/local/bin:/usr/bin:/bin USER=csbbench"
as_root_b="env -i HOME=$state/root-home-b PATH=/usr/local/bin:/usr/bin:/bin USER=root"
as_user_b="setpriv --reuid=4243 --regid=4243 --init-groups env -i HOME=$state/user-home-b PATH=/usr/local/bin:/usr/bin:/bin USER=csbbench"
cd $work/repo-root
\$as_root claude --version >/dev/null   # fails loudly here if the sandbox cannot be built
hyperfine -N --warmup 5 --runs $runs --export-json $work/root.json \\
    -n direct "\$as_root /usr/libexec/claude-sandbox/claude --version" \\
    -n "jail off" "\$as_root CLAUDE_SANDBOX_EGRESS_JAIL=0 /usr/local/bin/claude --version" \\
    -n "jail on" "\$as_root /usr/local/bin/claude --version" \\
    -n "jail on, brokered" "\$as_root_b /usr/local/bin/claude --version"
cd $work/repo-user
\$as_user claude --version >/dev/null
hyperfine -N --warmup 5 --runs $runs --export-json $work/user.json \\
    -n direct "\$as_user /usr/libexec/claude-sandbox/claude --version" \\
    -n "jail off" "\$as_user CLAUDE_SANDBOX_EGRESS_JAIL=0 /usr/local/bin/claude --version" \\
    -n "jail on" "\$as_user /usr/local/bin/claude --version" \\
    -n "jail on, brokered" "\$as_user_b /usr/local/bin/claude --version"
INNER
ip netns exec "$prefix-host" unshare --mount --propagation private bash "$work/inner.sh" >/dev/null

python3 - "$work/root.json" "$work/user.json" <<'PY'
import json, sys, os
print(f"{'':36}{'median':>10}{'mean':>10}{'± σ':>9}{'added (median)':>17}")
for who, f in (("root", sys.argv[1]), ("unprivileged", sys.argv[2])):
    r = {x["command"]: x for x in json.load(open(f))["results"]}
    d = r["direct"]["median"] * 1000
    for k in ("direct", "jail off", "jail on", "jail on, brokered"):
        x = r[k]
        added = "" if k == "direct" else f"{x['median'] * 1000 - d:13.1f} ms"
        print(f"{who + ', ' + k:36}{x['median'] * 1000:7.1f} ms{x['mean'] * 1000:7.1f} ms{x['stddev'] * 1000:6.1f} ms{added:>17}")
PY
