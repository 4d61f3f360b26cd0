//! The creation guard's list of protected paths as the plan hands it to the
//! shim on a numbered fd: each path's bytes, NUL-terminated. The renderer
//! writes it; the supervisor inside reads it back.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

pub(crate) fn encode(paths: &[PathBuf]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in paths {
        out.extend_from_slice(p.as_os_str().as_bytes());
        out.push(0);
    }
    out
}

pub(crate) fn decode(bytes: &[u8]) -> Vec<PathBuf> {
    bytes
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(OsStr::from_bytes(p)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip() {
        let paths = vec![PathBuf::from("/w/.envrc"), PathBuf::from("/w/sub dir/.git")];
        assert_eq!(decode(&encode(&paths)), paths);
        assert!(decode(b"").is_empty());
    }
}
