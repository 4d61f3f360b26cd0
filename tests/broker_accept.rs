//! End-to-end: issue #25's acceptance with real clients, in allowlist mode,
//! as root and as an unprivileged user, in the private site network of
//! [`common::broker`] (the test CA playing the public one; the test
//! servers accept only the real tokens). Inside a session, Debian's `gh`
//! (`gh api user`) and `git push` over https (git's credential helper is
//! `gh auth git-credential`, reading the stand-in) succeed through the
//! broker; the stand-ins a hostile session copies out get 401 when
//! replayed from the host, where the real token gets 200; the real Claude
//! Code answers with a brokered key while nothing it or its hooks can read
//! holds the real one.

mod common;
use common::broker::*;
use common::lan::*;
use common::site::Site;
use common::*;

use std::path::Path;
use std::process::{Command, Stdio};

/// `gh`, as Debian packages it (scripts/test.sh installs it). Under `CI`
/// a missing `gh` fails the test; elsewhere it is skipped, loudly.
fn gh_present() -> bool {
    if Path::new("/usr/bin/gh").exists() {
        return true;
    }
    let msg = "the real `gh` (Debian's package gh) is not at /usr/bin/gh";
    if std::env::var_os("CI").is_some() {
        panic!("{msg} (CI is set: scripts/test.sh installs it)");
    }
    eprintln!("\n!!!! SKIPPED: {msg}: sudo apt-get install gh !!!!\n");
    false
}

/// The bare repository the test forge serves by smart HTTP at
/// `https://github.com/smart/org/repo.git` (pushes need the real token).
fn forge_repo(n: &Net) -> std::path::PathBuf {
    n.site.dir.join("www/org/repo.git")
}

/// The HTTP status of a GET of `https://HOST/PATH` from the host's side
/// (the LAN host, outside any sandbox and not through the broker), with
/// `header`.
fn status_from_host(n: &Net, host: &str, path: &str, header: &str) -> String {
    let mut c = Command::new("curl");
    c.args(["-sS", "-m", "10", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg("--cacert")
        .arg(n.site.ca())
        .args([
            "--resolve",
            &format!("{host}:443:203.0.113.10"),
            "-H",
            header,
        ])
        .arg(format!("https://{host}{path}"));
    let o = in_netns(&n.lan.host, &c).output().unwrap();
    stdout(&o)
}

/// Standard base64 with padding (what git sends as Basic credentials).
fn base64(s: &str) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in s.as_bytes().chunks(3) {
        let n = c
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= c.len() {
                A[(n >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}

#[test]
fn gh_api_user_and_git_push_work_inside_with_only_standins() {
    if !require("broker_gh_push") || !gh_present() {
        return;
    }
    let n = net("brkpush");
    let search = search(&n);
    for who in BOTH {
        let msg = format!("pushed from inside as {who:?}");
        // git's credential helper inside is `gh auth git-credential` (the
        // sandbox's git config), which hands git the stand-in.
        let script = format!(
            "echo \"gh=$(GH_NO_UPDATE_NOTIFIER=1 gh api user 2>&1)\"\n\
             git clone -q https://github.com/smart/org/repo.git pushed 2>&1 && cd pushed && echo \"{who:?}\" > who \
               && git add who && git -c user.name=Octo -c user.email=octo@example.test commit -q -m '{msg}' \
               && echo \"head=$(git rev-parse HEAD)\" && git push -q origin main 2>&1; echo \"push=$?\"\n\
             cd ..; echo \"found={search}\"\n"
        );
        let o = session(&n, who, &script);
        let out = stdout(&o);
        assert!(o.status.success(), "{who:?}: {}", shown(&o));
        assert_eq!(value(&out, "gh"), "authenticated", "{who:?}: {}", shown(&o));
        assert_eq!(value(&out, "push"), "0", "{who:?}: {}", shown(&o));
        assert_eq!(value(&out, "found").trim(), "", "{who:?}: {out}");
        // From the host: the commit arrived in the forge's repository.
        let head = value(&out, "head");
        let o = Command::new("git")
            .arg("--git-dir")
            .arg(forge_repo(&n))
            .args(["log", "-1", "--format=%H %s", "main"])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert_eq!(
            stdout(&o),
            format!("{head} {msg}\n"),
            "{who:?}: {}",
            shown(&o)
        );
        // Each swap is logged: the API call and git's requests to github.com.
        let log = newest_log(&n, who);
        for l in [
            "\"method\":\"GET\",\"host\":\"api.github.com\",\"credential\":\"github\"",
            "\"method\":\"POST\",\"host\":\"github.com\",\"credential\":\"github\"",
        ] {
            assert!(log.contains(l), "{who:?}: {l}:\n{log}");
        }
    }
}

#[test]
fn standins_copied_out_and_replayed_from_the_host_get_401() {
    if !require("broker_replay") {
        return;
    }
    let n = net("brkreplay");
    // Positive control: from the host, the real values get 200.
    let real_gh = format!("Authorization: token {}", n.reals.gh);
    let real_key = format!("x-api-key: {}", n.reals.api_key);
    let basic = |t: &str| {
        format!(
            "Authorization: Basic {}",
            base64(&format!("x-access-token:{t}"))
        )
    };
    let receive = "/smart/org/repo.git/info/refs?service=git-receive-pack";
    assert_eq!(
        status_from_host(&n, "api.github.com", "/user", &real_gh),
        "200"
    );
    assert_eq!(
        status_from_host(&n, "api.anthropic.com", "/user", &real_key),
        "200"
    );
    assert_eq!(
        status_from_host(&n, "github.com", receive, &basic(&n.reals.gh)),
        "200"
    );
    for who in BOTH {
        // The hostile session: its credentials, as it sees them, copied to
        // the workspace (which the host can read afterwards).
        let o = session(
            &n,
            who,
            "cp ~/.config/gh/hosts.yml loot-hosts.yml && printf '%s' \"$ANTHROPIC_API_KEY\" > loot-key && echo copied",
        );
        assert_eq!(stdout(&o), "copied\n", "{who:?}: {}", shown(&o));
        let ws = n.w.workspace(who);
        let hosts = std::fs::read_to_string(ws.join("loot-hosts.yml")).unwrap();
        let key = std::fs::read_to_string(ws.join("loot-key")).unwrap();
        let token = hosts
            .lines()
            .find_map(|l| l.trim().strip_prefix("oauth_token: "))
            .unwrap_or_else(|| panic!("{who:?}: no token in\n{hosts}"))
            .to_string();
        assert!(
            token.starts_with("gho_") && token != n.reals.gh,
            "{who:?}: {hosts}"
        );
        assert!(!hosts.contains(&n.reals.gh), "{who:?}: {hosts}");
        assert!(
            key.starts_with("sk-ant-api03-") && key != n.reals.api_key,
            "{who:?}: {key}"
        );
        // Replayed from the host: refused, everywhere they would work inside.
        for (host, path, header) in [
            (
                "api.github.com",
                "/user",
                format!("Authorization: token {token}"),
            ),
            (
                "api.github.com",
                "/user",
                format!("Authorization: Bearer {token}"),
            ),
            ("github.com", receive, basic(&token)),
            ("api.anthropic.com", "/user", format!("x-api-key: {key}")),
            (
                "api.anthropic.com",
                "/user",
                format!("Authorization: Bearer {key}"),
            ),
        ] {
            assert_eq!(
                status_from_host(&n, host, path, &header),
                "401",
                "{who:?}: {host}{path} {header}"
            );
        }
    }
}

/// A `UserPromptSubmit` hook: while the real Claude Code runs (its own
/// environment and arguments in /proc), search every readable file that
/// could hold the key, every process's environment and command line, for
/// the real key (`pat`), and for the stand-in the hook itself got (the
/// control: the search does reach Claude Code's environment).
fn hook_settings(pat: &str) -> String {
    let script = format!(
        "cd \"$CLAUDE_PROJECT_DIR\"; echo \"key=$ANTHROPIC_API_KEY\" > hook.out; \
         echo \"found=$(grep -rlsaE '{pat}' ~ /etc /tmp /usr/libexec \"$PWD\" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\n' ' ')\" >> hook.out; \
         echo \"standin_in=$(grep -lsa \"$ANTHROPIC_API_KEY\" /proc/[0-9]*/environ 2>/dev/null | wc -l)\" >> hook.out; \
         echo \"claude_env=$(for p in /proc/[0-9]*; do grep -qa claude \"$p/cmdline\" 2>/dev/null && grep -lsa \"$ANTHROPIC_API_KEY\" \"$p/environ\"; done | wc -l)\" >> hook.out"
    );
    serde_json::json!({
        "hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": script}]}]}
    })
    .to_string()
}

#[test]
fn real_claude_code_and_its_hooks_never_see_the_real_key() {
    if !require("broker_claude_grep") {
        return;
    }
    let Some(real_bin) = real_claude() else {
        return;
    };
    let mut lan = Lan::up();
    let site = Site::new("brkcgrep");
    let key = real("sk-ant-api03-", "brkcgrep");
    let api_log = fake_api(&mut lan, &site, &key, None);
    let w = real_claude_world("brkcgrep", &real_bin, "egress = allowlist\npass-env = ANTHROPIC_API_KEY, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC\n", &site);
    for who in BOTH {
        w.put(who, ".claude/settings.json", &hook_settings(&pattern(&key)));
        let prompt = format!("hello-grep-{who:?}");
        let cmd = w.command_with_setup(
            who,
            &w.workspace(who),
            "",
            &[
                ("ANTHROPIC_API_KEY", &key),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ],
            &["claude", "-p", &prompt],
        );
        let o = in_netns(&lan.host, &cmd)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let logged = std::fs::read_to_string(&api_log).unwrap_or_default();
        assert!(
            o.status.success() && stdout(&o).contains("PONG-FROM-FAKE-API"),
            "{who:?}: {}\napi log:\n{logged}",
            shown(&o)
        );
        let hook = std::fs::read_to_string(w.workspace(who).join("hook.out"))
            .unwrap_or_else(|e| panic!("{who:?}: the hook did not run ({e}): {}", shown(&o)));
        let standin = value(&hook, "key");
        assert!(
            standin.starts_with("sk-ant-api03-") && standin != key,
            "{who:?}: {hook}"
        );
        // The control: the search reads Claude Code's own environment (it
        // finds the stand-in there and in the hook's shell)...
        assert_ne!(value(&hook, "claude_env"), "0", "{who:?}: {hook}");
        assert!(
            value(&hook, "standin_in").parse::<u32>().unwrap() >= 2,
            "{who:?}: {hook}"
        );
        // ...and finds no real key anywhere.
        assert_eq!(value(&hook, "found").trim(), "", "{who:?}: {hook}");
        // The request reached the API with the real key.
        assert!(
            logged
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .any(|v| v["key_ok"] == true
                    && v["body"].as_str().is_some_and(|b| b.contains(&prompt))),
            "{who:?}: {logged}"
        );
    }
}
