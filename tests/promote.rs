//! `claude-sandbox promote` on real directories (issue #6).

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

fn promote(dir: &Path) -> std::process::Output {
    Command::new(our_binary())
        .arg("promote")
        .arg(dir)
        .output()
        .unwrap()
}

fn workspace(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("csb-promote-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The feature reference promote writes: this version's major tag, which
/// `devcontainer features publish` pushes (tests/release.rs).
const FEATURE: &str = concat!(
    "ghcr.io/claude-sandbox/claude-sandbox/claude-sandbox:",
    env!("CARGO_PKG_VERSION_MAJOR")
);

const TEAM_FILE: &str = r#"// Team container: keep these comments.
{
  "name": "app", /* why: naming */
  "image": "mcr.microsoft.com/devcontainers/base:bookworm",
  "features": {
    // node for the frontend
    "ghcr.io/devcontainers/features/node:1": {},
  },
}
"#;

#[test]
fn existing_file_gains_exactly_our_entry() {
    let ws = workspace("existing");
    std::fs::create_dir_all(ws.join(".devcontainer")).unwrap();
    std::fs::write(ws.join(".devcontainer/devcontainer.json"), TEAM_FILE).unwrap();
    let o = promote(&ws);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(ws.join(".devcontainer/devcontainer.json")).unwrap();
    for line in TEAM_FILE.lines() {
        assert!(text.contains(line), "lost line {line:?}:\n{text}");
    }
    assert_eq!(text.matches(FEATURE).count(), 1, "{text}");
    // No runArgs: the feature's metadata and entrypoint need none (issue #26).
    assert!(!text.contains("runArgs"), "{text}");
    assert_eq!(
        std::fs::read_to_string(ws.join(".claude/commands/verify-sandbox.md")).unwrap(),
        std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/.claude/commands/verify-sandbox.md"
        ))
        .unwrap()
    );
    // A second promote changes no byte.
    let o = promote(&ws);
    assert!(stdout(&o).contains("nothing changed"), "{}", stdout(&o));
    assert_eq!(
        std::fs::read_to_string(ws.join(".devcontainer/devcontainer.json")).unwrap(),
        text
    );
    std::fs::remove_dir_all(&ws).unwrap();
}

#[test]
fn fresh_workspace_gets_a_minimal_file() {
    let ws = workspace("fresh");
    assert!(promote(&ws).status.success());
    let text = std::fs::read_to_string(ws.join(".devcontainer/devcontainer.json")).unwrap();
    assert!(
        text.contains(FEATURE) && !text.contains("runArgs"),
        "{text}"
    );
    std::fs::remove_dir_all(&ws).unwrap();
}

#[test]
fn an_existing_run_args_is_left_exactly_as_it_was() {
    // An older promote's tun device stays (removing it is the user's call),
    // and one without it gains none.
    for (name, run_args) in [
        ("oldtun", r#"["--init", "--device=/dev/net/tun"]"#),
        ("notun", r#"["--init"]"#),
    ] {
        let ws = workspace(name);
        std::fs::create_dir_all(ws.join(".devcontainer")).unwrap();
        let team = format!(
            "{{\n  // ours\n  \"runArgs\": {run_args},\n  \"image\": \"debian:bookworm\"\n}}\n"
        );
        std::fs::write(ws.join(".devcontainer/devcontainer.json"), &team).unwrap();
        let o = promote(&ws);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stdout(&o).contains("added the claude-sandbox feature to"),
            "{}",
            stdout(&o)
        );
        let text = std::fs::read_to_string(ws.join(".devcontainer/devcontainer.json")).unwrap();
        assert!(
            text.contains(&format!("  \"runArgs\": {run_args},\n")),
            "{name}: runArgs changed:\n{text}"
        );
        assert_eq!(
            text.matches("--device=/dev/net/tun").count(),
            team.matches("--device=/dev/net/tun").count(),
            "{name}:\n{text}"
        );
        assert!(text.contains(FEATURE), "{text}");
        std::fs::remove_dir_all(&ws).unwrap();
    }
}

#[test]
fn unparseable_file_is_left_untouched_with_a_clear_error() {
    let ws = workspace("broken");
    std::fs::create_dir_all(ws.join(".devcontainer")).unwrap();
    let broken = "{\n  \"name\": \"app\"\n  \"image\": \"x\"\n}\n";
    std::fs::write(ws.join(".devcontainer/devcontainer.json"), broken).unwrap();
    let o = promote(&ws);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("devcontainer.json:3"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(ws.join(".devcontainer/devcontainer.json")).unwrap(),
        broken
    );
    std::fs::remove_dir_all(&ws).unwrap();
}

#[test]
fn refuses_a_file_and_this_repository() {
    let ws = workspace("file");
    std::fs::write(ws.join("plain"), "x").unwrap();
    let o = promote(&ws.join("plain"));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a directory"));
    let o = promote(Path::new(env!("CARGO_MANIFEST_DIR")));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("repository itself"), "{}", stderr(&o));
    std::fs::remove_dir_all(&ws).unwrap();
}

#[test]
fn a_top_level_devcontainer_json_is_edited_not_shadowed() {
    let ws = workspace("toplevel");
    let team = "{\n  // ours\n  \"image\": \"debian:bookworm\",\n}\n";
    std::fs::write(ws.join(".devcontainer.json"), team).unwrap();
    let o = promote(&ws);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !ws.join(".devcontainer/devcontainer.json").exists(),
        "promote created .devcontainer/devcontainer.json, which would take precedence over the team's .devcontainer.json"
    );
    let text = std::fs::read_to_string(ws.join(".devcontainer.json")).unwrap();
    assert!(
        text.contains("// ours") && text.contains("debian:bookworm"),
        "{text}"
    );
    assert!(
        text.contains(FEATURE) && !text.contains("runArgs"),
        "{text}"
    );
    assert!(stdout(&promote(&ws)).contains("nothing changed"));
    std::fs::remove_dir_all(&ws).unwrap();
}
