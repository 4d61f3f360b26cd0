//! The devcontainer feature (issue #6): packaging and a fresh-container install.

mod common;
use common::*;

use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `just feature`, once per test binary.
fn build_feature() -> std::path::PathBuf {
    static BUILD: std::sync::Once = std::sync::Once::new();
    BUILD.call_once(|| {
        let o = Command::new("bash")
            .arg(repo().join("devcontainer-feature/build.sh"))
            .output()
            .unwrap();
        assert!(o.status.success(), "build.sh: {}{}", stdout(&o), stderr(&o));
    });
    repo().join("target/feature-package/devcontainer-feature-claude-sandbox.tgz")
}

#[test]
fn feature_packages_with_the_official_cli_and_a_static_binary() {
    if !require("feature_package") {
        return;
    }
    let tgz = build_feature();
    assert!(tgz.exists(), "{} missing", tgz.display());
    let list = Command::new("tar").arg("tf").arg(&tgz).output().unwrap();
    let names = stdout(&list);
    for f in [
        "devcontainer-feature.json",
        "install.sh",
        "claude-sandbox-x86_64",
    ] {
        assert!(
            names.lines().any(|l| l.ends_with(f)),
            "{f} not in the package: {names}"
        );
    }
    let dir = std::env::temp_dir().join(format!("csb-feature-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    assert!(Command::new("tar")
        .arg("xf")
        .arg(&tgz)
        .arg("-C")
        .arg(&dir)
        .status()
        .unwrap()
        .success());
    let bin = dir.join("claude-sandbox-x86_64");
    let file = stdout(&Command::new("file").arg(&bin).output().unwrap());
    assert!(
        file.contains("static-pie linked") || file.contains("statically linked"),
        "{file}"
    );
    let ldd = Command::new("ldd").arg(&bin).output().unwrap();
    let ldd_out = format!("{}{}", stdout(&ldd), stderr(&ldd));
    assert!(
        ldd_out.contains("statically linked") || ldd_out.contains("not a dynamic executable"),
        "{ldd_out}"
    );
    // It runs, and the packaged metadata names every option of §3.
    assert!(Command::new(&bin)
        .arg("--version")
        .status()
        .unwrap()
        .success());
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("devcontainer-feature.json")).unwrap(),
    )
    .unwrap();
    for o in [
        "egressJail",
        "allowIp",
        "allowWrite",
        "passEnv",
        "noForge",
        "workspaceRoot",
        "claudeVersion",
        "claudeSource",
    ] {
        assert!(meta["options"][o].is_object(), "option {o} missing");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
