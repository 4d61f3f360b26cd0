//! What a session may exhaust (issue #24), planned from the configuration
//! and the host facts: the process limit and what enforces it, and the
//! size of every tmpfs the sandbox mounts.

use std::path::PathBuf;

use super::facts::{Facts, PidsMechanism};
use super::tables::{HOME_SCRATCH, VAR_TMP};
use crate::config::{Amount, Config};
use crate::sandbox::{Limits, Pids};

/// The size of every tmpfs that only masks something (`/run`, other homes,
/// the root view's masks, …): room for the mount points bound into it and a
/// stray small file, nothing a session could fill memory with.
pub(crate) const MASK_TMPFS_SIZE: u64 = 1 << 20;

/// The smallest size a tmpfs a session writes to gets, whatever share of a
/// small memory `tmpfs-size` names.
pub(crate) const MIN_TMPFS_SIZE: u64 = 16 << 20;

/// The limits of one launch.
pub(super) fn limits(cfg: &Config, facts: &Facts) -> Limits {
    let mut scratch = vec![
        PathBuf::from("/tmp"),
        PathBuf::from(VAR_TMP),
        facts.home.clone(),
    ];
    scratch.extend(HOME_SCRATCH.iter().map(|rel| facts.home.join(rel)));
    Limits {
        pids: pids(cfg, facts),
        tmpfs_size: tmpfs_size(cfg.tmpfs_size, facts.memory),
        tmpfs_scratch: scratch,
        mask_size: MASK_TMPFS_SIZE,
        private_state_max: cfg.private_state_max,
    }
}

/// `tmpfs-size` in bytes: as written, or its share of `memory` but at
/// least [`MIN_TMPFS_SIZE`].
pub(crate) fn tmpfs_size(a: Amount, memory: u64) -> u64 {
    match a {
        Amount::Bytes(b) => b,
        Amount::PercentOfMemory(_) => a.bytes(memory).max(MIN_TMPFS_SIZE),
    }
}

/// The process limit and what enforces it: a cgroup where one can be made
/// (its name carries the session id, so concurrent launches never share
/// one), else `RLIMIT_NPROC`, else nothing, said aloud.
fn pids(cfg: &Config, facts: &Facts) -> Pids {
    let Some(max) = cfg.pids_limit else {
        return Pids::Off;
    };
    match &facts.pids {
        PidsMechanism::Cgroup { parent } => Pids::Cgroup {
            dir: parent.join(format!("claude-sandbox-{}", facts.session)),
            max,
        },
        PidsMechanism::Rlimit => Pids::Rlimit { max },
        PidsMechanism::Neither(why) => Pids::Unenforced {
            max,
            why: why.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::plan::fixtures::{as_root, facts};

    #[test]
    fn every_scratch_tmpfs_gets_the_configured_share_of_memory() {
        let f = facts();
        let l = limits(&Config::default(), &f);
        // 6% of 8 GiB, in whole MiB.
        assert_eq!(l.tmpfs_size, 491 << 20);
        for p in [
            "/tmp",
            "/var/tmp",
            "/home/dev",
            "/home/dev/.local/share/claude",
        ] {
            assert_eq!(l.tmpfs_size_of(Path::new(p)), l.tmpfs_size, "{p}");
        }
        for p in [
            "/run",
            "/home/dev/.local/share/applications",
            "/etc/ssl/private",
            "/var/tmp/x",
            "/var",
        ] {
            assert_eq!(l.tmpfs_size_of(Path::new(p)), MASK_TMPFS_SIZE, "{p}");
        }
        let cfg = Config {
            tmpfs_size: Amount::Bytes(64 << 20),
            ..Default::default()
        };
        assert_eq!(limits(&cfg, &f).tmpfs_size, 64 << 20);
        // A tiny memory still leaves a usable /tmp.
        let mut small = facts();
        small.memory = 64 << 20;
        assert_eq!(
            limits(&Config::default(), &small).tmpfs_size,
            MIN_TMPFS_SIZE
        );
    }

    #[test]
    fn the_pids_limit_says_what_enforces_it() {
        let mut f = facts();
        let cfg = Config::default();
        assert_eq!(limits(&cfg, &f).pids, Pids::Rlimit { max: 4096 });
        as_root(&mut f);
        assert_eq!(
            limits(&cfg, &f).pids,
            Pids::Cgroup {
                dir: "/sys/fs/cgroup/pids/claude-sandbox-20261123T120000Z-4242".into(),
                max: 4096
            }
        );
        f.pids = PidsMechanism::Neither("no cgroup".into());
        assert_eq!(
            limits(&cfg, &f).pids,
            Pids::Unenforced {
                max: 4096,
                why: "no cgroup".into()
            }
        );
        let off = Config {
            pids_limit: None,
            ..Default::default()
        };
        assert_eq!(limits(&off, &f).pids, Pids::Off);
    }
}
