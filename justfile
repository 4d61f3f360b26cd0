# claude-sandbox tasks. `just --list` shows them.

# Build, then set up and install the sandbox on this machine (as root).
setup:
    bash scripts/setup.sh

# The whole test suite with its prerequisites and lints (what CI runs).
test:
    bash scripts/test.sh

# Static binaries (x86_64, aarch64) staged into the devcontainer feature,
# feature packaged.
feature:
    bash devcontainer-feature/build.sh

# The release rehearsal: what the release workflow does (both static
# binaries, devcontainer-feature/publish.sh) against a local OCI registry,
# then the published feature brought up from it with `devcontainer up` on
# Docker and rootless Podman (root and remote user, by :MAJOR, :VERSION and
# digest) and upgraded to the next version (as root; about 2.5 minutes
# once the build and the Debian base image are cached).
release-rehearsal:
    cargo test --test release -- --nocapture

# Wire the feature and slash commands into another workspace.
promote DIR:
    cargo run --quiet --release -- promote {{DIR}}

# Whole-process launch timings (hyperfine), the creation guard per created
# file and everyday workloads (untar, cp, git, npm ci, cargo build) on the
# host, under bare bubblewrap and through the shadow (~10 minutes).
bench:
    bash bench/bench.sh

# Lints CI enforces.
lint:
    cargo fmt --check
    cargo clippy --all-targets -- -D warnings -W unreachable_pub

# Property tests of the parsers (config, managed settings, promote's JSONC
# editor) for 10 minutes each, in parallel; CI runs them for 20 s.
fuzz SECS="600":
    CSB_FUZZ_SECS={{SECS}} cargo test --release --test fuzz -- --nocapture
