//! `claude-sandbox promote [DIR]` (SPEC §9): wire the devcontainer feature,
//! the `/dev/net/tun` device and the `/verify-sandbox` command into a
//! workspace, editing its `.devcontainer/devcontainer.json` as JSON with
//! comments: only the inserted text changes; every comment, trailing comma
//! and the formatting of untouched parts stay as they were. Idempotent.

use std::path::{Path, PathBuf};

use crate::error::{bad_input, Fail};

/// The published feature this entry refers to.
pub const FEATURE_REF: &str = "ghcr.io/claude-sandbox/features/claude-sandbox:1";
/// The device the egress jail needs; a feature cannot add it itself.
pub const TUN_ARG: &str = "--device=/dev/net/tun";
/// The slash command seeded into the workspace (compiled in).
pub const VERIFY_COMMAND: &str = include_str!("../.claude/commands/verify-sandbox.md");

/// Command-line arguments of `claude-sandbox promote`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workspace to promote (default: the current directory).
    pub dir: Option<PathBuf>,
}

/// A parse error at a 1-based line.
#[derive(Debug, PartialEq, Eq)]
pub struct JsoncError {
    pub line: usize,
    pub what: String,
}

/// A value's extent and, for containers, its members.
#[derive(Debug, Clone)]
struct Node {
    start: usize,
    end: usize, // one past the closing char
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Object(Vec<(String, Node)>),
    Array(Vec<Node>),
    Str(String),
    Other,
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, what: impl Into<String>) -> JsoncError {
        let line = self.s[..self.i.min(self.s.len())]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1;
        JsoncError {
            line,
            what: what.into(),
        }
    }

    /// Skip white space and comments.
    fn ws(&mut self) -> Result<(), JsoncError> {
        loop {
            match self.s.get(self.i..self.i + 2) {
                Some(b"//") => {
                    while self.i < self.s.len() && self.s[self.i] != b'\n' {
                        self.i += 1;
                    }
                }
                Some(b"/*") => {
                    let start = self.i;
                    self.i += 2;
                    while self.s.get(self.i..self.i + 2) != Some(b"*/") {
                        if self.i >= self.s.len() {
                            self.i = start;
                            return Err(self.err("unterminated /* comment"));
                        }
                        self.i += 1;
                    }
                    self.i += 2;
                }
                _ => match self.s.get(self.i) {
                    Some(b' ' | b'\t' | b'\n' | b'\r') => self.i += 1,
                    _ => return Ok(()),
                },
            }
        }
    }

    fn string(&mut self) -> Result<String, JsoncError> {
        let start = self.i;
        self.i += 1;
        let mut out = Vec::new();
        loop {
            match self.s.get(self.i) {
                None | Some(b'\n') => {
                    self.i = start;
                    return Err(self.err("unterminated string"));
                }
                Some(b'"') => {
                    self.i += 1;
                    return Ok(String::from_utf8_lossy(&out).into_owned());
                }
                Some(b'\\') => {
                    out.push(self.s[self.i]);
                    if let Some(c) = self.s.get(self.i + 1) {
                        out.push(*c);
                    }
                    self.i += 2;
                }
                Some(c) => {
                    out.push(*c);
                    self.i += 1;
                }
            }
        }
    }

    fn value(&mut self) -> Result<Node, JsoncError> {
        self.ws()?;
        let start = self.i;
        match self.s.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                loop {
                    self.ws()?;
                    match self.s.get(self.i) {
                        Some(b'}') => {
                            self.i += 1;
                            break;
                        }
                        Some(b'"') => {
                            let key = self.string()?;
                            self.ws()?;
                            if self.s.get(self.i) != Some(&b':') {
                                return Err(self.err(format!("expected `:` after \"{key}\"")));
                            }
                            self.i += 1;
                            let v = self.value()?;
                            members.push((key, v));
                            self.ws()?;
                            match self.s.get(self.i) {
                                Some(b',') => self.i += 1,
                                Some(b'}') => {}
                                _ => return Err(self.err("expected `,` or `}`")),
                            }
                        }
                        _ => return Err(self.err("expected a member name or `}`")),
                    }
                }
                Ok(Node {
                    start,
                    end: self.i,
                    kind: Kind::Object(members),
                })
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    self.ws()?;
                    if self.s.get(self.i) == Some(&b']') {
                        self.i += 1;
                        break;
                    }
                    items.push(self.value()?);
                    self.ws()?;
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {}
                        _ => return Err(self.err("expected `,` or `]`")),
                    }
                }
                Ok(Node {
                    start,
                    end: self.i,
                    kind: Kind::Array(items),
                })
            }
            Some(b'"') => {
                let v = self.string()?;
                Ok(Node {
                    start,
                    end: self.i,
                    kind: Kind::Str(v),
                })
            }
            Some(c) if c.is_ascii_alphanumeric() || *c == b'-' => {
                while self
                    .s
                    .get(self.i)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || b"+-.".contains(c))
                {
                    self.i += 1;
                }
                let word = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
                if !(["true", "false", "null"].contains(&word) || word.parse::<f64>().is_ok()) {
                    self.i = start;
                    return Err(self.err(format!("unexpected `{word}`")));
                }
                Ok(Node {
                    start,
                    end: self.i,
                    kind: Kind::Other,
                })
            }
            None => Err(self.err("unexpected end of file")),
            Some(c) => Err(self.err(format!("unexpected `{}`", *c as char))),
        }
    }
}

fn parse(text: &str) -> Result<Node, JsoncError> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let root = p.value()?;
    p.ws()?;
    if p.i != text.len() {
        return Err(p.err("text after the end of the document"));
    }
    if !matches!(root.kind, Kind::Object(_)) {
        return Err(JsoncError {
            line: 1,
            what: "the document is not an object".into(),
        });
    }
    Ok(root)
}

/// The indentation of the line holding byte `at`.
fn indent_at(text: &str, at: usize) -> String {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect()
}

/// From `pos`, past spaces and a comment that ends on the same line.
fn same_line_comment_end(text: &str, pos: usize) -> usize {
    let rest = &text[pos..];
    let skipped = rest.len() - rest.trim_start_matches([' ', '\t']).len();
    let p = pos + skipped;
    let r = &text[p..];
    if r.starts_with("//") {
        return p + r.find('\n').unwrap_or(r.len());
    }
    if r.starts_with("/*") {
        if let Some(close) = r.find("*/") {
            if !r[..close].contains('\n') {
                return p + close + 2;
            }
        }
    }
    pos
}

/// Insert `entry` as the last element of the container `node` (object or
/// array), in the container's own style: on its own line with the siblings'
/// indentation, keeping a trailing comma if the last sibling had one.
fn append(text: &str, node: &Node, entry: &str) -> String {
    let last_end = match &node.kind {
        Kind::Object(m) => m.last().map(|(_, v)| v.end),
        Kind::Array(a) => a.last().map(|v| v.end),
        _ => None,
    };
    let close = node.end - 1;
    match last_end {
        None => {
            // Empty container: `{}` → `{ entry }` on one line.
            let inner = &text[node.start + 1..close];
            if inner.trim().is_empty() {
                format!(
                    "{}{} {entry} {}",
                    &text[..node.start],
                    &text[node.start..node.start + 1],
                    &text[close..]
                )
            } else {
                // Only comments inside: put the entry before the closing bracket.
                format!(
                    "{}{entry}\n{}{}",
                    &text[..close],
                    indent_at(text, close),
                    &text[close..]
                )
            }
        }
        Some(last) => {
            let after = &text[last..close];
            let trailing_comma = after.trim_start().starts_with(',');
            let (first_start, multiline) = match &node.kind {
                Kind::Object(m) => (m[0].1.start, text[node.start..m[0].1.start].contains('\n')),
                Kind::Array(a) => (a[0].start, text[node.start..a[0].start].contains('\n')),
                _ => unreachable!(),
            };
            let sep = if multiline {
                format!("\n{}", indent_at(text, first_start))
            } else {
                " ".into()
            };
            if trailing_comma {
                let comma = last + after.find(',').expect("checked");
                let at = if multiline {
                    same_line_comment_end(text, comma + 1)
                } else {
                    comma + 1
                };
                format!("{}{sep}{entry},{}", &text[..at], &text[at..])
            } else if multiline {
                // The comma right after the value; the entry after any comment
                // that shares the value's line, so that comment stays put.
                let at = same_line_comment_end(text, last);
                format!(
                    "{},{}{sep}{entry}{}",
                    &text[..last],
                    &text[last..at],
                    &text[at..]
                )
            } else {
                format!("{},{sep}{entry}{}", &text[..last], &text[last..])
            }
        }
    }
}

/// Add the feature and the tun device to a devcontainer.json text. Returns
/// the new text (equal to the input when nothing was missing).
pub fn edit(text: &str) -> Result<String, JsoncError> {
    let root = parse(text)?;
    let Kind::Object(members) = &root.kind else {
        unreachable!()
    };
    let find = |k: &str| members.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let mut out = text.to_string();
    // runArgs first: it may sit after `features`, and editing from the end
    // keeps the earlier spans valid. Re-parse after each edit instead of
    // juggling offsets.
    match find("runArgs") {
        Some(Node {
            kind: Kind::Array(items),
            ..
        }) if items
            .iter()
            .any(|i| matches!(&i.kind, Kind::Str(s) if s == TUN_ARG)) => {}
        Some(
            node @ Node {
                kind: Kind::Array(_),
                ..
            },
        ) => out = append(&out, &node, &format!("\"{TUN_ARG}\"")),
        Some(node) => {
            return Err(JsoncError {
                line: line_of(text, node.start),
                what: "`runArgs` is not an array".into(),
            })
        }
        None => out = append(&out, &root, &format!("\"runArgs\": [\"{TUN_ARG}\"]")),
    }
    let root = parse(&out)?;
    let Kind::Object(members) = &root.kind else {
        unreachable!()
    };
    match members
        .iter()
        .find(|(n, _)| n == "features")
        .map(|(_, v)| v.clone())
    {
        Some(Node {
            kind: Kind::Object(fs),
            ..
        }) if fs.iter().any(|(k, _)| {
            k.starts_with(FEATURE_REF.rsplit_once(':').map_or(FEATURE_REF, |(a, _)| a))
        }) => {}
        Some(
            node @ Node {
                kind: Kind::Object(_),
                ..
            },
        ) => out = append(&out, &node, &format!("\"{FEATURE_REF}\": {{}}")),
        Some(node) => {
            return Err(JsoncError {
                line: line_of(&out, node.start),
                what: "`features` is not an object".into(),
            })
        }
        None => {
            out = append(
                &out,
                &root,
                &format!("\"features\": {{ \"{FEATURE_REF}\": {{}} }}"),
            )
        }
    }
    parse(&out).expect("our own edit parses");
    Ok(out)
}

fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// A devcontainer.json for a workspace that has none.
pub fn minimal(name: &str) -> String {
    format!(
        "// Created by claude-sandbox promote: every terminal's `claude` runs sandboxed.\n{{\n  \"name\": {},\n  \"image\": \"mcr.microsoft.com/devcontainers/base:bookworm\",\n  \"features\": {{\n    \"{FEATURE_REF}\": {{}}\n  }},\n  // The egress jail needs the tun device; a feature cannot add it.\n  \"runArgs\": [\"{TUN_ARG}\"]\n}}\n",
        serde_json::to_string(name).expect("a string serializes")
    )
}

/// Is `dir` this repository (the one that builds claude-sandbox)?
fn is_this_repo(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .is_ok_and(|t| t.contains("name = \"claude-sandbox\""))
        && dir.join("etc/claude-gitconfig").exists()
        && dir.join("devcontainer-feature").is_dir()
}

/// Run `claude-sandbox promote`.
pub fn main(args: &Args) -> anyhow::Result<i32> {
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir()?,
    };
    if !dir.is_dir() {
        return Err(bad_input(format!(
            "promote: {} is not a directory",
            dir.display()
        )));
    }
    if is_this_repo(&dir) {
        return Err(bad_input(format!(
            "promote: {} is the claude-sandbox repository itself; promote the workspace you want sandboxed",
            dir.display()
        )));
    }
    let dc_dir = dir.join(".devcontainer");
    // The file the devcontainer tools would use: `.devcontainer/devcontainer.json`,
    // else a `.devcontainer.json` at the top (never shadow it with a new file).
    let dc = match (
        dc_dir.join("devcontainer.json"),
        dir.join(".devcontainer.json"),
    ) {
        (nested, top) if !nested.exists() && top.is_file() => top,
        (nested, _) => nested,
    };
    let mut changed = Vec::new();
    match std::fs::read_to_string(&dc) {
        Ok(text) => {
            let new = edit(&text).map_err(|e| {
                Fail::new(
                    crate::error::EXIT_BAD_INPUT,
                    format!(
                        "promote: {}:{}: {}; fix the file (left untouched) and run promote again",
                        dc.display(),
                        e.line,
                        e.what
                    ),
                )
            })?;
            if new != text {
                fs_err::write(&dc, new)?;
                changed.push(format!(
                    "added the claude-sandbox feature and {TUN_ARG} to {}",
                    dc.display()
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs_err::create_dir_all(&dc_dir)?;
            let name = dir
                .canonicalize()?
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "workspace".into());
            fs_err::write(&dc, minimal(&name))?;
            changed.push(format!("created {}", dc.display()));
        }
        Err(e) => {
            return Err(bad_input(format!(
                "promote: cannot read {}: {e}",
                dc.display()
            )))
        }
    }
    let cmd = dir.join(".claude/commands/verify-sandbox.md");
    match std::fs::read_to_string(&cmd) {
        Ok(t) if t == VERIFY_COMMAND => {}
        Ok(_) => println!(
            "claude-sandbox: {} exists and differs from ours; left as it is",
            cmd.display()
        ),
        Err(_) => {
            fs_err::create_dir_all(cmd.parent().expect("has a parent"))?;
            fs_err::write(&cmd, VERIFY_COMMAND)?;
            changed.push(format!("seeded {}", cmd.display()));
        }
    }
    if changed.is_empty() {
        println!(
            "claude-sandbox: {} is already promoted; nothing changed",
            dir.display()
        );
    }
    for c in changed {
        println!("claude-sandbox: {c}");
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WITH_COMMENTS: &str = r#"// Our team's container
{
  "name": "app", // inline comment
  /* block
     comment */
  "image": "mcr.microsoft.com/devcontainers/base:bookworm",
  "features": {
    "ghcr.io/devcontainers/features/node:1": { "version": "20" }, // trailing comma
  },
  "runArgs": ["--init"],
  "customizations": { "vscode": { "extensions": ["rust-lang.rust-analyzer",] } },
}
"#;

    #[test]
    fn adds_exactly_our_entry_and_keeps_every_comment() {
        let out = edit(WITH_COMMENTS).unwrap();
        for c in [
            "// Our team's container",
            "// inline comment",
            "/* block\n     comment */",
            "// trailing comma",
        ] {
            assert!(out.contains(c), "lost {c}: {out}");
        }
        assert!(
            out.contains(&format!("\"{FEATURE_REF}\": {{}},\n  }}")),
            "{out}"
        );
        assert!(
            out.contains("\"runArgs\": [\"--init\", \"--device=/dev/net/tun\"]"),
            "{out}"
        );
        // Only insertions: removing them gives the input back.
        let back = out
            .replace(&format!("\n    \"{FEATURE_REF}\": {{}},"), "")
            .replace(", \"--device=/dev/net/tun\"", "");
        assert_eq!(back, WITH_COMMENTS);
        assert_eq!(edit(&out).unwrap(), out, "second edit changes nothing");
    }

    #[test]
    fn creates_missing_members_in_style() {
        let out = edit("{\n    \"name\": \"x\"\n}\n").unwrap();
        assert_eq!(
            out,
            format!("{{\n    \"name\": \"x\",\n    \"runArgs\": [\"{TUN_ARG}\"],\n    \"features\": {{ \"{FEATURE_REF}\": {{}} }}\n}}\n")
        );
        let out = edit("{}").unwrap();
        assert!(out.contains(FEATURE_REF) && out.contains(TUN_ARG));
        assert_eq!(edit(&out).unwrap(), out);
        let out = edit("{\"features\": {}, \"runArgs\": []}").unwrap();
        assert_eq!(
            out,
            format!(
                "{{\"features\": {{ \"{FEATURE_REF}\": {{}} }}, \"runArgs\": [ \"{TUN_ARG}\" ]}}"
            )
        );
    }

    #[test]
    fn unparseable_reports_the_line() {
        let e = edit("{\n  \"name\": \"x\"\n  \"image\": \"y\"\n}").unwrap_err();
        assert_eq!(e.line, 3, "{e:?}");
        assert_eq!(edit("{\n /* open").unwrap_err().line, 2);
        assert!(edit("[1]").is_err());
        assert!(edit("{\"runArgs\": 5}")
            .unwrap_err()
            .what
            .contains("runArgs"));
    }

    #[test]
    fn minimal_file_is_valid_and_complete() {
        let m = minimal("my \"app\"");
        assert_eq!(edit(&m).unwrap(), m);
    }
}
