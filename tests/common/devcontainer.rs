//! What tests/docker.rs and tests/podman.rs share: their prerequisites,
//! the feature built by build.sh, the offline base image's root,
//! workspaces holding only the "features" line, `devcontainer up` and
//! what a user then notices, and the jail probe (the static probe, its
//! listeners, its install and its connections).

use super::{debian, real_claude, require, stderr, stdout};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

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
    offline_feature_copy(&dc.join("claude-sandbox"));
    let features = serde_json::json!({ "./claude-sandbox": { "claudeSource": "existing" } });
    write_devcontainer_json(&ws, features, user);
    ws
}

/// A workspace as a user of the published feature has it: its
/// devcontainer.json holds "image", the one "features" line naming the
/// feature in a registry by `reference` (a tag or a digest) with
/// `options`, and, for a non-root user, "remoteUser".
pub(crate) fn registry_workspace(
    parent: &Path,
    name: &str,
    user: Option<&str>,
    reference: &str,
    options: serde_json::Value,
) -> PathBuf {
    let ws = parent.join(name);
    std::fs::create_dir_all(ws.join(".devcontainer")).unwrap();
    write_devcontainer_json(&ws, serde_json::json!({ reference: options }), user);
    ws
}

/// `ws`'s .devcontainer/devcontainer.json with [`IMAGE`], `features` and
/// `user` as remoteUser, and the feature's test.sh beside it (which
/// [`a_user_notices`] runs).
fn write_devcontainer_json(ws: &Path, features: serde_json::Value, user: Option<&str>) {
    let mut config = serde_json::json!({ "image": IMAGE, "features": features });
    if let Some(u) = user {
        config["remoteUser"] = u.into();
    }
    std::fs::write(
        ws.join(".devcontainer/devcontainer.json"),
        serde_json::to_string_pretty(&config).unwrap(),
    )
    .unwrap();
    std::fs::copy(
        repo().join("devcontainer-feature/test/claude-sandbox/test.sh"),
        ws.join("feature-test.sh"),
    )
    .unwrap();
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

/// The repo's feature folder (with the binaries build.sh staged) copied to
/// `dst`, `installsAfter` removed ([`without_installs_after`]).
pub(crate) fn offline_feature_copy(dst: &Path) {
    copy_tree(&repo().join("devcontainer-feature/src/claude-sandbox"), dst);
    without_installs_after(dst);
}

/// Remove `installsAfter` from the feature copy at `feature`: it names
/// features on ghcr.io, which the CLI looks up even when they are not used,
/// and no registry is reachable here.
pub(crate) fn without_installs_after(feature: &Path) {
    edit_json(&feature.join("devcontainer-feature.json"), |meta| {
        meta.as_object_mut().unwrap().remove("installsAfter");
    });
}

/// The JSON file at `path`, changed by `edit` and written back.
pub(crate) fn edit_json(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

/// tests/testnet/netprobe.py, which the jail probes' listeners run.
pub(crate) const NETPROBE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/testnet/netprobe.py");

/// Root, bubblewrap and the real Claude Code ([`require`],
/// [`real_claude`]), and each of `tools` in one of `dirs`; `installs`
/// says what scripts/test.sh installs for them. Under CI a missing one
/// fails, elsewhere the test `what` is skipped loudly.
pub(crate) fn prerequisites(
    what: &str,
    tools: &[&str],
    dirs: &[&str],
    installs: &str,
) -> Option<PathBuf> {
    if !require(what) {
        return None;
    }
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| !dirs.iter().any(|d| Path::new(d).join(t).exists()))
        .collect();
    if !missing.is_empty() {
        let msg = format!(
            "end-to-end test `{what}` needs {} (scripts/test.sh installs {installs})",
            missing.join(", ")
        );
        if std::env::var_os("CI").is_some() {
            panic!("{msg} (CI is set: a missing prerequisite is a failure)");
        }
        eprintln!("\n!!!! SKIPPED: {msg} !!!!\n");
        return None;
    }
    real_claude()
}

/// The real Claude Code at [`IMAGE_CLAUDE`] under `dir/extra`, the
/// `extra` of [`image_tar_command`]; that directory.
pub(crate) fn image_extra(dir: &Path, real: &Path) -> PathBuf {
    let extra = dir.join("extra");
    std::fs::create_dir_all(extra.join(IMAGE_CLAUDE).parent().unwrap()).unwrap();
    std::fs::copy(real, extra.join(IMAGE_CLAUDE)).unwrap();
    extra
}

/// `devcontainer up` for the workspace `wsf`, by `cli` (the official CLI
/// against the engine), as `who`: it succeeded, and `engine` (the
/// engine's own CLI) finds its container. Returns the container's id.
pub(crate) fn up(
    cli: &dyn Fn(&[&str]) -> Output,
    engine: &dyn Fn(&[&str]) -> Output,
    wsf: &str,
    who: &str,
) -> String {
    let o = cli(&["up", "--workspace-folder", wsf]);
    assert!(
        o.status.success() && stdout(&o).contains("\"outcome\":\"success\""),
        "devcontainer up ({who}):\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    let label = format!("label=devcontainer.local_folder={wsf}");
    let id = stdout(&engine(&["ps", "-q", "--filter", &label]))
        .trim()
        .to_string();
    assert!(!id.is_empty(), "no container for {wsf}");
    id
}

/// What a user of the container notices, through `exec` (a shell script
/// run by `devcontainer exec` as `who`) from /workspaces/NAME: `claude
/// --version` through the shadow prints the real one's `expected`,
/// doctor finds all in place, the feature's test.sh passes.
pub(crate) fn a_user_notices(exec: &dyn Fn(&str) -> Output, name: &str, who: &str, expected: &str) {
    let dir = format!("/workspaces/{name}");
    let o = exec(&format!("cd {dir} && claude --version"));
    assert!(
        o.status.success() && stdout(&o).trim() == expected,
        "claude --version as {who} through the shadow:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    let o = exec("/usr/libexec/claude-sandbox/claude-sandbox doctor");
    assert!(
        o.status.success() && stdout(&o).contains("all in place") && !stdout(&o).contains("FAIL"),
        "doctor as {who}:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    let o = exec(&format!("cd {dir} && bash feature-test.sh"));
    assert!(
        o.status.success() && !stdout(&o).contains("FAIL"),
        "the feature's test.sh as {who}:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
}

/// A netprobe listener in a network namespace (by its path), killed when
/// dropped.
pub(crate) struct Listener(Child);

impl Listener {
    /// Serving `token` on `addr` in the namespace `netns`, once it
    /// answers there (at most 20 s).
    pub(crate) fn start(netns: &Path, addr: &str, token: &str) -> Listener {
        let ns = format!("--net={}", netns.display());
        let child = Command::new("nsenter")
            .args([&ns, "python3", NETPROBE, "serve", addr, token, "300"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let l = Listener(child);
        let t0 = Instant::now();
        loop {
            let o = Command::new("nsenter")
                .args([&ns, "python3", NETPROBE, "connect", addr])
                .output()
                .unwrap();
            if stdout(&o).contains("REACHED") {
                break l;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "listener {addr}: {}",
                stdout(&o)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The PID (in the engine's PID namespace) of container `id`'s first
/// process, by `engine` (the engine's CLI).
pub(crate) fn container_pid(engine: &dyn Fn(&[&str]) -> Output, id: &str) -> u32 {
    stdout(&engine(&["inspect", "-f", "{{.State.Pid}}", id]))
        .trim()
        .parse()
        .expect("the container's pid")
}

/// The static probe and [`CONNECT_SH`] copied into the workspace `ws`,
/// for [`probe_the_jail`].
pub(crate) fn stage_probe(ws: &Path) {
    std::fs::copy(static_probe(), ws.join("probe")).unwrap();
    std::fs::write(ws.join("connect.sh"), CONNECT_SH).unwrap();
}

/// The egress jail in the root container `id`, whose workspace `ws` (see
/// [`stage_probe`]) is at /workspaces/NAME: the probe installed as the
/// real binary (`claude-sandbox install --real-claude`, so `claude shell
/// CMD` runs CMD in the sandbox), then each of `targets` (an address and
/// the token its listener sends) reached from the container outside the
/// sandbox (the control) and blocked from inside it; `first`, shell lines
/// run before [`CONNECT_SH`] on both sides. `engine` runs the engine's
/// CLI (`docker`, `podman`). Returns what the container and the sandbox
/// printed.
pub(crate) fn probe_the_jail(
    engine: &dyn Fn(&[&str]) -> Output,
    id: &str,
    ws: &Path,
    targets: &[(&str, &str)],
    first: &str,
) -> (String, String) {
    let wsd = format!("/workspaces/{}", ws.file_name().unwrap().to_string_lossy());
    let probe = format!("{wsd}/probe");
    let o = engine(&[
        "exec",
        id,
        "/usr/libexec/claude-sandbox/claude-sandbox",
        "install",
        "--no-packages",
        "--user",
        "root",
        "--real-claude",
        &probe,
    ]);
    assert!(
        o.status.success(),
        "install --real-claude probe: {}{}",
        stdout(&o),
        stderr(&o)
    );
    let addrs: Vec<&str> = targets.iter().map(|(t, _)| *t).collect();
    let connect = format!("{first}bash connect.sh {}", addrs.join(" "));
    let outside = engine(&["exec", "-w", &wsd, id, "bash", "-c", &connect]);
    let shell = format!("claude shell 'ip -4 route; {connect}'");
    let inside = engine(&["exec", "-w", &wsd, id, "bash", "-lc", &shell]);
    let (outside, inside_out) = (stdout(&outside), stdout(&inside));
    eprintln!("jail probe, outside the sandbox:\n{outside}inside:\n{inside_out}");
    for (t, token) in targets {
        assert!(
            outside.contains(&format!("{t} REACHED {token}")),
            "control from the container: {outside}"
        );
        assert!(
            inside_out.contains(&format!("{t} BLOCKED ")),
            "from the sandbox:\n{inside_out}{}",
            stderr(&inside)
        );
    }
    (outside, inside_out)
}
