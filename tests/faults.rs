//! End-to-end: faults and bad input (issue #10 §3). Each gets the documented
//! exit status and, where it stops the launch, one clear line naming the bad
//! input; never a panic, never a launch that skips a defence. Jail on, in a
//! private site network, as root and as an unprivileged user.

mod common;
use common::lan::{jail_world, Lan};
use common::*;

use std::io::Write;
use std::process::{Output, Stdio};

/// `claude ARGS` as `who` in the LAN, after the root `setup` lines.
fn claude(w: &World, lan: &Lan, who: Who, setup: &str, args: &[&str]) -> Output {
    let mut argv = vec!["claude"];
    argv.extend_from_slice(args);
    let cmd = w.command_with_setup(who, &w.workspace(who), setup, &[], &argv);
    in_netns(&lan.host, &cmd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn no_panic(o: &Output, what: &str) {
    assert!(
        !stderr(o).contains("panicked"),
        "{what}: panicked: {}",
        stderr(o)
    );
}

/// A refused launch: `code`, one line on stderr holding every needle, and
/// nothing ran inside (the probe would have created `RAN` in the workspace).
fn assert_refused(w: &World, who: Who, o: &Output, code: i32, needles: &[&str], what: &str) {
    no_panic(o, what);
    assert_eq!(o.status.code(), Some(code), "{who:?} {what}: {}", stderr(o));
    let err = stderr(o);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{who:?} {what}: not one line: {err}");
    for n in needles {
        assert!(
            lines[0].contains(n),
            "{who:?} {what}: {n:?} not in {}",
            lines[0]
        );
    }
    assert!(
        !w.workspace(who).join("RAN").exists(),
        "{who:?} {what}: something ran"
    );
}

const RUN: &[&str] = &["shell", "touch RAN; cat /etc/resolv.conf; true"];

#[test]
fn host_faults_the_launch_survives_without_skipping_a_defence() {
    if !require("faults_host") {
        return;
    }
    let lan = Lan::up();
    let w = jail_world("faulthost", "");
    for who in BOTH {
        let home = w.home(who);
        let cases: Vec<(&str, String)> = vec![
            (
                "full /tmp",
                "mount -t tmpfs -o size=16k,mode=1777 tmpfs /tmp && { dd if=/dev/zero of=/tmp/fill bs=1k 2>/dev/null || true; }\n".into(),
            ),
            (
                "read-only $HOME",
                format!(
                    "mount --bind {h} {h} && mount -o remount,bind,ro {h}\n",
                    h = home.display()
                ),
            ),
            ("missing /etc/resolv.conf", "rm -f /etc/resolv.conf\n".into()),
            (
                "resolv.conf with only IPv6 and garbage",
                "rm -f /etc/resolv.conf && printf 'nameserver fd00::1\\n\\001\\377garbage\\nnameserver\\nnameserver 999.1.1.1\\n' > /etc/resolv.conf\n".into(),
            ),
        ];
        for (what, setup) in cases {
            let _ = std::fs::remove_file(w.workspace(who).join("RAN"));
            let o = claude(&w, &lan, who, &setup, RUN);
            no_panic(&o, what);
            assert_eq!(
                o.status.code(),
                Some(0),
                "{who:?} {what}: {}{}",
                stdout(&o),
                stderr(&o)
            );
            assert!(
                w.workspace(who).join("RAN").exists(),
                "{who:?} {what}: did not run"
            );
            // The jail is on: DNS goes to pasta's forwarder, never to the
            // host's list (and with no resolv.conf on the host, none inside).
            let missing = what.starts_with("missing");
            assert!(
                stdout(&o).contains("nameserver 169.254.0.53") != missing,
                "{who:?} {what}: jail resolv.conf missing: {}",
                stdout(&o)
            );
            let o = claude(
                &w,
                &lan,
                who,
                &setup,
                &["shell", "ip -4 route show | grep -c blackhole"],
            );
            assert!(
                stdout(&o).trim().parse::<u32>().unwrap_or(0) >= 4,
                "{who:?} {what}: the jail's blackholes are missing: {} {}",
                stdout(&o),
                stderr(&o)
            );
        }
    }
}

#[test]
fn bad_pin_and_bad_config_refuse_with_one_line() {
    if !require("faults_input") {
        return;
    }
    let lan = Lan::up();
    let w = jail_world("faultinput", "");
    let pin = "/usr/libexec/claude-sandbox/claude.pin";
    let conf = "/etc/claude-sandbox.conf";
    let pin_cases: Vec<(&str, String)> = vec![
        (
            "truncated pin",
            format!("head -c 20 {pin} > {pin}.t && cat {pin}.t > {pin} && rm {pin}.t\n"),
        ),
        (
            "corrupt pin",
            format!("printf '\\000\\377{{garbage' > {pin}\n"),
        ),
        (
            "pin is a directory",
            format!("rm -f {pin} && mkdir {pin}\n"),
        ),
    ];
    let conf_cases: Vec<(&str, String, &str)> = vec![
        (
            "config is a directory",
            format!("rm -f {conf} && mkdir {conf}\n"),
            "directory",
        ),
        (
            "config is a FIFO",
            format!("rm -f {conf} && mkfifo {conf}\n"),
            "FIFO",
        ),
        (
            "config is 10 MB",
            format!("rm -f {conf} && head -c 10485760 /dev/zero | tr '\\0' '#' > {conf}\n"),
            "10485760 bytes",
        ),
        (
            "config is not UTF-8",
            format!("printf 'allow-write = /caf\\351\\n' > {conf}\n"),
            "not valid UTF-8",
        ),
    ];
    for who in BOTH {
        for (what, setup) in &pin_cases {
            let o = claude(&w, &lan, who, setup, RUN);
            assert_refused(&w, who, &o, 126, &[pin, "re-pin"], what);
            restore(&w, pin);
        }
        for (what, setup, kind) in &conf_cases {
            let o = claude(&w, &lan, who, setup, RUN);
            assert_refused(&w, who, &o, 2, &[conf, kind], what);
            restore(&w, conf);
        }
    }
}

/// Put back what a case damaged (the world's /etc and /usr/libexec persist).
fn restore(w: &World, path: &str) {
    let fix = if path.ends_with(".pin") {
        format!(
            "rm -rf {path}; /usr/libexec/claude-sandbox/claude-sandbox install --repin >/dev/null"
        )
    } else {
        format!("rm -rf {path}; : > {path}")
    };
    let o = w.run_root_raw(&fix);
    assert!(o.status.success(), "restore {path}: {}", stderr(&o));
}

#[test]
fn hook_input_empty_huge_or_garbage_never_opens_the_gate() {
    if !require("faults_hooks") {
        return;
    }
    let w = World::with_probe("faulthooks");
    let huge = vec![b'x'; 20 << 20];
    let inputs: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("not JSON", b"\x00\xff{{{ not json".to_vec()),
        ("huge", huge),
        (
            "valid",
            br#"{"hook_event_name":"UserPromptSubmit","prompt":"hi","session_id":"x"}"#.to_vec(),
        ),
    ];
    for who in BOTH {
        for (what, input) in &inputs {
            for (hook, code, needle) in [
                ("prompt-gate", 2, "not sandboxed"),
                ("session-start", 0, "NOT running inside claude-sandbox"),
            ] {
                let mut c = w.command(
                    who,
                    &[],
                    &["/usr/libexec/claude-sandbox/claude-sandbox", "hook", hook],
                );
                let mut child = c
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                let mut stdin = child.stdin.take().unwrap();
                let data = input.clone();
                // The hook may stop reading (it drains at most 16 MiB): a
                // broken pipe here is expected, never a hang.
                let writer = std::thread::spawn(move || {
                    let _ = stdin.write_all(&data);
                });
                let t0 = std::time::Instant::now();
                let o = child.wait_with_output().unwrap();
                let _ = writer.join();
                let what = format!("{hook} with {what} input");
                no_panic(&o, &what);
                assert_eq!(
                    o.status.code(),
                    Some(code),
                    "{who:?} {what}: {}",
                    stderr(&o)
                );
                let said = format!("{}{}", stdout(&o), stderr(&o));
                assert!(said.contains(needle), "{who:?} {what}: {said}");
                assert!(
                    t0.elapsed() < std::time::Duration::from_secs(5),
                    "{who:?} {what}: took {:?}",
                    t0.elapsed()
                );
            }
        }
    }
}

#[test]
fn refused_fresh_proc_falls_back_with_the_jail_on() {
    if !require("faults_proc_fallback") {
        return;
    }
    // bubblewrap fails on /proc while pasta is attaching: the launch must be
    // retried with the host's /proc, not end with pasta's error.
    let lan = Lan::up();
    let w = jail_world("faultproc", "");
    for who in BOTH {
        let o = claude(
            &w,
            &lan,
            who,
            &format!("{REFUSE_FRESH_PROC}\n"),
            &["report"],
        );
        no_panic(&o, "fresh /proc refused");
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "{who:?}: a refusal leaked to the user");
        let r = report(&o);
        assert_eq!(
            r["nspid"].as_str().unwrap().split_whitespace().count(),
            2,
            "{who:?}: host /proc expected: {r}"
        );
    }
}

/// Allowlist mode promises a log: where it cannot be created (a read-only
/// `$HOME`, a file where its directory belongs), the launch stops with one
/// line naming the log, and nothing runs — never a session without its log.
#[test]
fn allowlist_mode_without_a_writable_log_refuses() {
    if !require("faults_allowlist_log") {
        return;
    }
    let lan = Lan::up();
    let w = jail_world("faultallow", "egress = allowlist\n");
    for who in BOTH {
        let home = w.home(who);
        // One session first: the private state and the log directory exist.
        let o = claude(
            &w,
            &lan,
            who,
            "",
            &["shell", "curl -s -m 5 http://denied.test/ >/dev/null"],
        );
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", stderr(&o));
        let blocked = home.join(".local/state/claude-sandbox/egress");
        let cases = [
            (
                "read-only $HOME",
                format!(
                    "mount --bind {h} {h} && mount -o remount,bind,ro {h}\n",
                    h = home.display()
                ),
            ),
            (
                "a file where the log directory belongs",
                format!("rm -rf {e} && touch {e}\n", e = blocked.display()),
            ),
        ];
        for (what, setup) in cases {
            let _ = std::fs::remove_file(w.workspace(who).join("RAN"));
            let o = claude(&w, &lan, who, &setup, RUN);
            assert_refused(
                &w,
                who,
                &o,
                125,
                &[
                    "egress = allowlist",
                    &blocked.display().to_string(),
                    "connection log",
                ],
                what,
            );
            let _ = std::fs::remove_file(&blocked);
        }
    }
}
