//! CI runs what the README tells a new user to run, in the README's order,
//! and leaves the machine it runs on as it was (issue #43): `.ci/run` runs
//! the README's first commands inside `scripts/throwaway.sh`, whose
//! overlays take every write to the system trees and are dropped at its end.

mod common;
use common::*;

use std::path::Path;
use std::process::Command;

fn repo_file(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The commands of the README's first shell block (comments dropped).
fn readme_commands(readme: &str) -> Vec<String> {
    let block = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .unwrap_or_default();
    block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// The `bash scripts/…` lines `.ci/run` hands to the throwaway namespace,
/// in order; empty when it does not run them through `scripts/throwaway.sh`.
fn ci_commands(run: &str) -> Vec<String> {
    let Some(inner) = run.split("bash scripts/throwaway.sh").nth(1) else {
        return Vec::new();
    };
    inner
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("bash scripts/"))
        .map(String::from)
        .collect()
}

#[test]
fn ci_runs_the_readme_commands_in_order_in_a_throwaway_namespace() {
    let readme = readme_commands(&repo_file("README.md"));
    assert_eq!(
        readme,
        ["bash scripts/setup.sh", "bash scripts/test.sh"],
        "the README's first commands"
    );
    assert_eq!(
        ci_commands(&repo_file(".ci/run")),
        readme,
        "what .ci/run runs"
    );
}

#[test]
fn control_a_ci_in_another_order_or_outside_the_namespace_differs() {
    let readme = readme_commands(
        "x\n```sh\n# one\nbash scripts/setup.sh\n\n# two\nbash scripts/test.sh\n```\n",
    );
    assert_eq!(readme, ["bash scripts/setup.sh", "bash scripts/test.sh"]);
    let swapped = "exec bash scripts/throwaway.sh bash -c '\nbash scripts/test.sh\nbash scripts/setup.sh\n'\n";
    assert_ne!(ci_commands(swapped), readme);
    let outside = "bash scripts/setup.sh\nbash scripts/test.sh\n";
    assert_ne!(ci_commands(outside), readme);
}

/// What a command writes to `/etc`, `/usr/local` and root's home inside
/// the throwaway namespace is gone afterwards; what it writes in its
/// working directory stays. The control: the same writes made outside
/// are there (and are removed by the test).
#[test]
fn the_throwaway_namespace_keeps_the_working_directory_and_drops_the_rest() {
    if !require("throwaway") {
        return;
    }
    let dir = TestDir::new("ci", "throwaway");
    let tag = format!("csb-throwaway-probe-{}", std::process::id());
    let places = [
        format!("/etc/{tag}"),
        format!("/usr/local/bin/{tag}"),
        format!("/root/{tag}"),
        format!("/var/lib/{tag}"),
    ];
    let script = format!(
        "set -e; for p in {}; do echo x > \"$p\"; done; echo kept > here",
        places.join(" ")
    );
    let o = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/throwaway.sh"))
        .args(["sh", "-c", &script])
        .current_dir(&*dir)
        .output()
        .unwrap();
    let left: Vec<&String> = places.iter().filter(|p| Path::new(p).exists()).collect();
    for p in &left {
        let _ = std::fs::remove_file(p);
    }
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(left.is_empty(), "written through to the machine: {left:?}");
    assert_eq!(std::fs::read_to_string(dir.join("here")).unwrap(), "kept\n");
    // Control: the same script outside writes every place.
    let o = Command::new("sh")
        .args(["-c", &script])
        .current_dir(&*dir)
        .output()
        .unwrap();
    let made = places.iter().filter(|p| Path::new(p).exists()).count();
    for p in &places {
        let _ = std::fs::remove_file(p);
    }
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(made, places.len(), "the control wrote every place");
}

#[test]
fn mount_points_are_read_with_their_escapes_undone() {
    use claude_sandbox::fuzz_targets::mountinfo::unescape as unescape_mountinfo;
    assert_eq!(
        unescape_mountinfo("/var/tmp/ci\\040run/x\\011y\\134z"),
        "/var/tmp/ci run/x\ty\\z"
    );
    assert_eq!(unescape_mountinfo("/plain/path"), "/plain/path");
    assert_eq!(unescape_mountinfo("/odd\\9x\\04"), "/odd\\9x\\04");
}
