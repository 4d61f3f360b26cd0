//! The release (issue #47). The version is said in one place, the
//! feature's `devcontainer-feature.json`, and `Cargo.toml` and the
//! changelog's newest entry agree with it, so what is published under a
//! tag is what the binary and the changelog say it is. The release
//! workflow publishes with devcontainer-feature/publish.sh, and so does the
//! release rehearsal (`just release-rehearsal`): the feature published to a
//! local OCI registry and consumed from it as a user does, on Docker and on
//! rootless Podman, then upgraded to the next version
//! (docs/decisions/0035-release-rehearsal.md).

mod common;
use common::devcontainer::*;
use common::registry::{Registry, Serving, ADDR};
use common::{docker, podman, stderr, stdout};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

fn repo_file(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
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

/// The tags `devcontainer features publish` pushes for `version`.
fn published_tags(version: &str) -> Vec<String> {
    let mut parts = version.split('.');
    let major = parts.next().unwrap_or_default();
    let minor = parts.next().unwrap_or_default();
    vec![
        major.to_string(),
        format!("{major}.{minor}"),
        version.to_string(),
        "latest".to_string(),
    ]
}

/// Every `…/claude-sandbox/claude-sandbox:TAG` in `text` whose TAG is not
/// one of `tags`, as the reference written.
fn unpublished_refs(text: &str, tags: &[String]) -> Vec<String> {
    const REF: &str = "ghcr.io/claude-sandbox/claude-sandbox/claude-sandbox:";
    text.match_indices(REF)
        .map(|(i, _)| {
            let tag: String = text[i + REF.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
                .collect();
            tag
        })
        .filter(|tag| !tags.contains(tag))
        .map(|tag| format!("{REF}{tag}"))
        .collect()
}

/// What users copy (README, docs, examples) names the feature by a tag
/// the release actually pushes: `:1` for a 0.x
/// version would never resolve.
#[test]
fn every_feature_reference_names_a_published_tag() {
    let feature = repo_file("devcontainer-feature/src/claude-sandbox/devcontainer-feature.json");
    let json: serde_json::Value = serde_json::from_str(&feature).unwrap();
    let tags = published_tags(json["version"].as_str().unwrap());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // (promote's own reference is this version's major tag by construction,
    // and tests/promote.rs reads what it writes.)
    let mut files = vec![root.join("README.md")];
    for dir in ["docs", "examples"] {
        let Ok(rd) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        files.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_file()));
    }
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for r in unpublished_refs(&text, &tags) {
            bad.push(format!("{}: {r}", f.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "not a tag the release pushes ({tags:?}): {bad:?}"
    );
    // Control: the scan finds a major tag the version does not have.
    let wrong = "\"ghcr.io/claude-sandbox/claude-sandbox/claude-sandbox:9\": {}";
    assert_eq!(unpublished_refs(wrong, &tags).len(), 1);
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

/// The workflow's publishing step is `devcontainer-feature/publish.sh`
/// (the script the rehearsal runs) and nothing publishes another way:
/// neither `devcontainers/action` nor a `features publish` of its own.
fn workflow_runs_the_script(workflow: &str) -> Result<(), String> {
    let mut runs_script = false;
    for line in workflow.lines() {
        let t = line.trim().trim_start_matches("- ").trim();
        if t.starts_with('#') {
            continue;
        }
        if t.starts_with("uses:") && t.contains("devcontainers/action") {
            return Err(format!("the workflow publishes with `{t}`, not {PUBLISH}"));
        }
        if t.contains("features publish") || t.contains("features package") {
            return Err(format!("the workflow packages by itself: `{t}`"));
        }
        runs_script |= t.starts_with("run:") && t.contains(PUBLISH);
    }
    if runs_script {
        Ok(())
    } else {
        Err(format!("the workflow has no `run:` step calling {PUBLISH}"))
    }
}

/// The packaging script the workflow and the rehearsal share.
const PUBLISH: &str = "devcontainer-feature/publish.sh";

#[test]
fn the_workflow_publishes_with_the_rehearsed_script() {
    let wf = repo_file(".github/workflows/publish-feature.yml");
    assert_eq!(workflow_runs_the_script(&wf), Ok(()));
    assert!(repo_file(PUBLISH).contains("features publish --registry"));
}

#[test]
fn control_a_workflow_publishing_another_way_is_caught() {
    let ours = "      - run: bash devcontainer-feature/publish.sh ghcr.io \"$R\"\n";
    assert_eq!(workflow_runs_the_script(ours), Ok(()));
    let action = format!("{ours}      - uses: devcontainers/action@v1\n");
    assert!(workflow_runs_the_script(&action).is_err());
    let own = "      - run: devcontainer features publish -r ghcr.io -n x ./src\n";
    assert!(workflow_runs_the_script(own).is_err());
    // Named only in a comment, the script does not run.
    let comment = "      # run: bash devcontainer-feature/publish.sh\n";
    assert!(workflow_runs_the_script(comment).is_err());
}

/// publish.sh refuses a feature without both static binaries, and one
/// whose binary is not a static ELF of its architecture, before it runs
/// the CLI (here `false`, which would fail differently) or contacts any
/// registry. The control: the rehearsal publishes with both staged.
#[test]
fn publish_refuses_a_feature_missing_an_architecture() {
    let dir = common::TestDir::new("release", "onearch");
    let src = dir.join("src");
    let f = src.join("claude-sandbox");
    std::fs::create_dir_all(&src).unwrap();
    copy_tree(&repo().join("devcontainer-feature/src/claude-sandbox"), &f);
    let run = || {
        Command::new("bash")
            .arg(repo().join(PUBLISH))
            .args(["registry.invalid", "x/y"])
            .arg(&src)
            .env("DEVCONTAINER_CLI", "/bin/false")
            .output()
            .unwrap()
    };
    for arch in ["x86_64", "aarch64"] {
        let _ = std::fs::remove_file(f.join(format!("claude-sandbox-{arch}")));
    }
    let o = run();
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stderr(&o).contains("claude-sandbox-x86_64 is missing"),
        "{}",
        stderr(&o)
    );
    // A shell script in a binary's place: not a static x86-64 ELF.
    let fake = f.join("claude-sandbox-x86_64");
    std::fs::write(&fake, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = run();
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stderr(&o).contains("claude-sandbox-x86_64 is not a static x86-64 binary"),
        "{}",
        stderr(&o)
    );
}

/// Where the rehearsal publishes, as the workflow does under ghcr.io
/// (`NAMESPACE` is the workflow's `github.repository`).
const NAMESPACE: &str = "claude-sandbox/claude-sandbox";

/// The registry's repository of the feature.
fn feature_repo() -> String {
    format!("{NAMESPACE}/claude-sandbox")
}

/// The feature's reference in devcontainer.json: `tail` is `:TAG` or
/// `@sha256:…`.
fn reference(tail: &str) -> String {
    format!("{ADDR}/{}{tail}", feature_repo())
}

/// [`registry_workspace`] `name` under `parent` for `user`, naming the
/// feature by `tail` (see [`reference`]) with [`options`].
fn user_workspace(parent: &Path, name: &str, user: Option<&str>, tail: &str) -> PathBuf {
    registry_workspace(parent, name, user, &reference(tail), options())
}

/// The options of every workspace: the base image carries the real Claude
/// Code (no npm registry inside the engines' networks).
fn options() -> serde_json::Value {
    serde_json::json!({ "claudeSource": "existing" })
}

/// The collection to publish, at `dir/src`: the repo's feature with both
/// binaries build.sh staged, `installsAfter` removed (it names ghcr.io
/// features the CLI looks up, unreachable here; the one difference from
/// what the workflow publishes, decision 0035).
fn stage(dir: &Path) -> PathBuf {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    offline_feature_copy(&src.join("claude-sandbox"));
    src
}

/// The next version, N+1, in a copy of the collection `src` at `dir/src`:
/// its version's patch bumped, each binary with a trailer appended (an ELF
/// runs as before; the bytes differ, so the upgrade's binary can be told
/// from N's). The repo is not touched. Returns the copy and the version.
fn next_version(src: &Path, dir: &Path) -> (PathBuf, String) {
    let next = dir.join("src");
    std::fs::create_dir_all(dir).unwrap();
    copy_tree(src, &next);
    let mut v1 = String::new();
    edit_json(
        &next.join("claude-sandbox/devcontainer-feature.json"),
        |meta| {
            let v = meta["version"].as_str().unwrap();
            let mut parts: Vec<u64> = v.split('.').map(|p| p.parse().unwrap()).collect();
            parts[2] += 1;
            v1 = format!("{}.{}.{}", parts[0], parts[1], parts[2]);
            meta["version"] = v1.clone().into();
        },
    );
    for arch in ["x86_64", "aarch64"] {
        let bin = next.join(format!("claude-sandbox/claude-sandbox-{arch}"));
        let mut bytes = std::fs::read(&bin).unwrap();
        bytes.extend_from_slice(format!("\nclaude-sandbox release rehearsal {v1}\n").as_bytes());
        std::fs::write(&bin, bytes).unwrap();
    }
    (next, v1)
}

/// publish.sh for the collection `src` to the registry serving in the
/// network namespace `netns`.
fn publish(netns: &Path, src: &Path) {
    let o = Command::new("nsenter")
        .arg(format!("--net={}", netns.display()))
        .arg("bash")
        .arg(repo().join(PUBLISH))
        .args([ADDR, NAMESPACE])
        .arg(src)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{PUBLISH} {ADDR} {NAMESPACE}:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
}

fn sha256_file(path: &Path) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the registry holds after publishing version `v` of the collection
/// `src`: the tags a user references (:MAJOR, :MAJOR.MINOR, :VERSION and
/// :latest, all one manifest), and in its tarball both static binaries,
/// byte for byte the staged ones, beside install.sh and the metadata.
/// Returns the manifest's digest.
fn published(serving: &Serving, v: &str, src: &Path, unpack_to: &Path) -> String {
    let repo = feature_repo();
    let major = v.split('.').next().unwrap();
    let minor = v.rsplit_once('.').unwrap().0;
    let tags = serving.tags(&repo);
    for t in [major, minor, v, "latest"] {
        assert!(tags.iter().any(|x| x == t), "tag {t} not in {tags:?}");
    }
    let (_, digest) = serving.manifest(&repo, v);
    for t in [major, minor, "latest"] {
        assert_eq!(serving.manifest(&repo, t).1, digest, ":{t} is not :{v}");
    }
    serving.unpack(&repo, v, unpack_to);
    let staged = src.join("claude-sandbox");
    for (arch, elf) in [("x86_64", "x86-64"), ("aarch64", "ARM aarch64")] {
        let name = format!("claude-sandbox-{arch}");
        let got = unpack_to.join(&name);
        assert_eq!(
            sha256_file(&got),
            sha256_file(&staged.join(&name)),
            "{name}"
        );
        let o = Command::new("file").arg("-b").arg(&got).output().unwrap();
        let desc = stdout(&o);
        let is_static = desc.contains("statically linked") || desc.contains("static-pie linked");
        assert!(desc.contains(elf) && is_static, "{name}: {desc}");
    }
    for f in ["install.sh", "devcontainer-feature.json"] {
        assert_eq!(
            sha256_file(&unpack_to.join(f)),
            sha256_file(&staged.join(f)),
            "{f}"
        );
    }
    digest
}

/// What the feature installed in a container, read as root by `run` (a
/// shell script run in the container).
#[derive(Debug)]
struct Installed {
    /// SHA-256 and size of /usr/libexec/claude-sandbox/claude-sandbox.
    binary: (String, u64),
    /// /usr/libexec/claude-sandbox/claude.pin, and when it was written
    /// (its ctime).
    pin: (String, String),
    /// The SHA-256 of the real binary, /usr/libexec/claude-sandbox/claude.
    real: String,
    /// /etc/claude-sandbox.conf without its comments.
    conf: String,
    /// The paths install's manifest says it created.
    created: Vec<String>,
}

const SELF: &str = "/usr/libexec/claude-sandbox/claude-sandbox";

fn installed(run: &dyn Fn(&str) -> Output) -> Installed {
    let o = run(&format!(
        "set -e; sha256sum {SELF} | cut -d' ' -f1; stat -c %s {SELF}; \
         grep -v '^#' /etc/claude-sandbox.conf | tr '\\n' ';'; echo; \
         stat -c %z /usr/libexec/claude-sandbox/claude.pin; \
         sha256sum /usr/libexec/claude-sandbox/claude | cut -d' ' -f1; \
         cat /usr/libexec/claude-sandbox/claude.pin"
    ));
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let text = stdout(&o);
    let mut lines = text.splitn(6, '\n');
    let mut next = || lines.next().unwrap_or_default().to_string();
    let (sha, size, conf) = (next(), next(), next());
    let (written, real, pin) = (next(), next(), next());
    let m = run("cat /usr/libexec/claude-sandbox/install-manifest.json");
    let manifest: serde_json::Value =
        serde_json::from_str(&stdout(&m)).expect("install's manifest");
    let mut created: Vec<String> = manifest["created"]
        .as_array()
        .expect("the manifest's created")
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    created.sort();
    Installed {
        binary: (sha, size.trim().parse().unwrap()),
        pin: (pin, written),
        real,
        conf,
        created,
    }
}

/// The files on the container's root filesystem that are byte for byte
/// `binary` (found by size first, then hashed), by `run`.
fn copies_of(run: &dyn Fn(&str) -> Output, binary: &(String, u64)) -> Vec<String> {
    let o = run(&format!(
        "find / -xdev -path /workspaces -prune -o -type f -size {}c -print0 | xargs -0 -r sha256sum",
        binary.1
    ));
    stdout(&o)
        .lines()
        .filter(|l| l.starts_with(&binary.0))
        .map(String::from)
        .collect()
}

/// The version and the resolved reference (`…@sha256:…`) the CLI's
/// lockfile (.devcontainer/devcontainer-lock.json) of workspace `ws` pins
/// the feature to.
fn locked(ws: &Path) -> (String, String) {
    let path = ws.join(".devcontainer/devcontainer-lock.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let lock: serde_json::Value = serde_json::from_str(&text).unwrap();
    let features = lock["features"]
        .as_object()
        .expect("the lockfile's features");
    assert_eq!(features.len(), 1, "{text}");
    let f = features.values().next().unwrap();
    let field = |k: &str| {
        f[k].as_str()
            .unwrap_or_else(|| panic!("{k} in {text}"))
            .to_string()
    };
    (field("version"), field("resolved"))
}

/// `devcontainer upgrade` in workspace `ws`, whose lockfile pinned N
/// (`lock_n`, as [`locked`] reads it; the CLI 0.87 and later writes it at
/// `up`, and a rebuild honours it): the lockfile now pins N+1, `(version,
/// digest)`.
fn lock_moved_on(engine: &docker::Engine, ws: &Path, lock_n: &(String, String), n1: (&str, &str)) {
    let wsf = ws.display().to_string();
    let o = engine.devcontainer(&["upgrade", "--workspace-folder", &wsf]);
    assert!(
        o.status.success(),
        "devcontainer upgrade:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    let lock_n1 = locked(ws);
    assert_eq!(lock_n1.0, n1.0, "the lockfile after `devcontainer upgrade`");
    assert!(lock_n1.1.ends_with(&format!("@{}", n1.1)), "{lock_n1:?}");
    assert_ne!(lock_n.1, lock_n1.1);
}

/// The user's options in `ws`'s devcontainer.json changed (the feature
/// line stays), then [`rebuilt`].
fn rebuilt_with_new_options(engine: &docker::Engine, ws: &Path, old_id: &str) -> String {
    let opts = serde_json::json!({ "claudeSource": "existing", "pidsLimit": "512", "privateStateMax": "2G" });
    edit_json(&ws.join(".devcontainer/devcontainer.json"), |dc| {
        for v in dc["features"].as_object_mut().unwrap().values_mut() {
            *v = opts.clone();
        }
    });
    rebuilt(engine, ws, old_id)
}

/// `devcontainer up --remove-existing-container` in `ws`: the container
/// `old_id` is gone. Returns the new container's id.
fn rebuilt(engine: &docker::Engine, ws: &Path, old_id: &str) -> String {
    let wsf = ws.display().to_string();
    let o = engine.devcontainer(&[
        "up",
        "--workspace-folder",
        &wsf,
        "--remove-existing-container",
    ]);
    assert!(
        o.status.success() && stdout(&o).contains("\"outcome\":\"success\""),
        "devcontainer up after N+1:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    let gone = stdout(&engine.docker(&[
        "ps",
        "-aq",
        "--no-trunc",
        "--filter",
        &format!("id={old_id}"),
    ]));
    assert!(gone.trim().is_empty(), "N's container is still there");
    let label = format!("label=devcontainer.local_folder={wsf}");
    stdout(&engine.docker(&["ps", "-q", "--filter", &label]))
        .trim()
        .to_string()
}

/// The upgrade from N to N+1 on `engine` (issue #47 item 3): the container
/// `old_id` of `ws` (remoteUser `who`), up from `:MAJOR` with version N,
/// then N+1 published (from [`next_version`]); a rebuild still installs N
/// (the workspace's lockfile pins it), then the lockfile is
/// moved on to N+1 by `devcontainer upgrade`, the user's options changed
/// in devcontainer.json, and the container rebuilt by `devcontainer up
/// --remove-existing-container`: N+1's binary is in place, the pin is
/// new and holds (`claude` launches, doctor is clean), the config says the
/// new options, install created the same places, and no copy of N's binary
/// is left.
fn upgrade(
    engine: &docker::Engine,
    serving: &Serving,
    src: &Path,
    (ws, who): (&Path, &str),
    old_id: &str,
    expected: &str,
) {
    let run_in = |id: &str, s: &str| engine.docker(&["exec", id, "bash", "-c", s]);
    let old = installed(&|s| run_in(old_id, s));
    // The control: the search finds N's binary where it is.
    assert!(
        !copies_of(&|s| run_in(old_id, s), &old.binary).is_empty(),
        "N's binary not found"
    );
    let (next, v1) = next_version(src, &engine.dir.join("next"));
    let lock_n = locked(ws);
    publish(&engine.netns(), &next);
    let digest = published(serving, &v1, &next, &engine.dir.join("next-unpacked"));
    // A rebuild before `devcontainer upgrade` installs N again.
    let still_n = rebuilt(engine, ws, old_id);
    let again = installed(&|s| run_in(&still_n, s));
    assert_eq!(
        again.binary, old.binary,
        "the lockfile keeps N at a rebuild"
    );
    lock_moved_on(engine, ws, &lock_n, (&v1, &digest));
    let new_bin = next.join(format!(
        "claude-sandbox/claude-sandbox-{}",
        std::env::consts::ARCH
    ));
    let id = rebuilt_with_new_options(engine, ws, &still_n);
    let new = installed(&|s| run_in(&id, s));
    eprintln!("upgrade {v1}: before {old:?}\nafter {new:?}");
    assert_eq!(new.binary.0, sha256_file(&new_bin), "N+1's binary in place");
    assert_ne!(new.binary.0, old.binary.0);
    // The pin, written anew by N+1's install, of the real binary there
    // (every launch below checks it).
    assert_ne!(new.pin.1, old.pin.1, "the pin written again");
    assert!(
        new.pin.0.contains(&format!("\"sha256\": \"{}\"", new.real)),
        "{new:?}"
    );
    assert_eq!(old.conf, "", "N's config: the defaults");
    assert_eq!(new.conf, "pids-limit = 512;private-state-max = 2G;");
    assert_eq!(new.created, old.created, "install created the same places");
    assert!(
        copies_of(&|s| run_in(&id, s), &old.binary).is_empty(),
        "N's binary left behind"
    );
    let wsf = ws.display().to_string();
    let exec = |script: &str| {
        engine.devcontainer(&["exec", "--workspace-folder", &wsf, "bash", "-lc", script])
    };
    a_user_notices(
        &exec,
        &ws.file_name().unwrap().to_string_lossy(),
        who,
        expected,
    );
}

/// Everything the rehearsal needs: the engines' (tests/docker.rs's and
/// tests/podman.rs's), the registry, curl and file.
fn rehearsal_prerequisites() -> Option<PathBuf> {
    docker::docker_prerequisites()?;
    podman::podman_prerequisites()?;
    prerequisites(
        "release_rehearsal",
        &["docker-registry", "curl", "file", "nsenter"],
        &["/usr/bin", "/bin"],
        "docker-registry, curl and file",
    )
}

/// The SHA-256 of the feature's binary in container `id`, by `engine`.
fn binary_in(engine: &dyn Fn(&[&str]) -> Output, id: &str) -> String {
    let o = engine(&["exec", id, "sha256sum", SELF]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o).split_whitespace().next().unwrap().to_string()
}

/// Processes and mounts that name one of `dirs` (the test's registry,
/// engine and host directories), and processes in `cgroup` (the Docker
/// engine's containers): none may outlive the test.
fn leftovers(dirs: &[String], cgroup: &str) -> Vec<String> {
    let mut left = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.chars().all(|c| c.is_ascii_digit()) || name == std::process::id().to_string() {
            continue;
        }
        let cmd =
            String::from_utf8_lossy(&std::fs::read(e.path().join("cmdline")).unwrap_or_default())
                .replace('\0', " ");
        let cg = std::fs::read_to_string(e.path().join("cgroup")).unwrap_or_default();
        if dirs.iter().any(|d| cmd.contains(d.as_str())) || cg.contains(cgroup) {
            left.push(format!("process {name}: {cmd}"));
        }
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    for l in mounts
        .lines()
        .filter(|l| dirs.iter().any(|d| l.contains(d.as_str())))
    {
        left.push(format!("mount: {l}"));
    }
    left
}

/// The release rehearsal (issue #47): both static binaries built
/// (build.sh), version N published with publish.sh to a local registry,
/// and consumed as a user does, by a devcontainer.json whose one feature
/// line is the registry reference, with `devcontainer up`: on Docker as
/// root by the full version (jail probe) and as the remote user by the
/// major tag, which is then upgraded to N+1; on rootless Podman as root
/// by N's digest (still N after N+1 is out; jail probe) and as the remote
/// user by the major tag (now N+1). The registry, the engines and their
/// containers are the test's, and nothing of them is left.
#[test]
fn release_rehearsal_published_feature_on_docker_and_rootless_podman() {
    let Some(real) = rehearsal_prerequisites() else {
        return;
    };
    let t0 = Instant::now();
    let before = podman::machine_state();
    let v = versions_agree(
        &repo_file("devcontainer-feature/src/claude-sandbox/devcontainer-feature.json"),
        &repo_file("Cargo.toml"),
        &repo_file("CHANGELOG.md"),
    )
    .expect("one version in the feature, Cargo.toml and CHANGELOG.md");
    build_feature();
    let registry = Registry::new();
    let mut r = Rehearsal {
        src: stage(&registry.dir.join("n")),
        expected: stdout(&Command::new(&real).arg("--version").output().unwrap())
            .trim()
            .to_string(),
        major: v.split('.').next().unwrap().to_string(),
        v,
        dirs: vec![registry.dir.display().to_string()],
        registry,
        real,
    };
    let t_build = t0.elapsed();
    let (digest, cgroup) = on_docker(&mut r);
    let t_docker = t0.elapsed();
    on_podman(&mut r, &digest);
    let t_podman = t0.elapsed();

    let Rehearsal { registry, dirs, .. } = r;
    drop(registry);
    let left = leftovers(&dirs, &cgroup);
    assert!(left.is_empty(), "left behind: {left:#?}");
    for d in &dirs {
        assert!(!Path::new(d).exists(), "{d} left behind");
    }
    assert_eq!(podman::machine_state(), before, "the machine changed");
    eprintln!(
        "release rehearsal: build {t_build:.1?}, docker (publish, two `up`s, jail, upgrade) {:.1?}, podman {:.1?}, total {:.1?}",
        t_docker - t_build,
        t_podman - t_docker,
        t0.elapsed()
    );
}

/// What the rehearsal's parts share.
struct Rehearsal {
    registry: Registry,
    /// Version N's collection ([`stage`]).
    src: PathBuf,
    /// N, and its major version.
    v: String,
    major: String,
    /// The real Claude Code, and what its `--version` prints.
    real: PathBuf,
    expected: String,
    /// The registry's, the engine's and the host's directories, for the
    /// scan of what is left ([`leftovers`]).
    dirs: Vec<String>,
}

/// The Docker part: N published, brought up as root by `:VERSION` (jail
/// probe) and as the remote user by `:MAJOR` (locked to N's digest), the
/// scan's control, then the upgrade to N+1 ([`upgrade`]). Everything of
/// the engine ends with it. Returns N's digest and the engine's cgroup.
fn on_docker(r: &mut Rehearsal) -> (String, String) {
    let (v, major, expected) = (&r.v, &r.major, &r.expected);
    let engine = docker::Engine::start();
    r.dirs.push(engine.dir.display().to_string());
    let serving = r.registry.serve(&engine.netns());
    publish(&engine.netns(), &r.src);
    let digest = published(&serving, v, &r.src, &r.registry.dir.join("n-unpacked"));
    docker::import_image(&engine, &r.real);
    let root_ws = user_workspace(&engine.dir, "versionws", None, &format!(":{v}"));
    let root_id = docker::up_and_check(&engine, &root_ws, None, expected);
    let user_ws = user_workspace(&engine.dir, "majorws", Some("vscode"), &format!(":{major}"));
    let user_id = docker::up_and_check(&engine, &user_ws, Some("vscode"), expected);
    let n_locked = (v.clone(), reference(&format!("@{digest}")));
    assert_eq!(locked(&user_ws), n_locked, ":{major} locked to N");
    docker::jail_probe(&engine, &root_id, &root_ws);
    // The control of the scan at the end: it sees the registry, the engine
    // and its containers while they run.
    let running = leftovers(&r.dirs, &engine.cgroup);
    for what in ["docker-registry serve", "dockerd", "containerd-shim"] {
        assert!(
            running.iter().any(|l| l.contains(what)),
            "{what} not seen: {running:#?}"
        );
    }
    let user = (user_ws.as_path(), "vscode");
    upgrade(&engine, &serving, &r.src, user, &user_id, expected);
    (digest, engine.cgroup.clone())
}

/// The rootless Podman part, after N+1 is out: root by N's `digest`
/// (still N; jail probe) and the remote user by `:MAJOR` (now N+1); no
/// process of the host is left when it stops.
fn on_podman(r: &mut Rehearsal, digest: &str) {
    let (major, expected) = (&r.major, &r.expected);
    let mut host = podman::Host::start();
    r.dirs.push(host.dir.display().to_string());
    let serving = r
        .registry
        .serve(&PathBuf::from(format!("/proc/{}/ns/net", host.init)));
    podman::import_image(&host, &r.real);
    let wsd = host.dir.join("ws");
    let root_ws = user_workspace(&wsd, "digestws", None, &format!("@{digest}"));
    let root_id = podman::up_and_check(&host, &root_ws, None, expected);
    let user_ws = user_workspace(&wsd, "majorws", Some("vscode"), &format!(":{major}"));
    let user_id = podman::up_and_check(&host, &user_ws, Some("vscode"), expected);
    let arch = std::env::consts::ARCH;
    let n_bin = sha256_file(&r.src.join(format!("claude-sandbox/claude-sandbox-{arch}")));
    let podman = |a: &[&str]| host.podman(a);
    assert_eq!(binary_in(&podman, &root_id), n_bin, "@{digest} is N");
    assert_ne!(binary_in(&podman, &user_id), n_bin, ":{major} is N+1");
    podman::jail_probe(&host, &root_id, &root_ws);
    drop(serving);
    let left = host.stop();
    assert!(
        left.is_empty(),
        "processes left in the podman host: {left:?}"
    );
}
