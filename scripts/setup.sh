#!/usr/bin/env bash
# Set up and install claude-sandbox on this Debian/Ubuntu machine: build the
# binary, then `claude-sandbox install` (packages, the real Claude Code, the
# shadow at /usr/local/bin/claude, pin, config, guard hooks). Afterwards plain
# `claude` runs sandboxed. Pass installer options through, e.g. --user NAME.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
    curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
fi
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --locked
sudo_() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
user="${SUDO_USER:-$(id -un)}"
sudo_ ./target/release/claude-sandbox install --user "$user" "$@"
