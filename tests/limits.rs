//! End-to-end: what a session can exhaust is bounded (issue #24), as root
//! and as an unprivileged user, under real bubblewrap.
//!
//! - A fork bomb inside (`:(){ :|:& };:`) stays within `pids-limit` (a
//!   cgroup of the session's own for root here, `RLIMIT_NPROC` for the
//!   user), the host starts 100 processes meanwhile, nothing is left
//!   running 10 s after the session's end, and the session ends with a line
//!   saying the limit was reached. The test never relies on the product for
//!   its own safety: every command it starts runs in a pids cgroup of the
//!   test's (`Bounded`) whose limit is in force before the bomb, so the
//!   code before the change fills that cgroup, not the machine.
//! - Filling `/tmp` (and `$HOME`, `/dev/shm`, a mask) stops at its size
//!   with ENOSPC; every writable tmpfs the sandbox mounted is sized.
//! - The private `~/.cache` and `~/.local/share` are pruned at launch to
//!   `private-state-max`, least recently changed first, with hostile plants
//!   (symlinks out of them, a huge file, names that sort first, a directory
//!   with its modes taken away) and nothing outside touched; a tree the
//!   launch cannot prune safely stops it, naming the path.
//! - `verify`'s three limit checks each fail under their mutation.

mod common;
use common::*;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A v1 or v2 pids cgroup of the test's own, limited before anything runs
/// in it: every command of a test that bombs runs inside. Removed on drop,
/// after killing what is left (stopped first, so a bomb cannot refork).
struct Bounded {
    dir: PathBuf,
}

static N: AtomicUsize = AtomicUsize::new(0);

impl Bounded {
    /// A pids cgroup limited to `max`, or `None` when this machine offers
    /// none (the caller skips, or fails under CI).
    fn new(max: u32) -> Option<Bounded> {
        let leaf = format!(
            "csb-limits-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let v2 = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
            .into_iter()
            .filter(|r| {
                std::fs::read_to_string(format!("{r}/cgroup.subtree_control"))
                    .is_ok_and(|s| s.split_whitespace().any(|c| c == "pids"))
            })
            .map(PathBuf::from);
        let v1 = Path::new("/sys/fs/cgroup/pids").join("pids.max").exists()
            || Path::new("/sys/fs/cgroup/pids/cgroup.procs").exists();
        let roots: Vec<PathBuf> = v2
            .chain(v1.then(|| PathBuf::from("/sys/fs/cgroup/pids")))
            .collect();
        for root in roots {
            let dir = root.join(&leaf);
            if std::fs::create_dir(&dir).is_err() {
                continue;
            }
            let b = Bounded { dir };
            if std::fs::write(b.dir.join("pids.max"), max.to_string()).is_ok() {
                assert_eq!(
                    b.read("pids.max"),
                    max.to_string(),
                    "the test's own bound is in force"
                );
                return Some(b);
            }
        }
        None
    }

    fn read(&self, f: &str) -> String {
        std::fs::read_to_string(self.dir.join(f))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    fn current(&self) -> u64 {
        self.read("pids.current").parse().unwrap_or(0)
    }

    /// `cmd`, joining this cgroup before it execs.
    fn wrap(&self, cmd: &Command) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!(
                "echo $$ > {}/cgroup.procs && exec \"$@\"",
                self.dir.display()
            ))
            .arg("sh")
            .arg(cmd.get_program())
            .args(cmd.get_args());
        c
    }

    fn pids(&self) -> Vec<i32> {
        self.read("cgroup.procs")
            .lines()
            .filter_map(|l| l.parse().ok())
            .collect()
    }
}

impl Drop for Bounded {
    fn drop(&mut self) {
        for _ in 0..100 {
            let left = self.pids();
            if left.is_empty() {
                break;
            }
            for sig in [nix::libc::SIGSTOP, nix::libc::SIGKILL] {
                for p in &left {
                    unsafe { nix::libc::kill(*p, sig) };
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A world with the probe as the real binary and `conf` as the configuration.
fn world(name: &str, conf: &str) -> World {
    let w = World::new(name);
    w.install_by_hand(&w.root.join("bin/probe"), conf);
    w
}

/// `claude shell SCRIPT` as `who`, output collected.
fn shell(w: &World, who: Who, script: &str) -> Output {
    w.run(who, &[], &["claude", "shell", script])
}

/// Sizes in bytes from `KEY=N` lines of `out`.
fn value(out: &str, key: &str) -> Option<u64> {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}="))?.trim().parse().ok())
}

#[test]
fn filling_a_tmpfs_stops_at_its_size_with_enospc() {
    if !require("limits_tmpfs") {
        return;
    }
    let w = world("tmpfs", "egress-jail = 0\ntmpfs-size = 8M\n");
    // Each: write 24 MiB, report the error and what was written.
    let script = r#"
fill() { dd if=/dev/zero of="$1" bs=1M count=24 2>&1 | grep -o 'No space left on device' | head -1; echo "$2=$(stat -c %s "$1")"; rm -f "$1"; }
fill /tmp/fill TMP
fill "$HOME/fill" HOME
fill /dev/shm/fill SHM
fill /run/fill RUN
fill "$HOME/.local/share/claude/fill" SHARE
echo DEV=$(touch /dev/planted 2>/dev/null && echo writable || echo read-only)
grep ' - tmpfs ' /proc/self/mountinfo | awk '$6 ~ /^rw/ && $4 == "/" { print "MOUNT", $5, $NF }'
"#;
    for who in BOTH {
        let o = shell(&w, who, script);
        let out = stdout(&o);
        assert_eq!(o.status.code(), Some(0), "{who:?}: {out}{}", stderr(&o));
        assert_eq!(
            out.matches("No space left on device").count(),
            5,
            "{who:?}: every tmpfs refuses past its size: {out}"
        );
        for key in ["TMP", "HOME", "SHM", "SHARE"] {
            let n = value(&out, key).unwrap_or_else(|| panic!("{who:?}: no {key} in {out}"));
            assert!(
                (7 << 20..=8 << 20).contains(&n),
                "{who:?}: {key} held {n} bytes, want about tmpfs-size = 8M: {out}"
            );
        }
        let run = value(&out, "RUN").unwrap();
        assert!(run <= 1 << 20, "{who:?}: the /run mask held {run}: {out}");
        assert!(out.contains("DEV=read-only"), "{who:?}: {out}");
        // Every writable tmpfs mounted fresh carries a size.
        let mounts: Vec<&str> = out.lines().filter(|l| l.starts_with("MOUNT ")).collect();
        assert!(mounts.len() >= 5, "{who:?}: {mounts:?}");
        for m in &mounts {
            assert!(m.contains("size="), "{who:?}: unsized: {m}");
        }
    }
    // The default: 6% of this machine's memory (or its memory cgroup's).
    let w = world("tmpfsdefault", "egress-jail = 0\n");
    let o = shell(&w, Who::User, "grep ' /tmp ' /proc/self/mountinfo");
    let line = stdout(&o);
    let kb: u64 = line
        .split(',')
        .find_map(|o| {
            o.trim()
                .strip_prefix("size=")?
                .strip_suffix('k')?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no size on /tmp: {line}{}", stderr(&o)));
    let mem: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("MemTotal:")?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap();
    assert!(
        kb <= mem * 6 / 100 + 1024 && kb >= 16 << 10,
        "/tmp {kb} kB of {mem} kB memory"
    );
}

/// Issue #45 ("found on the way"): where the sandbox mounts a tmpfs at
/// `/var/tmp` — a root launch whose view does not examine `/var` whole
/// masks it — it holds `tmpfs-size`, like `/tmp`, not a mask's 1M: a tool
/// writing 4 MiB there succeeds, and 24 MiB stops at the size with ENOSPC.
/// A user's `/var/tmp` is the host's, read-only like the rest of `/`,
/// whatever the root view does: its entries are there, nothing is written.
/// The hostile session tries a mask's worth elsewhere under the masked
/// `/var`: that stays a 1M mask.
#[test]
fn var_tmp_holds_what_tmp_holds_where_the_sandbox_mounts_it() {
    if !require("limits_var_tmp") {
        return;
    }
    // A bound of 1 entry: /var, walked and not examined whole, is masked.
    let w = world(
        "vartmp",
        "egress-jail = 0\ntmpfs-size = 8M\nroot-view-max-entries = 1\n",
    );
    let script = r#"
fill() { dd if=/dev/zero of="$1" bs=1M count="$3" 2>&1 | grep -o 'No space left on device\|Read-only file system' | head -1; echo "$2=$(stat -c %s "$1" 2>/dev/null || echo 0)"; rm -f "$1"; }
fill /var/tmp/csb-four FOUR 4
fill /var/tmp/csb-fill FILL 24
fill /var/csb-fill VAR 4
echo "WORLD=$(ls /var/tmp | grep -c '^csb-test-vartmp-')"
grep ' /var/tmp ' /proc/self/mountinfo | tail -1
"#;
    let o = shell(&w, Who::Root, script);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "root: {out}{}", stderr(&o));
    assert_eq!(
        value(&out, "FOUR"),
        Some(4 << 20),
        "root: 4 MiB in /var/tmp: {out}"
    );
    let n = value(&out, "FILL").unwrap();
    assert!(
        (7 << 20..=8 << 20).contains(&n),
        "root: /var/tmp held {n} bytes, want about tmpfs-size = 8M: {out}"
    );
    // The rest of the masked /var is a mask still.
    let var = value(&out, "VAR").unwrap();
    assert!(var <= 1 << 20, "root: the /var mask held {var}: {out}");
    assert_eq!(
        out.matches("No space left on device").count(),
        2,
        "root: {out}"
    );
    assert!(out.contains("size=8192k"), "root: /var/tmp unsized: {out}");
    let o = shell(&w, Who::User, script);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "user: {out}{}", stderr(&o));
    assert_eq!(value(&out, "FOUR"), Some(0), "user: {out}");
    assert_eq!(
        out.matches("Read-only file system").count(),
        3,
        "user: {out}"
    );
    assert_eq!(
        value(&out, "WORLD"),
        Some(1),
        "user: the host's /var/tmp: {out}"
    );
}

/// The most processes the test's own cgroup around a bombing session holds:
/// far below this machine's limits, far above the session's.
const OUTER_BOUND: u32 = 1500;

/// `pids-limit` of the bomb test's sessions.
const BOMB_LIMIT: u32 = 256;

/// What runs in the test's cgroup besides the session's own processes (the
/// world's shell, `unshare`, `setpriv`, the shadow and its threads).
const OVERHEAD: u64 = 48;

/// Start `n` programs from the host (outside every cgroup of the test),
/// as root or as the test user; how long it took, or the first failure.
fn host_starts(n: usize, who: Who) -> Result<Duration, String> {
    let t0 = Instant::now();
    for i in 0..n {
        let mut c = match who {
            Who::Root => Command::new("/bin/true"),
            Who::User => {
                let mut c = Command::new("setpriv");
                c.args([
                    &format!("--reuid={TEST_UID}"),
                    &format!("--regid={TEST_UID}"),
                    "--clear-groups",
                    "/bin/true",
                ]);
                c
            }
        };
        let st = c
            .stdin(Stdio::null())
            .status()
            .map_err(|e| format!("start {i}: {e}"))?;
        if !st.success() {
            return Err(format!("start {i}: {st}"));
        }
    }
    Ok(t0.elapsed())
}

#[test]
fn a_fork_bomb_stays_within_the_limit_and_the_host_stays_usable() {
    if !require("limits_fork_bomb") {
        return;
    }
    let w = world(
        "forkbomb",
        &format!("egress-jail = 0\npids-limit = {BOMB_LIMIT}\n"),
    );
    // `sleep` first: once the bomb runs, nothing in the session can fork.
    let script = "sleep 10 & s=$!; bash -c ':(){ :|:& };:'; wait $s; echo SESSION-END";
    for who in BOTH {
        let Some(b) = Bounded::new(OUTER_BOUND) else {
            let msg = "no pids cgroup can be made here: the fork bomb test needs one around it";
            assert!(std::env::var_os("CI").is_none(), "{msg}");
            eprintln!("\n!!!! SKIPPED: {msg} !!!!\n");
            return;
        };
        let cmd = w.command(who, &[], &["claude", "shell", script]);
        let child = b
            .wrap(&cmd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(child.wait_with_output()));
        // The bomb at work: the test's cgroup fills up to the session's limit.
        let start = Instant::now();
        let mut peak = 0;
        while start.elapsed() < Duration::from_secs(4) {
            peak = peak.max(b.current());
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            peak >= u64::from(BOMB_LIMIT) / 2,
            "{who:?}: the bomb never ran ({peak} processes)"
        );
        // The host meanwhile: 100 processes as root, 100 as the test user.
        for as_who in BOTH {
            let took = host_starts(100, as_who).unwrap_or_else(|e| {
                panic!("{who:?} session: the host could not start processes as {as_who:?}: {e}")
            });
            assert!(
                took < Duration::from_secs(30),
                "{who:?}: 100 host processes took {took:?}"
            );
        }
        peak = peak.max(b.current());
        let o = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{who:?}: the session did not end"))
            .unwrap();
        let ended = Instant::now();
        // Nothing of it left within 10 s of its end.
        while b.current() > 0 && ended.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(
            b.pids(),
            Vec::<i32>::new(),
            "{who:?}: left running 10 s after the session's end"
        );
        let recorded: u64 = b.read("pids.peak").parse().unwrap_or(0);
        let peak = peak.max(recorded);
        let (out, err) = (stdout(&o), stderr(&o));
        eprintln!(
            "{who:?}: at most {peak} processes at once; the session said: {}",
            err.lines()
                .filter(|l| l.starts_with("claude-sandbox"))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        assert!(
            peak <= u64::from(BOMB_LIMIT) + OVERHEAD,
            "{who:?}: {peak} processes at once, over pids-limit = {BOMB_LIMIT}: {err}"
        );
        assert!(out.contains("SESSION-END"), "{who:?}: {out}{err}");
        assert!(
            err.lines().any(|l| l.starts_with(
                "claude-sandbox: the session reached its process limit (pids-limit = 256"
            )),
            "{who:?}: no line saying the limit was reached: {err}"
        );
    }
}

/// Makes files as `who` would own them, each owned as soon as made, so
/// their change times follow the order they are planted in.
struct Planter(Who);

impl Planter {
    /// Own `p` (and the directories made for it) as `who`.
    fn own(&self, made: &[PathBuf]) {
        if self.0 == Who::User {
            for p in made {
                std::os::unix::fs::lchown(p, Some(TEST_UID), Some(TEST_UID)).unwrap();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    /// The missing directories above `p`, made, outermost first.
    fn parents(&self, p: &Path) -> Vec<PathBuf> {
        let missing: Vec<PathBuf> = p
            .ancestors()
            .skip(1)
            .take_while(|a| !a.exists())
            .map(Path::to_path_buf)
            .collect();
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        missing.into_iter().rev().collect()
    }

    /// `len` bytes at `p`.
    fn file(&self, p: &Path, len: usize) {
        let mut made = self.parents(p);
        std::fs::write(p, vec![b'x'; len]).unwrap();
        made.push(p.to_path_buf());
        self.own(&made);
    }

    fn symlink(&self, target: &Path, p: &Path) {
        let mut made = self.parents(p);
        std::os::unix::fs::symlink(target, p).unwrap();
        made.push(p.to_path_buf());
        self.own(&made);
    }

    fn hard_link(&self, target: &Path, p: &Path) {
        std::fs::hard_link(target, p).unwrap();
        self.own(&[]);
    }

    fn chmod(&self, p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        self.own(&[]);
    }
}

/// The private directories of `who` in `w` (cache, share).
fn private_dirs(w: &World, who: Who) -> (PathBuf, PathBuf) {
    let base = w.home(who).join(".local/state/claude-sandbox");
    (base.join("cache"), base.join("share"))
}

/// Allocated bytes under `dir`, each entry at least 4 KiB, no symlink
/// followed, no other file system entered (the bound's own measure).
fn du(dir: &Path) -> u64 {
    let Ok(m) = dir.symlink_metadata() else {
        return 0;
    };
    let own = (m.blocks() * 512).max(4096);
    if !m.is_dir() {
        return own;
    }
    own + std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.metadata().is_ok_and(|c| c.dev() == m.dev())
                || e.path().symlink_metadata().is_ok_and(|c| !c.is_dir())
        })
        .map(|e| du(&e.path()))
        .sum::<u64>()
}

/// Top-level entry names of `dir`, sorted, as lossy text.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn chown_user(w: &World, who: Who) {
    if who == Who::User {
        let st = Command::new("chown")
            .args(["-R", "-h", &format!("{TEST_UID}:{TEST_UID}")])
            .arg(w.home(who))
            .status()
            .unwrap();
        assert!(st.success());
    }
}

#[test]
fn the_private_state_is_pruned_oldest_first_and_hostile_plants_steer_nothing() {
    if !require("limits_prune") {
        return;
    }
    let w = world("prune", "egress-jail = 0\nprivate-state-max = 16M\n");
    for who in BOTH {
        let (cache, share) = private_dirs(&w, who);
        for d in [&cache, &share] {
            std::fs::create_dir_all(d).unwrap();
        }
        chown_user(&w, who);
        // Outside the private state: what a symlink or hard link points at.
        let outside = w.root.join(format!("outside-{who:?}"));
        let pl = Planter(who);
        pl.file(&outside.join("precious/keep"), 1 << 20);
        pl.file(&outside.join("hard"), 1 << 20);
        // Oldest first: a name that sorts last, a hard link out, plain data.
        pl.file(&cache.join("zzz-old/data"), 3 << 20);
        pl.hard_link(&outside.join("hard"), &cache.join("hard-link"));
        pl.file(&cache.join("old-b"), 3 << 20);
        // Data hidden in a directory whose modes the session took away.
        pl.file(&cache.join("locked/data"), 4 << 20);
        pl.chmod(&cache.join("locked"), 0);
        // Symlinks out of the private state, at the top and deeper.
        pl.symlink(&outside.join("precious"), &cache.join("link-out"));
        pl.file(&cache.join("old-a/file"), 1 << 20);
        pl.symlink(Path::new("/etc"), &cache.join("old-a/esc"));
        pl.symlink(&outside.join("precious/keep"), &share.join("file-out"));
        pl.file(&share.join("tool/a/b/c/d/e/f/g/h/lib"), 1 << 20);
        // A planted file larger than the whole bound.
        pl.file(&cache.join("huge"), 20 << 20);
        // Newest: a legitimate cache, and names that sort first.
        pl.file(&cache.join("fresh/data"), 2 << 20);
        for name in ["\u{1}aaa", " !first", "-rf", "..."] {
            pl.file(&cache.join(name), 100 << 10);
        }
        pl.file(&share.join("\nnewline"), 100 << 10);
        assert!(
            du(&cache) + du(&share) > 30 << 20,
            "control: the plants hold more than the bound"
        );

        let o = shell(&w, who, "echo SESSION-RAN");
        let (out, err) = (stdout(&o), stderr(&o));
        assert!(out.contains("SESSION-RAN"), "{who:?}: {out}{err}");
        assert!(
            err.contains("held") && err.contains("over private-state-max = 16M"),
            "{who:?}: no line about the pruning: {err}"
        );
        let total = du(&cache) + du(&share);
        assert!(
            total <= 16 << 20,
            "{who:?}: {total} bytes kept: {:?} {:?}",
            entries(&cache),
            entries(&share)
        );
        // Least recently changed first: the newest survive, names aside.
        assert_eq!(
            entries(&cache),
            ["\u{1}aaa", " !first", "-rf", "...", "fresh"],
            "{who:?}"
        );
        let share_left: Vec<String> = entries(&share)
            .into_iter()
            .filter(|n| n != "claude" && n != "applications")
            .collect();
        assert_eq!(share_left, ["\nnewline"], "{who:?}");
        // Nothing outside touched.
        assert_eq!(
            std::fs::metadata(outside.join("precious/keep"))
                .unwrap()
                .len(),
            1 << 20,
            "{who:?}"
        );
        assert_eq!(
            std::fs::read(outside.join("hard")).unwrap().len(),
            1 << 20,
            "{who:?}"
        );
        assert!(Path::new("/etc/passwd").exists());
        // Within the bound now: the next launch has nothing to prune.
        let o = shell(&w, who, "echo AGAIN");
        assert!(
            !stderr(&o).contains("private-state-max"),
            "{who:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn a_private_state_that_cannot_be_walked_safely_stops_the_launch() {
    if !require("limits_prune_closed") {
        return;
    }
    let w = world(
        "pruneclosed",
        "egress-jail = 0\nprivate-state-max = 16M\nclaude-dir-warn = 1M\n",
    );
    for who in BOTH {
        let (cache, _) = private_dirs(&w, who);
        // A session that ended normally leaves the total for the next launch.
        let o = shell(&w, who, "echo FIRST");
        assert!(stdout(&o).contains("FIRST"), "{who:?}: {}", stderr(&o));
        let marker = cache.parent().unwrap().join("private-usage");
        assert!(
            marker.exists(),
            "{who:?}: no measure left at the session's end"
        );
        // The hostile session (issue #45 item 6): deeper than the walk
        // goes, over the bound, a symlink out at the bottom. It ends
        // before its end could measure that much: the next launch walks.
        let deep: PathBuf = std::iter::once(cache.join("deep"))
            .chain((0..300).map(|_| PathBuf::from("d")))
            .collect();
        let outside = w.workspace(who).join("keep-me");
        Planter(who).file(&outside, 10);
        let o = shell(
            &w,
            who,
            &format!(
                "d=$HOME/.cache/deep; for i in $(seq 300); do d=$d/d; done; mkdir -p $d && \
                 ln -s {} $d/out && dd if=/dev/zero of=$d/data bs=1M count=20 2>/dev/null && echo PLANTED",
                outside.display()
            ),
        );
        assert!(stdout(&o).contains("PLANTED"), "{who:?}: {}", stderr(&o));
        assert!(
            deep.join("data").exists(),
            "{who:?}: the plant is not where the host keeps it"
        );
        // Its end could not measure: the next launch walks, and refuses.
        assert!(
            !marker.exists(),
            "{who:?}: a measure that did not finish left a total"
        );
        let o = shell(&w, who, "echo MUST-NOT-RUN");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(125), "{who:?}: {err}");
        assert!(!stdout(&o).contains("MUST-NOT-RUN"), "{who:?}");
        assert_eq!(err.lines().count(), 1, "{who:?}: {err}");
        assert!(
            err.contains("more than 256 directories deep")
                && err.contains(&format!(
                    "run `claude-sandbox doctor --fix` (with no session running) to remove {} safely",
                    cache.join("deep").display()
                ))
                && err.contains("private-state-max = off"),
            "{who:?}: {err}"
        );
        assert!(
            deep.join("data").exists(),
            "{who:?}: nothing is removed when the walk fails"
        );
        // The one command the refusal names: as the user, outside.
        let o = w.run(who, &[], &[SELF_BIN, "doctor", "--fix"]);
        let out = stdout(&o);
        assert!(
            out.contains(&format!(
                "fix  private state: removed {}",
                cache.join("deep").display()
            )),
            "{who:?}: {out}{}",
            stderr(&o)
        );
        assert!(!cache.join("deep").exists(), "{who:?}: {out}");
        assert!(outside.exists(), "{who:?}: --fix followed the symlink out");
        assert_eq!(
            entries(&cache),
            Vec::<String>::new(),
            "{who:?}: something lifted was left"
        );
        // What a session writes to ~/.claude has no bound a launch keeps:
        // doctor says how much is there, and warns past claude-dir-warn.
        let claude = w.home(who).join(".claude");
        Planter(who).file(&claude.join("settings.json"), 2);
        let o = shell(
            &w,
            who,
            "dd if=/dev/zero of=$HOME/.claude/grown bs=1M count=2 2>/dev/null; echo WROTE",
        );
        assert!(stdout(&o).contains("WROTE"), "{who:?}: {}", stderr(&o));
        let out = stdout(&w.run(who, &[], &[SELF_BIN, "doctor"]));
        assert!(
            out.lines().any(|l| l
                .starts_with(&format!("WARN ~/.claude: {} holds 2", claude.display()))
                && l.contains("over claude-dir-warn = 1M")),
            "{who:?}: {out}"
        );
        std::fs::remove_dir_all(&claude).unwrap();
        // Launches again, and a session that grew the state past the bound
        // has it pruned at the next launch.
        let o = shell(
            &w,
            who,
            "dd if=/dev/zero of=$HOME/.cache/grown bs=1M count=20 2>/dev/null; echo GREW",
        );
        assert!(stdout(&o).contains("GREW"), "{who:?}: {}", stderr(&o));
        let left = std::fs::read_to_string(&marker).unwrap_or_default();
        assert!(
            left.trim()
                .rsplit(' ')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n > 20 << 20),
            "{who:?}: {left:?}"
        );
        let o = shell(&w, who, "echo PRUNED");
        assert!(
            stderr(&o).contains("over private-state-max = 16M"),
            "{who:?}: {}",
            stderr(&o)
        );
        assert!(!cache.join("grown").exists(), "{who:?}");
    }
}

/// The checks `verify --json` fails, by name.
fn verify_failing(w: &World, who: Who, mutation: &str) -> Vec<String> {
    let env: Vec<(&str, &str)> = if mutation.is_empty() {
        vec![]
    } else {
        vec![("CLAUDE_SANDBOX_TEST_MUTATION", mutation)]
    };
    let o = w.run(
        who,
        &env,
        &[
            "claude",
            "shell",
            "/usr/libexec/claude-sandbox/claude-sandbox verify --json",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| {
        panic!(
            "{who:?} {mutation}: verify --json: {e}: {}{}",
            stdout(&o),
            stderr(&o)
        )
    });
    v.as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "FAIL")
        .map(|c| {
            eprintln!("{who:?} {mutation}: FAIL {}: {}", c["name"], c["detail"]);
            c["name"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn verify_fails_each_limit_check_under_its_mutation() {
    if !require("limits_verify") {
        return;
    }
    let w = World::new("limitsverify");
    w.use_mutation_binary();
    w.install_by_hand(
        &w.root.join("bin/probe"),
        "egress-jail = 0\npids-limit = 512\nprivate-state-max = 8M\n",
    );
    for who in BOTH {
        let (cache, _) = private_dirs(&w, who);
        let grown = cache.join("grown");
        Planter(who).file(&grown, 12 << 20);
        let base = verify_failing(&w, who, "");
        for mine in ["pids-limit", "tmpfs-sized", "private-state-bounded"] {
            assert!(
                !base.contains(&mine.to_string()),
                "{who:?}: {mine} fails unmutated: {base:?}"
            );
        }
        assert!(!grown.exists(), "{who:?}: the launch pruned the plant");
        for (mutation, check) in [
            ("no-pids-limit", "pids-limit"),
            ("tmpfs-unsized", "tmpfs-sized"),
            ("no-private-bound", "private-state-bounded"),
        ] {
            if mutation == "no-private-bound" {
                Planter(who).file(&grown, 12 << 20);
            }
            let f = verify_failing(&w, who, mutation);
            let new: Vec<&String> = f.iter().filter(|c| !base.contains(c)).collect();
            assert_eq!(
                new,
                [check],
                "{who:?} {mutation}: exactly its check fails: {f:?}"
            );
        }
    }
}

/// Launch cost of the private state's bound (issue #24): the median of 15
/// launches of `claude shell true` with `private-state-max = off`, with the
/// bound and a measure left by the last session (the usual launch), and
/// with the bound and no measure (the launch walks 100 000 files).
/// A measurement, not a check: `cargo test --test limits -- --ignored --nocapture launch_cost`.
#[test]
#[ignore]
fn launch_cost_of_the_private_state_bound() {
    if !require("limits_launch_cost") {
        return;
    }
    let median = |w: &World, before: &dyn Fn()| {
        let mut v: Vec<Duration> = (0..15)
            .map(|_| {
                before();
                let t = Instant::now();
                let o = shell(w, Who::User, "true");
                assert!(o.status.success(), "{}", stderr(&o));
                t.elapsed()
            })
            .collect();
        v.sort();
        v[7]
    };
    let off = world("costoff", "egress-jail = 0\nprivate-state-max = off\n");
    let on = world("coston", "egress-jail = 0\n");
    let (cache, _) = private_dirs(&on, Who::User);
    for d in 0..100 {
        for f in 0..1000 {
            let p = cache.join(format!("tool{}/d{d}/f{f}", d % 10));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"x").unwrap();
        }
    }
    chown_user(&on, Who::User);
    let marker = cache.parent().unwrap().join("private-usage");
    let t_off = median(&off, &|| {});
    let t_marker = median(&on, &|| {});
    let t_walk = median(&on, &|| {
        let _ = std::fs::remove_file(&marker);
    });
    eprintln!(
        "launch (median of 15): private-state-max = off {t_off:?}; bound, measure left {t_marker:?}; bound, 100 000 files walked {t_walk:?}"
    );
}

#[test]
fn a_user_whose_own_processes_fill_rlimit_nproc_is_told_why() {
    if !require("limits_rlimit_full") {
        return;
    }
    let w = world("rlimitfull", "egress-jail = 0\npids-limit = 64\n");
    let Some(b) = Bounded::new(200) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no pids cgroup for the test"
        );
        return;
    };
    // 70 processes of the test user outside the sandbox, in the test's cgroup.
    let mut sleeper = Command::new("setpriv");
    sleeper.args([
        &format!("--reuid={TEST_UID}"),
        &format!("--regid={TEST_UID}"),
        "--clear-groups",
        "sh",
        "-c",
        "for i in $(seq 70); do sleep 60 & done; wait",
    ]);
    let mut held = b.wrap(&sleeper).stdin(Stdio::null()).spawn().unwrap();
    let start = Instant::now();
    while b.current() < 70 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = shell(&w, Who::User, "echo MUST-NOT-RUN");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(!stdout(&o).contains("MUST-NOT-RUN"));
    assert!(
        err.contains("RLIMIT_NPROC")
            && err.contains("every process of this user")
            && err.contains("pids-limit = 64"),
        "{err}"
    );
    // Control: root is not limited by the user's count.
    let o = shell(&w, Who::Root, "echo ROOT-RUNS");
    assert!(stdout(&o).contains("ROOT-RUNS"), "{}", stderr(&o));
    drop(b);
    let _ = held.wait();
}
