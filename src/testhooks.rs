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
pub(crate) enum Mutation {
    /// `~/.ssh` bound back into the sandbox.
    #[cfg(feature = "test-mutations")]
    BindSsh,
    /// `GH_TOKEN` passed through.
    #[cfg(feature = "test-mutations")]
    PassGhToken,
    /// `/tmp` not a fresh tmpfs.
    #[cfg(feature = "test-mutations")]
    TmpNotTmpfs,
    /// Capabilities kept.
    #[cfg(feature = "test-mutations")]
    KeepCaps,
    /// The jail without its 172.16/12 blackhole.
    #[cfg(feature = "test-mutations")]
    JailNo172,
    /// Launch despite a pin mismatch.
    SkipPinCheck,
    /// pasta given an option it refuses.
    PastaAttachFails,
    /// The holder given a tap name the kernel refuses.
    TapFails,
    /// The jail's tap without its transmit filter (issue #45 item 10):
    /// multicast from inside reaches pasta, which relays it.
    JailMulticast,
    /// The child cannot make the root view's file masks before bubblewrap
    /// (a mask on a path that does not exist is added to them).
    #[cfg(feature = "test-mutations")]
    PreMaskFails,
    /// A root-view mask on a path under `/var/lib` that does not exist, in
    /// every attempt's plan: what a directory deleted between the walk and
    /// bubblewrap's mount looks like, on every replan (issue #43).
    #[cfg(feature = "test-mutations")]
    RootMaskVanishes,
    /// Weakening `CLAUDE_SANDBOX_*` variables accepted without the file's opt-in.
    AcceptEnvOverrides,
    /// A route the route step refuses.
    #[cfg(feature = "test-mutations")]
    RouteStepFails,
    /// The protected workspace paths left writable.
    #[cfg(feature = "test-mutations")]
    Unprotect,
    /// No creation guard: missing protected paths can be created inside.
    #[cfg(feature = "test-mutations")]
    Unguarded,
    /// The creation guard without its git-directory rule (issue #22): set
    /// in the sandbox's environment, read by the supervisor inside.
    #[cfg(feature = "test-mutations")]
    NoGitRule,
    /// Nothing held for the user (issue #44): the hooks directories stay
    /// the workspace's own, and the supervisor (told through the sandbox's
    /// environment) refuses a key it would hold.
    #[cfg(feature = "test-mutations")]
    NoHeld,
    /// `bind(2)` not sent to the supervisor (issue #45): set in the
    /// sandbox's environment, read by the shim that builds the guard's filter.
    #[cfg(feature = "test-mutations")]
    UnsupervisedBind,
    /// A recorded work tree not walked again after a `symlink` or `rename`
    /// (issue #45): set in the sandbox's environment, read by the
    /// supervisor inside.
    #[cfg(feature = "test-mutations")]
    WorktreeUnkept,
    /// The workspace taken for one that folds no case (issue #45 item 8):
    /// the guard compares names as bytes, as before.
    #[cfg(feature = "test-mutations")]
    NoCasefold,
    /// The user's own `~/.cache` and `~/.local/share`, and writable forge dirs.
    #[cfg(feature = "test-mutations")]
    HostState,
    /// New user namespaces allowed inside: no `--disable-userns`, and the
    /// seccomp filter lets `clone`/`unshare` pass CLONE_NEWUSER.
    #[cfg(feature = "test-mutations")]
    AllowUserns,
    /// The seccomp filter before issue #13: only TIOCSTI/TIOCLINUX and the
    /// keyring syscalls refused.
    #[cfg(feature = "test-mutations")]
    SeccompMinimal,
    /// The seccomp filter lets `ptrace` and `process_vm_writev` reach PID 1.
    #[cfg(feature = "test-mutations")]
    Pid1Open,
    /// Allowlist mode's proxy lets every `.invalid` name through (the
    /// names `verify` probes with).
    #[cfg(feature = "test-mutations")]
    AllowlistOpen,
    /// The jail's DNS forwarder routed on every port and protocol, as before
    /// issue #24 (its route in the main table).
    #[cfg(feature = "test-mutations")]
    ForwarderAllPorts,
    /// The launch puts no process limit in force (the plan still says one).
    NoPidsLimit,
    /// No tmpfs the sandbox mounts is sized.
    #[cfg(feature = "test-mutations")]
    TmpfsUnsized,
    /// The launch neither measures nor prunes the private state.
    NoPrivateBound,
    /// The credential broker's stand-in copy of `gh`'s `hosts.yml`
    /// replaced by a bind of the real file (issue #25): the broker still
    /// runs, the real token is readable inside.
    #[cfg(feature = "test-mutations")]
    BrokerRealFile,
}

/// `drop-mount=PATH` entries of `CLAUDE_SANDBOX_TEST_MUTATION`: every mount
/// operation at PATH (`~/` for `$HOME`) removed from the sandbox.
#[cfg(feature = "test-mutations")]
fn dropped_mounts(home: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::env::var("CLAUDE_SANDBOX_TEST_MUTATION")
        .unwrap_or_default()
        .split(',')
        .filter_map(|m| m.trim().strip_prefix("drop-mount="))
        .map(|p| match p.strip_prefix("~/") {
            Some(rel) => home.join(rel),
            None => p.into(),
        })
        .collect()
}

/// The tripwire's time budget at exit in milliseconds, from
/// `CLAUDE_SANDBOX_TEST_TRIPWIRE_BUDGET_MS` (builds with `test-mutations`
/// only: the tests show the message of a walk that ran out of time).
#[cfg(feature = "test-mutations")]
pub(crate) fn tripwire_budget() -> Option<std::time::Duration> {
    std::env::var("CLAUDE_SANDBOX_TEST_TRIPWIRE_BUDGET_MS")
        .ok()?
        .trim()
        .parse()
        .ok()
        .map(std::time::Duration::from_millis)
}

/// Without `test-mutations`: the budget is the product's.
#[cfg(not(feature = "test-mutations"))]
#[inline(always)]
pub(crate) fn tripwire_budget() -> Option<std::time::Duration> {
    None
}

/// Whether this binary was built with the test mutations (install refuses it).
pub(crate) const BUILT_WITH_MUTATIONS: bool = cfg!(feature = "test-mutations");

/// Whether the regression is requested (builds with `test-mutations` only).
#[cfg(feature = "test-mutations")]
pub(crate) fn active(m: Mutation) -> bool {
    let name = match m {
        Mutation::BindSsh => "bind-ssh",
        Mutation::PassGhToken => "pass-gh-token",
        Mutation::TmpNotTmpfs => "tmp-not-tmpfs",
        Mutation::KeepCaps => "keep-caps",
        Mutation::JailNo172 => "jail-no-172",
        Mutation::SkipPinCheck => "skip-pin-check",
        Mutation::PastaAttachFails => "pasta-attach-fails",
        Mutation::TapFails => "tap-fails",
        Mutation::JailMulticast => "jail-multicast",
        Mutation::PreMaskFails => "pre-mask-fails",
        Mutation::RootMaskVanishes => "root-mask-vanishes",
        Mutation::RouteStepFails => "route-step-fails",
        Mutation::Unprotect => "unprotect",
        Mutation::Unguarded => "unguarded",
        Mutation::NoGitRule => "no-git-rule",
        Mutation::NoHeld => "no-held",
        Mutation::UnsupervisedBind => "unsupervised-bind",
        Mutation::WorktreeUnkept => "worktree-unkept",
        Mutation::NoCasefold => "no-casefold",
        Mutation::HostState => "host-state",
        Mutation::AllowUserns => "allow-userns",
        Mutation::SeccompMinimal => "seccomp-minimal",
        Mutation::AcceptEnvOverrides => "accept-env-overrides",
        Mutation::AllowlistOpen => "allowlist-open",
        Mutation::Pid1Open => "pid1-open",
        Mutation::ForwarderAllPorts => "forwarder-all-ports",
        Mutation::NoPidsLimit => "no-pids-limit",
        Mutation::TmpfsUnsized => "tmpfs-unsized",
        Mutation::NoPrivateBound => "no-private-bound",
        Mutation::BrokerRealFile => "broker-real-file",
    };
    std::env::var("CLAUDE_SANDBOX_TEST_MUTATION")
        .map(|v| v.split(',').any(|m| m.trim() == name))
        .unwrap_or(false)
}

/// Apply the requested regressions of the sandbox itself: the one place
/// they touch it. (The others, `skip-pin-check`, `pasta-attach-fails`,
/// `tap-fails` and `pre-mask-fails`, are faults of the launch around it and
/// stay where they act.)
#[cfg(feature = "test-mutations")]
pub(crate) fn apply(
    sb: &mut crate::sandbox::Sandbox,
    home: &std::path::Path,
    env: &std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString>,
) {
    apply_leaks(sb, home, env);
    if active(Mutation::RootMaskVanishes) {
        sb.mounts.push(crate::sandbox::Mount::Empty {
            dst: "/var/lib/csb-vanished-root-mask".into(),
        });
    }
    apply_weaker_seccomp(sb);
    apply_unprotect(sb, home);
    let dropped = dropped_mounts(home);
    sb.mounts.retain(|m| !dropped.iter().any(|d| d == m.dst()));
    apply_network(sb);
}

/// Mutations that hand the sandbox something of the host's.
#[cfg(feature = "test-mutations")]
fn apply_leaks(
    sb: &mut crate::sandbox::Sandbox,
    home: &std::path::Path,
    env: &std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString>,
) {
    use crate::sandbox::{Capabilities, Mount};
    if active(Mutation::BindSsh) {
        sb.mounts.push(Mount::ReadWrite {
            src: home.join(".ssh"),
            dst: home.join(".ssh"),
        });
    }
    if active(Mutation::PassGhToken) {
        if let Some(v) = env.get(std::ffi::OsStr::new("GH_TOKEN")) {
            sb.env.push(("GH_TOKEN".into(), v.clone()));
        }
    }
    if active(Mutation::TmpNotTmpfs) {
        sb.mounts
            .retain(|m| !matches!(m, Mount::Tmpfs { dst } if dst == std::path::Path::new("/tmp")));
    }
    if active(Mutation::KeepCaps) {
        sb.capabilities = Capabilities::KeepAll;
    }
    if active(Mutation::TmpfsUnsized) {
        sb.limits.tmpfs_size = 0;
        sb.limits.mask_size = 0;
    }
    if active(Mutation::BrokerRealFile) {
        for m in &mut sb.mounts {
            if let Mount::Data { dst, .. } = m {
                if dst.ends_with(".config/gh/hosts.yml") {
                    let real = dst.clone();
                    *m = Mount::ReadOnly {
                        src: real.clone(),
                        dst: real,
                    };
                }
            }
        }
    }
}

/// Mutations that install a weaker seccomp program.
#[cfg(feature = "test-mutations")]
fn apply_weaker_seccomp(sb: &mut crate::sandbox::Sandbox) {
    if active(Mutation::AllowUserns) {
        sb.nested_userns = true;
        sb.seccomp.program =
            crate::seccomp::program_bytes_for(crate::seccomp::Profile::UsernsAllowed);
    }
    if active(Mutation::SeccompMinimal) {
        sb.seccomp.program = crate::seccomp::program_bytes_for(crate::seccomp::Profile::Minimal);
    }
    if active(Mutation::Pid1Open) {
        sb.seccomp.program = crate::seccomp::program_bytes_for(crate::seccomp::Profile::Pid1Open);
    }
}

/// Mutations that take protections off the mounts and the creation guard.
#[cfg(feature = "test-mutations")]
fn apply_unprotect(sb: &mut crate::sandbox::Sandbox, home: &std::path::Path) {
    use crate::sandbox::Mount;
    if active(Mutation::Unprotect) {
        sb.mounts
            .retain(|m| !matches!(m, Mount::CheckedReadOnly(_)));
    }
    if active(Mutation::Unguarded) {
        sb.creation_guard.clear();
        // Without the guard's filter, the sandbox's refuses pidfd_getfd.
        sb.seccomp.program = crate::seccomp::program_bytes();
    }
    if active(Mutation::NoGitRule) {
        sb.env
            .push(("CLAUDE_SANDBOX_TEST_MUTATION".into(), "no-git-rule".into()));
    }
    if active(Mutation::UnsupervisedBind) {
        sb.env.push((
            "CLAUDE_SANDBOX_TEST_MUTATION".into(),
            "unsupervised-bind".into(),
        ));
    }
    if active(Mutation::WorktreeUnkept) {
        sb.env.push((
            "CLAUDE_SANDBOX_TEST_MUTATION".into(),
            "worktree-unkept".into(),
        ));
    }
    if active(Mutation::NoCasefold) {
        sb.folds = false;
    }
    if active(Mutation::NoHeld) {
        // Each hooks directory read-only again, as before issue #44.
        let held = std::mem::take(&mut sb.held_hooks);
        for m in &mut sb.mounts {
            if let Mount::ReadWrite { dst, .. } = m {
                if held.contains(dst) {
                    *m = Mount::CheckedReadOnly(crate::sandbox::RwBind {
                        requested: dst.clone(),
                        resolved: dst.clone(),
                    });
                }
            }
        }
        sb.env
            .push(("CLAUDE_SANDBOX_TEST_MUTATION".into(), "no-held".into()));
    }
    if active(Mutation::HostState) {
        // The held hooks copies (issue #44) are no private state.
        let held = sb.held_hooks.clone();
        for m in &mut sb.mounts {
            match m {
                Mount::ReadWrite { src, dst } if src != dst && !held.contains(dst) => {
                    *src = dst.clone()
                }
                // The forge dirs: bound back read-only from under ~/.config.
                Mount::ReadOnly { src, dst }
                    if src == dst && dst.starts_with(home.join(".config")) =>
                {
                    *m = Mount::ReadWrite {
                        src: src.clone(),
                        dst: dst.clone(),
                    }
                }
                _ => {}
            }
        }
    }
}

/// Mutations that widen the egress allowlist or the jail's routes.
#[cfg(feature = "test-mutations")]
fn apply_network(sb: &mut crate::sandbox::Sandbox) {
    use crate::sandbox::Network;
    if let Network::Allowlist(p) = &mut sb.network {
        if active(Mutation::AllowlistOpen) {
            p.policy.rules.push(crate::egress::policy::PolicyRule {
                rule: crate::egress::policy::DomainRule::parse("invalid:443").expect("valid"),
                origin: "test mutation allowlist-open".into(),
            });
        }
    }
    if let Network::Jail(net) = &mut sb.network {
        if active(Mutation::JailNo172) {
            net.route_batch = net
                .route_batch
                .lines()
                .filter(|l| !l.contains("172.16.0.0/12"))
                .map(|l| format!("{l}\n"))
                .collect();
        }
        if active(Mutation::ForwarderAllPorts) {
            // The forwarder's route moved from its own table (consulted for
            // UDP port 53 only) to the main one.
            net.route_batch = net.route_batch.replace(" onlink table 53\n", " onlink\n");
        }
        if active(Mutation::RouteStepFails) {
            net.route_batch
                .push_str("route add blackhole 300.0.0.0/8\n");
        }
    }
}

/// Without `test-mutations`: nothing to apply.
#[cfg(not(feature = "test-mutations"))]
#[inline(always)]
pub(crate) fn apply(
    _: &mut crate::sandbox::Sandbox,
    _: &std::path::Path,
    _: &std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString>,
) {
}

/// Whether the regression is requested: never, without `test-mutations`.
#[cfg(not(feature = "test-mutations"))]
#[inline(always)]
pub(crate) fn active(_: Mutation) -> bool {
    false
}
