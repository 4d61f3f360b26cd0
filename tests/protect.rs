//! Nothing written inside the sandbox runs outside it (issue #12, SPEC §4.8):
//! protected workspace paths are read-only inside while ordinary git work
//! goes on; `~/.cache` and `~/.local/share` are the sandbox's own; the forge
//! dirs are read-only; a workspace that resolves into a hidden home entry is
//! refused. Real bubblewrap, as root and as an unprivileged user.

mod common;
use common::*;

/// Each attempt prints `WROTE name` when it succeeded. Every target exists
/// at launch (a missing one, e.g. a root `HEAD`, can be created: the
/// tripwire reports it at exit; see tests of `review`). `.git/config` is
/// not bound read-only but decided by the git rule (decision 0026):
/// replaced only through a checked rename. `.gitmodules` is not protected
/// (git itself distrusts it; tests/gitwork.rs).
const ATTEMPTS: &str = r##"
t() { if sh -c "$2" 2>/dev/null; then echo "WROTE $1"; else echo "denied $1"; fi; }
t git-config-append 'echo "[core] fsmonitor = touch MARK" >> .git/config'
t git-config-cmd 'git config core.fsmonitor "touch MARK"'
t git-config-rename 'cp .git/config c.lock && echo "[core] fsmonitor = touch MARK" >> c.lock && mv c.lock .git/config'
t git-config-proxy 'git config http.proxy http://127.0.0.1:9'
t git-hooks-remove 'rm -rf .git/hooks'
t git-hook-new 'printf "#!/bin/sh\ntouch MARK\n" > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout'
t git-attributes 'echo "* filter=x" > .git/info/attributes'
t vscode-task 'echo {} > .vscode/tasks.json'
t vscode-settings 'echo {} > .vscode/settings.json'
t vscode-remove 'rm -rf .vscode'
t envrc 'echo "touch MARK" >> .envrc'
t envrc-remove 'rm -f .envrc'
t nested-config 'git -C sub config core.pager "touch MARK"'
t forge 'echo x > ~/.config/gh/config.yml'
echo two >> file && git add file && git commit -qm change && git branch topic && git checkout -q topic \
  && echo more >> file && git stash -q && git checkout -q main && git stash pop -q \
  && git add file && git commit -qm more && echo GIT-OK
git log --oneline | wc -l
# A held hook runs inside (issue #44): what it did here is not the host's doing.
rm -f MARK sub/MARK
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
        set_up(
            &w,
            who,
            "git init -q -b main . && git config user.name A && git config user.email a@b \
             && echo one > file && git add file && git commit -qm init \
             && mkdir -p .vscode sub && echo {} > .vscode/settings.json && echo 'export A=1' > .envrc \
             && git -C sub init -q && echo ok",
        );
        let o = w.run(who, &[], &["claude", "shell", ATTEMPTS]);
        let out = stdout(&o);
        assert!(o.status.success(), "{who:?}: {}\n{out}", stderr(&o));
        // What git writes through its rename, and a hook in the workspace's
        // own repository, succeed inside on a held copy (issue #44): the
        // host's files are checked below.
        let held = [
            "git-config-cmd",
            "git-config-rename",
            "git-config-proxy",
            "git-hook-new",
            "nested-config",
        ];
        let wrote: Vec<&str> = out
            .lines()
            .filter_map(|l| l.strip_prefix("WROTE "))
            .collect();
        assert_eq!(wrote, held, "{who:?}: only the held calls succeed:\n{out}");
        for name in [
            "git-config-append",
            "git-hooks-remove",
            "vscode-task",
            "envrc",
            "forge",
        ] {
            assert!(
                out.contains(&format!("denied {name}")),
                "{who:?}: {name}:\n{out}"
            );
        }
        assert!(
            !ws.join(".git/hooks/post-checkout").exists(),
            "{who:?}: the held hook reached the host"
        );
        let review = w.run(
            who,
            &[],
            &["/usr/libexec/claude-sandbox/claude-sandbox", "review"],
        );
        for held in [
            "hooks/post-checkout",
            "core.fsmonitor",
            "http.proxy",
            "core.pager",
        ] {
            assert!(
                stdout(&review).contains(held),
                "{who:?}: {held} not held: {}",
                stdout(&review)
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
        for (config, key) in [
            (".git/config", "fsmonitor"),
            (".git/config", "proxy"),
            ("sub/.git/config", "pager"),
        ] {
            let text = std::fs::read_to_string(ws.join(config)).unwrap();
            assert!(!text.contains(key), "{who:?}: {config} took {key}: {text}");
        }
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
t envrc-rename 'echo x > f2 && mv f2 .envrc'
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
# O_CREAT|O_EXCL (`set -C`) once the supervisor remembers the process's
# context (decision 0022): by a bare name, an absolute path, two components.
t envrc-excl 'set -C; : > x1; : > x2; : > x3; echo x > .envrc'
t envrc-excl-abs "set -C; : > x4; : > x5; : > x6; echo x > $PWD/.envrc"
t nested-envrc-excl 'set -C; : > x7; : > x8; : > x9; echo x > sub/.envrc'
# The same by O_CREAT without O_EXCL (a shell's `>`), made as O_EXCL in one
# call too (decision 0023), and by a name that is a symlink to the path.
t envrc-trunc ': > y1; : > y2; : > y3; echo x > .envrc'
t envrc-trunc-abs ": > y4; : > y5; : > y6; echo x > $PWD/.envrc"
t nested-envrc-trunc ': > y7; : > y8; : > y9; echo x > sub/.envrc'
t via-symlink-trunc 'ln -s .envrc alias2 && : > y10 && : > y11 && : > y12 && echo x > alias2'
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
# A second thread moves the process between the workspace and a directory
# below it while the first creates ./.envrc: wherever the supervisor finds
# the cwd, it decides on and creates in that one directory.
t cwd-race 'mkdir -p safe && python3 -c "
import os, threading, time
ws = os.getcwd(); stop = False
def flip():
    while not stop:
        os.chdir(ws + \"/safe\"); os.chdir(ws)
threading.Thread(target=flip, daemon=True).start()
end = time.time() + 1.5; refused = 0
while time.time() < end:
    try: os.close(os.open(\"./.envrc\", os.O_CREAT | os.O_WRONLY, 0o644))
    except OSError: refused += 1
    if os.path.lexists(ws + \"/.envrc\"): raise SystemExit(0)
stop = True
if refused and os.path.lexists(ws + \"/safe/.envrc\"): print(\"CWD-RACE both\")
raise SystemExit(1)"'
# Ordinary work goes on, through the supervisor.
echo one > plain.txt && mkdir -p newdir/a && echo two > newdir/a/b && ln -s plain.txt lnk \
  && cat lnk >/dev/null && mv plain.txt renamed.txt && rm newdir/a/b && rmdir newdir/a newdir \
  && (umask 077 && touch private && test "$(stat -c %a private)" = 600) \
  && (echo a > open1 && umask 077 && echo b > private2 && umask 022 && echo c > open2 \
      && test "$(stat -c %a open1 private2 open2 | tr '\n' ' ')" = "644 600 644 ") \
  && echo x > /tmp/scratch && (echo to-stdout > /dev/stdout) | cat && echo WORK-OK
"##;

/// Run the shell `script` (ending in `echo ok`) in `who`'s workspace,
/// outside the sandbox, and require that it got to the end.
fn set_up(w: &World, who: Who, script: &str) {
    let o = w.run(who, &[], &["sh", "-c", script]);
    assert!(stdout(&o).contains("ok"), "{who:?}: {}", stderr(&o));
}

/// A workspace repository without hooks or info, and a nested one without
/// hooks: protected paths that do not exist.
fn guarded_workspace(w: &World, who: Who) {
    set_up(
        w,
        who,
        "git init -q -b main . && rm -rf .git/hooks .git/info \
             && git init -q sub && rm -rf sub/.git/hooks && echo ok",
    );
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
    assert_eq!(out.matches("refused ").count(), 30, "{who:?}:\n{out}");
    // The cwd race met both directories: refused in one, made in the other.
    assert!(out.contains("CWD-RACE both"), "{who:?}:\n{out}");
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
        ".git/hooks",
        // `.git/info` may be made (git writes `exclude` and
        // `sparse-checkout` there); `attributes` in it may not.
        ".git/info/attributes",
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
        "test $(awk '/^NSpid:/{{print NF - 1}}' /proc/self/status) = 2 && echo HOST-PROC\n\
         (umask 077 && echo s > umask-probe && stat -c 'MODE %a' umask-probe && rm umask-probe)\n{CREATIONS}"
    );
    for who in BOTH {
        guarded_workspace(&w, who);
        let o = w
            .shell_with_setup(who, REFUSE_FRESH_PROC, &script)
            .output()
            .unwrap();
        assert!(stdout(&o).contains("HOST-PROC"), "{who:?}: {}", stdout(&o));
        // The caller's umask is read there too (never guessed).
        assert!(
            stdout(&o).contains("MODE 600"),
            "{who:?}: {}\n{}",
            stdout(&o),
            stderr(&o)
        );
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

/// The sandbox's PID 1 is bubblewrap's init: same uid, dumpable, and not
/// under the guard's filter (only the shim's child loads it). A process
/// inside that traces it makes it call `openat(…/.envrc, O_CREAT)` itself.
const PID1_INJECTION: &str = r#"
python3 - 1 "$PWD/.envrc" <<'PY'
@PID1@
PY
test -e .envrc && echo MADE-ENVRC-VIA-PID1
python3 -c "
import os, ctypes
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(8)
class Iov(ctypes.Structure): _fields_ = [('b', ctypes.c_void_p), ('n', ctypes.c_size_t)]
l, r = Iov(ctypes.addressof(buf), 1), Iov(0x1000, 1)
libc.process_vm_writev(1, ctypes.byref(l), 1, ctypes.byref(r), 1, 0)
print('WRITEV-PID1-ERRNO', ctypes.get_errno())"
# Its memory files, opened directly (no O_CREAT: the kernel's open, not the
# supervisor's): the empty file, not memory.
for f in /proc/1/mem /proc/1/task/1/mem; do
  python3 -c "
import os, stat, sys
try: fd = os.open(sys.argv[1], os.O_RDWR)
except OSError as e: print('PID1-MEM refused', sys.argv[1], e.errno); raise SystemExit
print('PID1-MEM', sys.argv[1], 'null' if stat.S_ISCHR(os.fstat(fd).st_mode) else 'MEMORY')" "$f"
done
echo "PID1-FDS $(ls /proc/1/fd 2>&1 | tr '\n' ' ')"
"#;

#[test]
#[cfg(target_arch = "x86_64")]
fn the_sandboxs_pid_1_cannot_be_made_to_create_for_a_caller() {
    if !require("guard_pid1") {
        return;
    }
    let w = World::with_probe("guardpid1");
    let script = PID1_INJECTION.replace("@PID1@", PID1_PY);
    for who in BOTH {
        guarded_workspace(&w, who);
        let o = w.run(who, &[], &["claude", "shell", &script]);
        let out = stdout(&o);
        assert!(
            !out.contains("MADE-ENVRC-VIA-PID1"),
            "{who:?}: PID 1 created .envrc for a caller:\n{out}\n{}",
            stderr(&o)
        );
        // process_vm_writev on PID 1: refused (EPERM), not a fault (EFAULT).
        assert!(out.contains("WRITEV-PID1-ERRNO 1\n"), "{who:?}: {out}");
        // Its memory files read and write as the empty file.
        assert!(
            !out.contains("MEMORY"),
            "{who:?}: PID 1's memory opened:\n{out}"
        );
        assert_eq!(out.matches("PID1-MEM ").count(), 2, "{who:?}: {out}");
        assert!(
            w.workspace(who).join(".envrc").symlink_metadata().is_err(),
            "{who:?}"
        );
    }
}

/// ptrace-inject `openat(AT_FDCWD, argv[2], O_CREAT|O_WRONLY)` into the
/// process argv[1] (x86_64), stopped in a syscall, and let it go on.
const PID1_PY: &str = r#"# Make the sandbox's pid 1 (bubblewrap's init: same uid, dumpable, not under
# the creation guard's filter) call openat(AT_FDCWD, TARGET, O_CREAT|O_WRONLY).
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in (
        "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs").split()]
pid, target = int(sys.argv[1]), sys.argv[2].encode() + b"\0"
def chk(r, what):
    if r < 0: raise SystemExit("%s: errno %d" % (what, ctypes.get_errno()))
chk(libc.ptrace(16, pid, None, None), "attach")
os.waitpid(pid, 0x40000000)
saved = Regs(); chk(libc.ptrace(12, pid, None, ctypes.byref(saved)), "getregs")
mem = os.open("/proc/%d/mem" % pid, os.O_RDWR)
sc = saved.rip - 2
assert os.pread(mem, 2, sc) == b"\x0f\x05", "not after a syscall"
addr = (saved.rsp - 4096) & ~15
os.pwrite(mem, target, addr)
r = Regs.from_buffer_copy(saved)
r.rip, r.rax, r.orig_rax = sc, 257, 2**64 - 1
r.rdi, r.rsi, r.rdx, r.r10 = 2**64 - 100, addr, os.O_CREAT | os.O_WRONLY, 0o644
chk(libc.ptrace(13, pid, None, ctypes.byref(r)), "setregs")
chk(libc.ptrace(9, pid, None, None), "singlestep")
os.waitpid(pid, 0x40000000)
out = Regs(); libc.ptrace(12, pid, None, ctypes.byref(out))
fd = ctypes.c_longlong(out.rax).value
print("pid %d openat -> %d" % (pid, fd))
if fd >= 0:
    r = Regs.from_buffer_copy(saved); r.rip, r.rax, r.orig_rax, r.rdi = sc, 3, 2**64 - 1, fd
    libc.ptrace(13, pid, None, ctypes.byref(r)); libc.ptrace(9, pid, None, None); os.waitpid(pid, 0x40000000)
libc.ptrace(13, pid, None, ctypes.byref(saved))
libc.ptrace(17, pid, None, None)
"#;

/// The supervisor opens what a caller names, as itself: a caller must not
/// get the supervisor's own `/proc` entries (its memory: then its table),
/// nor PID 1's, and a path that reaches `/proc/self` other than by its
/// spelling still means the caller.
const AT_THE_SUPERVISORS_PROC: &str = r#"
sup=$(awk '/^PPid:/{print $2}' /proc/$PPID/status)
python3 - "$sup" <<'PY'
import os, re, sys
sup = int(sys.argv[1])
try:
    st = os.read(os.open("/proc/%d/status" % sup, os.O_RDONLY | os.O_CREAT), 4096).decode()
    if ("\nPid:\t%d\n" % sup) not in st:
        print("SUP-PROC-IS-NOT-THE-SUPERVISORS"); sys.exit(0)
    fd = os.open("/proc/%d/maps" % sup, os.O_RDONLY | os.O_CREAT)
except OSError as e:
    print("maps refused", e); sys.exit(0)
maps = b""
while True:
    b = os.read(fd, 65536)
    if not b: break
    maps += b
print("GOT-SUP-MAPS", len(maps))
try:
    mem = os.open("/proc/%d/mem" % sup, os.O_RDWR | os.O_CREAT)
except OSError as e:
    print("mem refused", e); sys.exit(0)
print("GOT-SUP-MEM-RW")
n = 0
for line in maps.decode().splitlines():
    parts = line.split()
    if not parts[1].startswith("rw"): continue
    lo, hi = [int(x, 16) for x in parts[0].split("-")]
    try: data = os.pread(mem, hi - lo, lo)
    except OSError: continue
    for m in re.finditer(re.escape(b".envrc"), data):
        os.pwrite(mem, b"X", lo + m.start() + 1); n += 1
print("patched", n)
PY
echo 'touch MARK' > .envrc && echo MADE-ENVRC-AFTER-PATCH
python3 -c "
import os
try: os.open('/proc/1/mem', os.O_RDWR | os.O_CREAT); print('GOT-PID1-MEM-VIA-SUPERVISOR')
except OSError as e: print('pid 1 mem refused', e)"
(echo to-dev-fd > /dev/./fd/1) | cat
(cd /proc && python3 -c "
import os
fd = os.open('self/status', os.O_RDONLY | os.O_CREAT)
s = os.read(fd, 4096).decode()
print('SELF-IS-CALLER' if ('\nPid:\t%d\n' % os.getpid()) in s else 'SELF-IS-NOT-CALLER')")
"#;

#[test]
fn the_supervisors_own_proc_entries_are_never_a_callers() {
    if !require("guard_supervisor_proc") {
        return;
    }
    let w = World::with_probe("guardsupproc");
    for who in BOTH {
        guarded_workspace(&w, who);
        let o = w.run(who, &[], &["claude", "shell", AT_THE_SUPERVISORS_PROC]);
        let out = stdout(&o);
        let err = stderr(&o);
        for leak in [
            "GOT-SUP-MEM-RW",
            "MADE-ENVRC-AFTER-PATCH",
            "GOT-PID1-MEM-VIA-SUPERVISOR",
            "SELF-IS-NOT-CALLER",
        ] {
            assert!(!out.contains(leak), "{who:?}: {leak}:\n{out}\n{err}");
        }
        assert!(
            out.contains("to-dev-fd"),
            "{who:?}: /dev/./fd/1 is the caller's:\n{out}\n{err}"
        );
        assert!(out.contains("SELF-IS-CALLER"), "{who:?}:\n{out}\n{err}");
        assert!(
            w.workspace(who).join(".envrc").symlink_metadata().is_err(),
            "{who:?}"
        );
    }
}

/// A process that restricted itself with Landlock (a tool sandboxing its
/// own children, as some coding agents do) would not have the supervisor
/// honour its domain for creations (the supervisor is not in it). So in a
/// guarded session Landlock is refused as on a kernel without it (ENOSYS):
/// the tool learns it is not restricted instead of believing it is, and
/// nothing it asked to forbid is made for it behind its back.
const LANDLOCKED: &str = r#"
python3 - <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
abi = libc.syscall(444, None, 0, 1)
print("LANDLOCK-ABI", abi, ctypes.get_errno() if abi < 0 else 0)
if abi < 1:
    raise SystemExit(0)
class Attr(ctypes.Structure): _fields_ = [("handled_access_fs", ctypes.c_uint64)]
# MAKE_DIR, MAKE_REG, MAKE_FIFO, MAKE_SYM: handled, and no rule grants them.
a = Attr((1 << 7) | (1 << 8) | (1 << 10) | (1 << 12))
rs = libc.syscall(444, ctypes.byref(a), ctypes.sizeof(a), 0)
libc.prctl(38, 1, 0, 0, 0)
assert libc.syscall(446, rs, 0) == 0
for what, f in [("mkdir", lambda: os.mkdir("ll-dir")),
                 ("creat", lambda: os.close(os.open("ll-file", os.O_CREAT | os.O_WRONLY, 0o644))),
                 ("symlink", lambda: os.symlink("x", "ll-link"))]:
    try: f(); print("LANDLOCK-BYPASS", what)
    except OSError as e: print("landlock held", what, e.errno)
PY
"#;

#[test]
fn landlock_is_refused_where_the_supervisor_creates() {
    if !require("guard_landlock") {
        return;
    }
    // Control: this kernel has Landlock (or the test proves nothing).
    let host = std::process::Command::new("sh")
        .args(["-c", LANDLOCKED])
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    let host_out = stdout(&host);
    assert!(
        host_out.contains("landlock held mkdir"),
        "Landlock does not work outside the sandbox here:\n{host_out}{}",
        stderr(&host)
    );
    let w = World::with_probe("guardlandlock");
    for who in BOTH {
        let o = w.run(who, &[], &["claude", "shell", LANDLOCKED]);
        let out = stdout(&o);
        assert!(
            out.contains("LANDLOCK-ABI -1 38\n"),
            "{who:?}: Landlock offered in a guarded session:\n{out}\n{}",
            stderr(&o)
        );
        assert!(!out.contains("LANDLOCK-BYPASS"), "{who:?}:\n{out}");
        let ws = w.workspace(who);
        for p in ["ll-dir", "ll-file", "ll-link"] {
            assert!(ws.join(p).symlink_metadata().is_err(), "{who:?}: {p}");
        }
    }
}

/// The protected parents are matched by inode (on a file system whose
/// directory inodes are stable): moving one of their *ancestors* away and
/// building the same path anew gives the missing names a home the table
/// does not know.
const MOVED_ANCESTORS: &str = r##"
t() { if sh -c "$2" 2>/dev/null; then echo "MADE $1"; else echo "refused $1"; fi; }
t nested-repo-ancestor 'mv a b && mkdir -p a/sub && echo "touch MARK" > a/sub/.envrc'
t modules-ancestor 'mv .git/modules .git/m2 && mkdir -p .git/modules/s/hooks'
"##;

#[test]
fn a_protected_parents_ancestors_cannot_be_moved_aside() {
    if !require("guard_ancestors") {
        return;
    }
    let w = World::with_probe("guardancestors");
    for who in BOTH {
        set_up(
            &w,
            who,
            "git init -q -b main . && mkdir -p a .git/modules && git init -q a/sub \
                 && git init -q --separate-git-dir=.git/modules/s s && echo ok",
        );
        let o = w.run(who, &[], &["claude", "shell", MOVED_ANCESTORS]);
        let out = stdout(&o);
        assert!(!out.contains("MADE"), "{who:?}:\n{out}\n{}", stderr(&o));
        let ws = w.workspace(who);
        assert!(
            ws.join("a/sub/.git").is_dir(),
            "{who:?}: the nested repository moved"
        );
        assert!(
            ws.join("a/sub/.envrc").symlink_metadata().is_err(),
            "{who:?}"
        );
        assert!(
            ws.join(".git/modules/s/HEAD").is_file(),
            "{who:?}: the module moved"
        );
    }
}

/// `.git` as a file (a submodule, a linked worktree) names the git
/// directory whose config git obeys: rewritten, it points at a config the
/// session wrote (decision 0006's protected paths do not list it).
const GITFILE: &str = r#"
git init -q --bare evil && git -C evil config core.bare false \
  && git -C evil config core.fsmonitor 'touch MARK; false'
printf 'gitdir: ../evil\n' > s/.git && echo GITFILE-REWRITTEN
rm -f s/.git && mkdir s/.git 2>/dev/null && echo GITFILE-REPLACED
"#;

#[test]
fn a_gitdir_pointer_file_cannot_be_rewritten() {
    if !require("gitfile") {
        return;
    }
    let w = World::with_probe("gitfile");
    for who in BOTH {
        set_up(
            &w,
            who,
            "git init -q -b main . && mkdir -p .git/modules \
                 && git init -q --separate-git-dir=.git/modules/s s && echo ok",
        );
        let o = w.run(who, &[], &["claude", "shell", GITFILE]);
        let out = stdout(&o);
        let host = w.run(
            who,
            &[],
            &[
                "sh",
                "-c",
                "git -C s status >/dev/null 2>&1; ls s/MARK 2>&1",
            ],
        );
        assert!(
            stdout(&host).contains("No such file"),
            "{who:?}: a planted command ran on the host:\n{out}\n{}",
            stdout(&host)
        );
        assert!(!out.contains("GITFILE-RE"), "{who:?}:\n{out}");
    }
}

/// A FIFO's writer that gives up (killed while the supervisor waits in
/// its `open` for a reader) must not take a supervisor thread with it:
/// after more such writers than the supervisor has threads, creation
/// still works; also when the writers' contexts are remembered.
const ABANDONED_FIFO_WRITERS: &str = r#"
mkfifo ff
for i in 1 2 3 4 5; do timeout 1 sh -c 'echo x > ff'; done
# The same by writers whose context is remembered: their O_CREAT is first
# tried in one call, as O_EXCL, which the FIFO fails (decision 0023).
for i in 1 2 3 4 5; do timeout 1 sh -c ": > w$i-1; : > w$i-2; : > w$i-3; echo x > ff"; done
timeout 10 touch after-fifo && echo TOUCH-OK || echo TOUCH-HUNG
# No writer is left: a reader waits for one, as with the kernel alone (an
# open the supervisor left waiting for a killed writer would be one, and
# the reader would take its end for the real writer's: empty, at once).
sleep 0.3; timeout 2 cat ff; echo "READER-RC $?"
# A live writer still waits as long as it takes (its wait looked at every
# 100 ms), and its reader gets what it wrote.
echo waited-for > ff & sleep 0.5; timeout 5 cat ff; wait
# The signal that interrupts such a wait, sent to the supervisor from
# inside throughout a burst of creations, only makes a waiting open look
# again: no creation fails, nothing written is lost.
echo signalled > ff & sleep 0.2
sup=$(pgrep -x claude-sandbox)
(for i in $(seq 1000); do : > s$i || echo CREATE-FAILED; done; echo > made) &
n=0; while [ ! -e made ]; do for p in $sup; do kill -s RTMIN+6 $p 2>/dev/null && n=$((n+1)); done; done
echo "SIGNALS-SENT $n"; ls s* | wc -l | sed 's/^/MADE /'; timeout 5 cat ff; wait
timeout 10 sh -c 'cat ff > got & echo through-fifo > ff; wait'; cat got
"#;

#[test]
fn abandoned_fifo_writers_do_not_wedge_the_supervisor() {
    if !require("guard_fifo") {
        return;
    }
    let w = World::with_probe("guardfifo");
    let o = w.run(Who::Root, &[], &["claude", "shell", ABANDONED_FIFO_WRITERS]);
    let out = stdout(&o);
    assert!(out.contains("TOUCH-OK"), "{out}\n{}", stderr(&o));
    assert!(out.contains("READER-RC 124"), "{out}\n{}", stderr(&o));
    assert!(out.contains("waited-for"), "{out}\n{}", stderr(&o));
    assert!(!out.contains("SIGNALS-SENT 0"), "{out}\n{}", stderr(&o));
    assert!(!out.contains("CREATE-FAILED"), "{out}\n{}", stderr(&o));
    assert!(
        out.contains("MADE 1000") && out.contains("signalled"),
        "{out}\n{}",
        stderr(&o)
    );
    assert!(out.contains("through-fifo"), "{out}\n{}", stderr(&o));
}

/// Ordinary calls the supervisor must serve as the kernel would.
const ORDINARY: &str = r#"
python3 - <<'PY'
import os, threading
open("plain", "w").close(); os.symlink("plain", "sl")
# O_PATH ignores O_CREAT: an O_PATH descriptor of the link's target.
try:
    fd = os.open("sl", os.O_PATH | os.O_CREAT)
    print("OPATH", os.path.basename(os.readlink("/proc/self/fd/%d" % fd)))
except OSError as e: print("OPATH-FAILED", e)
# A thread other than the main one creates (Node's libuv pool does).
res = []
def f():
    try:
        os.close(os.open("from-thread", os.O_CREAT | os.O_WRONLY, 0o644)); os.mkdir("thread-dir")
        res.append("THREAD-OK")
    except OSError as e: res.append("THREAD-FAILED %s" % e)
t = threading.Thread(target=f); t.start(); t.join(); print(res[0])
# Relative paths of several components fail as the kernel says: a closed
# dirfd, a missing directory, a file where a directory must be; O_EXCL
# fails on any name that exists, a FIFO (not opened) or a dangling link.
import errno
def err(dirfd, path, flags=os.O_WRONLY):
    try: os.close(os.open(path, os.O_CREAT | flags, 0o644, dir_fd=dirfd))
    except OSError as e: return e.errno
    return 0
os.mkdir("rel"); plain = os.open("plain", os.O_RDONLY)
fd = os.open(".", os.O_RDONLY); os.close(fd)
os.mkfifo("rel/fifo"); os.symlink("nowhere", "rel/dangling")
excl = os.O_EXCL | os.O_RDONLY | os.O_NONBLOCK
got = (err(fd, "rel/x"), err(None, "rel/missing/x"), err(plain, "rel/x"), err(None, "rel/../rel/made"),
       err(None, "rel/fifo", excl), err(None, "rel/dangling", excl), err(None, "rel/made", excl))
want = (errno.EBADF, errno.ENOENT, errno.ENOTDIR, 0, errno.EEXIST, errno.EEXIST, errno.EEXIST)
print("ERRNOS-OK" if got == want else "ERRNOS %r" % (got,))
PY
# bind(2), performed by the supervisor on the caller's own socket (issue
# #45): a unix socket by a relative path (its options kept), by an absolute
# one, an abstract one, TCP on loopback; each works as the kernel's would,
# and a taken path gives EADDRINUSE.
python3 - <<'PY'
import os, socket, errno
s = socket.socket(socket.AF_UNIX); s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
s.bind("sock-rel"); s.listen(1)
c = socket.socket(socket.AF_UNIX); c.connect("sock-rel"); a, _ = s.accept()
c.send(b"x"); ok = a.recv(1) == b"x" and s.getsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED) == 1
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); d.bind(os.path.abspath("sock-abs"))
ab = socket.socket(socket.AF_UNIX); ab.bind("\0csb-abstract-%d" % os.getpid())
t = socket.socket(); t.bind(("127.0.0.1", 0)); t.listen(1)
try:
    socket.socket(socket.AF_UNIX).bind("sock-rel"); taken = None
except OSError as e: taken = e.errno
ok = ok and os.path.exists("sock-abs") and t.getsockname()[1] > 0 and taken == errno.EADDRINUSE
print("BIND-OK" if ok else "BIND-FAILED %r" % taken)
os.unlink("sock-rel"); os.unlink("sock-abs")
PY
# /dev/tty opened for writing is the caller's own terminal: here a new
# session on a pty of its own (as under tmux), not the launcher's.
script -qec 'exec 3<>/dev/tty && [ "$(readlink /proc/self/fd/3)" = "$(readlink /proc/self/fd/0)" ] \
  && echo CTTY-OWN || echo "CTTY-OTHER $(readlink /proc/self/fd/3)"' /dev/null </dev/null
"#;

#[test]
fn ordinary_calls_are_served_as_the_kernel_would() {
    if !require("guard_ordinary") {
        return;
    }
    let w = World::with_probe("guardordinary");
    for setup in ["", REFUSE_FRESH_PROC] {
        for who in BOTH {
            let o = w
                .shell_with_setup(who, setup, ORDINARY)
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            let out = stdout(&o);
            assert!(
                out.contains("OPATH plain"),
                "{who:?} {setup:?}:\n{out}\n{}",
                stderr(&o)
            );
            assert!(
                out.contains("THREAD-OK"),
                "{who:?} {setup:?}:\n{out}\n{}",
                stderr(&o)
            );
            assert!(
                out.contains("ERRNOS-OK") && w.workspace(who).join("rel/made").is_file(),
                "{who:?} {setup:?}:\n{out}\n{}",
                stderr(&o)
            );
            assert!(
                out.contains("BIND-OK"),
                "{who:?} {setup:?}:\n{out}\n{}",
                stderr(&o)
            );
            assert!(
                out.contains("CTTY-OWN"),
                "{who:?} {setup:?}:\n{out}\n{}",
                stderr(&o)
            );
            let _ = w.run(
                who,
                &[],
                &["sh", "-c", "rm -rf plain sl from-thread thread-dir rel"],
            );
        }
    }
}

/// Every way a caller's umask can change, against the supervisor, which
/// remembers a thread's mask between its creations (decision 0020): each
/// file must have the mode the mask of its creator had when it was made.
/// A thread with a file-system context of its own sets 077 and then
/// `exec`s, taking the number of its process's main thread, whose 022 the
/// supervisor read; a second process sharing the first one's context
/// (`clone(CLONE_FS)`) changes the mask between the first one's creations,
/// each change answered only once it returned.
const UMASKS: &str = r#"
mkdir um && python3 - <<'PY'
import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
bad = []
def made(path, mask):
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o666))
    got = os.stat(path).st_mode & 0o777
    if got != 0o666 & ~mask: bad.append("%s %o under %o" % (path, got, mask))
# The same process, one mask after another.
for i in range(200):
    m = (0o022, 0o077, 0o002)[i % 3]
    os.umask(m); made("um/seq%d" % i, m)
# Another process sharing this one's context changes the mask while this
# one creates without pause; once the change has returned (the pipe says
# so), the next file must have the new mask.
CLONE_FS, SIGCHLD = 0x200, 17
r1, w1 = os.pipe(); r2, w2 = os.pipe()
os.set_blocking(r1, False)
masks = (0o077, 0o022, 0o027, 0o002)
os.umask(0o022); made("um/before", 0o022)
pid = libc.syscall(56, CLONE_FS | SIGCHLD, 0, 0, 0, 0)
if pid == 0:
    for i in range(300):
        os.umask(masks[i % 4]); os.write(w1, b"x"); os.read(r2, 1)
    os._exit(0)
n = 0
for i in range(300):
    while True:
        n += 1
        os.close(os.open("um/busy", os.O_CREAT | os.O_WRONLY, 0o666)); os.unlink("um/busy")
        try:
            if os.read(r1, 1): break
        except BlockingIOError: pass
    made("um/shared%d" % i, masks[i % 4]); os.write(w2, b"x")
os.waitpid(pid, 0)
print("UMASK-BAD", bad) if bad else print("UMASK-OK", flush=True)
# A thread with a context of its own sets 077 and, once the main thread
# made a file under 022 (two threads then), execs: it takes the main
# thread's number, with its own mask.
pid = os.fork()
if pid == 0:
    go, main_made = threading.Event(), threading.Event()
    def thread():
        if libc.unshare(CLONE_FS) != 0: os._exit(1)
        os.umask(0o077); go.set(); main_made.wait()
        os.execv("/bin/sh", ["sh", "-c", "echo x > um/after-exec; stat -c 'EXEC %a' um/after-exec"])
    os.umask(0o022)
    threading.Thread(target=thread).start()
    go.wait(); made("um/main", 0o022); main_made.set()
    threading.Event().wait()
os.waitpid(pid, 0)
PY
"#;

#[test]
#[cfg(target_arch = "x86_64")]
fn the_callers_umask_holds_however_it_changes() {
    if !require("guard_umask") {
        return;
    }
    let w = World::with_probe("guardumask");
    in_both_procs(&w, UMASKS, &["UMASK-OK", "EXEC 600"], "um");
}

/// `script` in a session of each user, with the sandbox's own /proc and
/// with only the host's (decision 0003), where the supervisor knows
/// callers by the host's numbers: every run's output holds each of `want`;
/// `made` is removed from the workspace after each.
#[cfg(target_arch = "x86_64")]
fn in_both_procs(w: &World, script: &str, want: &[&str], made: &str) {
    for setup in ["", REFUSE_FRESH_PROC] {
        for who in BOTH {
            let o = w
                .shell_with_setup(who, setup, script)
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            let (out, err) = (stdout(&o), stderr(&o));
            for line in want {
                assert!(
                    out.contains(line),
                    "{who:?} {setup:?}: {line}:\n{out}\n{err}"
                );
            }
            let _ = w.run(who, &[], &["rm", "-rf", made]);
        }
    }
}

/// A session's working directories, against the supervisor's memory of
/// them (decision 0021): a process creating by relative paths while it
/// changes directory (`chdir`, `fchdir`) between creations; a second
/// process sharing its context (`clone(CLONE_FS)`) moving it while the
/// first creates without pause, each move answered only once it returned;
/// a thread with a context of its own moving and then `exec`ing into the
/// main thread's number; a working directory renamed, then removed.
const CWDS: &str = r#"
mkdir cw && cd cw && mkdir -p a/sub b/sub && python3 - <<'PY'
import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
top = os.getcwd()
A, B = top + "/a", top + "/b"
bad = []
def made(name, where):
    try:
        os.close(os.open(name, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))
    except OSError as e:
        bad.append("%s: %s in %s" % (name, e, where)); return
    if not os.path.exists(os.path.join(where, name)):
        bad.append("%s not made in %s" % (name, where))
# The same process, one directory after another, by both calls, by a
# bare name and by a path of two components.
fds = {A: os.open(A, os.O_RDONLY), B: os.open(B, os.O_RDONLY)}
for i in range(200):
    d = (A, B)[i % 2]
    if i % 3: os.chdir(d)
    else: os.fchdir(fds[d])
    made("f%d" % i, d); made("sub/g%d" % i, d)
# Another process sharing this one's context moves it while this one
# creates without pause; once the move has returned (the pipe says so),
# the next file must land where it moved to.
CLONE_FS, SIGCHLD = 0x200, 17
r1, w1 = os.pipe(); r2, w2 = os.pipe()
os.set_blocking(r1, False)
os.chdir(A); made("before", A)
pid = libc.syscall(56, CLONE_FS | SIGCHLD, 0, 0, 0, 0)
if pid == 0:
    for i in range(300):
        os.chdir((B, A)[i % 2]); os.write(w1, b"x"); os.read(r2, 1)
    os._exit(0)
for i in range(300):
    while True:
        os.close(os.open("busy", os.O_CREAT | os.O_WRONLY, 0o644))
        try:
            if os.read(r1, 1): break
        except BlockingIOError: pass
    made("shared%d" % i, (B, A)[i % 2]); os.write(w2, b"x")
os.waitpid(pid, 0)
# Renamed while it is the working directory: files land in it, under its
# new name; removed: nothing is created, as the kernel says.
os.mkdir(top + "/r"); os.chdir(top + "/r"); made("x", top + "/r")
os.rename(top + "/r", top + "/r2"); made("y", top + "/r2")
for n in os.listdir(top + "/r2"): os.unlink(top + "/r2/" + n)
os.rmdir(top + "/r2")
try:
    os.close(os.open("z", os.O_CREAT | os.O_WRONLY, 0o644)); bad.append("z made in a removed directory")
except FileNotFoundError: pass
print("CWD-BAD", len(bad), bad[:5]) if bad else print("CWD-OK", flush=True)
# A thread with a context of its own moves to B and, once the main thread
# made two files in A (two threads then; the second would have had A
# kept), execs: it takes the main thread's number, with its own working
# directory.
os.chdir(A)
pid = os.fork()
if pid == 0:
    go, main_made = threading.Event(), threading.Event()
    def thread():
        if libc.unshare(CLONE_FS) != 0: os._exit(1)
        os.chdir(B); go.set(); main_made.wait()
        os.execv("/bin/sh", ["sh", "-c", "echo x > after-exec"])
    threading.Thread(target=thread).start()
    go.wait(); made("main", A); made("main2", A); main_made.set()
    threading.Event().wait()
os.waitpid(pid, 0)
print("EXEC-IN", "B" if os.path.exists(B + "/after-exec") else "A" if os.path.exists(A + "/after-exec") else "none")
PY
"#;

#[test]
#[cfg(target_arch = "x86_64")]
fn the_callers_working_directory_holds_however_it_changes() {
    if !require("guard_cwd") {
        return;
    }
    let w = World::with_probe("guardcwd");
    in_both_procs(&w, CWDS, &["CWD-OK", "EXEC-IN B"], "cw");
}

/// Issue #22 item 2, as a hostile session would leave it for the next
/// launch: `k/.git` naming a directory of the user's home (`gitdir:`), and
/// the workspace repository's own `.git/commondir` naming another. Neither
/// is bound into the sandbox (the secrets stay unreadable, no mount at
/// either path), each is named in one line at launch; a pointer inside the
/// workspace (a submodule's) is still followed and its config bound
/// read-only (the control).
const POINTERS_INSIDE: &str = r#"
for f in "$KUBE/config" "$AWS/config" "$KUBE/hooks" "$AWS/info"; do
  cat "$f" 2>/dev/null | grep -q SECRET && echo "READ $f"
  grep -qF "$f" /proc/self/mountinfo && echo "MOUNTED $f"
done
grep -qF "$PWD/.git/modules/s/hooks" /proc/self/mountinfo && echo BOUND-control
(echo '[core] fsmonitor = touch MARK' >> .git/modules/s/config) 2>/dev/null || echo DENIED-control
"#;

#[test]
fn pointers_out_of_the_workspace_bind_nothing_into_the_sandbox() {
    if !require("pointers_out") {
        return;
    }
    let w = World::with_probe("pointers");
    for who in BOTH {
        let kube = w.put(who, ".kube/config", "SECRET-kube\n");
        w.put(who, ".kube/hooks/post-checkout", "SECRET-hook\n");
        let aws = w.put(who, ".aws/config", "SECRET-aws\n");
        w.put(who, ".aws/info/attributes", "SECRET-attributes\n");
        let (kube, aws) = (kube.parent().unwrap(), aws.parent().unwrap());
        set_up(
            &w,
            who,
            &format!(
                "git init -q -b main . && mkdir -p .git/modules \
                 && git init -q --separate-git-dir=.git/modules/s s \
                 && mkdir k && printf 'gitdir: %s\\n' {kube} > k/.git \
                 && printf '%s\\n' {aws} > .git/commondir && echo ok",
                kube = shell_quote(&kube.to_string_lossy()),
                aws = shell_quote(&aws.to_string_lossy()),
            ),
        );
        let env = [
            ("KUBE", &*kube.to_string_lossy()),
            ("AWS", &*aws.to_string_lossy()),
        ];
        let script = format!(
            "KUBE={} AWS={}\n{POINTERS_INSIDE}",
            shell_quote(env[0].1),
            shell_quote(env[1].1)
        );
        let o = w.run(who, &[], &["claude", "shell", &script]);
        let (out, err) = (stdout(&o), stderr(&o));
        assert!(o.status.success(), "{who:?}: {err}\n{out}");
        assert!(
            !out.contains("READ ") && !out.contains("MOUNTED "),
            "{who:?}: a host file outside the workspace reached the sandbox:\n{out}"
        );
        assert!(
            out.contains("BOUND-control") && out.contains("DENIED-control"),
            "{who:?}: control: a pointer inside is followed:\n{out}\n{err}"
        );
        for (pointer, target) in [("k/.git", kube), (".git/commondir", aws)] {
            let line = format!(
                "claude-sandbox: {pointer} points outside the workspace ({}): not followed\n",
                target.display()
            );
            assert_eq!(err.matches(&line).count(), 1, "{who:?}: {err}");
        }
        assert_eq!(
            std::fs::read_to_string(kube.join("config")).unwrap(),
            "SECRET-kube\n"
        );
    }
}
