#!/usr/bin/env bash
# Set up and install claude-sandbox on this Debian/Ubuntu machine: build the
# binary, then `claude-sandbox install` (packages, the real Claude Code, the
# shadow at /usr/local/bin/claude, pin, config, guard hooks). Afterwards plain
# `claude` runs sandboxed. Also installs `just` (the justfile's runner) at a
# pinned version. Pass installer options through, e.g. --user NAME.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo_() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
# What building needs on a fresh Debian/Ubuntu: curl for rustup, a C linker.
need_pkgs=()
command -v curl >/dev/null 2>&1 || need_pkgs+=(curl ca-certificates)
command -v cc >/dev/null 2>&1 || need_pkgs+=(gcc libc6-dev)
if [ "${#need_pkgs[@]}" -gt 0 ]; then
    sudo_ apt-get update -qq
    sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
    curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
fi
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --locked

# `just`, the task runner of the justfile, at a pinned version: built from
# crates.io (Debian 12 has no `just` package, and Ubuntu's differ by release),
# skipped when that version is already on PATH or in ~/.cargo/bin.
JUST_VERSION=1.59.0
have_just=""
for j in just "$HOME/.cargo/bin/just"; do
    if command -v "$j" >/dev/null 2>&1 && [ "$("$j" --version 2>/dev/null)" = "just $JUST_VERSION" ]; then
        have_just="$j"
        break
    fi
done
if [ -z "$have_just" ]; then
    cargo install just --version "$JUST_VERSION" --locked
fi
user="${SUDO_USER:-$(id -un)}"
sudo_ ./target/release/claude-sandbox install --user "$user" "$@"
