//! `review --apply`: one held item put in place on the host, only when its
//! target is as the session left it. Nothing is run: a hook is written, a
//! key's lines are appended to its config file.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::libc;

use super::copies::digest_of;
use super::item::{Item, What};

/// Put `item` in place. `Err(one line)` naming the target and what to do
/// when it changed since the session ended, or cannot be written.
pub(crate) fn apply(item: &Item) -> Result<(), String> {
    let target = &item.target;
    let shown = target.display();
    let dir_ok = target
        .parent()
        .and_then(|d| d.symlink_metadata().ok())
        .is_some_and(|m| m.is_dir());
    if !dir_ok {
        return Err(format!(
            "{shown}: its directory is gone or is no longer a directory; nothing applied"
        ));
    }
    if digest_of(target) != item.before {
        return Err(format!(
            "{shown} changed since the session ended; nothing applied (look at it, then make the change yourself)"
        ));
    }
    let written = match &item.what {
        What::Hook { content, mode } => write_file(target, content, *mode, item.before.is_none()),
        What::Key { .. } => {
            let text = item
                .config_text()
                .ok_or_else(|| format!("{shown}: the held key's name is not one git config can be given; set it yourself"))?;
            append(target, &text, item.before.is_none())
        }
    };
    written.map_err(|e| format!("cannot write {shown}: {e}"))
}

/// `path` holding `content` with `mode`: made new when `new`, otherwise
/// replaced at once (a file beside it renamed over it).
fn write_file(path: &Path, content: &[u8], mode: u32, new: bool) -> std::io::Result<()> {
    if new {
        crate::sys::files::write_new(path, content, mode & 0o777)
    } else {
        crate::sys::files::write_atomic(path, content, mode & 0o777)
    }
}

/// `text` appended to config file `path` (made when `new`), on a line of
/// its own.
fn append(path: &Path, text: &str, new: bool) -> std::io::Result<()> {
    let ends_line = new || std::fs::read(path).is_ok_and(|b| b.is_empty() || b.ends_with(b"\n"));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create_new(new)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let sep = if ends_line { "" } else { "\n" };
    f.write_all(format!("{sep}{text}").as_bytes())?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::super::copies::digest_of;
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("csb-apply-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_hook_and_a_key_go_in_place_only_where_nothing_changed_since() {
        let t = tmp("in-place");
        let hook = t.join("pre-commit");
        let item = Item::new(
            hook.clone(),
            What::Hook {
                content: b"#!/bin/sh\n".to_vec(),
                mode: 0o755,
            },
            None,
        );
        apply(&item).unwrap();
        assert_eq!(std::fs::read(&hook).unwrap(), b"#!/bin/sh\n");
        let mode = std::fs::metadata(&hook).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        // Applied again: the target is no longer absent.
        assert!(apply(&item).unwrap_err().contains("changed since"));
        let config = t.join("config");
        std::fs::write(&config, "[user]\n\tname = n").unwrap();
        let key = Item::new(
            config.clone(),
            What::Key {
                name: "core.hookspath".into(),
                value: Some(".husky/_".into()),
            },
            digest_of(&config),
        );
        apply(&key).unwrap();
        assert_eq!(
            std::fs::read_to_string(&config).unwrap(),
            "[user]\n\tname = n\n[core]\n\thookspath = \".husky/_\"\n"
        );
        assert!(apply(&key).unwrap_err().contains("changed since"));
        // A symlink put where the hook was is never written through.
        let victim = t.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = t.join("post-merge");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let through = Item::new(
            link.clone(),
            What::Hook {
                content: b"x".to_vec(),
                mode: 0o755,
            },
            None,
        );
        assert!(apply(&through).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        std::fs::remove_dir_all(&t).unwrap();
    }
}
