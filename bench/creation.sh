#!/usr/bin/env bash
# Part of `just bench` (run by bench/bench.sh inside its private namespaces,
# after egress-throughput.sh installed the probe as the real binary): what
# the creation guard (decision 0009) costs a workload that creates files.
# 5000 files made with `: > f` (open with O_CREAT, close) and 1000
# directories, timed from inside the shell that makes them, on the host and
# inside the sandbox (every creation goes through the guard's supervisor),
# three runs each, in two places: the workspace's file system (the disk)
# and a tmpfs (the host's: one mounted in this private mount namespace; the
# sandbox's: its own /tmp), where the file system's own cost is small and
# the guard's round trip shows alone. WORK/creation gets the medians in µs
# per creation: host-file sandbox-file host-dir sandbox-dir, for the disk
# and then for the tmpfs.
set -euo pipefail
work=$1
script='d=$(mktemp -d "$1/csb-bench.XXXXXX")
s=$(date +%s%N); i=0; while [ $i -lt 5000 ]; do : > $d/f$i; i=$((i+1)); done; e=$(date +%s%N)
echo "file $(( (e - s) / 5000 ))"
s=$(date +%s%N); i=0; while [ $i -lt 1000 ]; do mkdir $d/d$i; i=$((i+1)); done; e=$(date +%s%N)
echo "dir $(( (e - s) / 1000 ))"
rm -rf $d'
host_tmpfs=$(mktemp -d /var/tmp/csb-bench-tmpfs.XXXXXX)
mount -t tmpfs tmpfs "$host_tmpfs"
for run in 1 2 3; do
    sh -c "$script" sh . | sed 's/^/disk host /'
    CLAUDE_SANDBOX_EGRESS_JAIL=0 /usr/local/bin/claude shell "set -- .; $script" | sed 's/^/disk sandbox /'
    sh -c "$script" sh "$host_tmpfs" | sed 's/^/tmpfs host /'
    CLAUDE_SANDBOX_EGRESS_JAIL=0 /usr/local/bin/claude shell "set -- /tmp; $script" | sed 's/^/tmpfs sandbox /'
done > "$work/creation-raw"
umount "$host_tmpfs" && rmdir "$host_tmpfs"
python3 - "$work/creation-raw" > "$work/creation" <<'PY'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    fs, where, kind, ns = line.split()
    v.setdefault((fs, where, kind), []).append(int(ns) / 1000)
print(" ".join(f"{statistics.median(v[(f, w, k)]):.1f}" for f in ("disk", "tmpfs") for k in ("file", "dir") for w in ("host", "sandbox")))
PY

# Issue #23 item 1's measure: the latency of one open(O_CREAT) seen from
# inside the process making it (bench/creat-lat.c), one process making 5000
# files and four making 5000 each at once, on the host, under bare
# bubblewrap (`bwrap --dev-bind / / --unshare-pid --unshare-user`) and
# through the shadow (jail on: the default), all in the same tmpfs (the
# shadow's workspace), three runs each; then one process again by relative
# paths (`r/p0/fN` from the workspace, as tar, cp and git name what they
# create; PROCS `rel`), and one process that works between its creations
# as git or tar do (PROCS `work`: 512 pages of a 64 MB heap touched before
# each creation, ~7 µs under bare bubblewrap; the whole round timed, see
# bench/creat-lat.c). WORK/creation-lat gets lines
# "PROCS ENV MEDIAN-NS P99-NS MEAN-NS".
cc -O2 -o "$work/creat-lat" "$(dirname "$0")/creat-lat.c"
lat_tmpfs=$(mktemp -d /var/tmp/csb-bench-lat.XXXXXX)
mount -t tmpfs -o mode=0755 tmpfs "$lat_tmpfs"
trap 'cd /; umount "$lat_tmpfs" 2>/dev/null; rmdir "$lat_tmpfs"' EXIT
mkdir "$lat_tmpfs/ws" && cd "$lat_tmpfs/ws"
for run in 1 2 3; do
    for procs in 1 4 rel work; do
        d=$lat_tmpfs/ws/r
        lat="mkdir $d && $work/creat-lat $d $procs 5000 && rm -rf $d"
        [ $procs = rel ] && lat="mkdir r && $work/creat-lat r 1 5000 && rm -rf r"
        [ $procs = work ] && lat="mkdir $d && $work/creat-lat $d 1 5000 512 && rm -rf $d"
        sh -c "$lat" | sed "s/^/$procs host /"
        bwrap --dev-bind / / --unshare-pid --unshare-user sh -c "$lat" | sed "s/^/$procs bwrap /"
        CLAUDE_SANDBOX_EGRESS=open /usr/local/bin/claude shell "$lat" | sed "s/^/$procs shadow /"
    done
done > "$work/creation-lat"
cd /

# The floor under those numbers (bench/notif-floor.c): a round trip through
# a supervisor that does no work, answered with NOTIF_SEND and with
# NOTIF_ADDFD, and ADDFD with a SCHED_IDLE spinner (what the guard had until
# issue #23's 2026-11-26 11:00–12:15 entry in docs/benchmarks-history.md); three runs each.
# WORK/notif-floor gets lines "MODE MEDIAN-NS P99-NS".
cc -O2 -o "$work/notif-floor.bin" "$(dirname "$0")/notif-floor.c" -lpthread
for run in 1 2 3; do
    for mode in send addfd warm; do "$work/notif-floor.bin" $mode; done
done > "$work/notif-floor"
