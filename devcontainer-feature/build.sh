#!/usr/bin/env bash
# just feature: build the static claude-sandbox, stage it into the feature,
# and package the feature with the official devcontainer CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
feature=devcontainer-feature/src/claude-sandbox
arch=$(uname -m)
case "$arch" in x86_64) triple=x86_64-unknown-linux-gnu ;; aarch64) triple=aarch64-unknown-linux-gnu ;; *) echo "unsupported $arch" >&2; exit 1 ;; esac
# glibc, statically linked (static-pie): runs on any Linux of this
# architecture; user lookups read /etc/passwd through glibc's built-in files NSS.
RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --locked --target "$triple"
install -m 0755 "target/$triple/release/claude-sandbox" "$feature/claude-sandbox-$arch"
file "$feature/claude-sandbox-$arch"
cli="${DEVCONTAINER_CLI:-}"
if [ -z "$cli" ]; then
    cli=/opt/csb-devcontainer-cli/node_modules/.bin/devcontainer
    [ -x "$cli" ] || npm install --prefix /opt/csb-devcontainer-cli --no-audit --no-fund --loglevel=error @devcontainers/cli
fi
rm -rf target/feature-package
"$cli" features package devcontainer-feature/src --output-folder target/feature-package --force-clean-output-folder
ls -la target/feature-package
