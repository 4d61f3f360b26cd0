#!/usr/bin/env bash
# Part of `just bench` (bench/bench.sh runs it inside its private mount and
# network namespaces, with the product installed): WORK/leftovers gets the
# number of processes still running 1 s after 50 launches at once ended;
# WORK/rss the peak RSS (KiB) of the shadow and of pasta during a session.
set -euo pipefail
work=$1
/usr/libexec/claude-sandbox/claude-sandbox install --repin >/dev/null 2>&1

# Leftovers: the 50 launches run in a cgroup of their own, so whatever is
# still in it afterwards is theirs, whatever it is called.
# `ip netns exec` mounts a fresh /sys without cgroups: mount the v2
# hierarchy privately (this runs in bench.sh's own mount namespace).
root="$work/cgroup2"
mkdir -p "$root"
mount -t cgroup2 none "$root"
cg="$root/csb-bench-$$"
mkdir "$cg"
bash -c 'echo $$ > "$1/cgroup.procs"; for i in $(seq 50); do /usr/local/bin/claude --version >/dev/null & done; wait' _ "$cg"
sleep 1
wc -l < "$cg/cgroup.procs" > "$work/leftovers"
rmdir "$cg" 2>/dev/null || true
umount "$root"

# Peak memory: a 1-second session (a stand-in real binary, pinned), sampled
# just before it ends.
printf '#!/bin/sh\nexec sleep 1\n' > /usr/libexec/claude-sandbox/claude
chmod 755 /usr/libexec/claude-sandbox/claude
/usr/libexec/claude-sandbox/claude-sandbox install --repin >/dev/null 2>&1
/usr/local/bin/claude -p x &
shadow=$!
sleep 0.8
hwm() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }
keeper=""
for c in $(cat /proc/$shadow/task/*/children); do
    [ "$(cat /proc/$c/comm)" = claude-sandbox ] && keeper=$c
done
pasta=$(awk '{print $1}' "/proc/$keeper/task/$keeper/children")
echo "$(hwm $shadow) $(hwm "$pasta") $(cat /proc/$pasta/comm)" > "$work/rss"
wait $shadow
