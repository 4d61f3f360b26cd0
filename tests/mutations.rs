//! The deliberate regressions of src/testhooks.rs exist only in a build with
//! the test-only feature `test-mutations` (issue #11): not in the suite's own
//! debug build, not in a release build, and `install` refuses a binary that
//! has them.

mod common;
use common::*;

use std::path::Path;
use std::process::{Command, Stdio};

/// Every string that would let a caller reach a mutation.
const NAMES: &[&str] = &[
    "CLAUDE_SANDBOX_TEST_MUTATION",
    "bind-ssh",
    "pass-gh-token",
    "tmp-not-tmpfs",
    "keep-caps",
    "jail-no-172",
    "skip-pin-check",
    "pasta-attach-fails",
    "tap-fails",
    "jail-multicast",
    "pre-mask-fails",
    "root-mask-vanishes",
    "csb-vanished-root-mask",
    "route-step-fails",
    "drop-mount=",
    "unprotect",
    "unguarded",
    "no-git-rule",
    "no-casefold",
    "host-state",
    "allow-userns",
    "seccomp-minimal",
    "pid1-open",
    "accept-env-overrides",
    "forwarder-all-ports",
    "CLAUDE_SANDBOX_TEST_TRIPWIRE_BUDGET_MS",
    "no-pids-limit",
    "tmpfs-unsized",
    "no-private-bound",
    "broker-real-file",
];

fn holds(bin: &Path, needle: &str) -> bool {
    let bytes = std::fs::read(bin).unwrap();
    bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn builds_without_the_feature_carry_no_mutation_code() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let st = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "--quiet",
            "--bin",
            "claude-sandbox",
            "--manifest-path",
        ])
        .arg(manifest.join("Cargo.toml"))
        .status()
        .unwrap();
    assert!(st.success(), "cargo build --release failed");
    let release = manifest.join("target/release/claude-sandbox");
    // Control: the grep finds them where they are.
    let mutated = mutation_binary();
    for n in NAMES {
        assert!(
            holds(&mutated, n),
            "control: {n:?} not found in {}",
            mutated.display()
        );
    }
    for bin in [release, our_binary()] {
        for n in NAMES {
            assert!(!holds(&bin, n), "{}: holds {n:?}", bin.display());
        }
    }
}

#[test]
fn install_refuses_a_binary_built_with_mutations() {
    if !require("install_mutations") {
        return;
    }
    let root = TestDir::new("mut", "stage");
    let o = Command::new(mutation_binary())
        .args(["install", "--prefix"])
        .arg(&*root)
        .args(["--no-packages", "--real-claude"])
        .arg(probe_binary())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("test-mutations") && err.contains("scripts/setup.sh"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(&*root).unwrap().count(),
        0,
        "something was installed"
    );
}
