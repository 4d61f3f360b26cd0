//! Leftovers of a launch, found by what runs: every command a test starts
//! through [`Tracked::wrap`] enters a fresh cgroup (v2) first, and every
//! process it starts stays in it whatever happens to its parents (a daemon
//! that double-forks, an orphan adopted by init). [`Tracked::leftovers`]
//! scans `/proc` for the processes in that cgroup and names each by
//! executable path and by name, so a leak shows as e.g.
//! `4242 /usr/bin/passt.avx2 (passt.avx2)`.
//!
//! The test process plays the container's init: it is the child subreaper
//! of what it starts, so the orphans of a shadow that was `kill -9`ed are
//! adopted by it, and it reaps their zombies as init would. A zombie whose
//! parent is anything else is a leftover like any running process.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static N: AtomicUsize = AtomicUsize::new(0);

/// The cgroup v2 hierarchy: `/sys/fs/cgroup` itself, or its `unified`
/// part on a hybrid v1/v2 machine.
fn unified_root() -> PathBuf {
    for p in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        if nix::sys::statfs::statfs(p)
            .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC)
        {
            return PathBuf::from(p);
        }
    }
    panic!(
        "no cgroup v2 hierarchy at /sys/fs/cgroup or /sys/fs/cgroup/unified: leak tests need one"
    )
}

/// A cgroup for one test's launches; removed on drop (anything still in it
/// is killed first, so a failing test leaves nothing running either).
pub(crate) struct Tracked {
    dir: PathBuf,
    /// The cgroup's path as `/proc/PID/cgroup` shows it (`0::/csb-…`).
    rel: String,
}

impl Tracked {
    pub(crate) fn new(name: &str) -> Tracked {
        let root = unified_root();
        let leaf = format!(
            "csb-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let dir = root.join(&leaf);
        unsafe { nix::libc::prctl(nix::libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        std::fs::create_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot create cgroup {}: {e}", dir.display()));
        Tracked {
            dir,
            rel: format!("/{leaf}"),
        }
    }

    /// `cmd`, started inside this cgroup (it joins, then execs `cmd`).
    pub(crate) fn wrap(&self, cmd: &Command) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!(
                "echo $$ > {}/cgroup.procs && exec \"$@\"",
                self.dir.display()
            ))
            .arg("sh")
            .arg(cmd.get_program())
            .args(cmd.get_args());
        if let Some(d) = cmd.get_current_dir() {
            c.current_dir(d);
        }
        c
    }

    /// The cgroup's `cgroup.procs`: writing a PID there moves that process in.
    pub(crate) fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// Every process in the cgroup: `PID EXE (NAME)`.
    pub(crate) fn leftovers(&self) -> Vec<String> {
        self.processes().iter().map(describe).collect()
    }

    /// Every process in the cgroup as (PID, executable path, name); our own
    /// adopted zombies are reaped on the way.
    fn processes(&self) -> Vec<(u32, String, String)> {
        let mut found = Vec::new();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return found;
        };
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
            let ours = cg
                .lines()
                .any(|l| l.strip_prefix("0::") == Some(self.rel.as_str()));
            if !ours {
                continue;
            }
            let f = stat_fields(&format!("/proc/{pid}/stat"));
            let state = f.first().map(String::as_str);
            let ppid = f.get(1).and_then(|p| p.parse::<u32>().ok());
            if state == Some("Z") && ppid == Some(std::process::id()) {
                // Adopted by us as init: reap it, as init does.
                unsafe { nix::libc::waitpid(pid as i32, std::ptr::null_mut(), nix::libc::WNOHANG) };
                continue;
            }
            let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "(exe unreadable: a zombie or kernel thread)".into());
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            found.push((pid, exe, comm.trim().to_string()));
        }
        found
    }

    /// The first process in the cgroup whose executable path and name match.
    pub(crate) fn find(&self, matches: impl Fn(&str, &str) -> bool) -> Option<u32> {
        self.processes()
            .into_iter()
            .find(|(_, exe, comm)| matches(exe, comm))
            .map(|(pid, _, _)| pid)
    }

    /// Wait up to `within` for the cgroup to empty; what is left then.
    ///
    /// A process already in the kernel's exit path (every thread flagged
    /// `PF_EXITING`: killed, running no code of its own) no longer runs, but
    /// the kernel may still be tearing it down: pasta closing its tap
    /// (`tun_chr_close`), a namespace's last process waiting for an RCU
    /// grace period, a last `close` waiting for the disk. A CI run saw pasta
    /// there for over a second after the keeper killed it. When everything
    /// left at `within` is such a process, or only waits to reap such
    /// children, it gets [`EXIT_GRACE`] more to disappear. A process that
    /// does run code is a leftover once it has kept running for
    /// [`RUNNING_MAX`] past `within`: a reaper woken when its child's exit
    /// ends runs for a moment before it exits itself, and ending the grace
    /// at that moment reported pasta's keeper as left running (about one
    /// launch in four with the machine busy).
    /// Wait (at most `within`) until a tracked process named `comm` runs:
    /// a control must not look before what it plants has started, however
    /// busy the machine is.
    pub(crate) fn wait_for(&self, comm: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.find(|_, c| c == comm).is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub(crate) fn leftovers_after(&self, within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        let mut running_since: Option<Instant> = None;
        let mut seen = Vec::new();
        loop {
            let procs = self.processes();
            let now = Instant::now();
            if procs.is_empty() {
                if !seen.is_empty() {
                    eprintln!(
                        "note: {} process(es) were still being torn down {} ms after the \
                         session ended, gone {} ms later: {}",
                        seen.len(),
                        within.as_millis(),
                        now.duration_since(deadline).as_millis(),
                        seen.join("; ")
                    );
                }
                return Vec::new();
            }
            if now >= deadline {
                if procs.iter().all(|(pid, _, _)| settling(*pid)) {
                    running_since = None;
                    if seen.is_empty() {
                        seen = procs.iter().map(describe).collect();
                    }
                } else {
                    running_since.get_or_insert(now);
                }
                let ran_on = running_since.is_some_and(|t| now.duration_since(t) >= RUNNING_MAX);
                if ran_on || now.duration_since(deadline) >= EXIT_GRACE {
                    return self.leftovers();
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// One process of [`Tracked::processes`] as a leftover is reported:
/// `PID EXE (NAME, argv0 ARGV0, parent PPID) threads: …`.
fn describe((pid, exe, comm): &(u32, String, String)) -> String {
    let argv0 = std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .and_then(|c| {
            c.split(|b| *b == 0)
                .next()
                .map(|a| String::from_utf8_lossy(a).into_owned())
        })
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| "-".into());
    let ppid = stat_fields(&format!("/proc/{pid}/stat"))
        .get(1)
        .cloned()
        .unwrap_or_else(|| "?".into());
    format!(
        "{pid} {exe} ({comm}, argv0 {argv0}, parent {ppid}) threads: {}",
        threads(*pid)
    )
}

/// How long a process already in the kernel's exit path may take to be gone.
const EXIT_GRACE: Duration = Duration::from_secs(10);

/// How long past the deadline a process may run code before it is a
/// leftover (see [`Tracked::leftovers_after`]).
const RUNNING_MAX: Duration = Duration::from_millis(200);

/// The kernel's flag for a task in its exit path (`include/linux/sched.h`).
const PF_EXITING: u64 = 0x4;

/// Whether `pid` is on its way out: in the kernel's exit path itself, or
/// only waiting to reap children that all are (pasta's keeper, which has
/// killed pasta and waits for it: a CI run saw it so for over a second
/// while pasta closed its tap).
fn settling(pid: u32) -> bool {
    exiting(pid) || reaping_the_exiting(pid)
}

/// Whether every thread of `pid` waits in `wait` and `pid` has children,
/// all of them in the exit path.
fn reaping_the_exiting(pid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut children = Vec::new();
    for e in dir.flatten() {
        let base = e.path();
        let wchan = std::fs::read_to_string(base.join("wchan")).unwrap_or_default();
        if wchan.trim() != "do_wait" {
            return false;
        }
        let kids = std::fs::read_to_string(base.join("children")).unwrap_or_default();
        children.extend(
            kids.split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok()),
        );
    }
    !children.is_empty() && children.into_iter().all(exiting)
}

/// Whether every thread of `pid` is in the kernel's exit path (a zombie's
/// threads are); false for a process that cannot be read.
fn exiting(pid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut any = false;
    for e in dir.flatten() {
        let tid = e.file_name().to_string_lossy().to_string();
        let stat = format!("/proc/{pid}/task/{tid}/stat");
        // The flags are the 7th field after the name.
        let f = stat_fields(&stat);
        match f.get(6).and_then(|x| x.parse::<u64>().ok()) {
            Some(flags) if flags & PF_EXITING != 0 => any = true,
            // A thread reaped since the listing has finished exiting.
            None if !std::path::Path::new(&stat).exists() => {}
            _ => return false,
        }
    }
    any
}

impl Drop for Tracked {
    fn drop(&mut self) {
        for _ in 0..50 {
            let left = self.processes();
            if left.is_empty() {
                break;
            }
            for (pid, _, _) in left {
                unsafe { nix::libc::kill(pid as i32, nix::libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Entries named `claude-sandbox-*` in the temporary directory.
pub(crate) fn tmp_leftovers() -> Vec<String> {
    std::fs::read_dir(std::env::temp_dir())
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("claude-sandbox-"))
                .collect()
        })
        .unwrap_or_default()
}

/// Each thread of `pid` as `TID STATE policy POLICY in WCHAN`: why a
/// leftover is still there (a runnable `SCHED_IDLE` thread waiting for a
/// CPU, a thread blocked in the kernel) without a debugger.
fn threads(pid: u32) -> String {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return "(gone)".into();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let tid = e.file_name().to_string_lossy().to_string();
        let base = format!("/proc/{pid}/task/{tid}");
        // State is the 1st field after the name, policy the 39th.
        let f = stat_fields(&format!("{base}/stat"));
        let policy = match f.get(38).map(String::as_str) {
            Some("0") => "normal",
            Some("3") => "batch",
            Some("5") => "idle",
            Some(p) => p,
            None => "?",
        };
        let wchan = std::fs::read_to_string(format!("{base}/wchan")).unwrap_or_default();
        out.push(format!(
            "{tid} {} policy {policy} in {}",
            f.first().map_or("?", String::as_str),
            if wchan.is_empty() || wchan == "0" {
                "-"
            } else {
                wchan.as_str()
            }
        ));
    }
    out.join(", ")
}

/// The fields of a `stat` file (a process's or a thread's) after the
/// command name, which may itself hold spaces and parentheses; none if it
/// cannot be read.
fn stat_fields(path: &str) -> Vec<String> {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    stat.rsplit_once(')')
        .map(|(_, a)| a.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}
