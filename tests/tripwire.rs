//! End-to-end: the tripwire at exit (issue #12 item 3), as root and as an
//! unprivileged user, with the probe standing in for the real binary and
//! git run inside the sandbox and, for the controls, on the host with the
//! world's clean HOME.

mod common;
use common::*;

use std::io::BufRead;
use std::path::Path;

const BIN: &str = "/usr/libexec/claude-sandbox/claude-sandbox";
const HEADER: &str = "claude-sandbox: this session changed what runs outside the sandbox:";

/// The creation guard's git rule off (the test mutation `no-git-rule`):
/// the rule refuses what these sessions plant in git directories, and the
/// tripwire is the line behind it, tested as if the rule had failed.
const RULE_OFF: &[(&str, &str)] = &[("CLAUDE_SANDBOX_TEST_MUTATION", "no-git-rule")];

/// A world whose binary has the test mutations, the probe as the real
/// binary, jail off; its sessions run with [`RULE_OFF`].
fn rule_off_world(name: &str) -> World {
    let w = World::new(name);
    w.use_mutation_binary();
    w.install_by_hand(&w.root.join("bin/probe"), "egress-jail = 0\n");
    w
}

/// Run `git status` on the host in `dir` (as `who`, the world's HOME) and
/// say whether the planted fsmonitor ran (it touches MARK), removing MARK.
fn host_git_runs_mark(w: &World, who: Who, dir: &Path) -> bool {
    let o = w
        .command_in(who, dir, &[], &["git", "status", "--short"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{who:?} git status: {}", stderr(&o));
    let mark = dir.join("MARK");
    let ran = mark.exists();
    let _ = std::fs::remove_file(mark);
    ran
}

#[test]
fn a_planted_fsmonitor_is_reported_listed_and_reverted() {
    if !require("tripwire_fsmonitor") {
        return;
    }
    let w = rule_off_world("tripfsm");
    for who in BOTH {
        let sub = w.workspace(who).join("sub");
        let o = w.run(
            who,
            RULE_OFF,
            &[
                "claude",
                "shell",
                "git init -q sub && git -C sub config core.fsmonitor 'touch MARK'",
            ],
        );
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.starts_with(HEADER), "{who:?}: {err}");
        assert_eq!(err.matches(HEADER).count(), 1, "{who:?}: one block: {err}");
        let line = format!(
            "  + {}  (new)  core.fsmonitor = touch MARK\n",
            sub.join(".git/config").display()
        );
        assert!(err.contains(&line), "{who:?}: {err}");
        assert!(
            err.ends_with(&format!(
                "Review with: {BIN} review\nUndo with:   {BIN} review --revert\n"
            )),
            "{who:?}: {err}"
        );
        // The log is out of the sandbox's reach; a session that changes
        // nothing says nothing.
        let o = w.run(
            who,
            RULE_OFF,
            &[
                "claude",
                "shell",
                "ls -d \"$HOME/.local/state/claude-sandbox/tripwire\" 2>/dev/null || echo HIDDEN",
            ],
        );
        assert_eq!(stdout(&o), "HIDDEN\n", "{who:?}");
        assert_eq!(stderr(&o), "", "{who:?}: an unchanged session is silent");
        // `review` lists it (exit 1: something left to review).
        let o = w.run(who, &[], &[BIN, "review"]);
        assert_eq!(o.status.code(), Some(1), "{who:?}: {}", stderr(&o));
        assert!(stdout(&o).contains(&line), "{who:?}: {}", stdout(&o));
        // Control: the host's git obeys what the session planted.
        assert!(host_git_runs_mark(&w, who, &sub), "{who:?}: control");
        let o = w.run(who, &[], &[BIN, "review", "--revert"]);
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", stderr(&o));
        assert_eq!(
            stdout(&o),
            format!("reverted {}\n", sub.join(".git/config").display()),
            "{who:?}"
        );
        assert!(!sub.join(".git/config").exists(), "{who:?}");
        assert!(
            !host_git_runs_mark(&w, who, &sub),
            "{who:?}: the fsmonitor ran after the revert"
        );
        let o = w.run(who, &[], &[BIN, "review"]);
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", stdout(&o));
        assert_eq!(stdout(&o), "claude-sandbox: no recorded change to review\n");
    }
}

#[test]
fn hooks_written_into_the_workspace_settings_are_reported() {
    if !require("tripwire_settings") {
        return;
    }
    let w = World::with_probe("triphooks");
    for who in BOTH {
        let settings = w.workspace(who).join(".claude/settings.json");
        let o = w.run(
            who,
            &[],
            &[
                "claude",
                "shell",
                r#"mkdir -p .claude && printf '%s' '{"model":"x","hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch PWNED"}]}]}}' > .claude/settings.json"#,
            ],
        );
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&format!(
                "  + {}  (new)  hooks.SessionStart added\n",
                settings.display()
            )),
            "{who:?}: {err}"
        );
        // Undone key by key: the file keeps what runs nothing.
        let o = w.run(who, &[], &[BIN, "review", "--revert"]);
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", stderr(&o));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
        assert_eq!(v, serde_json::json!({"model": "x"}), "{who:?}");
    }
}

#[test]
fn a_session_that_changes_nothing_that_runs_prints_and_writes_nothing() {
    if !require("tripwire_quiet") {
        return;
    }
    let w = World::with_probe("tripquiet");
    for who in BOTH {
        let o = w.run(who, &[], &["claude", "exit", "3"]);
        assert_eq!(o.status.code(), Some(3), "{who:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "{who:?}");
        // A new repository and settings that run nothing.
        let o = w.run(
            who,
            &[],
            &[
                "claude",
                "shell",
                "git init -q plain && git -C plain config user.name x && mkdir -p .claude && echo '{\"model\":\"x\"}' > .claude/settings.json",
            ],
        );
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "{who:?}");
        assert!(
            !w.home(who)
                .join(".local/state/claude-sandbox/tripwire")
                .exists(),
            "{who:?}: nothing recorded"
        );
    }
}

#[test]
fn a_crash_or_a_signal_to_the_shadow_still_reports() {
    if !require("tripwire_crash") {
        return;
    }
    let w = rule_off_world("tripcrash");
    for who in BOTH {
        // The real binary crashes (SIGABRT).
        let o = w.run(
            who,
            RULE_OFF,
            &[
                "claude",
                "shell",
                "git init -q a && git -C a config alias.st '!touch X' && kill -ABRT $PPID",
            ],
        );
        assert_eq!(o.status.code(), Some(134), "{who:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("/a/.git/config  (new)  alias.st = !touch X"),
            "{who:?}: {}",
            stderr(&o)
        );
        // SIGTERM to the shadow mid-session.
        let mut c = w.command(
            who,
            RULE_OFF,
            &[
                "claude",
                "shell",
                "git init -q b && git -C b config core.pager 'touch P' && echo READY && sleep 30",
            ],
        );
        c.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, "READY\n", "{who:?}");
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(143), "{who:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("/b/.git/config  (new)  core.pager = touch P"),
            "{who:?}: {}",
            stderr(&o)
        );
        let o = w.run(who, &[], &[BIN, "review", "--revert"]);
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", stderr(&o));
        assert_eq!(stdout(&o).lines().count(), 2, "{who:?}: {}", stdout(&o));
    }
}

/// Identity and content of a host file: a revert must leave all three.
fn file_state(p: &Path) -> (u64, u64, Vec<u8>) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(p).unwrap();
    (m.dev(), m.ino(), std::fs::read(p).unwrap())
}

/// Run `script` in a session that prints READY, then waits for the host to
/// create `go` in the workspace after `meanwhile` ran; its output.
fn session_with_host_step(
    w: &World,
    who: Who,
    script: &str,
    meanwhile: impl FnOnce(),
) -> std::process::Output {
    let script =
        format!("{script} && echo READY && while [ ! -e go ]; do sleep 0.1; done; rm -f go");
    let mut c = w.command(who, &[], &["claude", "shell", &script]);
    c.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "READY\n", "{who:?}");
    meanwhile();
    std::fs::write(w.workspace(who).join("go"), "").unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn reverting_a_pointer_to_the_home_never_touches_the_home() {
    if !require("tripwire_revert_outside") {
        return;
    }
    let w = World::with_probe("triprevkube");
    for who in BOTH {
        let kube = w.home(who).join(".kube");
        w.put(who, ".kube/config", "apiVersion: v1\n");
        w.put(who, ".kube/hooks/x", "the user's\n");
        // The session points a `.git` file at ~/.kube; meanwhile the
        // user's tools save their files as they do (a new file renamed
        // over), so they look new to a tripwire that follows the pointer.
        let o = session_with_host_step(
            &w,
            who,
            &format!(
                "mkdir k && printf 'gitdir: %s\\n' {} > k/.git",
                kube.display()
            ),
            || {
                for rel in [".kube/config", ".kube/hooks/x"] {
                    let text = std::fs::read_to_string(w.home(who).join(rel)).unwrap();
                    let tmp = w.put(who, &format!("{rel}.new"), &text);
                    std::fs::rename(tmp, w.home(who).join(rel)).unwrap();
                }
            },
        );
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        let (config, hook) = (kube.join("config"), kube.join("hooks/x"));
        let before = (file_state(&config), file_state(&hook));
        let listed = stdout(&w.run(who, &[], &[BIN, "review"]));
        let o = w.run(who, &[], &[BIN, "review", "--revert"]);
        assert_eq!(
            before,
            (file_state(&config), file_state(&hook)),
            "{who:?}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        assert!(!stdout(&o).contains(".kube"), "{who:?}: {}", stdout(&o));
        // What the record names outside the workspace is named and left.
        for p in [&config, &hook] {
            if listed.contains(&p.display().to_string())
                || listed.contains(&kube.join("hooks").display().to_string())
            {
                assert_eq!(o.status.code(), Some(1), "{who:?}: {}", stderr(&o));
            }
        }
        if listed.contains(&config.display().to_string()) {
            let line = format!(
                "claude-sandbox: not reverted: {}: outside the session's workspace",
                config.display()
            );
            assert!(stderr(&o).contains(&line), "{who:?}: {}", stderr(&o));
        }
        // Control: the pointer the session planted, once recorded, goes.
        let pointer = w.workspace(who).join("k/.git");
        if listed.contains(&pointer.display().to_string()) {
            assert!(!pointer.exists(), "{who:?}: {}", stderr(&o));
        }
    }
}

#[test]
fn a_commondir_planted_in_the_workspace_repository_is_reverted() {
    if !require("tripwire_revert_commondir") {
        return;
    }
    let w = rule_off_world("triprevcommon");
    for who in BOTH {
        let ws = w.workspace(who);
        let o = w
            .command_in(who, &ws, &[], &["git", "init", "-q"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        let o = w.run(
            who,
            GUARD_OFF,
            &[
                "claude",
                "shell",
                "mkdir -p c/objects c/refs && printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = touch MARK\\n' > c/config && echo ../c > .git/commondir",
            ],
        );
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        let commondir = ws.join(".git/commondir");
        if commondir.exists() {
            assert!(
                stderr(&o).contains(&format!("  + {}  (new)", commondir.display())),
                "{who:?}: {}",
                stderr(&o)
            );
            // Control: host git in the workspace root runs what it names.
            assert!(host_git_runs_mark(&w, who, &ws), "{who:?}: control");
        }
        let o = w.run(who, &[], &[BIN, "review", "--revert"]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{who:?}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        assert!(!commondir.exists(), "{who:?}: {}", stdout(&o));
        assert!(
            !host_git_runs_mark(&w, who, &ws),
            "{who:?}: the fsmonitor ran after the revert"
        );
    }
}

/// The creation guard off altogether (the test mutation `unguarded`): a
/// planted `.git/commondir` is refused by the guard's table too.
const GUARD_OFF: &[(&str, &str)] = &[("CLAUDE_SANDBOX_TEST_MUTATION", "unguarded")];

/// A world whose binary has the test mutations, the probe as the real
/// binary, jail off.
fn mutated_world(name: &str) -> World {
    let w = World::new(name);
    w.use_mutation_binary();
    w.install_by_hand(&w.root.join("bin/probe"), "egress-jail = 0\n");
    w
}

/// Issue #22 item 4: repositories the launch's walk never reaches, each
/// armed during the session — created at depth 5, in a hidden directory,
/// in `node_modules`, a bare-style git directory in `src/`, and a
/// repository that existed before the session behind 6,000 files (the
/// launch's walk stops at 5,000 entries). The creation guard is taken off
/// (`unguarded`): this is the tripwire as the second line, reporting what
/// the rule would have refused.
const OUT_OF_REACH: &str = r#"
set -e
arm() { git --git-dir="$1" config core.fsmonitor 'touch MARK'; }
git init -q a/b/c/d/deep && arm a/b/c/d/deep/.git
git init -q .tools/t && arm .tools/t/.git
git init -q node_modules/x && arm node_modules/x/.git
git init -q --bare src && arm src
arm zz/.git
echo PLANTED
"#;

#[test]
fn repositories_out_of_the_launchs_walk_are_reported_at_exit() {
    if !require("tripwire_reach") {
        return;
    }
    let w = mutated_world("tripreach");
    let unguarded = [("CLAUDE_SANDBOX_TEST_MUTATION", "unguarded")];
    for who in BOTH {
        let ws = w.workspace(who);
        let o = w.run(
            who,
            &[],
            &[
                "sh",
                "-c",
                "mkdir aaa && (cd aaa && seq -f 'f%g' 6000 | xargs touch) && git init -q zz && echo ok",
            ],
        );
        assert!(stdout(&o).contains("ok"), "{who:?}: {}", stderr(&o));
        // Older than the tripwire's slack before the launch: there before.
        std::thread::sleep(std::time::Duration::from_millis(1500));
        // Control: nothing planted, nothing said.
        let o = w.run(
            who,
            &unguarded,
            &[
                "claude",
                "shell",
                "git init -q a/b/c/d/plain && git init -q node_modules/y && echo x > zz/file",
            ],
        );
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "{who:?}: control");
        let o = w.run(who, &unguarded, &["claude", "shell", OUT_OF_REACH]);
        let err = stderr(&o);
        assert!(stdout(&o).contains("PLANTED"), "{who:?}: {err}");
        assert!(err.starts_with(HEADER), "{who:?}: {err}");
        for (config, sign) in [
            ("a/b/c/d/deep/.git/config", '+'),
            (".tools/t/.git/config", '+'),
            ("node_modules/x/.git/config", '+'),
            ("src/config", '+'),
        ] {
            let line = format!(
                "  {sign} {}  (new)  core.fsmonitor = touch MARK\n",
                ws.join(config).display()
            );
            assert!(
                err.contains(&line),
                "{who:?}: {config} not reported:\n{err}"
            );
        }
        // Rewritten by `git config` (a new inode): reported as changed,
        // what it held before unknown (so never removed by a revert).
        let zz = ws.join("zz/.git/config").display().to_string();
        assert!(
            err.contains(&format!("  ~ {zz}  core.fsmonitor = touch MARK\n")),
            "{who:?}: the existing repository was not reported:\n{err}"
        );
        // Control: host git obeys what was planted there.
        for dir in ["a/b/c/d/deep", ".tools/t", "node_modules/x", "zz"] {
            assert!(
                host_git_runs_mark(&w, who, &ws.join(dir)),
                "{who:?}: control: {dir}"
            );
        }
        // A revert never removes the config of a repository that existed.
        let _ = w.run(who, &[], &[BIN, "review", "--revert"]);
        assert!(
            ws.join("zz/.git/config").is_file(),
            "{who:?}: zz's config removed"
        );
        assert!(
            !ws.join("a/b/c/d/deep/.git/config").exists(),
            "{who:?}: control: a new one is"
        );
    }
}

/// Issue #22 items 2 and 4: a pointer out of the workspace made during
/// the session is reported at exit; at the next launch it is named and
/// not followed.
#[test]
fn a_pointer_out_of_the_workspace_is_reported_at_exit_and_named_at_launch() {
    if !require("tripwire_pointer") {
        return;
    }
    let w = World::with_probe("trippointer");
    for who in BOTH {
        let ws = w.workspace(who);
        let kube = w.put(who, ".kube/config", "SECRET\n");
        let kube = kube.parent().unwrap().to_path_buf();
        let plant = format!(
            "mkdir k && printf 'gitdir: %s\\n' {} > k/.git",
            shell_quote(&kube.to_string_lossy())
        );
        let o = w.run(who, &[], &["claude", "shell", &plant]);
        let err = stderr(&o);
        assert!(o.status.success(), "{who:?}: {err}");
        let line = format!(
            "  + {}  (new)  points outside the workspace ({}): not followed\n",
            ws.join("k/.git").display(),
            kube.display()
        );
        assert!(err.contains(&line), "{who:?}: {err}");
        let o = w.run(
            who,
            &[],
            &[
                "claude",
                "shell",
                "cat \"$0\" 2>&1 || true",
                &kube.join("config").to_string_lossy(),
            ],
        );
        let err = stderr(&o);
        assert!(!stdout(&o).contains("SECRET"), "{who:?}: {}", stdout(&o));
        assert_eq!(
            err,
            format!(
                "claude-sandbox: k/.git points outside the workspace ({}): not followed\n",
                kube.display()
            ),
            "{who:?}: named at launch, not again at exit"
        );
    }
}

/// The walk at exit is bounded by time; out of it, it says so in one line
/// (the budget is shortened in the test build only).
#[test]
fn a_walk_out_of_time_says_where_it_stopped() {
    if !require("tripwire_budget") {
        return;
    }
    let w = mutated_world("tripbudget");
    for who in BOTH {
        let o = w.run(who, &[], &["sh", "-c", "mkdir -p one two/three && echo ok"]);
        assert!(stdout(&o).contains("ok"), "{who:?}");
        let budget = [("CLAUDE_SANDBOX_TEST_TRIPWIRE_BUDGET_MS", "0")];
        let o = w.run(who, &budget, &["claude", "exit", "0"]);
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        assert_eq!(
            stderr(&o),
            "claude-sandbox: tripwire: stopped after 0.0 s at 1 directories; not checked: one, two\n",
            "{who:?}"
        );
        // Control: with the product's budget, nothing to say.
        let o = w.run(who, &[], &["claude", "exit", "0"]);
        assert_eq!(stderr(&o), "", "{who:?}");
    }
}

/// Issue #22's second hostile session: `.git/commondir` in the workspace's
/// own repository, naming a directory whose config host git would then
/// obey in the workspace root. The creation guard refuses the pointer
/// (`commondir` is protected in every git directory); with the guard taken
/// off, the tripwire reports the pointer and the config behind it.
const COMMONDIR: &str = r#"
mkdir -p evil/hooks && printf '[core]\n\tfsmonitor = touch MARK\n' > evil/config
if printf '../evil\n' > .git/commondir 2>/dev/null; then echo MADE; else echo REFUSED; fi
"#;

#[test]
fn a_planted_commondir_is_refused_or_reported() {
    if !require("tripwire_commondir") {
        return;
    }
    let w = mutated_world("tripcommon");
    for who in BOTH {
        let ws = w.workspace(who);
        let o = w.run(who, &[], &["sh", "-c", "git init -q -b main . && echo ok"]);
        assert!(stdout(&o).contains("ok"), "{who:?}: {}", stderr(&o));
        let o = w.run(who, &[], &["claude", "shell", COMMONDIR]);
        assert_eq!(stdout(&o), "REFUSED\n", "{who:?}: {}", stderr(&o));
        assert!(!ws.join(".git/commondir").exists(), "{who:?}");
        std::fs::remove_dir_all(ws.join("evil")).unwrap();
        let unguarded = [("CLAUDE_SANDBOX_TEST_MUTATION", "unguarded")];
        let o = w.run(who, &unguarded, &["claude", "shell", COMMONDIR]);
        assert_eq!(stdout(&o), "MADE\n", "{who:?}: control: {}", stderr(&o));
        let err = stderr(&o);
        for line in [
            format!("  + {}  (new)\n", ws.join(".git/commondir").display()),
            format!(
                "  + {}  (new)  core.fsmonitor = touch MARK\n",
                ws.join("evil/config").display()
            ),
        ] {
            assert!(err.contains(&line), "{who:?}: {line:?} missing:\n{err}");
        }
    }
}

/// A repository hidden in a directory the walk at exit cannot list (mode
/// 0111: host git can still enter it by name): root's walk lists it
/// anyway and reports the repository; the user's says it could not list
/// it, never silent. (The creation guard is off, as above.)
#[test]
fn a_directory_the_walk_cannot_list_is_said() {
    if !require("tripwire_unlisted") {
        return;
    }
    let w = mutated_world("tripunlisted");
    let unguarded = [("CLAUDE_SANDBOX_TEST_MUTATION", "unguarded")];
    for who in BOTH {
        let ws = w.workspace(who);
        let o = w.run(
            who,
            &unguarded,
            &[
                "claude",
                "shell",
                "git init -q d/sub && git -C d/sub config core.fsmonitor 'touch MARK' && chmod 111 d",
            ],
        );
        let err = stderr(&o);
        assert!(o.status.success(), "{who:?}: {err}");
        let _ = std::fs::set_permissions(
            ws.join("d"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        );
        let reported = format!(
            "  + {}  (new)  core.fsmonitor = touch MARK\n",
            ws.join("d/sub/.git/config").display()
        );
        match who {
            Who::Root => assert!(err.contains(&reported), "{who:?}: {err}"),
            Who::User => assert!(
                err.ends_with("claude-sandbox: tripwire: could not list d: not checked\n"),
                "{who:?}: {err}"
            ),
        }
    }
}
