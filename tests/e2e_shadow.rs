//! End-to-end: the shadow under real bubblewrap (issue #2), as root and as an
//! unprivileged user, with the probe standing in for the real binary.

mod common;
use common::lan::netprobe_in;
use common::*;

const DECOYS: &[(&str, &str)] = &[
    (".ssh/id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY----- decoy"),
    (".aws/credentials", "[default]\naws_secret_access_key = decoy"),
    (".gitconfig", "[url \"https://x-access-token:ghp_decoy@github.com/\"]\n\tinsteadOf = https://github.com/\n"),
    (".config/gcloud/credentials.db", "decoy"),
    (".netrc", "machine github.com login x password decoy"),
    (".bash_history", "export GH_TOKEN=decoy"),
    (".docker/config.json", "{\"auths\":{\"x\":{\"auth\":\"decoy\"}}}"),
    (".kube/config", "users: [{token: decoy}]"),
];

#[test]
fn probe_sees_no_decoy_and_the_spec_environment() {
    if !require("probe_sees_no_decoy") {
        return;
    }
    let w = World::with_probe("decoys");
    for who in BOTH {
        let mut paths = Vec::new();
        for (rel, content) in DECOYS {
            paths.push(w.put(who, rel, content).to_string_lossy().into_owned());
            if who == Who::Root {
                // The world's root home is also the user database's home
                // (/root), which differs from $HOME: it must be masked too.
                paths.push(format!("/root/{rel}"));
            }
        }
        w.put(who, ".claude/settings.json", "{}");
        let mut argv = vec!["claude", "report"];
        argv.extend(paths.iter().map(String::as_str));
        let secrets = [
            ("GH_TOKEN", "ghp_leak"),
            ("GITHUB_TOKEN", "ghs_leak"),
            ("ANTHROPIC_API_KEY", "sk-leak"),
            ("SSH_AUTH_SOCK", "/tmp/agent.sock"),
            ("DISPLAY", ":0"),
            ("AWS_SECRET_ACCESS_KEY", "aws-leak"),
            ("USER", "mallory"),
        ];
        // The host's /tmp holds a file; the sandbox's must not.
        let o = w
            .command_with_setup(
                who,
                &w.workspace(who),
                "mount -t tmpfs tmpfs /tmp && echo decoy > /tmp/host-tmp-decoy",
                &secrets,
                &argv,
            )
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        let r = report(&o);
        assert_eq!(
            r["readable_decoys"],
            serde_json::json!([]),
            "{who:?} read a decoy: {r}"
        );
        assert_eq!(
            r["cwd_writable"], true,
            "{who:?}: workspace must be writable"
        );
        assert_eq!(r["root_writable"], false, "{who:?}: / must be read-only");
        assert_eq!(
            r["shadow_writable"], false,
            "{who:?}: the shadow must be read-only"
        );
        assert_eq!(
            r["real_writable"], false,
            "{who:?}: the real binary must be read-only"
        );
        assert_eq!(
            r["tmp_entries"],
            serde_json::json!([]),
            "{who:?}: /tmp must be empty"
        );
        assert_eq!(r["no_new_privs"], "1");
        assert_eq!(r["cap_eff"], "0000000000000000");
        let host_pid_ns = std::fs::read_link("/proc/self/ns/pid").unwrap();
        assert_ne!(
            r["pid_ns"],
            host_pid_ns.to_string_lossy().as_ref(),
            "{who:?}: nested PID namespace"
        );
        assert_eq!(
            r["sig_blk"], "0000000000000000",
            "{who:?}: the real binary starts with no blocked signal"
        );
        let ignored = u64::from_str_radix(r["sig_ign"].as_str().unwrap(), 16).unwrap();
        assert_eq!(
            ignored & 0b110,
            0,
            "{who:?}: SIGINT/SIGQUIT must not arrive ignored (Ctrl-C)"
        );
        let env = r["env"].as_object().unwrap();
        let home = w.home(who).to_string_lossy().into_owned();
        let mut keys: Vec<&str> = env.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(
            keys,
            ["GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "HOME", "IS_SANDBOX", "LANG", "PATH", "PWD", "TERM", "USER"],
            "{who:?}: environment is exactly §4.5 (plus PWD, which bubblewrap sets to the working directory)"
        );
        assert_eq!(env["PWD"], r["cwd"]);
        assert_eq!(env["USER"], World::user_name(who));
        assert_eq!(env["HOME"], home.as_str());
        assert_eq!(env["IS_SANDBOX"], "1");
        // The curated config is git's system level; the global level is the
        // session's own file on its private $HOME (issue #44).
        assert_eq!(
            env["GIT_CONFIG_GLOBAL"],
            format!("{home}/.gitconfig").as_str()
        );
        assert_eq!(env["GIT_CONFIG_SYSTEM"], "/etc/claude-gitconfig");
        assert_eq!(
            env["PATH"],
            format!(
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:{home}/.local/bin"
            )
            .as_str()
        );
        // ~/.claude persists from one launch to the next.
        let again = report(&w.run(who, &[], &["claude", "report"]));
        assert_eq!(
            again["previous_marker"], "written-inside",
            "{who:?}: ~/.claude writes must persist"
        );
        assert_eq!(r["uid"], if who == Who::Root { 0 } else { TEST_UID });
    }
}

/// A launch started with Ctrl-C ignored (a background job of a script,
/// `trap '' INT`) starts the real binary with it ignored too, as `claude`
/// would run without the sandbox; with the defaults it gets the defaults
/// (the test above). bubblewrap and the shim ignore both on the way, so
/// only the launcher can say.
#[test]
fn signals_the_launcher_ignored_stay_ignored_in_the_real_binary() {
    if !require("signals_inherited") {
        return;
    }
    let w = World::with_probe("sigign");
    for who in BOTH {
        for (setup, want) in [("trap '' INT QUIT", 0b110), ("trap '' QUIT", 0b100)] {
            let o = w
                .command_with_setup(who, &w.workspace(who), setup, &[], &["claude", "report"])
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            assert!(o.status.success(), "{who:?} {setup}: {}", stderr(&o));
            let r = report(&o);
            let ignored = u64::from_str_radix(r["sig_ign"].as_str().unwrap(), 16).unwrap();
            assert_eq!(ignored & 0b110, want, "{who:?} {setup}: SigIgn {ignored:x}");
        }
    }
}

/// A launcher with a low soft open-file limit (below the fds the launch
/// numbers, ~200–250) still gets a session, and creations through the
/// guard's supervisor work in it; a hard limit that low is refused in one
/// line naming it, with nothing run.
#[test]
fn a_low_open_file_limit_is_made_room_for_or_named() {
    if !require("low_nofile") {
        return;
    }
    let w = World::with_probe("nofile");
    let script = "ulimit -Sn; echo made > nofile-made && cat nofile-made && rm nofile-made";
    for who in BOTH {
        let o = w
            .shell_with_setup(who, "ulimit -Sn 48", script)
            .output()
            .unwrap();
        let out = stdout(&o);
        let soft: u64 = out.lines().next().and_then(|l| l.parse().ok()).unwrap_or(0);
        assert!(
            o.status.success() && soft > 250 && out.contains("made"),
            "{who:?}: {out}\n{}",
            stderr(&o)
        );
        let o = w
            .shell_with_setup(who, "ulimit -n 128", "echo RAN")
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(125), "{who:?}: {err}");
        assert!(!stdout(&o).contains("RAN"), "{who:?}");
        assert!(
            err.lines()
                .filter(|l| l.contains("open-file limit (hard 128)"))
                .count()
                == 1,
            "{who:?}: {err}"
        );
    }
}

#[test]
fn exit_status_and_stdin_pass_through() {
    if !require("exit_status_and_stdin") {
        return;
    }
    let w = World::with_probe("exit");
    for who in BOTH {
        let o = w.run(who, &[], &["claude", "exit", "7"]);
        assert_eq!(o.status.code(), Some(7), "{who:?}: {}", stderr(&o));
        let mut c = w.command(who, &[], &["claude", "cat"]);
        c.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"hello through the pipe\n")
            .unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(stdout(&o), "stdin:hello through the pipe\n", "{who:?}");
        assert!(o.status.success());
    }
}

#[test]
fn forged_is_sandbox_outside_is_still_sandboxed_and_inside_does_not_wrap_twice() {
    if !require("forged_is_sandbox") {
        return;
    }
    let w = World::with_probe("recursion");
    let host_pid_ns = std::fs::read_link("/proc/self/ns/pid")
        .unwrap()
        .to_string_lossy()
        .into_owned();
    for who in BOTH {
        let o = w.run(who, &[("IS_SANDBOX", "1")], &["claude", "report"]);
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        let r = report(&o);
        assert_ne!(
            r["pid_ns"],
            host_pid_ns.as_str(),
            "{who:?}: forged IS_SANDBOX=1 must not skip the sandbox"
        );
        assert_eq!(r["no_new_privs"], "1");
        // From inside, `claude` runs the real binary directly: same PID namespace.
        let o = w.run(
            who,
            &[],
            &[
                "claude",
                "shell",
                "readlink /proc/self/ns/pid; claude report",
            ],
        );
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        let out = stdout(&o);
        let outer_ns = out.lines().next().unwrap().to_string();
        let inner = report(&o);
        assert_eq!(
            inner["pid_ns"],
            outer_ns.as_str(),
            "{who:?}: claude inside the sandbox wrapped again"
        );
        assert_eq!(inner["env"]["IS_SANDBOX"], "1");
    }
}

#[test]
fn refuses_home_as_workspace() {
    if !require("refuses_home_as_workspace") {
        return;
    }
    let w = World::with_probe("homews");
    for who in BOTH {
        let o = w
            .command_in(who, &w.home(who), &[], &["claude", "report"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{who:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("holds $HOME"), "{}", stderr(&o));
        assert!(stdout(&o).is_empty(), "the probe must not have run");
        let o = w
            .command_in(who, std::path::Path::new("/"), &[], &["claude", "report"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{who:?} from /: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "the probe must not have run");
    }
}

#[test]
fn real_claude_version_through_the_shadow() {
    if !require("real_claude_version") {
        return;
    }
    let Some(real) = real_claude() else { return };
    let w = World::new("realclaude");
    w.install_by_hand(&real, "egress-jail = 0\n");
    for who in BOTH {
        let o = w.run(who, &[], &["claude", "--version"]);
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        assert!(
            stdout(&o).contains("(Claude Code)"),
            "{who:?}: {}",
            stdout(&o)
        );
    }
}

#[test]
fn refused_fresh_proc_falls_back_to_host_proc_read_only() {
    if !require("proc_fallback") {
        return;
    }
    let w = World::with_probe("procfallback");
    for who in BOTH {
        // Fresh /proc works here: host PIDs are invisible (one NSpid entry).
        let r = report(&w.run(who, &[], &["claude", "report"]));
        assert_eq!(
            r["nspid"].as_str().unwrap().split_whitespace().count(),
            1,
            "{who:?}: {r}"
        );
        // An over-mount inside /proc (as container runtimes make) makes the
        // kernel refuse a fresh procfs to a user namespace.
        let o = w
            .command_with_setup(
                who,
                &w.workspace(who),
                REFUSE_FRESH_PROC,
                &[],
                &["claude", "report"],
            )
            .output()
            .unwrap();
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        assert_eq!(
            stderr(&o),
            "",
            "{who:?}: bubblewrap's refusal must not leak to the user"
        );
        let r = report(&o);
        assert_eq!(
            r["nspid"].as_str().unwrap().split_whitespace().count(),
            2,
            "{who:?}: host /proc expected: {r}"
        );
        assert_eq!(r["readable_decoys"], serde_json::json!([]));
    }
}

#[test]
fn curated_gitconfig_carries_identity_without_writing_etc() {
    if !require("gitconfig") {
        return;
    }
    let w = World::with_probe("gitconfig");
    for who in BOTH {
        w.put(
            who,
            ".gitconfig",
            "[user]\n\tname = Ada Lovelace\n\temail = ada@example.com\n\
             [url \"https://x-access-token:ghp_decoy@github.com/\"]\n\tinsteadOf = https://github.com/\n\
             [core]\n\tsshCommand = ssh -i ~/.ssh/decoy\n",
        );
        let o = w.run(
            who,
            &[],
            &[
                "claude",
                "shell",
                "git config --get user.name; git config --get user.email; git config --get init.defaultBranch; \
                 git config --get credential.https://github.com.helper; git config --get-regexp 'url\\..*' ; \
                 git config --get core.sshCommand || echo no-sshCommand; git config --show-origin --get user.email",
            ],
        );
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        let out = stdout(&o);
        assert!(
            out.starts_with("Ada Lovelace\nada@example.com\nmain\n"),
            "{who:?}: {out}"
        );
        assert!(out.contains("!gh auth git-credential"), "{who:?}: {out}");
        assert!(
            out.contains("url.https://github.com/.insteadof git@github.com:"),
            "{who:?}: {out}"
        );
        assert!(
            !out.contains("ghp_decoy"),
            "{who:?}: the user's token URL leaked: {out}"
        );
        assert!(out.contains("no-sshCommand"), "{who:?}: {out}");
        assert!(out.contains("file:/etc/claude-gitconfig"), "{who:?}: {out}");
    }
    // Nothing was written to /etc at launch: the installed template is untouched.
    let o = w.run_root_raw("cat /etc/claude-gitconfig");
    assert_eq!(
        stdout(&o),
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/etc/claude-gitconfig"))
            .unwrap()
    );
}

#[test]
fn sandbox_dies_with_the_shadow_even_on_sigkill() {
    if !require("dies_with_parent") {
        return;
    }
    use std::io::BufRead;
    let w = World::with_probe("sigkill");
    for who in BOTH {
        let mut c = w.command(who, &[], &["claude", "signals"]);
        c.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert!(line.starts_with("READY"), "{who:?}: {line}");
        let t0 = std::time::Instant::now();
        child.kill().unwrap(); // SIGKILL: no chance to forward anything
        child.wait().unwrap();
        // EOF on the pipe: every process holding it, the probe included, is gone.
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(2),
            "{who:?}: probe outlived the shadow by {:?}",
            t0.elapsed()
        );
        assert!(!rest.contains("TIMEOUT"), "{who:?}: {rest}");
    }
}

#[test]
fn session_keyring_is_out_of_reach() {
    if !require("keyring") {
        return;
    }
    let w = World::with_probe("keyring");
    // Control: outside the sandbox the probe reaches its session keyring.
    let o = std::process::Command::new(w.root.join("bin/probe"))
        .args(["--no-chrome", "keyctl"])
        .output()
        .unwrap();
    assert!(
        stdout(&o).starts_with("KEYCTL ok"),
        "control: {}",
        stdout(&o)
    );
    for who in BOTH {
        let o = w.run(who, &[], &["claude", "keyctl"]);
        assert_eq!(
            stdout(&o).trim(),
            "KEYCTL errno=Operation not permitted (os error 1)",
            "{who:?}: {}",
            stderr(&o)
        );
    }
}

/// The probe's `syscalls` report, parsed.
fn syscall_report(o: &std::process::Output) -> serde_json::Value {
    let v = report(o);
    assert!(v["refused"].is_object(), "{v}\n{}", stderr(o));
    v
}

#[test]
fn syscalls_a_session_does_not_need_are_refused_inside() {
    if !require("syscalls_refused") {
        return;
    }
    use std::os::unix::process::CommandExt;
    let w = World::with_probe("syscalls");
    // Control: outside, unprivileged, the same calls reach the kernel, which
    // answers otherwise (the arguments are invalid or harmless): so EPERM
    // inside is the filter's answer. (Unprivileged: as root, vhangup would
    // hang up the terminal.)
    let o = std::process::Command::new(w.root.join("bin/probe"))
        .args(["--no-chrome", "syscalls"])
        .uid(TEST_UID)
        .gid(TEST_UID)
        .output()
        .unwrap();
    let control = syscall_report(&o);
    for name in [
        "mount",
        "umount2",
        "perf_event_open",
        "setns",
        "unshare-newns",
        "unshare-newuser",
        "clone-newns",
        "clone-newnet",
        "clone3",
        "personality-addr-no-randomize",
        "ioctl-tiocsti",
    ] {
        let e = &control["refused"][name];
        assert!(
            e.is_i64() && *e != 1 && *e != 38,
            "control: {name} answered {e} outside the sandbox"
        );
    }
    for who in BOTH {
        let o = w.run(who, &[], &["claude", "syscalls"]);
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        let r = syscall_report(&o);
        let refused = r["refused"].as_object().unwrap();
        assert!(refused.len() >= 60, "{who:?}: only {} calls", refused.len());
        for (name, e) in refused {
            // clone3 must fail with ENOSYS so that libc falls back to clone.
            let want = if name == "clone3" { 38 } else { 1 };
            assert_eq!(e, want, "{who:?}: {name} answered errno {e} inside");
        }
        for (name, e) in r["allowed"].as_object().unwrap() {
            assert!(
                *e != 1 && *e != 38,
                "{who:?}: {name} refused (errno {e}) but a session needs it"
            );
        }
        for k in ["thread", "spawn", "fork"] {
            assert_eq!(r[k], true, "{who:?}: {k} failed under the filter: {r}");
        }
    }
}

#[test]
fn a_coding_workload_runs_unaffected_under_the_filter() {
    if !require("workload") {
        return;
    }
    let w = World::with_probe("workload");
    let script = r#"set -e
node -e 'const cp = require("child_process"); const w = new (require("worker_threads").Worker)("require(\"worker_threads\").parentPort.postMessage(6*7)", {eval: true}); w.on("message", m => { console.log("NODE", cp.execFileSync("/bin/echo", ["child"]).toString().trim(), m); w.terminate(); })'
python3 -c 'import subprocess, threading, concurrent.futures as f; print("PYTHON", subprocess.run(["/bin/echo", "child"], capture_output=True, text=True).stdout.strip(), sum(f.ThreadPoolExecutor(4).map(lambda x: x, range(10))))'
echo "NPM $(npm --version)"
git init -q repo && cd repo && echo hello > f && git add f
git -c user.name=Test -c user.email=test@example.com commit -qm first
echo "GIT $(git log --oneline | wc -l) $(git status --porcelain | wc -l)"
cd ..
if command -v cargo >/dev/null; then echo "CARGO $(cargo --version)"; else echo "CARGO not reachable inside"; fi
echo WORKLOAD-DONE
"#;
    for who in BOTH {
        let o = w.run(who, &[], &["claude", "shell", script]);
        let out = stdout(&o);
        assert!(o.status.success(), "{who:?}: {out}{}", stderr(&o));
        for want in [
            "NODE child 42",
            "PYTHON child 45",
            "NPM ",
            "GIT 1 0",
            "WORKLOAD-DONE",
        ] {
            assert!(
                out.contains(want),
                "{who:?}: {want:?} missing: {out}{}",
                stderr(&o)
            );
        }
        // cargo lives under the user's home (rustup), which the sandbox inverts.
        eprintln!("{who:?}:\n{out}");
    }
}

/// Root shell lines for the world's mount namespace: a private /run holding a
/// listening unix socket (a stand-in for the Docker socket) that answers
/// `TOKEN` to each connection while the launch it was set up for lasts (at
/// most 20 s).
fn run_socket_setup(w: &World, path: &str) -> String {
    let netprobe = netprobe_in(w);
    format!(
        "mount -t tmpfs tmpfs /run\n\
         python3 {} unix-serve {path} TOKEN 20 >/dev/null 2>&1 &\n\
         for i in $(seq 50); do [ -S {path} ] && break; sleep 0.1; done\n",
        netprobe.display()
    )
}

#[test]
fn sockets_under_run_are_masked_unless_allowed() {
    if !require("run_sockets") {
        return;
    }
    let sock = "/run/csb-docker.sock";
    for (conf, expect) in [
        ("egress-jail = 0\n", "BLOCKED"),
        (
            "egress-jail = 0\nallow-write = /run/csb-docker.sock\n",
            "REACHED TOKEN",
        ),
    ] {
        let w = World::new("runsock");
        w.install_by_hand(&w.root.join("bin/probe"), conf);
        for who in BOTH {
            let o = w
                .command_with_setup(
                    who,
                    &w.workspace(who),
                    &run_socket_setup(&w, sock),
                    &[],
                    &["claude", "unix", sock],
                )
                .output()
                .unwrap();
            assert!(o.status.success(), "{who:?}: {}", stderr(&o));
            assert!(
                stdout(&o).starts_with(&format!("{sock} {expect}")),
                "{who:?} with {conf:?}: {}",
                stdout(&o)
            );
        }
    }
}

#[test]
fn missing_prerequisites_refuse_with_fix_and_escape_hatch() {
    if !require("prerequisites") {
        return;
    }
    let w = World::with_probe("prereq");
    std::fs::write(w.root.join("bin/zero"), "0\n").unwrap();
    std::fs::write(w.root.join("bin/not-exec"), "").unwrap();
    let r = w.root.display().to_string();
    for (setup, fix) in [
        (format!("mount --bind {r}/bin/not-exec /usr/bin/bwrap"), "apt-get install bubblewrap"),
        (format!("mount --bind {r}/bin/zero /proc/sys/user/max_user_namespaces"), "user.max_user_namespaces"),
        (
            format!("mount -t tmpfs tmpfs /usr/libexec/claude-sandbox && cp {r}/bin/claude-sandbox /usr/libexec/claude-sandbox/"),
            "/usr/libexec/claude-sandbox/claude (the real Claude Code binary) is missing",
        ),
    ] {
        for who in BOTH {
            let o = w.command_with_setup(who, &w.workspace(who), &setup, &[], &["claude", "report"]).output().unwrap();
            let err = stderr(&o);
            assert!(!o.status.success(), "{who:?} {setup}: ran anyway");
            assert!(stdout(&o).is_empty(), "{who:?} {setup}: the probe ran");
            assert_eq!(err.lines().count(), 1, "{who:?}: one line: {err}");
            assert!(err.contains(fix), "{who:?} {setup}: {err}");
        }
    }
    // bubblewrap and user namespaces: the fix plus the explicit escape hatch.
    let o = w
        .command_with_setup(
            Who::User,
            &w.workspace(Who::User),
            &format!("mount --bind {r}/bin/not-exec /usr/bin/bwrap"),
            &[],
            &["claude"],
        )
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125));
    assert!(
        stderr(&o).contains("/etc/claude-code/allow-unwrapped"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn plan_prints_the_launch_and_its_typed_description() {
    if !require("plan_prints_the_launch") {
        return;
    }
    let w = World::with_probe("planjson");
    let bin = "/usr/libexec/claude-sandbox/claude-sandbox";
    for who in BOTH {
        let home = w.home(who).display().to_string();
        let o = w.run(
            who,
            &[],
            &[bin, "plan", "--json", "--", "-p", "hi", "--chrome"],
        );
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        let sb: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(
            sb["network"]["mode"], "host",
            "egress-jail = 0 in the world: the host's network"
        );
        assert_eq!(
            sb["command"]["args"],
            serde_json::json!(["--no-chrome", "-p", "hi"])
        );
        let mounts = sb["mounts"].as_array().unwrap();
        assert!(
            mounts
                .iter()
                .any(|m| m["op"] == "tmpfs" && m["dst"] == home.as_str()),
            "{who:?}: $HOME is a tmpfs: {mounts:#?}"
        );
        assert!(
            mounts.iter().any(|m| m["op"] == "checked"
                && m["resolved"] == w.workspace(who).display().to_string().as_str()),
            "{who:?}: the workspace is bound by checked fd"
        );
        // The text form is the rendered argv, one per line, from the same sandbox.
        let o = w.run(who, &[], &[bin, "plan", "--", "-p", "hi"]);
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        let text = stdout(&o);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[..2], ["bwrap", "--die-with-parent"]);
        assert!(lines.windows(2).any(|p| p == ["--tmpfs", home.as_str()]));
        assert_eq!(lines[lines.len() - 3..], ["--no-chrome", "-p", "hi"]);
        // Hostile input to `plan` is refused like a launch's: $HOME as workspace.
        let o = w
            .command_in(who, &w.home(who), &[], &[bin, "plan", "--json"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{who:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("holds $HOME"), "{}", stderr(&o));
        assert!(stdout(&o).is_empty());
    }
}

/// The notice a launch prints for a weakening variable it was allowed to use.
fn weakens_line(var: &str, value: &str) -> String {
    format!("claude-sandbox: {var}={value} weakens the sandbox (allowed by allow-env-overrides in /etc/claude-sandbox.conf)")
}

#[test]
fn environment_cannot_weaken_the_sandbox_unless_etc_allows_it() {
    if !require("env_cannot_weaken") {
        return;
    }
    const JAIL: &str = "CLAUDE_SANDBOX_EGRESS_JAIL";
    // The jail is on and no-forge set in both files, so that turning either
    // off is weakening; the second file allows it.
    let refusing = World::new("envrefuse");
    refusing.install_by_hand(&refusing.root.join("bin/probe"), "no-forge\n");
    let allowing = World::new("envallow");
    allowing.install_by_hand(
        &allowing.root.join("bin/probe"),
        "no-forge\nallow-env-overrides\n",
    );
    let cases = |w: &World| -> Vec<(&'static str, String)> {
        // Paths that exist, so that an allowed launch can bind them.
        let (extra, other) = (w.root.join("extra"), w.root.join("ws/other"));
        for d in [&extra, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        vec![
            (JAIL, "0".into()),
            ("CLAUDE_SANDBOX_NO_FORGE", "0".into()),
            ("CLAUDE_SANDBOX_ALLOW_WRITE", extra.display().to_string()),
            ("CLAUDE_SANDBOX_ALLOW_IP", "10.0.0.5".into()),
            ("CLAUDE_SANDBOX_PASS_ENV", "FOO".into()),
            ("CLAUDE_SANDBOX_WORKSPACE_ROOT", other.display().to_string()),
        ]
    };
    for who in BOTH {
        for (var, value) in cases(&refusing) {
            for argv in [&["claude", "report"][..], &[SELF_BIN, "plan"]] {
                let o = refusing.run(who, &[(var, &value)], argv);
                let err = stderr(&o);
                assert_eq!(
                    o.status.code(),
                    Some(2),
                    "{who:?} {var}={value} {argv:?}: {err}"
                );
                assert!(
                    stdout(&o).is_empty(),
                    "{who:?} {var}: {argv:?} ran: {}",
                    stdout(&o)
                );
                assert_eq!(err.lines().count(), 1, "{who:?}: one line: {err}");
                for part in [
                    format!("claude-sandbox: environment {var}={value} would weaken the sandbox"),
                    "allow-env-overrides".into(),
                    "/etc/claude-sandbox.conf".into(),
                ] {
                    assert!(err.contains(&part), "{who:?} {var}: no {part:?} in {err}");
                }
            }
        }
        for (var, value) in cases(&allowing) {
            // The jail stays off for the launch itself (no network here).
            let mut env = vec![(var, value.as_str())];
            if var != JAIL {
                env.push((JAIL, "0"));
            }
            let o = allowing.run(who, &env, &["claude", "report"]);
            let err = stderr(&o);
            assert!(o.status.success(), "{who:?} {var}={value}: {err}");
            let r = report(&o);
            assert_eq!(
                r["no_new_privs"], "1",
                "{who:?} {var}: sandboxed all the same"
            );
            let mut lines: Vec<String> = env.iter().map(|(k, v)| weakens_line(k, v)).collect();
            lines.sort();
            let sorted = |s: String| {
                let mut v: Vec<String> = s.lines().map(String::from).collect();
                v.sort();
                v
            };
            assert_eq!(sorted(err), lines, "{who:?} {var}");
            // `plan` says the same.
            let o = allowing.run(who, &env, &[SELF_BIN, "plan"]);
            assert!(o.status.success(), "{who:?} plan {var}: {}", stderr(&o));
            assert!(stdout(&o).starts_with("bwrap\n"));
            assert_eq!(sorted(stderr(&o)), lines, "{who:?} plan {var}");
        }
    }
    // doctor says whether the opt-in is on.
    let doctor = |w: &World, env: &[(&str, &str)]| {
        let o = w.run(Who::Root, env, &[SELF_BIN, "doctor"]);
        stdout(&o)
            .lines()
            .find(|l| l.contains(" config: "))
            .unwrap_or_else(|| panic!("no config line: {}", stdout(&o)))
            .to_string()
    };
    let off = doctor(&refusing, &[]);
    assert!(
        off.starts_with("ok") && off.contains("allow-env-overrides off"),
        "{off}"
    );
    let refused = doctor(&refusing, &[(JAIL, "0")]);
    assert!(
        refused.starts_with("FAIL") && refused.contains("allow-env-overrides"),
        "{refused}"
    );
    let on = doctor(&allowing, &[(JAIL, "0")]);
    assert!(
        on.starts_with("ok") && on.contains("allow-env-overrides on") && on.contains(JAIL),
        "{on}"
    );
}

#[test]
fn environment_that_does_not_weaken_is_honoured_without_the_opt_in() {
    if !require("env_strengthens") {
        return;
    }
    // Jail off in the file (no network here), no allow-env-overrides.
    let w = World::with_probe("envstrong");
    for who in BOTH {
        let ws = w.workspace(who).display().to_string();
        // The workspace root set to the current directory: the shadow passes
        // it into the sandbox, where a nested `claude` sees it unchanged.
        for env in [
            vec![("CLAUDE_SANDBOX_WORKSPACE_ROOT", ws.as_str())],
            vec![
                ("CLAUDE_SANDBOX_NO_FORGE", "1"),
                ("CLAUDE_SANDBOX_EGRESS_JAIL", "0"),
            ],
            vec![
                ("CLAUDE_SANDBOX_ALLOW_WRITE", ""),
                ("CLAUDE_SANDBOX_PASS_ENV", ""),
            ],
        ] {
            let o = w.run(
                who,
                &env,
                &[
                    "claude",
                    "shell",
                    "echo \"$CLAUDE_SANDBOX_WORKSPACE_ROOT\"; claude report",
                ],
            );
            assert!(o.status.success(), "{who:?} {env:?}: {}", stderr(&o));
            assert_eq!(stderr(&o), "", "{who:?} {env:?}: nothing weakened");
            let out = stdout(&o);
            let passed = if env[0].0 == "CLAUDE_SANDBOX_WORKSPACE_ROOT" {
                ws.as_str()
            } else {
                ""
            };
            assert_eq!(out.lines().next(), Some(passed), "{who:?}: {out}");
            assert_eq!(report(&o)["env"]["IS_SANDBOX"], "1", "{who:?} {env:?}");
        }
    }
}

#[test]
fn a_socket_created_under_run_after_the_launch_is_unreachable() {
    if !require("late_run_socket") {
        return;
    }
    let w = World::with_probe("latesock");
    let sock = "/run/late/x/y.sock";
    let netprobe = netprobe_in(&w).display().to_string();
    // The session waits until the host has created the socket, then tries it;
    // the host checks its own listener answers (so BLOCKED is the sandbox's doing).
    let script = format!(
        "rm -f started go\n\
         claude shell 'touch started; while [ ! -e go ]; do sleep 0.05; done; claude unix {sock}' > inside.out 2>&1 &\n\
         for i in $(seq 200); do [ -e started ] && break; sleep 0.05; done\n\
         python3 {netprobe} unix-serve {sock} TOKEN 20 >/dev/null 2>&1 &\n\
         for i in $(seq 50); do [ -S {sock} ] && break; sleep 0.1; done\n\
         touch go; wait %1\n\
         python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(\"HOST\", s.recv(5).decode())' {sock}\n\
         cat inside.out\n"
    );
    for who in BOTH {
        let o = w
            .command_with_setup(
                who,
                &w.workspace(who),
                "mount -t tmpfs tmpfs /run && mkdir -p /run/late/x && chmod -R 777 /run/late",
                &[],
                &["sh", "-c", &script],
            )
            .output()
            .unwrap();
        let out = stdout(&o);
        assert!(
            out.contains("HOST TOKEN"),
            "{who:?}: control failed: {out}{}",
            stderr(&o)
        );
        assert!(
            out.contains(&format!("{sock} BLOCKED")),
            "{who:?}: the late socket was reachable from inside: {out}"
        );
    }
}

#[test]
fn launched_by_root_reads_no_more_than_a_user_would() {
    if !require("root_view") {
        return;
    }
    let w = World::with_probe("rootview");
    // Root-only files and directories in each system tree (tmpfs over the
    // trees that are the machine's own, so nothing is written to them).
    let setup = "echo etc-secret > /etc/csb-secret && chmod 600 /etc/csb-secret\n\
        mount -t tmpfs tmpfs /var/lib && mkdir -m 700 /var/lib/csb-secret && echo var-secret > /var/lib/csb-secret/key\n\
        mount -t tmpfs tmpfs /opt && echo opt-secret > /opt/csb-secret && chmod 600 /opt/csb-secret\n\
        mount -t tmpfs tmpfs /srv && mkdir -p /srv/x && chmod 700 /srv/x && echo srv-secret > /srv/x/key\n";
    let script = "for f in /etc/csb-secret /var/lib/csb-secret/key /opt/csb-secret /srv/x/key; do \
        if cat $f 2>/dev/null; then echo \"READ $f\"; else echo \"unreadable $f\"; fi; done; \
        grep -c '^root:' /etc/passwd; ls /usr/bin/env; echo x > written && cat written";
    for who in BOTH {
        let o = w.shell_with_setup(who, setup, script).output().unwrap();
        let out = stdout(&o);
        assert!(o.status.success(), "{who:?}: {}\n{out}", stderr(&o));
        for content in ["etc-secret", "var-secret", "opt-secret", "srv-secret"] {
            assert!(
                !out.contains(content),
                "{who:?}: a root-only file was read inside: {out}"
            );
        }
        assert!(!out.contains("READ"), "{who:?}: {out}");
        assert_eq!(out.matches("unreadable").count(), 4, "{who:?}: {out}");
        assert!(
            out.contains("\n1\n/usr/bin/env\nx\n"),
            "{who:?}: /etc/passwd, /usr/bin and the workspace: {out}"
        );
    }
    // Control: outside the sandbox, root reads them.
    let o = w
        .command_with_setup(
            Who::Root,
            &w.workspace(Who::Root),
            setup,
            &[],
            &["sh", "-c", "cat /etc/csb-secret /srv/x/key"],
        )
        .output()
        .unwrap();
    assert_eq!(stdout(&o), "etc-secret\nsrv-secret\n", "{}", stderr(&o));
}
