//! Nothing written inside the sandbox runs outside it (issue #12, SPEC §4.8):
//! protected workspace paths are read-only inside while ordinary git work
//! goes on; `~/.cache` and `~/.local/share` are the sandbox's own; the forge
//! dirs are read-only; a workspace that resolves into a hidden home entry is
//! refused. Real bubblewrap, as root and as an unprivileged user.

mod common;
use common::*;

/// Each attempt prints `WROTE name` when it succeeded. Every target exists
/// at launch (a missing one, e.g. a root `HEAD`, can be created: the
/// tripwire reports it at exit; see tests of `review`).
const ATTEMPTS: &str = r##"
t() { if sh -c "$2" 2>/dev/null; then echo "WROTE $1"; else echo "denied $1"; fi; }
t git-config-append 'echo "[core] fsmonitor = touch MARK" >> .git/config'
t git-config-cmd 'git config core.fsmonitor "touch MARK"'
t git-config-rename 'mv .git/config .git/config.old'
t git-hook-new 'printf "#!/bin/sh\ntouch MARK\n" > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout'
t git-hooks-remove 'rm -rf .git/hooks'
t git-attributes 'echo "* filter=x" > .git/info/attributes'
t vscode-task 'echo {} > .vscode/tasks.json'
t vscode-settings 'echo {} > .vscode/settings.json'
t vscode-remove 'rm -rf .vscode'
t envrc 'echo "touch MARK" >> .envrc'
t envrc-remove 'rm -f .envrc'
t gitmodules 'echo x >> .gitmodules'
t nested-config 'git -C sub config core.pager "touch MARK"'
t forge 'echo x > ~/.config/gh/config.yml'
echo two >> file && git add file && git commit -qm change && git branch topic && git checkout -q topic \
  && echo more >> file && git stash -q && git checkout -q main && git stash pop -q \
  && git add file && git commit -qm more && echo GIT-OK
git log --oneline | wc -l
"##;

#[test]
fn protected_paths_are_read_only_and_git_still_works() {
    if !require("protected_paths") {
        return;
    }
    let w = World::with_probe("protect");
    for who in BOTH {
        let ws = w.workspace(who);
        w.put(
            who,
            ".config/gh/hosts.yml",
            "github.com:\n  oauth_token: decoy\n",
        );
        let setup = w.run(
            who,
            &[],
            &[
                "sh",
                "-c",
                "git init -q -b main . && git config user.name A && git config user.email a@b \
                 && echo one > file && git add file && git commit -qm init \
                 && mkdir -p .vscode sub && echo {} > .vscode/settings.json && echo 'export A=1' > .envrc \
                 && echo > .gitmodules && git -C sub init -q && echo ok",
            ],
        );
        assert!(stdout(&setup).contains("ok"), "{who:?}: {}", stderr(&setup));
        let o = w.run(who, &[], &["claude", "shell", ATTEMPTS]);
        let out = stdout(&o);
        assert!(o.status.success(), "{who:?}: {}\n{out}", stderr(&o));
        assert!(
            !out.contains("WROTE"),
            "{who:?}: a protected path was written:\n{out}"
        );
        for name in [
            "git-config-cmd",
            "git-hook-new",
            "vscode-task",
            "envrc",
            "nested-config",
            "forge",
        ] {
            assert!(
                out.contains(&format!("denied {name}")),
                "{who:?}: {name}:\n{out}"
            );
        }
        assert!(
            out.contains("GIT-OK"),
            "{who:?}: ordinary git work failed:\n{out}"
        );
        assert!(
            out.trim_end().ends_with('3'),
            "{who:?}: three commits: {out}"
        );
        // On the host, git runs nothing planted.
        let host = w.run(
            who,
            &[],
            &["sh", "-c", "git status -s; git log -1 --format=%s; git checkout -q -b after; git -C sub status -s; ls MARK sub/MARK 2>&1"],
        );
        let h = stdout(&host);
        assert!(h.contains("more"), "{who:?}: {h}");
        assert!(
            h.matches("No such file").count() == 2,
            "{who:?}: a planted command ran on the host: {h}"
        );
        assert!(
            std::fs::read_to_string(ws.join(".git/config"))
                .unwrap()
                .find("fsmonitor")
                .is_none(),
            "{who:?}"
        );
    }
}

#[test]
fn cache_and_share_are_the_sandboxs_own() {
    if !require("private_state") {
        return;
    }
    let w = World::with_probe("privstate");
    for who in BOTH {
        let home = w.home(who);
        w.put(
            who,
            ".local/share/fish/fish_history",
            "- cmd: export TOKEN=decoy-history\n",
        );
        w.put(who, ".cache/huggingface/token", "hf_decoy\n");
        let plant =
            "mkdir -p ~/.local/share/bash-completion/completions ~/.local/share/systemd/user \
            && echo 'touch MARK' > ~/.local/share/bash-completion/completions/git \
            && echo '[Service]' > ~/.local/share/systemd/user/x.service && echo x > ~/.cache/x \
            && cat ~/.local/share/fish/fish_history ~/.cache/huggingface/token 2>&1; echo PLANTED";
        let o = w.run(who, &[], &["claude", "shell", plant]);
        let out = stdout(&o);
        assert!(out.contains("PLANTED"), "{who:?}: {}\n{out}", stderr(&o));
        assert!(
            !out.contains("decoy"),
            "{who:?}: a host secret showed inside: {out}"
        );
        for rel in [
            ".cache/x",
            ".local/share/bash-completion/completions/git",
            ".local/share/systemd/user/x.service",
        ] {
            assert!(
                !home.join(rel).exists(),
                "{who:?}: {rel} landed on the host"
            );
        }
        // The next session finds them again: the sandbox's state persists.
        let o = w.run(
            who,
            &[],
            &[
                "claude",
                "shell",
                "cat ~/.cache/x ~/.local/share/systemd/user/x.service",
            ],
        );
        assert_eq!(stdout(&o), "x\n[Service]\n", "{who:?}: {}", stderr(&o));
        assert!(home.join(".local/state/claude-sandbox/cache/x").exists());
    }
}

#[test]
fn a_workspace_symlinked_into_a_hidden_home_entry_is_refused() {
    if !require("hidden_home_workspace") {
        return;
    }
    let w = World::with_probe("hiddenws");
    for who in BOTH {
        w.put(who, ".ssh/id_ed25519", "DECOY-KEY\n");
        let link = w.workspace(who).join("docs");
        std::os::unix::fs::symlink(w.home(who).join(".ssh"), &link).unwrap();
        let o = w
            .command_in(who, &link, &[], &["claude", "report"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{who:?}: {}", stderr(&o));
        let expect = format!("lies in {}", w.home(who).join(".ssh").display());
        assert!(stderr(&o).contains(&expect), "{who:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{who:?}: the probe ran");
    }
}

/// Every way a process inside could give a missing protected path a name,
/// hostile ones included. Each prints `MADE name` if it succeeded.
const CREATIONS: &str = r##"
t() { if sh -c "$2" 2>/dev/null; then echo "MADE $1"; else echo "refused $1"; fi; }
t envrc-open 'echo "touch MARK" > .envrc'
t envrc-append 'echo "touch MARK" >> .envrc'
t vscode-mkdir 'mkdir .vscode'
t devcontainer-mkdir-p 'mkdir -p .devcontainer/x'
t idea-touch 'touch .idea'
t mcp-symlink 'ln -s /etc/hostname .mcp.json'
t head-hardlink 'echo "ref: refs/heads/main" > f1 && ln f1 HEAD'
t gitmodules-rename 'echo x > f2 && mv f2 .gitmodules'
t vscode-rename-dir 'mkdir -p d/x && echo {} > d/tasks.json && mv d .vscode'
t hooks-mkdir 'mkdir .git/hooks'
t info-mkdir 'mkdir -p .git/info && echo "* filter=x" > .git/info/attributes'
t nested-envrc 'echo x > sub/.envrc'
t nested-hooks 'mkdir sub/.git/hooks'
t via-symlink 'ln -s .envrc alias && echo x > alias'
t via-dotdot 'mkdir -p deep/er && echo x > deep/er/../../.envrc'
t via-proc-self 'echo x > /proc/self/cwd/.envrc'
t via-dev-fd 'exec 3<. && echo x > /dev/fd/3/.envrc'
t via-absolute "echo x > $PWD/.envrc"
t mknod 'python3 -c "import os; os.mknod(\".envrc\")"'
t rename-repo-away 'mv sub sub2'
t openat2 'python3 -c "
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
how = (ctypes.c_uint64 * 3)(os.O_CREAT | os.O_WRONLY, 0o644, 0)
fd = libc.syscall(437, -100, b\".envrc\", how, 24)
raise SystemExit(0 if fd >= 0 else 1)"'
# A second thread rewrites the path between the check and the kernel's
# read of it: the supervisor performs the call on its own copy.
t race 'python3 -c "
import ctypes, os, threading, time
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(64)
safe, bad = b\"race-ok\x00\", b\".envrc\x00\"
stop = False
def flip():
    while not stop:
        ctypes.memmove(buf, bad, len(bad)); ctypes.memmove(buf, safe, len(safe))
threading.Thread(target=flip, daemon=True).start()
end = time.time() + 1.5
while time.time() < end:
    fd = libc.open(buf, os.O_CREAT | os.O_WRONLY, 0o644)
    if fd >= 0: os.close(fd)
    if os.path.lexists(\".envrc\"): raise SystemExit(0)
stop = True
raise SystemExit(1)"'
# Ordinary work goes on, through the supervisor.
echo one > plain.txt && mkdir -p newdir/a && echo two > newdir/a/b && ln -s plain.txt lnk \
  && cat lnk >/dev/null && mv plain.txt renamed.txt && rm newdir/a/b && rmdir newdir/a newdir \
  && (umask 077 && touch private && test "$(stat -c %a private)" = 600) \
  && echo x > /tmp/scratch && (echo to-stdout > /dev/stdout) | cat && echo WORK-OK
"##;

/// A workspace repository without hooks or info, and a nested one without
/// hooks: protected paths that do not exist.
fn guarded_workspace(w: &World, who: Who) {
    let setup = w.run(
        who,
        &[],
        &[
            "sh",
            "-c",
            "git init -q -b main . && rm -rf .git/hooks .git/info \
             && git init -q sub && rm -rf sub/.git/hooks && echo ok",
        ],
    );
    assert!(stdout(&setup).contains("ok"), "{who:?}: {}", stderr(&setup));
}

/// Every attempt of [`CREATIONS`] refused, ordinary work done, one line at
/// exit, nothing on the host.
fn assert_creations_refused(w: &World, who: Who, o: &std::process::Output) {
    let ws = w.workspace(who);
    let out = stdout(o);
    let err = stderr(o);
    assert!(o.status.success(), "{who:?}: {err}\n{out}");
    assert!(
        !out.contains("MADE"),
        "{who:?}: a protected path was created:\n{out}"
    );
    assert_eq!(out.matches("refused ").count(), 22, "{who:?}:\n{out}");
    assert!(
        out.contains("WORK-OK"),
        "{who:?}: ordinary work failed:\n{out}\n{err}"
    );
    // (Through a pipe of its own: reopening a pipe the harness made as
    // root is refused to the unprivileged user by the kernel anyway.)
    assert!(
        out.contains("to-stdout"),
        "{who:?}: /dev/stdout is the caller's:\n{out}"
    );
    // One line at exit names what was refused.
    assert!(
        err.contains("claude-sandbox: refused to create")
            && err.contains(&ws.join(".envrc").display().to_string()),
        "{who:?}: {err}"
    );
    // Nothing of it is on the host, and no placeholder either.
    for p in [
        ".envrc",
        ".vscode",
        ".devcontainer",
        ".idea",
        ".mcp.json",
        "HEAD",
        ".gitmodules",
        ".git/hooks",
        ".git/info",
        "sub/.envrc",
        "sub/.git/hooks",
        "sub2",
    ] {
        assert!(
            ws.join(p).symlink_metadata().is_err(),
            "{who:?}: {p} exists on the host"
        );
    }
    assert!(ws.join("renamed.txt").is_file() && ws.join("sub/.git").is_dir());
}

#[test]
fn missing_protected_paths_cannot_be_created() {
    if !require("protected_creation") {
        return;
    }
    let w = World::with_probe("guard");
    for who in BOTH {
        guarded_workspace(&w, who);
        let o = w.run(who, &[], &["claude", "shell", CREATIONS]);
        assert_creations_refused(&w, who, &o);
    }
}

#[test]
fn the_guard_holds_where_only_the_hosts_proc_can_be_had() {
    if !require("protected_creation_host_proc") {
        return;
    }
    // Containers over-mount parts of /proc, so the kernel refuses a fresh
    // one (decision 0003): the sandbox sees the host's PIDs and the
    // supervisor names its callers through pidfds instead.
    let w = World::with_probe("guardproc");
    let script = format!(
        "test $(awk '/^NSpid:/{{print NF - 1}}' /proc/self/status) = 2 && echo HOST-PROC\n{CREATIONS}"
    );
    for who in BOTH {
        guarded_workspace(&w, who);
        let o = w
            .command_with_setup(
                who,
                &w.workspace(who),
                REFUSE_FRESH_PROC,
                &[],
                &["claude", "shell", &script],
            )
            .output()
            .unwrap();
        assert!(stdout(&o).contains("HOST-PROC"), "{who:?}: {}", stdout(&o));
        assert_creations_refused(&w, who, &o);
    }
}

/// The supervisor is the real binary's parent, inside the sandbox, same
/// uid: a hostile session can find it. It can neither read nor trace it,
/// and killing it makes every later creation fail (and ends the session).
const AT_THE_SUPERVISOR: &str = r##"
sup=$(awk '/^PPid:/{print $2}' /proc/$PPID/status)
grep -q '^Name:.*claude-sandbo' /proc/$sup/status && echo SUP-FOUND
cat /proc/$sup/environ >/dev/null 2>&1 && echo READ-ENV
for f in /proc/$sup/fd/* /proc/$sup/cwd /proc/$sup/root; do readlink "$f" >/dev/null 2>&1 && echo "READ-FDS $f"; done
python3 -c "
import os, sys
for n in range(12):
    try: os.close(os.open('/proc/$sup/fd/%d' % n, os.O_RDONLY)); sys.exit(0)
    except OSError: pass
sys.exit(1)" && echo OPENED-FD
head -c1 /proc/$sup/mem >/dev/null 2>&1 && echo READ-MEM
python3 -c "
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
sys.exit(0 if libc.ptrace(16, $sup, 0, 0) == 0 else 1)" && echo TRACED
kill -9 $sup
echo x > .envrc && echo CREATED-AFTER
sleep 2
echo STILL-RUNNING
"##;

#[test]
fn the_guards_supervisor_cannot_be_driven_from_inside() {
    if !require("guard_supervisor") {
        return;
    }
    let w = World::with_probe("guardsup");
    for who in BOTH {
        let ws = w.workspace(who);
        let o = w.run(who, &[], &["claude", "shell", AT_THE_SUPERVISOR]);
        let out = stdout(&o);
        assert!(out.contains("SUP-FOUND"), "{who:?}: {out}\n{}", stderr(&o));
        for leak in [
            "READ-ENV",
            "READ-FDS",
            "READ-MEM",
            "TRACED",
            "CREATED-AFTER",
            "STILL-RUNNING",
        ] {
            assert!(!out.contains(leak), "{who:?}: {leak}:\n{out}");
        }
        assert!(
            !o.status.success(),
            "{who:?}: the session ended with its supervisor"
        );
        assert!(ws.join(".envrc").symlink_metadata().is_err(), "{who:?}");
    }
}

/// A 64-bit process can enter the kernel through the i386 entry
/// (`int 0x80`), with i386 syscall numbers: the guard's filter sees those
/// too, and the supervisor serves them.
#[test]
#[cfg(target_arch = "x86_64")]
fn the_i386_entry_is_guarded_too() {
    if !require("guard_i386") {
        return;
    }
    let w = World::with_probe("guard32");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/open_i386.c");
    for who in BOTH {
        let ws = w.workspace(who);
        let bin = ws.join("open32");
        let cc = std::process::Command::new("cc")
            .args(["-O2", "-o"])
            .arg(&bin)
            .arg(&src)
            .output()
            .expect("cc (scripts/test.sh installs gcc)");
        assert!(cc.status.success(), "{}", stderr(&cc));
        let o = w.run(
            who,
            &[],
            &[
                "claude",
                "shell",
                "./open32 .envrc; echo \"rc=$?\"; ./open32 plain32 && echo OK32",
            ],
        );
        let out = stdout(&o);
        assert!(out.contains("rc=1"), "{who:?}: {out}\n{}", stderr(&o));
        assert!(out.contains("OK32"), "{who:?}: {out}\n{}", stderr(&o));
        assert!(ws.join(".envrc").symlink_metadata().is_err(), "{who:?}");
        assert!(ws.join("plain32").is_file(), "{who:?}");
    }
}
