//! The install root and the manifest: every path rebased under `--prefix`,
//! the idempotent writer ([`Ctx`]: a file, directory, binary or link is
//! written only when something differs) that records what it created, and
//! the checks install and uninstall share (root, the prefix).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{bad_input, Fail};
use crate::launch::integrity;
use crate::plan::managed_settings;

pub(super) const MANIFEST: &str = "/usr/libexec/claude-sandbox/install-manifest.json";

/// What install did, for uninstall.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Manifest {
    /// Paths install created (files, symlinks, directories), in creation order.
    pub(super) created: Vec<PathBuf>,
    /// Where the real binary was found, when install moved it from there.
    pub(super) real_origin: Option<PathBuf>,
    /// The target of `real_origin` when it was a symlink (a native install's
    /// link into `~/.local/share/claude/versions/`), restored as a link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) real_origin_link: Option<PathBuf>,
    /// What the managed-settings merge added.
    pub(super) settings: managed_settings::Added,
    /// Whether install created the managed settings file.
    pub(super) settings_created: bool,
    /// The system git configs install appended `safe.bareRepository` to
    /// (uninstall takes out that text only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) git_hardened: Vec<Appended>,
}

/// One system config the host git hardening (`host_git.rs`) appended to:
/// the file (under the install root), the exact text added, and whether
/// install created the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Appended {
    pub(super) path: PathBuf,
    pub(super) text: String,
    pub(super) created: bool,
}

pub(super) struct Ctx {
    pub(super) root: PathBuf,
    pub(super) manifest: Manifest,
    pub(super) placed: Vec<String>,
}

impl Ctx {
    pub(super) fn at(&self, abs: &str) -> PathBuf {
        rebase(&self.root, Path::new(abs))
    }

    pub(super) fn note_created(&mut self, p: &Path) {
        if !self.manifest.created.iter().any(|c| c == p) {
            self.manifest.created.push(p.to_path_buf());
        }
    }

    pub(super) fn dir(&mut self, p: &Path, mode: u32) -> anyhow::Result<()> {
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
    pub(super) fn file(&mut self, p: &Path, content: &[u8], mode: u32) -> anyhow::Result<()> {
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
    pub(super) fn binary(&mut self, src: &Path, p: &Path) -> anyhow::Result<()> {
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

pub(super) fn symlink(ctx: &mut Ctx, target: &str, at: &str) -> anyhow::Result<()> {
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

/// `abs` under `root`.
pub(super) fn rebase(root: &Path, abs: &Path) -> PathBuf {
    root.join(abs.strip_prefix("/").unwrap_or(abs))
}

pub(super) fn fail(msg: impl Into<String>) -> anyhow::Error {
    Fail::new(1, msg).into()
}

pub(super) fn require_root(what: &str) -> anyhow::Result<()> {
    if !nix::unistd::geteuid().is_root() {
        return Err(fail(format!(
            "claude-sandbox {what} must run as root: it writes /usr/local/bin, /usr/libexec/claude-sandbox and /etc; run: sudo claude-sandbox {what}"
        )));
    }
    Ok(())
}

pub(super) fn root_of(prefix: &Option<PathBuf>) -> anyhow::Result<PathBuf> {
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

pub(super) fn load_manifest(root: &Path) -> Manifest {
    std::fs::read_to_string(rebase(root, Path::new(MANIFEST)))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

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
