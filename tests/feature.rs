//! The devcontainer feature (issue #6): packaging, and a fresh-container
//! install from the packaged feature.

mod common;
use common::debian::base_root;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `just feature`, once per test binary.
fn build_feature() -> PathBuf {
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

/// The architectures the feature ships a binary for (install.sh picks one),
/// with what `file` calls each.
const ARCHES: [(&str, &str); 2] = [("x86_64", "x86-64"), ("aarch64", "ARM aarch64")];

/// The packaged feature, unpacked into a fresh directory.
fn unpack_feature(tgz: &Path, tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("csb-feature-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    assert!(Command::new("tar")
        .arg("xf")
        .arg(tgz)
        .arg("-C")
        .arg(&dir)
        .status()
        .unwrap()
        .success());
    dir
}

#[test]
fn feature_packages_with_the_official_cli_and_static_binaries_for_both_arches() {
    if !require_tools("feature_package", &["file"]) {
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
        "claude-sandbox-aarch64",
    ] {
        assert!(
            names.lines().any(|l| l.ends_with(f)),
            "{f} not in the package: {names}"
        );
    }
    let dir = unpack_feature(&tgz, "package");
    for (arch, file_name) in ARCHES {
        let bin = dir.join(format!("claude-sandbox-{arch}"));
        let file = stdout(&Command::new("file").arg(&bin).output().unwrap());
        assert!(file.contains(file_name), "{arch}: {file}");
        assert!(
            file.contains("static-pie linked") || file.contains("statically linked"),
            "{arch}: {file}"
        );
    }
    // The build machine's own binary: no dynamic loader, and it runs (the
    // other one runs under qemu, below).
    let bin = dir.join(format!("claude-sandbox-{}", std::env::consts::ARCH));
    let ldd = Command::new("ldd").arg(&bin).output().unwrap();
    let ldd_out = format!("{}{}", stdout(&ldd), stderr(&ldd));
    assert!(
        ldd_out.contains("statically linked") || ldd_out.contains("not a dynamic executable"),
        "{ldd_out}"
    );
    assert!(Command::new(&bin)
        .arg("--version")
        .status()
        .unwrap()
        .success());
    // The packaged metadata names every option of §3.
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("devcontainer-feature.json")).unwrap(),
    )
    .unwrap();
    for o in [
        "egressJail",
        "egress",
        "allowDomain",
        "allowDomains",
        "allowIp",
        "allowWrite",
        "passEnv",
        "noForge",
        "workspaceRoot",
        "claudeVersion",
        "claudeSource",
        "publishPorts",
        "pidsLimit",
        "tmpfsSize",
        "privateStateMax",
        "broker",
    ] {
        assert!(meta["options"][o].is_object(), "option {o} missing");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The aarch64 side of the package, on an x86_64 build machine: the packaged
/// binary answers `--version` and the library's unit tests, cross-built the
/// way build.sh builds (static glibc, Debian's cross gcc as the linker), pass
/// under qemu-user. On an aarch64 machine both run natively.
#[test]
fn aarch64_binary_and_unit_tests_pass_under_qemu() {
    let native = std::env::consts::ARCH == "aarch64";
    let tools: &[&str] = if native {
        &[]
    } else {
        &["qemu-aarch64-static", "aarch64-linux-gnu-gcc"]
    };
    if !require_tools("feature_aarch64_qemu", tools) {
        return;
    }
    let run = |bin: &Path| {
        let mut c = if native {
            Command::new(bin)
        } else {
            let mut c = Command::new("qemu-aarch64-static");
            c.arg(bin);
            c
        };
        c.env_remove("RUST_TEST_THREADS");
        c
    };
    let dir = unpack_feature(&build_feature(), "qemu");
    let o = run(&dir.join("claude-sandbox-aarch64"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(
        o.status.success() && stdout(&o).starts_with("claude-sandbox "),
        "aarch64 --version: {}{}",
        stdout(&o),
        stderr(&o)
    );
    std::fs::remove_dir_all(&dir).unwrap();

    let triple = "aarch64-unknown-linux-gnu";
    let mut build = Command::new(env!("CARGO"));
    build
        .current_dir(repo())
        .args(["test", "--lib", "--locked", "--no-run", "--target", triple])
        .args(["--message-format", "json-render-diagnostics"])
        .env("RUSTFLAGS", "-C target-feature=+crt-static");
    let linker = "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER";
    if !native && std::env::var_os(linker).is_none() {
        build.env(linker, "aarch64-linux-gnu-gcc");
    }
    let o = build.output().unwrap();
    assert!(
        o.status.success(),
        "cross-building the unit tests: {}",
        stderr(&o)
    );
    let exe = stdout(&o)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["profile"]["test"] == true)
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo named no unit-test executable");
    let o = run(&exe).output().unwrap();
    assert!(
        o.status.success(),
        "aarch64 unit tests ({}): {}{}",
        exe.display(),
        stdout(&o),
        stderr(&o)
    );
    eprintln!(
        "aarch64 unit tests: {}",
        stdout(&o)
            .lines()
            .find(|l| l.starts_with("test result:"))
            .unwrap_or("?")
    );
}

// ---------------------------------------------------------------------------
// Fresh-container simulation (acceptance 2 and 4 of issue #6).
//
// A minimal Debian bookworm root from `debootstrap` (cached between runs under
// /var/cache/claude-sandbox-tests, copied afresh for every scenario) stands in
// for the base image of a devcontainer. The packaged feature is unpacked where
// the devcontainer CLI puts it and its `install.sh` runs as root with the
// option variables a build sets. Every command enters the root the way a
// container runtime does: bubblewrap run as root with `--bind ROOT /`
// (pivot_root, not chroot: the kernel refuses new user namespaces to a
// chrooted process), a fresh /dev with a private 0666 /dev/net/tun (what
// `--device=/dev/net/tun` gives), /proc, a read-only /sys, a hostname, a
// resolv.conf and Docker's default capability set (no CAP_SYS_ADMIN). Inside
// such a nested root a fresh /proc mount is refused, so launches exercise the
// host-/proc fallback of §4.1.

/// Cached debootstrapped roots: one per suite, never keyed by date. Remove
/// the directory to force a fresh debootstrap.
/// Docker's default capabilities for a container's root.
const DOCKER_CAPS: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
];
const PATH_IN_ROOT: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Like [`require`], for the tools this simulation needs besides root and bwrap.
fn require_tools(what: &str, tools: &[&str]) -> bool {
    if !require(what) {
        return false;
    }
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| {
            !["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
                .iter()
                .any(|d| Path::new(d).join(t).exists())
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    let msg = format!(
        "end-to-end test `{what}` needs {} (scripts/test.sh installs them)",
        missing.join(", ")
    );
    if std::env::var_os("CI").is_some() {
        panic!("{msg} (CI is set: a missing prerequisite is a failure)");
    }
    eprintln!("\n!!!! SKIPPED: {msg} !!!!\n");
    false
}

/// Which network the root's processes see.
#[derive(Clone, Copy)]
enum Net<'a> {
    /// The machine's own (the image build: apt reaches the Debian mirror).
    Host,
    /// The host side of a private site network built by lan.sh.
    Lan(&'a str),
    /// A new, empty network namespace.
    Nothing,
}

/// One fresh container: a pristine copy of the base root; removed on drop.
struct Container {
    dir: TestDir,
}

impl Container {
    fn new(name: &str) -> Container {
        let base = base_root();
        let c = Container {
            dir: TestDir::new("feature", name),
        };
        let st = Command::new("cp")
            .arg("-a")
            .arg(&base)
            .arg(c.root())
            .status()
            .unwrap();
        assert!(st.success(), "copying the base root failed");
        std::fs::create_dir_all(c.dir.join("devnet")).unwrap();
        std::fs::write(c.dir.join("hostname"), "devcontainer\n").unwrap();
        std::fs::write(
            c.dir.join("hosts"),
            "127.0.0.1 localhost\n::1 localhost ip6-localhost\n127.0.1.1 devcontainer\n",
        )
        .unwrap();
        // The LAN's gateway doubles as its DNS host (lan.sh).
        std::fs::write(c.dir.join("resolv.lan"), "nameserver 10.77.0.1\n").unwrap();
        c
    }

    fn root(&self) -> PathBuf {
        self.dir.join("root")
    }

    /// Run `script` with bash inside the root, as root, from `cwd`, with a
    /// clean environment plus `env`.
    fn run(&self, net: Net, cwd: &str, env: &[(&str, &str)], script: &str) -> Output {
        let d = self.dir.display();
        let resolv = match net {
            Net::Host => "/etc/resolv.conf".to_string(),
            _ => format!("{d}/resolv.lan"),
        };
        let mut bwrap = vec![
            "bwrap".to_string(),
            "--bind".into(),
            self.root().display().to_string(),
            "/".into(),
            "--dev".into(),
            "/dev".into(),
            "--dev-bind".into(),
            format!("{d}/devnet"),
            "/dev/net".into(),
            "--proc".into(),
            "/proc".into(),
            "--ro-bind".into(),
            "/sys".into(),
            "/sys".into(),
            "--ro-bind".into(),
            resolv,
            "/etc/resolv.conf".into(),
            "--ro-bind".into(),
            format!("{d}/hostname"),
            "/etc/hostname".into(),
            "--ro-bind".into(),
            format!("{d}/hosts"),
            "/etc/hosts".into(),
            "--unshare-pid".into(),
            "--unshare-ipc".into(),
            "--unshare-uts".into(),
            "--hostname".into(),
            "devcontainer".into(),
            "--die-with-parent".into(),
            "--cap-drop".into(),
            "ALL".into(),
        ];
        if matches!(net, Net::Nothing) {
            bwrap.push("--unshare-net".into());
        }
        for c in DOCKER_CAPS {
            bwrap.push("--cap-add".into());
            bwrap.push(format!("CAP_{c}"));
        }
        bwrap.extend(["--clearenv".into(), "--setenv".into(), "PATH".into()]);
        bwrap.push(PATH_IN_ROOT.into());
        for (k, v) in [("HOME", "/root"), ("USER", "root"), ("LANG", "C.UTF-8")]
            .iter()
            .chain(env.iter())
        {
            bwrap.extend(["--setenv".into(), k.to_string(), v.to_string()]);
        }
        bwrap.extend([
            "--chdir".into(),
            cwd.into(),
            "/bin/bash".into(),
            "-c".into(),
            script.into(),
        ]);
        // A private mount namespace outside, for the tun node: a 0666 node
        // on a tmpfs of our own, never a change to this machine's /dev.
        let outer = format!(
            "set -e\nmount -t tmpfs -o mode=755 tmpfs {d}/devnet\nmknod -m 666 {d}/devnet/tun c 10 200\nexec {}",
            bwrap
                .iter()
                .map(|a| shell_quote(a))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "bash", "-c", &outer]);
        let mut cmd = match net {
            Net::Lan(ns) => in_netns(ns, &cmd),
            _ => cmd,
        };
        cmd.stdin(std::process::Stdio::null()).output().unwrap()
    }

    /// Run `script` as `user` through a login shell (what a terminal gives).
    fn run_as(&self, net: Net, user: &str, script: &str) -> Output {
        if user == "root" {
            self.run(
                net,
                "/workspaces/app",
                &[],
                &format!("exec bash -lc {}", shell_quote(script)),
            )
        } else {
            self.run(
                net,
                "/workspaces/app",
                &[],
                &format!("exec su - {user} -c {}", shell_quote(script)),
            )
        }
    }
}

/// One devcontainer configuration to build and check.
struct Scenario<'a> {
    name: &'a str,
    /// `_REMOTE_USER` (created in the root unless root).
    user: &'a str,
    /// Claude Code preinstalled as the native installer leaves it (a link
    /// into ~/.local/share/claude/versions) rather than as a plain file.
    native_layout: bool,
    /// Feature options, as the upper-cased variables a build sets.
    options: &'a [(&'a str, &'a str)],
    /// /etc/claude-sandbox.conf without its comment line.
    expect_conf: &'a str,
}

fn fresh_container(s: &Scenario) {
    let Some(real) = real_claude() else {
        return;
    };
    let t0 = std::time::Instant::now();
    let expected_version = {
        let o = Command::new(&real).arg("--version").output().unwrap();
        assert!(o.status.success(), "{} --version failed", real.display());
        stdout(&o).trim().to_string()
    };
    let tgz = build_feature();
    let c = Container::new(s.name);
    let root = c.root();
    let home = if s.user == "root" {
        PathBuf::from("/root")
    } else {
        PathBuf::from("/home").join(s.user)
    };
    let at = |p: &Path| root.join(p.strip_prefix("/").unwrap());

    // The image before the feature: the remote user, a workspace, Claude Code
    // preinstalled in the user's ~/.local/bin, the packaged feature unpacked
    // where the devcontainer CLI puts it.
    let feature_dir = "/tmp/dev-container-features/claude-sandbox_0";
    std::fs::create_dir_all(at(Path::new(feature_dir))).unwrap();
    assert!(Command::new("tar")
        .arg("xf")
        .arg(&tgz)
        .arg("-C")
        .arg(at(Path::new(feature_dir)))
        .status()
        .unwrap()
        .success());
    let test_dir = at(Path::new("/tmp/feature-test"));
    std::fs::create_dir_all(&test_dir).unwrap();
    std::fs::copy(
        repo().join("devcontainer-feature/test/claude-sandbox/test.sh"),
        test_dir.join("test.sh"),
    )
    .unwrap();
    if s.user != "root" {
        let o = c.run(
            Net::Nothing,
            "/",
            &[],
            &format!("useradd -m -s /bin/bash {}", s.user),
        );
        assert!(o.status.success(), "useradd: {}", stderr(&o));
    }
    let bin_dir = at(&home.join(".local/bin"));
    std::fs::create_dir_all(&bin_dir).unwrap();
    let versions = home.join(".local/share/claude/versions");
    if s.native_layout {
        std::fs::create_dir_all(at(&versions)).unwrap();
        std::fs::copy(&real, at(&versions.join("2.1.330"))).unwrap();
        std::os::unix::fs::symlink(versions.join("2.1.330"), bin_dir.join("claude")).unwrap();
    } else {
        std::fs::copy(&real, bin_dir.join("claude")).unwrap();
    }
    // What the VS Code extension would run: its own bundled CLI, which must never run.
    let bundled =
        home.join(".vscode-server/extensions/anthropic.claude-code-2.1.330-linux-x64/resources/native-binary/claude");
    std::fs::create_dir_all(at(bundled.parent().unwrap())).unwrap();
    std::fs::write(
        at(&bundled),
        "#!/bin/sh\necho 'the bundled CLI ran' > /workspaces/app/BUNDLED-RAN\necho BUNDLED\n",
    )
    .unwrap();
    std::fs::set_permissions(
        at(&bundled),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::create_dir_all(at(Path::new("/workspaces/app"))).unwrap();
    let o = c.run(
        Net::Nothing,
        "/",
        &[],
        &format!(
            "chown -R {u}: {h} /workspaces/app",
            u = s.user,
            h = home.display()
        ),
    );
    assert!(o.status.success(), "chown: {}", stderr(&o));
    let t_ready = t0.elapsed();

    // The feature's install.sh, as a devcontainer build runs it: root, from
    // its directory, through its own #!/bin/sh (dash here: POSIX sh).
    let mut env: Vec<(&str, &str)> = vec![
        ("_REMOTE_USER", s.user),
        ("_CONTAINER_USER", "root"),
        ("_CONTAINER_USER_HOME", "/root"),
    ];
    let home_s = home.display().to_string();
    env.push(("_REMOTE_USER_HOME", &home_s));
    env.extend_from_slice(s.options);
    let o = c.run(Net::Host, feature_dir, &env, "exec ./install.sh");
    let log = format!("{}{}", stdout(&o), stderr(&o));
    assert!(o.status.success(), "install.sh failed:\n{log}");
    let t_install = t0.elapsed() - t_ready;
    assert!(
        log.contains(&format!(
            "removed {}/.local/bin/claude (it is now /usr/libexec/claude-sandbox/claude)",
            home.display()
        )),
        "install.sh did not relocate the preinstalled Claude Code:\n{log}"
    );
    let conf = std::fs::read_to_string(at(Path::new("/etc/claude-sandbox.conf"))).unwrap();
    let body: String = conf
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(body, s.expect_conf, "the config does not match the options");
    // Host git in the image ignores a bare-style directory planted in the
    // workspace: install.sh's install set it in the system git config.
    let o = Command::new("git")
        .args(["config", "--file"])
        .arg(at(Path::new("/etc/gitconfig")))
        .args(["--get", "safe.bareRepository"])
        .output()
        .unwrap();
    assert_eq!(
        stdout(&o),
        "explicit\n",
        "the image's /etc/gitconfig does not set safe.bareRepository = explicit:\n{log}"
    );
    assert!(
        bin_dir.join("claude").symlink_metadata().is_err(),
        "~/.local/bin/claude is still there"
    );
    if s.native_layout {
        assert!(
            at(&versions.join("2.1.330")).exists(),
            "the user's own Claude Code version was removed"
        );
    }

    // The container runs: jail on needs a default route, so its processes
    // get a private site network; jail off gets no network at all.
    let jail = !s
        .options
        .iter()
        .any(|(k, v)| *k == "EGRESSJAIL" && *v == "false");
    let lan = jail.then(lan::Lan::up);
    let net = match &lan {
        Some(l) => Net::Lan(&l.host),
        None => Net::Nothing,
    };

    // An allowWrite path that does not exist yet stops every launch: doctor
    // names it; once it exists, all is well.
    for (_, paths) in s.options.iter().filter(|(k, _)| *k == "ALLOWWRITE") {
        for p in paths.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let o = c.run_as(
                net,
                s.user,
                "/usr/libexec/claude-sandbox/claude-sandbox doctor",
            );
            assert!(
                !o.status.success()
                    && stdout(&o).contains(&format!("FAIL allow-write: {p} does not exist")),
                "doctor did not name the missing allow-write {p}:\n{}",
                stdout(&o)
            );
            let o = c.run(
                Net::Nothing,
                "/",
                &[],
                &format!("install -d -o {u} -g {u} {p}", u = s.user),
            );
            assert!(o.status.success(), "{}", stderr(&o));
        }
    }

    // Acceptance 4: the feature's own test, as the remote user from the workspace.
    let o = c.run_as(
        net,
        s.user,
        &format!(
            "cd /workspaces/app && EXPECT_CONF={} bash /tmp/feature-test/test.sh",
            shell_quote(&s.expect_conf.replace('\n', "\\n"))
        ),
    );
    let out = stdout(&o);
    assert!(
        o.status.success() && !out.contains("FAIL"),
        "the feature's test.sh failed as {}:\n{out}{}",
        s.user,
        stderr(&o)
    );
    assert!(
        out.contains("PASS: claude --version through the shadow"),
        "{out}"
    );

    // doctor and `claude --version` as a terminal of the remote user and of root.
    let mut users = vec![s.user];
    if s.user != "root" {
        users.push("root");
    }
    for u in users {
        let o = c.run_as(net, u, "/usr/libexec/claude-sandbox/claude-sandbox doctor");
        assert!(
            o.status.success() && stdout(&o).contains("all in place"),
            "claude-sandbox doctor as {u}:\n{}{}",
            stdout(&o),
            stderr(&o)
        );
        let o = c.run_as(net, u, "cd /workspaces/app && claude --version");
        assert_eq!(
            stdout(&o).trim(),
            expected_version,
            "claude --version as {u} through the shadow: {}",
            stderr(&o)
        );
        assert!(o.status.success(), "{}", stderr(&o));
    }

    // VS Code: the extension runs its process wrapper with its bundled CLI
    // first; the wrapper runs the pinned Claude Code sandboxed instead.
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(at(Path::new(feature_dir)).join("devcontainer-feature.json"))
            .unwrap(),
    )
    .unwrap();
    let settings = &meta["customizations"]["vscode"]["settings"];
    assert_eq!(settings["claudeCode.useTerminal"], true, "{settings}");
    let wrapper = settings["claudeCode.claudeProcessWrapper"]
        .as_str()
        .unwrap_or_else(|| panic!("no claudeCode.claudeProcessWrapper in {settings}"));
    let o = c.run_as(
        net,
        s.user,
        &format!(
            "cd /workspaces/app && {wrapper} {} --version",
            shell_quote(&bundled.display().to_string())
        ),
    );
    assert_eq!(
        stdout(&o).trim(),
        expected_version,
        "the VS Code wrapper {wrapper}: {}",
        stderr(&o)
    );
    assert!(
        !at(Path::new("/workspaces/app/BUNDLED-RAN")).exists(),
        "the wrapper ran the extension's bundled CLI"
    );

    // Which /proc the launches had: in this nested root a fresh one is
    // normally refused, and the launches above used the host's (§4.1).
    let o = c.run_as(
        net,
        s.user,
        "bwrap --unshare-user --unshare-pid --ro-bind / / --proc /proc true",
    );
    eprintln!(
        "{}: fresh /proc in the root: {}; image ready {:.1?}, install.sh {:.1?}, total {:.1?}",
        s.name,
        if o.status.success() {
            "allowed"
        } else {
            "refused (host-/proc fallback exercised)"
        },
        t_ready,
        t_install,
        t0.elapsed()
    );
    drop(lan);
}

#[test]
fn fresh_container_non_root_user_native_install_jail_on() {
    if !require_tools(
        "feature_fresh_container_user",
        &["debootstrap", "ip", "unshare", "flock", "mknod"],
    ) {
        return;
    }
    fresh_container(&Scenario {
        name: "user",
        user: "vscode",
        native_layout: true,
        options: &[
            ("CLAUDESOURCE", "existing"),
            ("EGRESSJAIL", "true"),
            ("ALLOWIP", "10.77.0.9, 10.77.0.10"),
            ("ALLOWWRITE", "/workspaces/shared"),
            ("PASSENV", "FOO,BAR"),
            ("NOFORGE", "true"),
            ("WORKSPACEROOT", ""),
            ("CLAUDEVERSION", "2.1.330"),
        ],
        expect_conf: "no-forge\npass-env = FOO,BAR\nallow-ip = 10.77.0.9\nallow-ip = 10.77.0.10\nallow-write = /workspaces/shared\n",
    });
}

/// Allowlist mode from the feature's options (issue #15): the config the
/// build writes, and every launch of the scenario (doctor, the feature's
/// own test, `claude --version`, the VS Code wrapper) in that mode.
#[test]
fn fresh_container_root_user_allowlist() {
    if !require_tools(
        "feature_fresh_container_allowlist",
        &["debootstrap", "ip", "unshare", "flock", "mknod"],
    ) {
        return;
    }
    fresh_container(&Scenario {
        name: "allowlist",
        user: "root",
        native_layout: false,
        options: &[
            ("CLAUDESOURCE", "existing"),
            ("EGRESS", "allowlist"),
            ("ALLOWDOMAIN", "allowed.test:8443, *.pkg.test"),
            ("ALLOWDOMAINS", "github, npm"),
            ("PUBLISHPORTS", "3000, 8888"),
            ("PIDSLIMIT", "2048"),
            ("TMPFSSIZE", "10%"),
            ("PRIVATESTATEMAX", "8G"),
            ("BROKER", "false"),
        ],
        expect_conf: "egress = allowlist\nallow-domain = allowed.test:8443\nallow-domain = *.pkg.test\nallow-domains = github, npm\npublish-port = 3000, 8888\npids-limit = 2048\ntmpfs-size = 10%\nprivate-state-max = 8G\nbroker = off\n",
    });
}

#[test]
fn fresh_container_root_user_jail_off() {
    if !require_tools(
        "feature_fresh_container_root",
        &["debootstrap", "unshare", "flock", "mknod"],
    ) {
        return;
    }
    fresh_container(&Scenario {
        name: "root",
        user: "root",
        native_layout: false,
        options: &[
            ("CLAUDESOURCE", "existing"),
            ("EGRESSJAIL", "false"),
            ("WORKSPACEROOT", "/workspaces/app"),
        ],
        expect_conf: "egress-jail = 0\nworkspace-root = /workspaces/app\n",
    });
}
