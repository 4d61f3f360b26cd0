//! Spellings a case-folding file system may take for one name (issue #45
//! item 8, docs/decisions/0033): a key generous enough that every folding
//! file system's equal names have equal keys.

/// Whether the directory name `dir` (a path's last component) and `name`
/// fold to one key.
pub(super) fn same_fold(dir: &[u8], name: &[u8]) -> bool {
    dir == name || fold_key(dir).is_some_and(|k| Some(k) == fold_key(name))
}

/// A name as the most generous folding file system could see it: each
/// character upper- then lower-cased (so KELVIN SIGN is `k` and LONG S is
/// `s`, as Unicode case folding has them), full-width forms as ASCII,
/// default-ignorable characters (which HFS+ skips) dropped, and trailing
/// dots and spaces (which Windows drops) too. `None`: not UTF-8 (no
/// folding file system folds such a name into a UTF-8 one).
pub(super) fn fold_key(name: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(name).ok()?;
    let mut out = String::with_capacity(s.len());
    for c in s.chars().filter(|c| !ignorable(*c)) {
        let c = match u32::from(c) {
            w @ 0xFF01..=0xFF5E => char::from_u32(w - 0xFEE0).unwrap_or(c),
            _ => c,
        };
        c.to_uppercase()
            .flat_map(char::to_lowercase)
            .for_each(|l| out.push(l));
    }
    let kept = out.trim_end_matches(['.', ' ']).len();
    out.truncate(kept);
    Some(out)
}

/// Unicode's default-ignorable code points that a file system may skip.
fn ignorable(c: char) -> bool {
    matches!(u32::from(c),
        0x00AD | 0x034F | 0x061C | 0x115F..=0x1160 | 0x17B4..=0x17B5
        | 0x180B..=0x180F | 0x200B..=0x200F | 0x202A..=0x202E
        | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F | 0xFEFF | 0xFFA0
        | 0xFFF0..=0xFFF8 | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A
        | 0xE0000..=0xE0FFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fold_key_folds_what_case_folding_file_systems_fold() {
        let k = |s: &str| fold_key(s.as_bytes()).unwrap();
        assert_eq!(k(".ENVRC"), ".envrc");
        assert_eq!(k("tas\u{212A}s.json"), "tasks.json");
        assert_eq!(k(".envrc\u{17F}"), ".envrcs");
        assert_eq!(k("\u{17F}ettings.json"), "settings.json");
        assert_eq!(k("con\u{FB01}g"), "config");
        assert_eq!(k("HEAD\u{200C}"), "head");
        assert_eq!(k("\u{FF43}onfig. "), "config");
        assert_eq!(fold_key(b"\xff"), None);
        assert!(same_fold(b"HOOKS", b"hooks") && !same_fold(b"hook", b"hooks"));
    }
}
