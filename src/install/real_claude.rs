//! Where the real Claude Code binary comes from: `--real-claude`, the
//! user's `~/.local/bin/claude` (a native install's link followed only to a
//! file the user could read), the one already installed, else npm; and
//! whether it honours the process wrapper (asked as `nobody`).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::manifest::{fail, rebase};
use crate::error::bad_input;

/// The Claude Code version installed from npm unless `--claude-version` says otherwise.
const DEFAULT_CLAUDE_VERSION: &str = include_str!("../../etc/claude-code-version");

/// Where the real binary comes from, and where it was found when install relocates it.
pub(super) struct RealSource {
    /// The file to install as the real binary.
    pub(super) source: PathBuf,
    /// The user's `~/.local/bin/claude`, not rebased (the manifest's form), when that is the source.
    pub(super) origin: Option<PathBuf>,
    /// npm's download directory, when the source is in it: removed with
    /// this value, once install has copied the binary (or failed).
    _download: Option<Download>,
}

/// A temporary directory npm installed into; removed on drop, however
/// install ends (an `Err` included), so no download (~360 MB) is left in
/// `$TMPDIR`.
struct Download(PathBuf);

impl Drop for Download {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The real binary, from what the user asked, in order: `--real-claude`
/// (`real_claude`), the user's `~/.local/bin/claude`, the one already
/// installed, else npm (`--claude-version`: `claude_version`).
pub(super) fn find_real_claude(
    real_claude: Option<&Path>,
    claude_version: Option<&str>,
    root: &Path,
    user: &nix::unistd::User,
    stray: &Path,
    installed_real: &Path,
) -> anyhow::Result<RealSource> {
    let mut origin = None;
    let mut download = None;
    let user_claude = if real_claude.is_some() {
        None
    } else {
        user_claude(root, stray, user)?
    };
    let source: PathBuf = if let Some(rc) = real_claude {
        rc.to_path_buf()
    } else if let Some(found) = user_claude {
        origin = Some(user.dir.join(".local/bin/claude"));
        found
    } else if installed_real.exists() {
        installed_real.to_path_buf()
    } else {
        let version = claude_version.unwrap_or(DEFAULT_CLAUDE_VERSION.trim());
        let (dir, bin) = fetch_from_npm(version)?;
        download = Some(dir);
        bin
    };
    Ok(RealSource {
        source,
        origin,
        _download: download,
    })
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

/// npm's install of Claude Code `version` into a new temporary directory
/// (removed when the returned [`Download`] is dropped), and the platform
/// binary in it.
fn fetch_from_npm(version: &str) -> anyhow::Result<(Download, PathBuf)> {
    let npm = find_npm().ok_or_else(|| {
        fail("no real Claude Code binary given and npm is not installed: pass --real-claude PATH, or install npm (apt-get install npm)")
    })?;
    let dir = Download(nix::unistd::mkdtemp(
        &std::env::temp_dir().join("claude-sandbox-npm-XXXXXX"),
    )?);
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
        .arg(&dir.0)
        .arg(format!("@anthropic-ai/claude-code@{version}"))
        .status()?;
    let arch = if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "x64"
    };
    let bin = dir.0.join(format!(
        "node_modules/@anthropic-ai/claude-code-linux-{arch}/claude"
    ));
    if !st.success() || !bin.exists() {
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
pub(super) fn supports_process_wrapper(real: &Path) -> bool {
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
}
