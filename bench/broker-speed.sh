#!/usr/bin/env bash
# bench/broker-speed.sh [BINARY PROBE]: the credential broker's speed (issue
# #25 item 3), part of `just bench` (bench/bench.sh runs it last) and
# runnable alone. Three paths to the same HTTPS server on the site network's
# "internet" host (bench/tls-server.py, certificates of a CA made here):
#   direct  from the host's side, no sandbox, no proxy
#   tunnel  inside a session in allowlist mode without credentials: the
#           proxy's plain CONNECT tunnel, never decrypted
#   broker  inside a session holding a GitHub token (hosts.yml) and
#           ANTHROPIC_API_KEY: the broker terminates TLS, swaps, re-encrypts
# Measured, each path ROUNDS times (default 3; a round is one session):
#   stream  `curl` of an SSE-like answer from api.anthropic.com (the head at
#           once, then 5 events 20 ms apart): time to the first byte after
#           the request (curl's starttransfer − pretransfer), the whole
#           connection set-up (pretransfer) and how late the last event
#           arrives (total − starttransfer − 100 ms); 10 requests a round
#           after one warm-up, their median
#   clone   `git clone` over https of a 200 MB repository (dumb HTTP, one
#           pack of incompressible blobs) from github.com into a tmpfs,
#           2 clones a round after one warm-up
# Budgets: first byte through the broker within 5 ms of direct; the clone
# at least 1/1.5 of direct speed. Prints a summary; the raw numbers stay in
# WORK (removed at the end) unless CSB_BENCH_KEEP is set.
#
# Runs as root inside a private site network (tests/testnet/lan.sh) and a
# private mount namespace with overlays over /etc, /usr/libexec and
# /usr/local/bin: the machine is unchanged afterwards. The CA and server
# keys live in WORK only.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_as_root PATH "$@"
bin="${1:-}" probe="${2:-}"
if [ -z "$bin" ]; then
    cargo build --release --quiet
    cargo build --release --quiet --example probe
    bin=target/release/claude-sandbox probe=target/release/examples/probe
fi
for f in "$bin" "$probe"; do
    [ -x "$f" ] || { echo "broker-speed.sh: $f is not an executable" >&2; exit 1; }
done
rounds="${CSB_BROKER_ROUNDS:-3}"
bench_dirs brk csbk
cleanup() {
    bench_stop
    umount "$work/dst" 2>/dev/null || true
    [ -n "${CSB_BENCH_KEEP:-}" ] && echo "broker-speed.sh: kept $work and $state" >&2 || rm -rf "$work" "$state"
}
trap cleanup EXIT
mkdir -p "$state/ov" "$work/www" "$work/dst" "$state/home-tunnel" "$state/home-broker/.config/gh" "$work/out"
cp "$bin" "$work/claude-sandbox"
cp "$probe" "$work/probe"

# A CA and one server certificate for the names used (keys in STATE only).
(
    cd "$state"
    ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 1 -subj "/CN=csb bench CA" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign >/dev/null 2>&1
    openssl req "${ec[@]}" -keyout server.key -out server.csr -subj /CN=github.com >/dev/null 2>&1
    printf 'subjectAltName = DNS:github.com, DNS:api.github.com, DNS:api.anthropic.com\nextendedKeyUsage = serverAuth\n' > server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -set_serial 1 -days 1 -extfile server.ext -out server.pem >/dev/null 2>&1
)
# The repository: 20 blobs of 10 MB that do not compress, one pack.
git init -q -b main "$work/src"
for i in $(seq 1 20); do head -c 10000000 /dev/urandom > "$work/src/blob$i"; done
git -C "$work/src" add . && git -C "$work/src" -c user.name=b -c user.email=b@b.test commit -qm blobs
git clone -q --bare "$work/src" "$work/www/repo.git"
git -C "$work/www/repo.git" repack -q -a -d && git -C "$work/www/repo.git" update-server-info
rm -rf "$work/src"
pack=$(du -sm "$work/www/repo.git/objects/pack" | cut -f1)

bench_site_up
ip netns exec "$prefix-lan" python3 bench/tls-server.py 203.0.113.10 443 "$state/server.pem" "$state/server.key" "$work/www" 900 &
servers+=($!)
sleep 1

# The gh configuration of the brokered session (a made-up token), and the key.
tok="gho_$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')"
key="sk-ant-api03-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf 'github.com:\n    oauth_token: %s\n    user: bench\n    git_protocol: https\n' "$tok" > "$state/home-broker/.config/gh/hosts.yml"

# One round of measurements, as a script run directly or inside a session.
cat > "$work/measure.sh" <<'MEASURE'
# measure.sh: prints "stream SETUP FIRST LAG" lines and "clone TIME"
# lines (seconds).
s() { curl -sS -N -o /dev/null -H "x-api-key: ${ANTHROPIC_API_KEY:-none}" \
        -w '%{time_pretransfer} %{time_starttransfer} %{time_total}\n' https://api.anthropic.com/stream; }
s >/dev/null
for i in 1 2 3 4 5 6 7 8 9 10; do
    s | awk '{ printf "stream %.6f %.6f %.6f\n", $1, $2 - $1, $3 - $2 - 0.1 }'
done
for i in 0 1 2; do
    rm -rf clone
    t0=$(date +%s.%N)
    git clone -q https://github.com/repo.git clone
    t1=$(date +%s.%N)
    [ "$i" -eq 0 ] || awk -v a="$t0" -v b="$t1" 'BEGIN { printf "clone %.4f\n", b - a }'
done
rm -rf clone
MEASURE

cat > "$work/inner.sh" <<INNER
set -e
. $repo/bench/lib.sh
# The probe as the real binary: claude shell SCRIPT runs SCRIPT inside.
private_install $state $work/claude-sandbox $work/probe fresh
printf 'egress = allowlist\nallow-domain = github.com\nallow-domain = api.anthropic.com\npass-env = ANTHROPIC_API_KEY\nroot-view-max-entries = 10000000\n' > /etc/claude-sandbox.conf
# The names in /etc/hosts: no path pays for a DNS query (directly, curl
# and git resolve; through the proxy, the shadow does).
echo '203.0.113.10 github.com api.anthropic.com' >> /etc/hosts
# The bench CA is "public": in the system bundle, which the broker verifies against.
cat $state/ca.pem >> /etc/ssl/certs/ca-certificates.crt
/usr/libexec/claude-sandbox/claude-sandbox install --repin >/dev/null
# Every clone lands in the same tmpfs (the sessions' workspace).
mount -t tmpfs -o size=1g tmpfs $work/dst
cd $work/dst
export PATH=/usr/local/bin:/usr/bin:/bin GIT_CONFIG_NOSYSTEM=1
env -i PATH=\$PATH HOME=$state/home-tunnel USER=root claude shell "test -r $work/measure.sh" </dev/null 2>/dev/null || {
    echo "broker-speed.sh: a root session does not see $work (the root view masked it; doctor below says why)" >&2
    /usr/libexec/claude-sandbox/claude-sandbox doctor >&2 || true; exit 1; }
for r in \$(seq 1 $rounds); do
    env -i PATH=\$PATH HOME=$state/home-tunnel GIT_CONFIG_GLOBAL=/dev/null GIT_SSL_CAINFO=/etc/ssl/certs/ca-certificates.crt \\
        bash $work/measure.sh > $work/out/direct.\$r
    env -i PATH=\$PATH HOME=$state/home-tunnel USER=root claude shell "bash $work/measure.sh" </dev/null > $work/out/tunnel.\$r
    env -i PATH=\$PATH HOME=$state/home-broker USER=root ANTHROPIC_API_KEY=$key claude shell "bash $work/measure.sh" </dev/null > $work/out/broker.\$r
done
INNER
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
ip netns exec "$prefix-host" unshare --mount --propagation private bash "$work/inner.sh"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
# The broker really intercepted (its credential lines), the tunnel did not.
logs="$state/home-broker/.local/state/claude-sandbox/egress"
grep -qs '"event":"credential"' "$logs"/* || { echo "broker-speed.sh: the broker swapped nothing: not measured through it" >&2; exit 1; }
! grep -qs '"event":"credential"' "$state/home-tunnel/.local/state/claude-sandbox/egress"/* \
    || { echo "broker-speed.sh: the tunnel session was intercepted" >&2; exit 1; }

python3 - "$work/out" "$rounds" "$pack" "$load_before" "$load_after" <<'PY'
import os, statistics, sys
out, rounds, pack = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
med = statistics.median
res = {}
for path in ("direct", "tunnel", "broker"):
    st, cl = [], []
    for r in range(1, rounds + 1):
        rows = [l.split() for l in open(os.path.join(out, f"{path}.{r}"))]
        s = [tuple(map(float, x[1:])) for x in rows if x[0] == "stream"]
        st.append(tuple(med(v[i] for v in s) for i in range(3)))
        cl.extend(float(x[1]) for x in rows if x[0] == "clone")
    res[path] = (tuple(med(v[i] for v in st) * 1000 for i in range(3)), med(cl), st, cl)
print(f"credential broker (issue #25 item 3), {rounds} rounds, medians; load {sys.argv[4]} before, {sys.argv[5]} after; {os.cpu_count()} cores")
print(f"{'':8}{'set-up':>10}{'first byte':>12}{'last event late':>17}{'200 MB clone':>15}{'speed':>10}")
for path, ((setup, first, lag), clone, _, _) in res.items():
    print(f"{path:8}{setup:7.2f} ms{first:9.2f} ms{lag:14.2f} ms{clone:12.2f} s{pack / clone:6.0f} MB/s")
d, b, t = res["direct"], res["broker"], res["tunnel"]
ok = lambda good: "OK" if good else "OVER"
added = b[0][1] - d[0][1]
print(f"first byte after the request, broker − direct: {added:+.2f} ms (budget 5 ms: {ok(added <= 5)}); "
      f"with the connection's set-up: {b[0][0] + b[0][1] - d[0][0] - d[0][1]:+.2f} ms")
print(f"200 MB clone: broker at 1/{b[1] / d[1]:.2f} of direct speed (budget 1/1.5: {ok(b[1] <= 1.5 * d[1])}), "
      f"tunnel at 1/{t[1] / d[1]:.2f}")
for path, (_, _, st, cl) in res.items():
    print(f"  {path}: first byte per round " + ", ".join(f"{x[1] * 1000:.2f}" for x in st)
          + " ms; clones " + ", ".join(f"{x:.2f}" for x in cl) + " s")
PY
