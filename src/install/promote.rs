//! `claude-sandbox promote [DIR]` (SPEC §9): wire the devcontainer feature
//! and the `/verify-sandbox` command into a workspace, editing its
//! `.devcontainer/devcontainer.json` as JSON with comments: only the
//! inserted `features` entry changes; every comment, trailing comma and the
//! formatting of untouched parts stay as they were. Idempotent. `runArgs`
//! is left as it is, neither added nor removed: the feature's metadata and
//! entrypoint give the sandbox what it needs (issue #26).
//!
//! Parsing and insertion are `jsonc_parser`'s CST; this module decides what
//! goes where, and undoes the crate's reflowing of one-line containers and
//! its trimming of blank lines (`append_in_style`).

use std::path::{Path, PathBuf};

use jsonc_parser::cst::{CstContainerNode, CstInputValue, CstNode, CstObject, CstRootNode};
use jsonc_parser::errors::{ParseError, ParseErrorKind};
use jsonc_parser::tokens::Token;
use jsonc_parser::{ParseOptions, Scanner, ScannerOptions};

use crate::error::{bad_input, Fail};

/// The published feature this entry refers to, by this version's major tag
/// (`devcontainer features publish` pushes `:MAJOR`, `:MAJOR.MINOR`,
/// `:VERSION` and `:latest`): what `devcontainer upgrade` moves on within.
pub const FEATURE_REF: &str = concat!(
    "ghcr.io/claude-sandbox/claude-sandbox/claude-sandbox:",
    env!("CARGO_PKG_VERSION_MAJOR")
);
/// The slash command seeded into the workspace (compiled in).
pub(crate) const VERIFY_COMMAND: &str = include_str!("../../.claude/commands/verify-sandbox.md");

/// Command-line arguments of `claude-sandbox promote`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The workspace to promote (default: the current directory).
    dir: Option<PathBuf>,
}

/// Why a file is refused, at a 1-based line.
#[derive(Debug, PartialEq, Eq)]
pub struct JsoncError {
    pub line: usize,
    pub what: String,
}

/// What the devcontainer tools read: JSON plus comments and trailing commas,
/// none of JSON5's other looseness (a missing comma is an error, not a guess).
const DEVCONTAINER_JSON: ParseOptions = ParseOptions {
    allow_comments: true,
    allow_trailing_commas: true,
    allow_loose_object_property_names: false,
    allow_missing_commas: false,
    allow_single_quoted_strings: false,
    allow_hexadecimal_numbers: false,
    allow_unary_plus_numbers: false,
    allow_bare_decimal_point_numbers: false,
    allow_non_finite_numbers: false,
    allow_extended_string_escapes: false,
};

/// A parse error at its line. The crate places a missing comma right after
/// the value before it; this names the line of the value that follows
/// without one instead, where a reader looks for the fault.
fn parse_error(text: &str, e: &ParseError) -> JsoncError {
    let mut line = e.line_display();
    if matches!(e.kind(), ParseErrorKind::ExpectedComma) {
        let rest = text.get(e.range().start..).unwrap_or_default();
        let mut tokens = Scanner::new(rest, &ScannerOptions::default());
        while let Ok(Some(Token::CommentLine(_) | Token::CommentBlock(_))) = tokens.scan() {}
        let skipped = rest.get(..tokens.token_start()).unwrap_or_default();
        line += skipped.matches('\n').count();
    }
    JsoncError {
        line,
        what: e.kind().to_string(),
    }
}

/// The 1-based line `node` starts on.
fn line_of(node: &CstNode) -> usize {
    let mut newlines = 0;
    let mut at = Some(node.clone());
    while let Some(n) = at {
        newlines += n
            .previous_siblings()
            .map(|s| s.to_string().matches('\n').count())
            .sum::<usize>();
        at = n.parent().map(CstNode::from);
    }
    newlines + 1
}

/// The member `name` of `obj`, if present, as the kind `as_kind` picks
/// (`what` names that kind for the refusal).
fn member<T>(
    obj: &CstObject,
    name: &str,
    as_kind: fn(&CstNode) -> Option<T>,
    what: &str,
) -> Result<Option<T>, JsoncError> {
    let Some(prop) = obj.get(name) else {
        return Ok(None);
    };
    let value = prop.value();
    match value.as_ref().and_then(as_kind) {
        Some(v) => Ok(Some(v)),
        None => Err(JsoncError {
            line: line_of(&value.unwrap_or_else(|| prop.into())),
            what: format!("`{name}` is not {what}"),
        }),
    }
}

/// Run `append` on `container` in the container's own style. The crate puts
/// each entry on its own line with the siblings' indentation and trailing
/// comma style; two things it does to the rest of the container are undone
/// here: it spreads a container written on one line over several (put back
/// on one line: `{ "a": 1, "b": 2 }`, with or without the spaces inside the
/// brackets as before, `{}` → `{ x }`), and it drops blank lines at the
/// inside start and end of the container (put back where they were).
fn append_in_style(container: CstContainerNode, append: impl FnOnce()) {
    let before = container.children();
    if before.iter().any(CstNode::is_newline) {
        append();
        restore_blank_lines(&container, &before);
        return;
    }
    let empty = before.iter().all(|c| c.is_whitespace() || c.is_token());
    let padded = before.get(1).is_some_and(CstNode::is_whitespace);
    // Arrays too, so that they get the same spacing and trailing comma.
    if let Some(array) = container.as_array() {
        array.ensure_multiline();
    }
    append();
    let mut spaced = false;
    for child in container.children() {
        if child.is_newline() {
            child.remove();
        } else if let Some(ws) = child.as_whitespace() {
            if spaced {
                ws.remove();
            } else {
                ws.set_value(" ".into());
                spaced = true;
            }
        } else {
            spaced = false;
        }
    }
    let children = container.children();
    let inside = [1, children.len().saturating_sub(2)]
        .map(|i| children.get(i).and_then(CstNode::as_whitespace));
    // An empty container is padded when both sides can be (the root's
    // closing brace has no indentation to turn into a space).
    if !padded && !empty || empty && inside.iter().any(Option::is_none) {
        for ws in inside.into_iter().flatten() {
            ws.remove();
        }
    }
}

/// Put back the blank lines the crate trimmed from `container`, whose
/// children were `before`: each removed run of newlines and white space
/// goes into the white space that indents the next line.
fn restore_blank_lines(container: &CstContainerNode, before: &[CstNode]) {
    let removed = |n: &CstNode| n.parent().is_none();
    let mut i = 0;
    while i < before.len() {
        if !removed(&before[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while before.get(i).is_some_and(removed) {
            i += 1;
        }
        let run = &before[start..i];
        let text: String = run.iter().map(ToString::to_string).collect();
        // As whole lines: a run taken from the end starts with its newline.
        let lines = match run.first() {
            Some(nl) if nl.is_newline() && !run.last().is_some_and(CstNode::is_newline) => {
                let nl = nl.to_string();
                let rest = text.strip_prefix(&nl).unwrap_or_default();
                format!("{rest}{nl}")
            }
            _ => text.clone(),
        };
        let now = container.children();
        let indent_after = |at: usize| {
            now.get(at)
                .filter(|_| at > 0 && now[at - 1].is_newline())
                .and_then(CstNode::as_whitespace)
        };
        let next = before.get(i).map(CstNode::child_index);
        let target = match next {
            // Taken from the start: the next line's indentation follows.
            Some(n) if now.get(n).is_some_and(CstNode::is_whitespace) => now
                .get(n)
                .and_then(CstNode::as_whitespace)
                .map(|ws| (ws, text)),
            // Taken from the end: the line break before the closing bracket follows.
            Some(n) => indent_after(n + 1).map(|ws| (ws, lines.clone())),
            None => None,
        }
        .or_else(|| {
            // No indentation there (a closing brace at column 0): the
            // nearest line's, after the run's place first.
            let from = before[..start].last().map_or(0, |p| p.child_index() + 1);
            (from..now.len())
                .chain((0..from).rev())
                .find_map(indent_after)
                .map(|ws| (ws, lines))
        });
        if let Some((ws, add)) = target {
            ws.set_value(format!("{add}{}", ws.value()));
        }
    }
}

/// Add the feature to a devcontainer.json text (nothing else: `runArgs`
/// and every other member stay as they are). Returns the new text (equal to
/// the input when the feature was there).
pub fn edit(text: &str) -> Result<String, JsoncError> {
    let root = CstRootNode::parse(text, &DEVCONTAINER_JSON).map_err(|e| parse_error(text, &e))?;
    let Some(obj) = root.object_value() else {
        return Err(JsoncError {
            line: root.value().map_or(1, |v| line_of(&v)),
            what: "the document is not an object".into(),
        });
    };
    // The refusal before any change.
    let features = member(&obj, "features", CstNode::as_object, "an object")?;
    if features.is_none() {
        append_in_style(obj.clone().into(), || {
            obj.append("features", CstInputValue::Object(Vec::new()));
        });
    }
    // Any version of our feature counts as present.
    let ours = FEATURE_REF.rsplit_once(':').map_or(FEATURE_REF, |(r, _)| r);
    if let Some(features) = features.or_else(|| obj.object_value("features")) {
        let present = features
            .properties()
            .iter()
            .any(|p| p.decoded_name().is_some_and(|n| n.starts_with(ours)));
        if !present {
            append_in_style(features.clone().into(), || {
                features.append(FEATURE_REF, CstInputValue::Object(Vec::new()));
            });
        }
    }
    let out = root.to_string();
    // Never write what the next run could not read (as a refusal, not a panic).
    if let Err(e) = CstRootNode::parse(&out, &DEVCONTAINER_JSON) {
        return Err(JsoncError {
            line: e.line_display(),
            what: format!(
                "the edit would not parse ({}): please report this",
                e.kind()
            ),
        });
    }
    Ok(out)
}

/// A devcontainer.json for a workspace that has none.
fn minimal(name: &str) -> String {
    format!(
        "// Created by claude-sandbox promote: every terminal's `claude` runs sandboxed.\n{{\n  \"name\": {},\n  \"image\": \"mcr.microsoft.com/devcontainers/base:bookworm\",\n  \"features\": {{\n    \"{FEATURE_REF}\": {{}}\n  }}\n}}\n",
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
pub(crate) fn main(args: &Args) -> anyhow::Result<i32> {
    let dir = workspace_dir(args)?;
    let mut changed = Vec::new();
    changed.extend(wire_devcontainer(&dir)?);
    changed.extend(seed_verify_command(&dir)?);
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

/// The workspace to promote, refused unless it is a directory other than this repository.
fn workspace_dir(args: &Args) -> anyhow::Result<PathBuf> {
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
    Ok(dir)
}

/// The file the devcontainer tools would use: `.devcontainer/devcontainer.json`,
/// else a `.devcontainer.json` at the top (never shadow it with a new file).
fn devcontainer_file(dir: &Path) -> PathBuf {
    match (
        dir.join(".devcontainer").join("devcontainer.json"),
        dir.join(".devcontainer.json"),
    ) {
        (nested, top) if !nested.exists() && top.is_file() => top,
        (nested, _) => nested,
    }
}

/// Add the feature to the workspace's devcontainer.json (created when
/// missing); returns what changed, if anything.
fn wire_devcontainer(dir: &Path) -> anyhow::Result<Option<String>> {
    let dc = devcontainer_file(dir);
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
            if new == text {
                return Ok(None);
            }
            fs_err::write(&dc, new)?;
            Ok(Some(format!(
                "added the claude-sandbox feature to {}",
                dc.display()
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs_err::create_dir_all(dir.join(".devcontainer"))?;
            let name = dir
                .canonicalize()?
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "workspace".into());
            fs_err::write(&dc, minimal(&name))?;
            Ok(Some(format!("created {}", dc.display())))
        }
        Err(e) => Err(bad_input(format!(
            "promote: cannot read {}: {e}",
            dc.display()
        ))),
    }
}

/// Seed the `/verify-sandbox` command unless one is there (a different one is
/// the user's, left alone with a note); returns what changed, if anything.
fn seed_verify_command(dir: &Path) -> anyhow::Result<Option<String>> {
    let cmd = dir.join(".claude/commands/verify-sandbox.md");
    match std::fs::read_to_string(&cmd) {
        Ok(t) if t == VERIFY_COMMAND => Ok(None),
        Ok(_) => {
            println!(
                "claude-sandbox: {} exists and differs from ours; left as it is",
                cmd.display()
            );
            Ok(None)
        }
        Err(_) => {
            fs_err::create_dir_all(cmd.parent().expect("has a parent"))?;
            fs_err::write(&cmd, VERIFY_COMMAND)?;
            Ok(Some(format!("seeded {}", cmd.display())))
        }
    }
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
        // Only the feature's entry is inserted: removing it gives the input
        // back, `runArgs` included.
        let back = out.replace(&format!("\n    \"{FEATURE_REF}\": {{}},"), "");
        assert_eq!(back, WITH_COMMENTS);
        assert_eq!(edit(&out).unwrap(), out, "second edit changes nothing");
    }

    #[test]
    fn leaves_run_args_alone() {
        // Whatever `runArgs` holds, or whether it exists at all, it stays as
        // it was: no tun device added, none removed, no shape checked.
        for run_args in [
            None,
            Some("[]"),
            Some("[\"--init\"]"),
            Some("[\"--device=/dev/net/tun\"]"),
            Some("[\"--init\", \"--device=/dev/net/tun\"]"),
            Some("5"),
        ] {
            let text = match run_args {
                Some(r) => format!("{{\n  \"runArgs\": {r},\n  \"name\": \"x\"\n}}\n"),
                None => "{\n  \"name\": \"x\"\n}\n".to_string(),
            };
            let out = edit(&text).unwrap();
            assert!(out.contains(FEATURE_REF), "{out}");
            let tun = "--device=/dev/net/tun";
            assert_eq!(out.matches(tun).count(), text.matches(tun).count(), "{out}");
            match run_args {
                Some(r) => assert!(out.contains(&format!("\"runArgs\": {r},")), "{out}"),
                None => assert!(!out.contains("runArgs"), "{out}"),
            }
            assert_eq!(edit(&out).unwrap(), out);
        }
    }

    #[test]
    fn creates_missing_members_in_style() {
        let out = edit("{\n    \"name\": \"x\"\n}\n").unwrap();
        assert_eq!(
            out,
            format!(
                "{{\n    \"name\": \"x\",\n    \"features\": {{ \"{FEATURE_REF}\": {{}} }}\n}}\n"
            )
        );
        let out = edit("{}").unwrap();
        assert!(
            out.contains(FEATURE_REF) && !out.contains("runArgs"),
            "{out}"
        );
        assert_eq!(edit(&out).unwrap(), out);
        let out = edit("{\"features\": {}, \"runArgs\": []}").unwrap();
        assert_eq!(
            out,
            format!("{{\"features\": {{ \"{FEATURE_REF}\": {{}} }}, \"runArgs\": []}}")
        );
    }

    #[test]
    fn comment_that_looks_like_two_never_swallows_the_edit() {
        // Found by tests/fuzz.rs (10-minute run): `/*/*/` is one comment;
        // the old hand-written editor inserted the entries inside it, so a
        // second run inserted them again.
        let text = "{//\n\n//\n//\n  \"\": null\n,/*/*/}";
        let once = edit(text).unwrap();
        assert_eq!(edit(&once).unwrap(), once, "a second edit changed the text");
        let stripped: String = once
            .split("/*/*/")
            .map(str::to_string)
            .collect::<Vec<_>>()
            .join("");
        assert!(stripped.contains(FEATURE_REF), "{once}");
    }

    #[test]
    fn unparseable_reports_the_line() {
        let e = edit("{\n  \"name\": \"x\"\n  \"image\": \"y\"\n}").unwrap_err();
        assert_eq!(e.line, 3, "{e:?}");
        assert_eq!(edit("{\n /* open").unwrap_err().line, 2);
        assert!(edit("[1]").is_err());
        assert!(edit("{\"features\": 5}")
            .unwrap_err()
            .what
            .contains("features"));
    }

    #[test]
    fn minimal_file_is_valid_and_complete() {
        let m = minimal("my \"app\"");
        assert_eq!(edit(&m).unwrap(), m);
        assert!(!m.contains("runArgs"), "{m}");
    }

    #[test]
    fn keeps_blank_lines_at_the_edges_and_the_line_endings() {
        // The crate trims blank lines just inside a container it appends to.
        let text = "{\n\n  \"features\": {\n\n    \"a\": {}\n  \n  },\n  \"runArgs\": [\n    \"--init\"\n\n  ]\n}\n";
        assert_eq!(
            edit(text).unwrap(),
            format!("{{\n\n  \"features\": {{\n\n    \"a\": {{}},\n    \"{FEATURE_REF}\": {{}}\n  \n  }},\n  \"runArgs\": [\n    \"--init\"\n\n  ]\n}}\n")
        );
        assert_eq!(
            edit("{\n\n  \"name\": \"x\"\n}\n").unwrap(),
            format!(
                "{{\n\n  \"name\": \"x\",\n  \"features\": {{ \"{FEATURE_REF}\": {{}} }}\n}}\n"
            )
        );
        let out = edit("{\r\n  \"name\": \"x\"\r\n}\r\n").unwrap();
        assert!(out.contains(FEATURE_REF), "{out}");
        assert!(!out.replace("\r\n", "").contains('\n'), "{out:?}");
    }

    #[test]
    fn refusals_name_the_line_in_the_file_as_given() {
        let text = "{\n  \"runArgs\": [\n    \"--init\"\n  ],\n  \"features\": []\n}\n";
        assert_eq!(
            edit(text),
            Err(JsoncError {
                line: 5,
                what: "`features` is not an object".into()
            })
        );
        // A missing comma: the line of what follows, past comments.
        let e = edit("{\n  \"a\": 1 // note\n  /* x */\n  \"b\": 2\n}").unwrap_err();
        assert_eq!(e.line, 4, "{e:?}");
        assert_eq!(edit("// hi\n\n[1]").unwrap_err().line, 3);
    }
}
