#!/bin/bash
# Feature test (devcontainer features test convention): run inside a
# container built with the feature; checks what a user would notice.
set -e
fail=0
check() { if eval "$2"; then echo "PASS: $1"; else echo "FAIL: $1"; fail=1; fi; }

check "claude resolves to the shadow" '[ "$(command -v claude)" = /usr/local/bin/claude ]'
check "the shadow is claude-sandbox" '[ "$(readlink -f /usr/local/bin/claude)" = /usr/libexec/claude-sandbox/claude-sandbox ]'
check "the real binary is off PATH" '! type -ap claude | grep -qv "^/usr/local/bin/claude$"'
check "no ~/.local/bin/claude" '[ ! -e "$HOME/.local/bin/claude" ]'
check "the real binary is pinned" '[ -s /usr/libexec/claude-sandbox/claude.pin ]'
check "config installed" '[ -f /etc/claude-sandbox.conf ]'
check "config matches the options" '[ -z "${EXPECT_CONF:-}" ] || diff <(grep -v "^#" /etc/claude-sandbox.conf) <(printf "%b" "$EXPECT_CONF")'
check "guard hooks in managed settings" 'grep -q "hook prompt-gate" /etc/claude-code/managed-settings.json'
check "doctor is happy" '/usr/libexec/claude-sandbox/claude-sandbox doctor'
check "claude --version through the shadow" 'claude --version | grep -q "(Claude Code)"'
exit $fail
