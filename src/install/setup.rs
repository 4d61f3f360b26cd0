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
use crate::plan::managed_settings;
use crate::{config, launch::integrity, plan::gitconfig, sys::paths};

/// The Claude Code version installed from npm unless `--claude-version` says otherwise.
const DEFAULT_CLAUDE_VERSION: &str = include_str!("../../etc/claude-code-version");

/// Command-line arguments of `claude-sandbox install`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Install under this staging root instead of / (for tests): no packages, nothing outside it.
    #[arg(long, value_name = "DIR")]
    prefix: Option<PathBuf>,
    /// The real Claude Code binary to relocate (default: the user's ~/.local/bin/claude, else npm).
    #[arg(long, value_name = "PATH")]
    real_claude: Option<PathBuf>,
    /// Claude Code version to fetch from the npm registry.
    #[arg(long, value_name = "VER")]
    claude_version: Option<String>,
    /// Do not install OS packages.
    #[arg(long)]
    no_packages: bool,
    /// Create /etc/claude-code/allow-unwrapped (the prompt gate lets unsandboxed sessions through).
    #[arg(long)]
    allow_unwrapped: bool,
    /// Install this file as /etc/claude-sandbox.conf, after validating it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The user whose home gets ~/.config/gh, ~/.config/glab-cli, ~/.claude.json (default: $SUDO_USER, else root).
    #[arg(long, value_name = "NAME")]
    user: Option<String>,
    /// Re-pin the real binary already in place (after showing old and new digests).
    #[arg(long, conflicts_with_all = ["real_claude", "claude_version", "config"])]
    repin: bool,
}

/// Command-line arguments of `claude-sandbox uninstall`.
#[derive(Debug, clap::Args)]
pub(crate) struct UninstallArgs {
    /// The staging root given to install.
    #[arg(long, value_name = "DIR")]
    prefix: Option<PathBuf>,
}

const MANIFEST: &str = "/usr/libexec/claude-sandbox/install-manifest.json";
/// What VS Code's Claude Code extension runs for its chat panel when the
/// devcontainer feature sets `claudeCode.claudeProcessWrapper` to it.
const VSCODE_WRAPPER: &str = "/usr/libexec/claude-sandbox/vscode-wrapper";
/// The extension runs its process wrapper as `WRAPPER BUNDLED_CLAUDE ARGS…`
/// (its own copy of the CLI first). That copy is never run: the arguments go
/// to the shadow, which launches the pinned real binary sandboxed.
const VSCODE_WRAPPER_SCRIPT: &str = "#!/bin/sh
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
    settings: managed_settings::Added,
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
fn rebase(root: &Path, abs: &Path) -> PathBuf {
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
pub(crate) fn main(args: &Args) -> anyhow::Result<i32> {
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
    let checked = validate(args, &root)?;
    if args.prefix.is_none() && !args.no_packages {
        install_packages()?;
    }
    let installed_real = rebase(&root, Path::new(paths::REAL_CLAUDE));
    let stray = checked.home.join(".local/bin/claude");
    let real = find_real_claude(args, &root, &checked.user, &stray, &installed_real)?;

    let mut ctx = Ctx {
        root: root.clone(),
        manifest: load_manifest(&root),
        placed: Vec::new(),
    };
    record_origin(&mut ctx, real.origin.as_deref(), &stray);
    stage_binaries(&mut ctx, &real.source, &installed_real)?;
    write_pin_and_record(&mut ctx, &installed_real)?;
    place_entries(&mut ctx)?;
    write_config_files(&mut ctx, checked.conf_text.as_deref())?;
    write_managed_settings(&mut ctx, checked.settings_text, &installed_real)?;
    set_allow_unwrapped(&mut ctx, args.allow_unwrapped)?;
    seed_user_files(&mut ctx, &checked.home, &checked.user)?;
    retire_stray(&mut ctx, real.origin.as_deref(), &stray)?;
    write_manifest(&mut ctx)?;
    report_placed(&ctx.placed);
    Ok(0)
}

/// What install checked before its first write, for the steps that follow.
struct Validated {
    /// The text of `--config`, already parsed once.
    conf_text: Option<String>,
    /// The user whose home gets the forge config directories and `~/.claude.json`.
    user: nix::unistd::User,
    /// That user's home, under the install root.
    home: PathBuf,
    /// The managed settings as found (see [`managed_settings`]).
    settings_text: Result<Option<String>, String>,
}

/// Check everything install needs before the first write, so bad input leaves nothing half-installed.
fn validate(args: &Args, root: &Path) -> anyhow::Result<Validated> {
    crate::launch::userns_available().map_err(|e| fail(format!("cannot install: {e}")))?;
    let conf_text = read_config_arg(args.config.as_deref())?;
    check_real_claude_arg(args.real_claude.as_deref())?;
    let user = resolve_user(args.user.as_deref())?;
    let home = rebase(root, &user.dir);
    let settings_text = managed_settings(root);
    Ok(Validated {
        conf_text,
        user,
        home,
        settings_text,
    })
}

/// The `--config` file's text, refused unless it parses, so a bad config is never installed.
fn read_config_arg(config: Option<&Path>) -> anyhow::Result<Option<String>> {
    match config {
        Some(f) => {
            let text =
                fs_err::read_to_string(f).map_err(|e| bad_input(format!("--config: {e}")))?;
            config::parse(&text, &f.display().to_string())?;
            Ok(Some(text))
        }
        None => Ok(None),
    }
}

/// Refuse a `--real-claude` that is not an executable file, before anything is copied.
fn check_real_claude_arg(real_claude: Option<&Path>) -> anyhow::Result<()> {
    if let Some(rc) = real_claude {
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
    Ok(())
}

/// The user whose home install seeds: `--user`, else who ran sudo (`$SUDO_USER`), else root.
fn resolve_user(user: Option<&str>) -> anyhow::Result<nix::unistd::User> {
    let user_name = user
        .map(str::to_string)
        .or_else(|| std::env::var("SUDO_USER").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "root".into());
    nix::unistd::User::from_name(&user_name)
        .ok()
        .flatten()
        .ok_or_else(|| bad_input(format!("--user {user_name}: no such user")))
}

/// Where the real binary comes from, and where it was found when install relocates it.
struct RealSource {
    /// The file to install as the real binary.
    source: PathBuf,
    /// The user's `~/.local/bin/claude`, not rebased (the manifest's form), when that is the source.
    origin: Option<PathBuf>,
}

/// The real binary, from what the user asked, in order: `--real-claude`, the
/// user's `~/.local/bin/claude`, the one already installed, else npm.
fn find_real_claude(
    args: &Args,
    root: &Path,
    user: &nix::unistd::User,
    stray: &Path,
    installed_real: &Path,
) -> anyhow::Result<RealSource> {
    let mut origin = None;
    let user_claude = if args.real_claude.is_some() {
        None
    } else {
        user_claude(root, stray, user)?
    };
    let source: PathBuf = if let Some(rc) = &args.real_claude {
        rc.clone()
    } else if let Some(found) = user_claude {
        origin = Some(user.dir.join(".local/bin/claude"));
        found
    } else if installed_real.exists() {
        installed_real.to_path_buf()
    } else {
        let version = args
            .claude_version
            .as_deref()
            .unwrap_or(DEFAULT_CLAUDE_VERSION.trim());
        let (_npm_dir, bin) = fetch_from_npm(version)?;
        bin
    };
    Ok(RealSource { source, origin })
}

/// Remember where the relocated binary was found (first install only), so uninstall can put it back.
fn record_origin(ctx: &mut Ctx, origin: Option<&Path>, stray: &Path) {
    if origin.is_some() && ctx.manifest.real_origin.is_none() {
        ctx.manifest.real_origin = origin.map(Path::to_path_buf);
        ctx.manifest.real_origin_link = std::fs::read_link(stray).ok();
    }
}

/// Copy this binary and the real Claude Code into place, each only when its bytes differ.
fn stage_binaries(ctx: &mut Ctx, source: &Path, installed_real: &Path) -> anyhow::Result<()> {
    ctx.dir(&ctx.at(paths::LIBEXEC_DIR), 0o755)?;
    let me = std::env::current_exe()?;
    let self_bin = ctx.at(paths::SELF_BIN);
    if me.canonicalize().ok() != self_bin.canonicalize().ok() {
        ctx.binary(&me, &self_bin)?;
    }
    if source != installed_real {
        ctx.binary(source, installed_real)?;
    }
    Ok(())
}

/// Write the pin of the real binary as installed, and the launch record's empty mount point.
fn write_pin_and_record(ctx: &mut Ctx, installed_real: &Path) -> anyhow::Result<()> {
    // The pin, of the file as installed.
    let pin = integrity::pin_of(installed_real)?;
    ctx.file(
        &ctx.at(paths::PIN_FILE),
        integrity::pin_text(&pin).as_bytes(),
        0o644,
    )?;
    // The launch record's mount point: empty outside; each launch binds what
    // it knew over it, read-only, for `verify` inside (§7).
    ctx.file(&ctx.at(paths::LAUNCH_RECORD), b"", 0o644)
}

/// Place the entries that lead to the sandbox: the wrapper (§6), the shadow, VS Code's wrapper script.
fn place_entries(ctx: &mut Ctx) -> anyhow::Result<()> {
    symlink(ctx, paths::SELF_BIN, managed_settings::WRAPPER)?;
    displace_foreign_shadow(ctx)?;
    symlink(ctx, paths::SELF_BIN, paths::SHADOW)?;
    // The entry VS Code's Claude Code extension runs (`claudeCode.claudeProcessWrapper`).
    ctx.file(
        &ctx.at(VSCODE_WRAPPER),
        VSCODE_WRAPPER_SCRIPT.as_bytes(),
        0o755,
    )
}

/// Move another `claude` that sits where the shadow goes aside, so uninstall can put it back.
fn displace_foreign_shadow(ctx: &mut Ctx) -> anyhow::Result<()> {
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
    Ok(())
}

/// Write the config (the given file, else keep an existing one, else the documented default) and the gitconfig.
fn write_config_files(ctx: &mut Ctx, conf_text: Option<&str>) -> anyhow::Result<()> {
    let conf = ctx.at(paths::CONFIG_FILE);
    match conf_text {
        Some(t) => ctx.file(&conf, t.as_bytes(), 0o644)?,
        None if conf.exists() => {}
        None => ctx.file(&conf, config::DEFAULT_CONFIG.as_bytes(), 0o644)?,
    }
    ctx.file(
        &ctx.at(paths::GITCONFIG),
        gitconfig::TEMPLATE.as_bytes(),
        0o644,
    )
}

/// Merge the guard hooks into the managed settings (merged, never owned), or warn and leave them alone.
fn write_managed_settings(
    ctx: &mut Ctx,
    settings_text: Result<Option<String>, String>,
    installed_real: &Path,
) -> anyhow::Result<()> {
    let settings = ctx.at(paths::MANAGED_SETTINGS);
    let wrapper = supports_process_wrapper(installed_real);
    match settings_text.and_then(|t| {
        managed_settings::merge_managed(t.as_deref(), wrapper).map(|merged| (t.is_none(), merged))
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
    Ok(())
}

/// Create the allow-unwrapped flag when asked, else remove a stale one, so the flag says what this run asked.
fn set_allow_unwrapped(ctx: &mut Ctx, allow: bool) -> anyhow::Result<()> {
    let flag = ctx.at(paths::ALLOW_UNWRAPPED);
    if allow {
        ctx.file(&flag, b"", 0o644)?;
    } else if flag.exists() {
        fs_err::remove_file(&flag)?;
        ctx.placed
            .push(format!("removed the stale {}", flag.display()));
    }
    Ok(())
}

/// Create the user's forge config directories and `~/.claude.json` when missing, owned by the user.
fn seed_user_files(ctx: &mut Ctx, home: &Path, user: &nix::unistd::User) -> anyhow::Result<()> {
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
    Ok(())
}

/// Remove the relocated binary from where PATH found it; only now, with everything else in place, is that safe.
fn retire_stray(ctx: &mut Ctx, origin: Option<&Path>, stray: &Path) -> anyhow::Result<()> {
    // A native install's symlink goes; the version it points at stays the user's.
    if origin.is_some() && stray.symlink_metadata().is_ok() {
        fs_err::remove_file(stray)?;
        ctx.placed.push(format!(
            "removed {} (it is now {})",
            stray.display(),
            paths::REAL_CLAUDE
        ));
    }
    Ok(())
}

/// Write the manifest last, naming itself, so uninstall reverses exactly what install did.
fn write_manifest(ctx: &mut Ctx) -> anyhow::Result<()> {
    let mpath = ctx.at(MANIFEST);
    if !mpath.exists() {
        // The manifest names itself, so uninstall removes it too.
        ctx.note_created(&mpath);
    }
    let manifest_text = serde_json::to_string_pretty(&ctx.manifest)? + "\n";
    ctx.file(&mpath, manifest_text.as_bytes(), 0o644)
}

/// Say what changed, or that nothing did, so a second run is visibly a no-op.
fn report_placed(placed: &[String]) {
    if placed.is_empty() {
        println!("claude-sandbox: already installed; nothing changed");
    } else {
        for p in placed {
            println!("claude-sandbox: {p}");
        }
        println!(
            "claude-sandbox: installed; `claude` now runs sandboxed (check: /usr/libexec/claude-sandbox/claude-sandbox doctor)"
        );
    }
}

/// The managed settings as they are: `Ok(None)` when there is no file,
/// `Err(why)` when it cannot be read as text (a FIFO, too large…; never
/// waited on). Like a file that is not JSON (the merge says so), SPEC §6
/// leaves it alone with a warning, and the rest installs.
fn managed_settings(root: &Path) -> Result<Option<String>, String> {
    use crate::sys::files::{read_text, ReadError};
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

fn version_at_least(v: &str, min: (u64, u64, u64)) -> bool {
    let parts: Vec<u64> = v.split('.').map(|p| p.parse().unwrap_or(0)).collect();
    parts.len() == 3 && (parts[0], parts[1], parts[2]) >= min
}

/// `claude-sandbox uninstall`.
pub(crate) fn uninstall(args: &UninstallArgs) -> anyhow::Result<i32> {
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
    restore_real_origin(&root, &m)?;
    unmerge_settings(&root, &m)?;
    remove_created(&root, &m)?;
    let flag = rebase(&root, Path::new(paths::ALLOW_UNWRAPPED));
    if flag.exists() && m.created.contains(&flag) {
        fs_err::remove_file(&flag)?;
    }
    println!("claude-sandbox: uninstalled");
    Ok(0)
}

/// Put the real binary back where install found it, so the user's own `claude` works again.
fn restore_real_origin(root: &Path, m: &Manifest) -> anyhow::Result<()> {
    let Some(origin) = &m.real_origin else {
        return Ok(());
    };
    let dest = rebase(root, origin);
    let installed_real = rebase(root, Path::new(paths::REAL_CLAUDE));
    if let (Some(t), Err(_)) = (origin_link(root, m, &dest), dest.symlink_metadata()) {
        relink_origin(&dest, t)?;
    } else if !dest.exists() && installed_real.exists() {
        if let Some(p) = dest.parent() {
            fs_err::create_dir_all(p)?;
        }
        fs_err::copy(&installed_real, &dest)?;
        if let Ok(meta) = dest.parent().unwrap_or(Path::new("/")).metadata() {
            let _ = nix::unistd::chown(&dest, Some(meta.uid().into()), Some(meta.gid().into()));
        }
        println!("claude-sandbox: restored {}", dest.display());
    }
    Ok(())
}

/// The link target recorded for `dest`, when the version file it leads to is still there (a link comes back as that link).
fn origin_link<'m>(root: &Path, m: &'m Manifest, dest: &Path) -> Option<&'m PathBuf> {
    m.real_origin_link.as_ref().filter(|t| {
        let resolved = if t.is_absolute() {
            rebase(root, t)
        } else {
            dest.parent().unwrap_or(Path::new("/")).join(t)
        };
        resolved.is_file()
    })
}

/// Recreate the user's `~/.local/bin/claude` link to `target`, owned like its directory.
fn relink_origin(dest: &Path, target: &Path) -> anyhow::Result<()> {
    let owner = dest
        .parent()
        .and_then(|p| p.metadata().ok())
        .map(|m| (m.uid(), m.gid()));
    if let Some(p) = dest.parent() {
        fs_err::create_dir_all(p)?;
    }
    std::os::unix::fs::symlink(target, dest)?;
    if let Some((uid, gid)) = owner {
        let _ = std::os::unix::fs::lchown(dest, Some(uid), Some(gid));
    }
    println!(
        "claude-sandbox: restored {} -> {}",
        dest.display(),
        target.display()
    );
    Ok(())
}

/// Take our part out of the managed settings and keep foreign keys, since the file is merged, never owned.
fn unmerge_settings(root: &Path, m: &Manifest) -> anyhow::Result<()> {
    let settings = rebase(root, Path::new(paths::MANAGED_SETTINGS));
    if let Ok(text) = std::fs::read_to_string(&settings) {
        match managed_settings::unmerge_managed(&text, &m.settings) {
            Some(t) if t != text => fs_err::write(&settings, t)?,
            Some(_) => {}
            None if m.settings_created => fs_err::remove_file(&settings)?,
            None => fs_err::write(&settings, "{}\n")?,
        }
    }
    Ok(())
}

/// Remove what install created, newest first (a user file only if untouched), and put a displaced `claude` back.
fn remove_created(root: &Path, m: &Manifest) -> anyhow::Result<()> {
    let at = |abs: &str| rebase(root, Path::new(abs));
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
    Ok(())
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
