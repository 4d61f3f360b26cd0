#!/usr/bin/env bash
# bench/launch.sh [BINARY]: the launch latency of `claude --version` through
# the shadow, as root and as an unprivileged user, jail off, jail on and jail
# on with a brokered credential (decision 0016), from
# a repository workspace (issue #23 item 3), with hyperfine. Smaller than
# `just bench`: for measuring one change to the launch path before and after.
# BINARY defaults to target/release/claude-sandbox (built if missing).
# CSB_LAUNCH_CONF: extra lines for /etc/claude-sandbox.conf (e.g.
# "root-view-max-entries = 0"); CSB_LAUNCH_RUNS: hyperfine runs (40);
# CSB_LAUNCH_OPT="DIRS FILES": a private /opt of DIRS directories of FILES
# files each for root's launches to walk (bench_opt_tree, issue #48).
#
# Like bench/bench.sh it runs as root inside a private site network
# (tests/testnet/lan.sh) and a private mount namespace with overlays over
# /etc, /usr/libexec and /usr/local/bin: the machine is unchanged afterwards.
# The unprivileged user exists only in the overlay's /etc/passwd.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_as_root PATH,CSB_REAL_CLAUDE "$@"
bench_needs_launch launch.sh
bin="${1:-}"
if [ -z "$bin" ]; then
    cargo build --release --quiet
    bin=target/release/claude-sandbox
fi
[ -x "$bin" ] || { echo "launch.sh: $bin is not an executable" >&2; exit 1; }
runs="${CSB_LAUNCH_RUNS:-40}"
conf_extra="${CSB_LAUNCH_CONF:-}"
opt_tree="${CSB_LAUNCH_OPT:-}"
bench_dirs launch csbl
bench_site_up
mkdir -p "$state/ov" "$state/root-home" "$state/user-home"
# "jail on, brokered": the same launch from a home that holds gh's token,
# so the credential broker and its proxy on the jail's loopback start
# (decision 0016). A made-up token: nothing here talks to a forge.
for who in root user; do
    mkdir -p "$state/$who-home-b/.config/gh"
    printf 'github.com:\n    oauth_token: gho_%s\n    user: bench\n' "$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')" > "$state/$who-home-b/.config/gh/hosts.yml"
done
cp "$bin" "$work/claude-sandbox"
for who in root user; do
    bench_repo_workspace "$work/repo-$who"
done

cat > "$work/inner.sh" <<INNER
set -e
. $repo/bench/lib.sh
private_install $state $work/claude-sandbox "$real" fresh
# "jail off" turns the jail off from the environment: allowed only here.
printf 'allow-env-overrides\n%s\n' "$conf_extra" > /etc/claude-sandbox.conf
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
if [ -n "$opt_tree" ]; then bench_opt_tree $opt_tree > $work/opt-entries; fi
cd $work/repo-root
\$as_root claude --version >/dev/null   # fails loudly here if the sandbox cannot be built
hyperfine -N --warmup 5 --runs $runs --export-json $state/root.json \\
    -n direct "\$as_root /usr/libexec/claude-sandbox/claude --version" \\
    -n "jail off" "\$as_root CLAUDE_SANDBOX_EGRESS_JAIL=0 /usr/local/bin/claude --version" \\
    -n "jail on" "\$as_root /usr/local/bin/claude --version" \\
    -n "jail on, brokered" "\$as_root_b /usr/local/bin/claude --version"
cd $work/repo-user
\$as_user claude --version >/dev/null
hyperfine -N --warmup 5 --runs $runs --export-json $state/user.json \\
    -n direct "\$as_user /usr/libexec/claude-sandbox/claude --version" \\
    -n "jail off" "\$as_user CLAUDE_SANDBOX_EGRESS_JAIL=0 /usr/local/bin/claude --version" \\
    -n "jail on" "\$as_user /usr/local/bin/claude --version" \\
    -n "jail on, brokered" "\$as_user_b /usr/local/bin/claude --version"
INNER
ip netns exec "$prefix-host" unshare --mount --propagation private bash "$work/inner.sh" >/dev/null

[ -s "$work/opt-entries" ] && echo "/opt: $(cat "$work/opt-entries") entries ($opt_tree: directories, files in each)"
python3 - "$state/root.json" "$state/user.json" <<'PY'
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
