//! Deliberate regressions for the test suite, compiled only with the cargo
//! feature `test-mutations` (issue #11).
//!
//! Issue #5 proves each `verify` check catches its regression by launching a
//! sandbox with one defence removed. The suite builds a second binary with
//! the feature for those tests; `CLAUDE_SANDBOX_TEST_MUTATION` (a comma list
//! of names) selects the regressions in it. Without the feature — every
//! release and debug build anyone installs — [`active`] is constant `false`,
//! the variable is never read and no mutation name is in the binary (a test
//! greps the release build), and `install` refuses a binary built with it.

/// One deliberate regression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// `~/.ssh` bound back into the sandbox.
    BindSsh,
    /// `GH_TOKEN` passed through.
    PassGhToken,
    /// `/tmp` not a fresh tmpfs.
    TmpNotTmpfs,
    /// Capabilities kept.
    KeepCaps,
    /// The jail without its 172.16/12 blackhole.
    JailNo172,
    /// Launch despite a pin mismatch.
    SkipPinCheck,
    /// pasta given an option it refuses.
    PastaAttachFails,
    /// A route the route step refuses.
    RouteStepFails,
}

/// Whether this binary was built with the test mutations (install refuses it).
pub const BUILT_WITH_MUTATIONS: bool = cfg!(feature = "test-mutations");

/// Whether the regression is requested (builds with `test-mutations` only).
#[cfg(feature = "test-mutations")]
pub fn active(m: Mutation) -> bool {
    let name = match m {
        Mutation::BindSsh => "bind-ssh",
        Mutation::PassGhToken => "pass-gh-token",
        Mutation::TmpNotTmpfs => "tmp-not-tmpfs",
        Mutation::KeepCaps => "keep-caps",
        Mutation::JailNo172 => "jail-no-172",
        Mutation::SkipPinCheck => "skip-pin-check",
        Mutation::PastaAttachFails => "pasta-attach-fails",
        Mutation::RouteStepFails => "route-step-fails",
    };
    std::env::var("CLAUDE_SANDBOX_TEST_MUTATION")
        .map(|v| v.split(',').any(|m| m.trim() == name))
        .unwrap_or(false)
}

/// Whether the regression is requested: never, without `test-mutations`.
#[cfg(not(feature = "test-mutations"))]
#[inline(always)]
pub fn active(_: Mutation) -> bool {
    false
}
