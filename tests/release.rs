//! The release (issue #47): the version is said in one place, the
//! feature's `devcontainer-feature.json`, and `Cargo.toml` and the
//! changelog's newest entry agree with it, so what is published under a
//! tag is what the binary and the changelog say it is.

use std::path::Path;

fn repo_file(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The feature's version, `[package]`'s version in Cargo.toml, and the
/// version of the changelog's first `## ` heading; `Err` naming the file
/// that disagrees with the feature (or cannot be read).
fn versions_agree(feature: &str, cargo: &str, changelog: &str) -> Result<String, String> {
    let json: serde_json::Value =
        serde_json::from_str(feature).map_err(|e| format!("devcontainer-feature.json: {e}"))?;
    let v = json["version"]
        .as_str()
        .ok_or("devcontainer-feature.json has no version")?
        .to_string();
    let package = cargo
        .split("[package]")
        .nth(1)
        .and_then(|p| p.lines().find_map(|l| l.trim().strip_prefix("version = ")))
        .map(|q| q.trim_matches('"'))
        .ok_or("Cargo.toml has no [package] version")?;
    if package != v {
        return Err(format!("Cargo.toml says {package}, the feature {v}"));
    }
    let newest = changelog
        .lines()
        .find_map(|l| l.strip_prefix("## "))
        .and_then(|h| h.split_whitespace().next())
        .ok_or("CHANGELOG.md has no `## VERSION` entry")?;
    if newest != v {
        return Err(format!(
            "CHANGELOG.md's newest entry is {newest}, the feature {v}"
        ));
    }
    Ok(v)
}

#[test]
fn the_feature_cargo_and_the_changelog_say_one_version() {
    let v = versions_agree(
        &repo_file("devcontainer-feature/src/claude-sandbox/devcontainer-feature.json"),
        &repo_file("Cargo.toml"),
        &repo_file("CHANGELOG.md"),
    );
    assert!(v.is_ok(), "{v:?}");
}

#[test]
fn control_a_version_bumped_in_one_place_only_is_caught() {
    let feature = r#"{ "id": "claude-sandbox", "version": "0.4.0" }"#;
    let cargo = "[package]\nname = \"x\"\nversion = \"0.3.0\"\n";
    let changelog = "# Changelog\n\n## 0.4.0 — unreleased\n";
    assert_eq!(
        versions_agree(feature, cargo, changelog),
        Err("Cargo.toml says 0.3.0, the feature 0.4.0".into())
    );
    let cargo = cargo.replace("0.3.0", "0.4.0");
    assert_eq!(
        versions_agree(feature, &cargo, changelog),
        Ok("0.4.0".into())
    );
    assert_eq!(
        versions_agree(feature, &cargo, "# Changelog\n\n## 0.3.0\n"),
        Err("CHANGELOG.md's newest entry is 0.3.0, the feature 0.4.0".into())
    );
    // A dependency's version line is not the package's.
    let deps_first = "[dependencies]\nversion = \"0.4.0\"\n[package]\nversion = \"0.3.0\"\n";
    assert!(versions_agree(feature, deps_first, changelog).is_err());
}
