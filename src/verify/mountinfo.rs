//! The mount table as the battery reads it: `/proc/self/mountinfo`
//! parsed ([`parse_mountinfo`]), and the mount visible at a point.

use std::path::{Path, PathBuf};

/// One entry of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mount {
    /// The path within its file system that is mounted (a bind's source).
    pub(super) root: PathBuf,
    pub(super) point: PathBuf,
    pub(super) read_only: bool,
    pub(super) fstype: String,
    pub(super) source: String,
}

/// Undo mountinfo's octal escapes (`\040` for a space, …).
pub(crate) fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        if let (b'\\', Some(d)) = (b[i], octal) {
            let v =
                u32::from(d[0] - b'0') * 64 + u32::from(d[1] - b'0') * 8 + u32::from(d[2] - b'0');
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parse `/proc/self/mountinfo`, in mount order.
pub(super) fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            if pre.len() < 6 || post.len() < 2 {
                return None;
            }
            Some(Mount {
                root: PathBuf::from(unescape(pre[3])),
                point: PathBuf::from(unescape(pre[4])),
                read_only: pre[5].split(',').any(|o| o == "ro"),
                fstype: post[0].to_string(),
                source: unescape(post[1]),
            })
        })
        .collect()
}

/// The mount visible at exactly `point` (the last one mounted there).
pub(super) fn top_mount<'a>(mounts: &'a [Mount], point: &Path) -> Option<&'a Mount> {
    mounts.iter().rev().find(|m| m.point == point)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::MOUNTINFO;
    use super::*;

    #[test]
    fn mountinfo_parsed_with_escapes() {
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(m.len(), 15);
        assert!(m[0].read_only && m[0].fstype == "ext4");
        assert_eq!(m[14].point, PathBuf::from("/home/dev/my dir"));
        assert_eq!(
            m[8].root,
            PathBuf::from("/home/dev/.local/state/claude-sandbox/cache")
        );
        assert_eq!(top_mount(&m, Path::new("/tmp")).unwrap().fstype, "tmpfs");
    }
}
