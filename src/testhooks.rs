//! Deliberate regressions for the test suite, compiled into debug builds only.
//!
//! Issue #5 proves each `verify` check catches its regression by launching a
//! sandbox with one defence removed. `CLAUDE_SANDBOX_TEST_MUTATION` (a comma
//! list) names them; in release builds [`mutation`] is constant `false`, so the
//! shipped binary reads no such variable.
//!
//! Names: `bind-ssh` (~/.ssh bound back), `pass-gh-token` (GH_TOKEN passed
//! through), `tmp-not-tmpfs` (/tmp not a tmpfs), `keep-caps` (capabilities
//! kept), `jail-no-172` (jail without the 172.16/12 blackhole),
//! `skip-pin-check` (launch despite a pin mismatch).

/// Whether the named regression is requested (debug builds only).
#[cfg(debug_assertions)]
pub fn mutation(name: &str) -> bool {
    std::env::var("CLAUDE_SANDBOX_TEST_MUTATION")
        .map(|v| v.split(',').any(|m| m.trim() == name))
        .unwrap_or(false)
}

/// Whether the named regression is requested: never, in a release build.
#[cfg(not(debug_assertions))]
pub fn mutation(_name: &str) -> bool {
    false
}
