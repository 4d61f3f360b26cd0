//! The host facts a plan is built from ([`Facts`], gathered by
//! `crate::launch`'s `host::gather`) and the questions the gatherer asks the
//! plan first: which paths to stat ([`candidates`]), which read-write paths
//! to resolve ([`rw_requests`]).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::tables::{
    HOME_CLAUDE_MASKED, HOME_FORGE, HOME_RO, HOME_RW, PRIVATE_STATE, SYSTEM_NULLED,
};
use crate::config::Config;
use crate::egress::policy::{ClaudeTraffic, JailFacts};
use crate::sandbox::RwBind;
use crate::sys::paths;

/// How `/proc` is provided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcMode {
    /// A fresh procfs for the sandbox's PID namespace: host PIDs invisible.
    Fresh,
    /// The host's `/proc` bound read-only, where the kernel refuses a fresh mount.
    HostReadOnly,
}

/// What can enforce a session's process limit on this host (issue #24),
/// as `crate::limits` finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PidsMechanism {
    /// A cgroup with the pids controller the launch may make in `parent`.
    Cgroup { parent: PathBuf },
    /// `RLIMIT_NPROC`: the launching uid is not the kernel's root, whom it never binds.
    Rlimit,
    /// Neither, and why.
    Neither(String),
}

/// One entry an unprivileged user could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unreadable {
    pub(crate) path: PathBuf,
    /// A directory (masked by a tmpfs) or a file (by `/dev/null`).
    pub(crate) dir: bool,
}

/// A snapshot of the host, taken by `crate::launch`'s `host::gather`.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    /// The real user's login name.
    pub(crate) user: String,
    /// `$HOME`, canonical.
    pub(crate) home: PathBuf,
    /// The home directory the user database gives, canonical, when it exists
    /// and differs from `$HOME` (sudo keeping HOME, tools that set it): it is
    /// masked too, or the real home would show through the read-only root.
    pub(crate) passwd_home: Option<PathBuf>,
    /// The current directory, canonical.
    pub(crate) cwd: PathBuf,
    /// The launching environment.
    pub(crate) env: BTreeMap<OsString, OsString>,
    /// Which of [`candidates`] exist.
    pub(crate) existing: BTreeSet<PathBuf>,
    /// Which of [`candidates`] exist and are no directory (a symbolic link
    /// is none: not followed).
    pub(crate) not_directories: BTreeSet<PathBuf>,
    /// The [`super::SYSTEM_TMPFS`] entries that are real directories (a `/var/run`
    /// symlink to `/run` is not masked twice).
    pub(crate) run_dirs: Vec<PathBuf>,
    /// What to bind back into the fresh `/run` ([`super::RUN_KEEP`] entries and the
    /// `/etc/resolv.conf` target under `/run`) that exists.
    pub(crate) run_keep: Vec<PathBuf>,
    /// Launched by root: what an unprivileged user could not read under the
    /// system directories ([`crate::launch::rootview`]), and the directories hidden
    /// whole. Empty otherwise.
    pub(crate) root_masks: Vec<Unreadable>,
    pub(crate) hidden_whole: Vec<PathBuf>,
    /// Launched by root: what the session and the user are told of the
    /// root view.
    pub(crate) root_view_told: RootViewTold,
    /// Every read-write path (workspace, allow-write) resolved, symlinks followed;
    /// `None` when it does not exist.
    pub(crate) resolved: BTreeMap<PathBuf, Option<PathBuf>>,
    pub(crate) proc_mode: ProcMode,
    /// The launcher's namespace inodes, by kind (for the launch record).
    pub(crate) launcher_ns: BTreeMap<String, u64>,
    /// TCP ports listening on the host's loopback (for the launch record).
    pub(crate) host_loopback_tcp: Vec<u16>,
    /// What the egress jail is planned from, when [`super::jailed`].
    pub(crate) jail: Option<JailFacts>,
    /// The protected workspace paths that exist (§4.8, [`crate::plan::protect`]),
    /// each as found and as resolved (a symlink to a file in the workspace
    /// protects that file).
    pub(crate) protected: Vec<RwBind>,
    /// Git directories' `hooks` (out of [`Facts::protected`]) and the held
    /// copy bound over each (issue #44): (copy, hooks).
    pub(crate) held_hooks: Vec<(PathBuf, PathBuf)>,
    /// What the walk of the workspace found ([`crate::plan::protect::discover`]),
    /// existing or not: the tripwire watches all of it.
    pub(crate) discovered: crate::plan::protect::Protected,
    /// The host's managed settings ([`paths::MANAGED_SETTINGS`]) when they
    /// exist and read as text; the sandbox gets them without the lockdown.
    pub(crate) managed_settings: Option<String>,
    /// This launch's session id ([`crate::egress::policy::session_id`]).
    pub(crate) session: String,
    /// What the user turned off of Claude Code's own traffic (allowlist mode).
    pub(crate) claude_traffic: ClaudeTraffic,
    /// The memory the sandbox can use, in bytes (the machine's, or its
    /// memory cgroup's limit when lower): what `tmpfs-size = N%` is of.
    pub(crate) memory: u64,
    /// What can enforce `pids-limit` here.
    pub(crate) pids: PidsMechanism,
    /// What the sandbox sees of the credential broker, when it runs
    /// (issue #25): stand-in files and variables, the CA bundle.
    pub(crate) broker: Option<crate::egress::policy::broker::Inside>,
    /// The terminal's signals (`INT`, `QUIT`) the launcher was started
    /// with ignored: the real binary starts with them ignored too, as it
    /// would run without the sandbox.
    pub(crate) ignored_at_launch: Vec<String>,
}

/// Paths whose existence the plan depends on; `crate::launch`'s `host::gather` stats exactly these.
pub(crate) fn candidates(home: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = HOME_RW
        .iter()
        .chain(HOME_FORGE)
        .chain(HOME_RO)
        .chain(HOME_CLAUDE_MASKED)
        .map(|r| home.join(r))
        .collect();
    v.extend(SYSTEM_NULLED.iter().map(PathBuf::from));
    v.push(PathBuf::from(paths::LAUNCH_RECORD));
    v
}

/// The host directory behind the private `~/NAME` of [`super::HOME_PRIVATE`].
pub(crate) fn private_dir(home: &Path, name: &str) -> PathBuf {
    home.join(PRIVATE_STATE).join(name)
}

/// The read-write paths the plan will ask [`Facts::resolved`] about.
pub(crate) fn rw_requests(cfg: &Config, cwd: &Path) -> Vec<PathBuf> {
    let mut v = vec![cfg
        .workspace_root
        .clone()
        .unwrap_or_else(|| cwd.to_path_buf())];
    v.extend(cfg.allow_write.iter().cloned());
    v
}

/// What a root launch tells of its root view (issue #48).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RootViewTold {
    /// Directories masked whole: not examined whole (unreadable to the
    /// walker, changing while read, too deep, past the bound), or standing
    /// in for the root-only entries in them past the count of masks. The
    /// session is told.
    pub(crate) unexamined: Vec<PathBuf>,
    /// The lines (one per kept view) that say a kept root view was not
    /// trusted (the user is told).
    pub(crate) discarded: Option<String>,
}

impl RootViewTold {
    /// The lines the session is told at its start: what the directories
    /// masked whole are, then one line each (at most a few; then how many
    /// more). None when there are none.
    pub(crate) fn session_lines(&self) -> Vec<String> {
        const SHOWN: usize = 20;
        if self.unexamined.is_empty() {
            return Vec::new();
        }
        let mut v = vec![format!(
            "claude-sandbox: {} director{} hidden whole in this root session (each reads as an empty directory): {} more entries only root may read than the root view masks one by one, or could not be examined whole (unreadable, changing while read, too deep, past the bound); for what you need there, run as another user or ask the user (`claude-sandbox doctor` lists them)",
            self.unexamined.len(),
            if self.unexamined.len() == 1 { "y is" } else { "ies are" },
            if self.unexamined.len() == 1 { "it holds" } else { "each holds" },
        )];
        v.extend(self.unexamined.iter().take(SHOWN).map(|d| {
            format!(
                "claude-sandbox: hidden whole: {}",
                super::protect::printable(&d.display().to_string(), 200)
            )
        }));
        if self.unexamined.len() > SHOWN {
            v.push(format!(
                "claude-sandbox: and {} more directories hidden whole",
                self.unexamined.len() - SHOWN
            ));
        }
        v
    }
}
