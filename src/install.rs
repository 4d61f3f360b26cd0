//! `claude-sandbox install`, `uninstall` (SPEC §8).
//!
//! Idempotent and byte-stable: every file is written only when its content
//! or mode differs, so a second run changes no byte and no mtime. Everything
//! is validated before the first write (nothing half-installed on bad input).
//! A manifest records what install created, moved or merged, so uninstall
//! reverses exactly that and nothing else. `--prefix DIR` rebases every path
//! under a staging root (tests; no packages, nothing outside it).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::error::{bad_input, Fail};
use crate::{config, gitconfig, hooks, integrity, paths};

/// The Claude Code version installed from npm unless `--claude-version` says otherwise.
pub const DEFAULT_CLAUDE_VERSION: &str = include_str!("../etc/claude-code-version");

/// Command-line arguments of `claude-sandbox install`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Install under this staging root instead of / (for tests): no packages, nothing outside it.
    #[arg(long, value_name = "DIR")]
    pub prefix: Option<PathBuf>,
    /// The real Claude Code binary to relocate (default: the user's ~/.local/bin/claude, else npm).
    #[arg(long, value_name = "PATH")]
    pub real_claude: Option<PathBuf>,
    /// Claude Code version to fetch from the npm registry.
    #[arg(long, value_name = "VER")]
    pub claude_version: Option<String>,
    /// Do not install OS packages.
    #[arg(long)]
    pub no_packages: bool,
    /// Create /etc/claude-code/allow-unwrapped (the prompt gate lets unsandboxed sessions through).
    #[arg(long)]
    pub allow_unwrapped: bool,
    /// Install this file as /etc/claude-sandbox.conf, after validating it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The user whose home gets ~/.config/gh, ~/.config/glab-cli, ~/.claude.json (default: $SUDO_USER, else root).
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// Re-pin the real binary already in place (after showing old and new digests).
    #[arg(long, conflicts_with_all = ["real_claude", "claude_version", "config"])]
    pub repin: bool,
}

/// Command-line arguments of `claude-sandbox uninstall`.
#[derive(Debug, clap::Args)]
pub struct UninstallArgs {
    /// The staging root given to install.
    #[arg(long, value_name = "DIR")]
    pub prefix: Option<PathBuf>,
}

const MANIFEST: &str = "/usr/libexec/claude-sandbox/install-manifest.json";
/// What VS Code's Claude Code extension runs for its chat panel when the
/// devcontainer feature sets `claudeCode.claudeProcessWrapper` to it.
pub const VSCODE_WRAPPER: &str = "/usr/libexec/claude-sandbox/vscode-wrapper";
/// The extension runs its process wrapper as `WRAPPER BUNDLED_CLAUDE ARGS…`
/// (its own copy of the CLI first). That copy is never run: the arguments go
/// to the shadow, which launches the pinned real binary sandboxed.
pub const VSCODE_WRAPPER_SCRIPT: &str = "#!/bin/sh
# Written by claude-sandbox install. VS Code's Claude Code extension runs this
# (claudeCode.claudeProcessWrapper) as: vscode-wrapper BUNDLED_CLAUDE ARGS...
# The extension's bundled CLI is never run; the shadow launches the pinned
# Claude Code inside the sandbox with the remaining arguments.
case \"${1-}\" in
/*) if [ -f \"$1\" ]; then shift; fi ;;
esac
exec /usr/local/bin/claude \"$@\"
";
const DISPLACED: &str = "/usr/libexec/claude-sandbox/displaced-claude";

/// What install did, for uninstall.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Manifest {
    /// Paths install created (files, symlinks, directories), in creation order.
    created: Vec<PathBuf>,
    /// Where the real binary was found, when install moved it from there.
    real_origin: Option<PathBuf>,
    /// The target of `real_origin` when it was a symlink (a native install's
    /// link into `~/.local/share/claude/versions/`), restored as a link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    real_origin_link: Option<PathBuf>,
    /// What the managed-settings merge added.
    settings: hooks::Added,
    /// Whether install created the managed settings file.
    settings_created: bool,
}

struct Ctx {
    root: PathBuf,
    manifest: Manifest,
    placed: Vec<String>,
}

impl Ctx {
    fn at(&self, abs: &str) -> PathBuf {
        rebase(&self.root, Path::new(abs))
    }

    fn note_created(&mut self, p: &Path) {
        if !self.manifest.created.iter().any(|c| c == p) {
            self.manifest.created.push(p.to_path_buf());
        }
    }

    fn dir(&mut self, p: &Path, mode: u32) -> anyhow::Result<()> {
        let mut missing = Vec::new();
        let mut cur = Some(p);
        while let Some(c) = cur {
            if c.exists() {
                break;
            }
            missing.push(c.to_path_buf());
            cur = c.parent();
        }
        for m in missing.into_iter().rev() {
            fs_err::create_dir(&m)?;
            fs_err::set_permissions(&m, std::fs::Permissions::from_mode(mode))?;
            self.note_created(&m);
        }
        Ok(())
    }

    /// Write `content` at `p` with `mode`, only when something differs.
    fn file(&mut self, p: &Path, content: &[u8], mode: u32) -> anyhow::Result<()> {
        if let Some(parent) = p.parent() {
            self.dir(parent, 0o755)?;
        }
        let existed = p.symlink_metadata().is_ok();
        if std::fs::read(p).ok().as_deref() != Some(content) {
            let tmp = p.with_extension("claude-sandbox-new");
            fs_err::write(&tmp, content)?;
            fs_err::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
            fs_err::rename(&tmp, p)?;
            self.placed.push(format!("wrote {}", p.display()));
        }
        if fs_err::metadata(p)?.permissions().mode() & 0o7777 != mode {
            fs_err::set_permissions(p, std::fs::Permissions::from_mode(mode))?;
        }
        if !existed {
            self.note_created(p);
        }
        Ok(())
    }

    /// Copy the file at `src` to `p` (0755), only when the bytes differ.
    fn binary(&mut self, src: &Path, p: &Path) -> anyhow::Result<()> {
        let same = p.exists()
            && fs_err::metadata(src)?.len() == fs_err::metadata(p)?.len()
            && integrity::sha256_file(src)? == integrity::sha256_file(p)?;
        if !same {
            if let Some(parent) = p.parent() {
                self.dir(parent, 0o755)?;
            }
            let existed = p.exists();
            let tmp = p.with_extension("claude-sandbox-new");
            fs_err::copy(src, &tmp)?;
            fs_err::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
            fs_err::rename(&tmp, p)?;
            self.placed.push(format!(
                "installed {} (from {})",
                p.display(),
                src.display()
            ));
            if !existed {
                self.note_created(p);
            }
        }
        Ok(())
    }
}

/// `abs` under `root`.
pub fn rebase(root: &Path, abs: &Path) -> PathBuf {
    root.join(abs.strip_prefix("/").unwrap_or(abs))
}

fn fail(msg: impl Into<String>) -> anyhow::Error {
    Fail::new(1, msg).into()
}

fn require_root(what: &str) -> anyhow::Result<()> {
    if !nix::unistd::geteuid().is_root() {
        return Err(fail(format!(
            "claude-sandbox {what} must run as root: it writes /usr/local/bin, /usr/libexec/claude-sandbox and /etc; run: sudo claude-sandbox {what}"
        )));
    }
    Ok(())
}

fn root_of(prefix: &Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match prefix {
        None => Ok(PathBuf::from("/")),
        Some(p) => {
            if !p.is_absolute() {
                return Err(bad_input(format!(
                    "--prefix {}: give an absolute path",
                    p.display()
                )));
            }
            if !p.is_dir() {
                return Err(bad_input(format!(
                    "--prefix {}: not a directory; create it first",
                    p.display()
                )));
            }
            Ok(p.canonicalize()?)
        }
    }
}

fn load_manifest(root: &Path) -> Manifest {
    std::fs::read_to_string(rebase(root, Path::new(MANIFEST)))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// `claude-sandbox install`.
pub fn main(args: &Args) -> anyhow::Result<i32> {
    require_root("install")?;
    let root = root_of(&args.prefix)?;
    if args.repin {
        return repin(&root);
    }
    if crate::testhooks::BUILT_WITH_MUTATIONS {
        return Err(bad_input(
            "refusing to install this claude-sandbox: it was built with the test-only feature `test-mutations`, whose deliberate regressions weaken the sandbox; build and install a normal one: bash scripts/setup.sh",
        ));
    }
    // Validate everything before the first write.
    crate::launch::userns_available().map_err(|e| fail(format!("cannot install: {e}")))?;
    let conf_text = match &args.config {
        Some(f) => {
            let text =
                fs_err::read_to_string(f).map_err(|e| bad_input(format!("--config: {e}")))?;
            config::parse(&text, &f.display().to_string())?;
            Some(text)
        }
        None => None,
    };
    if let Some(rc) = &args.real_claude {
        let ok = rc
            .metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        if !ok {
            return Err(bad_input(format!(
                "--real-claude {}: not an executable file",
                rc.display()
            )));
        }
    }
    let user_name = args
        .user
        .clone()
        .or_else(|| std::env::var("SUDO_USER").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "root".into());
    let user = nix::unistd::User::from_name(&user_name)
        .ok()
        .flatten()
        .ok_or_else(|| bad_input(format!("--user {user_name}: no such user")))?;
    let home = rebase(&root, &user.dir);
    let settings_text = managed_settings(&root);
    if args.prefix.is_none() && !args.no_packages {
        install_packages()?;
    }
    // The real binary, from what the user asked, in order.
    let installed_real = rebase(&root, Path::new(paths::REAL_CLAUDE));
    let stray = home.join(".local/bin/claude");
    let mut origin = None;
    let mut _npm_dir = None;
    let user_claude = if args.real_claude.is_some() {
        None
    } else {
        user_claude(&root, &stray, &user)?
    };
    let source: PathBuf = if let Some(rc) = &args.real_claude {
        rc.clone()
    } else if let Some(found) = user_claude {
        origin = Some(user.dir.join(".local/bin/claude"));
        found
    } else if installed_real.exists() {
        installed_real.clone()
    } else {
        let version = args
            .claude_version
            .as_deref()
            .unwrap_or(DEFAULT_CLAUDE_VERSION.trim());
        let (dir, bin) = fetch_from_npm(version)?;
        _npm_dir = Some(dir);
        bin
    };

    let mut ctx = Ctx {
        root: root.clone(),
        manifest: load_manifest(&root),
        placed: Vec::new(),
    };
    if origin.is_some() && ctx.manifest.real_origin.is_none() {
        ctx.manifest.real_origin = origin.clone();
        ctx.manifest.real_origin_link = std::fs::read_link(&stray).ok();
    }
    ctx.dir(&ctx.at(paths::LIBEXEC_DIR), 0o755)?;
    let me = std::env::current_exe()?;
    let self_bin = ctx.at(paths::SELF_BIN);
    if me.canonicalize().ok() != self_bin.canonicalize().ok() {
        ctx.binary(&me, &self_bin)?;
    }
    if source != installed_real {
        ctx.binary(&source, &installed_real)?;
    }
    // The pin, of the file as installed.
    let pin = integrity::pin_of(&installed_real)?;
    ctx.file(
        &ctx.at(paths::PIN_FILE),
        integrity::pin_text(&pin).as_bytes(),
        0o644,
    )?;
    // The launch record's mount point: empty outside; each launch binds what
    // it knew over it, read-only, for `verify` inside (§7).
    ctx.file(&ctx.at(paths::LAUNCH_RECORD), b"", 0o644)?;
    // The wrapper entry (§6) and the shadow.
    symlink(&mut ctx, paths::SELF_BIN, hooks::WRAPPER)?;
    let shadow = ctx.at(paths::SHADOW);
    if let Ok(m) = shadow.symlink_metadata() {
        let ours = m.file_type().is_symlink()
            && std::fs::read_link(&shadow).ok().as_deref() == Some(Path::new(paths::SELF_BIN));
        if !ours {
            // Another `claude` (an npm global install, say) sits where the shadow goes.
            fs_err::rename(&shadow, ctx.at(DISPLACED))?;
            ctx.note_created(&ctx.at(DISPLACED));
            ctx.placed.push(format!(
                "moved the previous {} aside to {DISPLACED}",
                paths::SHADOW
            ));
        }
    }
    symlink(&mut ctx, paths::SELF_BIN, paths::SHADOW)?;
    // The entry VS Code's Claude Code extension runs (`claudeCode.claudeProcessWrapper`).
    ctx.file(
        &ctx.at(VSCODE_WRAPPER),
        VSCODE_WRAPPER_SCRIPT.as_bytes(),
        0o755,
    )?;
    // Config: the given file, else keep an existing one, else the documented default.
    let conf = ctx.at(paths::CONFIG_FILE);
    match &conf_text {
        Some(t) => ctx.file(&conf, t.as_bytes(), 0o644)?,
        None if conf.exists() => {}
        None => ctx.file(&conf, config::DEFAULT_CONFIG.as_bytes(), 0o644)?,
    }
    ctx.file(
        &ctx.at(paths::GITCONFIG),
        gitconfig::TEMPLATE.as_bytes(),
        0o644,
    )?;
    // Managed settings: merged, never owned.
    let settings = ctx.at(paths::MANAGED_SETTINGS);
    let wrapper = supports_process_wrapper(&installed_real);
    match settings_text.and_then(|t| {
        hooks::merge_managed(t.as_deref(), wrapper).map(|merged| (t.is_none(), merged))
    }) {
        Ok((created, (text, added))) => {
            if created {
                ctx.manifest.settings_created = true;
            }
            ctx.manifest.settings.absorb(added);
            ctx.file(&settings, text.as_bytes(), 0o644)?;
        }
        Err(why) => eprintln!(
            "claude-sandbox: warning: {} left untouched: {why}; the guard hooks are NOT installed until it is valid JSON",
            settings.display()
        ),
    }
    let flag = ctx.at(paths::ALLOW_UNWRAPPED);
    if args.allow_unwrapped {
        ctx.file(&flag, b"", 0o644)?;
    } else if flag.exists() {
        fs_err::remove_file(&flag)?;
        ctx.placed
            .push(format!("removed the stale {}", flag.display()));
    }
    // The user's files.
    for d in [".config/gh", ".config/glab-cli"] {
        let p = home.join(d);
        if !p.exists() {
            let before = ctx.manifest.created.len();
            ctx.dir(&p, 0o700)?;
            for c in &ctx.manifest.created[before..] {
                let _ = nix::unistd::chown(c, Some(user.uid), Some(user.gid));
            }
        }
    }
    let cj = home.join(".claude.json");
    if !cj.exists() {
        ctx.file(&cj, b"{}\n", 0o600)?;
        let _ = nix::unistd::chown(&cj, Some(user.uid), Some(user.gid));
    }
    // Only now is the relocated binary safe to remove from where PATH found it
    // (a native install's symlink goes; the version it points at stays the user's).
    if origin.is_some() && stray.symlink_metadata().is_ok() {
        fs_err::remove_file(&stray)?;
        ctx.placed.push(format!(
            "removed {} (it is now {})",
            stray.display(),
            paths::REAL_CLAUDE
        ));
    }
    let mpath = ctx.at(MANIFEST);
    if !mpath.exists() {
        // The manifest names itself, so uninstall removes it too.
        ctx.note_created(&mpath);
    }
    let manifest_text = serde_json::to_string_pretty(&ctx.manifest)? + "\n";
    ctx.file(&mpath, manifest_text.as_bytes(), 0o644)?;
    if ctx.placed.is_empty() {
        println!("claude-sandbox: already installed; nothing changed");
    } else {
        for p in &ctx.placed {
            println!("claude-sandbox: {p}");
        }
        println!(
            "claude-sandbox: installed; `claude` now runs sandboxed (check: /usr/libexec/claude-sandbox/claude-sandbox doctor)"
        );
    }
    Ok(0)
}

/// The managed settings as they are: `Ok(None)` when there is no file,
/// `Err(why)` when it cannot be read as text (a FIFO, too large…; never
/// waited on). Like a file that is not JSON (the merge says so), SPEC §6
/// leaves it alone with a warning, and the rest installs.
fn managed_settings(root: &Path) -> Result<Option<String>, String> {
    use crate::files::{read_text, ReadError};
    match read_text(&rebase(root, Path::new(paths::MANAGED_SETTINGS))) {
        Ok(t) => Ok(Some(t)),
        Err(ReadError::Missing) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

fn symlink(ctx: &mut Ctx, target: &str, at: &str) -> anyhow::Result<()> {
    let p = ctx.at(at);
    if std::fs::read_link(&p).ok().as_deref() == Some(Path::new(target)) {
        return Ok(());
    }
    if let Some(parent) = p.parent() {
        ctx.dir(parent, 0o755)?;
    }
    let existed = p.symlink_metadata().is_ok();
    if existed {
        fs_err::remove_file(&p)?;
    }
    std::os::unix::fs::symlink(target, &p)?;
    ctx.placed
        .push(format!("linked {} -> {target}", p.display()));
    if !existed {
        ctx.note_created(&p);
    }
    Ok(())
}

fn repin(root: &Path) -> anyhow::Result<i32> {
    let bin = rebase(root, Path::new(paths::REAL_CLAUDE));
    let pin_path = rebase(root, Path::new(paths::PIN_FILE));
    if !bin.exists() {
        return Err(fail(format!(
            "nothing to re-pin: {} is missing; run claude-sandbox install",
            bin.display()
        )));
    }
    let old = std::fs::read_to_string(&pin_path)
        .ok()
        .and_then(|t| serde_json::from_str::<integrity::Pin>(&t).ok())
        .map_or("(none)".to_string(), |p| p.sha256);
    let pin = integrity::pin_of(&bin)?;
    println!("claude-sandbox: old pin sha256 {old}");
    println!(
        "claude-sandbox: new pin sha256 {} ({} bytes)",
        pin.sha256, pin.size
    );
    let text = integrity::pin_text(&pin);
    if std::fs::read_to_string(&pin_path).ok().as_deref() != Some(text.as_str()) {
        let tmp = pin_path.with_extension("claude-sandbox-new");
        fs_err::write(&tmp, &text)?;
        fs_err::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))?;
        fs_err::rename(&tmp, &pin_path)?;
    }
    Ok(0)
}

fn install_packages() -> anyhow::Result<()> {
    let wanted = [
        ("bubblewrap", "bwrap"),
        ("passt", "pasta"),
        ("iproute2", "ip"),
        ("git", "git"),
    ];
    let missing: Vec<&str> = wanted
        .iter()
        .filter(|(_, cmd)| {
            !["/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"]
                .iter()
                .any(|d| Path::new(d).join(cmd).exists())
        })
        .map(|(pkg, _)| *pkg)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !Path::new("/usr/bin/apt-get").exists() {
        return Err(fail(format!(
            "cannot install packages here (no apt-get: not Debian/Ubuntu); install {} yourself, then re-run with --no-packages",
            missing.join(", ")
        )));
    }
    let st = Command::new("/usr/bin/apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()?;
    if !st.success() {
        return Err(fail(format!(
            "apt-get install {} failed; run `apt-get update` and retry",
            missing.join(" ")
        )));
    }
    Ok(())
}

/// The user's `~/.local/bin/claude` as the file to relocate: the file itself,
/// or the file its symlink leads to (Claude Code's native installer links it
/// into `~/.local/share/claude/versions/`). `None` when there is none (a
/// dangling link included). A link is followed only to an executable regular
/// file the user owns, or a world-readable one root owns: root copies it to a
/// world-readable place, so it must not be a file the user could not read.
fn user_claude(
    root: &Path,
    stray: &Path,
    user: &nix::unistd::User,
) -> anyhow::Result<Option<PathBuf>> {
    let Ok(m) = stray.symlink_metadata() else {
        return Ok(None);
    };
    if m.is_file() {
        return Ok(Some(stray.to_path_buf()));
    }
    if !m.file_type().is_symlink() {
        return Ok(None);
    }
    let mut p = stray.to_path_buf();
    for _ in 0..40 {
        let Ok(m) = p.symlink_metadata() else {
            return Ok(None);
        };
        if !m.file_type().is_symlink() {
            let owner_ok = m.uid() == user.uid.as_raw() || (m.uid() == 0 && m.mode() & 0o004 != 0);
            if m.is_file() && m.mode() & 0o111 != 0 && owner_ok {
                return Ok(Some(p));
            }
            return Err(bad_input(format!(
                "{} links to {}, which is not an executable file owned by {} (or a world-readable one owned by root); remove the link, or pass --real-claude PATH",
                stray.display(),
                p.display(),
                user.name
            )));
        }
        let target = fs_err::read_link(&p)?;
        // Absolute targets are relative to the install root (a staging --prefix).
        p = if target.is_absolute() {
            rebase(root, &target)
        } else {
            p.parent().unwrap_or(Path::new("/")).join(target)
        };
    }
    Err(bad_input(format!(
        "{}: too many levels of symbolic links; remove it, or pass --real-claude PATH",
        stray.display()
    )))
}

/// npm: the distribution's, else the first on PATH (the devcontainer node
/// feature installs it under /usr/local/share/nvm). The installer runs as
/// root, so PATH is root's own.
fn find_npm() -> Option<PathBuf> {
    let fixed = ["/usr/bin/npm", "/usr/local/bin/npm"].map(PathBuf::from);
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .filter(|d| d.is_absolute())
                .map(|d| d.join("npm"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    fixed.into_iter().chain(on_path).find(|p| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

fn fetch_from_npm(version: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
    let npm = find_npm().ok_or_else(|| {
        fail("no real Claude Code binary given and npm is not installed: pass --real-claude PATH, or install npm (apt-get install npm)")
    })?;
    let dir = nix::unistd::mkdtemp(&std::env::temp_dir().join("claude-sandbox-npm-XXXXXX"))?;
    let st = Command::new(npm)
        .args([
            "install",
            // No package script runs as root: the platform binary arrives as
            // an optional dependency, not from a script.
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--prefix",
        ])
        .arg(&dir)
        .arg(format!("@anthropic-ai/claude-code@{version}"))
        .status()?;
    let arch = if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "x64"
    };
    let bin = dir.join(format!(
        "node_modules/@anthropic-ai/claude-code-linux-{arch}/claude"
    ));
    if !st.success() || !bin.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(fail(format!("npm could not provide @anthropic-ai/claude-code@{version} for linux-{arch}; pass --real-claude PATH")));
    }
    Ok((dir, bin))
}

/// Claude Code honours CLAUDE_CODE_PROCESS_WRAPPER from v2.1.208.
///
/// Asking the binary means running it, and it is the very binary about to be
/// pinned, perhaps found in a user's home: never as root with our
/// environment. It runs as `nobody`, with an empty environment, from `/`,
/// for 10 s at most; anything else counts as "not supported".
fn supports_process_wrapper(real: &Path) -> bool {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    const NOBODY: u32 = 65534;
    let mut cmd = Command::new(real);
    cmd.arg("--version")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    unsafe {
        cmd.pre_exec(|| {
            use nix::libc;
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(NOBODY) != 0
                || libc::setuid(NOBODY) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let Ok(mut child) = cmd.spawn() else {
        return false;
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
        }
    }
    let mut v = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut v);
    }
    version_at_least(v.split_whitespace().next().unwrap_or(""), (2, 1, 208))
}

pub fn version_at_least(v: &str, min: (u64, u64, u64)) -> bool {
    let parts: Vec<u64> = v.split('.').map(|p| p.parse().unwrap_or(0)).collect();
    parts.len() == 3 && (parts[0], parts[1], parts[2]) >= min
}

/// `claude-sandbox uninstall`.
pub fn uninstall(args: &UninstallArgs) -> anyhow::Result<i32> {
    require_root("uninstall")?;
    let root = root_of(&args.prefix)?;
    let mpath = rebase(&root, Path::new(MANIFEST));
    if !mpath.exists() {
        return Err(fail(format!(
            "nothing to uninstall: {} is missing",
            mpath.display()
        )));
    }
    let m = load_manifest(&root);
    let at = |abs: &str| rebase(&root, Path::new(abs));
    // The real binary back where it was found.
    if let Some(origin) = &m.real_origin {
        let dest = rebase(&root, origin);
        let owner = dest
            .parent()
            .and_then(|p| p.metadata().ok())
            .map(|m| (m.uid(), m.gid()));
        // A link whose version file is still there comes back as that link.
        let link_target = m.real_origin_link.as_ref().filter(|t| {
            let resolved = if t.is_absolute() {
                rebase(&root, t)
            } else {
                dest.parent().unwrap_or(Path::new("/")).join(t)
            };
            resolved.is_file()
        });
        if let (Some(t), Err(_)) = (link_target, dest.symlink_metadata()) {
            if let Some(p) = dest.parent() {
                fs_err::create_dir_all(p)?;
            }
            std::os::unix::fs::symlink(t, &dest)?;
            if let Some((uid, gid)) = owner {
                let _ = std::os::unix::fs::lchown(&dest, Some(uid), Some(gid));
            }
            println!(
                "claude-sandbox: restored {} -> {}",
                dest.display(),
                t.display()
            );
        } else if !dest.exists() && at(paths::REAL_CLAUDE).exists() {
            if let Some(p) = dest.parent() {
                fs_err::create_dir_all(p)?;
            }
            fs_err::copy(at(paths::REAL_CLAUDE), &dest)?;
            if let Ok(meta) = dest.parent().unwrap_or(Path::new("/")).metadata() {
                let _ = nix::unistd::chown(&dest, Some(meta.uid().into()), Some(meta.gid().into()));
            }
            println!("claude-sandbox: restored {}", dest.display());
        }
    }
    // The managed settings: our part out, foreign keys kept.
    let settings = at(paths::MANAGED_SETTINGS);
    if let Ok(text) = std::fs::read_to_string(&settings) {
        match hooks::unmerge_managed(&text, &m.settings) {
            Some(t) if t != text => fs_err::write(&settings, t)?,
            Some(_) => {}
            None if m.settings_created => fs_err::remove_file(&settings)?,
            None => fs_err::write(&settings, "{}\n")?,
        }
    }
    // What install created, newest first; a user file only if untouched.
    for p in m.created.iter().rev() {
        let Ok(meta) = p.symlink_metadata() else {
            continue;
        };
        if p.ends_with(".claude.json") && std::fs::read(p).ok().as_deref() != Some(b"{}\n") {
            continue;
        }
        if p == &at(DISPLACED) {
            fs_err::rename(p, at(paths::SHADOW)).or_else(|_| fs_err::remove_file(p))?;
            continue;
        }
        if meta.is_dir() {
            let _ = std::fs::remove_dir(p); // only when empty
        } else if p != &at(paths::SHADOW) || !at(DISPLACED).exists() {
            fs_err::remove_file(p)?;
        }
    }
    let flag = at(paths::ALLOW_UNWRAPPED);
    if flag.exists() && m.created.contains(&flag) {
        fs_err::remove_file(&flag)?;
    }
    println!("claude-sandbox: uninstalled");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert!(version_at_least("2.1.330", (2, 1, 208)));
        assert!(version_at_least("2.1.208", (2, 1, 208)));
        assert!(!version_at_least("2.1.207", (2, 1, 208)));
        assert!(!version_at_least("garbage", (2, 1, 208)));
        assert!(version_at_least("3.0.0", (2, 1, 208)));
    }

    #[test]
    fn rebasing() {
        assert_eq!(
            rebase(Path::new("/stage"), Path::new("/etc/x")),
            PathBuf::from("/stage/etc/x")
        );
        assert_eq!(
            rebase(Path::new("/"), Path::new("/etc/x")),
            PathBuf::from("/etc/x")
        );
    }
}
