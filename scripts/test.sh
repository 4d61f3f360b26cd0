#!/usr/bin/env bash
# The whole test suite, on a fresh Debian/Ubuntu machine or in CI.
# Installs what the tests need (Debian packages, Rust if missing, the real
# Claude Code from the npm registry), then runs lints and `cargo test`.
# End-to-end tests need root: they build private mount and network namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    exec sudo --preserve-env=CI,PATH,CARGO_HOME,RUSTUP_HOME bash "$0" "$@"
fi

CLAUDE_CODE_VERSION="$(cat etc/claude-code-version)"
CLAUDE_CACHE=/opt/csb-claude

step() { printf '\n==> %s\n' "$*"; }

step "Debian packages"
need_pkgs=()
# package:command pairs; a command already present (from any source) is enough.
for pc in bubblewrap:bwrap passt:pasta iproute2:ip git:git util-linux:unshare debootstrap:debootstrap docker.io:dockerd \
          file:file hyperfine:hyperfine npm:npm python3:python3 curl:curl zsh:zsh gcc:cc openssl:openssl \
          gcc-aarch64-linux-gnu:aarch64-linux-gnu-gcc qemu-user-static:qemu-aarch64-static \
          podman:podman uidmap:newuidmap slirp4netns:slirp4netns gh:gh docker-registry:docker-registry; do
    command -v "${pc#*:}" >/dev/null 2>&1 || need_pkgs+=("${pc%%:*}")
done
# tests/release.rs (the release rehearsal) publishes the feature to a local
# OCI registry, Debian's docker-registry (the CNCF distribution registry),
# which it starts in its engines' network namespaces and stops itself.
# tests/broker_accept.rs runs Debian's gh (`gh api user`, and as git's
# credential helper) through the credential broker.
# tests/podman.rs runs Debian's podman rootless: newuidmap/newgidmap (uidmap)
# map its user's subordinate ids, slirp4netns is its network; the storage
# uses the kernel's own overlayfs, so no fuse-overlayfs.
# The feature ships an aarch64 binary too (tests/feature.rs): cross-linked
# statically, so it needs arm64's libc.a (a dependency of the cross gcc,
# checked in case only the compiler came from elsewhere), and run under qemu.
[ -f /usr/aarch64-linux-gnu/lib/libc.a ] || need_pkgs+=(libc6-dev-arm64-cross)
# debootstrap of Debian bookworm (tests/feature.rs) checks signatures with it
# (preinstalled on Debian, not on Ubuntu).
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || need_pkgs+=(debian-archive-keyring)
# tests/casefold.rs mounts a case-insensitive FUSE passthrough
# (tests/fixtures/casefold_fs.py), with Debian's fusepy and fusermount.
[ -f /usr/lib/python3/dist-packages/fusepy.py ] || need_pkgs+=(python3-fusepy)
command -v fusermount >/dev/null 2>&1 || need_pkgs+=(fuse3)
if [ "${#need_pkgs[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # No package's service starts (docker.io's dockerd, docker-registry's
    # registry on :5000): the tests start their own, in namespaces of their
    # own, and stop them. invoke-rc.d and deb-systemd-invoke ask policy-rc.d.
    policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        policy=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 0755 "$policy"
    fi
    apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
    [ -z "$policy" ] || rm -f "$policy"
fi

step "Rust toolchain"
if ! command -v cargo >/dev/null 2>&1; then
    [ -x "$HOME/.cargo/bin/cargo" ] || curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c clippy,rustfmt
    export PATH="$HOME/.cargo/bin:$PATH"
fi
# The lints need clippy and rustfmt, which a minimal rustup profile (as
# scripts/setup.sh installs) lacks.
if command -v rustup >/dev/null 2>&1; then
    rustup component add clippy rustfmt >/dev/null 2>&1 || true
fi
# The aarch64 standard library for the cross-built feature binary.
if command -v rustup >/dev/null 2>&1 \
    && ! rustup target list --installed | grep -x aarch64-unknown-linux-gnu >/dev/null; then
    rustup target add aarch64-unknown-linux-gnu
fi
cargo --version

step "Real Claude Code $CLAUDE_CODE_VERSION (npm registry) for the end-to-end tests"
real="$CLAUDE_CACHE/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
# (No pipeline here: under pipefail a missing cache would end the script silently.)
have=""
pkg="$CLAUDE_CACHE/node_modules/@anthropic-ai/claude-code/package.json"
[ -f "$pkg" ] && have="$(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$pkg" | head -1)"
if [ ! -x "$real" ] || [ "$have" != "$CLAUDE_CODE_VERSION" ]; then
    mkdir -p "$CLAUDE_CACHE"
    npm install --prefix "$CLAUDE_CACHE" --no-audit --no-fund --loglevel=error "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION"
fi
"$real" --version
export CSB_REAL_CLAUDE="$real"

# Every step runs, whatever failed before it, and the run ends with one
# summary naming each failure: a lint error, a failing test (with its
# target) or a target that ended without its results (a crash, a signal).
failed=()
step "Lints"
cargo fmt --check || failed+=("lint: cargo fmt --check (run \`cargo fmt\`)")
cargo clippy --all-targets -- -D warnings -W unreachable_pub || failed+=("lint: cargo clippy (see above)")

step "Tests"
# --no-fail-fast: a failing target never keeps the later ones from running.
# Extra arguments go to cargo test, e.g. `bash scripts/test.sh --test planted`.
log="$(mktemp "${TMPDIR:-/tmp}/csb-test-log.XXXXXX")"
trap 'rm -f "$log"' EXIT
set +e
cargo test --all-targets --no-fail-fast "$@" 2>&1 | tee "$log"
test_rc=${PIPESTATUS[0]}
set -e
# One line per failed test ("target: test"), per target that failed with
# no failed test of its own, then the totals of every target.
mapfile -t test_failures < <(awk '
    /^ *Running / { t = $2; if ($1 == "Running" && t == "unittests") t = $3; next }
    /^test .* \.\.\. FAILED$/ { print t ": " $2; seen[t] = 1; next }
    /^error: test failed, to rerun pass `/ { sub(/.*pass `/, ""); sub(/`$/, ""); ended[$0] = t }
    /^test result: / {
        for (i = 1; i <= NF; i++) {
            if ($(i) ~ /^passed;?$/) passed += $(i - 1)
            if ($(i) ~ /^failed;?$/) nfailed += $(i - 1)
        }
    }
    END {
        for (a in ended) if (!(ended[a] in seen)) print ended[a] ": the target failed without a failing test (crashed or killed: see its output; rerun with " a ")"
        printf "TOTALS %d %d\n", passed, nfailed
    }' "$log")
totals="${test_failures[-1]}"
unset 'test_failures[-1]'
failed+=("${test_failures[@]}")
if [ "$test_rc" -ne 0 ] && [ "${#test_failures[@]}" -eq 0 ]; then
    failed+=("cargo test exited $test_rc without a failing test (see above)")
fi

step "Summary"
read -r _ passed nfailed <<<"$totals"
if [ "${#failed[@]}" -eq 0 ]; then
    echo "every lint and test target passed"
else
    echo "${#failed[@]} failure(s):"
    printf '  FAILED %s\n' "${failed[@]}"
fi
echo "$passed passed, $nfailed failed"
[ "${#failed[@]}" -eq 0 ]
