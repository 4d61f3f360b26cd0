//! The hook's side: the lines added since the hook last ran, and the JSON
//! that gives them to Claude Code as context for the tool call.

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::libc;

/// The most context one tool call gets; past it, a count of the rest.
const MAX_CONTEXT: usize = 4000;

/// The complete lines of `notices` past offset `seen` (0 where `seen` is
/// past its end: a new file), and the offset to remember.
fn unseen(notices: &[u8], seen: u64) -> (Vec<String>, u64) {
    let start = if seen as usize > notices.len() {
        0
    } else {
        seen as usize
    };
    let rest = &notices[start..];
    let whole = rest.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let lines = String::from_utf8_lossy(&rest[..whole])
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    (lines, (start + whole) as u64)
}

/// The hook's output for `event` (`PostToolUse` or `PostToolUseFailure`)
/// carrying `lines`, or None when there are none.
pub(crate) fn hook_json(event: &str, lines: &[String]) -> Option<String> {
    if lines.is_empty() {
        return None;
    }
    let mut text = String::new();
    let mut shown = 0;
    for l in lines {
        if text.len() + l.len() + 1 > MAX_CONTEXT {
            break;
        }
        text.push_str(l);
        text.push('\n');
        shown += 1;
    }
    if shown < lines.len() {
        text.push_str(&format!(
            "claude-sandbox: and {} more refusal(s) like these\n",
            lines.len() - shown
        ));
    }
    let event = match event {
        "PostToolUseFailure" => "PostToolUseFailure",
        _ => "PostToolUse",
    };
    Some(
        serde_json::json!({
            "hookSpecificOutput": { "hookEventName": event, "additionalContext": text.trim_end() }
        })
        .to_string(),
    )
}

/// The lines of the notices file at `notices` not yet given, remembering
/// the offset in `state` (a file in the sandbox's private `/tmp`, under a
/// lock: hooks of tool calls run at once take each line once). None when
/// there is no notices file (outside the sandbox) or nothing new.
pub(crate) fn take_unseen(notices: &Path, state: &Path) -> Option<Vec<String>> {
    let mut text = Vec::new();
    std::fs::File::open(notices)
        .ok()?
        .take(2 << 20)
        .read_to_end(&mut text)
        .ok()?;
    let mut st = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(state)
        .ok()?;
    nix::fcntl::Flock::lock(st.try_clone().ok()?, nix::fcntl::FlockArg::LockExclusive).ok()?;
    let mut old = String::new();
    st.read_to_string(&mut old).ok()?;
    let (lines, at) = unseen(&text, old.trim().parse().unwrap_or(0));
    st.seek(SeekFrom::Start(0)).ok()?;
    st.set_len(0).ok()?;
    st.write_all(at.to_string().as_bytes()).ok()?;
    (!lines.is_empty()).then_some(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_new_complete_lines_are_given_once() {
        let t = b"a\nb\npart";
        let (l, at) = unseen(t, 0);
        assert_eq!((l, at), (vec!["a".to_string(), "b".to_string()], 4));
        let (l, at2) = unseen(b"a\nb\npartial done\n", at);
        assert_eq!((l, at2), (vec!["partial done".to_string()], 17));
        assert_eq!(unseen(b"a\nb\npartial done\n", at2).0, Vec::<String>::new());
        // An offset past the end: a new file, read from its start.
        assert_eq!(unseen(b"new\n", 99).0, vec!["new".to_string()]);
    }

    #[test]
    fn the_context_names_the_event_and_stays_bounded() {
        assert_eq!(hook_json("PostToolUse", &[]), None);
        let v: serde_json::Value =
            serde_json::from_str(&hook_json("PostToolUseFailure", &["x".into()]).unwrap()).unwrap();
        assert_eq!(
            v["hookSpecificOutput"]["hookEventName"],
            "PostToolUseFailure"
        );
        assert_eq!(v["hookSpecificOutput"]["additionalContext"], "x");
        let many: Vec<String> = (0..500)
            .map(|i| format!("line {i} {}", "y".repeat(40)))
            .collect();
        let v: serde_json::Value =
            serde_json::from_str(&hook_json("Other", &many).unwrap()).unwrap();
        let ctx = v["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap();
        assert!(ctx.len() < MAX_CONTEXT + 100, "{}", ctx.len());
        assert!(ctx.ends_with("more refusal(s) like these"), "{ctx}");
        assert_eq!(v["hookSpecificOutput"]["hookEventName"], "PostToolUse");
    }

    #[test]
    fn the_hook_takes_each_line_once() {
        let d = std::env::temp_dir().join(format!("csb-notices-hook-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let (n, s) = (d.join("notices"), d.join("seen"));
        assert_eq!(take_unseen(&n, &s), None, "no file: outside the sandbox");
        std::fs::write(&n, "one\n").unwrap();
        assert_eq!(take_unseen(&n, &s), Some(vec!["one".to_string()]));
        assert_eq!(take_unseen(&n, &s), None);
        std::fs::write(&n, "one\ntwo\n").unwrap();
        assert_eq!(take_unseen(&n, &s), Some(vec!["two".to_string()]));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
