//! What `broker-no-real-values` observes (issue #25): every file this
//! process can read where a credential could be — `$HOME`, `/etc`,
//! `/tmp`, `/dev/shm`, `/run`, the workspace and the `allow-write` paths,
//! the launch record, and every `/proc/PID/environ` and `cmdline` —
//! scanned for the real values of the brokered credentials, which it knows only by the launch record's salted
//! digests ([`crate::egress::policy::broker::Digests`]): each candidate (a
//! string of a credential's prefix and length,
//! [`crate::egress::policy::broker::candidates`]) is hashed with the
//! session's salt and compared.
//!
//! The work is bounded ([`BOUND`]); a scan that reaches the bound says so
//! and the check fails: an unfinished scan is no proof. What cannot be
//! read here (a permission refused) is not readable by the session either
//! and is skipped. The pinned real binary (`real-binary-pinned` checks it
//! by its hash) is not read.

use std::collections::HashSet;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::egress::policy::broker::{real_values_in, unhex, Digests};
use crate::sandbox::LaunchRecord;
use crate::sys::paths;

/// How much one scan reads at most.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bound {
    pub(super) files: u64,
    pub(super) bytes: u64,
}

/// The bound of a real scan: past it, the check fails as unfinished.
pub(super) const BOUND: Bound = Bound {
    files: 500_000,
    bytes: 4 << 30,
};

/// What the scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Scan {
    /// The credentials looked for.
    pub(super) credentials: Vec<String>,
    pub(super) files: u64,
    pub(super) bytes: u64,
    /// Candidates hashed and compared.
    pub(super) candidates: u64,
    /// A real value found: the credential's name and the file.
    pub(super) found: Vec<(String, PathBuf)>,
    /// Why the scan stopped before it had read everything.
    pub(super) unfinished: Option<String>,
}

/// The scan of this sandbox for the record's brokered credentials; `None`
/// when the record names none (no broker in this session).
pub(super) fn scan_for_real_values(rec: &LaunchRecord) -> Option<Result<Scan, String>> {
    let d = rec.broker.as_ref()?;
    let Some(salt) = unhex(&d.salt) else {
        return Some(Err(format!(
            "the launch record's salt is not hex: {}",
            d.salt.escape_debug()
        )));
    };
    let mut roots: Vec<PathBuf> = vec![
        rec.home.clone(),
        "/etc".into(),
        "/tmp".into(),
        "/dev/shm".into(),
        "/run".into(),
        rec.workspace.clone(),
    ];
    roots.extend(rec.allow_write.iter().cloned());
    let skip: Vec<(u64, u64)> = std::fs::metadata(paths::REAL_CLAUDE)
        .map(|m| vec![(m.dev(), m.ino())])
        .unwrap_or_default();
    // The record itself too: it must carry digests, never a value.
    let mut files = vec![PathBuf::from(paths::LAUNCH_RECORD)];
    files.extend(proc_files());
    Some(Ok(scan(&roots, &files, &skip, d, &salt, BOUND)))
}

/// Every `/proc/PID/environ` and `/proc/PID/cmdline`.
fn proc_files() -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut v = Vec::new();
    for e in dir.flatten() {
        if e.file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            v.push(e.path().join("environ"));
            v.push(e.path().join("cmdline"));
        }
    }
    v
}

/// The walk: every regular file under `roots` (symbolic links not
/// followed, each directory once), then `files`; a file whose (device,
/// inode) is in `skip` is not read.
pub(super) fn scan(
    roots: &[PathBuf],
    files: &[PathBuf],
    skip: &[(u64, u64)],
    d: &Digests,
    salt: &[u8],
    bound: Bound,
) -> Scan {
    let mut s = Scan {
        credentials: d.credentials.iter().map(|c| c.name.clone()).collect(),
        ..Scan::default()
    };
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    // A root is followed where it is a link (`/tmp` → `/private/tmp`).
    let mut stack: Vec<PathBuf> = roots
        .iter()
        .map(|r| r.canonicalize().unwrap_or_else(|_| r.clone()))
        .collect();
    while let Some(p) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if m.is_dir() {
            if seen.insert((m.dev(), m.ino())) {
                if let Ok(rd) = std::fs::read_dir(&p) {
                    stack.extend(rd.flatten().map(|e| e.path()));
                }
            }
        } else if m.is_file()
            && !skip.contains(&(m.dev(), m.ino()))
            && !scan_file(&p, d, salt, bound, &mut s)
        {
            return s;
        }
    }
    for p in files {
        if !scan_file(p, d, salt, bound, &mut s) {
            return s;
        }
    }
    s
}

/// Scan one file into `s`; `false` when the bound was reached.
fn scan_file(p: &Path, d: &Digests, salt: &[u8], bound: Bound, s: &mut Scan) -> bool {
    if s.files >= bound.files {
        s.unfinished = Some(format!("stopped at its bound of {} files", bound.files));
        return false;
    }
    let Ok((f, _)) = crate::sys::files::open_regular(p) else {
        return true;
    };
    s.files += 1;
    match scan_reader(f, d, salt, bound.bytes.saturating_sub(s.bytes)) {
        Ok(r) => {
            s.bytes += r.bytes;
            s.candidates += r.candidates;
            for name in r.found {
                s.found.push((name, p.to_path_buf()));
            }
            if r.cut {
                s.unfinished = Some(format!(
                    "stopped at its bound of {} read, in {}",
                    crate::config::show_bytes(bound.bytes),
                    p.display()
                ));
                return false;
            }
            true
        }
        // Unreadable here (a directory's permission, a file that vanished):
        // not readable by the session either.
        Err(_) => true,
    }
}

/// What one file held.
#[derive(Debug, Default)]
pub(super) struct FileScan {
    pub(super) bytes: u64,
    pub(super) candidates: u64,
    pub(super) found: Vec<String>,
    /// The file went on past `budget` bytes.
    pub(super) cut: bool,
}

/// Read `r` to its end (at most `budget` bytes) in chunks, each searched
/// with the tail of the one before it (so a value across two chunks is
/// whole in one).
pub(super) fn scan_reader(
    mut r: impl Read,
    d: &Digests,
    salt: &[u8],
    budget: u64,
) -> std::io::Result<FileScan> {
    const CHUNK: usize = 1 << 20;
    let keep = d
        .credentials
        .iter()
        .map(|c| c.length)
        .max()
        .unwrap_or(0)
        .saturating_sub(1);
    let mut out = FileScan::default();
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + keep);
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if out.bytes + n as u64 > budget {
            out.cut = true;
            return Ok(out);
        }
        out.bytes += n as u64;
        buf.extend_from_slice(&chunk[..n]);
        let (found, checked) = real_values_in(&buf, d, salt);
        out.candidates += checked;
        for f in found {
            if !out.found.iter().any(|x| x == f) {
                out.found.push(f.to_string());
            }
        }
        let from = buf.len().saturating_sub(keep);
        buf.drain(..from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::policy::broker::digest_of;

    const SALT: &[u8] = b"0123456789abcdef";
    const REAL: &str = "gho_RealRealRealRealRealRealRealReal1234";

    fn digests() -> Digests {
        Digests {
            salt: crate::egress::policy::broker::hex(SALT),
            credentials: vec![
                digest_of("github", REAL, SALT),
                digest_of("short", "abcdefghij", SALT),
            ],
        }
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("csb-vscan-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("sub")).unwrap();
        d
    }

    #[test]
    fn a_real_value_is_found_wherever_it_is_and_a_standin_is_not() {
        let d = dir("found");
        std::fs::write(
            d.join("sub/hosts.yml"),
            format!("github.com:\n    oauth_token: {REAL}\n"),
        )
        .unwrap();
        let standin = "gho_StandinStandinStandinStandin12345678";
        std::fs::write(d.join("standin"), format!("oauth_token: {standin}\n")).unwrap();
        // The short credential has no prefix: found as a run of its length.
        std::fs::write(d.join("env"), "KEY=abcdefghij\0OTHER=abcdefghijk\0").unwrap();
        let s = scan(std::slice::from_ref(&d), &[], &[], &digests(), SALT, BOUND);
        let mut found = s.found.clone();
        found.sort();
        assert_eq!(
            found,
            [
                ("github".to_string(), d.join("sub/hosts.yml")),
                ("short".to_string(), d.join("env")),
            ]
        );
        assert_eq!((s.files, s.unfinished), (3, None));
        assert!(s.candidates >= 3, "{}", s.candidates);
        std::fs::remove_file(d.join("sub/hosts.yml")).unwrap();
        std::fs::remove_file(d.join("env")).unwrap();
        let s = scan(std::slice::from_ref(&d), &[], &[], &digests(), SALT, BOUND);
        assert_eq!((s.found.len(), s.files), (0, 1), "the stand-in is no match");
        assert_eq!(s.candidates, 1, "the stand-in was a candidate");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_value_across_two_chunks_is_found() {
        let mut text = vec![b'x'; (1 << 20) - 10];
        text.extend_from_slice(REAL.as_bytes());
        text.extend_from_slice(b"\n");
        let r = scan_reader(&text[..], &digests(), SALT, u64::MAX).unwrap();
        assert_eq!(r.found, ["github"]);
        // Another salt: the same value is no match (a digest of another session).
        let r = scan_reader(&text[..], &digests(), b"other salt", u64::MAX).unwrap();
        assert!(r.found.is_empty());
    }

    #[test]
    fn a_scan_past_its_bound_is_unfinished() {
        let d = dir("bound");
        for i in 0..3 {
            std::fs::write(d.join(format!("f{i}")), "some text\n").unwrap();
        }
        let few = Bound {
            files: 2,
            bytes: 1 << 20,
        };
        let s = scan(std::slice::from_ref(&d), &[], &[], &digests(), SALT, few);
        assert!(
            s.unfinished.as_deref().unwrap_or("").contains("2 files"),
            "{s:?}"
        );
        let small = Bound {
            files: 100,
            bytes: 15,
        };
        let s = scan(std::slice::from_ref(&d), &[], &[], &digests(), SALT, small);
        assert!(s.unfinished.is_some(), "{s:?}");
        // A skipped file (the pinned binary) is not read.
        let m = std::fs::metadata(d.join("f0")).unwrap();
        let s = scan(
            std::slice::from_ref(&d),
            &[],
            &[(m.dev(), m.ino())],
            &digests(),
            SALT,
            BOUND,
        );
        assert_eq!((s.files, s.unfinished), (2, None));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn fifos_and_links_are_not_followed() {
        let d = dir("fifo");
        nix::unistd::mkfifo(
            &d.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let outside = dir("outside");
        std::fs::write(outside.join("hosts.yml"), REAL).unwrap();
        std::os::unix::fs::symlink(&outside, d.join("link")).unwrap();
        let s = scan(std::slice::from_ref(&d), &[], &[], &digests(), SALT, BOUND);
        assert_eq!((s.files, s.found.len()), (0, 0), "{s:?}");
        // Named as a root, the same directory is scanned (the control).
        let s = scan(
            std::slice::from_ref(&outside),
            &[],
            &[],
            &digests(),
            SALT,
            BOUND,
        );
        assert_eq!(s.found.len(), 1, "{s:?}");
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_dir_all(&outside);
    }
}
