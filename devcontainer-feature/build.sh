#!/usr/bin/env bash
# just feature: build the static claude-sandbox for x86_64 and aarch64, stage
# both into the feature (install.sh picks the machine's), and package the
# feature with the official devcontainer CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
feature=devcontainer-feature/src/claude-sandbox
arches=(x86_64 aarch64)
host=$(uname -m)
case "$host" in x86_64|aarch64) ;; *) echo "unsupported build machine $host" >&2; exit 1 ;; esac
# The other architecture is cross-compiled with Debian's cross gcc as the
# linker: it brings that architecture's static glibc (libc.a, crt files),
# which a static glibc binary needs whatever links it.
declare -A cross_gcc=([x86_64]=x86_64-linux-gnu-gcc [aarch64]=aarch64-linux-gnu-gcc)
declare -A cross_pkg=([x86_64]=gcc-x86-64-linux-gnu [aarch64]=gcc-aarch64-linux-gnu)
targets=()
for arch in "${arches[@]}"; do
    triple="$arch-unknown-linux-gnu"
    targets+=(--target "$triple")
    if command -v rustup >/dev/null 2>&1 && ! rustup target list --installed | grep -x "$triple" >/dev/null; then
        rustup target add "$triple"
    fi
    [ "$arch" = "$host" ] && continue
    var="CARGO_TARGET_$(echo "$triple" | tr 'a-z-' 'A-Z_')_LINKER"
    if [ -z "${!var:-}" ]; then
        command -v "${cross_gcc[$arch]}" >/dev/null 2>&1 || {
            echo "${cross_gcc[$arch]} missing: the $arch build links with it (apt-get install ${cross_pkg[$arch]}), or set $var" >&2
            exit 1
        }
        export "$var=${cross_gcc[$arch]}"
    fi
done
# glibc, statically linked: runs on any Linux of its architecture; user
# lookups read /etc/passwd through glibc's built-in files NSS.
RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --locked "${targets[@]}"
for arch in "${arches[@]}"; do
    install -m 0755 "target/$arch-unknown-linux-gnu/release/claude-sandbox" "$feature/claude-sandbox-$arch"
    file "$feature/claude-sandbox-$arch"
done
# shellcheck source=devcontainer-feature/cli.sh
. devcontainer-feature/cli.sh
rm -rf target/feature-package
"$cli" features package devcontainer-feature/src --output-folder target/feature-package --force-clean-output-folder
ls -la target/feature-package
