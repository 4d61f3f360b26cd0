//! Git directories by rule (issue #22): a hostile session plants a command
//! in every kind of git directory it can reach — one it makes, one deep,
//! hidden or under `node_modules`, a bare-style one, one past the launch
//! walk's reach, the workspace's own through `commondir` — and host git,
//! run in each of them while the session is still running and after it,
//! never runs it. With the rule taken out (the test mutation
//! `no-git-rule`) the same session does plant commands that host git runs:
//! the wall has something behind it. Ordinary git work inside goes on.
//! Real bubblewrap, as root and as an unprivileged user.

mod common;
use common::*;

use std::time::{Duration, Instant};

/// Set up outside the sandbox, before the launch: the workspace is a
/// repository with a commit, and an existing repository lies at depth 6
/// behind 6,000 files (past the launch walk's entry budget).
const HOST_SETUP: &str = r#"
set -e
g() { git -c user.name=t -c user.email=t@t -c init.defaultBranch=main "$@"; }
g init -q . && g commit -q --allow-empty -m init
mkdir -p many/files && (cd many/files && seq 6000 | xargs touch)
g init -q many/x/y/z/w/old && g -C many/x/y/z/w/old commit -q --allow-empty -m init
echo ok
"#;

/// The hostile session. `RAN-*` markers name what ran on the host. Each
/// attempt prints `PLANTED name` when its call succeeded, `refused name`
/// otherwise; then the session waits (up to 30 s) while the host runs git.
const HOSTILE: &str = r#"
M="$PWD"
fsm() { printf '[core]\n\tfsmonitor = "touch %s/RAN-%s"\n' "$M" "$1"; }
hook() { printf '#!/bin/sh\ntouch %s/RAN-%s\n' "$M" "$1"; }
t() { if eval "$2" >/dev/null 2>&1; then echo "PLANTED $1"; else echo "refused $1"; fi; }
git init -q -b main new || echo NO-INIT
t new-config-cmd 'git -C new config core.fsmonitor "touch $M/RAN-new-cmd"'
t new-config-append 'fsm new-append >> new/.git/config'
t new-hookspath 'git -C new config core.hooksPath "$M/hooks-elsewhere"'
t new-hook 'hook new-hook > new/.git/hooks/post-checkout && chmod +x new/.git/hooks/post-checkout'
t new-hook-rename 'mv new/.git/hooks/pre-commit.sample new/.git/hooks/pre-commit'
t new-hook-link 'ln new/.git/hooks/update.sample new/.git/hooks/pre-push'
t new-config-link 'ln new/.git/config linked-config && fsm new-link >> linked-config'
t new-config-procfd 'exec 3< new/.git/config && fsm new-procfd >> /proc/self/fd/3'
t new-config-symlink 'rm -f new/.git/config && ln -s ../../planted-config new/.git/config'
t new-attributes 'echo "* filter=x" > new/.git/info/attributes'
t new-alternates 'echo /tmp > new/.git/objects/info/alternates'
t new-commondir 'echo ../../evil > new/.git/commondir'
t new-config-worktree 'fsm new-wt > new/.git/config.worktree'
# O_CREAT|O_EXCL (`set -C`) and O_CREAT without it (a shell's `>`, O_TRUNC)
# by a process whose context the supervisor remembers after a few
# creations (decisions 0022 and 0023), each in a repository of its own:
# through a symlink to hooks/, by an absolute path through it, by a bare
# name in hooks/, and by a bare name from a descriptor of hooks/.
for m in excl trunc; do
  r=ex; l=hk; c='set -C &&'; f=os.O_EXCL
  [ $m = trunc ] && { r=ex2; l=hk2; c=''; f=os.O_TRUNC; }
  git init -q -b main $r || echo NO-INIT
  ln -s $r/.git/hooks $l
  t ex-$m-symlink "($c : > $m-w1; : > $m-w2; : > $m-w3; hook ex-$m-symlink > $l/pre-commit && chmod +x $l/pre-commit)"
  t ex-$m-abs "($c : > $m-w4; : > $m-w5; : > $m-w6; hook ex-$m-abs > \"\$M/$l/commit-msg\" && chmod +x \"\$M/$l/commit-msg\")"
  t ex-$m-bare "(cd $r/.git/hooks && $c : > 1.sample && : > 2.sample && : > 3.sample && : > 4.sample && hook ex-$m-bare > post-checkout && chmod +x post-checkout)"
  t ex-$m-dirfd "hook ex-$m-dirfd | python3 -c '
import os, sys
for i in range(4): os.close(os.open(\"$m-d%d\" % i, os.O_CREAT | $f | os.O_WRONLY, 0o644))
d = os.open(\"$r/.git/hooks\", os.O_RDONLY)
f = os.open(\"post-commit\", os.O_CREAT | $f | os.O_WRONLY, 0o755, dir_fd=d)
os.write(f, sys.stdin.buffer.read())'"
done
fsm planted > planted-config
mkdir -p a/b/c/d/e .tools node_modules/x
for d in a/b/c/d/e/deep .tools/tool node_modules/x/dep; do
  git init -q -b main "$d" || echo NO-INIT
  t "$d" 'git -C "$d" config core.fsmonitor "touch $M/RAN-$(basename $d)"'
  t "$d-rename" 'cp "$d/.git/config" c.lock && fsm "$(basename $d)-mv" >> c.lock && mv c.lock "$d/.git/config"'
done
mkdir -p bare/objects && fsm bare > bare/config
t bare-refs 'mkdir bare/refs'
t bare-head 'echo "ref: refs/heads/main" > bare/HEAD'
mkdir -p bare2/objects bare2/refs && echo "ref: refs/heads/main" > bare2/HEAD
t bare2-config 'fsm bare2 > bare2/config'
t bare2-config-mv 'fsm bare2-mv > c2 && mv c2 bare2/config'
mkdir -p bare3/refs bare3-alt/info && echo /tmp > bare3-alt/info/alternates
t bare3-objects-symlink 'ln -s ../bare3-alt bare3/objects'
mkdir -p hooked/hooks && hook hooked > hooked/hooks/post-checkout && chmod +x hooked/hooks/post-checkout
t hooked-head 'git init -q --bare hooked'
mkdir -p evil/objects evil/refs
t ws-commondir 'echo "$M/evil" > .git/commondir'
t evil-config 'fsm evil > evil/config'
# A common directory completed by a unix socket named refs (issue #45):
# a linked worktree's commondir led to an ordinary directory holding a
# planted config and objects/; bind(2) made refs unseen.
git -c user.name=t -c user.email=t@t worktree add -q wt 2>/dev/null || echo NO-WT
mkdir -p evil2/objects && fsm evil2-sock > evil2/config
t wt-commondir 'echo "$M/evil2" > .git/worktrees/wt/commondir'
t sock-refs 'python3 -c "import socket; socket.socket(socket.AF_UNIX).bind(\"evil2/refs\")"'
t sock-refs-abs 'python3 -c "import socket; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).bind(\"$M/evil2/refs\")"'
O=many/x/y/z/w/old/.git
t old-append 'fsm old-append >> $O/config'
t old-config-cmd 'git -C many/x/y/z/w/old config core.pager "touch $M/RAN-old-pager"'
t old-hook 'hook old-hook > $O/hooks/post-commit && chmod +x $O/hooks/post-commit'
t old-hook-sample-write 'hook old-sample >> $O/hooks/pre-commit.sample'
touch READY
i=0; while [ ! -e DONE ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
echo END
"#;

/// What host git does in each repository the session touched.
const HOST_GIT: &str = r#"
for r in . wt new ex ex2 a/b/c/d/e/deep .tools/tool node_modules/x/dep bare bare2 hooked evil many/x/y/z/w/old; do
  [ -d "$r" ] || continue
  git -C "$r" status >/dev/null 2>&1
  git -C "$r" -c user.name=t -c user.email=t@t commit -q --allow-empty -m host >/dev/null 2>&1
  git -C "$r" checkout -q -b "host-$$-$RANDOM" >/dev/null 2>&1
  git -C "$r" fetch -q . >/dev/null 2>&1
  git -C "$r" log -1 >/dev/null 2>&1
done
ls RAN-* 2>/dev/null || true
echo HOST-DONE
"#;

/// Launch the hostile session, run host git in the workspace while it
/// waits, and again after it ended; what ran on the host, both times.
fn hostile_session(w: &World, who: Who, env: &[(&str, &str)]) -> (String, String, String) {
    let ws = w.workspace(who);
    let o = w.run(who, &[], &["sh", "-c", HOST_SETUP]);
    assert!(stdout(&o).contains("ok"), "{who:?}: {}", stderr(&o));
    let child = w
        .command(who, env, &["claude", "shell", HOSTILE])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ready = ws.join("READY");
    let start = Instant::now();
    while !ready.exists() && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ready.exists(), "{who:?}: the session never got to READY");
    let during = stdout(&w.run(who, &[], &["sh", "-c", HOST_GIT]));
    std::fs::write(ws.join("DONE"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(stdout(&out).contains("END"), "{who:?}: {}", stderr(&out));
    let after = stdout(&w.run(who, &[], &["sh", "-c", HOST_GIT]));
    (stdout(&out), during, after)
}

fn ran(host: &str) -> Vec<&str> {
    host.lines().filter(|l| l.starts_with("RAN-")).collect()
}

#[test]
fn planted_git_commands_never_run_on_the_host() {
    if !require("gitrule") {
        return;
    }
    let w = World::with_probe("gitrule");
    for who in BOTH {
        let (out, during, after) = hostile_session(&w, who, &[]);
        assert!(!out.contains("NO-INIT"), "{who:?}: git init failed:\n{out}");
        let planted: Vec<&str> = out.lines().filter(|l| l.starts_with("PLANTED")).collect();
        // Writing a sample, which git never runs, is allowed; what git
        // renames into a config succeeds with the key held out of it
        // (issue #44: the files are checked by host git below).
        assert_eq!(
            planted,
            [
                "PLANTED new-config-cmd",
                "PLANTED new-hookspath",
                // Written by a plain open: set aside, checked at the end.
                "PLANTED new-config-worktree",
                "PLANTED a/b/c/d/e/deep",
                "PLANTED a/b/c/d/e/deep-rename",
                "PLANTED .tools/tool",
                "PLANTED .tools/tool-rename",
                "PLANTED node_modules/x/dep",
                "PLANTED node_modules/x/dep-rename",
                "PLANTED bare2-config",
                "PLANTED bare2-config-mv",
                "PLANTED evil-config",
                "PLANTED wt-commondir",
                "PLANTED old-config-cmd",
                "PLANTED old-hook-sample-write"
            ],
            "{who:?}: planted:\n{out}"
        );
        assert_eq!(out.matches("refused ").count(), 27, "{who:?}:\n{out}");
        assert!(
            out.contains("refused sock-refs\n") && out.contains("refused sock-refs-abs\n"),
            "{who:?}:\n{out}"
        );
        assert!(!out.contains("NO-WT"), "{who:?}:\n{out}");
        let ws = w.workspace(who);
        for config in [
            "new/.git/config",
            "a/b/c/d/e/deep/.git/config",
            "bare2/config",
            "evil/config",
            "many/x/y/z/w/old/.git/config",
        ] {
            let text = std::fs::read_to_string(ws.join(config)).unwrap_or_default();
            assert!(
                !text.contains("fsmonitor")
                    && !text.contains("hooksPath")
                    && !text.contains("pager"),
                "{who:?}: {config} took it: {text}"
            );
        }
        assert!(
            ran(&during).is_empty(),
            "{who:?}: ran during the session: {during}"
        );
        assert!(
            ran(&after).is_empty(),
            "{who:?}: ran after the session: {after}"
        );
        assert!(during.contains("HOST-DONE") && after.contains("HOST-DONE"));
        assert!(!ws.join(".git/commondir").exists(), "{who:?}");
        empty_dir(&ws);
    }
}

#[test]
fn without_the_rule_the_same_session_plants_what_host_git_runs() {
    if !require("gitrule_mutation") {
        return;
    }
    let w = World::new("gitrule-mut");
    w.use_mutation_binary();
    w.install_by_hand(&w.root.join("bin/probe"), "egress-jail = 0\n");
    for who in BOTH {
        let env = [("CLAUDE_SANDBOX_TEST_MUTATION", "no-git-rule")];
        let (out, during, _) = hostile_session(&w, who, &env);
        let ran = ran(&during);
        // Deep, hidden, under node_modules, through the workspace's own
        // commondir, in a repository past the launch walk's reach, and by
        // `O_EXCL` creations the supervisor makes in one call.
        for marker in [
            "RAN-deep-mv",
            "RAN-tool-mv",
            "RAN-dep-mv",
            "RAN-evil",
            "RAN-old-append",
            "RAN-old-hook",
            "RAN-evil2-sock",
            "RAN-ex-excl-symlink",
            "RAN-ex-excl-abs",
            "RAN-ex-excl-bare",
            "RAN-ex-excl-dirfd",
            "RAN-ex-trunc-symlink",
            "RAN-ex-trunc-abs",
            "RAN-ex-trunc-bare",
            "RAN-ex-trunc-dirfd",
        ] {
            assert!(
                ran.contains(&marker),
                "{who:?}: {marker} did not run without the rule: {ran:?}\n{out}"
            );
        }
        empty_dir(&w.workspace(who));
    }
}

/// The same plants raced: pairs of processes started at once, one writing
/// a command into a would-be git directory (its `config`, a hook) while the
/// other gives it the `HEAD` that makes it one. The guard serves calls on
/// more than one thread, so the two are judged at the same time.
const RACE: &str = r#"
M="$PWD"
for i in $(seq 30); do
  mkdir -p c$i/.git/objects c$i/.git/refs h$i/.git/objects h$i/.git/refs h$i/.git/hooks
done
for i in $(seq 30); do
  printf '[core]\n\tfsmonitor = "touch %s/RAN-c%s"\n' "$M" $i > c$i/.git/config 2>/dev/null &
  echo 'ref: refs/heads/main' > c$i/.git/HEAD 2>/dev/null &
  { printf '#!/bin/sh\ntouch %s/RAN-h%s\n' "$M" $i > h$i/.git/hooks/post-checkout \
      && chmod +x h$i/.git/hooks/post-checkout; } 2>/dev/null &
  echo 'ref: refs/heads/main' > h$i/.git/HEAD 2>/dev/null &
done
wait
echo RACED
"#;

/// Host git in every raced directory that became a repository.
const RACE_HOST_GIT: &str = r#"
for r in c* h*; do
  [ -e "$r/.git/HEAD" ] || continue
  git -C "$r" status >/dev/null 2>&1
  git -C "$r" -c user.name=t -c user.email=t@t commit -q --allow-empty -m host >/dev/null 2>&1
  git -C "$r" checkout -q -b "host-$$" >/dev/null 2>&1
done
ls RAN-* 2>/dev/null || true
echo HOST-DONE
"#;

/// The race run in `w`'s workspace for `who`: what ran on the host.
fn race(w: &World, who: Who, env: &[(&str, &str)]) -> String {
    let o = w.run(who, env, &["claude", "shell", RACE]);
    assert!(stdout(&o).contains("RACED"), "{who:?}: {}", stderr(&o));
    let host = stdout(&w.run(who, &[], &["sh", "-c", RACE_HOST_GIT]));
    assert!(host.contains("HOST-DONE"), "{who:?}: {host}");
    empty_dir(&w.workspace(who));
    host
}

#[test]
fn racing_plants_against_the_making_of_a_repository_fail_too() {
    if !require("gitrule_race") {
        return;
    }
    let w = World::with_probe("gitrule-race");
    for who in BOTH {
        let host = race(&w, who, &[]);
        assert!(ran(&host).is_empty(), "{who:?}: ran on the host: {host}");
    }
    // Behind the wall: without the rule, the same race plants what runs.
    let m = World::new("gitrule-race-mut");
    m.use_mutation_binary();
    m.install_by_hand(&m.root.join("bin/probe"), "egress-jail = 0\n");
    let host = race(
        &m,
        Who::Root,
        &[("CLAUDE_SANDBOX_TEST_MUTATION", "no-git-rule")],
    );
    let ran = ran(&host);
    assert!(
        ran.iter().any(|r| r.starts_with("RAN-c")) && ran.iter().any(|r| r.starts_with("RAN-h")),
        "without the rule the race planted nothing that ran: {host}"
    );
}

/// Ordinary git work inside, with the rule on.
const ORDINARY: &str = r#"
set -e
export GIT_AUTHOR_NAME=Dev GIT_AUTHOR_EMAIL=dev@example.com
export GIT_COMMITTER_NAME=Dev GIT_COMMITTER_EMAIL=dev@example.com
git init -q -b main lib && git -C lib commit -q --allow-empty -m lib
git init -q -b main app && cd app
git config user.email dev@example.com && git config user.name Dev
echo a > a && git add a && git commit -qm a
git branch topic && git checkout -q topic && echo b > b && git add b && git commit -qm b
git checkout -q main && echo c > c && git add c && git commit -qm c
git checkout -q topic && git rebase -q main
echo d >> a && git stash -q && git stash pop -q && git checkout -q -- a
git remote add origin ../lib && git fetch -q origin && git branch -q --set-upstream-to=origin/main main
git -c protocol.file.allow=always submodule add -q ../lib sub
git commit -qm sub
git worktree add -q ../wt -b wt
git -C ../wt log --oneline -1 >/dev/null
cd .. && git clone -q app clone && git -C clone log --oneline | wc -l
git clone -q --bare app bare.git && git -C bare.git log --oneline -1 >/dev/null
mkdir dep && (cd dep && git init -q -b main && echo '{"name":"dep","version":"1.0.0"}' > package.json \
  && git add . && git commit -qm dep)
mkdir npmapp && cd npmapp && echo '{"name":"npmapp","version":"1.0.0"}' > package.json
npm install --offline --no-audit --no-fund --no-update-notifier "git+file://$PWD/../dep" >/dev/null 2>&1
test -f node_modules/dep/package.json
echo ORDINARY-OK
"#;

#[test]
fn ordinary_git_work_goes_on() {
    if !require("gitrule_ordinary") {
        return;
    }
    let w = World::with_probe("gitrule-ok");
    for who in BOTH {
        let o = w.run(who, &[], &["claude", "shell", ORDINARY]);
        assert!(
            stdout(&o).contains("ORDINARY-OK"),
            "{who:?}:\n{}\n{}",
            stdout(&o),
            stderr(&o)
        );
        assert!(
            !stderr(&o).contains("refused to create"),
            "{who:?}: {}",
            stderr(&o)
        );
        empty_dir(&w.workspace(who));
    }
}

/// Before the launch: a repository whose `core.worktree` the user set to a
/// directory inside the workspace, and one the session will point the same
/// way; each with a committed file that a host checkout writes.
const WORKTREE_SETUP: &str = r#"
set -e
g() { git -c user.name=t -c user.email=t@t -c init.defaultBranch=main "$@"; }
g init -q . && g commit -q --allow-empty -m init
for r in sub sub2; do
  g init -q $r && echo data > $r/f && g -C $r add f && g -C $r commit -q -m f
done
mkdir wt wt2 && git -C sub2 config core.worktree ../../wt2
echo ok
"#;

/// The session (issue #45 item 2): a work tree accepted inside, then
/// turned outward by a symlink or a rename made later; `V` is the victim
/// outside the workspace.
const WORKTREE_LATER: &str = r#"
t() { if eval "$2" >/dev/null 2>/tmp/err; then echo "PLANTED $1"; else echo "refused $1"; cat /tmp/err >&2; fi; }
t set-worktree 'git -C sub config core.worktree ../../wt'
t symlink-later 'rmdir wt && ln -s "$V" wt'
t rename-later 'ln -s "$V" other && mv -T other wt'
t symlink-launch 'rmdir wt2 && ln -s "$V" wt2'
t rename-inside 'mkdir elsewhere && rmdir wt2 2>/dev/null; mv -T elsewhere wt2'
echo END
"#;

/// Host git checks out each repository's files into its work tree.
const WORKTREE_HOST: &str = r#"
git -C sub checkout -q -f -- . 2>/dev/null
git -C sub2 checkout -q -f -- . 2>/dev/null
echo HOST-DONE
"#;

/// One run of the work-tree session for `who` in `w`; its output, and
/// whether host git then wrote into the victim.
fn worktree_session(w: &World, who: Who, env: &[(&str, &str)]) -> (String, String, bool) {
    let ws = w.workspace(who);
    let victim = w.root.join(format!("victim-{who:?}"));
    std::fs::create_dir_all(&victim).unwrap();
    if who == Who::User {
        std::os::unix::fs::chown(&victim, Some(TEST_UID), Some(TEST_UID)).unwrap();
    }
    let o = w.run(who, &[], &["sh", "-c", WORKTREE_SETUP]);
    assert!(stdout(&o).contains("ok"), "{who:?}: {}", stderr(&o));
    // The sandbox passes few variables: the victim is named in the script.
    let script = format!("V='{}'\n{WORKTREE_LATER}", victim.display());
    let o = w.run(who, env, &["claude", "shell", &script]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(out.contains("END"), "{who:?}: {out}{err}");
    let host = w.run(who, &[], &["sh", "-c", WORKTREE_HOST]);
    assert!(
        stdout(&host).contains("HOST-DONE"),
        "{who:?}: {}",
        stderr(&host)
    );
    let wrote = victim.join("f").exists();
    empty_dir(&ws);
    std::fs::remove_dir_all(&victim).unwrap();
    (out, err, wrote)
}

#[test]
fn a_work_tree_cannot_be_turned_outward_after_it_was_accepted() {
    if !require("gitrule_worktree_later") {
        return;
    }
    let w = World::with_probe("gitrule-wt");
    for who in BOTH {
        let (out, err, wrote) = worktree_session(&w, who, &[]);
        assert_eq!(
            out.lines()
                .filter(|l| !l.starts_with("END"))
                .collect::<Vec<_>>(),
            [
                "PLANTED set-worktree",
                "refused symlink-later",
                "refused rename-later",
                "refused symlink-launch",
                // A real directory renamed there stays inside: allowed.
                "PLANTED rename-inside",
            ],
            "{who:?}: {err}"
        );
        assert!(!wrote, "{who:?}: host git checked out into the victim");
    }
    // The wall has something behind it: without the rule the same session
    // turns both work trees outward, and host git writes there.
    let w = World::new("gitrule-wt-mut");
    w.use_mutation_binary();
    w.install_by_hand(&w.root.join("bin/probe"), "egress-jail = 0\n");
    for who in BOTH {
        let env = [("CLAUDE_SANDBOX_TEST_MUTATION", "no-git-rule")];
        let (out, err, wrote) = worktree_session(&w, who, &env);
        assert!(
            out.contains("PLANTED symlink-later") && out.contains("PLANTED symlink-launch"),
            "{who:?}: {out}{err}"
        );
        assert!(
            wrote,
            "{who:?}: control: host git did not write into the victim\n{out}"
        );
    }
}
