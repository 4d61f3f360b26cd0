//! The creation guard's list as the plan hands it to the shim on a
//! numbered fd: each protected path's bytes, NUL-terminated; then each held
//! hooks directory (issue #44) the same way behind a `+` (a protected path
//! is absolute: it never starts with one); last, when the workspace's file
//! system folds case (issue #45 item 8), the entry `*casefold`. The
//! renderer writes it; the supervisor inside reads it back.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// The entry that says the workspace folds case.
const FOLDS: &[u8] = b"*casefold";

/// What the list says, read back.
#[derive(Debug, PartialEq, Eq, Default)]
pub(crate) struct GuardList {
    pub(crate) paths: Vec<PathBuf>,
    pub(crate) held: Vec<PathBuf>,
    pub(crate) folds: bool,
}

pub(crate) fn encode(paths: &[PathBuf], held: &[PathBuf], folds: bool) -> Vec<u8> {
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
    if folds {
        out.extend_from_slice(FOLDS);
        out.push(0);
    }
    out
}

/// The protected paths, the held hooks directories, whether names fold.
pub(crate) fn decode(bytes: &[u8]) -> GuardList {
    let mut list = GuardList::default();
    for p in bytes.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        if p == FOLDS {
            list.folds = true;
            continue;
        }
        match p.strip_prefix(b"+") {
            Some(h) => list.held.push(PathBuf::from(OsStr::from_bytes(h))),
            None => list.paths.push(PathBuf::from(OsStr::from_bytes(p))),
        }
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip() {
        let paths = vec![PathBuf::from("/w/.envrc"), PathBuf::from("/w/sub dir/.git")];
        let held = vec![PathBuf::from("/w/.git/hooks")];
        let list = |paths: &[PathBuf], held: &[PathBuf], folds| GuardList {
            paths: paths.to_vec(),
            held: held.to_vec(),
            folds,
        };
        assert_eq!(
            decode(&encode(&paths, &held, false)),
            list(&paths, &held, false)
        );
        assert_eq!(decode(&encode(&paths, &[], true)), list(&paths, &[], true));
        assert_eq!(decode(b""), GuardList::default());
    }
}
