//! End-to-end test harness: a "world" in which the product is installed at
//! its real paths (/usr/local/bin/claude, /usr/libexec/claude-sandbox, /etc)
//! without changing this machine. Every command runs in a private mount
//! namespace (`unshare -m`) with overlays over exactly /etc, /usr/libexec and
//! /usr/local (the shadow's /usr/local/bin, and /usr/local/etc where a git
//! built from source keeps the system config install hardens) whose upper layers live in the world's directory, so state
//! persists across the world's runs and vanishes with it. An installation
//! already on this machine (`scripts/setup.sh` ran here) is whited out in
//! those upper layers, so a world starts without it either way. An
//! unprivileged test user exists only in the overlay's /etc/passwd.
//!
//! Tests that need root, bubblewrap or user namespaces call [`require`]: under
//! `CI` a missing prerequisite fails the test; on a developer machine the test
//! is skipped with a loud message.
#![allow(dead_code)]

pub(crate) mod broker;
pub(crate) mod debian;
pub(crate) mod devcontainer;
pub(crate) mod docker;
pub(crate) mod lan;
pub(crate) mod podman;
pub(crate) mod pty;
pub(crate) mod registry;
pub(crate) mod site;
pub(crate) mod tracked;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The unprivileged user every world has.
pub(crate) const TEST_USER: &str = "csbtest";
pub(crate) const TEST_UID: u32 = 4242;

/// Who runs a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Who {
    Root,
    User,
}

pub(crate) const BOTH: [Who; 2] = [Who::Root, Who::User];

/// The sandbox's own binary where `install` puts it (in a world's mount
/// namespace).
pub(crate) const SELF_BIN: &str = "/usr/libexec/claude-sandbox/claude-sandbox";

/// True when end-to-end prerequisites are present; panics under CI when not.
pub(crate) fn require(what: &str) -> bool {
    default_signal_dispositions();
    let mut missing = Vec::new();
    if !nix::unistd::geteuid().is_root() {
        missing.push("root");
    }
    if !Path::new("/usr/bin/bwrap").exists() {
        missing.push("bubblewrap (/usr/bin/bwrap)");
    }
    if missing.is_empty() {
        return true;
    }
    let msg = format!("end-to-end test `{what}` needs {}", missing.join(", "));
    if std::env::var_os("CI").is_some() {
        panic!("{msg} (CI is set: a missing prerequisite is a failure)");
    }
    eprintln!("\n!!!! SKIPPED: {msg}. Run as root with bubblewrap installed (see README). !!!!\n");
    false
}

/// The signals a session is ended by, back to their default action in this
/// test binary, so in everything it launches: the suite checks what they
/// do to a session, and an ignored disposition is inherited through every
/// exec. A run under `nohup` ignores `SIGHUP` (a CI run started that way
/// failed `lifetime.rs`: the forwarded hang-up was ignored by the probe,
/// which slept on and exited 0), and a background job of a shell without
/// job control ignores `SIGINT` and `SIGQUIT`.
fn default_signal_dispositions() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for sig in [
            nix::libc::SIGHUP,
            nix::libc::SIGINT,
            nix::libc::SIGQUIT,
            nix::libc::SIGTERM,
        ] {
            // SAFETY: sets a disposition; no handler is installed.
            unsafe { nix::libc::signal(sig, nix::libc::SIG_DFL) };
        }
    });
}

/// Our binary as cargo built it.
pub(crate) fn our_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_claude-sandbox"))
}

/// The probe example, built once per test binary: `cargo test --all-targets`
/// compiles examples as test harnesses (not into `examples/`), and a filtered
/// `cargo test --test X` does not rebuild them, so a stale probe would report
/// stale facts.
pub(crate) fn probe_binary() -> PathBuf {
    static BUILD: std::sync::Once = std::sync::Once::new();
    let exe = our_binary();
    let release = exe.components().any(|c| c.as_os_str() == "release");
    BUILD.call_once(|| {
        let mut c = Command::new(env!("CARGO"));
        c.args(["build", "--quiet", "--example", "probe", "--manifest-path"])
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"));
        if release {
            c.arg("--release");
        }
        let st = c.status().expect("cargo build --example probe");
        assert!(st.success(), "building the probe failed");
    });
    let p = exe.parent().unwrap().join("examples/probe");
    assert!(p.exists(), "{} missing after building it", p.display());
    p
}

/// Our binary built with the test-only feature `test-mutations` (the
/// deliberate regressions of src/testhooks.rs), in a target directory of
/// its own, once per test binary. The normal build has no such code.
pub(crate) fn mutation_binary() -> PathBuf {
    static BUILD: std::sync::Once = std::sync::Once::new();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = manifest.join("target/mutations");
    BUILD.call_once(|| {
        let st = Command::new(env!("CARGO"))
            .args([
                "build",
                "--quiet",
                "--features",
                "test-mutations",
                "--bin",
                "claude-sandbox",
            ])
            .arg("--manifest-path")
            .arg(manifest.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&target)
            .status()
            .expect("cargo build --features test-mutations");
        assert!(st.success(), "building the mutation binary failed");
    });
    target.join("debug/claude-sandbox")
}

/// The real Claude Code binary for tests: `CSB_REAL_CLAUDE`, or the npm
/// install `.ci/run` makes. None when absent (callers decide: CI fails).
pub(crate) fn real_claude() -> Option<PathBuf> {
    let p = std::env::var_os("CSB_REAL_CLAUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from("/opt/csb-claude/node_modules/@anthropic-ai/claude-code-linux-x64/claude")
        });
    if p.exists() {
        return Some(p);
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "real Claude Code not found at {} (CI: .ci/run installs it)",
            p.display()
        );
    }
    eprintln!(
        "\n!!!! SKIPPED: real Claude Code not found at {} (set CSB_REAL_CLAUDE) !!!!\n",
        p.display()
    );
    None
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A private directory under /var/tmp (not /tmp: the sandbox's /tmp must
/// look empty), mode 0755, removed when dropped (panics included) unless
/// `CSB_KEEP_WORLDS` is set. Dereferences to its path.
pub(crate) struct TestDir(PathBuf);

impl TestDir {
    /// `/var/tmp/csb-{kind}-{name}-{pid}-{n}`, fresh.
    pub(crate) fn new(kind: &str, name: &str) -> TestDir {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir = PathBuf::from(format!(
            "/var/tmp/csb-{kind}-{name}-{}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        // The guard exists (and so is removed on drop) before anything can panic.
        let d = TestDir(dir);
        std::fs::create_dir_all(&d.0).unwrap();
        std::fs::set_permissions(&d.0, std::fs::Permissions::from_mode(0o755)).unwrap();
        d
    }
}

impl std::ops::Deref for TestDir {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if std::env::var_os("CSB_KEEP_WORLDS").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Where `claude-sandbox install` puts the product on a machine.
pub(crate) const MACHINE_INSTALL: [&str; 5] = [
    "/usr/local/bin/claude",
    "/usr/libexec/claude-sandbox",
    "/etc/claude-sandbox.conf",
    "/etc/claude-gitconfig",
    "/etc/claude-code",
];

/// Root shell lines, run inside the overlays of the world at `root`, that
/// remove [`MACHINE_INSTALL`] from its view, and only when the top mount of
/// each of the three places is this world's overlay (so the machine's own
/// files are never the ones removed).
fn hide_machine_install(root: &Path) -> String {
    let r = root.display();
    format!(
        "set -e\n\
         for d in /etc /usr/libexec /usr/local; do\n\
           awk -v d=$d '$5 == d' /proc/self/mountinfo | tail -n 1 | grep -q 'upperdir={r}/ov/up/' \\\n\
             || {{ echo \"$d is not the world's overlay\" >&2; exit 1; }}\n\
         done\n\
         rm -rf {}\n",
        MACHINE_INSTALL.join(" ")
    )
}

/// Root shell lines that give the world's mount namespace a `/var/tmp` of
/// its own: an empty tmpfs with this world's directory bound back, and the
/// test sites' directories (`csb-site-…`: certificates and logs a world's
/// sessions are pointed at). A root session's root view walks `/var`; with
/// every concurrent test's world, engine and scratch directory there, a
/// mask planned for a directory being deleted at that moment could be gone
/// when bubblewrap mounts it, on every replan, and the launch fail for a
/// reason that is the suite's, not the test's. Worlds see only themselves
/// (and the sites), so no other test's churn reaches a world's launch.
fn hide_other_worlds(root: &Path) -> String {
    let r = root.display();
    let own = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(
        "mount --bind /var/tmp /mnt\n\
         mount -t tmpfs -o mode=1777 csb-world-var-tmp /var/tmp\n\
         for d in /mnt/csb-*; do\n\
           n=${{d#/mnt/}}\n\
           case $n in\n\
             {own}) mkdir {r} && mount --bind \"$d\" {r} ;;\n\
             csb-site-*) mkdir \"/var/tmp/$n\" 2>/dev/null && mount --bind \"$d\" \"/var/tmp/$n\" 2>/dev/null || true ;;\n\
           esac\n\
         done\n\
         umount -l /mnt\n\
         mountpoint -q {r} || {{ echo 'the world directory {r} is not in its own /var/tmp' >&2; exit 1; }}\n"
    )
}

/// Root shell lines that hide this checkout (where `cargo test` runs from)
/// from the world's mount namespace: an empty read-only tmpfs over it. A
/// world runs only what it copied into its own directory first
/// ([`World::fixture`]), so what it sees never depends on where the
/// checkout lives; a checkout under `/tmp`, `/var/tmp` or `/root` — which
/// worlds and tests cover with mounts of their own — would otherwise break
/// exactly the tests that reach into it, and only there (issue #43). Hiding
/// it everywhere makes such a test fail wherever it runs.
fn hide_checkout(root: &Path) -> String {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    if root.starts_with(manifest) || manifest == Path::new("/") {
        return String::new();
    }
    let m = shell_quote(&manifest.to_string_lossy());
    format!(
        "if [ -d {m} ]; then mount -t tmpfs -o ro,size=4k,mode=755 csb-checkout-hidden {m}; fi\n"
    )
}

/// Root shell lines, run first in a world's namespace, that detach every
/// mount at or under this checkout (deepest first). CI binds the checkout
/// back over itself in its throwaway namespace (scripts/throwaway.sh): the
/// world's own mounts (a tmpfs over `/var/tmp`, its root home over `/root`)
/// would shadow that writable mount without removing it, and a session's
/// mount table would still list it, outside the workspace, as writable
/// (verify's `workspace-scoped` check failed on exactly that).
fn detach_checkout(root: &Path) -> String {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    if root.starts_with(manifest) || manifest == Path::new("/") {
        return String::new();
    }
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<PathBuf> = table
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(claude_sandbox::fuzz_targets::mountinfo::unescape(p)))
        .filter(|p| p.starts_with(manifest))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points.dedup();
    points
        .iter()
        .map(|p| format!("umount -l {}\n", shell_quote(&p.to_string_lossy())))
        .collect()
}

/// `ip netns exec` mounts a fresh sysfs, without the machine's cgroup
/// hierarchies under `/sys/fs/cgroup`: where they are missing, mount them
/// again as the machine's init sees them, so a launch in a test network
/// finds the cgroups a launch on the machine finds (issue #24: a root
/// session's pids cgroup).
const CGROUP_VIEW: &str = r#"if ! grep -q ' - cgroup2\? ' /proc/self/mountinfo; then
  if grep -q ' /sys/fs/cgroup .* - cgroup2 ' /proc/1/mountinfo; then
    mount -t cgroup2 cgroup2 /sys/fs/cgroup || true
  elif grep -q ' /sys/fs/cgroup/[^ ]* .* - cgroup2\? ' /proc/1/mountinfo; then
    mount -t tmpfs -o mode=755 cgroup-view /sys/fs/cgroup || true
    awk '{ split($0, p, " - "); split(p[1], a, " "); split(p[2], b, " ");
           if (a[5] ~ "^/sys/fs/cgroup/" && (b[1] == "cgroup" || b[1] == "cgroup2")) print a[5], b[1], b[3] }' /proc/1/mountinfo |
    while read -r point type opts; do mkdir -p "$point" && mount -t "$type" -o "$opts" "$type" "$point" || true; done
  fi
fi
"#;

/// One isolated installation.
pub(crate) struct World {
    pub(crate) root: TestDir,
    /// Whether [`World::install_by_hand`] keeps the product's default
    /// `root-view-max-entries` (see [`World::with_default_root_view`]).
    default_root_view: bool,
}

fn sh(cmd: &str) {
    let st = Command::new("sh").arg("-c").arg(cmd).status().unwrap();
    assert!(st.success(), "{cmd}");
}

impl World {
    /// A new world in a [`TestDir`].
    pub(crate) fn new(name: &str) -> World {
        let w = World {
            root: TestDir::new("test", name),
            default_root_view: false,
        };
        let root = w.root.to_path_buf();
        for d in ["bin", "ov", "homes", "ws"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for d in ["bin", "homes", "ws"] {
            std::fs::set_permissions(root.join(d), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::copy(our_binary(), root.join("bin/claude-sandbox")).unwrap();
        std::fs::copy(probe_binary(), root.join("bin/probe")).unwrap();
        // Every prelude binds the world's root home over /root: it must exist first.
        std::fs::create_dir_all(w.home(Who::Root)).unwrap();
        // An installation already on this machine (`scripts/setup.sh` ran
        // here) is hidden from the world: removed through its overlays once,
        // which whites it out in the world's upper layers and never touches
        // the machine. Then the test user, only inside the overlay's /etc.
        let out = w.run_root_raw(&format!(
            "{hide}\n\
             useradd -l -u {TEST_UID} -U -M -d {home} -s /bin/sh {TEST_USER}",
            hide = hide_machine_install(&root),
            home = w.home(Who::User).display()
        ));
        assert!(
            out.status.success(),
            "useradd: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for who in BOTH {
            let h = w.home(who);
            std::fs::create_dir_all(&h).unwrap();
            let ws = w.workspace(who);
            std::fs::create_dir_all(&ws).unwrap();
            if who == Who::User {
                sh(&format!(
                    "chown -R {TEST_UID}:{TEST_UID} {} {}",
                    h.display(),
                    ws.display()
                ));
            }
        }
        w
    }

    /// Install the binary with the test mutations in this world (before
    /// [`World::install_by_hand`]).
    pub(crate) fn use_mutation_binary(&self) {
        std::fs::copy(mutation_binary(), self.root.join("bin/claude-sandbox")).unwrap();
    }

    /// `rel` (a path in this checkout) copied into the world's `bin/`, where
    /// the world's commands can run or read it: they never see the checkout
    /// ([`hide_checkout`]).
    pub(crate) fn fixture(&self, rel: &str) -> PathBuf {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
        let name = Path::new(rel).file_name().expect("a file name");
        let dst = self.root.join("bin").join(name);
        std::fs::copy(&src, &dst)
            .unwrap_or_else(|e| panic!("copying {} into the world: {e}", src.display()));
        dst
    }

    pub(crate) fn home(&self, who: Who) -> PathBuf {
        self.root.join("homes").join(match who {
            Who::Root => "root",
            Who::User => TEST_USER,
        })
    }

    pub(crate) fn workspace(&self, who: Who) -> PathBuf {
        self.root.join("ws").join(match who {
            Who::Root => "root",
            Who::User => TEST_USER,
        })
    }

    pub(crate) fn user_name(who: Who) -> &'static str {
        match who {
            Who::Root => "root",
            Who::User => TEST_USER,
        }
    }

    /// Write a file in a home (owned by that user), creating parents.
    pub(crate) fn put(&self, who: Who, rel: &str, content: &str) -> PathBuf {
        let p = self.home(who).join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        if who == Who::User {
            sh(&format!(
                "chown -R {TEST_UID}:{TEST_UID} {}",
                self.home(who).display()
            ));
        }
        p
    }

    /// The shell prelude: private overlays over /etc, /usr/libexec, /usr/local.
    fn prelude(&self) -> String {
        let r = self.root.display();
        // From `/`: the test's working directory is the checkout, which the
        // world detaches and hides (git, for one, fails where it cannot
        // read its working directory).
        let mut s = String::from("set -e\ncd /\n");
        s.push_str(&detach_checkout(&self.root));
        s.push_str(&hide_other_worlds(&self.root));
        s.push_str(&hide_checkout(&self.root));
        // One upper directory per world (its state), but a work directory per
        // mount: overlayfs empties its work directory when mounting, so two
        // commands of one world started together would pull it from under
        // each other ("special device overlay does not exist"). `volatile`:
        // the test's state needs no durability, and without it the last
        // process to leave a command's mount namespace syncs the whole disk
        // the upper directory is on (overlayfs's sync on release); with CI
        // writing its build there, a CI run saw a launch's last process wait
        // for that over 11 s in `wb_wait_for_completion`, and reported it as
        // a leftover. A volatile work directory may not be mounted again, so
        // each is new (`mktemp`), not named after a PID that comes round.
        s.push_str(&format!("mkdir -p {r}/ov/wk\n"));
        for d in ["etc", "usr/libexec", "usr/local"] {
            let key = d.replace('/', "_");
            s.push_str(&format!(
                "mkdir -p {r}/ov/up/{key}\n\
                 csb_ovwk=$(mktemp -d {r}/ov/wk/{key}.XXXXXX)\n\
                 mount -t overlay overlay -o volatile,lowerdir=/{d},upperdir={r}/ov/up/{key},workdir=$csb_ovwk /{d}\n"
            ));
        }
        // root's home in the user database stays /root: the world's own root
        // home is bound over it, so an install `--user root` (which resolves
        // the home from passwd) writes into the world, never this machine's /root.
        s.push_str(&format!("mount --bind {r}/homes/root /root\n"));
        s.push_str(CGROUP_VIEW);
        s
    }

    /// Run a root shell script inside the world's mount namespace, with no
    /// further setup (for installs and fixtures).
    pub(crate) fn run_root_raw(&self, script: &str) -> Output {
        let full = format!("{}\nset +e\n{script}\n", self.prelude());
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "bash", "-c", &full])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Place the product by hand (no installer): our binary, `real` as the
    /// real Claude Code, the shadow symlink, the git config template and `conf`.
    pub(crate) fn install_by_hand(&self, real: &Path, conf: &str) {
        let r = self.root.display();
        // A root launch masks what its walk does not examine whole (issue
        // #24), and the tests' worlds live under /var/tmp, many at once:
        // past the default bound a world's own files would vanish from its
        // root sessions. Every world widens it but those made
        // `with_default_root_view` (tests/rootview.rs, which tests the bound
        // itself, and tests/verify.rs, whose battery checks the default view).
        let own = self.default_root_view;
        let conf = if own || conf.contains("root-view-max-entries") {
            conf.to_string()
        } else {
            let sep = if conf.is_empty() || conf.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            format!("{conf}{sep}root-view-max-entries = 10000000\n")
        };
        std::fs::write(self.root.join("bin/conf"), conf).unwrap();
        let out = self.run_root_raw(&format!(
            "set -e\n\
             mkdir -p /usr/libexec/claude-sandbox\n\
             install -m 0755 {r}/bin/claude-sandbox /usr/libexec/claude-sandbox/claude-sandbox\n\
             install -m 0755 {real} /usr/libexec/claude-sandbox/claude\n\
             ln -sfn /usr/libexec/claude-sandbox/claude-sandbox /usr/local/bin/claude\n\
             install -m 0644 {gitconfig} /etc/claude-gitconfig\n\
             install -m 0644 {r}/bin/conf /etc/claude-sandbox.conf\n\
             install -m 0644 /dev/null /usr/libexec/claude-sandbox/launch.json\n\
             /usr/libexec/claude-sandbox/claude-sandbox install --repin >/dev/null\n",
            real = shell_quote(&real.to_string_lossy()),
            gitconfig = shell_quote(&self.fixture("etc/claude-gitconfig").to_string_lossy()),
        ));
        assert!(
            out.status.success(),
            "install_by_hand: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The probe as the real binary, jail off.
    pub(crate) fn with_probe(name: &str) -> World {
        let w = World::new(name);
        w.install_by_hand(&w.root.join("bin/probe"), "egress-jail = 0\n");
        w
    }

    /// A new world whose installs keep the product's default root view
    /// bound (`root-view-max-entries`) unless their configuration names
    /// one; every other world widens it.
    pub(crate) fn with_default_root_view(name: &str) -> World {
        let mut w = World::new(name);
        w.default_root_view = true;
        w
    }

    /// [`World::with_probe`] with the default root view.
    pub(crate) fn with_probe_default_root_view(name: &str) -> World {
        let w = World::with_default_root_view(name);
        w.install_by_hand(&w.root.join("bin/probe"), "egress-jail = 0\n");
        w
    }

    /// Build a command that runs `argv` as `who` in the world, from `who`'s
    /// workspace, with a clean environment (HOME, PATH, USER, TERM, LANG) plus `env`.
    pub(crate) fn command(&self, who: Who, env: &[(&str, &str)], argv: &[&str]) -> Command {
        self.command_in(who, &self.workspace(who), env, argv)
    }

    pub(crate) fn command_in(
        &self,
        who: Who,
        cwd: &Path,
        env: &[(&str, &str)],
        argv: &[&str],
    ) -> Command {
        self.command_with_setup(who, cwd, "", env, argv)
    }

    /// `claude shell SCRIPT` as `who` in its workspace, after the root shell
    /// commands `setup` ([`World::command_with_setup`]).
    pub(crate) fn shell_with_setup(&self, who: Who, setup: &str, script: &str) -> Command {
        let argv = ["claude", "shell", script];
        self.command_with_setup(who, &self.workspace(who), setup, &[], &argv)
    }

    /// Like [`World::command_in`], with extra root shell commands run in the
    /// world's mount namespace before dropping to `who`.
    pub(crate) fn command_with_setup(
        &self,
        who: Who,
        cwd: &Path,
        setup: &str,
        env: &[(&str, &str)],
        argv: &[&str],
    ) -> Command {
        let mut script = self.prelude();
        script.push_str(setup);
        script.push('\n');
        if who == Who::User {
            // pasta as a non-root user needs /dev/net/tun reachable; make a
            // private node (containers give it 0666) without touching the
            // host's. A link (a setup's stand-in for the devcontainer
            // feature's, tests/jail.rs) stays as the setup made it.
            script.push_str(
                "if [ -c /dev/net/tun ] && [ ! -L /dev/net/tun ]; then mount -t tmpfs -o mode=755 tmpfs /dev/net && mknod -m 666 /dev/net/tun c 10 200; fi\n",
            );
        }
        script.push_str(&format!(
            "cd {}\nset +e\n",
            shell_quote(&cwd.to_string_lossy())
        ));
        let mut envs: Vec<String> = vec![
            format!("HOME={}", self.home(who).display()),
            "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".into(),
            format!("USER={}", World::user_name(who)),
            "TERM=xterm-256color".into(),
            "LANG=C.UTF-8".into(),
        ];
        envs.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        let mut line = String::from("exec ");
        if who == Who::User {
            line.push_str(&format!(
                "setpriv --reuid={TEST_UID} --regid={TEST_UID} --init-groups "
            ));
        }
        line.push_str("env -i ");
        for e in envs.iter().chain(
            argv.iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .iter(),
        ) {
            line.push_str(&shell_quote(e));
            line.push(' ');
        }
        script.push_str(&line);
        let mut c = Command::new("unshare");
        c.args(["--mount", "--propagation", "private", "bash", "-c", &script]);
        c
    }

    /// Run and collect output (stdin closed unless `input` is given).
    pub(crate) fn run(&self, who: Who, env: &[(&str, &str)], argv: &[&str]) -> Output {
        self.command(who, env, argv)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

/// Run `cmd` inside the network namespace `ns` (created by the test).
pub(crate) fn in_netns(ns: &str, cmd: &Command) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    c
}

/// Quote for a POSIX shell.
/// World set-up that makes the kernel refuse a fresh procfs to a user
/// namespace, as container runtimes' over-mounts inside /proc do: the
/// launch then falls back to the host's /proc, read-only (decision 0003).
pub(crate) const REFUSE_FRESH_PROC: &str =
    "mount -t tmpfs -o ro tmpfs /proc/acpi || mount --bind /dev/null /proc/keys";

/// A port free on loopback now (for a listener a test starts next).
pub(crate) fn free_loopback_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Empty directory `dir` (a world's workspace, for the next user's turn),
/// never following a symlink in it.
pub(crate) fn empty_dir(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            std::fs::remove_dir_all(&p).unwrap();
        } else {
            std::fs::remove_file(&p).unwrap();
        }
    }
}

pub(crate) fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// stdout as text.
pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr as text.
pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Parse the probe's JSON report (the last line of stdout).
pub(crate) fn report(o: &Output) -> serde_json::Value {
    let out = stdout(o);
    let line = out
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no output; stderr: {}", stderr(o)));
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("bad report {line:?}: {e}; stderr: {}", stderr(o)))
}
