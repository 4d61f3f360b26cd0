//! Git configuration text: the curated configuration of SPEC §4.6, rendered
//! per launch, and a small reader of config files for the tripwire (§4.8),
//! which names the keys through which a repository's config runs commands.

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

/// One `section[.subsection].key = value` of a config file. Section and key
/// are lower-cased (git compares them case-insensitively); the subsection is
/// kept as written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Entry {
    pub(crate) section: String,
    pub(crate) subsection: Option<String>,
    pub(crate) key: String,
    /// `None` for a bare `key` (git reads it as `true`).
    pub(crate) value: Option<String>,
}

impl Entry {
    /// `section.subsection.key`, as `git config --list` names it.
    pub(crate) fn name(&self) -> String {
        match &self.subsection {
            Some(sub) => format!("{}.{sub}.{}", self.section, self.key),
            None => format!("{}.{}", self.section, self.key),
        }
    }

    /// Whether git runs this value as a command, or reads more configuration
    /// through it (`include.path`), or lets it choose a program to run.
    pub(crate) fn runs_code(&self) -> bool {
        let sub = self.subsection.is_some();
        match (self.section.as_str(), self.key.as_str()) {
            ("core", k) => !sub && RUNS_CORE.contains(&k),
            ("alias", _) | ("pager", _) => true,
            ("filter", k) => sub && matches!(k, "clean" | "smudge" | "process"),
            ("diff", "external") => !sub,
            ("diff", k) => sub && matches!(k, "textconv" | "command"),
            ("merge", "driver") => sub,
            ("credential", "helper") => true,
            ("gpg", "program") => true,
            ("sequence", "editor") => !sub,
            ("include", "path") => !sub,
            ("includeif", "path") => sub,
            ("remote", k) => sub && matches!(k, "uploadpack" | "receivepack"),
            ("difftool" | "mergetool" | "man" | "browser", "cmd") => sub,
            ("interactive", "difffilter") => !sub,
            ("submodule", "update") => sub,
            ("protocol", "allow") => true,
            _ => false,
        }
    }
}

/// The names of the keys in config file `bytes` through which host git
/// would run a command (or read more configuration, or choose a program),
/// as `git config --list` names them. `Err` when git would not read the file
/// at all or it cannot be read exactly as git does: callers refuse then
/// (fail closed). The creation guard's content check and the tripwire both
/// decide with this one function.
pub(crate) fn command_keys(bytes: &[u8]) -> Result<Vec<String>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    Ok(parse(text)?
        .iter()
        .filter(|e| e.runs_code())
        .map(Entry::name)
        .collect())
}

/// Every value of key `name` (`section.key` or `section.sub.key`, as
/// [`command_keys`] names it) in config file `bytes`, in order; none when
/// the file cannot be read.
pub(crate) fn values(bytes: &[u8], name: &str) -> Vec<String> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Vec::new();
    };
    parse(text)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.name() == name)
        .map(|e| e.value.unwrap_or_default())
        .collect()
}

/// `core.*` keys git runs as a command (or a directory of hooks it runs).
const RUNS_CORE: &[&str] = &[
    "fsmonitor",
    "pager",
    "editor",
    "sshcommand",
    "hookspath",
    "askpass",
    "gitproxy",
    "worktree",
];

/// Every entry of a git config file, in order, as git reads it: `#` and `;`
/// comments, `[section]`, `[section "sub"]` and the old `[section.sub]`
/// headers (a key may follow on the header's line), quoted values, the
/// escapes `\n \t \b \" \\` and lines continued by a trailing backslash.
/// A line git would refuse is an error naming its number.
pub(crate) fn parse(text: &str) -> Result<Vec<Entry>, String> {
    let mut out = Vec::new();
    let mut section: Option<(String, Option<String>)> = None;
    let mut lines = text.split('\n').enumerate();
    while let Some((i, line)) = lines.next() {
        let bad = |what: &str| format!("line {}: {what}", i + 1);
        let mut rest = line.trim_start();
        if rest.starts_with('[') {
            let (head, after) = parse_header(rest).ok_or_else(|| bad("bad section header"))?;
            section = Some(head);
            rest = after.trim_start();
        }
        if rest.is_empty() || rest.starts_with(['#', ';']) {
            continue;
        }
        // git reads a key before any section as `.key`: it never runs code.
        let (sec, sub) = section.clone().unwrap_or_default();
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(rest.len());
        let key = &rest[..name_len];
        if !key.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return Err(bad("bad key name"));
        }
        let after = rest[name_len..].trim_start_matches([' ', '\t']);
        let value = if let Some(v) = after.strip_prefix('=') {
            Some(parse_value(v, &mut lines).ok_or_else(|| bad("bad value"))?)
        } else if after.is_empty() || after.starts_with(['#', ';', '\r']) {
            None
        } else {
            return Err(bad("expected `=` after the key"));
        };
        out.push(Entry {
            section: sec,
            subsection: sub,
            key: key.to_ascii_lowercase(),
            value,
        });
    }
    Ok(out)
}

/// `[section]`, `[section "sub"]` or `[section.sub]` at the start of `s`:
/// (section, subsection) and the rest of the line.
fn parse_header(s: &str) -> Option<((String, Option<String>), &str)> {
    let s = &s[1..];
    let name_len = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
        .unwrap_or(s.len());
    let name = s[..name_len].to_ascii_lowercase();
    if name.is_empty() {
        return None;
    }
    let rest = &s[name_len..];
    if let Some(after) = rest.strip_prefix(']') {
        return Some(match name.split_once('.') {
            Some((sec, sub)) => ((sec.to_string(), Some(sub.to_string())), after),
            None => ((name, None), after),
        });
    }
    let quoted = rest.trim_start_matches([' ', '\t']).strip_prefix('"')?;
    // `[a.b "c"]` is git's `a.b.c.*`: section `a`, subsection `b.c`.
    let (name, mut sub) = match name.split_once('.') {
        Some((sec, more)) => (sec.to_string(), format!("{more}.")),
        None => (name, String::new()),
    };
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => sub.push(chars.next()?.1),
            '"' => {
                let after = quoted[i + 1..].strip_prefix(']')?;
                return Some(((name, Some(sub)), after));
            }
            '\n' => return None,
            c => sub.push(c),
        }
    }
    None
}

/// A value after its `=`, continued on the following lines when one ends in
/// a backslash. Unquoted whitespace runs are kept (as spaces) between words
/// and dropped at the ends; a comment ends the value outside quotes.
fn parse_value<'a>(
    first: &'a str,
    lines: &mut impl Iterator<Item = (usize, &'a str)>,
) -> Option<String> {
    let mut out = String::new();
    let mut quoted = false;
    let mut spaces = 0;
    let mut line = first;
    loop {
        let mut chars = line.chars();
        let mut continued = false;
        while let Some(c) = chars.next() {
            if !quoted && (c == '#' || c == ';') {
                return (!quoted).then_some(out);
            }
            if !quoted && c.is_whitespace() {
                spaces += usize::from(!out.is_empty());
                continue;
            }
            out.extend(std::iter::repeat_n(' ', std::mem::take(&mut spaces)));
            match c {
                '"' => quoted = !quoted,
                '\\' => match chars.next() {
                    None => continued = true,
                    Some('\r') if chars.as_str().is_empty() => continued = true,
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('b') => {
                        out.pop();
                    }
                    Some(c @ ('"' | '\\')) => out.push(c),
                    Some(_) => return None,
                },
                c => out.push(c),
            }
        }
        match if continued { lines.next() } else { None } {
            Some((_, next)) => line = next,
            None => return (!quoted).then_some(out),
        }
    }
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

    fn entries(text: &str) -> Vec<(String, Option<String>)> {
        parse(text)
            .unwrap()
            .into_iter()
            .map(|e| (e.name(), e.value))
            .collect()
    }

    fn one(k: &str, v: &str) -> (String, Option<String>) {
        (k.to_string(), Some(v.to_string()))
    }

    #[test]
    fn parses_what_git_config_writes() {
        let text = "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = touch MARK\n\
                    [remote \"origin\"]\n\turl = https://x/y\n[branch \"Main\"]\n\tremote = origin\n";
        assert_eq!(
            entries(text),
            vec![
                one("core.repositoryformatversion", "0"),
                one("core.fsmonitor", "touch MARK"),
                one("remote.origin.url", "https://x/y"),
                one("branch.Main.remote", "origin"),
            ]
        );
    }

    #[test]
    fn reads_values_as_git_does() {
        let text = "; comment\n# comment\n[Core]  # c\n  Pager = \"less  -R\" ; c\n\
                    editor = vim   -u   x  \n  bare\n\
                    sshCommand = ssh \\\n  -i key\n\
                    [alias] x = \"!sh -c \\\"a\\\\b\\\"\\tz\"\n\
                    [filter.LFS]\n\tclean = c#d\n\
                    [includeIf \"gitdir:~/w/\\\"q\\\"/\"]\n\tpath = x.inc\n\
                    [core]fsmonitor=evil\r\n";
        assert_eq!(
            entries(text),
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
    }

    #[test]
    fn refuses_what_git_refuses() {
        for bad in [
            "[core\nx = 1\n",
            "[core]\n1x = 2\n",
            "[core]\nx = \"open\n",
            "[core]\nx = a\\q\n",
            "[core]\nx y\n",
            "[ core ]\nx = 1\n",
            "[a \"b\" ]\nx = 1\n",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
        // What git accepts, read as git reads it (checked with `git config -f F --list`).
        assert_eq!(entries("key = v\n"), vec![one(".key", "v")]);
        assert_eq!(entries("[core]\n\tx=1 \\"), vec![one("core.x", "1 ")]);
        let dotted = parse("[Alias.X \"Y\"]\n\tk = 1\n").unwrap();
        assert_eq!(
            (dotted[0].section.as_str(), dotted[0].subsection.as_deref()),
            ("alias", Some("x.Y"))
        );
        assert!(dotted[0].runs_code());
    }

    #[test]
    fn names_the_keys_that_run_code() {
        let text = "[core]\n\tfsmonitor = a\n\tpager = a\n\teditor = a\n\tsshCommand = a\n\thooksPath = a\n\
                    \tfilemode = true\n\tbare = false\n\
                    [alias]\n\tst = status\n[filter \"x\"]\n\tclean = a\n\tsmudge = a\n\tprocess = a\n\trequired = true\n\
                    [diff \"x\"]\n\ttextconv = a\n[diff]\n\texternal = a\n\trenames = true\n[merge \"x\"]\n\tdriver = a\n\
                    [credential]\n\thelper = a\n[credential \"https://h\"]\n\thelper = a\n[gpg]\n\tprogram = a\n\
                    [sequence]\n\teditor = a\n[include]\n\tpath = a\n[includeIf \"onbranch:x\"]\n\tpath = a\n\
                    [user]\n\tname = a\n[remote \"o\"]\n\turl = a\n\tuploadpack = a\n[branch \"m\"]\n\tremote = o\n";
        let runs: Vec<String> = parse(text)
            .unwrap()
            .into_iter()
            .filter(Entry::runs_code)
            .map(|e| e.name())
            .collect();
        assert_eq!(
            runs,
            [
                "core.fsmonitor",
                "core.pager",
                "core.editor",
                "core.sshcommand",
                "core.hookspath",
                "alias.st",
                "filter.x.clean",
                "filter.x.smudge",
                "filter.x.process",
                "diff.x.textconv",
                "diff.external",
                "merge.x.driver",
                "credential.helper",
                "credential.https://h.helper",
                "gpg.program",
                "sequence.editor",
                "include.path",
                "includeif.onbranch:x.path",
                "remote.o.uploadpack",
            ]
        );
    }
}
