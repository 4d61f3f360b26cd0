//! "Am I inside the sandbox?", answered from kernel facts (SPEC §2.1, §6).
//!
//! `IS_SANDBOX=1` alone proves nothing: any process can set it. The answer is
//! yes only when the variable agrees with facts the kernel reports about the
//! process itself and that a process outside cannot produce by setting a
//! variable: no-new-privileges set, no effective capabilities, and a user
//! namespace mapping exactly one id (what bubblewrap's `--unshare-user` builds;
//! a host or container process sees a full or multi-range map).

use std::fs;

/// The kernel facts about one process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    pub is_sandbox_env: bool,
    pub no_new_privs: bool,
    pub cap_eff_zero: bool,
    pub single_id_userns: bool,
    /// `NSpid` lists more than one PID (host `/proc` bound into a nested PID namespace).
    pub nspid_nested: bool,
    /// PID 1 of this `/proc` is bubblewrap (a fresh `/proc` of our own PID namespace).
    pub pid1_is_bwrap: bool,
}

impl Facts {
    /// Read the facts of the calling process.
    pub(crate) fn read() -> Facts {
        let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
        let uid_map = fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
        let pid1 = fs::read_to_string("/proc/1/comm").unwrap_or_default();
        Facts::from_texts(
            std::env::var_os("IS_SANDBOX").as_deref() == Some("1".as_ref()),
            &status,
            &uid_map,
            &pid1,
        )
    }

    /// Derive the facts from the texts of `/proc/self/status`, `/proc/self/uid_map`, `/proc/1/comm`.
    pub(crate) fn from_texts(
        is_sandbox_env: bool,
        status: &str,
        uid_map: &str,
        pid1_comm: &str,
    ) -> Facts {
        Facts {
            is_sandbox_env,
            no_new_privs: status_field(status, "NoNewPrivs") == Some("1"),
            cap_eff_zero: status_field(status, "CapEff")
                .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c == '0')),
            single_id_userns: single_id_map(uid_map),
            nspid_nested: status_field(status, "NSpid")
                .is_some_and(|v| v.split_whitespace().count() >= 2),
            pid1_is_bwrap: pid1_comm.trim() == "bwrap",
        }
    }

    /// Inside the sandbox: the variable and every kernel fact agree.
    pub(crate) fn inside(&self) -> bool {
        self.is_sandbox_env
            && self.no_new_privs
            && self.cap_eff_zero
            && self.single_id_userns
            && self.nested_pid_ns()
    }

    /// In a PID namespace nested under the launcher's.
    pub(crate) fn nested_pid_ns(&self) -> bool {
        self.nspid_nested || self.pid1_is_bwrap
    }
}

/// A field of `/proc/PID/status`, trimmed.
pub(crate) fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == key).then(|| v.trim())
    })
}

fn single_id_map(map: &str) -> bool {
    let lines: Vec<&str> = map.lines().filter(|l| !l.trim().is_empty()).collect();
    lines.len() == 1 && lines[0].split_whitespace().nth(2) == Some("1")
}

/// Inside the sandbox, by the rule above, for the calling process.
pub(crate) fn is_inside() -> bool {
    Facts::read().inside()
}

#[cfg(test)]
mod tests {
    use super::*;

    const INSIDE_STATUS: &str =
        "Name:\tprobe\nNSpid:\t4242\t3\nNoNewPrivs:\t1\nCapEff:\t0000000000000000\n";
    const HOST_STATUS: &str =
        "Name:\tbash\nNSpid:\t4242\nNoNewPrivs:\t0\nCapEff:\t000001ffffffffff\n";

    #[test]
    fn inside_needs_every_fact() {
        let f = Facts::from_texts(
            true,
            INSIDE_STATUS,
            "      1000       1000          1\n",
            "bash\n",
        );
        assert!(f.inside());
        // A fresh /proc shows one NSpid entry; PID 1 being bubblewrap proves the nesting.
        let fresh = INSIDE_STATUS.replace("4242\t3", "3");
        assert!(Facts::from_texts(true, &fresh, "1000 1000 1\n", "bwrap\n").inside());
        assert!(!Facts::from_texts(true, &fresh, "1000 1000 1\n", "systemd\n").inside());
    }

    #[test]
    fn forged_variable_outside_is_not_inside() {
        // A root shell in a container, IS_SANDBOX=1 exported.
        let f = Facts::from_texts(
            true,
            HOST_STATUS,
            "         0          0 4294967295\n",
            "systemd\n",
        );
        assert!(!f.inside());
        // Even with no-new-privs set by hand (setpriv), the id map gives it away.
        let nnp = HOST_STATUS
            .replace("NoNewPrivs:\t0", "NoNewPrivs:\t1")
            .replace("000001ffffffffff", "0000000000000000");
        assert!(!Facts::from_texts(true, &nnp, "0 0 4294967295\n", "bash").inside());
        // Rootless container: several ranges.
        assert!(
            !Facts::from_texts(true, INSIDE_STATUS, "0 1000 1\n1 100000 65536\n", "bash").inside()
        );
    }

    #[test]
    fn no_variable_is_not_inside() {
        assert!(!Facts::from_texts(false, INSIDE_STATUS, "1000 1000 1\n", "bwrap").inside());
    }

    #[test]
    fn this_test_process_is_not_inside() {
        // cargo test runs on the host, where the facts never line up, whatever IS_SANDBOX says.
        let mut f = Facts::read();
        f.is_sandbox_env = true;
        assert!(!f.inside() || std::env::var_os("IS_SANDBOX").is_some());
    }
}
