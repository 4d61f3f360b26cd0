//! What a session may exhaust (issue #24), as plain data: the process
//! limit and how it is enforced, the size of every tmpfs the sandbox
//! mounts, and the bound on the private state. Part of the [`super::Sandbox`]
//! (the executor applies it, the renderer sizes the tmpfs mounts from it)
//! and of the launch record (`verify` checks it from inside).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The limits of one sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Limits {
    pub(crate) pids: Pids,
    /// The size in bytes of each tmpfs in [`Limits::tmpfs_scratch`] (and of
    /// `/dev/shm`); 0: unsized (a test mutation only).
    pub(crate) tmpfs_size: u64,
    /// The tmpfs mounts a session writes to: `/tmp`, the tmpfs over `$HOME`, …
    pub(crate) tmpfs_scratch: Vec<PathBuf>,
    /// The size in bytes of every other tmpfs (the masks); 0: unsized (a
    /// test mutation only).
    pub(crate) mask_size: u64,
    /// `private-state-max` in bytes, when bounded.
    pub(crate) private_state_max: Option<u64>,
}

impl Default for Limits {
    /// No limits: what an old launch record (before issue #24) says.
    fn default() -> Limits {
        Limits {
            pids: Pids::Off,
            tmpfs_size: 0,
            tmpfs_scratch: Vec::new(),
            mask_size: 0,
            private_state_max: None,
        }
    }
}

impl Limits {
    /// The size a tmpfs at `dst` gets (0: none).
    pub(crate) fn tmpfs_size_of(&self, dst: &Path) -> u64 {
        if self.tmpfs_scratch.iter().any(|s| s == dst) {
            self.tmpfs_size
        } else {
            self.mask_size
        }
    }
}

/// The process limit of a session and what enforces it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub(crate) enum Pids {
    /// `pids-limit = off`.
    Off,
    /// A cgroup of its own (`pids.max`), made by the launch at `dir` and
    /// removed after it.
    Cgroup { dir: PathBuf, max: u32 },
    /// `RLIMIT_NPROC` (soft = hard) on everything the launch starts: it
    /// counts every process of the launching user on the machine.
    Rlimit { max: u32 },
    /// Configured, but nothing here can enforce it (a root session, whose
    /// uid `RLIMIT_NPROC` never binds, without a cgroup it may make): said
    /// at every launch, and `verify` fails.
    Unenforced { max: u32, why: String },
}

impl Pids {
    /// The configured maximum, when there is one.
    pub(crate) fn max(&self) -> Option<u32> {
        match self {
            Pids::Off => None,
            Pids::Cgroup { max, .. } | Pids::Rlimit { max } | Pids::Unenforced { max, .. } => {
                Some(*max)
            }
        }
    }
}
