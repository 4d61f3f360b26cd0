//! The checks of `$HOME` (§4.2, §4.8): a fresh tmpfs with only the plan's
//! allowlisted entries bound back, its masks in effect, and the sandbox's
//! private `~/.cache` and `~/.local/share`.

use std::path::{Path, PathBuf};

use super::mountinfo::{top_mount, Mount};
use super::observe::{record, Observed, Outcome};
use crate::sandbox::LaunchRecord;
use crate::{plan, sys::paths};

/// The plan's masks and read-only bind-backs around `$HOME` that are not in
/// effect: the runtime directories under a bound-back `~/.local/share` must
/// be tmpfs ([`plan::HOME_SHARE_MASKED`]), and so must `~/.claude/local`
/// under a bound-back `~/.claude` ([`plan::HOME_CLAUDE_MASKED`]), uv's binaries and the real
/// binary read-only ([`plan::HOME_RO`]), the user database's own home a
/// tmpfs when it differs from `$HOME`.
fn home_masks_missing(mounts: &[Mount], record: &LaunchRecord) -> Vec<String> {
    let home = &record.home;
    let mut out = Vec::new();
    if top_mount(mounts, &home.join(".local/share")).is_some() {
        for rel in plan::HOME_SHARE_MASKED {
            let p = home.join(rel);
            if top_mount(mounts, &p).is_none_or(|m| m.fstype != "tmpfs") {
                out.push(format!("{} is not a fresh tmpfs", p.display()));
            }
        }
    }
    if top_mount(mounts, &home.join(".claude")).is_some() {
        for rel in plan::HOME_CLAUDE_MASKED {
            let p = home.join(rel);
            if top_mount(mounts, &p).is_none_or(|m| m.fstype != "tmpfs") {
                out.push(format!("{} is not a fresh tmpfs", p.display()));
            }
        }
    }
    for rel in plan::HOME_RO
        .iter()
        .chain(std::iter::once(&paths::INSIDE_REAL_CLAUDE_REL))
    {
        let p = home.join(rel);
        if top_mount(mounts, &p).is_some_and(|m| !m.read_only) {
            out.push(format!("{} is bound back writable", p.display()));
        }
    }
    for h in &record.other_homes {
        if top_mount(mounts, h).is_none_or(|m| m.fstype != "tmpfs") {
            out.push(format!(
                "the user database's home {} is not masked",
                h.display()
            ));
        }
    }
    out
}

/// Mounts under `$HOME` the plan's allowlist does not name (as `~/REL`):
/// not among the allowed bind-backs and masks (§4.2) and not inside a
/// configured read-write path.
fn unexpected_home_mounts(mounts: &[Mount], record: &LaunchRecord) -> Vec<String> {
    let home = &record.home;
    let mut allowed: Vec<PathBuf> = plan::HOME_RW
        .iter()
        .chain(plan::HOME_PRIVATE.iter().map(|(rel, _)| rel))
        .chain(plan::HOME_SHARE_MASKED)
        .chain(plan::HOME_CLAUDE_MASKED)
        .chain(plan::HOME_RO)
        .chain(plan::HOME_NULLED)
        .chain(std::iter::once(&paths::INSIDE_REAL_CLAUDE_REL))
        .map(|r| home.join(r))
        .collect();
    if !record.no_forge {
        allowed.extend(plan::HOME_FORGE.iter().map(|r| home.join(r)));
    }
    let rw: Vec<&PathBuf> = std::iter::once(&record.workspace)
        .chain(&record.allow_write)
        .collect();
    let mut out = Vec::new();
    for m in mounts {
        if m.point == *home || !m.point.starts_with(home) {
            continue;
        }
        if allowed.contains(&m.point) || rw.iter().any(|p| m.point.starts_with(p)) {
            continue;
        }
        // Mounts the host had below an allowed directory come along with it.
        if allowed.iter().any(|a| {
            m.point.starts_with(a) && !plan::HOME_NULLED.iter().any(|n| home.join(n) == *a)
        }) {
            continue;
        }
        let rel = m.point.strip_prefix(home).unwrap_or(&m.point);
        let entry = format!("~/{}", rel.display());
        if !out.contains(&entry) {
            out.push(entry);
        }
    }
    out
}

pub(super) fn check_home(o: &Observed) -> Outcome {
    let rec = record(o)?;
    let home = &rec.home;
    match top_mount(&o.mounts, home) {
        Some(m) if m.fstype == "tmpfs" => {}
        Some(m) => {
            return Err(format!(
                "$HOME {} is a {} mount from {}, not a fresh tmpfs: the $HOME inversion regressed",
                home.display(),
                m.fstype,
                m.source
            ))
        }
        None => {
            return Err(format!(
            "$HOME {} is the host's directory, not a fresh tmpfs: the $HOME inversion regressed",
            home.display()
        ))
        }
    }
    let mut extra: Vec<String> = unexpected_home_mounts(&o.mounts, rec)
        .into_iter()
        .map(|e| format!("{e} bound in from the host"))
        .collect();
    extra.extend(home_masks_missing(&o.mounts, rec));
    if extra.is_empty() {
        Ok(format!(
            "$HOME is a tmpfs; only allowlisted entries are bound back{}",
            if rec.no_forge { " (no-forge)" } else { "" }
        ))
    } else {
        Err(format!(
            "{}: the $HOME inversion regressed",
            extra.join(", ")
        ))
    }
}

pub(super) fn check_private_state(o: &Observed) -> Outcome {
    let rec = record(o)?;
    let mut bad = Vec::new();
    for (rel, name) in plan::HOME_PRIVATE {
        let dst = rec.home.join(rel);
        let want = Path::new(plan::PRIVATE_STATE).join(name);
        match top_mount(&o.mounts, &dst) {
            Some(m) if m.root.ends_with(&want) && !m.read_only => {}
            Some(m) => bad.push(format!(
                "~/{rel} is {} (want the private ~/{})",
                m.root.display(),
                want.display()
            )),
            None => bad.push(format!("~/{rel} is not the sandbox's private directory")),
        }
    }
    if !rec.no_forge {
        for rel in plan::HOME_FORGE {
            if top_mount(&o.mounts, &rec.home.join(rel)).is_some_and(|m| !m.read_only) {
                bad.push(format!("~/{rel} is writable"));
            }
        }
    }
    if bad.is_empty() {
        Ok("~/.cache and ~/.local/share are the sandbox's own; forge dirs read-only".into())
    } else {
        Err(format!(
            "{}: host tools would run what is written there",
            bad.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{rec, MOUNTINFO};
    use super::super::mountinfo::parse_mountinfo;
    use super::*;

    #[test]
    fn home_masks_and_read_only_bind_backs_are_checked() {
        let mut r = rec();
        r.other_homes = vec!["/home/real".into()];
        let base = "\
22 1 252:1 / / ro,relatime - ext4 /dev/vda1 rw\n\
25 22 0:7 / /home/dev rw - tmpfs tmpfs rw\n\
26 25 252:1 /home/dev/.local/share /home/dev/.local/share rw - ext4 /dev/vda1 rw\n\
31 25 252:1 /home/dev/.claude /home/dev/.claude rw - ext4 /dev/vda1 rw\n";
        let good = format!(
            "{base}\
27 26 0:8 / /home/dev/.local/share/applications rw - tmpfs tmpfs rw\n\
28 26 0:9 / /home/dev/.local/share/claude rw - tmpfs tmpfs rw\n\
29 25 252:1 /usr/libexec/claude-sandbox/claude /home/dev/.local/bin/claude ro - ext4 /dev/vda1 rw\n\
30 22 0:10 / /home/real rw - tmpfs tmpfs rw\n\
32 31 0:11 / /home/dev/.claude/local rw - tmpfs tmpfs rw\n"
        );
        assert_eq!(
            home_masks_missing(&parse_mountinfo(&good), &r),
            Vec::<String>::new()
        );
        let bad = format!(
            "{base}\
27 26 0:8 / /home/dev/.local/share/applications rw - tmpfs tmpfs rw\n\
29 25 252:1 /usr/libexec/claude-sandbox/claude /home/dev/.local/bin/claude rw - ext4 /dev/vda1 rw\n"
        );
        let missing = home_masks_missing(&parse_mountinfo(&bad), &r);
        assert_eq!(
            missing,
            [
                "/home/dev/.local/share/claude is not a fresh tmpfs",
                "/home/dev/.claude/local is not a fresh tmpfs",
                "/home/dev/.local/bin/claude is bound back writable",
                "the user database's home /home/real is not masked"
            ]
        );
    }

    #[test]
    fn home_allowlist_catches_a_bound_back_ssh() {
        let mut m = parse_mountinfo(MOUNTINFO);
        m.pop(); // the odd "my dir" mount
        assert!(unexpected_home_mounts(&m, &rec()).is_empty());
        m.push(Mount {
            root: "/home/dev/.ssh".into(),
            point: "/home/dev/.ssh".into(),
            read_only: false,
            fstype: "ext4".into(),
            source: "/dev/vda1".into(),
        });
        assert_eq!(unexpected_home_mounts(&m, &rec()), ["~/.ssh"]);
        // no-forge: the gh dir is no longer allowed.
        let mut r = rec();
        r.no_forge = true;
        assert_eq!(unexpected_home_mounts(&m, &r), ["~/.config/gh", "~/.ssh"]);
        // A workspace under $HOME is allowed, with whatever is mounted inside it.
        r.workspace = "/home/dev/.ssh".into();
        assert_eq!(unexpected_home_mounts(&m, &r), ["~/.config/gh"]);
    }
}
