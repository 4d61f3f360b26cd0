//! `claude-sandbox uninstall` (SPEC §8): reverses exactly what the
//! manifest says install created, moved or merged, and nothing else: the
//! real binary goes back where install found it, our part of the managed
//! settings comes out, and what install created is removed, newest first.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::manifest::{fail, load_manifest, rebase, require_root, root_of, Manifest, MANIFEST};
use super::setup::DISPLACED;
use crate::plan::managed_settings;
use crate::sys::paths;

/// Command-line arguments of `claude-sandbox uninstall`.
#[derive(Debug, clap::Args)]
pub(crate) struct UninstallArgs {
    /// The staging root given to install.
    #[arg(long, value_name = "DIR")]
    prefix: Option<PathBuf>,
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
    super::host_git::unharden(&m.git_hardened)?;
    // The kept root views (issue #48), made by launches, not by install.
    for state in crate::launch::rootview::STATES {
        let kept = rebase(&root, Path::new(state));
        if kept.symlink_metadata().is_ok() {
            fs_err::remove_file(&kept)?;
        }
    }
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
