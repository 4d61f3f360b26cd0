//! Test fixtures shared by the tripwire's unit tests: entries and trees
//! built by hand, and a small world on disk (a workspace with a repository,
//! a home with settings).

use std::path::{Path, PathBuf};

use super::scan::{Entry, Meta, Tree};

pub(super) fn meta(mode: u32, ctime: i64) -> Meta {
    Meta {
        dev: 1,
        ino: 1,
        size: 0,
        mode,
        mtime: (ctime, 0),
        ctime: (ctime, 0),
        btime: None,
    }
}

pub(super) fn file(text: &str) -> Entry {
    Entry::File {
        meta: meta(0o100644, 0),
        content: Some(text.as_bytes().to_vec()),
    }
}

pub(super) fn root(e: Entry) -> Tree {
    [(PathBuf::new(), e)].into()
}

pub(super) fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("csb-trip-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d.canonicalize().unwrap()
}

pub(super) fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

pub(super) const CFG: &str = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n";

/// A workspace with a repository, a home with settings: what the e2e
/// worlds have, without namespaces.
pub(super) fn world(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let base = tmp(name);
    let (home, ws) = (base.join("home"), base.join("ws"));
    write(&ws.join(".git/HEAD"), "ref: refs/heads/main\n");
    write(&ws.join(".git/config"), CFG);
    write(&ws.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n");
    write(&ws.join(".envrc"), "export A=1\n");
    write(&ws.join(".mcp.json"), "{}\n");
    write(&home.join(".claude.json"), r#"{"projects":{}}"#);
    write(&home.join(".claude/settings.json"), r#"{"model":"x"}"#);
    (base, home, ws)
}
