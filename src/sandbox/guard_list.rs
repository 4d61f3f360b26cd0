//! The creation guard's list as the plan hands it to the shim on a
//! numbered fd: each protected path's bytes, NUL-terminated; then each held
//! hooks directory (issue #44) the same way behind a `+` (a protected path
//! is absolute: it never starts with one). The renderer writes it; the
//! supervisor inside reads it back.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

pub(crate) fn encode(paths: &[PathBuf], held: &[PathBuf]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in paths {
        out.extend_from_slice(p.as_os_str().as_bytes());
        out.push(0);
    }
    for p in held {
        out.push(b'+');
        out.extend_from_slice(p.as_os_str().as_bytes());
        out.push(0);
    }
    out
}

/// The protected paths, and the held hooks directories.
pub(crate) fn decode(bytes: &[u8]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut paths, mut held) = (Vec::new(), Vec::new());
    for p in bytes.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        match p.strip_prefix(b"+") {
            Some(h) => held.push(PathBuf::from(OsStr::from_bytes(h))),
            None => paths.push(PathBuf::from(OsStr::from_bytes(p))),
        }
    }
    (paths, held)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip() {
        let paths = vec![PathBuf::from("/w/.envrc"), PathBuf::from("/w/sub dir/.git")];
        let held = vec![PathBuf::from("/w/.git/hooks")];
        assert_eq!(decode(&encode(&paths, &held)), (paths.clone(), held));
        assert_eq!(decode(&encode(&paths, &[])), (paths, Vec::new()));
        assert_eq!(decode(b""), (Vec::new(), Vec::new()));
    }
}
