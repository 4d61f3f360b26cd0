//! `claude-sandbox egress report` as a user runs it: the built binary with
//! a temporary HOME holding connection logs (no root, no namespaces).

use std::path::PathBuf;
use std::process::{Command, Output};

const OLD: &str = "20261120T090000Z-1";
const NEW: &str = "20261123T184501Z-4242";

/// A temporary HOME, removed at the end.
struct Home(PathBuf);

impl Home {
    fn new(name: &str) -> Home {
        let dir = std::env::temp_dir().join(format!("csb-report-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Home(dir.canonicalize().unwrap())
    }

    fn logs(&self) -> PathBuf {
        self.0.join(".local/state/claude-sandbox/egress")
    }

    fn write_log(&self, id: &str, lines: &[String]) -> PathBuf {
        std::fs::create_dir_all(self.logs()).unwrap();
        let path = self.logs().join(format!("{id}.jsonl"));
        let mut text = lines.join("\n");
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        path
    }

    fn report(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_claude-sandbox"))
            .args(["egress", "report"])
            .args(args)
            .env_clear()
            .env("HOME", &self.0)
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A line as the proxy writes it.
fn line(session: &str, time: &str, host: &str, port: u16, allowed: bool, up: u64) -> String {
    format!(
        r#"{{"time":"{time}","session":"{session}","method":"CONNECT","host":"{host}","port":{port},"address":{addr},"decision":"{decision}","reason":"{reason}","bytes_up":{up},"bytes_down":{down},"duration_ms":7}}"#,
        addr = if allowed { r#""203.0.113.10""# } else { "null" },
        decision = if allowed { "allowed" } else { "refused" },
        reason = if allowed {
            format!("allow-domain = {host}")
        } else {
            format!("{host} is not on the allowlist")
        },
        down = up * 10,
    )
}

/// Two sessions: an older clean one and a newer one with refusals.
fn two_sessions(name: &str) -> (Home, PathBuf, Vec<String>) {
    let home = Home::new(name);
    home.write_log(
        OLD,
        &[line(
            OLD,
            "2026-11-20T09:00:01.000Z",
            "allowed.test",
            443,
            true,
            10,
        )],
    );
    let new = vec![
        line(
            NEW,
            "2026-11-23T18:45:02.120Z",
            "allowed.test",
            443,
            true,
            100,
        ),
        line(
            NEW,
            "2026-11-23T18:45:03.000Z",
            "denied.test",
            443,
            false,
            0,
        ),
        line(
            NEW,
            "2026-11-23T18:45:04.000Z",
            "allowed.test",
            80,
            true,
            50,
        ),
        "not a log line".to_string(),
        line(
            NEW,
            "2026-11-23T18:45:05.000Z",
            "denied.test",
            443,
            false,
            0,
        ),
        line(
            NEW,
            "2026-11-23T18:45:06.000Z",
            "denied.test",
            8443,
            false,
            0,
        ),
    ];
    let path = home.write_log(NEW, &new);
    (home, path, new)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(o));
    assert_eq!(stderr(o), "");
    stdout(o)
}

fn refused(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(2), "stdout: {}", stdout(o));
    assert_eq!(stdout(o), "");
    let e = stderr(o);
    assert_eq!(e.lines().count(), 1, "one line: {e}");
    e
}

#[test]
fn the_newest_session_by_default_and_with_last() {
    let (home, _, _) = two_sessions("last");
    let plain = ok(&home.report(&[]));
    assert_eq!(plain, ok(&home.report(&["--last"])));
    let header = plain.lines().next().unwrap();
    assert_eq!(
        header,
        format!(
            "{NEW}: 5 requests, 2 allowed, 3 refused; 150 B up, 1.5 KiB down; 18:45:02→18:45:06"
        )
    );
    assert!(plain.contains("\n1 line of "), "{plain}");
    assert!(
        plain.contains(
            "  18:45:05.000  CONNECT denied.test:443  denied.test is not on the allowlist\n"
        ),
        "{plain}"
    );
    assert!(
        plain.contains("\nrisk: 15/100\n  denied.test refused 3 times\n"),
        "{plain}"
    );
}

#[test]
fn an_explicit_session() {
    let (home, _, _) = two_sessions("explicit");
    let out = ok(&home.report(&[OLD]));
    assert!(
        out.starts_with(&format!("{OLD}: 1 request, 1 allowed, 0 refused;")),
        "{out}"
    );
    assert!(out.contains("\nno refusals\n"), "{out}");
    assert!(out.ends_with("\nrisk: 0/100\n"), "{out}");
}

#[test]
fn json_for_machines() {
    let (home, path, lines) = two_sessions("json");
    let out = ok(&home.report(&["--json", NEW]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["session"], NEW);
    assert_eq!(v["log"], path.to_str().unwrap());
    assert_eq!(v["requests"], 5);
    assert_eq!(v["allowed"], 2);
    assert_eq!(v["refused"], 3);
    assert_eq!(v["unreadable_lines"], 1);
    assert_eq!(v["bytes_up"], 150);
    assert_eq!(v["bytes_down"], 1500);
    assert_eq!(
        v["domains"],
        serde_json::json!([
            {"host": "denied.test", "ports": [443, 8443], "allowed": 0, "failed": 0,
             "refused": 3, "bytes_up": 0, "bytes_down": 0},
            {"host": "allowed.test", "ports": [80, 443], "allowed": 2, "failed": 0,
             "refused": 0, "bytes_up": 150, "bytes_down": 1500},
        ])
    );
    let refusals: Vec<serde_json::Value> = [&lines[1], &lines[4], &lines[5]]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v["refusals"], serde_json::Value::Array(refusals));
    assert_eq!(
        v["risk"],
        serde_json::json!({"score": 15, "reasons": ["denied.test refused 3 times"]})
    );
}

#[test]
fn a_failed_upstream_and_an_open_request_are_read_as_such() {
    let home = Home::new("failed");
    let reached = line(
        NEW,
        "2026-11-23T18:45:01.000Z",
        "allowed.test",
        443,
        true,
        10,
    );
    let failed = line(NEW, "2026-11-23T18:45:02.000Z", "allowed.test", 8081, true, 0).replace(
        r#""bytes_up""#,
        r#""error":"cannot connect to 203.0.113.10:8081: Connection refused (os error 111)","bytes_up""#,
    );
    // As a shadow killed with kill -9 leaves it: open, padded for its rewrite.
    let open = format!(
        "{}{}",
        line(
            NEW,
            "2026-11-23T18:45:03.000Z",
            "allowed.test",
            443,
            true,
            0
        )
        .replace(r#""duration_ms":7}"#, r#""duration_ms":0,"open":true}"#),
        " ".repeat(200)
    );
    home.write_log(NEW, &[reached, failed.clone(), open]);
    let v: serde_json::Value = serde_json::from_str(&ok(&home.report(&["--json"]))).unwrap();
    assert_eq!(
        (
            &v["requests"],
            &v["allowed"],
            &v["failed"],
            &v["refused"],
            &v["open"]
        ),
        (&3.into(), &2.into(), &1.into(), &0.into(), &1.into()),
        "{v:#}"
    );
    assert_eq!(v["unreadable_lines"], 0, "{v:#}");
    assert_eq!(
        v["failures"],
        serde_json::json!([serde_json::from_str::<serde_json::Value>(&failed).unwrap()])
    );
    let text = ok(&home.report(&[]));
    assert!(
        text.starts_with(&format!(
            "{NEW}: 3 requests, 2 allowed, 1 failed upstream, 0 refused;"
        )),
        "{text}"
    );
    assert!(text.contains("\n1 request open when last logged"), "{text}");
    assert!(
        text.contains("\nallowed, upstream failed:\n  18:45:02.000  CONNECT allowed.test:8081  cannot connect"),
        "{text}"
    );
}

#[test]
fn a_missing_session_names_the_file_and_the_sessions_there_are() {
    let (home, _, _) = two_sessions("missing");
    let e = refused(&home.report(&["20261124T000000Z-9"]));
    let file = home.logs().join("20261124T000000Z-9.jsonl");
    assert!(
        e.contains(&format!("{} does not exist", file.display())),
        "{e}"
    );
    assert!(e.contains(&format!("newest sessions: {NEW}, {OLD}")), "{e}");

    let empty = Home::new("none");
    let e = refused(&empty.report(&["--last"]));
    assert!(e.contains("egress = allowlist"), "{e}");
    let e = refused(&empty.report(&[OLD]));
    assert!(e.contains("there are none"), "{e}");
}

#[test]
fn bad_input_is_refused_with_exit_2() {
    let (home, _, _) = two_sessions("bad");
    let e = refused(&home.report(&["../x"]));
    assert!(e.contains("`../x` is not a session id"), "{e}");
    let o = home.report(&[OLD, "--last"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
    // A log that is a directory is refused, not read.
    std::fs::create_dir(home.logs().join("20261124T000000Z-9.jsonl")).unwrap();
    let e = refused(&home.report(&["--last"]));
    assert!(e.contains("is a directory"), "{e}");
}

#[test]
fn help_documents_the_exit_status() {
    let home = Home::new("help");
    let out = ok(&home.report(&["--help"]));
    assert!(
        out.contains("Exit status: 0 the report was printed; 2 bad input"),
        "{out}"
    );
}
