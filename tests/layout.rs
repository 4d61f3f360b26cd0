//! The crate's shape stays what docs/architecture.md draws (issues #11, #21).
//!
//! `src/` is read as *units*: a top-level folder, a top-level file, or a
//! nested folder or file named in [`ROLES`] (egress's parts: the pure
//! policy and wire grammar, the jail, the proxy, the broker, the report, what
//! the holders share). Every module path a unit's non-test code names
//! (`use crate::…` groups, inline `crate::a::b` paths, `super::` and
//! `self::` resolved against the module they are written in, inline
//! modules included, and paths from a child module: `use child::x`,
//! `child::f()`) becomes an edge to the unit that path falls in, and one
//! from its file to the file the path falls in (a re-exported item's path
//! falls in the mod.rs that re-exports it). Then:
//!
//! - no circle between units;
//! - no circle between files, anywhere in `src/`: no two files import each
//!   other, and none through a third (inside a folder a file names the
//!   sibling an item is in, not its folder's mod.rs, which names the
//!   files it re-exports);
//! - a folder split into parts (egress) holds its mod.rs and its parts
//!   only;
//! - the launch path (everything `launch` reaches) never reaches `verify`,
//!   `install` or `cli`;
//! - a pure unit imports only pure and base units (never one that touches
//!   the kernel at run time);
//! - `sys` imports nothing of the crate;
//! - every unit has a role here, so a new folder is placed deliberately;
//! - `src/*.rs` holds only the files [`TOP_FILES`] names;
//! - no function outside test code is over 80 lines (signature to closing
//!   brace).
//!
//! The checks run on the real tree and, as controls, on small synthetic
//! trees that break each rule, so a reader that went blind fails too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    /// Imports nothing of the crate; anything may import it.
    Sys,
    /// Shared by every role (errors, test mutations): imports only `Sys`,
    /// `Base` and `Pure` units.
    Base,
    /// Plans and data: no kernel effects at run time; imports only `Sys`,
    /// `Base` and `Pure` units.
    Pure,
    /// Touches the kernel (spawns, mounts, sockets, seccomp, signals).
    Runtime,
    /// Off the launch path: the battery, the installer, the command line.
    Offline,
}
use Role::*;

/// Every unit of `src/` and its role. A unit missing here fails the test.
const ROLES: &[(&str, Role)] = &[
    ("sys", Sys),
    ("error", Base),
    ("testhooks", Base),
    ("config", Pure),
    ("sandbox", Pure),
    ("plan", Pure),
    ("seccomp", Pure),
    ("egress::policy", Pure),
    ("egress::wire", Pure),
    ("launch", Runtime),
    ("egress", Runtime),
    ("egress::holders", Runtime),
    ("egress::broker", Runtime),
    ("egress::proxy", Runtime),
    ("egress::jail", Runtime),
    ("egress::report", Runtime),
    ("creation_guard", Runtime),
    ("tripwire", Runtime),
    ("limits", Runtime),
    ("notices", Runtime),
    ("held", Runtime),
    ("verify", Offline),
    ("install", Offline),
    ("cli", Offline),
];

/// The only files allowed directly in `src/` (docs/architecture.md says why
/// `testhooks.rs` is one).
const TOP_FILES: &[&str] = &[
    "main.rs",
    "lib.rs",
    "cli.rs",
    "error.rs",
    "config.rs",
    "testhooks.rs",
];

/// The launch path may not reach these.
const OFF_LAUNCH_PATH: &[&str] = &["verify", "install", "cli"];

const MAX_FN_LINES: usize = 80;

/// One source file: its module path (`["egress", "policy", "rules"]`,
/// `[]` for lib.rs) and its text with test code and comments removed.
struct Source {
    file: PathBuf,
    /// As written in messages: `src/a/b.rs`.
    rel: PathBuf,
    module: Vec<String>,
    code: String,
}

fn read_tree(src: &Path) -> Vec<Source> {
    let mut out = Vec::new();
    walk(src, src, &mut out);
    // A file declared `#[cfg(test)] mod x;` is test code as a whole.
    let mut test_only: BTreeSet<Vec<String>> = BTreeSet::new();
    for s in &out {
        let raw = std::fs::read_to_string(&s.file).unwrap();
        let lines: Vec<&str> = raw.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim();
            if i > 0 && lines[i - 1].trim() == "#[cfg(test)]" && t.ends_with(';') {
                if let Some(name) = t
                    .trim_start_matches("pub(crate) ")
                    .trim_start_matches("pub(super) ")
                    .strip_prefix("mod ")
                {
                    // `mod x;` in a/mod.rs and in a/b.rs both name a child of
                    // the file's own module.
                    let mut m = s.module.clone();
                    m.push(name.trim_end_matches(';').to_string());
                    test_only.insert(m);
                }
            }
        }
    }
    out.retain(|s| !test_only.iter().any(|t| s.module.starts_with(t)));
    out
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<Source>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(root, &p, out);
            continue;
        }
        if p.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let rel = p.strip_prefix(root).unwrap();
        let mut module: Vec<String> = rel
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let stem = module.last().unwrap().clone();
        // a/mod.rs is module a (its `super` the crate), a/b.rs is a::b.
        if matches!(stem.as_str(), "mod" | "lib" | "main") {
            module.pop();
        }
        let text = std::fs::read_to_string(&p).unwrap();
        out.push(Source {
            file: p.clone(),
            rel: Path::new("src").join(rel),
            module,
            code: strip_tests_and_comments(&text),
        });
    }
}

/// The code's skeleton: comments and the contents of string and character
/// literals blanked (newlines kept), then the items behind `#[cfg(test)]`
/// (a test module, a test-only helper) removed: they may use anything.
fn strip_tests_and_comments(text: &str) -> String {
    let mut lines: Vec<String> = skeleton(text).lines().map(str::to_string).collect();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "#[cfg(test)]" {
            let end = item_end(&lines, i + 1);
            for l in &mut lines[i..=end] {
                l.clear();
            }
            i = end + 1;
        } else {
            i += 1;
        }
    }
    lines.join("\n")
}

/// Comments and literal contents replaced by spaces, so braces and paths
/// inside them count for nothing.
fn skeleton(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < c.len() {
        let ident_before = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
        } else if c[i] == 'r' && !ident_before && matches!(c.get(i + 1), Some('#' | '"')) {
            // r"…", r#"…"#: no escapes, closed by a quote and as many #.
            let mut j = i + 1;
            while c.get(j) == Some(&'#') {
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            out.push('"');
            i = j + 1;
            while i < c.len() {
                if c[i] == '"' && (0..hashes).all(|k| c.get(i + 1 + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                out.push(blank(c[i]));
                i += 1;
            }
            out.push('"');
        } else if c[i] == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < c.len() {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if let Some(len) = char_literal(&c[i..]) {
            // '{', '\n', '\u{7b}' — not a lifetime.
            out.push('\'');
            out.push_str(&" ".repeat(len - 2));
            out.push('\'');
            i += len;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The length of the character literal at the start of `c`, quotes included.
fn char_literal(c: &[char]) -> Option<usize> {
    if c.first() != Some(&'\'') {
        return None;
    }
    if c.get(1) == Some(&'\\') {
        (3..c.len().min(12)).find(|&k| c[k] == '\'').map(|k| k + 1)
    } else if c.get(2) == Some(&'\'') {
        Some(3)
    } else {
        None
    }
}

/// The last line of the item starting at `start`: where its braces close,
/// or its line ending in `;` when it has none.
fn item_end(lines: &[String], start: usize) -> usize {
    let mut depth = 0i32;
    let mut opened = false;
    for (j, l) in lines.iter().enumerate().skip(start) {
        for c in l.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        if (opened && depth <= 0) || (!opened && l.trim_end().ends_with(';')) {
            return j;
        }
    }
    lines.len() - 1
}

/// Every module path the code names, absolute from the crate root:
/// `crate::`, `super::` and `self::` paths (resolved against the inline
/// module they are written in, if any) and paths that start at a child
/// module (`use child::x`, `child::f()`). A visibility (`pub(in crate::a)`)
/// names nothing. `modules` are the crate's module paths.
fn named_paths(s: &Source, modules: &BTreeSet<Vec<String>>) -> Vec<Vec<String>> {
    let inline = inline_modules(&s.code);
    let at = |pos: usize| -> Vec<String> {
        let mut m = s.module.clone();
        m.extend(
            inline
                .iter()
                .filter(|(a, b, _)| *a <= pos && pos <= *b)
                .map(|x| x.2.clone()),
        );
        m
    };
    let mut out: Vec<(usize, Vec<String>)> = use_paths(&s.code);
    for head in ["crate", "super", "self"] {
        out.extend(inline_paths(&s.code, head));
    }
    let children = modules
        .iter()
        .filter(|m| m.len() == s.module.len() + 1 && m.starts_with(&s.module))
        .map(|m| m[s.module.len()].clone());
    for child in children {
        out.extend(
            inline_paths(&s.code, &child)
                .into_iter()
                .filter(|(pos, _)| at(*pos) == s.module),
        );
    }
    out.into_iter()
        .filter_map(|(pos, p)| resolve(&at(pos), &p, modules))
        .collect()
}

/// The paths of `use` statements (at the start of a line, braces
/// expanded), each with the statement's position.
fn use_paths(code: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let lines: Vec<&str> = code.lines().collect();
    let mut offset = 0;
    for (i, l) in lines.iter().enumerate() {
        let pos = offset;
        offset += l.len() + 1;
        let t = l.trim_start();
        let t = match t.strip_prefix("pub(in ") {
            // `pub(in crate::a) use …`: the visibility names nothing.
            Some(rest) => rest.split_once(") ").map_or(t, |(_, u)| u),
            None => t
                .strip_prefix("pub(crate) ")
                .or_else(|| t.strip_prefix("pub(super) "))
                .or_else(|| t.strip_prefix("pub "))
                .unwrap_or(t),
        };
        let Some(head) = t.strip_prefix("use ") else {
            continue;
        };
        let mut stmt = head.to_string();
        let mut j = i + 1;
        while !stmt.contains(';') && j < lines.len() {
            stmt.push_str(lines[j]);
            j += 1;
        }
        let stmt: String = stmt[..stmt.find(';').unwrap_or(stmt.len())]
            .split_whitespace()
            .collect();
        out.extend(expand(&stmt).into_iter().map(|p| (pos, p)));
    }
    out
}

/// Inline paths that start with `head::` (not part of a longer path, not a
/// `pub(in …)` visibility), each with its position.
fn inline_paths(code: &str, head: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices(&format!("{head}::")) {
        let prev = code[..i].chars().next_back();
        if prev.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let before = code[..i].trim_end();
        if before
            .strip_suffix("in")
            .is_some_and(|b| b.trim_end().ends_with('('))
        {
            continue;
        }
        let path: String = code[i..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        out.push((i, path.split("::").map(str::to_string).collect()));
    }
    out
}

/// The inline modules of `code` (`mod name { … }`): where each opens and
/// closes, and its name.
fn inline_modules(code: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("mod") {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[i + 3..];
        if !rest.starts_with(char::is_whitespace) {
            continue;
        }
        let rest = rest.trim_start();
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = rest[name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = code.len() - after.len();
        let mut depth = 0;
        for (j, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                out.push((open, open + j, name));
                break;
            }
        }
    }
    out
}

fn find_word(text: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(word) {
        let at = from + i;
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && after.is_some_and(char::is_whitespace)
        {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e` (white space removed).
fn expand(stmt: &str) -> Vec<Vec<String>> {
    let Some(open) = stmt.find('{') else {
        // White space is gone: `x as y` reads `xasy`, harmless for the unit.
        return vec![stmt.split("::").map(str::to_string).collect()];
    };
    let prefix = stmt[..open].trim_end_matches("::");
    let close = stmt.rfind('}').filter(|c| *c > open).unwrap_or(stmt.len());
    let inner = &stmt[open + 1..close];
    let mut parts = Vec::new();
    let (mut depth, mut last) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[last..i]);
                last = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[last..]);
    let mut out = Vec::new();
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        for mut tail in expand(part) {
            let mut p: Vec<String> = prefix.split("::").map(str::to_string).collect();
            if tail.first().is_some_and(|t| t == "self") {
                tail.remove(0);
            }
            p.append(&mut tail);
            out.push(p);
        }
    }
    out
}

/// The path from the crate root of `p`, written in `module`, or None for
/// one outside the crate.
fn resolve(
    module: &[String],
    p: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Option<Vec<String>> {
    let mut base: Vec<String>;
    let mut rest = p;
    match p.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            rest = &p[1..];
        }
        Some("self") => {
            base = module.to_vec();
            rest = &p[1..];
        }
        Some("super") => {
            base = module.to_vec();
            while rest.first().is_some_and(|x| x == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        // A path from a child module (2018 paths: the child shadows any
        // crate of that name).
        Some(first) if modules.contains(&[module, &[first.to_string()]].concat()) => {
            base = module.to_vec();
        }
        _ => return None,
    }
    base.extend(rest.iter().filter(|x| !x.is_empty()).cloned());
    Some(base)
}

/// The unit a module path falls in: a nested unit of [`ROLES`] when the path
/// is inside it, else its first component.
fn unit_of(roles: Roles, path: &[String]) -> Option<String> {
    let first = path.first()?;
    for (name, _) in roles {
        let parts: Vec<&str> = name.split("::").collect();
        if parts.len() > 1
            && path.len() >= parts.len()
            && parts.iter().zip(path).all(|(a, b)| a == b)
        {
            return Some(name.to_string());
        }
    }
    Some(first.clone())
}

type Graph = BTreeMap<String, BTreeSet<String>>;
type Roles<'a> = &'a [(&'a str, Role)];

/// Every module that is a file of `sources`.
fn module_set(sources: &[Source]) -> BTreeSet<Vec<String>> {
    sources.iter().map(|s| s.module.clone()).collect()
}

/// Unit → the other units its non-test code names, over the units present.
fn graph(roles: Roles, sources: &[Source]) -> Graph {
    let modules = module_set(sources);
    let units: BTreeSet<String> = sources
        .iter()
        .filter_map(|s| unit_of(roles, &s.module))
        .collect();
    let mut g: Graph = units.iter().map(|u| (u.clone(), BTreeSet::new())).collect();
    for s in sources {
        let Some(from) = unit_of(roles, &s.module) else {
            continue;
        };
        for p in named_paths(s, &modules) {
            if let Some(to) = unit_of(roles, &p) {
                if to != from && units.contains(&to) {
                    g.get_mut(&from).unwrap().insert(to);
                }
            }
        }
    }
    g
}

/// File → the other files its non-test code names: for each path, the
/// file whose module is the longest prefix of it (a path to an item a
/// mod.rs re-exports falls in that mod.rs, which names the file the item
/// is in). The crate roots (lib.rs, main.rs) are left out: they declare
/// and re-export, and main.rs is a crate of its own.
fn file_graph(sources: &[Source]) -> Graph {
    let modules = module_set(sources);
    let files: Vec<&Source> = sources.iter().filter(|s| !s.module.is_empty()).collect();
    let file_of: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|s| (s.module.clone(), s.rel.display().to_string()))
        .collect();
    let mut g: Graph = file_of
        .values()
        .map(|f| (f.clone(), BTreeSet::new()))
        .collect();
    for s in files {
        let from = &file_of[&s.module];
        for p in named_paths(s, &modules) {
            let to = (1..=p.len()).rev().find_map(|k| file_of.get(&p[..k]));
            if let Some(to) = to.filter(|to| *to != from) {
                g.get_mut(from).unwrap().insert(to.clone());
            }
        }
    }
    g
}

/// A folder split into parts (a nested unit of `roles` is in it) holds its
/// mod.rs and its parts only: each other file or folder in it is named.
fn unplaced(roles: Roles, sources: &[Source]) -> Vec<String> {
    let parted: BTreeSet<&str> = roles
        .iter()
        .filter_map(|(n, _)| n.split_once("::").map(|(top, _)| top))
        .collect();
    let mut out = BTreeSet::new();
    for s in sources {
        let [top, part, ..] = s.module.as_slice() else {
            continue;
        };
        if parted.contains(top.as_str()) && role(roles, &format!("{top}::{part}")).is_none() {
            out.insert(format!(
                "src/{top}/{part} is none of {top}'s parts (tests/layout.rs ROLES)"
            ));
        }
    }
    out.into_iter().collect()
}

fn role(roles: Roles, unit: &str) -> Option<Role> {
    roles.iter().find(|(n, _)| *n == unit).map(|(_, r)| *r)
}

/// Every rule broken, one line each.
fn violations(roles: Roles, sources: &[Source]) -> Vec<String> {
    let g = graph(roles, sources);
    let mut v = Vec::new();
    for u in g.keys() {
        if role(roles, u).is_none() {
            v.push(format!("unit {u} has no role in tests/layout.rs ROLES"));
        }
    }
    if let Some(c) = find_cycle(&g) {
        v.push(format!("import circle: {}", c.join(" -> ")));
    }
    if let Some(c) = find_cycle(&file_graph(sources)) {
        v.push(format!("file circle: {}", c.join(" -> ")));
    }
    v.extend(unplaced(roles, sources));
    if g.contains_key("launch") {
        let reach = reachable(&g, "launch");
        for off in OFF_LAUNCH_PATH {
            if reach.contains(*off) {
                v.push(format!("the launch path reaches {off}: {reach:?}"));
            }
        }
    }
    for (u, deps) in &g {
        for d in deps {
            match (role(roles, u), role(roles, d)) {
                (Some(Sys), _) => v.push(format!("sys unit {u} imports {d}")),
                (Some(Pure | Base), Some(Runtime | Offline)) => {
                    v.push(format!("pure unit {u} imports {d}, which is not pure"))
                }
                _ => {}
            }
        }
    }
    for s in sources {
        for (name, line, n) in long_functions(&s.code) {
            v.push(format!(
                "{}:{line} fn {name} is {n} lines (at most {MAX_FN_LINES})",
                s.rel.display()
            ));
        }
    }
    v
}

fn reachable(g: &Graph, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_string()];
    while let Some(m) = todo.pop() {
        if seen.insert(m.clone()) {
            todo.extend(g.get(&m).into_iter().flatten().cloned());
        }
    }
    seen
}

fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    let mut done = BTreeSet::new();
    for m in g.keys() {
        if let Some(c) = cycle_from(g, &mut vec![m.clone()], &mut done) {
            return Some(c);
        }
    }
    None
}

fn cycle_from(
    g: &Graph,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    let here = path.last().unwrap().clone();
    for next in &g[&here] {
        if let Some(i) = path.iter().position(|p| p == next) {
            let mut c = path[i..].to_vec();
            c.push(next.clone());
            return Some(c);
        }
        if done.contains(next) {
            continue;
        }
        path.push(next.clone());
        if let Some(c) = cycle_from(g, path, done) {
            return Some(c);
        }
        path.pop();
    }
    done.insert(here);
    None
}

/// (name, first line, length) of every function longer than the limit.
fn long_functions(code: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<String> = code.lines().map(str::to_string).collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(at) = find_word(l, "fn") else {
            continue;
        };
        let name: String = l[at + 2..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // A declaration without a body (a trait method, a type `fn(..)`) has
        // `;` before any `{`.
        if name.is_empty() || !has_body(&lines[i..].join("\n")) {
            continue;
        }
        let end = item_end(&lines, i);
        let n = end - i + 1;
        if n > MAX_FN_LINES {
            out.push((name, i + 1, n));
        }
    }
    out
}

/// Whether the signature at the start of `tail` is followed by a body: a
/// `{` comes before a `;` outside parentheses and brackets (`[u8; 6]`).
fn has_body(tail: &str) -> bool {
    let mut depth = 0;
    for c in tail.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '{' if depth == 0 => return true,
            ';' if depth == 0 => return false,
            _ => {}
        }
    }
    false
}

fn real_tree() -> Vec<Source> {
    read_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

#[test]
fn the_tree_keeps_its_shape() {
    let v = violations(ROLES, &real_tree());
    assert!(
        v.is_empty(),
        "the layout's rules are broken:\n{}",
        v.join("\n")
    );
}

#[test]
fn the_reader_sees_the_edges_that_exist() {
    // Controls: were the reader blind, every rule above would pass.
    let t = real_tree();
    let g = graph(ROLES, &t);
    for (from, to) in [
        ("launch", "plan"),
        ("plan", "sandbox"),
        ("launch", "creation_guard"),
        ("creation_guard", "seccomp"),
        ("egress", "egress::jail"),
        ("egress::jail", "egress::proxy"),
        ("egress::jail", "egress::policy"),
        ("egress::proxy", "egress::broker"),
        ("egress::broker", "egress::wire"),
        ("plan", "egress::policy"),
        ("verify", "launch"),
        ("cli", "install"),
        ("tripwire", "plan"),
    ] {
        assert!(g[from].contains(to), "{from} -> {to} not seen: {g:?}");
    }
    // Files: a `use super::` line, a mod.rs naming a child inline
    // (`oauth::Oauth`), a mod.rs's re-export (`use shadow::…`).
    let f = file_graph(&t);
    for (from, to) in [
        (
            "src/egress/proxy/connection.rs",
            "src/egress/proxy/shared.rs",
        ),
        ("src/egress/broker/mod.rs", "src/egress/broker/oauth.rs"),
        ("src/egress/jail/mod.rs", "src/egress/jail/shadow.rs"),
        ("src/tripwire/compare.rs", "src/tripwire/settings.rs"),
    ] {
        assert!(f[from].contains(to), "{from} -> {to} not seen: {f:?}");
    }
    // `super::` in an inline module, and a `pub(in crate::tripwire)`
    // visibility, name nothing outside change.rs.
    let change = &f["src/tripwire/change.rs"];
    assert!(!change.contains("src/tripwire/mod.rs"), "{change:?}");
}

#[test]
fn only_the_named_files_lie_directly_in_src() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut extra = Vec::new();
    for e in std::fs::read_dir(src).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_file() && !TOP_FILES.contains(&name.as_str()) {
            extra.push(name);
        }
    }
    assert!(
        extra.is_empty(),
        "files in src/ outside a folder: {extra:?}"
    );
}

// ---- controls on synthetic trees: each rule, broken once ----

fn synthetic(files: &[(&str, &str)]) -> Vec<Source> {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "csb-layout-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let t = read_tree(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    t
}

const TINY_ROLES: Roles = &[
    ("sys", Sys),
    ("plan", Pure),
    ("launch", Runtime),
    ("verify", Offline),
];

/// A tiny crate that keeps every rule, plus `extra` files (one of the same
/// path replaces the tiny crate's).
fn tiny(extra: &[(&str, &str)]) -> Vec<String> {
    tiny_with(TINY_ROLES, extra)
}

fn tiny_with(roles: Roles, extra: &[(&str, &str)]) -> Vec<String> {
    let mut files = vec![
        ("lib.rs", "mod sys; mod plan; mod launch; mod verify;"),
        ("sys/mod.rs", "pub(crate) fn now() {}"),
        ("plan/mod.rs", "use crate::sys;\nmod build;"),
        ("plan/build.rs", "use super::super::sys::now;"),
        (
            "launch/mod.rs",
            "use crate::{plan, sys::now};\n#[cfg(test)]\nmod tests {\n    use crate::verify;\n}",
        ),
        ("verify/mod.rs", "use crate::launch;"),
    ];
    files.retain(|(p, _)| !extra.iter().any(|(q, _)| q == p));
    files.extend_from_slice(extra);
    violations(roles, &synthetic(&files))
}

#[test]
fn control_a_tree_that_keeps_the_rules_passes() {
    assert_eq!(tiny(&[]), Vec::<String>::new());
}

#[test]
fn control_a_circle_fails() {
    let v = tiny(&[("plan/more.rs", "fn f() { crate::launch::go() }")]);
    assert!(v.iter().any(|l| l.starts_with("import circle")), "{v:?}");
}

#[test]
fn control_a_file_circle_inside_a_folder_fails() {
    // Two files of one unit naming each other: a `use` line, an inline path.
    let v = tiny(&[
        ("plan/a.rs", "use super::b::X;"),
        ("plan/b.rs", "fn f() { super::a::g() }"),
    ]);
    assert!(
        v.iter().any(|l| l.starts_with("file circle")
            && l.contains("src/plan/a.rs")
            && l.contains("src/plan/b.rs")),
        "{v:?}"
    );
    assert!(!v.iter().any(|l| l.starts_with("import circle")), "{v:?}");
}

#[test]
fn control_a_file_circle_through_a_mod_rs_fails() {
    // b takes a's item through the mod.rs that re-exports it, a names b.
    let v = tiny(&[
        ("plan/deep/mod.rs", "mod a;\nmod b;\npub(crate) use a::f;"),
        ("plan/deep/a.rs", "use super::b::g;\npub(crate) fn f() {}"),
        ("plan/deep/b.rs", "use super::f;\npub(crate) fn g() {}"),
    ]);
    assert!(v.iter().any(|l| l.starts_with("file circle")), "{v:?}");
    // A mod.rs naming its child inline while the child names the mod.rs.
    let v = tiny(&[
        ("plan/deep/mod.rs", "mod a;\nfn h() { a::f() }\nfn k() {}"),
        ("plan/deep/a.rs", "pub(super) fn f() { super::k() }"),
    ]);
    assert!(v.iter().any(|l| l.starts_with("file circle")), "{v:?}");
}

#[test]
fn control_inline_modules_and_visibilities_name_no_file() {
    // `super::g` inside `mod inner` is text.rs's own g, and `pub(in
    // crate::plan)` names nothing: plan/mod.rs -> text.rs, and no circle.
    let v = tiny(&[
        (
            "plan/mod.rs",
            "use crate::sys;\nmod build;\nmod text;\npub(crate) use text::shown;",
        ),
        (
            "plan/text.rs",
            "pub(in crate::plan) mod inner {\n    pub(in crate::plan) fn f() { super::g() }\n}\n\
             fn g() {}\npub(crate) fn shown() {}",
        ),
    ]);
    assert_eq!(v, Vec::<String>::new());
}

#[test]
fn control_a_file_beside_the_parts_of_a_parted_folder_fails() {
    let roles: Roles = &[
        ("sys", Sys),
        ("plan", Pure),
        ("launch", Runtime),
        ("verify", Offline),
        ("verify::part", Offline),
    ];
    let ok = tiny_with(roles, &[("verify/part/mod.rs", "use crate::plan;")]);
    assert_eq!(ok, Vec::<String>::new());
    let v = tiny_with(
        roles,
        &[
            ("verify/part/mod.rs", "use crate::plan;"),
            ("verify/stray.rs", "use crate::plan;"),
        ],
    );
    assert_eq!(
        v,
        ["src/verify/stray is none of verify's parts (tests/layout.rs ROLES)"]
    );
}

#[test]
fn control_code_after_a_test_module_with_braces_in_strings_is_read() {
    let v = tiny(&[(
        "plan/more.rs",
        "#[cfg(test)]\nmod tests {\n    const S: &str = \"{ x\";\n    const C: char = '{';\n}\n\
         // crate::verify::x in a comment is not an edge\n\
         fn f() { crate::launch::go() }",
    )]);
    assert!(v.iter().any(|l| l.starts_with("import circle")), "{v:?}");
    assert!(!v.iter().any(|l| l.contains("reaches verify")), "{v:?}");
}

#[test]
fn control_the_launch_path_reaching_verify_fails() {
    let v = tiny(&[(
        "launch/more.rs",
        "use crate::{\n    sys,\n    verify::check,\n};",
    )]);
    assert!(
        v.iter().any(|l| l.contains("launch path reaches verify")),
        "{v:?}"
    );
}

#[test]
fn control_a_pure_unit_importing_a_runtime_one_fails() {
    // Through super::super from a nested file, as a move can leave it.
    let v = tiny(&[
        ("plan/deep/mod.rs", "mod x;"),
        ("plan/deep/x.rs", "use super::super::super::launch;"),
    ]);
    assert!(
        v.iter()
            .any(|l| l.contains("pure unit plan imports launch")),
        "{v:?}"
    );
}

#[test]
fn control_sys_importing_the_crate_fails() {
    let v = tiny(&[(
        "sys/clock.rs",
        "pub(crate) fn t() -> crate::plan::X { todo!() }",
    )]);
    assert!(v.iter().any(|l| l == "sys unit sys imports plan"), "{v:?}");
}

#[test]
fn control_a_unit_without_a_role_fails() {
    let v = tiny(&[("newthing/mod.rs", "")]);
    assert!(
        v.iter().any(|l| l.contains("unit newthing has no role")),
        "{v:?}"
    );
}

#[test]
fn control_a_long_function_fails_and_test_code_is_exempt() {
    let body = "    let x = 1;\n".repeat(MAX_FN_LINES);
    let long = format!("pub(crate) fn big() {{\n{body}}}\n");
    let v = tiny(&[("plan/big.rs", &long)]);
    assert!(v.iter().any(|l| l.contains("fn big is 82 lines")), "{v:?}");
    let in_test = format!("#[cfg(test)]\nmod tests {{\n{long}}}\n");
    assert_eq!(tiny(&[("plan/big.rs", &in_test)]), Vec::<String>::new());
}

#[test]
fn control_the_real_roles_fire_on_a_deliberate_break() {
    // The real tree plus files a careless move could leave: the launch
    // naming the battery, plan naming the launch, sys naming plan, two
    // files of the proxy naming each other, a file beside egress's parts.
    let mut t = real_tree();
    for (file, code) in [
        ("launch/deliberate.rs", "use crate::verify::main;"),
        (
            "plan/deliberate.rs",
            "fn f() { crate::launch::shim_main(&[]); }",
        ),
        ("sys/deliberate.rs", "use super::super::plan::build;"),
        (
            "egress/proxy/deliberate_a.rs",
            "use super::deliberate_b::X;",
        ),
        (
            "egress/proxy/deliberate_b.rs",
            "fn f() { super::deliberate_a::y() }",
        ),
        ("egress/deliberate.rs", ""),
    ] {
        let module: Vec<String> = file
            .trim_end_matches(".rs")
            .split('/')
            .map(String::from)
            .collect();
        t.push(Source {
            file: PathBuf::from(file),
            rel: Path::new("src").join(file),
            module,
            code: strip_tests_and_comments(code),
        });
    }
    let v = violations(ROLES, &t);
    for want in [
        "import circle",
        "the launch path reaches verify",
        "pure unit plan imports launch, which is not pure",
        "sys unit sys imports plan",
        "file circle: src/egress/proxy/deliberate_a.rs -> src/egress/proxy/deliberate_b.rs",
        "src/egress/deliberate is none of egress's parts",
    ] {
        assert!(v.iter().any(|l| l.starts_with(want)), "{want}: {v:#?}");
    }
}
