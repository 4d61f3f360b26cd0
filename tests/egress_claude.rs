//! End-to-end: the real Claude Code in allowlist egress mode (issue #15,
//! acceptance 2). The fake Messages API runs on the test network's
//! "internet" host under a name the test resolver serves; the sandbox has no
//! route, so the prompt can only reach it through the proxy.

mod common;
use common::lan::Lan;
use common::*;

use std::path::Path;
use std::process::{Command, Stdio};

/// The fake API's port on the "internet" host (203.0.113.10).
const API_PORT: &str = "8080";

/// The session logs of `who` in `w`, oldest first.
fn egress_logs(w: &World, who: Who) -> Vec<std::path::PathBuf> {
    let dir = w.home(who).join(".local/state/claude-sandbox/egress");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn log_lines(p: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn real_claude_code_answers_through_the_allowlist_proxy() {
    if !require("real_client_allowlist") {
        return;
    }
    let Some(real) = real_claude() else { return };
    let mut lan = Lan::up();
    let l = lan.lan.clone();
    // Every name resolves to the "internet" host: api.test, and anything
    // Claude Code itself may look up (which stays inside the test network).
    lan.listen(&l, &["dns", "10.77.0.1", "240"]);
    let w = World::new("allowclaude");
    w.install_by_hand(
        &real,
        "egress = allowlist\n\
         allow-domain = api.test:8080\n\
         pass-env = ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC\n",
    );
    let api_log = w.root.join("api.log");
    std::fs::write(&api_log, "").unwrap();
    let mut api = Command::new("ip")
        .args(["netns", "exec", &l, "python3"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/fake_anthropic.py"
        ))
        .args([API_PORT])
        .arg(&api_log)
        .args(["240", "203.0.113.10"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(600));
    let setup = "rm -f /etc/resolv.conf && echo 'nameserver 10.77.0.1' > /etc/resolv.conf\n";
    let run = |who: Who, base: &str, prompt: &str| {
        let env = [
            ("ANTHROPIC_BASE_URL", base),
            ("ANTHROPIC_API_KEY", "sk-ant-test"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ];
        let cmd = w.command_with_setup(
            who,
            &w.workspace(who),
            setup,
            &env,
            &["claude", "-p", prompt],
        );
        in_netns(&lan.host, &cmd)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let mut failures = Vec::new();
    for who in BOTH {
        let prompt = format!("hello-allowlist-{who:?}");
        let o = run(who, "http://api.test:8080", &prompt);
        let logged = std::fs::read_to_string(&api_log).unwrap_or_default();
        if !o.status.success() || !stdout(&o).contains("PONG-FROM-FAKE-API") {
            failures.push(format!(
                "{who:?}: {:?}\n{}\n{}",
                o.status,
                stdout(&o),
                stderr(&o)
            ));
            continue;
        }
        assert!(
            logged.contains(&prompt),
            "{who:?}: the prompt never reached the API: {logged}"
        );
        // The proxy carried it: the session's log has the allowed request.
        let log = egress_logs(&w, who).pop().expect("a connection log");
        let lines = log_lines(&log);
        assert!(
            lines.iter().any(|x| x["host"] == "api.test"
                && x["port"] == 8080
                && x["decision"] == "allowed"
                && x["address"] == "203.0.113.10"
                && x["bytes_down"].as_u64().unwrap_or(0) > 0),
            "{who:?}: no allowed api.test line in {}: {lines:?}",
            log.display()
        );
        // Control: the same under a name not on the list is refused by the
        // proxy and never reaches the API.
        let prompt = format!("hello-refused-{who:?}");
        let o = run(who, "http://unlisted.test:8080", &prompt);
        let logged = std::fs::read_to_string(&api_log).unwrap_or_default();
        assert!(
            !logged.contains(&prompt),
            "{who:?}: an unlisted name reached the API"
        );
        assert!(
            !o.status.success() || !stdout(&o).contains("PONG"),
            "{who:?}: {}",
            stdout(&o)
        );
        let lines = log_lines(&egress_logs(&w, who).pop().unwrap());
        assert!(
            lines
                .iter()
                .any(|x| x["host"] == "unlisted.test" && x["decision"] == "refused"),
            "{who:?}: {lines:?}"
        );
    }
    let _ = api.kill();
    let _ = api.wait();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// docs/egress.md's list of Claude Code's own domains (which a unit test
/// keeps equal to the code's) names hosts the pinned binary really uses:
/// each appears in it (a `*.` entry by its suffix).
#[test]
fn claude_codes_domains_are_in_the_pinned_binary() {
    let Some(real) = real_claude() else { return };
    let pinned = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/etc/claude-code-version"
    ))
    .unwrap();
    let version = Command::new(&real).arg("--version").output().unwrap();
    assert!(
        stdout(&version).starts_with(pinned.trim()),
        "the binary at {} is not the pinned {}: {}",
        real.display(),
        pinned.trim(),
        stdout(&version)
    );
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/egress.md")).unwrap();
    let section =
        &doc[doc.find("<!-- claude-code").unwrap()..doc.find("<!-- /claude-code -->").unwrap()];
    let domains: Vec<String> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            l.split('`')
                .nth(1)
                .unwrap()
                .trim_start_matches("*.")
                .to_string()
        })
        .collect();
    assert!(domains.len() >= 4, "{domains:?}");
    for d in &domains {
        let found = Command::new("grep")
            .args(["-qaF", d])
            .arg(&real)
            .status()
            .unwrap();
        assert!(
            found.success(),
            "{d} does not appear in Claude Code {}",
            pinned.trim()
        );
    }
}
