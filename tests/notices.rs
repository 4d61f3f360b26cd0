//! The agent is told what the sandbox refused at the moment it happens
//! (issue #44, item 4): every refusal of the creation guard and every
//! request the allowlist proxy denies is a line in the session's notices
//! file, readable inside at /run/claude-sandbox/notices and writable by
//! nothing inside; the managed `PostToolUse`/`PostToolUseFailure` hook
//! (`claude-sandbox hook notices`) gives each line once, as context. The
//! file goes with the session. Real bubblewrap, as root and as a user.

mod common;
use common::*;

const NOTICES: &str = "/run/claude-sandbox/notices";
const HOOK: &str = "/usr/libexec/claude-sandbox/claude-sandbox hook notices";

/// A refused creation, the line read at once, the hostile writes to the
/// file, and the hook twice.
fn guard_script() -> String {
    format!(
        r#"
(echo 'touch MARK' > .envrc) 2>/dev/null || echo REFUSED
grep -c 'refused to write' {NOTICES} | sed 's/^/LINES /'
(echo forged >> {NOTICES}) 2>/dev/null && echo WROTE-APPEND
(: > {NOTICES}) 2>/dev/null && echo WROTE-TRUNCATE
(mv {NOTICES} /tmp/n) 2>/dev/null && echo MOVED
(rm -f {NOTICES}) 2>/dev/null; test -e {NOTICES} || echo REMOVED
echo '{{"hook_event_name":"PostToolUseFailure"}}' | {HOOK} | sed 's/^/FIRST /'
echo '{{"hook_event_name":"PostToolUse"}}' | {HOOK} | sed 's/^/SECOND /'
echo END
"#
    )
}

#[test]
fn a_refusal_is_told_to_the_agent_once_and_nothing_inside_can_forge_it() {
    if !require("notices_guard") {
        return;
    }
    let w = World::with_probe("notices");
    for who in BOTH {
        let ws = w.workspace(who);
        let o = w.run(who, &[], &["claude", "shell", &guard_script()]);
        let out = stdout(&o);
        assert!(out.contains("END"), "{who:?}: {out}\n{}", stderr(&o));
        assert!(out.contains("REFUSED"), "{who:?}: {out}");
        assert!(
            out.contains("LINES 1"),
            "{who:?}: the line was not there at once: {out}"
        );
        for forged in ["WROTE-APPEND", "WROTE-TRUNCATE", "MOVED", "REMOVED"] {
            assert!(!out.contains(forged), "{who:?}: {forged}: {out}");
        }
        let first = out
            .lines()
            .find_map(|l| l.strip_prefix("FIRST "))
            .unwrap_or_else(|| panic!("{who:?}: the hook said nothing: {out}"));
        let v: serde_json::Value = serde_json::from_str(first).unwrap();
        let ctx = v["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap();
        assert_eq!(
            v["hookSpecificOutput"]["hookEventName"],
            "PostToolUseFailure"
        );
        let envrc = ws.join(".envrc").display().to_string();
        assert!(
            ctx.contains(&format!("claude-sandbox: refused to write {envrc}"))
                && ctx.contains("the user can create it outside the sandbox"),
            "{who:?}: {ctx}"
        );
        assert!(!out.contains("SECOND"), "{who:?}: told twice: {out}");
        // The file went with the session; nothing of it is left.
        let dir = w.home(who).join(".local/state/claude-sandbox/notices");
        let left: Vec<_> = std::fs::read_dir(&dir)
            .map(|r| r.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(
            left.is_empty(),
            "{who:?}: left in {}: {left:?}",
            dir.display()
        );
        assert!(!ws.join(".envrc").exists());
    }
}

/// Allowlist mode: a request to a host not on the list.
const DENIED: &str = r#"
curl -s -o /dev/null -w 'STATUS %{http_code}\n' http://denied.test/ 
echo '{"hook_event_name":"PostToolUse"}' | /usr/libexec/claude-sandbox/claude-sandbox hook notices | sed 's/^/HOOK /'
echo END
"#;

#[test]
fn a_request_the_proxy_refuses_is_told_to_the_agent() {
    if !require("notices_proxy") {
        return;
    }
    let w = World::new("notices-proxy");
    w.install_by_hand(&w.root.join("bin/probe"), "egress = allowlist\n");
    let o = w.run(Who::User, &[], &["claude", "shell", DENIED]);
    let out = stdout(&o);
    assert!(
        out.contains("STATUS 403"),
        "control: the proxy refused: {out}\n{}",
        stderr(&o)
    );
    let hook = out
        .lines()
        .find_map(|l| l.strip_prefix("HOOK "))
        .unwrap_or_else(|| panic!("the hook said nothing: {out}"));
    let v: serde_json::Value = serde_json::from_str(hook).unwrap();
    let ctx = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(
        ctx.contains("claude-sandbox: refused a connection to denied.test:80")
            && ctx.contains("allow-domain = denied.test"),
        "{ctx}"
    );
}
