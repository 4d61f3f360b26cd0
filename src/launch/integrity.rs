//! The integrity pin of the real binary (SPEC §5).
//!
//! At install, root writes the binary's SHA-256 and size, plus a
//! *fingerprint* of the installed file (device, inode, size, mtime, ctime),
//! to a root-owned pin file. Every launch compares the fingerprint first: an
//! unchanged file costs one `stat` and no hashing. Any difference — a byte
//! appended, a file swapped in, even a `touch` — forces a full SHA-256 of the
//! binary (~0.2 s for ~250 MB with SHA-NI), and a mismatch refuses the launch.
//! The trade-off: the fingerprint trusts that nobody but root can restore a
//! file's ctime (true: the kernel sets ctime on every change, and only root
//! can change the clock or the raw device), and the binary and its directory
//! are root-owned, so a non-root attacker can change neither.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Fail, EXIT_INTEGRITY};
use crate::sys::paths;

/// What the pin file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Pin {
    pub sha256: String,
    pub(crate) size: u64,
    pub(crate) fingerprint: Fingerprint,
}

/// Cheap identity of an unchanged file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Fingerprint {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Fingerprint {
    pub(crate) fn of(meta: &std::fs::Metadata) -> Fingerprint {
        Fingerprint {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
            ctime_ns: meta.ctime() as i128 * 1_000_000_000 + meta.ctime_nsec() as i128,
        }
    }
}

/// SHA-256 of a file, hex.
pub(crate) fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(crate::sys::text::hex(&h.finalize()))
}

/// Pin the file at `path` as it is now.
pub(crate) fn pin_of(path: &Path) -> std::io::Result<Pin> {
    let meta = std::fs::metadata(path)?;
    let sha256 = sha256_file(path)?;
    Ok(Pin {
        sha256,
        size: meta.size(),
        fingerprint: Fingerprint::of(&meta),
    })
}

/// The pin file's text for `pin` (stable, so re-pinning an unchanged binary
/// writes the same bytes).
pub(crate) fn pin_text(pin: &Pin) -> String {
    serde_json::to_string_pretty(pin).expect("a pin serializes") + "\n"
}

/// The command that re-pins, named in every refusal.
const REPIN: &str = "sudo claude-sandbox install --repin";

fn refuse(msg: String) -> anyhow::Error {
    Fail::new(EXIT_INTEGRITY, msg).into()
}

/// Check `binary` against the pin at `pin_path`.
pub(crate) fn check(binary: &Path, pin_path: &Path) -> anyhow::Result<()> {
    let text = crate::sys::files::read_text(pin_path).map_err(|e| {
        refuse(format!(
            "refusing to run {}: its pin {} cannot be read ({e}); if the binary is the one you installed, re-pin it: {REPIN}",
            binary.display(),
            pin_path.display()
        ))
    })?;
    let pin: Pin = serde_json::from_str(&text).map_err(|e| {
        refuse(format!(
            "refusing to run {}: the pin {} is malformed ({e}); re-pin: {REPIN}",
            binary.display(),
            pin_path.display()
        ))
    })?;
    let meta = std::fs::metadata(binary).map_err(|e| {
        refuse(format!(
            "refusing to run {}: {e}; reinstall: sudo claude-sandbox install",
            binary.display()
        ))
    })?;
    if Fingerprint::of(&meta) == pin.fingerprint {
        return Ok(());
    }
    let actual = sha256_file(binary).map_err(|e| {
        refuse(format!(
            "refusing to run {}: cannot read it: {e}",
            binary.display()
        ))
    })?;
    if actual == pin.sha256 && meta.size() == pin.size {
        return Ok(());
    }
    Err(refuse(format!(
        "refusing to run {}: it does not match its pin (expected sha256 {} size {}, found sha256 {} size {}); if you replaced it on purpose, re-pin: {REPIN}",
        binary.display(),
        pin.sha256,
        pin.size,
        actual,
        meta.size()
    )))
}

/// Check the real binary against its pin before a launch (compile-time paths).
pub(super) fn check_launch() -> anyhow::Result<()> {
    if crate::testhooks::active(crate::testhooks::Mutation::SkipPinCheck) {
        return Ok(());
    }
    if !Path::new(paths::REAL_CLAUDE).exists() {
        return Err(crate::error::not_installed(format!(
            "{} (the real Claude Code binary) is missing; install the sandbox: sudo claude-sandbox install",
            paths::REAL_CLAUDE
        )));
    }
    check(Path::new(paths::REAL_CLAUDE), Path::new(paths::PIN_FILE))
}

/// For `verify`: does the real binary match its pin? (A full hash: `verify`
/// proves the content, not just the fingerprint.)
pub(crate) fn verify_pin() -> Result<(), String> {
    let text = crate::sys::files::read_text(Path::new(paths::PIN_FILE))
        .map_err(|e| format!("pin {} unreadable: {e}", paths::PIN_FILE))?;
    let pin: Pin = serde_json::from_str(&text).map_err(|e| format!("pin malformed: {e}"))?;
    let actual = sha256_file(Path::new(paths::REAL_CLAUDE))
        .map_err(|e| format!("{}: {e}", paths::REAL_CLAUDE))?;
    if actual == pin.sha256 {
        Ok(())
    } else {
        Err(format!(
            "sha256 {actual} differs from the pinned {}",
            pin.sha256
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("csb-pin-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn unchanged_passes_any_change_refuses() {
        let d = tmp("change");
        let bin = d.join("claude");
        std::fs::write(&bin, b"#!/bin/sh\necho real\n").unwrap();
        let pin_path = d.join("claude.pin");
        std::fs::write(&pin_path, pin_text(&pin_of(&bin).unwrap())).unwrap();
        check(&bin, &pin_path).unwrap();
        // One byte appended.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&bin)
            .unwrap()
            .write_all(b"x")
            .unwrap();
        let e = check(&bin, &pin_path).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), EXIT_INTEGRITY);
        let msg = e.to_string();
        let expected = pin_of(&bin).unwrap().sha256;
        assert!(
            msg.contains("expected sha256") && msg.contains(&expected) && msg.contains(REPIN),
            "{msg}"
        );
        // Same size, other content.
        std::fs::write(&bin, b"#!/bin/sh\necho evil\n").unwrap();
        assert!(check(&bin, &pin_path).is_err());
        // Restored content (new inode, new ctime): the full hash accepts it.
        std::fs::remove_file(&bin).unwrap();
        std::fs::write(&bin, b"#!/bin/sh\necho real\n").unwrap();
        check(&bin, &pin_path).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn missing_or_bad_pin_refuses() {
        let d = tmp("missing");
        let bin = d.join("claude");
        std::fs::write(&bin, b"x").unwrap();
        let e = check(&bin, &d.join("nope.pin")).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), EXIT_INTEGRITY);
        assert!(e.to_string().contains(REPIN));
        std::fs::write(d.join("bad.pin"), "not json").unwrap();
        assert!(check(&bin, &d.join("bad.pin"))
            .unwrap_err()
            .to_string()
            .contains("malformed"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    use std::io::Write;
}
