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
