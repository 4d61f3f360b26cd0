//! `doctor`'s search of the user's shell startup files for an alias or a
//! function named `claude` (issue #24): an interactive shell runs it
//! instead of the shadow, so `claude` starts something else than the
//! sandbox. Claude Code's old npm-local installer wrote one
//! (`alias claude="~/.claude/local/claude"`), pointing into `~/.claude`,
//! which every sandboxed session can write (the sandbox masks
//! `~/.claude/local`, but an older launch or another tool may have filled it).

use std::path::{Path, PathBuf};

/// Shell startup files under `$HOME` that can define `claude`: bash, sh,
/// zsh, ksh and fish, and a fish function file of that name.
const STARTUP_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_aliases",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".kshrc",
    ".mkshrc",
    ".config/fish/config.fish",
    ".config/fish/functions/claude.fish",
];

/// One definition of `claude` found: file, line number (from 1), the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Definition {
    pub(super) file: PathBuf,
    pub(super) line: usize,
    pub(super) text: String,
}

/// Whether `word` (an alias operand or a function name) defines `claude`:
/// `claude`, `claude=…`, quoted or not.
fn names_claude(word: &str) -> bool {
    let w = word.trim_matches(|c| c == '\'' || c == '"');
    w == "claude" || w.starts_with("claude=")
}

/// Whether one line of a startup file defines `claude`: `alias claude=…`
/// (also among other aliases, and fish's `alias claude '…'`),
/// `claude() {…`, `function claude …`. Comments do not count.
fn defines_claude(line: &str) -> bool {
    let l = line.trim_start();
    if l.starts_with('#') {
        return false;
    }
    let mut words = l.split_whitespace();
    match words.next() {
        Some("alias") => words.filter(|w| !w.starts_with('-')).any(names_claude),
        Some("function") => words.next().is_some_and(|w| {
            let name = w.trim_end_matches(['{', '(', ')', ';']);
            name == "claude"
        }),
        Some(_) => l
            .strip_prefix("claude")
            .is_some_and(|rest| rest.trim_start().starts_with("()")),
        None => false,
    }
}

/// The lines of `text` that define `claude`, numbered from 1.
pub(super) fn definitions_in(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| defines_claude(l))
        .map(|(i, l)| (i + 1, l.trim().to_string()))
        .collect()
}

/// Every definition of `claude` in `home`'s shell startup files (a fish
/// function file counts as a whole: its first line). Unreadable files are
/// skipped: the shell could not read them either.
pub(super) fn find(home: &Path) -> Vec<Definition> {
    let mut out = Vec::new();
    for rel in STARTUP_FILES {
        let file = home.join(rel);
        let Ok(text) = crate::sys::files::read_text(&file) else {
            continue;
        };
        let mut found = definitions_in(&text);
        if rel.ends_with("functions/claude.fish") && found.is_empty() {
            found.push((1, text.lines().next().unwrap_or("").trim().to_string()));
        }
        out.extend(found.into_iter().map(|(line, text)| Definition {
            file: file.clone(),
            line,
            text,
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_and_functions_named_claude_are_found_and_nothing_else() {
        let rc = r#"# alias claude="~/.claude/local/claude"
export PATH="$HOME/bin:$PATH"
alias claude="~/.claude/local/claude"
  alias ll='ls -l' claude='/opt/other/claude'
alias -g claude=x
alias claude 'npx claude'
claude() { ~/.claude/local/claude "$@"; }
claude () {
function claude {
function claude() {
function claude
alias claudette=x
alias ll='claude'
claudex() { :; }
echo claude() {}
function claudette {
"#;
        let lines: Vec<usize> = definitions_in(rc).into_iter().map(|(n, _)| n).collect();
        assert_eq!(lines, [3, 4, 5, 6, 7, 8, 9, 10, 11]);
        assert_eq!(
            definitions_in(rc)[0].1,
            "alias claude=\"~/.claude/local/claude\""
        );
    }

    #[test]
    fn the_files_of_a_home_are_searched_with_their_line_numbers() {
        let home = std::env::temp_dir().join(format!("csb-alias-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(home.join(".config/fish/functions")).unwrap();
        std::fs::write(
            home.join(".bashrc"),
            "set -o vi\nalias claude=~/.claude/local/claude\n",
        )
        .unwrap();
        std::fs::write(home.join(".zshrc"), "alias gs='git status'\n").unwrap();
        std::fs::write(
            home.join(".config/fish/functions/claude.fish"),
            "function claude --wraps claude\n  ~/.claude/local/claude $argv\nend\n",
        )
        .unwrap();
        let found = find(&home);
        std::fs::remove_dir_all(&home).unwrap();
        let got: Vec<(String, usize)> = found
            .iter()
            .map(|d| {
                (
                    d.file.strip_prefix(&home).unwrap().display().to_string(),
                    d.line,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (".bashrc".to_string(), 2),
                (".config/fish/functions/claude.fish".to_string(), 1)
            ]
        );
    }
}
