#!/usr/bin/env bash
# Part of `just bench` (bench/bench.sh runs it inside its private mount and
# network namespaces, with the product installed): a 200 MB download from
# the site network's "internet" host (bench/blob-server.py, name big.test
# served by the test resolver) through the open jail (pasta) and through
# allowlist mode's proxy, five times each, same run. WORK/tp-open and
# WORK/tp-allowlist get curl's total time per download, in seconds.
set -euo pipefail
work=$1 probe=$2
# The probe as the real binary: `claude shell SCRIPT` runs SCRIPT inside.
install -m 0755 "$probe" /usr/libexec/claude-sandbox/claude
/usr/libexec/claude-sandbox/claude-sandbox install --repin >/dev/null 2>&1
printf 'allow-env-overrides\nallow-domain = big.test\n' > /etc/claude-sandbox.conf
script='curl -sS -o /dev/null -w "%{time_total}\n" http://big.test/blob >/dev/null; for i in 1 2 3 4 5; do curl -sS -o /dev/null -w "%{time_total}\n" http://big.test/blob; done'
# The first download of each warms up (not counted).
CLAUDE_SANDBOX_EGRESS=open /usr/local/bin/claude shell "$script" > "$work/tp-open"
CLAUDE_SANDBOX_EGRESS=allowlist /usr/local/bin/claude shell "$script" > "$work/tp-allowlist"
