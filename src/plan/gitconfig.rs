//! Git configuration text: the curated configuration of SPEC §4.6, rendered
//! per launch, and the reader of repositories' config files (gix-config,
//! read as git reads them) that names the keys outside the allow-list of
//! what git writes in ordinary work (`git_allow.rs`, issue #44): the
//! tripwire (§4.8) and the creation guard's git rule (issue #22) decide
//! with it.

/// The template, compiled in (the installer writes it to `/etc/claude-gitconfig`).
pub(crate) const TEMPLATE: &str = include_str!("../../etc/claude-gitconfig");

const IDENTITY: &str = "# @IDENTITY@\n";
const FORGE_BEGIN: &str = "# @FORGE-BEGIN@";
const FORGE_END: &str = "# @FORGE-END@\n";

/// Quote a value for a git config file: one line, `"` and `\` escaped.
fn quote(v: &str) -> String {
    let one_line: String = v.chars().filter(|c| !c.is_control()).collect();
    format!(
        "\"{}\"",
        one_line.replace('\\', "\\\\").replace('"', "\\\"")
    )
}

/// The git config text for a launch: the user's identity (when known) and,
/// unless `forge` is false, the GitHub/GitLab credential helpers and
/// ssh→https rewrites.
pub(crate) fn render(name: Option<&str>, email: Option<&str>, forge: bool) -> String {
    let mut identity = String::new();
    if name.is_some() || email.is_some() {
        identity.push_str("[user]\n");
        if let Some(n) = name {
            identity.push_str(&format!("\tname = {}\n", quote(n)));
        }
        if let Some(e) = email {
            identity.push_str(&format!("\temail = {}\n", quote(e)));
        }
    }
    let mut text = TEMPLATE.replacen(IDENTITY, &identity, 1);
    if let (Some(b), Some(e)) = (text.find(FORGE_BEGIN), text.find(FORGE_END)) {
        let end = e + FORGE_END.len();
        if forge {
            // Keep the block, drop only the two marker lines.
            let body_start = b + text[b..].find('\n').map_or(0, |i| i + 1);
            text = format!("{}{}{}", &text[..b], &text[body_start..e], &text[end..]);
        } else {
            text.replace_range(b..end, "");
        }
    }
    text
}

/// One entry of a config file as `git config --list --null` shows it: the
/// name (section and key lower-case, subsection as written) and the value,
/// `None` for a bare `key` (git reads it as `true`).
pub(crate) type RawEntry = (Vec<u8>, Option<Vec<u8>>);

/// Every entry of config file `bytes`, in order, read by gix-config as git
/// reads it (includes are not followed: `include.path` is itself
/// unlisted). `Err(one line)` when git would refuse the file, or when it
/// holds something gix-config is known to read differently from git
/// (tests/fuzz.rs compares the two): callers fail closed then.
pub(crate) fn entries(bytes: &[u8]) -> Result<Vec<RawEntry>, String> {
    use gix_config::parse::{EventRef, Events};
    refuse_disagreements(bytes)?;
    let events = Events::from_bytes(bytes, None)
        .map_err(|e| format!("line {}: not git config syntax", e.line_number()))?;
    if events
        .frontmatter()
        .any(|e| matches!(e, EventRef::SectionValueName(_)))
    {
        return Err("a key before the first [section] header".into());
    }
    let mut out = Vec::new();
    // After a bare `key`, git wants the end of the line (gix-config also
    // reads `key other`, `key # comment` and `key[section]`, which git
    // refuses).
    let mut bare_key_ends_line = false;
    for section in events.sections() {
        if bare_key_ends_line {
            return Err(BARE_KEY.into());
        }
        let base = section_name(section.header())?;
        let mut pending: Option<(Vec<u8>, Option<Vec<u8>>)> = None;
        let mut flush = |p: &mut Option<(Vec<u8>, Option<Vec<u8>>)>| {
            if let Some((key, raw)) = p.take() {
                if let Some(raw) = &raw {
                    refuse_raw_value(raw)?;
                }
                let mut name = base.clone();
                name.push(b'.');
                name.extend(key);
                let value = raw.map(|r| gix_config::value::normalize(r.as_slice()).to_vec());
                out.push((name, value));
            }
            Ok::<(), String>(())
        };
        for ev in section.body() {
            if std::mem::take(&mut bare_key_ends_line) && !matches!(ev, EventRef::Newline(_)) {
                return Err(BARE_KEY.into());
            }
            match ev {
                EventRef::SectionValueName(k) => {
                    flush(&mut pending)?;
                    pending = Some((k.to_ascii_lowercase(), None));
                }
                EventRef::KeyValueSeparator => {
                    if let Some((_, raw)) = pending.as_mut() {
                        *raw = Some(Vec::new());
                    }
                }
                EventRef::Value(v) | EventRef::ValueNotDone(v) | EventRef::ValueDone(v) => {
                    match pending.as_mut() {
                        Some((_, Some(raw))) => raw.extend_from_slice(v),
                        // gix-config's empty value after a bare `key`.
                        Some((_, None)) if v.is_empty() => bare_key_ends_line = true,
                        _ => return Err("a value without a key".into()),
                    }
                }
                _ => {}
            }
        }
        flush(&mut pending)?;
    }
    Ok(out)
}

/// `section[.subsection]` of a header as `git config --list` spells it:
/// the section lower-case, the subsection as written, except in the old
/// `[section.sub]` form, which git lower-cases whole.
fn section_name(header: gix_config::parse::EventRef<'_>) -> Result<Vec<u8>, String> {
    let gix_config::parse::EventRef::SectionHeader {
        name,
        separator,
        subsection_name,
    } = header
    else {
        return Err("a section without a header".into());
    };
    let mut base = name.to_ascii_lowercase();
    if let Some(sub) = subsection_name {
        base.push(b'.');
        if separator.is_some_and(|s| s.as_ref() as &[u8] == b".") {
            base.extend(sub.to_ascii_lowercase());
        } else {
            base.extend_from_slice(sub);
        }
    }
    Ok(base)
}

const BARE_KEY: &str = "a key followed by something other than `=` or the line's end";

/// Inputs gix-config reads differently from git (found by tests/fuzz.rs,
/// each kept as a regression test below): refused, so callers fail closed.
fn refuse_disagreements(bytes: &[u8]) -> Result<(), String> {
    if bytes.contains(&0) {
        return Err("a NUL byte (git cuts values there)".into());
    }
    Ok(())
}

/// A value's text as gix-config hands it over (quotes and escapes still
/// in, continuations joined) where git would read it differently or refuse
/// it: an unknown escape, a backslash at the very end, an unclosed quote,
/// and an unquoted tab or CR (git turns them into spaces, gix-config keeps
/// them; refused wherever they are, to stay simple).
fn refuse_raw_value(raw: &[u8]) -> Result<(), String> {
    let mut quoted = false;
    let mut bytes = raw.iter();
    while let Some(b) = bytes.next() {
        match b {
            b'\\' => match bytes.next() {
                Some(b'n' | b't' | b'b' | b'"' | b'\\') => {}
                _ => return Err("a value with an unknown escape".into()),
            },
            b'"' => quoted = !quoted,
            b'\t' | b'\r' => {
                return Err("a tab or carriage return inside a value (write it as \\t)".into())
            }
            _ => {}
        }
    }
    if quoted {
        return Err("a value with an unclosed quote".into());
    }
    Ok(())
}

/// The entries of config file `bytes` that are not on the allow-list of
/// what git writes in ordinary work ([`super::git_allow::listed`]): name as
/// `git config --list` spells it, and value. `Err(one line)` when the file
/// cannot be read exactly as git reads it (fail closed).
pub(crate) fn unlisted_entries(bytes: &[u8]) -> Result<Vec<RawEntry>, String> {
    Ok(unlisted_numbered(bytes)?
        .into_iter()
        .map(|(_, e)| e)
        .collect())
}

/// [`unlisted_entries`], each with its number among all the file's
/// [`entries`] (what [`without`] takes).
pub(crate) fn unlisted_numbered(bytes: &[u8]) -> Result<Vec<(usize, RawEntry)>, String> {
    Ok(entries(bytes)?
        .into_iter()
        .enumerate()
        .filter(|(_, (n, v))| !super::git_allow::listed(n, v.as_deref()))
        .collect())
}

/// The names of the unlisted keys of config file `bytes` ([`unlisted_entries`]),
/// as `git config --list` names them (section and key lower-case,
/// subsection as written). `Err` when git would not read the file at all
/// or it cannot be read exactly as git does: callers refuse then (fail
/// closed). The creation guard's content check and the tripwire both
/// decide with the one allow-list.
pub(crate) fn unlisted_keys(bytes: &[u8]) -> Result<Vec<String>, String> {
    Ok(unlisted_entries(bytes)?
        .into_iter()
        .map(|(n, _)| String::from_utf8_lossy(&n).into_owned())
        .collect())
}

/// Config file `bytes` without its entries numbered in `drop` (indices
/// into [`entries`]), every other byte as it was: comments, layout and the
/// other keys stay. A held key's whole `key = value` (continuation lines
/// too) goes; what else was on its line (leading blanks, a comment) stays.
/// `Err` unless the result reads, as git reads it, as exactly the entries
/// not dropped, in order (the caller fails closed then).
pub(crate) fn without(bytes: &[u8], drop: &[usize]) -> Result<Vec<u8>, String> {
    use gix_config::parse::{EventRef, Events};
    let all = entries(bytes)?;
    let events = Events::from_bytes(bytes, None)
        .map_err(|e| format!("line {}: not git config syntax", e.line_number()))?;
    let mut out = Vec::with_capacity(bytes.len());
    let (mut index, mut skipping, mut continued) = (0usize, false, false);
    for ev in events.iter() {
        match ev {
            EventRef::SectionValueName(_) => {
                skipping = drop.contains(&index);
                index += 1;
            }
            // A value's line ends inside it (`\` at the end): still the value.
            EventRef::ValueNotDone(_) if skipping => continued = true,
            EventRef::Newline(_) if skipping && continued => {
                continued = false;
                continue;
            }
            // A bare key ends at its line's end; a value at its last part.
            EventRef::Newline(_) | EventRef::Comment { .. } | EventRef::SectionHeader { .. }
                if skipping =>
            {
                skipping = false;
            }
            EventRef::Value(_) | EventRef::ValueDone(_) if skipping => {
                skipping = false;
                continue;
            }
            _ => {}
        }
        if !skipping {
            ev.write_to(&mut out).map_err(|e| e.to_string())?;
        }
    }
    let kept: Vec<RawEntry> = all
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !drop.contains(i))
        .map(|(_, e)| e)
        .collect();
    if entries(&out)? != kept {
        return Err("the file without the held keys does not read as the keys kept".into());
    }
    Ok(out)
}

/// Every value of key `name` (as [`unlisted_keys`] spells it) in config
/// file `bytes`, in order (a bare key reads as `true`); none when the file
/// cannot be read as git reads it.
pub(crate) fn values(bytes: &[u8], name: &str) -> Vec<String> {
    entries(bytes)
        .unwrap_or_default()
        .into_iter()
        .filter(|(n, _)| n == name.as_bytes())
        .map(|(_, v)| {
            v.map_or_else(
                || "true".into(),
                |v| String::from_utf8_lossy(&v).into_owned(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_and_forge() {
        let t = render(Some("Dev \"Q\" Eloper"), Some("dev@example.com"), true);
        assert!(
            t.contains(
                "[user]\n\tname = \"Dev \\\"Q\\\" Eloper\"\n\temail = \"dev@example.com\"\n"
            ),
            "{t}"
        );
        assert!(t.contains("helper = !gh auth git-credential"));
        assert!(t.contains("helper = !glab auth git-credential"));
        assert!(t.contains("insteadOf = git@github.com:"));
        assert!(t.contains("defaultBranch = main"));
        assert!(t.contains("directory = *"));
        assert!(
            !t.contains('@') || !t.contains("@FORGE"),
            "markers removed: {t}"
        );
    }

    #[test]
    fn no_forge_and_no_identity() {
        let t = render(None, None, false);
        assert!(!t.contains("[user]"));
        assert!(!t.contains("credential"));
        assert!(!t.contains("insteadOf"));
        assert!(t.contains("defaultBranch = main"));
    }

    #[test]
    fn newline_in_name_cannot_inject_config() {
        let t = render(Some("x\n[core]\n\tfsmonitor = evil"), None, false);
        assert!(!t.contains("\n[core]"), "{t}");
    }

    fn entries_of(text: &[u8]) -> Vec<(String, Option<String>)> {
        entries(text)
            .unwrap()
            .into_iter()
            .map(|(k, v)| {
                let s = |b: Vec<u8>| String::from_utf8(b).unwrap();
                (s(k), v.map(s))
            })
            .collect()
    }

    fn one(k: &str, v: &str) -> (String, Option<String>) {
        (k.to_string(), Some(v.to_string()))
    }

    #[test]
    fn parses_what_git_config_writes() {
        let text = b"[core]\n\trepositoryformatversion = 0\n\tfsmonitor = touch MARK\n\
                    [remote \"origin\"]\n\turl = https://x/y\n[branch \"Main\"]\n\tremote = origin\n";
        assert_eq!(
            entries_of(text),
            vec![
                one("core.repositoryformatversion", "0"),
                one("core.fsmonitor", "touch MARK"),
                one("remote.origin.url", "https://x/y"),
                one("branch.Main.remote", "origin"),
            ]
        );
    }

    /// Each expectation is what `git config --list --null --file F` printed
    /// for the same text (git 2.47).
    #[test]
    fn reads_values_as_git_does() {
        let text = b"; comment\n# comment\n[Core]  # c\n  Pager = \"less  -R\" ; c\n\
                    editor = vim   -u   x  \n  bare\n\
                    sshCommand = ssh \\\n  -i key\n\
                    [alias] x = \"!sh -c \\\"a\\\\b\\\"\\tz\"\n\
                    [filter.LFS]\n\tclean = c#d\n\
                    [includeIf \"gitdir:~/w/\\\"q\\\"/\"]\n\tpath = x.inc\n\
                    [core]fsmonitor=evil\r\n";
        assert_eq!(
            entries_of(text),
            vec![
                one("core.pager", "less  -R"),
                one("core.editor", "vim   -u   x"),
                ("core.bare".to_string(), None),
                one("core.sshcommand", "ssh   -i key"),
                one("alias.x", "!sh -c \"a\\b\"\tz"),
                one("filter.lfs.clean", "c"),
                one("includeif.gitdir:~/w/\"q\"/.path", "x.inc"),
                one("core.fsmonitor", "evil"),
            ]
        );
        // The old dotted header with a quoted part: git's `a.x.Y.k`.
        assert_eq!(
            entries_of(b"[Alias.X \"Y\"]\n\tk = 1\n"),
            [one("alias.x.Y.k", "1")]
        );
        assert_eq!(
            unlisted_keys(b"[Alias.X \"Y\"]\n\tk = 1\n").unwrap(),
            ["alias.x.Y.k"]
        );
        // Values are bytes: git allows any.
        assert_eq!(
            entries(b"[core]\n\tpager = \xff\xfe\n").unwrap(),
            [(b"core.pager".to_vec(), Some(b"\xff\xfe".to_vec()))]
        );
        assert_eq!(
            unlisted_keys(b"[core]\n\tpager = \xff\n").unwrap(),
            ["core.pager"]
        );
    }

    #[test]
    fn refuses_what_git_refuses() {
        for bad in [
            &b"[core\nx = 1\n"[..],
            b"[core]\n1x = 2\n",
            b"[core]\nx = \"open\n",
            b"[core]\nx = a\\q\n",
            b"[core]\nx y\n",
            b"[ core ]\nx = 1\n",
            b"[a \"b\" ]\nx = 1\n",
            b"[core]\nbare # a comment right after a bare key\n",
        ] {
            assert!(
                unlisted_keys(bad).is_err(),
                "{} accepted",
                bad.escape_ascii()
            );
        }
        // And what it reads is read (positive control).
        assert_eq!(entries_of(b"[core]\n\tx=1 \\"), [one("core.x", "1 ")]);
        assert_eq!(
            entries_of(b"[a]\n\tbare\n[b]k\r\n"),
            [("a.bare".into(), None), ("b.k".into(), None)]
        );
        // git skips a UTF-8 byte-order mark; so does gix-config.
        let bom = b"\xef\xbb\xbf[core]\npager=x\n";
        assert_eq!(unlisted_keys(bom).unwrap(), ["core.pager"]);
    }

    /// Inputs where gix-config and git disagree (found by tests/fuzz.rs and
    /// by the cases above): refused, never read differently from git.
    #[test]
    fn refuses_where_gix_config_and_git_disagree() {
        for (text, git_reads) in [
            // gix-config: two bare keys `x` and `y`.
            (&b"[core]\nx y\n"[..], "refused"),
            // gix-config: a bare key and a comment.
            (b"[core]\nbare # c\n", "refused"),
            // gix-config: a bare key `f`, then the section `a`.
            (b"[AA]\nf[a]K2=x\n", "refused"),
            // git: `A fsmonitor` (an unquoted tab becomes a space); gix-config kept the tab.
            (b"[a]\n[core]fsmonitor=A\\\n\tfsmonitor\n", "read"),
            // git refuses the unclosed quote; gix-config read `Aa`.
            (b"[aa]\n\thelper\t\t=\rAa\"\\", "refused"),
            // git cuts the value at NUL for its consumers.
            (b"[core]\n\tpager = a\0b\n", "read"),
        ] {
            assert!(
                unlisted_keys(text).is_err(),
                "{} (git: {git_reads}) accepted",
                text.escape_ascii()
            );
        }
    }

    #[test]
    fn everyday_git_configs_are_read() {
        let text = b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
                    \tlogallrefupdates = true\n[user]\n\tname = Dev\n\temail = d@example.com\n\
                    [remote \"origin\"]\n\turl = https://github.com/o/r\n\
                    \tfetch = +refs/heads/*:refs/remotes/origin/*\n\
                    [branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n\
                    [submodule \"lib\"]\n\turl = ../lib\n\tactive = true\n\
                    [lfs]\n\trepositoryformatversion = 0\n";
        assert_eq!(unlisted_keys(text).unwrap(), Vec::<String>::new());
        assert_eq!(entries(text).unwrap().len(), 13);
    }

    #[test]
    fn the_command_keys_of_the_old_table_are_unlisted() {
        let listed = [
            "[core]fsmonitor=x\nhooksPath=x\nsshCommand=x\npager=x\neditor=x\naskPass=x\n\
             gitProxy=x\nworktree=x\nalternateRefsCommand=x\n",
            "[sequence]editor=x\n[credential]helper=x\n[credential \"https://h\"]helper=x\n",
            "[filter \"d\"]clean=x\nsmudge=x\nprocess=x\n[diff]external=x\n",
            "[diff \"d\"]command=x\ntextconv=x\n[merge \"d\"]driver=x\n[gpg]program=x\n",
            "[gpg \"ssh\"]program=x\ndefaultKeyCommand=x\n[alias]st=status\nx=!sh\n",
            "[pager]log=x\n[include]path=x\n[includeIf \"gitdir:/\"]path=x\n",
            "[uploadpack]packObjectsHook=x\n[remote \"o\"]uploadpack=x\nreceivepack=x\n",
            "[protocol]allow=always\n[protocol \"ext\"]allow=always\n",
            "[url \"ext::sh -c x\"]insteadOf=https://\npushInsteadOf=https://\n",
            "[submodule \"s\"]update=!x\n[interactive]diffFilter=x\n",
            "[man \"t\"]cmd=x\npath=x\n[browser \"t\"]cmd=x\npath=x\n[web]browser=x\n",
            "[difftool \"t\"]cmd=x\npath=x\n[mergetool \"t\"]cmd=x\npath=x\n",
            "[tar \"tgz\"]command=x\n[trailer \"t\"]command=x\ncmd=x\n[hook \"h\"]command=x\n",
            "[imap]tunnel=x\n[sendemail]sendmailCmd=x\nsmtpServer=/x\n[guitool \"t\"]cmd=x\n",
        ];
        for text in listed {
            let keys = unlisted_keys(text.as_bytes()).unwrap();
            let all = entries(text.as_bytes()).unwrap();
            assert_eq!(keys.len(), all.len(), "{text}: only {keys:?}");
        }
    }

    #[test]
    fn without_drops_exactly_the_held_entries_and_keeps_the_rest_as_written() {
        let text = "# mine\n[core]\n\tbare = false ; note\n\thooksPath = .husky/_\n\
                    [credential]\n\thelper = \"store \\\n --file x\" # c\n\tflag\n\
                    [user]\n\temail = a@b\n";
        let all = entries_of(text.as_bytes());
        let held = |k: &str| all.iter().position(|(n, _)| n == k).unwrap();
        let out = without(
            text.as_bytes(),
            &[
                held("core.hookspath"),
                held("credential.helper"),
                held("credential.flag"),
            ],
        )
        .unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            out,
            "# mine\n[core]\n\tbare = false ; note\n\t\n[credential]\n\t # c\n\t\n[user]\n\temail = a@b\n"
        );
        assert_eq!(
            entries_of(out.as_bytes()),
            vec![one("core.bare", "false"), one("user.email", "a@b")]
        );
        // Nothing dropped: the same bytes.
        assert_eq!(without(text.as_bytes(), &[]).unwrap(), text.as_bytes());
        // A file git would not read is never rewritten.
        assert!(without(b"[core\n\tx = 1\n", &[0]).is_err());
    }
}
