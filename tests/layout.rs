//! The crate's module graph stays acyclic (issue #11): read off the `use
//! crate::…` lines and `crate::module::` paths of every file in src/ (test
//! modules and comments left out), so the launch path never depends on
//! the battery or the installer through a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module name → the crate modules its non-test code names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules = BTreeSet::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "rs") {
            modules.insert(p.file_stem().unwrap().to_string_lossy().into_owned());
        }
    }
    let mut g = BTreeMap::new();
    for m in &modules {
        let text = std::fs::read_to_string(src.join(format!("{m}.rs"))).unwrap();
        // Unit tests sit in a trailing `#[cfg(test)] mod …`; they may use anything.
        let code = text
            .find("#[cfg(test)]\nmod ")
            .or_else(|| text.find("#[cfg(test)]\npub(crate) mod "))
            .map_or(text.as_str(), |i| &text[..i]);
        let mut deps = BTreeSet::new();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                let rest = &line[i + "crate::".len()..];
                if let Some(group) = rest.strip_prefix('{') {
                    // `use crate::{a, b::C, …}` (one line: rustfmt keeps short groups so;
                    // longer ones continue below and are caught by the next branch).
                    for part in group.split([',', '}']) {
                        deps.insert(ident(part.trim()));
                    }
                } else {
                    deps.insert(ident(rest));
                }
            }
            // Continuation lines of a multi-line `use crate::{` group.
            let t = line.trim();
            if !t.contains("crate::") && t.ends_with(',') && !t.contains(' ') {
                deps.insert(ident(t));
            }
        }
        deps.retain(|d| d != m && modules.contains(d));
        g.insert(m.clone(), deps);
    }
    g
}

fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// A cycle through `start`, if any (depth-first search).
fn cycle(
    g: &BTreeMap<String, BTreeSet<String>>,
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
        if let Some(c) = cycle(g, path, done) {
            return Some(c);
        }
        path.pop();
    }
    done.insert(here);
    None
}

#[test]
fn no_module_import_circle() {
    let g = graph();
    // Control: the reader sees the edges that exist.
    assert!(g["launch"].contains("plan") && g["plan"].contains("sandbox"));
    assert!(g["verify"].contains("record") && g["jail"].contains("sandbox"));
    let mut done = BTreeSet::new();
    for m in g.keys() {
        if let Some(c) = cycle(&g, &mut vec![m.clone()], &mut done) {
            panic!("module import circle: {}", c.join(" -> "));
        }
    }
}

#[test]
fn the_launch_path_does_not_depend_on_verify_install_or_promote() {
    let g = graph();
    let launch_path = [
        "launch", "plan", "sandbox", "host", "jail", "record", "kernel",
    ];
    let mut seen = BTreeSet::new();
    let mut todo: Vec<String> = launch_path.iter().map(|s| s.to_string()).collect();
    while let Some(m) = todo.pop() {
        if seen.insert(m.clone()) {
            todo.extend(g[&m].iter().cloned());
        }
    }
    for off in ["verify", "install", "promote", "doctor", "cli"] {
        assert!(
            !seen.contains(off),
            "the launch path reaches {off}: {seen:?}"
        );
    }
}
