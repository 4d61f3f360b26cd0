//! End-to-end: the shadow under real bubblewrap (issue #2), as root and as an
//! unprivileged user, with the probe standing in for the real binary.

mod common;
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
        ];
        let o = w.run(who, &secrets, &argv);
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
        let env = r["env"].as_object().unwrap();
        let home = w.home(who).to_string_lossy().into_owned();
        let mut keys: Vec<&str> = env.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(
            keys,
            ["CLAUDE_SANDBOX_EGRESS_JAIL", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "HOME", "IS_SANDBOX", "LANG", "PATH", "PWD", "TERM", "USER"],
            "{who:?}: environment is exactly §4.5 (plus PWD, which bubblewrap sets to the working directory)"
        );
        assert_eq!(env["PWD"], r["cwd"]);
        assert_eq!(env["USER"], World::user_name(who));
        assert_eq!(env["HOME"], home.as_str());
        assert_eq!(env["IS_SANDBOX"], "1");
        assert_eq!(
            env["CLAUDE_SANDBOX_EGRESS_JAIL"], "0",
            "the world runs with the jail off"
        );
        assert_eq!(env["GIT_CONFIG_GLOBAL"], "/etc/claude-gitconfig");
        assert_eq!(env["GIT_CONFIG_SYSTEM"], "/dev/null");
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
