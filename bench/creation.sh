#!/usr/bin/env bash
# Part of `just bench` (run by bench/bench.sh inside its private namespaces,
# after egress-throughput.sh installed the probe as the real binary): what
# the creation guard (decision 0009) costs a workload that creates files.
# 5000 files made with `: > f` (open with O_CREAT, close) and 1000
# directories, in the workspace, timed from inside the shell that makes
# them, on the host and inside the sandbox (every creation goes through the
# guard's supervisor); three runs each. WORK/creation gets the medians in
# µs per creation: host-file sandbox-file host-dir sandbox-dir.
set -euo pipefail
work=$1
script='d=$(mktemp -d ./csb-bench.XXXXXX)
s=$(date +%s%N); i=0; while [ $i -lt 5000 ]; do : > $d/f$i; i=$((i+1)); done; e=$(date +%s%N)
echo "file $(( (e - s) / 5000 ))"
s=$(date +%s%N); i=0; while [ $i -lt 1000 ]; do mkdir $d/d$i; i=$((i+1)); done; e=$(date +%s%N)
echo "dir $(( (e - s) / 1000 ))"
rm -rf $d'
for run in 1 2 3; do
    sh -c "$script" | sed 's/^/host /'
    CLAUDE_SANDBOX_EGRESS_JAIL=0 /usr/local/bin/claude shell "$script" | sed 's/^/sandbox /'
done > "$work/creation-raw"
python3 - "$work/creation-raw" > "$work/creation" <<'PY'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    where, kind, ns = line.split()
    v.setdefault((where, kind), []).append(int(ns) / 1000)
print(" ".join(f"{statistics.median(v[(w, k)]):.1f}" for k in ("file", "dir") for w in ("host", "sandbox")))
PY
