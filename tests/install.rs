//! Installer, integrity pin and guard hooks (issue #4).

mod common;
use common::*;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every entry under `root`: (kind, mode, size, mtime, content or link target).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, (String, u32, u64, i64, Vec<u8>)> {
    let mut out = BTreeMap::new();
    fn walk(
        root: &Path,
        dir: &Path,
        out: &mut BTreeMap<PathBuf, (String, u32, u64, i64, Vec<u8>)>,
    ) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let m = p.symlink_metadata().unwrap();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let (kind, content) = if m.file_type().is_symlink() {
                (
                    "link",
                    std::fs::read_link(&p)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                )
            } else if m.is_dir() {
                ("dir", Vec::new())
            } else {
                ("file", std::fs::read(&p).unwrap())
            };
            out.insert(
                rel,
                (
                    kind.to_string(),
                    m.mode() & 0o7777,
                    m.len(),
                    if m.is_dir() {
                        0
                    } else {
                        m.mtime_nsec() + m.mtime() * 1_000_000_000
                    },
                    content,
                ),
            );
            if m.is_dir() {
                walk(root, &p, out);
            }
        }
    }
    walk(root, root, &mut out);
    out
}

fn stage(name: &str) -> PathBuf {
    let d = PathBuf::from(format!("/var/tmp/csb-stage-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn csb(args: &[&str]) -> std::process::Output {
    Command::new(our_binary()).args(args).output().unwrap()
}

fn install_into(root: &Path, extra: &[&str]) -> std::process::Output {
    let probe = probe_binary();
    let mut a = vec![
        "install",
        "--prefix",
        root.to_str().unwrap(),
        "--no-packages",
        "--user",
        "root",
        "--real-claude",
        probe.to_str().unwrap(),
    ];
    a.extend_from_slice(extra);
    csb(&a)
}

#[test]
fn staging_install_is_complete_idempotent_and_reversible() {
    if !require("staging_install") {
        return;
    }
    let root = stage("idem");
    // Something foreign that must survive untouched.
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/hostname"), "foreign\n").unwrap();
    let before = snapshot(&root);
    let o = install_into(&root, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (path, mode) in [
        ("usr/local/bin/claude", None),
        ("usr/libexec/claude-sandbox/claude-sandbox", Some(0o755)),
        ("usr/libexec/claude-sandbox/claude", Some(0o755)),
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
        PathBuf::from("/usr/libexec/claude-sandbox/claude-sandbox")
    );
    let installed = snapshot(&root);
    let o = install_into(&root, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("nothing changed"), "{}", stdout(&o));
    assert_eq!(
        snapshot(&root),
        installed,
        "a second install changed a byte, a mode or an mtime"
    );
    let o = csb(&["uninstall", "--prefix", root.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let after = snapshot(&root);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "uninstall left the staging root different"
    );
    assert_eq!(after, before);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn managed_settings_merged_never_owned() {
    if !require("managed_settings") {
        return;
    }
    let root = stage("settings");
    std::fs::create_dir_all(root.join("etc/claude-code")).unwrap();
    let foreign = r#"{"permissions":{"deny":["Read(./.env)"]},"hooks":{"SessionStart":[{"matcher":"startup","hooks":[{"type":"command","command":"/opt/corp/audit"}]}]},"model":"corp"}"#;
    std::fs::write(root.join("etc/claude-code/managed-settings.json"), foreign).unwrap();
    for _ in 0..3 {
        assert!(install_into(&root, &[]).status.success());
    }
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
    // Uninstall removes only ours.
    assert!(csb(&["uninstall", "--prefix", root.to_str().unwrap()])
        .status
        .success());
    let back: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("etc/claude-code/managed-settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        back,
        serde_json::from_str::<serde_json::Value>(foreign).unwrap()
    );
    // A file that is not JSON is left byte-identical, with a warning; the rest installs.
    let root2 = stage("settings-bad");
    std::fs::create_dir_all(root2.join("etc/claude-code")).unwrap();
    std::fs::write(
        root2.join("etc/claude-code/managed-settings.json"),
        "{ this is: not json",
    )
    .unwrap();
    let o = install_into(&root2, &[]);
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
    std::fs::remove_dir_all(&root).unwrap();
    std::fs::remove_dir_all(&root2).unwrap();
}

#[test]
fn tampered_binary_refused_until_repinned() {
    if !require("integrity") {
        return;
    }
    let w = World::with_probe("pin");
    let o = w.run(Who::User, &[], &["claude", "exit", "0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // One byte appended.
    assert!(w
        .run_root_raw("printf x >> /usr/libexec/claude-sandbox/claude")
        .status
        .success());
    for who in BOTH {
        let o = w.run(who, &[], &["claude", "report"]);
        assert_eq!(o.status.code(), Some(126), "{who:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "the tampered binary ran");
        let err = stderr(&o);
        assert!(
            err.contains("expected sha256")
                && err.contains("found sha256")
                && err.contains("claude-sandbox install --repin"),
            "{err}"
        );
    }
    // Another executable of the same size.
    let size = std::fs::metadata(w.root.join("bin/probe")).unwrap().len() + 1;
    assert!(w.run_root_raw(&format!("head -c {size} /bin/bash > /tmp/same && install -m 0755 /tmp/same /usr/libexec/claude-sandbox/claude && stat -c %s /usr/libexec/claude-sandbox/claude")).status.success());
    assert_eq!(
        w.run(Who::Root, &[], &["claude", "report"]).status.code(),
        Some(126)
    );
    // Re-pin: prints old and new digests; launches work again.
    assert!(w
        .run_root_raw(&format!(
            "install -m 0755 {}/bin/probe /usr/libexec/claude-sandbox/claude",
            w.root.display()
        ))
        .status
        .success());
    let o = w.run_root_raw("/usr/libexec/claude-sandbox/claude-sandbox install --repin");
    assert!(
        stdout(&o).contains("old pin sha256") && stdout(&o).contains("new pin sha256"),
        "{}",
        stdout(&o)
    );
    assert!(w
        .run(Who::User, &[], &["claude", "exit", "0"])
        .status
        .success());
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
        // session-start: silent inside when healthy, a warning with a leaked token.
        let o = w.run(
            who,
            &[],
            &[
                "claude",
                "shell",
                &format!("{hook} hook session-start </dev/null; echo END"),
            ],
        );
        assert_eq!(stdout(&o), "END\n", "{who:?}: {}", stderr(&o));
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

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn managed_hooks_fire_in_the_real_claude_code() {
    if !require("real_client_gate") {
        return;
    }
    let Some(real) = real_claude() else { return };
    let w = World::new("realgate");
    std::fs::write(
        w.root.join("bin/conf"),
        "egress-jail = 0\npass-env = ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC\n",
    )
    .unwrap();
    let o = w.run_root_raw(&format!(
        "{r}/bin/claude-sandbox install --no-packages --user root --real-claude {real} --config {r}/bin/conf",
        r = w.root.display(),
        real = real.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let port = free_port();
    let log = w.root.join("api.log");
    let mut api = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/fake_anthropic.py"
        ))
        .arg(port.to_string())
        .arg(&log)
        .arg("120")
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let base = format!("http://127.0.0.1:{port}");
    let env = [
        ("ANTHROPIC_BASE_URL", base.as_str()),
        ("ANTHROPIC_API_KEY", "sk-ant-test"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ];
    // Unwrapped: the real binary run directly. The gate stops the prompt.
    let o = w.run(
        Who::Root,
        &env,
        &[
            "/usr/libexec/claude-sandbox/claude",
            "-p",
            "hello-unwrapped",
        ],
    );
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
    let _ = api.kill();
    let _ = api.wait();
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("PONG-FROM-FAKE-API"), "{}", stdout(&o));
    assert!(logged.contains("hello-wrapped"), "{logged}");
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
        let o = w.run(
            who,
            &[],
            &["/usr/libexec/claude-sandbox/claude-sandbox", "doctor"],
        );
        assert!(
            o.status.success(),
            "{who:?} doctor: {}{}",
            stdout(&o),
            stderr(&o)
        );
        let o = w.run(who, &[], &["claude", "--version"]);
        assert!(
            stdout(&o).contains("(Claude Code)"),
            "{who:?}: {}{}",
            stdout(&o),
            stderr(&o)
        );
    }
    // The world's overlays took every write: this machine has no shadow, and
    // the install for root went to the world's root home, not to /root.
    assert!(!Path::new("/usr/libexec/claude-sandbox").exists());
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
    let root = stage("bad");
    let before = snapshot(&root);
    let probe = probe_binary();
    std::fs::write(
        root.join("../csb-bad.conf"),
        "egress-jail = 0\nallow-ip = 10.0.0.0/8\n",
    )
    .unwrap();
    let bad_conf = root.join("../csb-bad.conf");
    let not_exec = root.join("../csb-not-exec");
    std::fs::write(&not_exec, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&not_exec, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = root.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "install",
                "--prefix",
                "/var/tmp/csb-no-such-dir",
                "--no-packages",
            ],
            "not a directory",
        ),
        (
            vec![
                "install",
                "--prefix",
                r,
                "--no-packages",
                "--real-claude",
                not_exec.to_str().unwrap(),
            ],
            "not an executable file",
        ),
        (
            vec![
                "install",
                "--prefix",
                r,
                "--no-packages",
                "--real-claude",
                probe.to_str().unwrap(),
                "--config",
                bad_conf.to_str().unwrap(),
            ],
            "csb-bad.conf:2",
        ),
    ];
    for (args, needle) in &cases {
        let o = csb(args);
        assert!(!o.status.success(), "{args:?}");
        assert_eq!(stderr(&o).lines().count(), 1, "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        assert_eq!(snapshot(&root), before, "{args:?} left something behind");
    }
    // Not root.
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(our_binary())
        .args(["install", "--prefix", r])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("must run as root"), "{}", stderr(&o));
    // User namespaces disabled (simulated in a private mount namespace).
    std::fs::write(root.join("../csb-zero"), "0\n").unwrap();
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount --bind {z} /proc/sys/user/max_user_namespaces && exec {bin} install --prefix {r} --no-packages --real-claude {p}",
            z = root.join("../csb-zero").display(),
            bin = our_binary().display(),
            p = probe.display()
        ))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("user namespaces are disabled"),
        "{}",
        stderr(&o)
    );
    assert_eq!(snapshot(&root), before);
    let _ = std::fs::remove_file(root.join("../csb-bad.conf"));
    let _ = std::fs::remove_file(root.join("../csb-zero"));
    let _ = std::fs::remove_file(&not_exec);
    std::fs::remove_dir_all(&root).unwrap();
}
