//! What a launch needs that is not ours to create, checked before anything
//! is spawned: our installed files, bubblewrap, user namespaces, and
//! AppArmor's restriction of them (with the fix, in one line).

use std::path::{Path, PathBuf};

use crate::error::{not_installed, setup};
use crate::sys::paths;

/// The way out when the sandbox cannot be built, named in every such message:
/// never a silent fallback, an explicit operator decision instead.
fn escape_hatch() -> String {
    format!(
        "claude will not run unsandboxed by itself; an operator who accepts that can create {} and run {} directly",
        paths::ALLOW_UNWRAPPED,
        paths::REAL_CLAUDE
    )
}

/// Where bubblewrap is looked for (never through `PATH`).
const BWRAP_CANDIDATES: &[&str] = &["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"];

fn is_executable_file(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Everything a launch needs that is not ours to create: bubblewrap, our
/// installed files, user namespaces. Returns bubblewrap's path.
pub(crate) fn preflight() -> anyhow::Result<PathBuf> {
    for (path, what) in [
        (paths::REAL_CLAUDE, "the real Claude Code binary"),
        (paths::SELF_BIN, "claude-sandbox's own binary"),
        (paths::GITCONFIG, "the curated git config"),
    ] {
        if !Path::new(path).exists() {
            return Err(not_installed(format!(
                "{path} ({what}) is missing; install the sandbox: sudo claude-sandbox install"
            )));
        }
    }
    let bwrap = BWRAP_CANDIDATES
        .iter()
        .map(PathBuf::from)
        .find(|p| is_executable_file(p))
        .ok_or_else(|| {
            setup(format!("bubblewrap (bwrap) is not installed; install it: sudo apt-get install bubblewrap (Debian/Ubuntu). {}", escape_hatch()))
        })?;
    userns_available()?;
    Ok(bwrap)
}

/// Refuse early, with the fix, where the kernel forbids user namespaces.
pub(crate) fn userns_available() -> anyhow::Result<()> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return Err(setup(format!("user namespaces are disabled (/proc/sys/user/max_user_namespaces is 0); enable them: sudo sysctl -w user.max_user_namespaces=15000. {}", escape_hatch())));
    }
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0")
        && !nix::unistd::geteuid().is_root()
    {
        return Err(setup(format!("unprivileged user namespaces are disabled (/proc/sys/kernel/unprivileged_userns_clone is 0); enable them: sudo sysctl -w kernel.unprivileged_userns_clone=1. {}", escape_hatch())));
    }
    Ok(())
}

/// The sysctl with which AppArmor (Ubuntu 24.04 and later by default)
/// confines the user namespaces an unprivileged, unconfined program creates:
/// no capabilities inside, so bubblewrap cannot build a sandbox unless an
/// AppArmor profile for bubblewrap allows `userns`.
pub(crate) const APPARMOR_USERNS_SYSCTL: &str =
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns";

/// Whether AppArmor's restriction applies to this caller: `value` is the
/// sysctl's content (None where the kernel has no such file), `root` whether
/// the caller is root, whom the restriction does not confine.
pub(crate) fn apparmor_restricts_userns(value: Option<&str>, root: bool) -> bool {
    !root
        && value
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|v| v != 0)
}

/// The same question asked of this machine and this process.
pub(super) fn apparmor_restricts_userns_here() -> bool {
    let value = std::fs::read_to_string(APPARMOR_USERNS_SYSCTL).ok();
    apparmor_restricts_userns(value.as_deref(), nix::unistd::geteuid().is_root())
}

/// The fix for AppArmor's restriction, in one line: a profile that lets
/// bubblewrap alone create user namespaces, or (wider) lifting the restriction.
pub(crate) fn apparmor_userns_fix() -> String {
    format!(
        "AppArmor restricts unprivileged user namespaces ({APPARMOR_USERNS_SYSCTL} is 1, Ubuntu 24.04's default), so bubblewrap cannot build a sandbox for a non-root user unless an AppArmor profile allows it; \
         allow bubblewrap alone: printf 'abi <abi/4.0>,\\ninclude <tunables/global>\\nprofile bwrap /usr/bin/bwrap flags=(unconfined) {{\\n  userns,\\n}}\\n' | sudo tee /etc/apparmor.d/bwrap && sudo apparmor_parser -r /etc/apparmor.d/bwrap \
         (or, wider, lift the restriction for every program: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, which reopens to all of them the kernel surface it closes)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apparmor_restriction_read_from_the_sysctl() {
        // Restricted: a non-root caller where the sysctl is on.
        assert!(apparmor_restricts_userns(Some("1\n"), false));
        assert!(apparmor_restricts_userns(Some("2"), false));
        // Root is not confined; off, absent (older kernels, Debian) or unreadable is no restriction.
        assert!(!apparmor_restricts_userns(Some("1\n"), true));
        assert!(!apparmor_restricts_userns(Some("0\n"), false));
        assert!(!apparmor_restricts_userns(None, false));
        assert!(!apparmor_restricts_userns(Some(""), false));
        assert!(!apparmor_restricts_userns(Some("garbage"), false));
        // The fix names both ways out, on one line.
        let fix = apparmor_userns_fix();
        assert!(!fix.contains('\n'), "{fix}");
        for needle in [
            APPARMOR_USERNS_SYSCTL,
            "/etc/apparmor.d/bwrap",
            "userns,",
            "apparmor_parser -r",
            "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
        ] {
            assert!(fix.contains(needle), "{needle} missing: {fix}");
        }
    }
}
