//! Installer, integrity pin and guard hooks (issue #4).

mod common;
use common::*;

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

const WRAPPER: &str = "/usr/libexec/claude-sandbox/claude-wrapper";
const REPIN: &str = "claude-sandbox install --repin";

/// What [`snapshot`] records of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    kind: &'static str,
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    /// 0 for directories (creating an entry changes its directory's mtime).
    mtime_ns: i64,
    /// SHA-256 of a file's bytes, a link's target, or "" for a directory.
    content: String,
}

type Snapshot = BTreeMap<PathBuf, Entry>;

fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What [`snapshot`] records of `p` (symlinks not followed).
fn entry_of(p: &Path) -> Entry {
    let m = p.symlink_metadata().unwrap();
    let (kind, content) = if m.file_type().is_symlink() {
        ("link", std::fs::read_link(p).unwrap().display().to_string())
    } else if m.is_dir() {
        ("dir", String::new())
    } else {
        ("file", sha_hex(&std::fs::read(p).unwrap()))
    };
    Entry {
        kind,
        mode: m.mode() & 0o7777,
        uid: m.uid(),
        gid: m.gid(),
        size: m.len(),
        mtime_ns: if m.is_dir() {
            0
        } else {
            m.mtime() * 1_000_000_000 + m.mtime_nsec()
        },
        content,
    }
}

/// Every entry under `root`, recursively, symlinks not followed.
fn snapshot(root: &Path) -> Snapshot {
    fn walk(root: &Path, dir: &Path, out: &mut Snapshot) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let entry = entry_of(&p);
            let is_dir = entry.kind == "dir";
            out.insert(p.strip_prefix(root).unwrap().to_path_buf(), entry);
            if is_dir {
                walk(root, &p, out);
            }
        }
    }
    let mut out = Snapshot::new();
    walk(root, root, &mut out);
    out
}

/// This machine's own installation of the product, if any (absolute paths):
/// the tests hide it from their worlds and must leave it exactly as found.
fn machine_install() -> Snapshot {
    let mut out = Snapshot::new();
    for p in MACHINE_INSTALL.map(Path::new) {
        if p.symlink_metadata().is_err() {
            continue;
        }
        let entry = entry_of(p);
        if entry.kind == "dir" {
            out.extend(snapshot(p).into_iter().map(|(rel, e)| (p.join(rel), e)));
        }
        out.insert(p.to_path_buf(), entry);
    }
    out
}

/// The snapshot with every mtime blanked (for "restored as found": a
/// restored copy is new, so only its bytes, mode and owner can match).
fn ignoring_mtimes(s: &Snapshot) -> Snapshot {
    s.iter()
        .map(|(p, e)| {
            (
                p.clone(),
                Entry {
                    mtime_ns: 0,
                    ..e.clone()
                },
            )
        })
        .collect()
}

/// Panic with only the entries that differ.
fn assert_same(now: &Snapshot, then: &Snapshot, what: &str) {
    if now == then {
        return;
    }
    let mut diff = Vec::new();
    for (p, e) in then {
        match now.get(p) {
            None => diff.push(format!("  gone:    {} {e:?}", p.display())),
            Some(n) if n != e => diff.push(format!(
                "  changed: {}\n    was {e:?}\n    now {n:?}",
                p.display()
            )),
            Some(_) => {}
        }
    }
    for (p, n) in now {
        if !then.contains_key(p) {
            diff.push(format!("  new:     {} {n:?}", p.display()));
        }
    }
    panic!("{what}:\n{}", diff.join("\n"));
}

/// A private directory for one test's staging roots and inputs.
struct Scratch {
    dir: TestDir,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        Scratch {
            dir: TestDir::new("install", name),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// An empty directory (a staging root, say).
    fn dir(&self, rel: &str) -> PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    /// A file with `content` and `mode`.
    fn file(&self, rel: &str, content: &[u8], mode: u32) -> PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }
}

/// A stand-in Claude Code that reports a version supporting
/// CLAUDE_CODE_PROCESS_WRAPPER (v2.1.208+).
const WRAPPER_CAPABLE_CLAUDE: &[u8] =
    b"#!/bin/sh\nif [ \"$1\" = --version ]; then echo '2.1.330 (Claude Code)'; fi\nexit 0\n";

/// npm stand-in: a test that expects the installer to find the binary itself
/// must fail, not download Claude Code, when the installer looks elsewhere.
const NO_NPM: &[u8] = b"#!/bin/sh\necho 'npm is disabled in this test' >&2\nexit 1\n";

fn csb(args: &[&str]) -> Output {
    Command::new(our_binary()).args(args).output().unwrap()
}

fn install_into(root: &Path, real: &Path, extra: &[&str]) -> Output {
    let mut a = vec![
        "install",
        "--prefix",
        root.to_str().unwrap(),
        "--no-packages",
        "--user",
        "root",
        "--real-claude",
        real.to_str().unwrap(),
    ];
    a.extend_from_slice(extra);
    csb(&a)
}

fn uninstall_from(root: &Path) -> Output {
    csb(&["uninstall", "--prefix", root.to_str().unwrap()])
}

fn managed_settings(root: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(root.join("etc/claude-code/managed-settings.json")).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Non-empty lines of stderr.
fn stderr_lines(o: &Output) -> Vec<String> {
    stderr(o)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn staging_install_is_complete_idempotent_and_reversible() {
    if !require("staging_install") {
        return;
    }
    let s = Scratch::new("idem");
    let root = s.dir("stage");
    let real = s.file("in/claude", WRAPPER_CAPABLE_CLAUDE, 0o755);
    // Something foreign that must survive untouched.
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/hostname"), "foreign\n").unwrap();
    let before = snapshot(&root);
    let o = install_into(&root, &real, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (path, mode) in [
        ("usr/local/bin/claude", None),
        ("usr/libexec/claude-sandbox/claude-sandbox", Some(0o755)),
        ("usr/libexec/claude-sandbox/claude", Some(0o755)),
        ("usr/libexec/claude-sandbox/claude-wrapper", None),
        ("usr/libexec/claude-sandbox/claude.pin", Some(0o644)),
        ("usr/libexec/claude-sandbox/launch.json", Some(0o644)),
        ("etc/claude-sandbox.conf", Some(0o644)),
        ("etc/claude-gitconfig", Some(0o644)),
        ("etc/claude-code/managed-settings.json", Some(0o644)),
        ("root/.config/gh", Some(0o700)),
        ("root/.config/glab-cli", Some(0o700)),
        ("root/.claude.json", Some(0o600)),
    ] {
        let m = root
            .join(path)
            .symlink_metadata()
            .unwrap_or_else(|_| panic!("{path} missing"));
        assert_eq!(m.uid(), 0, "{path} owned by root");
        if let Some(mode) = mode {
            assert_eq!(m.permissions().mode() & 0o7777, mode, "{path}");
        }
    }
    assert_eq!(
        std::fs::read_link(root.join("usr/local/bin/claude")).unwrap(),
        PathBuf::from(SELF_BIN)
    );
    // The launch record's mount point: an empty file.
    assert_eq!(
        std::fs::metadata(root.join("usr/libexec/claude-sandbox/launch.json"))
            .unwrap()
            .len(),
        0,
        "launch.json must be empty outside a launch"
    );
    // This Claude Code supports the process wrapper: the entry is our binary
    // by name, and the managed settings point Claude Code at it.
    assert_eq!(
        std::fs::read_link(root.join("usr/libexec/claude-sandbox/claude-wrapper")).unwrap(),
        PathBuf::from(SELF_BIN)
    );
    assert_eq!(
        managed_settings(&root)["env"]["CLAUDE_CODE_PROCESS_WRAPPER"],
        WRAPPER
    );
    let flag = root.join("etc/claude-code/allow-unwrapped");
    assert!(
        flag.symlink_metadata().is_err(),
        "allow-unwrapped created without --allow-unwrapped"
    );
    let installed = snapshot(&root);
    let o = install_into(&root, &real, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("nothing changed"), "{}", stdout(&o));
    assert_same(
        &snapshot(&root),
        &installed,
        "a second install changed a byte, a mode or an mtime",
    );
    // The gate flag: --allow-unwrapped creates it (root 0644, presence is
    // the signal); an install without the flag removes the stale one.
    let o = install_into(&root, &real, &["--allow-unwrapped"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let m = flag
        .symlink_metadata()
        .expect("--allow-unwrapped did not create /etc/claude-code/allow-unwrapped");
    assert!(m.is_file());
    assert_eq!((m.uid(), m.mode() & 0o7777), (0, 0o644));
    let o = install_into(&root, &real, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        flag.symlink_metadata().is_err(),
        "an install without --allow-unwrapped left the stale flag: {}",
        stdout(&o)
    );
    // Flag in place again; uninstall must take it too.
    assert!(install_into(&root, &real, &["--allow-unwrapped"])
        .status
        .success());
    assert!(flag.exists());
    let o = uninstall_from(&root);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_same(
        &snapshot(&root),
        &before,
        "uninstall left the staging root different",
    );
}

#[test]
fn managed_settings_merged_never_owned() {
    if !require("managed_settings") {
        return;
    }
    let s = Scratch::new("settings");
    let root = s.dir("stage");
    let probe = probe_binary();
    std::fs::create_dir_all(root.join("etc/claude-code")).unwrap();
    let foreign = r#"{"permissions":{"deny":["Read(./.env)"]},"hooks":{"SessionStart":[{"matcher":"startup","hooks":[{"type":"command","command":"/opt/corp/audit"}]}]},"model":"corp","autoUpdates":true,"env":{"DISABLE_AUTOUPDATER":"0","CORP":"1"}}"#;
    std::fs::write(root.join("etc/claude-code/managed-settings.json"), foreign).unwrap();
    // A gate flag left by an earlier install with --allow-unwrapped.
    std::fs::write(root.join("etc/claude-code/allow-unwrapped"), "").unwrap();
    for _ in 0..3 {
        let o = install_into(&root, &probe, &[]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert!(
        !root.join("etc/claude-code/allow-unwrapped").exists(),
        "an install without --allow-unwrapped kept a stale flag"
    );
    let text = std::fs::read_to_string(root.join("etc/claude-code/managed-settings.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["permissions"]["deny"][0], "Read(./.env)");
    assert_eq!(v["model"], "corp");
    assert_eq!(
        v["hooks"]["SessionStart"][0]["hooks"][0]["command"],
        "/opt/corp/audit"
    );
    assert_eq!(text.matches("hook session-start").count(), 1, "{text}");
    assert_eq!(text.matches("hook prompt-gate").count(), 1, "{text}");
    assert_eq!(v["env"]["DISABLE_AUTOUPDATER"], "1");
    assert_eq!(v["autoUpdates"], false);
    // The probe reports no Claude Code version: no process wrapper in the
    // settings, and if the entry exists at all it is our binary.
    assert!(
        v["env"].get("CLAUDE_CODE_PROCESS_WRAPPER").is_none(),
        "process wrapper set for a Claude Code that does not support it: {text}"
    );
    if let Ok(t) = std::fs::read_link(root.join("usr/libexec/claude-sandbox/claude-wrapper")) {
        assert_eq!(t, PathBuf::from(SELF_BIN));
    }
    assert_eq!(v["env"]["CORP"], "1");
    // Uninstall removes only ours, and puts back the values install overwrote
    // (the first install's record, not what the later two saw).
    assert!(uninstall_from(&root).status.success());
    let back: serde_json::Value = managed_settings(&root);
    assert_eq!(
        back,
        serde_json::from_str::<serde_json::Value>(foreign).unwrap()
    );
    // A file that is not JSON is left byte-identical, with a warning; the rest installs.
    let root2 = s.dir("stage-bad-json");
    std::fs::create_dir_all(root2.join("etc/claude-code")).unwrap();
    std::fs::write(
        root2.join("etc/claude-code/managed-settings.json"),
        "{ this is: not json",
    )
    .unwrap();
    let o = install_into(&root2, &probe, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning") && stderr(&o).contains("not JSON"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_to_string(root2.join("etc/claude-code/managed-settings.json")).unwrap(),
        "{ this is: not json"
    );
    assert!(root2.join("usr/libexec/claude-sandbox/claude.pin").exists());
}

/// Every launch of the shadow, by root and by the unprivileged user, is
/// refused with 126, runs nothing, and names both digests and the re-pin command.
fn assert_refused(w: &World, pinned: &str, actual: &str, what: &str) {
    for who in BOTH {
        let o = w.run(who, &[], &["claude", "report"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(126), "{what}, {who:?}: {err}");
        assert!(
            stdout(&o).is_empty(),
            "{what}, {who:?}: the binary ran: {}",
            stdout(&o)
        );
        assert!(
            err.contains("expected") && err.contains(pinned),
            "{what}, {who:?}: the pinned sha256 {pinned} is not named: {err}"
        );
        assert!(
            err.contains(actual),
            "{what}, {who:?}: the actual sha256 {actual} is not named: {err}"
        );
        assert!(
            err.contains(REPIN),
            "{what}, {who:?}: the re-pin command is not named: {err}"
        );
    }
}

#[test]
fn tampered_binary_refused_until_repinned() {
    if !require("integrity") {
        return;
    }
    let w = World::with_probe("pin");
    let real = "/usr/libexec/claude-sandbox/claude";
    let probe = std::fs::read(w.root.join("bin/probe")).unwrap();
    let pinned = sha_hex(&probe);
    let o = w.run_root_raw("cat /usr/libexec/claude-sandbox/claude.pin");
    let pin: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
    assert_eq!(pin["sha256"], pinned.as_str());
    assert_eq!(pin["size"], probe.len() as u64);
    let o = w.run(Who::User, &[], &["claude", "exit", "0"]);
    assert!(o.status.success(), "{}", stderr(&o));

    // One byte appended, in place.
    assert!(w
        .run_root_raw(&format!("printf x >> {real}"))
        .status
        .success());
    let mut appended = probe.clone();
    appended.push(b'x');
    assert_refused(&w, &pinned, &sha_hex(&appended), "one byte appended");

    // Another executable of exactly the pinned size: a script that would
    // announce itself, padded with a comment.
    let mut same = b"#!/bin/sh\necho TAMPERED-BINARY-RAN\nexit 0\n#".to_vec();
    assert!(same.len() < probe.len());
    same.resize(probe.len() - 1, b'x');
    same.push(b'\n');
    assert_eq!(same.len(), probe.len());
    let same_path = w.root.join("bin/same-size");
    std::fs::write(&same_path, &same).unwrap();
    std::fs::set_permissions(&same_path, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Another test thread forking while the file was open for writing holds
    // it until that child's exec: ETXTBSY for a moment, so retry briefly.
    let ran = (0..50)
        .find_map(|_| match Command::new(&same_path).output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                None
            }
            other => Some(other.unwrap()),
        })
        .expect("the stand-in stayed busy for 1 s");
    assert_eq!(
        stdout(&ran),
        "TAMPERED-BINARY-RAN\n",
        "the stand-in is not a working executable"
    );
    let o = w.run_root_raw(&format!(
        "install -m 0755 {} {real} && stat -c %s {real}",
        same_path.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), probe.len().to_string());
    assert_refused(&w, &pinned, &sha_hex(&same), "same-size swap");

    // Re-pin a deliberately changed binary (the probe plus one byte, still a
    // working ELF): old and new digests shown, and launches work again.
    let new_path = w.root.join("bin/probe-changed");
    std::fs::write(&new_path, &appended).unwrap();
    assert!(w
        .run_root_raw(&format!("install -m 0755 {} {real}", new_path.display()))
        .status
        .success());
    let o = w.run_root_raw(&format!("{SELF_BIN} install --repin"));
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let new = sha_hex(&appended);
    assert!(
        out.lines()
            .any(|l| l.contains("old") && l.contains(&pinned)),
        "the old digest {pinned} is not shown: {out}"
    );
    assert!(
        out.lines().any(|l| l.contains("new") && l.contains(&new)),
        "the new digest {new} is not shown: {out}"
    );
    for who in BOTH {
        let o = w.run(who, &[], &["claude", "exit", "7"]);
        assert_eq!(
            o.status.code(),
            Some(7),
            "{who:?} after re-pin: {}",
            stderr(&o)
        );
    }
}

#[test]
fn prompt_gate_and_session_start() {
    if !require("gate") {
        return;
    }
    let w = World::with_probe("gate");
    let hook = "/usr/libexec/claude-sandbox/claude-sandbox";
    let gate = |env: &[(&str, &str)], setup: &str| {
        w.command_with_setup(
            Who::User,
            &w.workspace(Who::User),
            setup,
            env,
            &[hook, "hook", "prompt-gate"],
        )
        .output()
        .unwrap()
    };
    let o = gate(&[], "");
    assert_eq!(o.status.code(), Some(2), "outside: {}", stderr(&o));
    assert!(stderr(&o).contains("not sandboxed"));
    assert_eq!(
        gate(&[("IS_SANDBOX", "1")], "").status.code(),
        Some(2),
        "a forged IS_SANDBOX must not open the gate"
    );
    assert_eq!(
        gate(&[("CLAUDE_CODE_REMOTE", "true")], "").status.code(),
        Some(0)
    );
    assert_eq!(
        gate(
            &[],
            "mkdir -p /etc/claude-code && touch /etc/claude-code/allow-unwrapped"
        )
        .status
        .code(),
        Some(0)
    );
    assert!(w
        .run_root_raw("rm -f /etc/claude-code/allow-unwrapped")
        .status
        .success());
    for who in BOTH {
        let o = w.run(
            who,
            &[],
            &[
                "claude",
                "shell",
                &format!("echo '{{}}' | {hook} hook prompt-gate; echo rc=$?"),
            ],
        );
        assert!(
            stdout(&o).contains("rc=0"),
            "{who:?} inside: {}{}",
            stdout(&o),
            stderr(&o)
        );
        // session-start: no warning inside when healthy (a root session
        // is told which directories its root view hides whole, issue
        // #48), a warning with a leaked token.
        let o = w.run(
            who,
            &[],
            &[
                "claude",
                "shell",
                &format!("{hook} hook session-start </dev/null; echo END"),
            ],
        );
        let out = stdout(&o);
        let told = out
            .strip_suffix("END\n")
            .unwrap_or_else(|| panic!("{who:?}: {out}"));
        if !told.is_empty() {
            let v: serde_json::Value =
                serde_json::from_str(told.trim()).unwrap_or_else(|e| panic!("{who:?}: {e}: {out}"));
            let ctx = v["hookSpecificOutput"]["additionalContext"]
                .as_str()
                .unwrap_or_default();
            assert!(
                who == Who::Root
                    && v.get("systemMessage").is_none()
                    && ctx.lines().all(|l| l.contains("hidden whole")),
                "{who:?}: {out}"
            );
        }
        let o = w.run(
            who,
            &[],
            &[
                "claude",
                "shell",
                &format!("GH_TOKEN=ghp_x {hook} hook session-start </dev/null"),
            ],
        );
        let v: serde_json::Value = serde_json::from_str(stdout(&o).trim())
            .unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
        assert!(
            v["systemMessage"].as_str().unwrap().contains("GH_TOKEN"),
            "{v}"
        );
    }
    let o = w
        .command(Who::User, &[], &[hook, "hook", "session-start"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert!(v["systemMessage"]
        .as_str()
        .unwrap()
        .contains("NOT running inside"));
    assert!(v["hookSpecificOutput"]["additionalContext"].is_string());
}

/// tests/fixtures/fake_anthropic.py on a free loopback port for `secs`
/// seconds, logging the requests it answers to `log`.
struct FakeApi {
    child: std::process::Child,
    base: String,
    log: PathBuf,
}

impl FakeApi {
    fn start(w: &World, secs: u32) -> FakeApi {
        FakeApi::start_with(w, secs, &[])
    }

    /// [`FakeApi::start`] with more of the fake's options (`--tool-use CMD`).
    fn start_with(w: &World, secs: u32, extra: &[&str]) -> FakeApi {
        let port = free_loopback_port();
        let log = w.root.join("api.log");
        let child = Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/fake_anthropic.py"
            ))
            .arg(port.to_string())
            .arg(&log)
            .arg(secs.to_string())
            .args(extra)
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        FakeApi {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A failing test leaves no fake API behind either.
impl Drop for FakeApi {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Install the real Claude Code in `w` for root, with the jail off and the
/// variables that point it at the fake Messages API passed through.
fn install_real_for_fake_api(w: &World, real: &Path, base: &str) {
    std::fs::write(
        w.root.join("bin/conf"),
        "egress-jail = 0\npass-env = ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC\n",
    )
    .unwrap();
    let o = w.run_root_raw(&format!(
        "ANTHROPIC_BASE_URL={base} {r}/bin/claude-sandbox install --no-packages --user root --real-claude {real} --config {r}/bin/conf",
        r = w.root.display(),
        real = real.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn managed_hooks_fire_in_the_real_claude_code() {
    if !require("real_client_gate") {
        return;
    }
    let Some(real) = real_claude() else { return };
    let w = World::new("realgate");
    let mut api = FakeApi::start(&w, 120);
    let (base, log) = (api.base.clone(), api.log.clone());
    install_real_for_fake_api(&w, &real, &base);
    let env = [
        ("ANTHROPIC_BASE_URL", base.as_str()),
        ("ANTHROPIC_API_KEY", "sk-ant-test"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ];
    // Unwrapped: the real binary run directly. The gate stops the prompt.
    // It runs as root outside any sandbox: besides the world's overlays and
    // root home, a private /tmp keeps its scratch files off this machine.
    let o = w
        .command_with_setup(
            Who::Root,
            &w.workspace(Who::Root),
            "mount -t tmpfs -o mode=1777 tmpfs /tmp\n",
            &env,
            &[
                "/usr/libexec/claude-sandbox/claude",
                "-p",
                "hello-unwrapped",
            ],
        )
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !logged.contains("hello-unwrapped"),
        "the unwrapped prompt reached the API: {logged}"
    );
    assert!(
        format!("{}{}", stdout(&o), stderr(&o)).contains("not sandboxed"),
        "gate message not shown: {} {}",
        stdout(&o),
        stderr(&o)
    );
    // Through the shadow: the prompt reaches the API and the answer comes back.
    let o = w.run(Who::Root, &env, &["claude", "-p", "hello-wrapped"]);
    api.stop();
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("PONG-FROM-FAKE-API"), "{}", stdout(&o));
    assert!(logged.contains("hello-wrapped"), "{logged}");
}

/// Issue #44: what the sandbox refused during a tool call reaches the model
/// with that call's result, through the managed PostToolUse/Failure hook,
/// in the real Claude Code: the fake API makes the model run a command
/// that writes a protected path, and the next request it receives carries
/// the refusal's line.
#[test]
fn a_refusal_reaches_the_model_with_the_tool_call_that_caused_it() {
    if !require("real_client_notices") {
        return;
    }
    let Some(real) = real_claude() else { return };
    let w = World::new("realnotices");
    let mut api = FakeApi::start_with(
        &w,
        180,
        &[
            "--tool-use",
            // Through python: Claude Code itself asks before a shell
            // redirection writes a file it deems sensitive, such as `.envrc`.
            "python3 -c \"open('.env' + 'rc', 'w').write('touch MARK')\"",
        ],
    );
    let (base, log) = (api.base.clone(), api.log.clone());
    install_real_for_fake_api(&w, &real, &base);
    let env = [
        ("ANTHROPIC_BASE_URL", base.as_str()),
        ("ANTHROPIC_API_KEY", "sk-ant-test"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ];
    let o = w.run(
        Who::Root,
        &env,
        &["claude", "-p", "write the envrc", "--allowedTools", "Bash"],
    );
    api.stop();
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let after: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("toolu_fake1") && l.contains("tool_result"))
        .collect();
    assert!(
        !after.is_empty(),
        "no request after the tool call:\n{}\n{}\n{logged}",
        stdout(&o),
        stderr(&o)
    );
    let envrc = w.workspace(Who::Root).join(".envrc").display().to_string();
    assert!(
        after
            .iter()
            .any(|l| l.contains(&format!("claude-sandbox: refused to write {envrc}"))),
        "the refusal did not reach the model: {after:?}"
    );
    assert!(!w.workspace(Who::Root).join(".envrc").exists());
}

/// What a sandboxed session can plant for the next unsandboxed start, each
/// writing a marker into `markers` when it runs.
const PLANTED: [&str; 5] = [
    "user-session-start",
    "project-session-start",
    "api-key-helper",
    "mcp-user",
    "mcp-project",
];

/// Plant [`PLANTED`] in root's home and workspace of `w`: hooks, an
/// apiKeyHelper and MCP servers in `~/.claude/settings.json`,
/// `~/.claude.json`, the project's `.claude/settings.json` and `.mcp.json`.
fn plant_user_code(w: &World, markers: &Path) {
    let m = markers.display();
    let touch = |name: &str| format!("touch {m}/{name}");
    let settings = serde_json::json!({
        "hooks": { "SessionStart": [ { "hooks": [ { "type": "command", "command": touch("user-session-start") } ] } ] },
        "apiKeyHelper": format!("{}; echo sk-ant-test", touch("api-key-helper")),
        "enableAllProjectMcpServers": true,
    });
    w.put(Who::Root, ".claude/settings.json", &settings.to_string());
    let server = |name: &str| serde_json::json!({ "type": "stdio", "command": "sh", "args": ["-c", touch(name)] });
    let claude_json = serde_json::json!({ "mcpServers": { "usersrv": server("mcp-user") } });
    w.put(Who::Root, ".claude.json", &claude_json.to_string());
    let ws = w.workspace(Who::Root);
    std::fs::create_dir_all(ws.join(".claude")).unwrap();
    let project = serde_json::json!({
        "hooks": { "SessionStart": [ { "hooks": [ { "type": "command", "command": touch("project-session-start") } ] } ] },
    });
    std::fs::write(ws.join(".claude/settings.json"), project.to_string()).unwrap();
    let mcp = serde_json::json!({ "mcpServers": { "projsrv": server("mcp-project") } });
    std::fs::write(ws.join(".mcp.json"), mcp.to_string()).unwrap();
}

/// The markers present, emptied for the next run.
fn take_markers(markers: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(markers)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    for n in &v {
        std::fs::remove_file(markers.join(n)).unwrap();
    }
    v
}

#[test]
fn planted_user_code_runs_only_inside_the_sandbox() {
    if !require("lockdown") {
        return;
    }
    let Some(real) = real_claude() else { return };
    let w = World::new("lockdown");
    let mut api = FakeApi::start(&w, 300);
    let (base, log) = (api.base.clone(), api.log.clone());
    install_real_for_fake_api(&w, &real, &base);
    let installed = stdout(&w.run_root_raw("cat /etc/claude-code/managed-settings.json"));
    let v: serde_json::Value =
        serde_json::from_str(&installed).unwrap_or_else(|e| panic!("{e}: {installed}"));
    assert_eq!(v["allowManagedHooksOnly"], true, "{installed}");
    // The endpoint pins hold the operator's gateway: install's own
    // environment (decision 0031).
    assert_eq!(v["env"]["ANTHROPIC_BASE_URL"], base.as_str(), "{installed}");
    assert_eq!(v["env"]["NODE_TLS_REJECT_UNAUTHORIZED"], "", "{installed}");
    // The markers live in the workspace: writable outside and inside alike.
    let markers = w.workspace(Who::Root).join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    plant_user_code(&w, &markers);
    let env = [
        ("ANTHROPIC_BASE_URL", base.as_str()),
        ("ANTHROPIC_API_KEY", "sk-ant-test"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ];
    // The real binary started directly, as a user (or an IDE) might; a
    // private /tmp keeps its scratch files off this machine.
    let unwrapped = |prompt: &str| {
        w.command_with_setup(
            Who::Root,
            &w.workspace(Who::Root),
            "mount -t tmpfs -o mode=1777 tmpfs /tmp\n",
            &env,
            &["/usr/libexec/claude-sandbox/claude", "-p", prompt],
        )
        .stdin(Stdio::null())
        .output()
        .unwrap()
    };
    let set_managed = |text: &str| {
        std::fs::write(w.root.join("bin/managed.json"), text).unwrap();
        let o = w.run_root_raw(&format!(
            "install -m 0644 {}/bin/managed.json /etc/claude-code/managed-settings.json",
            w.root.display()
        ));
        assert!(o.status.success(), "{}", stderr(&o));
    };

    // 1. With the managed settings install wrote: none of it runs, and the
    //    guard (managed hooks) still does: the gate refuses the prompt.
    let o = unwrapped("hello-locked");
    let out = format!("{}{}", stdout(&o), stderr(&o));
    assert!(out.contains("not sandboxed"), "the gate did not run: {out}");
    assert_eq!(
        take_markers(&markers),
        Vec::<String>::new(),
        "planted code ran unsandboxed despite the lockdown: {out}"
    );

    // 2. Control: the same settings without the lockdown keys. Everything
    //    planted runs before the gate refuses the prompt (so step 1 can fail).
    let control = claude_sandbox::fuzz_targets::hooks::inside_managed(&installed).unwrap();
    assert!(!control.contains("allowManagedHooksOnly"), "{control}");
    set_managed(&control);
    let o = unwrapped("hello-control");
    let out = format!("{}{}", stdout(&o), stderr(&o));
    assert!(out.contains("not sandboxed"), "{out}");
    let mut planted: Vec<String> = PLANTED.iter().map(|s| s.to_string()).collect();
    planted.sort();
    assert_eq!(
        take_markers(&markers),
        planted,
        "the control run did not run what was planted: {out}"
    );
    set_managed(&installed);

    // 3. Through the shadow, with the lockdown on the host: inside, the
    //    user's own hooks, helper and MCP servers run, and the prompt
    //    reaches the API.
    let o = w.run(Who::Root, &env, &["claude", "-p", "hello-wrapped"]);
    api.stop();
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("PONG-FROM-FAKE-API"), "{}", stdout(&o));
    assert!(logged.contains("hello-wrapped"), "{logged}");
    assert!(!logged.contains("hello-locked") && !logged.contains("hello-control"));
    let ran = take_markers(&markers);
    for m in PLANTED {
        assert!(
            ran.iter().any(|r| r == m),
            "{m} did not run inside the sandbox: {ran:?}"
        );
    }
    // The host's file is untouched by the launch.
    assert_eq!(
        stdout(&w.run_root_raw("cat /etc/claude-code/managed-settings.json")),
        installed
    );
}

/// `doctor` as `who`: (exit status, its FAIL lines).
fn doctor(w: &World, who: Who) -> (Option<i32>, Vec<String>, String) {
    let o = w.run(who, &[], &[SELF_BIN, "doctor"]);
    let out = format!("{}{}", stdout(&o), stderr(&o));
    let fails = stdout(&o)
        .lines()
        .filter(|l| l.starts_with("FAIL"))
        .map(str::to_string)
        .collect();
    (o.status.code(), fails, out)
}

/// An executable `claude` that would run unsandboxed, at `rel` in `who`'s home.
fn stray_claude(w: &World, who: Who, rel: &str) -> PathBuf {
    let stray = w.put(who, rel, "#!/bin/sh\necho unsandboxed\n");
    std::fs::set_permissions(&stray, std::fs::Permissions::from_mode(0o755)).unwrap();
    stray
}

/// `doctor` as `who` fails, and one of its FAIL lines contains every one of `needles`.
fn assert_doctor_fails_naming(w: &World, who: Who, needles: &[&str], why: &str) {
    let (code, fails, out) = doctor(w, who);
    assert_ne!(code, Some(0), "{who:?}: doctor passed {why}: {out}");
    assert!(
        fails.iter().any(|l| needles.iter().all(|n| l.contains(n))),
        "{who:?}: no FAIL line names {needles:?} ({why}): {out}"
    );
}

#[test]
fn full_install_on_real_paths_then_doctor_and_version_for_both_users() {
    if !require("full_install") {
        return;
    }
    let Some(real) = real_claude() else { return };
    // What this machine's own root home holds where the installer writes for root.
    let machine_root = [
        "/root/.claude.json",
        "/root/.config/gh",
        "/root/.config/glab-cli",
    ];
    let before: Vec<bool> = machine_root.iter().map(|p| Path::new(p).exists()).collect();
    let machine_before = machine_install();
    let w = World::new("fullinstall");
    for who in BOTH {
        let o = w.run_root_raw(&format!(
            "{r}/bin/claude-sandbox install --no-packages --user {u} --real-claude {real}",
            r = w.root.display(),
            u = World::user_name(who),
            real = real.display()
        ));
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
    }
    for who in BOTH {
        let (code, fails, out) = doctor(&w, who);
        assert_eq!(code, Some(0), "{who:?} doctor: {out}");
        assert!(fails.is_empty(), "{who:?} doctor: {out}");
        let o = w.run(who, &[], &["claude", "--version"]);
        assert!(
            stdout(&o).contains("(Claude Code)"),
            "{who:?}: {}{}",
            stdout(&o),
            stderr(&o)
        );
    }
    // The process wrapper, exactly when this Claude Code supports it (v2.1.208+).
    let version = Command::new(&real).arg("--version").output().unwrap();
    let v: Vec<u64> = stdout(&version)
        .split_whitespace()
        .next()
        .unwrap_or("")
        .split('.')
        .map(|p| p.parse().unwrap_or(0))
        .collect();
    let supported = v.len() == 3 && (v[0], v[1], v[2]) >= (2, 1, 208);
    let o = w.run_root_raw(&format!(
        "readlink {WRAPPER}; cat /etc/claude-code/managed-settings.json"
    ));
    let out = stdout(&o);
    let (link, settings) = out.split_once('\n').unwrap_or(("", &out));
    let settings: serde_json::Value =
        serde_json::from_str(settings).unwrap_or_else(|e| panic!("{e}: {out}"));
    if supported {
        assert_eq!(link, SELF_BIN, "{WRAPPER}: {out}{}", stderr(&o));
        assert_eq!(settings["env"]["CLAUDE_CODE_PROCESS_WRAPPER"], WRAPPER);
    } else {
        assert!(settings["env"].get("CLAUDE_CODE_PROCESS_WRAPPER").is_none());
    }
    // doctor names a stray ~/.local/bin/claude (and is happy again without it).
    for who in BOTH {
        let stray = stray_claude(&w, who, ".local/bin/claude");
        assert_doctor_fails_naming(&w, who, &[".local/bin/claude"], "with ~/.local/bin/claude");
        std::fs::remove_file(&stray).unwrap();
        let (code, _, out) = doctor(&w, who);
        assert_eq!(code, Some(0), "{who:?} doctor after removing it: {out}");
    }
    // doctor asks the user's own login shell: a directory its profile puts
    // first on PATH, holding a `claude`, fails the PATH check; one that is
    // only on the PATH doctor itself was started with does not count.
    for who in BOTH {
        let stray = stray_claude(&w, who, "opt/bin/claude");
        let callers_path = format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            stray.parent().unwrap().display()
        );
        let o = w.run(who, &[("PATH", &callers_path)], &[SELF_BIN, "doctor"]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{who:?}: doctor judged the caller's PATH, not a login's: {}",
            stdout(&o)
        );
        let profile = w.put(
            who,
            ".profile",
            "PATH=\"$HOME/opt/bin:$PATH\"\nexport PATH\necho profile-noise\n",
        );
        assert_doctor_fails_naming(
            &w,
            who,
            &["FAIL PATH", &stray.display().to_string()],
            "with a stray first on a login's PATH",
        );
        std::fs::remove_file(&profile).unwrap();
        std::fs::remove_file(&stray).unwrap();
    }
    // The login shell is the user's own (zsh reads ~/.zprofile, which bash
    // and sh never read).
    if Path::new("/usr/bin/zsh").exists() {
        let stray = stray_claude(&w, Who::User, "opt/bin/claude");
        let zprofile = w.put(Who::User, ".zprofile", "path=($HOME/opt/bin $path)\n");
        let chsh = |shell: &str| {
            let o = w.run_root_raw(&format!("usermod -s {shell} {TEST_USER}"));
            assert!(o.status.success(), "usermod: {}", stderr(&o));
        };
        chsh("/usr/bin/zsh");
        assert_doctor_fails_naming(
            &w,
            Who::User,
            &["(/usr/bin/zsh)", &stray.display().to_string()],
            "with a stray first on zsh's PATH",
        );
        chsh("/bin/sh");
        let (code, _, out) = doctor(&w, Who::User);
        assert_eq!(code, Some(0), "sh does not read ~/.zprofile: {out}");
        std::fs::remove_file(&zprofile).unwrap();
        std::fs::remove_file(&stray).unwrap();
    } else if std::env::var_os("CI").is_some() {
        panic!("zsh missing (CI: scripts/test.sh installs it)");
    } else {
        eprintln!("\n!!!! SKIPPED: doctor with a zsh login shell: /usr/bin/zsh missing (apt-get install zsh) !!!!\n");
    }
    // doctor names a real binary that no longer matches its pin.
    assert!(w
        .run_root_raw("printf x >> /usr/libexec/claude-sandbox/claude")
        .status
        .success());
    for who in BOTH {
        assert_doctor_fails_naming(
            &w,
            who,
            &["pin", "does not match", REPIN],
            "a tampered binary",
        );
    }
    // The world's overlays took every write: this machine's own installation
    // (none, or what scripts/setup.sh put there) is as it was, and the install
    // for root went to the world's root home, not to /root.
    assert_same(
        &machine_install(),
        &machine_before,
        "this machine's installation",
    );
    assert!(w.home(Who::Root).join(".claude.json").exists());
    let after: Vec<bool> = machine_root.iter().map(|p| Path::new(p).exists()).collect();
    assert_eq!(
        before, after,
        "the install touched this machine's {machine_root:?}"
    );
}

#[test]
fn bad_input_leaves_nothing_half_installed() {
    if !require("install_bad_input") {
        return;
    }
    let s = Scratch::new("bad");
    let root = s.dir("stage");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/hostname"), "foreign\n").unwrap();
    let before = snapshot(&root);
    let probe = probe_binary();
    let p = probe.to_str().unwrap();
    let bad_conf = s.file(
        "in/bad.conf",
        b"egress-jail = 0\nallow-ip = 10.0.0.0/8\n",
        0o644,
    );
    let not_exec = s.file("in/not-exec", b"#!/bin/sh\n", 0o644);
    let zero = s.file("in/zero", b"0\n", 0o644);
    let missing = s.path("no-such-dir");
    let r = root.to_str().unwrap();
    let bin = our_binary();
    let direct = |args: &[&str]| {
        let mut c = Command::new(&bin);
        c.args(args);
        c
    };
    let install = [
        "install",
        "--prefix",
        r,
        "--no-packages",
        "--real-claude",
        p,
    ];
    let mut not_root = Command::new("setpriv");
    not_root
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args(install);
    // User namespaces disabled, simulated in a private mount namespace.
    let mut no_userns = Command::new("unshare");
    no_userns
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount --bind "$1" /proc/sys/user/max_user_namespaces && shift && exec "$@""#)
        .arg("sh")
        .arg(&zero)
        .arg(&bin)
        .args(install);
    let cases: Vec<(&str, Command, Vec<&str>)> = vec![
        (
            "missing prefix",
            direct(&[
                "install",
                "--prefix",
                missing.to_str().unwrap(),
                "--no-packages",
            ]),
            vec!["not a directory"],
        ),
        (
            "real binary not executable",
            direct(&[
                "install",
                "--prefix",
                r,
                "--no-packages",
                "--real-claude",
                not_exec.to_str().unwrap(),
            ]),
            vec!["not an executable file"],
        ),
        (
            "bad config",
            direct(&[
                "install",
                "--prefix",
                r,
                "--no-packages",
                "--real-claude",
                p,
                "--config",
                bad_conf.to_str().unwrap(),
            ]),
            vec!["bad.conf:2"],
        ),
        (
            "not root",
            not_root,
            vec!["must run as root", "sudo claude-sandbox install"],
        ),
        (
            "user namespaces disabled",
            no_userns,
            vec![
                "user namespaces are disabled",
                "sysctl -w user.max_user_namespaces",
            ],
        ),
    ];
    for (what, mut cmd, needles) in cases {
        let o = cmd.stdin(Stdio::null()).output().unwrap();
        assert!(!o.status.success(), "{what}: exit 0");
        let lines = stderr_lines(&o);
        assert_eq!(lines.len(), 1, "{what}: not one line: {}", stderr(&o));
        for n in needles {
            assert!(lines[0].contains(n), "{what}: {n:?} not in {}", lines[0]);
        }
        assert_same(
            &snapshot(&root),
            &before,
            &format!("{what}: the staging root changed"),
        );
    }
    assert!(
        missing.symlink_metadata().is_err(),
        "a missing --prefix was created"
    );
}

/// `install` for `--user root` into `root` with no `--real-claude`: the
/// installer must find the binary in the user's home (npm is disabled).
fn install_finding_user_claude(s: &Scratch, root: &Path) -> Output {
    let npm = s.file("in/npm", NO_NPM, 0o755);
    install_with_npm(s, root, &npm)
}

/// `install` for `--user root` into `root` with no `--real-claude`, with
/// the stand-in `npm` bound over `/usr/bin/npm` in a private mount
/// namespace, and `TMPDIR` the scratch's `tmp`.
fn install_with_npm(s: &Scratch, root: &Path, npm: &Path) -> Output {
    let tmp = s.dir("tmp");
    Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(
            r#"if [ -e /usr/bin/npm ]; then mount --bind "$1" /usr/bin/npm; fi && shift && exec "$@""#,
        )
        .arg("sh")
        .arg(npm)
        .arg(our_binary())
        .args(["install", "--prefix", root.to_str().unwrap()])
        .args(["--no-packages", "--user", "root"])
        .env("PATH", "/usr/bin:/bin:/usr/sbin:/sbin")
        .env("TMPDIR", &tmp)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// An `npm` stand-in for `npm install … --prefix DIR PACKAGE`: records
/// DIR in `log`, puts `claude` (a stand-in Claude Code) where npm puts the
/// platform binary, and exits with `status`.
fn npm_standin(s: &Scratch, name: &str, claude: &Path, log: &Path, status: u8) -> PathBuf {
    let script = format!(
        "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = --prefix ] && dir=\"$2\"; shift; done\n\
         echo \"$dir\" >> '{log}'\n\
         for a in x64 arm64; do p=\"$dir/node_modules/@anthropic-ai/claude-code-linux-$a\"; \
         mkdir -p \"$p\" && cp '{claude}' \"$p/claude\" || exit 9; done\nexit {status}\n",
        log = log.display(),
        claude = claude.display(),
    );
    s.file(&format!("in/{name}"), script.as_bytes(), 0o755)
}

/// What install downloads with npm (~360 MB for the real Claude Code) is
/// removed once the binary is installed, and when npm fails: `$TMPDIR` is
/// left as it was. Each time, npm did run (its log names a directory in
/// `$TMPDIR`), and on success the installed binary is the one npm gave.
#[test]
fn an_npm_download_is_never_left_behind() {
    if !require("npm_download_removed") {
        return;
    }
    let s = Scratch::new("npmdownload");
    let claude = s.file("in/claude", WRAPPER_CAPABLE_CLAUDE, 0o755);
    let log = s.path("in/npm.log");
    for (case, status) in [("npm succeeds", 0), ("npm fails", 1)] {
        let root = s.dir(&format!("stage-{status}"));
        let npm = npm_standin(&s, &format!("npm{status}"), &claude, &log, status);
        let o = install_with_npm(&s, &root, &npm);
        assert_eq!(
            o.status.success(),
            status == 0,
            "{case}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        let used = std::fs::read_to_string(&log).unwrap_or_default();
        let tmp = s.path("tmp");
        assert!(
            used.lines()
                .last()
                .is_some_and(|d| Path::new(d).starts_with(&tmp)),
            "{case}: npm was not run into $TMPDIR: {used:?}"
        );
        let left: Vec<_> = std::fs::read_dir(&tmp)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(left.is_empty(), "{case}: left in $TMPDIR: {left:?}");
        if status == 0 {
            let installed = root.join("usr/libexec/claude-sandbox/claude");
            assert_eq!(
                std::fs::read(&installed).unwrap(),
                WRAPPER_CAPABLE_CLAUDE,
                "{case}: the installed binary is not npm's"
            );
        } else {
            assert!(
                stderr(&o).contains("npm could not provide"),
                "{case}: {}",
                stderr(&o)
            );
        }
    }
}

/// Where the native installer keeps a version, and the link it makes.
const NATIVE_VERSION: &str = ".local/share/claude/versions/2.1.330";

#[test]
fn users_local_bin_claude_relocated_pinned_and_restored() {
    if !require("relocate_local_bin_claude") {
        return;
    }
    let probe = std::fs::read(probe_binary()).unwrap();
    let probe_sha = sha_hex(&probe);
    let root_home = nix::unistd::User::from_name("root")
        .unwrap()
        .expect("root in passwd")
        .dir;
    for case in ["regular file", "native installer symlink"] {
        let s = Scratch::new("relocate");
        let root = s.dir("stage");
        let home = install_rebase(&root, &root_home);
        let local = home.join(".local/bin/claude");
        std::fs::create_dir_all(local.parent().unwrap()).unwrap();
        let version = home.join(NATIVE_VERSION);
        if case == "regular file" {
            std::fs::write(&local, &probe).unwrap();
            std::fs::set_permissions(&local, std::fs::Permissions::from_mode(0o755)).unwrap();
        } else {
            std::fs::create_dir_all(version.parent().unwrap()).unwrap();
            std::fs::write(&version, &probe).unwrap();
            std::fs::set_permissions(&version, std::fs::Permissions::from_mode(0o755)).unwrap();
            // Absolute, as the native installer writes it (the home as passwd has it).
            std::os::unix::fs::symlink(root_home.join(NATIVE_VERSION), &local).unwrap();
        }
        let before = snapshot(&root);
        let o = install_finding_user_claude(&s, &root);
        assert!(o.status.success(), "{case}: {}{}", stdout(&o), stderr(&o));
        let installed = root.join("usr/libexec/claude-sandbox/claude");
        let m = installed.symlink_metadata().unwrap();
        assert!(
            m.is_file() && m.uid() == 0 && m.mode() & 0o7777 == 0o755,
            "{case}: {installed:?} is not a root 0755 regular file: {m:?}"
        );
        assert_eq!(
            sha_hex(&std::fs::read(&installed).unwrap()),
            probe_sha,
            "{case}: relocated the wrong bytes"
        );
        let pin: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(root.join("usr/libexec/claude-sandbox/claude.pin")).unwrap(),
        )
        .unwrap();
        assert_eq!(pin["sha256"], probe_sha.as_str(), "{case}: pin");
        assert!(
            local.symlink_metadata().is_err(),
            "{case}: ~/.local/bin/claude still there after install: {}",
            stdout(&o)
        );
        if case != "regular file" {
            assert_eq!(
                sha_hex(&std::fs::read(&version).unwrap()),
                probe_sha,
                "{case}: the user's version file was changed"
            );
        }
        let o = uninstall_from(&root);
        assert!(o.status.success(), "{case}: {}", stderr(&o));
        let restored = local.symlink_metadata().unwrap_or_else(|_| {
            panic!(
                "{case}: uninstall did not restore ~/.local/bin/claude: {}",
                stdout(&o)
            )
        });
        if case == "regular file" {
            assert_eq!(
                sha_hex(&std::fs::read(&local).unwrap()),
                probe_sha,
                "{case}: restored with other bytes"
            );
        } else {
            // The link's absolute target names the home as passwd has it,
            // outside this staging root: compare the link, then the file.
            assert!(
                restored.file_type().is_symlink(),
                "{case}: restored as a {:?}, not as the link to {NATIVE_VERSION} it was",
                restored.file_type()
            );
            assert_eq!(
                std::fs::read_link(&local).unwrap(),
                root_home.join(NATIVE_VERSION),
                "{case}: restored link points elsewhere"
            );
            assert_eq!(
                sha_hex(&std::fs::read(&version).unwrap()),
                probe_sha,
                "{case}: the version the link names changed"
            );
        }
        assert_same(
            &ignoring_mtimes(&snapshot(&root)),
            &ignoring_mtimes(&before),
            &format!("{case}: uninstall did not leave the staging root as it found it"),
        );
    }
}

fn install_rebase(root: &Path, abs: &Path) -> PathBuf {
    root.join(abs.strip_prefix("/").unwrap_or(abs))
}

#[test]
fn native_install_of_unprivileged_user_relocated_and_restored() {
    if !require("relocate_native_install") {
        return;
    }
    let w = World::new("native");
    let home = w.home(Who::User);
    let version = home.join(NATIVE_VERSION);
    let local = home.join(".local/bin/claude");
    std::fs::create_dir_all(version.parent().unwrap()).unwrap();
    std::fs::create_dir_all(local.parent().unwrap()).unwrap();
    // A launch masks ~/.local/share/applications with a tmpfs, and bubblewrap
    // creates that (empty) mount point in the bound-back ~/.local/share; a
    // desktop user has it anyway. Present from the start, it is no difference.
    std::fs::create_dir_all(home.join(".local/share/applications")).unwrap();
    std::fs::copy(w.root.join("bin/probe"), &version).unwrap();
    std::fs::set_permissions(&version, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&version, &local).unwrap();
    let st = Command::new("chown")
        .arg("-hR")
        .arg(format!("{TEST_UID}:{TEST_UID}"))
        .arg(home.join(".local"))
        .status()
        .unwrap();
    assert!(st.success());
    let probe_sha = sha_hex(&std::fs::read(&version).unwrap());
    let before = snapshot(&home.join(".local"));
    std::fs::write(w.root.join("bin/conf"), "egress-jail = 0\n").unwrap();
    std::fs::write(w.root.join("bin/no-npm"), NO_NPM).unwrap();
    std::fs::set_permissions(
        w.root.join("bin/no-npm"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::create_dir_all(w.root.join("tmp")).unwrap();
    let r = w.root.display().to_string();
    let tmpdir = format!("{r}/tmp");
    let o = w
        .command_with_setup(
            Who::Root,
            &w.workspace(Who::Root),
            &format!("if [ -e /usr/bin/npm ]; then mount --bind {r}/bin/no-npm /usr/bin/npm; fi"),
            &[("TMPDIR", &tmpdir)],
            &[
                &format!("{r}/bin/claude-sandbox"),
                "install",
                "--no-packages",
                "--user",
                TEST_USER,
                "--config",
                &format!("{r}/bin/conf"),
            ],
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(
        local.symlink_metadata().is_err(),
        "~/.local/bin/claude still there: {}",
        stdout(&o)
    );
    let o = w.run_root_raw(
        "stat -c '%u %a %F' /usr/libexec/claude-sandbox/claude && sha256sum < /usr/libexec/claude-sandbox/claude",
    );
    let out = stdout(&o);
    assert!(
        out.starts_with("0 755 regular file\n") && out.contains(&probe_sha),
        "the relocated binary is not a root 0755 copy of the user's version: {out}{}",
        stderr(&o)
    );
    // The user's `claude` now runs the relocated binary, sandboxed.
    let o = w.run(Who::User, &[], &["claude", "exit", "7"]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    let o = w.run_root_raw(&format!("{SELF_BIN} uninstall"));
    assert!(o.status.success(), "{}", stderr(&o));
    let restored = local
        .symlink_metadata()
        .unwrap_or_else(|_| panic!("uninstall did not restore it: {}", stdout(&o)));
    assert!(
        restored.file_type().is_symlink(),
        "restored as a {:?}, not as the link to {NATIVE_VERSION} it was",
        restored.file_type()
    );
    // The launch made the sandbox's private state (§4.8); it is the
    // sandbox's data, not the install's, and uninstall leaves it.
    let mut after = snapshot(&home.join(".local"));
    assert!(
        after.contains_key(Path::new("state/claude-sandbox/cache")),
        "the launch keeps its private ~/.cache under ~/.local/state/claude-sandbox"
    );
    after.retain(|p, _| !p.starts_with("state"));
    assert_same(
        &ignoring_mtimes(&after),
        &ignoring_mtimes(&before),
        "uninstall did not restore ~/.local as it found it",
    );
}

/// Wait for `child` until `deadline`; kill it and return None when it overruns.
fn wait_until(child: &mut std::process::Child, deadline: Instant) -> Option<Output> {
    loop {
        if child.try_wait().unwrap().is_some() {
            let mut out = String::new();
            let mut err = String::new();
            use std::io::Read;
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .unwrap();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return Some(Output {
                status: child.wait().unwrap(),
                stdout: out.into_bytes(),
                stderr: err.into_bytes(),
            });
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn hooks_return_promptly_when_stdin_never_closes() {
    if !require("hooks_open_stdin") {
        return;
    }
    let w = World::with_probe("hookstdin");
    // Outside the sandbox, as Claude Code run unwrapped would: a pipe that
    // got half a JSON object and whose writer (this test) stays open.
    let mut running = Vec::new();
    for (hook, code) in [("session-start", 0), ("prompt-gate", 2)] {
        let mut child = w
            .command(Who::User, &[], &[SELF_BIN, "hook", hook])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut writer = child.stdin.take().unwrap();
        writer.write_all(b"{\"session_id\":\"x\",").unwrap();
        running.push((hook, code, child, writer, Instant::now()));
    }
    for (hook, code, mut child, writer, started) in running {
        let o = wait_until(&mut child, started + Duration::from_secs(5));
        let o = o.unwrap_or_else(|| panic!("hook {hook} still running after 5 s"));
        drop(writer);
        assert_eq!(
            o.status.code(),
            Some(code),
            "hook {hook}: {}{}",
            stdout(&o),
            stderr(&o)
        );
    }
    // Inside the sandbox: stdin a FIFO opened read-write, so a writer exists
    // for as long as the hook itself lives (made in the workspace, which is
    // the world's, and unlinked at once).
    let script = format!(
        "mkfifo hook-in && exec 3<>hook-in && rm hook-in\n\
         for h in session-start prompt-gate; do\n\
           (s=$(date +%s%N); timeout 20 {SELF_BIN} hook $h <&3 >/dev/null 2>&1; rc=$?; e=$(date +%s%N)\n\
           echo \"$h rc=$rc ms=$(( (e - s) / 1000000 ))\") &\n\
         done\n\
         wait"
    );
    let shells: Vec<_> = BOTH
        .iter()
        .map(|&who| {
            let child = w
                .command(who, &[], &["claude", "shell", &script])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (who, child)
        })
        .collect();
    for (who, child) in shells {
        let o = child.wait_with_output().unwrap();
        let out = stdout(&o);
        for hook in ["session-start", "prompt-gate"] {
            let line = out
                .lines()
                .find(|l| l.starts_with(&format!("{hook} ")))
                .unwrap_or_else(|| panic!("{who:?} {hook}: {out}{}", stderr(&o)));
            assert!(line.contains("rc=0 "), "{who:?}: {line}");
            let ms: u64 = line.rsplit("ms=").next().unwrap().parse().unwrap();
            eprintln!("{who:?} inside: {line}");
            assert!(ms < 5000, "{who:?}: {hook} took {ms} ms: {line}");
        }
    }
}

/// Root shell lines that make `/proc/sys/kernel/apparmor_restrict_unprivileged_userns`
/// read `value` in this mount namespace only: bound over the file where the
/// kernel has it, else a tmpfs over /proc/sys/kernel holding copies of the
/// kernel's other sysctls and this one.
fn fake_apparmor_sysctl(w: &World, value: &str) -> String {
    let r = w.root.display();
    format!(
        "f=/proc/sys/kernel/apparmor_restrict_unprivileged_userns\n\
         printf '{value}\\n' > {r}/bin/aa-sysctl\n\
         if [ -e \"$f\" ]; then mount --bind {r}/bin/aa-sysctl \"$f\"; else\n\
           mkdir -p {r}/bin/kernel-sysctls\n\
           for s in /proc/sys/kernel/*; do [ -f \"$s\" ] && cat \"$s\" > {r}/bin/kernel-sysctls/\"${{s##*/}}\" 2>/dev/null || :; done\n\
           mount -t tmpfs -o mode=755 tmpfs /proc/sys/kernel\n\
           cp -a {r}/bin/kernel-sysctls/. /proc/sys/kernel/\n\
           cp {r}/bin/aa-sysctl \"$f\"\n\
         fi\n"
    )
}

#[test]
fn doctor_and_launch_name_apparmors_user_namespace_restriction() {
    if !require("doctor_apparmor") {
        return;
    }
    let w = World::with_probe("apparmor");
    let r = w.root.display().to_string();
    // bubblewrap as Ubuntu 24.04 runs it for a non-root user without a profile.
    std::fs::write(
        w.root.join("bin/bwrap-refused"),
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(
        w.root.join("bin/bwrap-refused"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let refused_bwrap = format!("mount --bind {r}/bin/bwrap-refused /usr/bin/bwrap\n");
    let run = |who: Who, setup: &str, argv: &[&str]| {
        let o = w
            .command_with_setup(who, &w.workspace(who), setup, &[], argv)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (o.status.code(), format!("{}{}", stdout(&o), stderr(&o)))
    };
    let fix = [
        "apparmor_restrict_unprivileged_userns is 1",
        "/etc/apparmor.d/bwrap",
        "userns,",
        "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
    ];
    let names_fix = |line: &str| fix.iter().all(|n| line.contains(n));
    let restricted = fake_apparmor_sysctl(&w, "1");

    // Restricted, and bubblewrap refused: the user's doctor fails at
    // bubblewrap, naming AppArmor's fix rather than Docker's seccomp.
    let (code, out) = run(
        Who::User,
        &format!("{restricted}{refused_bwrap}"),
        &[SELF_BIN, "doctor"],
    );
    assert_ne!(code, Some(0), "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("FAIL bubblewrap")
            && l.contains("setting up uid map")
            && names_fix(l)
            && !l.contains("seccomp")),
        "doctor does not name AppArmor's fix: {out}"
    );
    // So does the launch's refusal.
    let (code, out) = run(
        Who::User,
        &format!("{restricted}{refused_bwrap}"),
        &["claude", "--version"],
    );
    assert_eq!(code, Some(125), "{out}");
    assert!(
        names_fix(&out),
        "the launch does not name AppArmor's fix: {out}"
    );
    // The same refusal without the restriction is not blamed on AppArmor.
    let (_, out) = run(Who::User, &refused_bwrap, &[SELF_BIN, "doctor"]);
    assert!(
        !out.contains("AppArmor") && out.contains("seccomp"),
        "{out}"
    );
    // Restricted, but bubblewrap works (as with a profile that allows it): ok.
    let (_, out) = run(Who::User, &restricted, &[SELF_BIN, "doctor"]);
    assert!(
        out.lines().any(|l| l.starts_with("ok   bubblewrap")),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.starts_with("ok   AppArmor")
            && l.contains("an AppArmor profile lets bubblewrap create them")),
        "{out}"
    );
    // Root is exempt, but is told what every other user needs.
    let (_, out) = run(Who::Root, &restricted, &[SELF_BIN, "doctor"]);
    assert!(
        out.lines().any(|l| l.starts_with("ok   bubblewrap")),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.starts_with("ok   AppArmor")
            && l.contains("root is exempt")
            && names_fix(l)),
        "{out}"
    );
    // Without the sysctl (or with it off) doctor says nothing about AppArmor.
    let (_, out) = run(
        Who::User,
        &fake_apparmor_sysctl(&w, "0"),
        &[SELF_BIN, "doctor"],
    );
    assert!(!out.contains("AppArmor"), "{out}");
}

/// The gits on this machine that install hardens, each with the system
/// config it reads (as `git var GIT_CONFIG_SYSTEM` says; Debian's 2.39
/// lacks it and reads /etc/gitconfig).
fn host_gits() -> Vec<(PathBuf, PathBuf)> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for g in ["/usr/local/bin/git", "/usr/bin/git", "/bin/git"].map(PathBuf::from) {
        let Ok(real) = g.canonicalize() else { continue };
        if seen.contains(&real) {
            continue;
        }
        seen.push(real);
        let o = Command::new(&g)
            .args(["var", "GIT_CONFIG_SYSTEM"])
            .env_remove("GIT_CONFIG_SYSTEM")
            .output()
            .unwrap();
        let config = if o.status.success() {
            PathBuf::from(stdout(&o).trim())
        } else {
            PathBuf::from("/etc/gitconfig")
        };
        out.push((g, config));
    }
    out
}

/// `git config --file FILE --get-all safe.bareRepository`, as git reads it.
fn bare_repository_values(file: &Path) -> String {
    let o = Command::new("git")
        .args(["config", "--file"])
        .arg(file)
        .args(["--get-all", "safe.bareRepository"])
        .output()
        .unwrap();
    stdout(&o)
}

#[test]
fn install_hardens_host_git_once_and_uninstall_takes_out_only_that() {
    if !require("host_git_staging") {
        return;
    }
    let s = Scratch::new("hostgit");
    let root = s.dir("stage");
    let real = s.file("in/claude", WRAPPER_CAPABLE_CLAUDE, 0o755);
    // The admin's own system config: no final newline, an unusual mode.
    let admin = b"[user]\n\tname = Admin\n[credential]\n\thelper = cache";
    let etc_gitconfig = s.file("stage/etc/gitconfig", admin, 0o640);
    let before = snapshot(&root);
    let o = install_into(&root, &real, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Every git's own system config (under the staging root) sets it.
    let mut configs = vec![PathBuf::from("/etc/gitconfig")];
    configs.extend(host_gits().into_iter().map(|(_, c)| c));
    for c in &configs {
        let f = install_rebase(&root, c);
        assert_eq!(bare_repository_values(&f), "explicit\n", "{}", f.display());
    }
    // The admin's lines and mode are untouched.
    let text = std::fs::read(&etc_gitconfig).unwrap();
    assert!(
        text.starts_with(admin),
        "{}",
        String::from_utf8_lossy(&text)
    );
    let o = Command::new("git")
        .args(["config", "--file"])
        .arg(&etc_gitconfig)
        .args(["--get", "credential.helper"])
        .output()
        .unwrap();
    assert_eq!(
        stdout(&o),
        "cache\n",
        "the admin's last line was joined to ours"
    );
    assert_eq!(
        etc_gitconfig.metadata().unwrap().permissions().mode() & 0o7777,
        0o640
    );
    // A second install leaves one copy, byte for byte.
    let installed = snapshot(&root);
    let o = install_into(&root, &real, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_same(
        &snapshot(&root),
        &installed,
        "a second install changed the git config",
    );
    assert_eq!(bare_repository_values(&etc_gitconfig), "explicit\n");
    // Uninstall takes out exactly what install added.
    let o = uninstall_from(&root);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&etc_gitconfig).unwrap(), admin);
    // (The admin's file was rewritten twice: its bytes, mode and owner count.)
    assert_same(
        &ignoring_mtimes(&snapshot(&root)),
        &ignoring_mtimes(&before),
        "uninstall left the staging root different",
    );

    // An admin who chose another value keeps it: install warns (naming the
    // file, the value and the fix) and changes nothing there.
    let root2 = s.dir("stage2");
    let chosen = b"[safe]\n\tbareRepository = all\n";
    let f2 = s.file("stage2/etc/gitconfig", chosen, 0o644);
    let o = install_into(&root2, &real, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .lines()
            .any(|l| l.contains(&f2.display().to_string())
                && l.contains("safe.bareRepository = all")
                && l.contains("safe.bareRepository explicit")),
        "no warning naming {} and the fix: {}",
        f2.display(),
        stderr(&o)
    );
    assert_eq!(std::fs::read(&f2).unwrap(), chosen);
    assert!(uninstall_from(&root2).status.success());
    assert_eq!(std::fs::read(&f2).unwrap(), chosen);
}

/// A bare-style git directory as a session would plant it in a workspace:
/// `HEAD`, `objects/`, `refs/` and a `config` whose `core.fsmonitor` touches
/// `marker` (with a work tree, so `git status` runs it).
fn plant_bare_style(dir: &Path, marker: &Path, uid: u32) {
    std::fs::create_dir_all(dir.join("objects")).unwrap();
    std::fs::create_dir_all(dir.join("refs/heads")).unwrap();
    std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    let script = dir.join("fsmonitor.sh");
    std::fs::write(&script, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        dir.join("config"),
        format!(
            "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = {}\n\tfsmonitor = {}\n",
            dir.display(),
            script.display()
        ),
    )
    .unwrap();
    let o = Command::new("chown")
        .args(["-R", &format!("{uid}:{uid}")])
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.success());
}

#[test]
fn installed_host_git_ignores_a_planted_bare_repository_and_doctor_checks_it() {
    if !require("host_git_world") {
        return;
    }
    let w = World::new("hostgit");
    let fake = w.root.join("bin/fake-claude");
    std::fs::write(&fake, WRAPPER_CAPABLE_CLAUDE).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let install = format!(
        "{r}/bin/claude-sandbox install --no-packages --user root --real-claude {f}",
        r = w.root.display(),
        f = fake.display()
    );
    let o = w.run_root_raw(&install);
    assert!(o.status.success(), "{}", stderr(&o));
    let gits = host_gits();
    assert!(!gits.is_empty(), "no git on this machine");
    for who in BOTH {
        let uid = if who == Who::User { TEST_UID } else { 0 };
        let planted = w.workspace(who).join("src");
        let marker = w.workspace(who).join("fsmonitor-ran");
        plant_bare_style(&planted, &marker, uid);
        for (git, _) in &gits {
            let g = git.to_str().unwrap();
            // Positive control: without the system config, host git in the
            // planted directory runs its fsmonitor.
            let o = w
                .command_in(
                    who,
                    &planted,
                    &[("GIT_CONFIG_SYSTEM", "/dev/null")],
                    &[g, "status"],
                )
                .output()
                .unwrap();
            assert!(
                marker.exists(),
                "{who:?} {g}: control: the planted fsmonitor did not run without the setting: {}",
                stderr(&o)
            );
            std::fs::remove_file(&marker).unwrap();
            // As installed: git refuses the directory and runs nothing.
            let o = w
                .command_in(who, &planted, &[], &[g, "status"])
                .output()
                .unwrap();
            assert!(
                !marker.exists(),
                "{who:?} {g}: host git ran the planted fsmonitor after install"
            );
            assert!(
                stderr(&o).contains("cannot use bare repository"),
                "{who:?} {g}: {}",
                stderr(&o)
            );
        }
    }
    let host_git_line = |who: Who| {
        let (_, _, out) = doctor(&w, who);
        out.lines()
            .find(|l| l.contains(" host git: "))
            .unwrap_or_else(|| panic!("{who:?}: no host git line: {out}"))
            .to_string()
    };
    for who in BOTH {
        let l = host_git_line(who);
        assert!(l.starts_with("ok"), "{who:?}: {l}");
    }
    // Taken out of every git's system config: doctor fails, naming the git,
    // the file and the exact fix.
    for (git, _) in &gits {
        // (Exit 5 when an earlier git shared the file: nothing left to unset.)
        let o = w.run_root_raw(&format!(
            "{} config --system --unset-all safe.bareRepository",
            git.display()
        ));
        assert!(
            matches!(o.status.code(), Some(0 | 5)),
            "unsetting with {}: {:?} {}",
            git.display(),
            o.status,
            stderr(&o)
        );
        for who in BOTH {
            let l = host_git_line(who);
            assert!(l.starts_with("FAIL"), "{who:?}: {l}");
        }
    }
    let (git, config) = &gits[0];
    for who in BOTH {
        let l = host_git_line(who);
        let fix = format!(
            "sudo {} config --system safe.bareRepository explicit",
            git.display()
        );
        assert!(
            l.contains(&config.display().to_string()) && l.contains(&fix),
            "{who:?}: the line does not name {} and `{fix}`: {l}",
            config.display()
        );
    }
    // Install again puts it back; a user's global `all` overrides it for
    // that user only, and doctor says where it came from.
    let o = w.run_root_raw(&install);
    assert!(o.status.success(), "{}", stderr(&o));
    w.put(Who::User, ".gitconfig", "[safe]\n\tbareRepository = all\n");
    let l = host_git_line(Who::User);
    assert!(
        l.starts_with("FAIL") && l.contains(".gitconfig") && l.contains("= all"),
        "{l}"
    );
    assert!(host_git_line(Who::Root).starts_with("ok"));
}
