//! `claude-sandbox install` (SPEC §8), step by step.
//!
//! Idempotent and byte-stable: every file is written only when its content
//! or mode differs, so a second run changes no byte and no mtime. Everything
//! is validated before the first write (nothing half-installed on bad input).
//! A manifest records what install created, moved or merged, so uninstall
//! reverses exactly that and nothing else. `--prefix DIR` rebases every path
//! under a staging root (tests; no packages, nothing outside it).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::manifest::{fail, load_manifest, rebase, require_root, root_of, symlink, Ctx, MANIFEST};
use super::real_claude::{find_real_claude, supports_process_wrapper};
use crate::error::bad_input;
use crate::plan::managed_settings;
use crate::{config, launch::integrity, plan::gitconfig, sys::paths};

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
pub(super) const DISPLACED: &str = "/usr/libexec/claude-sandbox/displaced-claude";

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
    let real = find_real_claude(
        args.real_claude.as_deref(),
        args.claude_version.as_deref(),
        &root,
        &checked.user,
        &stray,
        &installed_real,
    )?;

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
    super::host_git::harden(&mut ctx)?;
    write_managed_settings(&mut ctx, checked.settings_text, &installed_real)?;
    set_allow_unwrapped(&mut ctx, args.allow_unwrapped)?;
    seed_user_files(&mut ctx, &checked.home, &checked.user)?;
    retire_stray(&mut ctx, real.origin.as_deref(), &stray)?;
    write_manifest(&mut ctx)?;
    report_placed(&ctx.placed);
    if args.prefix.is_none() {
        keep_root_view();
    }
    Ok(0)
}

/// Walk the system trees whole for the root view and keep what was found
/// (issue #48), so that the first root launch after install reuses it.
fn keep_root_view() {
    let bound = config::load(Path::new(paths::CONFIG_FILE), &|_| None)
        .map_or(config::ROOT_VIEW_MAX_ENTRIES, |l| {
            l.config.root_view_max_entries
        });
    for state in crate::launch::rootview::STATES {
        if Path::new(state).symlink_metadata().is_ok() {
            let _ = std::fs::remove_file(state);
        }
    }
    let t = std::time::Instant::now();
    let v = crate::launch::rootview::view(&[], bound, false);
    println!(
        "claude-sandbox: root view walked whole and kept: {} entries in {:.1} s, {} directories masked whole unexamined",
        v.examined,
        t.elapsed().as_secs_f64(),
        v.unfinished.len()
    );
}

/// What install checked before its first write, for the steps that follow.
struct Validated {
    /// The text of `--config`, already parsed once.
    conf_text: Option<String>,
    /// The user whose home gets the forge config directories and `~/.claude.json`.
    user: nix::unistd::User,
    /// That user's home, under the install root.
    home: PathBuf,
    /// The managed settings as found (see [`managed_settings()`]).
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
        // The endpoint variables take the values of install's own
        // environment: the operator's gateway, proxy and CA (decision 0031).
        let operator = managed_settings::OperatorEnv::from_process();
        managed_settings::merge_managed_for(t.as_deref(), wrapper, &operator)
            .map(|merged| (t.is_none(), merged))
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
    for d in crate::plan::HOME_FORGE {
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
