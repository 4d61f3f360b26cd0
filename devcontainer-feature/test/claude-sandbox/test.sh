#!/bin/bash
# Feature test (devcontainer features test convention): run inside a
# container built with the feature, as the remote user; checks what a user
# would notice. EXPECT_CONF, when set, is the expected /etc/claude-sandbox.conf
# without comments (printf %b escapes, e.g. "no-forge\nallow-ip = 10.0.0.5\n").
set -e
fail=0
check() { if eval "$2"; then echo "PASS: $1"; else echo "FAIL: $1"; fail=1; fi; }

# `claude` refuses $HOME or / as its workspace: run it from a project directory.
ws="$PWD"
case "$ws" in "$HOME" | /) ws=$(mktemp -d "$HOME/csb-feature-test.XXXXXX"); trap 'rm -rf "$ws"' EXIT ;; esac

check "claude resolves to the shadow" '[ "$(command -v claude)" = /usr/local/bin/claude ]'
check "a login shell resolves claude to the shadow" '[ "$(bash -lc "command -v claude")" = /usr/local/bin/claude ]'
check "the shadow is claude-sandbox" '[ "$(readlink -f /usr/local/bin/claude)" = /usr/libexec/claude-sandbox/claude-sandbox ]'
check "the real binary is off PATH" '! type -ap claude | grep -qv "^/usr/local/bin/claude$"'
check "no ~/.local/bin/claude" '[ ! -e "$HOME/.local/bin/claude" ] && [ ! -L "$HOME/.local/bin/claude" ]'
check "the real binary is pinned" '[ -s /usr/libexec/claude-sandbox/claude.pin ]'
check "config installed" '[ -f /etc/claude-sandbox.conf ]'
check "config matches the options" '[ -z "${EXPECT_CONF:-}" ] || diff <(grep -v "^#" /etc/claude-sandbox.conf) <(printf "%b" "$EXPECT_CONF")'
check "guard hooks in managed settings" 'grep -q "hook prompt-gate" /etc/claude-code/managed-settings.json'
check "the battery is off PATH (only its absolute path runs it)" '! command -v claude-sandbox >/dev/null'
check "the VS Code extension's wrapper is in place" '[ -x /usr/libexec/claude-sandbox/vscode-wrapper ]'
check "host git ignores discovered bare repositories" '[ "$(git config --get safe.bareRepository)" = explicit ]'
check "doctor is happy" '/usr/libexec/claude-sandbox/claude-sandbox doctor'
check "claude --version through the shadow" '(cd "$ws" && claude --version) | grep -q "(Claude Code)"'
exit $fail
