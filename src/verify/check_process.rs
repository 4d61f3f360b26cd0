//! The checks of the process (§2.1, §4.4): the inside marker, no new
//! privileges, no capabilities, own PID, IPC and UTS namespaces, a sealed
//! PID 1, and the seccomp filter's refusals (TIOCSTI, keyctl, nested user
//! namespaces, the sampled calls; docs/decisions/0007-seccomp-profile.md).

use super::observe::{record, Observed, Outcome};
use super::probe_process::SyscallSample;
use crate::sys::inside;

pub(super) fn check_inside(o: &Observed) -> Outcome {
    let f = &o.facts;
    let mut missing = Vec::new();
    if !f.is_sandbox_env {
        missing.push("IS_SANDBOX=1 is not set".to_string());
    }
    if !f.single_id_userns {
        missing.push("the user namespace maps more than one id (not bubblewrap's)".into());
    }
    if let Err(e) = &o.record {
        missing.push(format!("no launch record ({e})"));
    }
    if missing.is_empty() {
        Ok("IS_SANDBOX=1, a one-id user namespace, the shadow's launch record".into())
    } else {
        Err(format!("not inside claude-sandbox: {}", missing.join("; ")))
    }
}

pub(super) fn check_nnp(o: &Observed) -> Outcome {
    match inside::status_field(&o.status, "NoNewPrivs") {
        Some("1") => Ok("NoNewPrivs: 1".into()),
        v => Err(format!(
            "NoNewPrivs is {}: setuid programs could gain privilege (bubblewrap's no-new-privs regressed)",
            v.unwrap_or("unknown")
        )),
    }
}

pub(super) fn check_caps(o: &Observed) -> Outcome {
    let mut bad = Vec::new();
    for k in ["CapEff", "CapPrm", "CapAmb"] {
        let v = inside::status_field(&o.status, k).unwrap_or("");
        if v.is_empty() || !v.chars().all(|c| c == '0') {
            bad.push(format!("{k} {v}"));
        }
    }
    if bad.is_empty() {
        Ok("CapEff, CapPrm, CapAmb all 0".into())
    } else {
        Err(format!(
            "{}: capabilities were kept (bubblewrap's --cap-drop ALL regressed)",
            bad.join(", ")
        ))
    }
}

/// Namespace `kind` is the sandbox's own: its inode differs from the one the
/// launcher recorded for itself. (Ownership by this process's user namespace
/// cannot be required: for a non-root user bubblewrap nests a second user
/// namespace after unsharing the others.)
fn own_ns(o: &Observed, kind: &str) -> Result<(), String> {
    let rec = record(o)?;
    match (rec.launcher_ns.get(kind), o.ns_ino.get(kind)) {
        (Some(l), Some(m)) if l != m => Ok(()),
        (Some(_), Some(_)) => Err(format!(
            "the {kind} namespace is the launcher's: bubblewrap's --unshare-{kind} regressed"
        )),
        _ => Err(format!("the {kind} namespace could not be identified")),
    }
}

pub(super) fn check_pid_ns(o: &Observed) -> Outcome {
    own_ns(o, "pid")?;
    if !o.facts.nested_pid_ns() {
        return Err(
            "PID 1 is not bubblewrap and NSpid shows one level: host processes are visible".into(),
        );
    }
    Ok("own PID namespace, nested under the launcher's".into())
}

pub(super) fn check_pid1(o: &Observed) -> Outcome {
    if o.pid1_samples.is_empty() {
        return Err("PID 1 was not probed".into());
    }
    let mut open = answered_otherwise(&o.pid1_samples);
    open.extend(
        o.pid1_mem_writable
            .iter()
            .map(|p| format!("{p} opened for writing")),
    );
    if open.is_empty() {
        Ok("PID 1 cannot be traced, and its memory cannot be written".into())
    } else {
        Err(format!(
            "PID 1 (bubblewrap's init, unfiltered) can be driven from inside: {}",
            open.join("; ")
        ))
    }
}

pub(super) fn check_ipc_uts(o: &Observed) -> Outcome {
    own_ns(o, "ipc")?;
    own_ns(o, "uts")?;
    Ok("own IPC and UTS namespaces".into())
}

pub(super) fn check_tiocsti(o: &Observed) -> Outcome {
    match o.tiocsti_errno {
        nix::libc::EPERM => Ok("ioctl(TIOCSTI) refused with EPERM by the seccomp filter".into()),
        e => Err(format!(
            "ioctl(TIOCSTI) answered errno {e}, not EPERM: the seccomp filter is not in place"
        )),
    }
}

pub(super) fn check_userns(o: &Observed) -> Outcome {
    match o.userns_errno {
        0 => Err("unshare(CLONE_NEWUSER) succeeded: a new user namespace (uid 0 in it) can be made inside".into()),
        e => Ok(format!(
            "a new user namespace is refused (errno {e}: {})",
            std::io::Error::from_raw_os_error(e)
        )),
    }
}

/// The samples that did not get the errno they want, each as
/// "CALL answered WHAT (errno N)".
fn answered_otherwise(samples: &[SyscallSample]) -> Vec<String> {
    let name = |e: i32| match e {
        0 => "success".to_string(),
        e => std::io::Error::from_raw_os_error(e)
            .to_string()
            .split(" (os error")
            .next()
            .unwrap_or_default()
            .to_string(),
    };
    samples
        .iter()
        .filter(|s| s.got != s.want)
        .map(|s| format!("{} answered {} (errno {})", s.call, name(s.got), s.got))
        .collect()
}

pub(super) fn check_syscalls(o: &Observed) -> Outcome {
    if o.syscall_samples.is_empty() {
        return Err("no refused call was tried".into());
    }
    let through = answered_otherwise(&o.syscall_samples);
    if through.is_empty() {
        Ok(format!(
            "{} calls refused by the seccomp filter ({})",
            o.syscall_samples.len(),
            o.syscall_samples
                .iter()
                .map(|s| s.call.split('(').next().unwrap_or_default())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    } else {
        Err(format!(
            "{}: the kernel answered, not the seccomp filter (docs/decisions/0007-seccomp-profile.md)",
            through.join("; ")
        ))
    }
}

pub(super) fn check_keyring(o: &Observed) -> Outcome {
    match o.keyctl_errno {
        nix::libc::EPERM => Ok("keyctl refused with EPERM by the seccomp filter".into()),
        0 => Err(
            "keyctl(GET_KEYRING_ID) succeeded: the caller's session keyring is reachable".into(),
        ),
        e => Err(format!(
            "keyctl answered errno {e}, not EPERM: the seccomp filter is not in place"
        )),
    }
}
