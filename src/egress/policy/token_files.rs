//! The forges' token files read as their tools read them (issue #45):
//! `gh`'s `hosts.yml` and `glab`'s `config.yml`, through a YAML 1.2 parser
//! (saphyr-parser's events), into a tree of the values the tools see.
//!
//! Both tools are Go programs that read these files with go-yaml v3 into a
//! node tree and look keys up by their text, first match first (Debian's
//! gh 2.23: of a key written twice the first value; an alias `*NAME` read
//! as the text `NAME`, not the anchored value; a merge key `<<` not
//! followed; of several documents the first). Quoting, escapes, spacing
//! around `:`, flow style, comments and anchors are YAML's own, which the
//! parser reads as go-yaml does (tests/fuzz.rs compares with `gh auth
//! token` on generated files). Where the broker could not be sure it reads
//! what the tool reads — an alias, a merge key, a key twice in one
//! mapping, a key that is not a plain value, more than one document,
//! nesting deeper than [`MAX_DEPTH`] — or a token holds a blank or a
//! control character, the file is refused ([`read_yaml`], [`secrets`]):
//! the launch stops rather than bind a file whose tokens it may have
//! missed.
//!
//! The sandbox's copy ([`copy_of`]) is the tree written out again, in
//! gh's block style: no comment, anchor or second document of the
//! original reaches it, and every real value in it is a stand-in.
//!
//! May import: nothing of the crate.

use saphyr_parser::{Event, Parser, ScalarStyle, Span, StrInput};

/// Nesting beyond this is refused (the tools' files nest four deep).
pub(crate) const MAX_DEPTH: usize = 32;

/// A YAML value as the tools read it: each scalar's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    Scalar(String),
    Map(Vec<(String, Node)>),
    Seq(Vec<Node>),
}

struct Reader<'a> {
    events: Parser<'a, StrInput<'a>>,
}

fn line(s: &Span) -> usize {
    s.start.line()
}

impl<'a> Reader<'a> {
    fn next(&mut self) -> Result<(Event<'a>, Span), String> {
        match self.events.next() {
            Some(Ok(e)) => Ok(e),
            Some(Err(e)) => Err(format!("the broker's YAML parser does not read it ({e})")),
            None => Err("it ends in the middle of a value".to_string()),
        }
    }

    /// The value that starts with `ev`.
    fn node(&mut self, ev: Event<'a>, at: usize, depth: usize) -> Result<Node, String> {
        if depth > MAX_DEPTH {
            return Err(format!("line {at}: nested deeper than {MAX_DEPTH}"));
        }
        match ev {
            Event::Scalar(v, ..) => Ok(Node::Scalar(v.into_owned())),
            Event::Alias(_) => Err(alias(at)),
            Event::SequenceStart(..) => {
                let mut items = Vec::new();
                loop {
                    let (e, s) = self.next()?;
                    if matches!(e, Event::SequenceEnd) {
                        return Ok(Node::Seq(items));
                    }
                    items.push(self.node(e, line(&s), depth + 1)?);
                }
            }
            Event::MappingStart(..) => self.map(depth),
            _ => Err(format!("line {at}: a value was expected")),
        }
    }

    /// The entries of a mapping, after its start.
    fn map(&mut self, depth: usize) -> Result<Node, String> {
        let mut entries: Vec<(String, Node)> = Vec::new();
        loop {
            let (e, s) = self.next()?;
            let at = line(&s);
            let key = match e {
                Event::MappingEnd => return Ok(Node::Map(entries)),
                Event::Scalar(k, ScalarStyle::Plain, ..) if k == "<<" => {
                    return Err(format!(
                        "line {at}: a merge key (`<<`), which gh and glab do not follow"
                    ))
                }
                Event::Scalar(k, ..) => k.into_owned(),
                Event::Alias(_) => return Err(alias(at)),
                _ => return Err(format!("line {at}: a key that is not a plain value")),
            };
            if entries.iter().any(|(k, _)| *k == key) {
                return Err(format!(
                    "line {at}: the key `{}` a second time in one mapping",
                    printable(&key)
                ));
            }
            let (v, s) = self.next()?;
            let value = self.node(v, line(&s), depth + 1)?;
            entries.push((key, value));
        }
    }
}

fn alias(at: usize) -> String {
    format!(
        "line {at}: an alias (`*NAME`), which gh and glab read as the anchor's name, not its value"
    )
}

/// `s` for an error line: control characters escaped, at most 64 characters.
fn printable(s: &str) -> String {
    s.chars().take(64).flat_map(char::escape_debug).collect()
}

/// The file `text` as the tools read it: its one document's mapping (an
/// empty file: an empty mapping), or why the broker cannot be sure it
/// reads what they read (one line).
pub(crate) fn read_yaml(text: &str) -> Result<Node, String> {
    let mut r = Reader {
        events: Parser::new_from_str(text),
    };
    let mut root = None;
    loop {
        let (e, s) = r.next()?;
        match e {
            Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
            Event::StreamEnd => break,
            Event::DocumentStart(_) if root.is_some() => {
                // An empty one after the first (a trailing `---`) holds nothing.
                let (v, at) = r.next()?;
                if !matches!(&v, Event::Scalar(t, ScalarStyle::Plain, ..) if t.is_empty()) {
                    return Err(format!("line {}: a second YAML document", line(&at)));
                }
            }
            Event::DocumentStart(_) => {
                let (v, s) = r.next()?;
                root = Some(r.node(v, line(&s), 0)?);
            }
            _ => return Err(format!("line {}: a value outside a document", line(&s))),
        }
    }
    match root {
        None => Ok(Node::Map(Vec::new())),
        Some(Node::Scalar(s)) if s.is_empty() || s == "~" || s == "null" => {
            Ok(Node::Map(Vec::new()))
        }
        Some(m @ Node::Map(_)) => Ok(m),
        Some(_) => Err("it is not a mapping of keys at the top".to_string()),
    }
}

/// One secret found: the keys on the way to it (a sequence's item is `-`)
/// and its value.
pub(crate) type Found = (Vec<String>, String);

/// Every non-empty scalar under a key of `keys` (compared in lower case) at
/// any depth of `root`; a key of `keys` holding a mapping or a sequence,
/// or a value with a blank or a control character, is refused.
pub(crate) fn secrets(root: &Node, keys: &[&str]) -> Result<Vec<Found>, String> {
    let mut out = Vec::new();
    walk(root, &mut Vec::new(), keys, &mut out)?;
    Ok(out)
}

fn walk(
    n: &Node,
    path: &mut Vec<String>,
    keys: &[&str],
    out: &mut Vec<Found>,
) -> Result<(), String> {
    let key = path.last().map(|k| k.to_ascii_lowercase());
    let secret = key.as_deref().is_some_and(|k| keys.contains(&k));
    let name = || printable(path.last().map_or("", String::as_str));
    match n {
        Node::Scalar(v) if secret && !v.is_empty() => {
            if v.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(format!(
                    "its `{}` holds a blank or a control character",
                    name()
                ));
            }
            out.push((path.clone(), v.clone()));
        }
        Node::Scalar(_) => {}
        _ if secret => {
            return Err(format!(
                "its `{}` is a list or a mapping, not a value",
                name()
            ))
        }
        Node::Map(entries) => {
            for (k, v) in entries {
                path.push(k.clone());
                let r = walk(v, path, keys, out);
                path.pop();
                r?;
            }
        }
        Node::Seq(items) => {
            for v in items {
                path.push("-".to_string());
                let r = walk(v, path, keys, out);
                path.pop();
                r?;
            }
        }
    }
    Ok(())
}

/// A token of a forge (`prefixes`, then at least 8 characters) written in
/// a key or a value of `root` that is none of `found` (a token under
/// another key, or run into other text, as `oauth_token :gho_…` without a
/// blank is one value): the broker would not swap it, and the copy would
/// carry it, so the file is refused.
pub(crate) fn stray_token(root: &Node, found: &[&str], prefixes: &[&str]) -> Result<(), String> {
    let check = |s: &str| -> Result<(), String> {
        for p in prefixes {
            for (i, _) in s.match_indices(p) {
                let rest = &s[i + p.len()..];
                let n = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                    .unwrap_or(rest.len());
                let token = &s[i..i + p.len() + n];
                if n >= 8 && !found.contains(&token) {
                    return Err(format!(
                        "a token (`{p}…`) outside the keys the tool reads tokens from"
                    ));
                }
            }
        }
        Ok(())
    };
    match root {
        Node::Scalar(s) => check(s),
        Node::Seq(items) => items
            .iter()
            .try_for_each(|v| stray_token(v, found, prefixes)),
        Node::Map(entries) => entries
            .iter()
            .try_for_each(|(k, v)| check(k).and_then(|_| stray_token(v, found, prefixes))),
    }
}

/// The scalar at `key` of mapping `n`, if any.
pub(crate) fn get<'n>(n: &'n Node, key: &str) -> Option<&'n Node> {
    match n {
        Node::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
        _ => None,
    }
}

/// The text of a scalar.
pub(crate) fn text(n: Option<&Node>) -> Option<&str> {
    match n {
        Some(Node::Scalar(s)) => Some(s),
        _ => None,
    }
}

/// The sandbox's copy of `root`: the tree written out again in gh's own
/// block style, each scalar plain when it is plainly a word and else
/// double-quoted (JSON's escapes, which YAML's double quotes share), so
/// the tools read the same values; every occurrence of a real value of
/// `pairs` (real, stand-in) in a key or a value replaced by its stand-in.
pub(crate) fn copy_of(root: &Node, pairs: &[(String, String)]) -> String {
    let mut out = String::new();
    match root {
        Node::Map(e) if !e.is_empty() => emit(root, 0, pairs, &mut out),
        _ => out.push_str("{}\n"),
    }
    out
}

/// `n` (a non-empty mapping or sequence) at `indent`.
fn emit(n: &Node, indent: usize, pairs: &[(String, String)], out: &mut String) {
    let pad = " ".repeat(indent);
    let items: Vec<(Option<&str>, &Node)> = match n {
        Node::Map(e) => e.iter().map(|(k, v)| (Some(k.as_str()), v)).collect(),
        Node::Seq(v) => v.iter().map(|v| (None, v)).collect(),
        Node::Scalar(_) => return,
    };
    for (k, v) in items {
        out.push_str(&pad);
        match k {
            Some(k) => {
                out.push_str(&scalar(&replaced(k, pairs)));
                out.push(':');
            }
            None => out.push('-'),
        }
        match v {
            Node::Scalar(s) => {
                out.push(' ');
                out.push_str(&scalar(&replaced(s, pairs)));
                out.push('\n');
            }
            Node::Map(e) if e.is_empty() => out.push_str(" {}\n"),
            Node::Seq(e) if e.is_empty() => out.push_str(" []\n"),
            _ => {
                out.push('\n');
                emit(v, indent + 4, pairs, out);
            }
        }
    }
}

/// `s` as a YAML scalar: plain when it is a word that cannot be read as
/// anything but itself, else double-quoted.
fn scalar(s: &str) -> String {
    let word = s.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./@+-".contains(c));
    match word {
        true => s.to_string(),
        false => serde_json::to_string(s).unwrap_or_default(),
    }
}

fn replaced(s: &str, pairs: &[(String, String)]) -> String {
    let mut t = s.to_string();
    for (real, standin) in pairs {
        t = t.replace(real.as_str(), standin);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(text: &str) -> Node {
        read_yaml(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn token(yaml: &str) -> Option<String> {
        let root = map(yaml);
        text(get(get(&root, "github.com")?, "oauth_token")).map(String::from)
    }

    #[test]
    fn yaml_is_read_as_the_tools_read_it() {
        for (yaml, want) in [
            ("github.com:\n    oauth_token: gho_A\n", "gho_A"),
            ("\"github.com\":\n    \"oauth_token\": gho_B\n", "gho_B"),
            ("github.com:\n    oauth_token : gho_C\n", "gho_C"),
            ("github.com:\n\toauth_token: gho_T\n", ""),
            ("github.com: {oauth_token: gho_D}\n", "gho_D"),
            ("github.com:\n    oauth_token: \"gho_\\x45\" # c\n", "gho_E"),
            ("github.com:\n    oauth_token: 'gho_F' #x\n", "gho_F"),
            ("github.com:\n    oauth_token: &a gho_G\n", "gho_G"),
            ("github.com:\n    oauth_token: !!str gho_H\n", "gho_H"),
            (
                "# c\n---\ngithub.com:\n  oauth_token:   gho_I\n...\n",
                "gho_I",
            ),
        ] {
            match want {
                "" => assert!(read_yaml(yaml).is_err(), "{yaml}"),
                w => assert_eq!(token(yaml).as_deref(), Some(w), "{yaml}"),
            }
        }
        assert_eq!(map(""), Node::Map(vec![]));
        assert_eq!(map("# only a comment\n"), Node::Map(vec![]));
    }

    #[test]
    fn what_the_broker_cannot_be_sure_of_is_refused_in_one_line() {
        for (yaml, says) in [
            ("x: &t gho_X\ngithub.com:\n  oauth_token: *t\n", "alias"),
            ("github.com:\n  <<: {oauth_token: gho_X}\n", "merge key"),
            (
                "github.com:\n  oauth_token: gho_1\n  oauth_token: gho_2\n",
                "second time",
            ),
            (
                "github.com:\n  oauth_token: gho_1\n\"github.com\":\n  user: x\n",
                "second time",
            ),
            ("? [a]\n: b\n", "not a plain value"),
            ("a: 1\n---\nb: 2\n", "second YAML document"),
            // YAML allows a tab after the colon and gh reads it; the parser
            // does not: refused, never misread.
            ("h:\n  oauth_token:\tgho_X\n", "YAML parser does not read"),
            (
                "github.com:\n  oauth_token: [a\n",
                "YAML parser does not read",
            ),
            ("- a\n", "not a mapping"),
            (
                &format!("a: {}{}\n", "[".repeat(40), "]".repeat(40)),
                "deeper",
            ),
        ] {
            let e = read_yaml(yaml).unwrap_err();
            assert!(e.contains(says) && !e.contains('\n'), "{yaml}: {e}");
        }
    }

    #[test]
    fn secrets_are_found_at_any_depth_and_odd_ones_refused() {
        let root =
            map("h:\n  oauth_token: a1\n  users:\n    me: {oauth_token: a2}\n  OAUTH_TOKEN: ''\n");
        let got = secrets(&root, &["oauth_token"]).unwrap();
        assert_eq!(
            got,
            [
                (
                    vec!["h".to_string(), "oauth_token".to_string()],
                    "a1".to_string()
                ),
                (
                    vec![
                        "h".into(),
                        "users".into(),
                        "me".into(),
                        "oauth_token".into()
                    ],
                    "a2".to_string()
                ),
            ]
        );
        for bad in [
            "h:\n  oauth_token: |\n    gho_X\n",
            "h:\n  oauth_token: \"gho X\"\n",
            "h:\n  oauth_token: [gho_X]\n",
            "h:\n  oauth_token: {a: b}\n",
        ] {
            assert!(secrets(&map(bad), &["oauth_token"]).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_token_outside_the_tools_keys_is_refused() {
        let p = ["gho_", "glpat-"];
        let root = map("h:\n  oauth_token :gho_ABCDEFGH1\n");
        assert!(stray_token(&root, &[], &p).unwrap_err().contains("gho_"));
        let root = map(
            "h:\n  oauth_token: gho_ABCDEFGH1\n  url: https://x:gho_ABCDEFGH1@h/\n  u: gho_short\n",
        );
        assert_eq!(stray_token(&root, &["gho_ABCDEFGH1"], &p), Ok(()));
        let root = map("h:\n  glpat-ABCDEFGH123: x\n");
        assert!(stray_token(&root, &[], &p).is_err());
    }

    #[test]
    fn the_copy_is_the_tree_with_standins_and_nothing_else() {
        let yaml = "# old: gho_OLD\nh: &x\n  oauth_token: \"gho_\\x52EAL\" # gho_TRAILING\n  user: on\n---\n";
        let root = map(yaml);
        let copy = copy_of(&root, &[("gho_REAL".into(), "gho_STAN".into())]);
        for gone in ["gho_OLD", "TRAILING", "REAL", "&x"] {
            assert!(!copy.contains(gone), "{gone}: {copy}");
        }
        let back = map(&copy);
        assert_eq!(
            text(get(get(&back, "h").unwrap(), "oauth_token")),
            Some("gho_STAN")
        );
        assert_eq!(text(get(get(&back, "h").unwrap(), "user")), Some("on"));
    }
}
