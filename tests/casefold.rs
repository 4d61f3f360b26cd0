//! A case-folding workspace (issue #45 item 8, docs/decisions/0033): on a
//! file system that folds names, `.ENVRC`, `.git/HOOKS/x`, `.git/CONFIG`
//! or a KELVIN SIGN for a `k` name protected entries; `.idea~` does too
//! here, a fold the guard's own key does not know, caught by its lookup
//! once the name is made. The workspace here
//! is a case-insensitive FUSE passthrough (tests/fixtures/casefold_fs.py,
//! Unicode case folding, one inode for every spelling, a kernel inode of
//! its own for each spelling as libfuse's path-keyed nodes give: a bind
//! over `.envrc` does not cover `.ENVRC`), mounted in the session's private
//! mount namespace only and gone with it. Inside, as root and as an
//! unprivileged user, every other spelling is refused and the host's
//! entries keep their content; with the launch's detection taken away (the
//! test mutation `no-casefold`) the same session does plant them. Git
//! works as ever in both.

mod common;
use common::*;

use std::path::Path;

/// Each attempt prints `WROTE name` when it succeeded.
const ATTEMPTS: &str = "
t() { if sh -c \"$2\" 2>/dev/null; then echo \"WROTE $1\"; else echo \"denied $1\"; fi; }
t envrc-upper 'echo \"touch MARK\" >> .ENVRC'
t envrc-mixed 'echo \"touch MARK\" >> .Envrc'
t vscode-upper 'echo MARK >> .VSCODE/settings.json'
t vscode-new 'echo MARK > .Vscode/tasks.json'
t head-lower 'echo \"ref: refs/heads/main\" > head'
t mcp-long-s 'echo MARK > .mcp.j\u{17f}on'
t hooks-upper 'echo \"touch MARK\" > .git/HOOKS/post-checkout'
t hooks-kelvin 'echo \"touch MARK\" > .git/hoo\u{212a}s/post-merge'
t git-config-upper 'echo \"[core] fsmonitor = touch MARK\" >> .git/CONFIG'
t gitdir-upper 'echo \"[core] fsmonitor = touch MARK\" >> .GIT/config'
t idea-tilde 'echo MARK > .idea~'
t devcontainer-tilde 'mkdir .devcontainer~ && echo MARK > .devcontainer~/devcontainer.json'
echo plain > plain-file && echo PLAIN-OK
echo two >> file && git add file && git commit -qm change && git checkout -qb topic && echo GIT-OK
";

/// What the no-casefold control plants: all but `.GIT/config`, which the
/// git rule refuses by its lookups alone (`.GIT` holds a `HEAD`).
const PLANTED: &[&str] = &[
    "envrc-upper",
    "envrc-mixed",
    "vscode-upper",
    "vscode-new",
    "head-lower",
    "mcp-long-s",
    "hooks-upper",
    "hooks-kelvin",
    "git-config-upper",
    "idea-tilde",
    "devcontainer-tilde",
];

/// A name as the fixture folds it (for the names used here): case, and a
/// trailing `~` (a fold the guard's own key does not know: only its lookup
/// once the name is made finds it).
fn fold(s: &str) -> String {
    s.strip_suffix('~')
        .unwrap_or(s)
        .chars()
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
        .collect()
}

/// The entries of `dir` on the host that fold to `name`.
fn spelled(dir: &Path, name: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| fold(n) == fold(name))
                .collect()
        })
        .unwrap_or_default()
}

/// The host's side of the workspace `b` (the FUSE mount's backing
/// directory): whether anything of the session's is there under a
/// protected name, in any spelling.
fn planted(b: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    if read(&b.join(".envrc")).contains("MARK") {
        found.push(".envrc".to_string());
    }
    if read(&b.join(".git/config")).contains("MARK") {
        found.push(".git/config".to_string());
    }
    if read(&b.join(".vscode/settings.json")).contains("MARK") {
        found.push(".vscode/settings.json".to_string());
    }
    for (dir, name) in [
        ("", "HEAD"),
        (".vscode", "tasks.json"),
        ("", ".mcp.json"),
        ("", ".idea"),
        ("", ".devcontainer"),
        (".git/hooks", "post-checkout"),
        (".git/hooks", "post-merge"),
    ] {
        for n in spelled(&b.join(dir), name) {
            found.push(format!("{dir}/{n}"));
        }
    }
    for name in [".envrc", ".vscode", "hooks", "config", ".git"] {
        let dir = if name == "hooks" || name == "config" {
            b.join(".git")
        } else {
            b.to_path_buf()
        };
        let all = spelled(&dir, name);
        if all.len() > 1 {
            found.push(format!("{name}: {all:?}"));
        }
    }
    found
}

/// A repository in `b` as `who` would have it: `.envrc`,
/// `.vscode/settings.json`, `.git/hooks`; no `.mcp.json`, `.idea`,
/// `.devcontainer` or root `HEAD`.
fn set_up(b: &Path, who: Who) {
    std::fs::create_dir_all(b).unwrap();
    let st = std::process::Command::new("sh")
        .arg("-c")
        .arg(
            "git init -q -b main . && git config user.name A && git config user.email a@b \
             && echo one > file && git add file && git commit -qm init \
             && echo 'export A=1' > .envrc && mkdir -p .git/hooks .vscode \
             && echo {} > .vscode/settings.json",
        )
        .current_dir(b)
        .status()
        .unwrap();
    assert!(st.success(), "setting up {}", b.display());
    if who == Who::User {
        let st = std::process::Command::new("chown")
            .args([
                "-R",
                &format!("{TEST_UID}:{TEST_UID}"),
                &b.to_string_lossy(),
            ])
            .status()
            .unwrap();
        assert!(st.success());
    }
}

/// Root shell commands that mount the case-folding passthrough of `b` over
/// `who`'s workspace, in the session's private mount namespace.
fn mount_folding(w: &World, who: Who, b: &Path) -> String {
    let fs = w.fixture("tests/fixtures/casefold_fs.py");
    let ws = w.workspace(who);
    format!(
        "/usr/bin/python3 {fs} {b} {ws} </dev/null >{log} 2>&1 &\n\
         for i in $(seq 100); do mountpoint -q {ws} && break; sleep 0.1; done\n\
         mountpoint -q {ws} || {{ echo 'the case-folding mount did not come up' >&2; cat {log} >&2; exit 1; }}\n",
        fs = shell_quote(&fs.to_string_lossy()),
        b = shell_quote(&b.to_string_lossy()),
        ws = shell_quote(&ws.to_string_lossy()),
        log = shell_quote(&b.with_extension("log").to_string_lossy()),
    )
}

/// Whether the passthrough can run here (Debian: python3-fusepy, /dev/fuse).
fn fuse_ready() -> bool {
    let ok = Path::new("/dev/fuse").exists()
        && Path::new("/usr/lib/python3/dist-packages/fusepy.py").exists();
    if ok {
        return true;
    }
    let msg =
        "tests/casefold.rs needs /dev/fuse and python3-fusepy (apt-get install python3-fusepy)";
    if std::env::var_os("CI").is_some() {
        panic!("{msg} (CI is set: a missing prerequisite is a failure)");
    }
    eprintln!("\n!!!! SKIPPED: {msg} !!!!\n");
    false
}

/// One session in a case-folding workspace as `who`: what it wrote, and
/// what the host then has.
fn session(w: &World, who: Who, tag: &str, env: &[(&str, &str)]) -> (Vec<String>, Vec<String>) {
    let b = w
        .root
        .join(format!("backing-{tag}-{}", World::user_name(who)));
    set_up(&b, who);
    let setup = mount_folding(w, who, &b);
    let argv = ["claude", "shell", ATTEMPTS];
    let o = w
        .command_with_setup(who, &w.workspace(who), &setup, env, &argv)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let out = stdout(&o);
    // Ordinary work goes on: a plain file, a commit, a branch.
    assert!(
        o.status.success() && out.contains("PLAIN-OK") && out.contains("GIT-OK"),
        "{who:?} {tag}: {}\n{out}",
        stderr(&o)
    );
    let wrote = out
        .lines()
        .filter_map(|l| l.strip_prefix("WROTE "))
        .map(str::to_string)
        .collect();
    (wrote, planted(&b))
}

#[test]
fn other_spellings_of_protected_names_are_refused_on_a_folding_workspace() {
    if !require("casefold") || !fuse_ready() {
        return;
    }
    let w = World::new("casefold");
    w.use_mutation_binary();
    w.install_by_hand(&w.root.join("bin/probe"), "egress-jail = 0\n");
    for who in BOTH {
        let (wrote, planted) = session(&w, who, "guarded", &[]);
        assert!(wrote.is_empty(), "{who:?}: written inside: {wrote:?}");
        assert!(planted.is_empty(), "{who:?}: on the host: {planted:?}");
        // The control: the launch's detection taken away, the same
        // session plants every one the byte comparisons miss.
        let env = [("CLAUDE_SANDBOX_TEST_MUTATION", "no-casefold")];
        let (wrote, planted) = session(&w, who, "control", &env);
        assert_eq!(wrote, PLANTED, "{who:?}: the control's writes");
        let every = [
            ".envrc",
            ".git/config",
            ".vscode/settings.json",
            ".vscode/tasks.json",
            "/head",
            "/.mcp.json",
            "hooks/post-checkout",
            "hooks/post-merge",
            "/.idea",
            "/.devcontainer",
        ];
        for p in every {
            assert!(
                planted.iter().any(|f| fold(f).contains(p)),
                "{who:?}: the control left nothing at {p}: {planted:?}"
            );
        }
    }
}
