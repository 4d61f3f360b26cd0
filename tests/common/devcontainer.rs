//! What tests/docker.rs and tests/podman.rs share: the feature built by
//! build.sh, the offline base image's root, workspaces holding only the
//! "features" line, and the static probe for the jail probe.

use super::{debian, stderr, stdout};
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The official CLI, as build.sh installs it.
pub(crate) const CLI: &str = "/opt/csb-devcontainer-cli/node_modules/.bin/devcontainer";
/// The base image, imported from [`image_root`] (no registry is reachable).
pub(crate) const IMAGE: &str = "csb-e2e-base:bookworm";
/// The real Claude Code's place in the image (claudeSource "existing").
pub(crate) const IMAGE_CLAUDE: &str = "usr/libexec/claude-sandbox/claude";

/// The base image's root: the debootstrap cache plus the feature's packages
/// and a non-root user, cached beside it (made once, under a lock).
pub(crate) fn image_root() -> PathBuf {
    let base = debian::base_root();
    let root = PathBuf::from(format!(
        "{}/docker-base-{}",
        debian::ROOT_CACHE,
        base.file_name().unwrap().to_string_lossy()
    ));
    let script = format!(
        r#"set -euo pipefail
exec 9>{cache}/.lock
flock 9
r={root}
if [ -f "$r.complete" ] && [ -d "$r" ]; then exit 0; fi
rm -rf "$r" "$r.tmp" "$r.complete"
cp -a {base} "$r.tmp"
bwrap --bind "$r.tmp" / --dev /dev --proc /proc --ro-bind /sys /sys \
    --ro-bind /etc/resolv.conf /etc/resolv.conf --clearenv \
    --setenv PATH /usr/sbin:/usr/bin:/sbin:/bin --setenv DEBIAN_FRONTEND noninteractive \
    bash -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends bubblewrap passt iproute2 git ca-certificates >/dev/null && rm -rf /var/lib/apt/lists/* && useradd -m -s /bin/bash vscode'
mv "$r.tmp" "$r"
touch "$r.complete"
"#,
        cache = debian::ROOT_CACHE,
        root = root.display(),
        base = base.display(),
    );
    let o = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "the image root: {}{}",
        stdout(&o),
        stderr(&o)
    );
    root
}

/// The shell pipeline that streams the image: [`image_root`] plus the real
/// Claude Code at [`IMAGE_CLAUDE`] (from `extra`, a directory holding it at
/// that path), as a tar on stdout.
pub(crate) fn image_tar_command(root: &Path, extra: &Path) -> String {
    format!(
        "tar -C {} -c . -C {} --no-recursion usr/libexec/claude-sandbox {IMAGE_CLAUDE}",
        super::shell_quote(&root.display().to_string()),
        super::shell_quote(&extra.display().to_string())
    )
}

/// `devcontainer-feature/build.sh`: the static binary staged into the feature.
pub(crate) fn build_feature() {
    let o = Command::new("bash")
        .arg(repo().join("devcontainer-feature/build.sh"))
        .output()
        .unwrap();
    assert!(o.status.success(), "build.sh: {}{}", stdout(&o), stderr(&o));
}

/// The probe example built like the feature's binary (static glibc, for
/// this machine's architecture), so it runs in any container of it.
pub(crate) fn static_probe() -> PathBuf {
    let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let o = Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "--release",
            "--locked",
            "--example",
            "probe",
        ])
        .args(["--target", &triple, "--manifest-path"])
        .arg(repo().join("Cargo.toml"))
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        .output()
        .unwrap();
    assert!(o.status.success(), "static probe: {}", stderr(&o));
    repo().join(format!("target/{triple}/release/examples/probe"))
}

/// One line per target, netprobe's format ("ADDR:PORT REACHED what it
/// sent" / "ADDR:PORT BLOCKED why"), with bash's /dev/tcp (the image has no
/// python3); every wait bounded.
pub(crate) const CONNECT_SH: &str = r#"for t in "$@"; do
  out=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/${1%:*}/${1##*:}" && timeout 3 cat <&3' _ "$t" 2>&1) \
    && echo "$t REACHED $out" || echo "$t BLOCKED ${out:-timeout}"
done
"#;

/// A workspace whose .devcontainer/devcontainer.json holds only "image",
/// "features" (the feature as a local folder) and, for a non-root user,
/// "remoteUser".
pub(crate) fn workspace(parent: &Path, name: &str, user: Option<&str>) -> PathBuf {
    let ws = parent.join(name);
    let dc = ws.join(".devcontainer");
    std::fs::create_dir_all(&dc).unwrap();
    copy_tree(
        &repo().join("devcontainer-feature/src/claude-sandbox"),
        &dc.join("claude-sandbox"),
    );
    without_installs_after(&dc.join("claude-sandbox"));
    let mut config = serde_json::json!({
        "image": IMAGE,
        "features": { "./claude-sandbox": { "claudeSource": "existing" } },
    });
    if let Some(u) = user {
        config["remoteUser"] = u.into();
    }
    std::fs::write(
        dc.join("devcontainer.json"),
        serde_json::to_string_pretty(&config).unwrap(),
    )
    .unwrap();
    std::fs::copy(
        repo().join("devcontainer-feature/test/claude-sandbox/test.sh"),
        ws.join("feature-test.sh"),
    )
    .unwrap();
    ws
}

/// `cp -a SRC DST`.
pub(crate) fn copy_tree(src: &Path, dst: &Path) {
    let st = Command::new("cp")
        .arg("-a")
        .arg(src)
        .arg(dst)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a {} {}", src.display(), dst.display());
}

/// Remove `installsAfter` from the feature copy at `feature`: it names
/// features on ghcr.io, which the CLI looks up even when they are not used,
/// and no registry is reachable here.
pub(crate) fn without_installs_after(feature: &Path) {
    let meta_path = feature.join("devcontainer-feature.json");
    let mut meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    meta.as_object_mut().unwrap().remove("installsAfter");
    std::fs::write(&meta_path, serde_json::to_string_pretty(&meta).unwrap()).unwrap();
}
