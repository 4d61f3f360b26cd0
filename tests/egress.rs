//! End-to-end: allowlist egress mode (issue #15, acceptance lines 1 and 3)
//! in the private site network of `tests/testnet/lan.sh`, as root and as an
//! unprivileged user. The test internet ([`common::site`]) serves
//! `allowed.test`, `denied.test` (both 203.0.113.10, over HTTP and TLS with
//! a CA made for the test) and `internal.test` (the LAN host 10.77.0.9);
//! the gateway's resolver answers those names for the proxy. Every packet
//! stays in namespaces the test created.
//!
//! Each session's connection log is read on the host, at
//! `HOME/.local/state/claude-sandbox/egress/SESSION.jsonl` (the one file the
//! session created).

mod common;
use common::lan::*;
use common::site::{blob, Site, BLOB_LEN, ECHO_PORT, INDEX, INTERNAL_INDEX, README};
use common::*;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde::Deserialize;
use serde_json::Value;

/// Both names on the list; `internal.test` resolves inside the site.
const CONF: &str = "egress = allowlist\nallow-domain = allowed.test\nallow-domain = internal.test\nallow-domains = github\n";

/// The log's directory under a home.
const LOG_DIR: &str = ".local/state/claude-sandbox/egress";

/// One line of the connection log, exactly as documented (unknown fields
/// fail the parse).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct LogLine {
    time: String,
    session: String,
    method: String,
    host: String,
    port: u16,
    address: Option<String>,
    decision: String,
    reason: String,
    #[serde(default)]
    error: Option<String>,
    bytes_up: u64,
    bytes_down: u64,
    #[allow(dead_code)]
    duration_ms: u64,
    /// Only on a line whose request was still open (none after a session
    /// that ended normally).
    #[serde(default)]
    open: bool,
}

/// A finished session and the log it created.
struct Session {
    out: Output,
    id: String,
    log: PathBuf,
    lines: Vec<LogLine>,
    /// The same lines as JSON.
    raw: Vec<Value>,
}

impl Session {
    fn stdout(&self) -> String {
        stdout(&self.out)
    }

    /// Everything the session printed, for assertion messages.
    fn shown(&self) -> String {
        format!(
            "status {:?}\n--- stdout\n{}--- stderr\n{}--- log {}\n{}",
            self.out.status,
            stdout(&self.out),
            stderr(&self.out),
            self.log.display(),
            std::fs::read_to_string(&self.log).unwrap_or_default()
        )
    }
}

/// The site network, the test internet, and a world in allowlist mode with
/// the CA in each workspace. Dropped in this order: listeners and
/// namespaces first.
struct Net {
    lan: Lan,
    _site: Site,
    w: World,
}

fn net(name: &str) -> Net {
    net_with(name, CONF, false)
}

/// [`net`] with configuration `conf`, and the echo peer on the internet
/// host's [`ECHO_PORT`] when `echo`.
fn net_with(name: &str, conf: &str, echo: bool) -> Net {
    let mut lan = Lan::up();
    let site = Site::new(name);
    site.start(&mut lan);
    if echo {
        site.start_echo(&mut lan);
    }
    let w = jail_world(name, conf);
    for who in BOTH {
        site.ca_into(&w, who);
    }
    Net {
        lan,
        _site: site,
        w,
    }
}

fn log_files(dir: &Path) -> BTreeSet<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .collect()
        })
        .unwrap_or_default()
}

/// Parse a log: every line must be a log line of `session` (no garbage,
/// nothing half-written).
fn parse_log(text: &str, session: &str) -> (Vec<LogLine>, Vec<Value>) {
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "the log does not end with a newline:\n{text}"
    );
    let mut lines = Vec::new();
    let mut raw = Vec::new();
    for l in text.lines() {
        let line: LogLine = serde_json::from_str(l)
            .unwrap_or_else(|e| panic!("not a log line ({e}): {l:?}\nwhole log:\n{text}"));
        assert_eq!(line.session, session, "{l}");
        // The session ended: every request's line was completed.
        assert!(!line.open, "a line still open after the session: {l}");
        assert!(
            line.time.ends_with('Z') && line.time.len() == "2026-11-23T18:45:01.123Z".len(),
            "time {:?}",
            line.time
        );
        lines.push(line);
        raw.push(serde_json::from_str(l).unwrap());
    }
    (lines, raw)
}

/// Run `script` inside the sandbox (`claude shell`) as `who`, from the
/// workspace, and read the log the session created.
fn session(n: &Net, who: Who, script: &str) -> Session {
    let dir = n.w.home(who).join(LOG_DIR);
    let before = log_files(&dir);
    let out = n.lan.shell(&n.w, who, "", &[], script);
    let new: Vec<PathBuf> = log_files(&dir).difference(&before).cloned().collect();
    // One log, or none for a session that made no request through the proxy.
    assert!(
        new.len() <= 1,
        "{who:?}: the session created {} logs in {}: {new:?}\nstdout: {}\nstderr: {}",
        new.len(),
        dir.display(),
        stdout(&out),
        stderr(&out)
    );
    let Some(log) = new.into_iter().next() else {
        return Session {
            out,
            id: String::new(),
            log: PathBuf::new(),
            lines: Vec::new(),
            raw: Vec::new(),
        };
    };
    let id = log.file_stem().unwrap().to_string_lossy().into_owned();
    let text = std::fs::read_to_string(&log).unwrap();
    let (mut lines, raw) = parse_log(&text, &id);
    // A line is written when its request opens (a refusal's once it is
    // answered) and completed when it closes; `time` is when it arrived.
    // The tests name lines in the order the session made them.
    lines.sort_by(|a, b| a.time.cmp(&b.time));
    Session {
        out,
        id,
        log,
        lines,
        raw,
    }
}

fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// curl inside: quiet, bounded, the test CA trusted.
const CURL: &str = "curl -sS -m 10 --cacert ca.pem";

/// What a line must say for an allowed request to `allowed.test`.
fn assert_allowed(l: &LogLine, method: &str, port: u16, s: &Session, who: Who) {
    assert_eq!(
        (
            l.method.as_str(),
            l.host.as_str(),
            l.port,
            l.decision.as_str()
        ),
        (method, "allowed.test", port, "allowed"),
        "{who:?}: {l:?}\n{}",
        s.shown()
    );
    assert_eq!(l.reason, "allow-domain = allowed.test", "{who:?}: {l:?}");
    assert_eq!(l.address.as_deref(), Some("203.0.113.10"), "{who:?}: {l:?}");
    assert_eq!(l.error, None, "{who:?}: {l:?}");
    assert!(l.bytes_up > 0, "{who:?}: nothing sent up: {l:?}");
}

/// What a line must say for a refused request.
fn assert_refused(l: &LogLine, method: &str, host: &str, port: u16, s: &Session, who: Who) {
    assert_eq!(
        (
            l.method.as_str(),
            l.host.as_str(),
            l.port,
            l.decision.as_str()
        ),
        (method, host, port, "refused"),
        "{who:?}: {l:?}\n{}",
        s.shown()
    );
    assert_eq!(
        (l.bytes_up, l.bytes_down),
        (0, 0),
        "{who:?}: a refused request moved bytes: {l:?}"
    );
    assert_eq!(l.error, None, "{who:?}: {l:?}");
}

#[test]
fn https_to_an_allowed_name_goes_through_the_proxy() {
    if !require("egress_https") {
        return;
    }
    let n = net("eghttps");
    for who in BOTH {
        let s = session(
            &n,
            who,
            &format!(
                "{CURL} https://allowed.test/; echo \"rc=$?\"; \
                 {CURL} https://allowed.test/blob | sha256sum"
            ),
        );
        assert!(s.out.status.success(), "{who:?}: {}", s.shown());
        assert_eq!(
            s.stdout(),
            format!("{INDEX}rc=0\n{}  -\n", sha256_hex(&blob())),
            "{who:?}: {}",
            s.shown()
        );
        assert_eq!(
            s.lines.len(),
            2,
            "{who:?}: one line per request: {}",
            s.shown()
        );
        for l in &s.lines {
            assert_allowed(l, "CONNECT", 443, &s, who);
        }
        // TLS wraps the payload: at least the file itself came down.
        assert!(
            s.lines[0].bytes_down >= INDEX.len() as u64,
            "{who:?}: {:?}",
            s.lines[0]
        );
        assert!(
            s.lines[1].bytes_down >= BLOB_LEN as u64,
            "{who:?}: {BLOB_LEN} bytes downloaded, {:?} logged",
            s.lines[1]
        );
    }
}

#[test]
fn plain_http_to_an_allowed_name_goes_through_with_its_byte_counts() {
    if !require("egress_http") {
        return;
    }
    let n = net("eghttp");
    for who in BOTH {
        let s = session(
            &n,
            who,
            "curl -sS -m 10 http://allowed.test/; echo \"rc=$?\"; \
             curl -sS -m 10 http://allowed.test/blob | sha256sum; \
             curl -sS -m 10 -H 'Host: denied.test' http://allowed.test/host",
        );
        assert!(s.out.status.success(), "{who:?}: {}", s.shown());
        // The server sees the name the proxy decided on, never the
        // client's own Host (a server hosting both would serve the other).
        assert_eq!(
            s.stdout(),
            format!("{INDEX}rc=0\n{}  -\nallowed.test\n", sha256_hex(&blob())),
            "{who:?}: {}",
            s.shown()
        );
        assert_eq!(
            s.lines.len(),
            3,
            "{who:?}: one line per request: {}",
            s.shown()
        );
        for l in &s.lines {
            assert_allowed(l, "GET", 80, &s, who);
            // The request head the proxy forwarded, and nothing else.
            assert!(l.bytes_up < 2048, "{who:?}: {l:?}");
        }
        let down = s.lines[1].bytes_down;
        assert!(
            (BLOB_LEN as u64..BLOB_LEN as u64 + 2048).contains(&down),
            "{who:?}: a {BLOB_LEN}-byte file and its response head, {down} logged"
        );
    }
}

/// `host` over plain http and over https, refused: the 403's body with
/// `reason` and the line `fix` (shown by curl for http; for https curl shows
/// only the status), and one refused line each in the log, with `address`.
fn refused_both_ways(
    n: &Net,
    who: Who,
    host: &str,
    reason: &str,
    fix: &str,
    address: Option<&str>,
) -> Session {
    let s = session(
        n,
        who,
        &format!(
            "curl -sS -m 10 -D - http://{host}/; echo \"rc=$?\"; \
             {CURL} -v https://{host}/ 2>&1; echo \"rc=$?\""
        ),
    );
    let out = s.stdout();
    assert!(
        out.starts_with("HTTP/1.1 403 Forbidden\r\n"),
        "{who:?}: {}",
        s.shown()
    );
    let body = format!(
        "claude-sandbox: {host}:80 refused: {reason}.\n\
         To allow it, add this line to /etc/claude-sandbox.conf:\n    {fix}\n"
    );
    assert!(out.contains(&body), "{who:?}: no {body:?} in {}", s.shown());
    assert!(
        out.contains("< HTTP/1.1 403 Forbidden")
            && out.contains("CONNECT tunnel failed, response 403")
            && out.ends_with("rc=56\n"),
        "{who:?}: {}",
        s.shown()
    );
    assert_eq!(s.lines.len(), 2, "{who:?}: {}", s.shown());
    for (l, (method, port)) in s.lines.iter().zip([("GET", 80), ("CONNECT", 443)]) {
        assert_refused(l, method, host, port, &s, who);
        assert_eq!(l.reason, reason, "{who:?}: {l:?}");
        assert_eq!(l.address.as_deref(), address, "{who:?}: {l:?}");
    }
    s
}

#[test]
fn a_name_not_on_the_list_is_refused_with_the_line_that_allows_it() {
    if !require("egress_denied") {
        return;
    }
    let n = net("egdenied");
    for who in BOTH {
        // Refused before any lookup: no address.
        let s = refused_both_ways(
            &n,
            who,
            "denied.test",
            "denied.test is not on the allowlist",
            "allow-domain = denied.test",
            None,
        );
        assert!(
            !s.stdout().contains(INDEX),
            "{who:?}: denied.test was served: {}",
            s.shown()
        );
        // The session's end names what was refused.
        assert!(
            stderr(&s.out).contains("the egress allowlist refused 2 requests (denied.test ×2)"),
            "{who:?}: {}",
            s.shown()
        );
    }
}

#[test]
fn a_listed_name_that_resolves_to_an_internal_address_is_refused() {
    if !require("egress_internal") {
        return;
    }
    let n = net("eginternal");
    for who in BOTH {
        let s = refused_both_ways(
            &n,
            who,
            "internal.test",
            "internal.test resolves to 10.77.0.9, an address the sandbox does not reach",
            "allow-ip = 10.77.0.9",
            Some("10.77.0.9"),
        );
        assert!(
            !s.stdout().contains(INTERNAL_INDEX),
            "{who:?}: the LAN host was reached: {}",
            s.shown()
        );
    }
}

#[test]
fn a_direct_connection_has_no_route() {
    if !require("egress_direct") {
        return;
    }
    let n = net("egdirect");
    // Control: outside the sandbox, in the same namespace, the internet host answers.
    let control = Command::new("ip")
        .args(["netns", "exec", &n.lan.host])
        .args([
            "curl",
            "-sS",
            "-m",
            "5",
            "--noproxy",
            "*",
            "http://203.0.113.10/",
        ])
        .output()
        .unwrap();
    assert_eq!(stdout(&control), INDEX, "control: {}", stderr(&control));
    for who in BOTH {
        // netprobe ignores the proxy variables; curl is told to.
        let s = session(
            &n,
            who,
            &format!(
                "{} connect 203.0.113.10:80 203.0.113.10:443 10.77.0.1:53; \
                 curl -sS -m 5 --noproxy '*' http://203.0.113.10/ 2>&1; echo \"rc=$?\"",
                netprobe_cmd(&n.w)
            ),
        );
        let out = s.stdout();
        for t in ["203.0.113.10:80", "203.0.113.10:443", "10.77.0.1:53"] {
            assert!(
                out.contains(&format!(
                    "{t} BLOCKED OSError: [Errno 101] Network is unreachable"
                )),
                "{who:?}: {t} not refused for lack of a route: {}",
                s.shown()
            );
        }
        assert!(
            out.ends_with("rc=7\n"),
            "{who:?}: curl --noproxy: {}",
            s.shown()
        );
        assert!(!out.contains(INDEX), "{who:?}: {}", s.shown());
        // The proxy never saw them: a session without requests leaves no log.
        assert!(
            s.lines.is_empty() && s.log.as_os_str().is_empty(),
            "{who:?}: {}",
            s.shown()
        );
    }
}

#[test]
fn git_clones_over_https_through_the_proxy() {
    if !require("egress_git") {
        return;
    }
    let n = net("eggit");
    for who in BOTH {
        let s = session(
            &n,
            who,
            "git -c http.sslCAInfo=\"$PWD/ca.pem\" clone -q https://allowed.test/repo.git clone 2>&1 \
             && cat clone/README && git -C clone log --format=%s",
        );
        assert_eq!(
            s.stdout(),
            format!("{README}the only commit\n"),
            "{who:?}: {}",
            s.shown()
        );
        // Dumb HTTP: a request per file (refs, HEAD, objects), each a CONNECT.
        assert!(s.lines.len() >= 2, "{who:?}: {}", s.shown());
        for l in &s.lines {
            assert_allowed(l, "CONNECT", 443, &s, who);
            assert!(l.bytes_down > 0, "{who:?}: {l:?}");
        }
        // An ssh-style remote: the sandbox's git config rewrites it to
        // https, which the proxy lets through by the github preset.
        let s = session(
            &n,
            who,
            "git -c http.sslCAInfo=\"$PWD/ca.pem\" clone -q git@github.com:org/repo.git ssh-style 2>&1 \
             && cat ssh-style/README",
        );
        assert_eq!(s.stdout(), README, "{who:?}: {}", s.shown());
        assert!(!s.lines.is_empty(), "{who:?}: {}", s.shown());
        for l in &s.lines {
            assert_eq!(
                (
                    l.method.as_str(),
                    l.host.as_str(),
                    l.port,
                    l.decision.as_str(),
                    l.reason.as_str()
                ),
                (
                    "CONNECT",
                    "github.com",
                    443,
                    "allowed",
                    "allow-domains = github"
                ),
                "{who:?}: {l:?}"
            );
        }
    }
}

/// Every kind of attempt of acceptance line 1, one after the other.
fn attempts(w: &World) -> String {
    format!(
        "{CURL} -o /dev/null https://allowed.test/blob\n\
         curl -sS -m 10 -o /dev/null http://allowed.test/blob\n\
         curl -sS -m 10 -o /dev/null http://denied.test/\n\
         {CURL} -o /dev/null https://denied.test/ 2>/dev/null\n\
         curl -sS -m 10 -o /dev/null http://internal.test/\n\
         {CURL} -o /dev/null https://internal.test/ 2>/dev/null\n\
         {} connect 203.0.113.10:443 >/dev/null\n",
        netprobe_cmd(w)
    )
}

/// The log lines [`attempts`] makes, in order: (method, host, port, decision).
const ATTEMPT_LINES: &[(&str, &str, u16, &str)] = &[
    ("CONNECT", "allowed.test", 443, "allowed"),
    ("GET", "allowed.test", 80, "allowed"),
    ("GET", "denied.test", 80, "refused"),
    ("CONNECT", "denied.test", 443, "refused"),
    ("GET", "internal.test", 80, "refused"),
    ("CONNECT", "internal.test", 443, "refused"),
];

fn check_attempt_lines(s: &Session, lines: &[LogLine], who: Who) {
    let got: Vec<(&str, &str, u16, &str)> = lines
        .iter()
        .map(|l| {
            (
                l.method.as_str(),
                l.host.as_str(),
                l.port,
                l.decision.as_str(),
            )
        })
        .collect();
    assert_eq!(got, ATTEMPT_LINES, "{who:?}: {}", s.shown());
    assert_allowed(&lines[0], "CONNECT", 443, s, who);
    assert!(
        lines[0].bytes_down >= BLOB_LEN as u64,
        "{who:?}: {:?}",
        lines[0]
    );
    assert_allowed(&lines[1], "GET", 80, s, who);
    assert!(
        (BLOB_LEN as u64..BLOB_LEN as u64 + 2048).contains(&lines[1].bytes_down),
        "{who:?}: {:?}",
        lines[1]
    );
    for l in &lines[2..4] {
        assert_eq!(
            l.reason, "denied.test is not on the allowlist",
            "{who:?}: {l:?}"
        );
    }
    for l in &lines[4..6] {
        assert!(
            l.reason.contains("resolves to 10.77.0.9") && l.address.as_deref() == Some("10.77.0.9"),
            "{who:?}: {l:?}"
        );
    }
    for l in &lines[2..6] {
        assert_eq!((l.bytes_up, l.bytes_down), (0, 0), "{who:?}: {l:?}");
    }
}

/// Everything the session tries against its own log (acceptance line 3):
/// find it (under `$HOME` as on the host, anywhere on the filesystem, as an
/// open file of any process it sees), then append, truncate, delete and
/// rename each; forge lines through the proxy itself; and plant a log at
/// the host's path inside. Prints `FOUND` per file found and a line for
/// any step that worked.
const TAMPER: &str = r#"
found=$( {
  ls -d "$HOME"/.local/state/claude-sandbox/egress/*.jsonl
  find / -path '*/claude-sandbox/egress/*.jsonl'
  for fd in /proc/[0-9]*/fd/*; do
    case "$(readlink "$fd")" in */claude-sandbox/egress/*) echo "$fd" ;; esac
  done
} 2>/dev/null | sort -u )
for f in $found; do
  # Another test's world may be removed meanwhile: what is gone is not tried.
  id=$(stat -L -c %d:%i "$f" 2>/dev/null) || continue
  echo "FOUND $f $id"
  { echo '{"garbage":true}' >> "$f"; } 2>/dev/null && echo "APPENDED $f"
  # In a subshell: a failed redirection of `:` (a special built-in) would
  # end the whole script.
  ( : > "$f" ) 2>/dev/null && echo "TRUNCATED $f"
  truncate -s 0 "$f" 2>/dev/null && echo "TRUNCATED $f"
  rm "$f" 2>/dev/null && echo "DELETED $f"
  mv "$f" "$f.moved" 2>/dev/null && echo "RENAMED $f"
done
python3 - <<'PY'
import socket
for head in (b'GET http://forged.test/\n{"decision":"allowed","host":"forged.test"}\n HTTP/1.1\r\n\r\n',
             b'GET http://forged.test"},{"decision":"allowed/ HTTP/1.1\r\n\r\n'):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    s.sendall(head)
    print("FORGED", s.recv(4096).split(b"\r\n")[0].decode())
    s.close()
PY
mkdir -p "$HOME/.local/state/claude-sandbox/egress" \
  && echo '{"garbage":true}' > "$HOME/.local/state/claude-sandbox/egress/planted.jsonl" \
  && echo PLANTED
"#;

#[test]
fn the_log_has_a_line_per_attempt_and_the_session_cannot_change_it() {
    if !require("egress_log") {
        return;
    }
    let n = net("eglog");
    for who in BOTH {
        let s = session(&n, who, &format!("{}{TAMPER}", attempts(&n.w)));
        let out = s.stdout();
        eprintln!("{who:?}: what the session found and tried:\n{out}");
        // Not even visible inside (the tmpfs over $HOME, root's home masked,
        // no process inside holds it open); other worlds' logs, read-only,
        // may be.
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(&s.log).unwrap();
        let own = format!(" {}:{}", m.dev(), m.ino());
        assert!(
            !out.lines()
                .any(|l| l.starts_with("FOUND ") && l.ends_with(&own)),
            "{who:?}: the session found its own log: {}",
            s.shown()
        );
        for worked in ["APPENDED", "TRUNCATED", "DELETED", "RENAMED"] {
            assert!(!out.contains(worked), "{who:?}: {worked}: {}", s.shown());
        }
        // The forged heads were refused as bad requests (400) or bad names (403).
        assert_eq!(
            out.matches("FORGED HTTP/1.1 4").count(),
            2,
            "{who:?}: {}",
            s.shown()
        );
        assert!(out.contains("PLANTED\n"), "{who:?}: {}", s.shown());
        // Exactly the attempts' lines, then one refused line per forged head.
        assert_eq!(
            s.lines.len(),
            ATTEMPT_LINES.len() + 2,
            "{who:?}: {}",
            s.shown()
        );
        check_attempt_lines(&s, &s.lines[..ATTEMPT_LINES.len()], who);
        for l in &s.lines[ATTEMPT_LINES.len()..] {
            assert_eq!(l.decision, "refused", "{who:?}: {l:?}");
            assert!(
                l.reason.starts_with("bad request") || l.reason.contains("not a host name"),
                "{who:?}: {l:?}"
            );
            assert_eq!((l.bytes_up, l.bytes_down), (0, 0), "{who:?}: {l:?}");
        }
        // Still the session's own private file, and nothing planted beside it.
        let uid = if who == Who::Root { 0 } else { TEST_UID };
        assert_eq!((m.mode() & 0o777, m.uid()), (0o600, uid), "{who:?}");
        let dir = s.log.parent().unwrap();
        assert!(
            !dir.join("planted.jsonl").exists(),
            "{who:?}: planted on the host"
        );
        assert!(
            std::fs::read_dir(dir)
                .unwrap()
                .flatten()
                .all(|e| e.path().extension().is_some_and(|x| x == "jsonl")),
            "{who:?}: {:?}",
            std::fs::read_dir(dir)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .collect::<Vec<_>>()
        );
    }
}

/// `egress report SESSION --json` as `who`, after the session.
fn report_json(n: &Net, who: Who, id: &str) -> Value {
    let o = n.w.run(
        who,
        &[],
        &[
            "/usr/libexec/claude-sandbox/claude-sandbox",
            "egress",
            "report",
            id,
            "--json",
        ],
    );
    assert!(o.status.success(), "{who:?}: egress report: {}", stderr(&o));
    serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{who:?}: report is not JSON ({e}): {}", stdout(&o)))
}

#[test]
fn egress_report_json_matches_the_log() {
    if !require("egress_report") {
        return;
    }
    let n = net("egreport");
    for who in BOTH {
        let s = session(&n, who, &attempts(&n.w));
        check_attempt_lines(&s, &s.lines, who);
        let r = report_json(&n, who, &s.id);
        let num = |k: &str| {
            r[k].as_u64()
                .unwrap_or_else(|| panic!("{who:?}: `{k}` is not a count: {r:#}"))
        };
        let count = |d: &str| s.lines.iter().filter(|l| l.decision == d).count() as u64;
        assert_eq!(r["session"], s.id.as_str(), "{who:?}: {r:#}");
        assert_eq!(r["log"], s.log.to_str().unwrap(), "{who:?}: {r:#}");
        assert_eq!(num("requests"), s.lines.len() as u64, "{who:?}: {r:#}");
        assert_eq!(num("allowed"), count("allowed"), "{who:?}: {r:#}");
        assert_eq!(num("refused"), count("refused"), "{who:?}: {r:#}");
        assert_eq!(num("unreadable_lines"), 0, "{who:?}: {r:#}");
        assert_eq!(
            num("bytes_up"),
            s.lines.iter().map(|l| l.bytes_up).sum::<u64>(),
            "{who:?}: {r:#}"
        );
        assert_eq!(
            num("bytes_down"),
            s.lines.iter().map(|l| l.bytes_down).sum::<u64>(),
            "{who:?}: {r:#}"
        );
        // Per domain: the sums of its lines, in whatever order the report lists them.
        #[derive(Debug, Default, PartialEq)]
        struct Domain {
            ports: BTreeSet<u64>,
            allowed: u64,
            refused: u64,
            bytes_up: u64,
            bytes_down: u64,
        }
        let mut want: BTreeMap<String, Domain> = BTreeMap::new();
        for l in &s.lines {
            let d = want.entry(l.host.clone()).or_default();
            d.ports.insert(l.port.into());
            if l.decision == "allowed" {
                d.allowed += 1;
            } else {
                d.refused += 1;
            }
            d.bytes_up += l.bytes_up;
            d.bytes_down += l.bytes_down;
        }
        let mut got: BTreeMap<String, Domain> = BTreeMap::new();
        for d in r["domains"]
            .as_array()
            .unwrap_or_else(|| panic!("{who:?}: no domains: {r:#}"))
        {
            let c = |k: &str| {
                d[k].as_u64()
                    .unwrap_or_else(|| panic!("{who:?}: {k} in {d}"))
            };
            let host = d["host"].as_str().unwrap().to_string();
            let ports = d["ports"]
                .as_array()
                .unwrap_or_else(|| panic!("{who:?}: ports in {d}"))
                .iter()
                .map(|p| p.as_u64().unwrap())
                .collect();
            let dom = Domain {
                ports,
                allowed: c("allowed"),
                refused: c("refused"),
                bytes_up: c("bytes_up"),
                bytes_down: c("bytes_down"),
            };
            assert!(
                got.insert(host, dom).is_none(),
                "{who:?}: a domain twice: {r:#}"
            );
        }
        assert_eq!(got, want, "{who:?}: {r:#}");
        // The refusals are the refused lines, as logged.
        let refused: Vec<&Value> = s
            .raw
            .iter()
            .filter(|v| v["decision"] == "refused")
            .collect();
        let listed: Vec<&Value> = r["refusals"].as_array().unwrap().iter().collect();
        assert_eq!(listed, refused, "{who:?}: {r:#}");
        assert!(r["risk"]["score"].is_number(), "{who:?}: {r:#}");
        assert!(r["risk"]["reasons"].is_array(), "{who:?}: {r:#}");
    }
}

// ---------------------------------------------------------------------------
// Issue #24, item 5: the allowlist's leftovers. Each test failed before the
// change it names.

/// [`CONF`] with names whose rules name a port: `echo.test` and
/// `other.test` on the echo peer's port, `allowed.test` on 8081 (where
/// nothing listens).
fn conf_ports() -> String {
    format!(
        "{CONF}allow-domain = echo.test:{ECHO_PORT}\nallow-domain = other.test:{ECHO_PORT}\n\
         allow-domain = allowed.test:8081\n"
    )
}

/// A Python client for the proxy, for what curl will not send: `Conn`
/// talks to 127.0.0.1:3128 and reads responses one at a time (by
/// `Content-Length`; the 200 of a CONNECT has no body). `case` prints one
/// JSON line: a case's name and its responses (status line, body).
const CLIENT: &str = r#"
import json, socket
class Conn:
    def __init__(self):
        self.s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
        self.buf = b""
    def send(self, data):
        self.s.sendall(data)
    def done(self):
        self.s.shutdown(socket.SHUT_WR)
    def fill(self):
        try:
            d = self.s.recv(65536)
        except OSError:
            d = b""
        self.buf += d
        return bool(d)
    def response(self):
        while b"\r\n\r\n" not in self.buf:
            if not self.fill():
                return None
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        while len(self.buf) < n and self.fill():
            pass
        body, self.buf = self.buf[:n], self.buf[n:]
        return [head.split(b"\r\n")[0].decode(), body.decode(errors="replace")]
    def rest(self):
        out = []
        while (r := self.response()) is not None:
            out.append(r)
        if self.buf:
            out.append(["TRAILING", self.buf.decode(errors="replace")])
        return out
def case(name, responses):
    print(json.dumps({"case": name, "responses": responses}), flush=True)
"#;

/// One case of a [`CLIENT`] script: its name and responses (status line, body).
#[derive(Debug, Deserialize)]
struct Case {
    case: String,
    responses: Vec<(String, String)>,
}

/// The cases a [`CLIENT`] session printed, by name.
fn cases(s: &Session, who: Who) -> BTreeMap<String, Vec<(String, String)>> {
    s.stdout()
        .lines()
        .map(|l| {
            let c: Case = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{who:?}: not a case ({e}): {l}\n{}", s.shown()));
            (c.case, c.responses)
        })
        .collect()
}

/// Run the Python `script` (after [`CLIENT`]) inside as `who`.
fn client_session(n: &Net, who: Who, script: &str) -> Session {
    let file = n.w.workspace(who).join("client.py");
    std::fs::write(&file, format!("{CLIENT}{script}")).unwrap();
    if who == Who::User {
        std::os::unix::fs::chown(&file, Some(TEST_UID), Some(TEST_UID)).unwrap();
    }
    session(n, who, "python3 client.py")
}

/// Tunnels to odd spellings of allowed.test's port 80 (served over plain
/// http, as the last case shows), to the echo peer's port by a name whose
/// rule names it and by one whose rule does not, and to 443. Inside each
/// tunnel, a plain GET.
const TUNNELS: &str = r#"
INNER = b"GET / HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n"
for target in ["allowed.test:80", "allowed.test:0080", "ALLOWED.TEST.:80", "allowed.test:+80",
               "[allowed.test]:80", "allowed.test:80.x", "[::ffff:203.0.113.10]:80",
               "allowed.test:8080", "echo.test:8080", "allowed.test:443"]:
    c = Conn()
    c.send(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode()
           + (b"" if target.endswith(":443") else INNER))
    c.done()
    case(target, c.rest())
c = Conn()
c.send(b"GET http://allowed.test/ HTTP/1.1\r\nConnection: close\r\n\r\n")
case("plain", c.rest())
"#;

#[test]
fn a_tunnel_reaches_port_443_only_unless_the_rule_names_its_port() {
    if !require("egress_tunnel_ports") {
        return;
    }
    let n = net_with("egports", &conf_ports(), true);
    for who in BOTH {
        let s = client_session(&n, who, TUNNELS);
        let got = cases(&s, who);
        let status = |c: &str| got[c].first().map(|r| r.0.clone()).unwrap_or_default();
        // Port 80 answers (plain http), and the echo peer answers on 8080
        // through a rule that names the port: the wall is the rule.
        assert_eq!(got["plain"].len(), 1, "{who:?}: {}", s.shown());
        assert!(got["plain"][0].1 == INDEX, "{who:?}: {}", s.shown());
        assert_eq!(
            status("echo.test:8080"),
            "HTTP/1.1 200 Connection established",
            "{who:?}: {}",
            s.shown()
        );
        assert!(
            got["echo.test:8080"]
                .get(1)
                .is_some_and(|r| r.1.contains("\nGET / HTTP/1.1\r\n")),
            "{who:?}: {}",
            s.shown()
        );
        assert_eq!(
            status("allowed.test:443"),
            "HTTP/1.1 200 Connection established",
            "{who:?}"
        );
        // A tunnel to a port the rule does not name: refused, the 403
        // naming the line; nothing of the server came back.
        for (target, fix) in [
            ("allowed.test:80", "allow-domain = allowed.test:80"),
            ("allowed.test:0080", "allow-domain = allowed.test:80"),
            ("ALLOWED.TEST.:80", "allow-domain = allowed.test:80"),
            ("allowed.test:8080", "allow-domain = allowed.test:8080"),
        ] {
            let r = &got[target];
            assert_eq!(r.len(), 1, "{who:?} {target}: {r:?}\n{}", s.shown());
            assert_eq!(r[0].0, "HTTP/1.1 403 Forbidden", "{who:?} {target}: {r:?}");
            assert!(r[0].1.contains(fix), "{who:?} {target}: {r:?}");
        }
        assert_eq!(
            status("[::ffff:203.0.113.10]:80"),
            "HTTP/1.1 403 Forbidden",
            "{who:?}"
        );
        // Odd spellings of a port are no ports: 400, never widened.
        for target in ["allowed.test:+80", "[allowed.test]:80", "allowed.test:80.x"] {
            assert_eq!(got[target].len(), 1, "{who:?} {target}: {:?}", got[target]);
            assert_eq!(
                status(target),
                "HTTP/1.1 400 Bad Request",
                "{who:?} {target}"
            );
        }
        // allowed.test's page came back over plain http only, never through a tunnel.
        for (c, r) in &got {
            if c != "plain" {
                assert!(r.iter().all(|r| !r.1.contains(INDEX)), "{who:?} {c}: {r:?}");
            }
        }
        // The log: what was allowed, and every refusal with no byte moved.
        let allowed: Vec<(&str, u16)> = s
            .lines
            .iter()
            .filter(|l| l.decision == "allowed")
            .map(|l| (l.host.as_str(), l.port))
            .collect();
        assert_eq!(
            allowed.iter().collect::<BTreeSet<_>>(),
            [
                ("allowed.test", 80),
                ("allowed.test", 443),
                ("echo.test", ECHO_PORT)
            ]
            .iter()
            .collect::<BTreeSet<_>>(),
            "{who:?}: {}",
            s.shown()
        );
        assert_eq!(s.lines.len(), 11, "{who:?}: {}", s.shown());
        for l in s.lines.iter().filter(|l| l.decision == "refused") {
            assert_eq!((l.bytes_up, l.bytes_down), (0, 0), "{who:?}: {l:?}");
        }
    }
}

/// What [`PIPELINES`] sends, one case per connection.
const PIPELINES: &str = r#"
E = "http://echo.test:8080"
c = Conn()
c.send(f"GET {E}/one HTTP/1.1\r\nHost: echo.test:8080\r\n\r\n"
       "GET http://other.test:8080/two HTTP/1.1\r\nHost: echo.test:8080\r\n\r\n"
       "GET http://denied.test:8080/three HTTP/1.1\r\nHost: echo.test:8080\r\n\r\n"
       f"GET {E}/four HTTP/1.1\r\n\r\n".encode())
c.done()
case("pipelined", c.rest())
c = Conn()
c.send(f"GET {E}/a HTTP/1.1\r\n\r\n".encode())
first = c.response()
c.send(f"GET {E}/b HTTP/1.1\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\r\n".encode())
second = c.response()
c.done()
case("keep-alive", [first, second] + c.rest())
smuggled = f"GET http://denied.test:8080/smuggled HTTP/1.1\r\nHost: denied.test\r\n\r\n"
for name, framing, body in [
    ("cl+te", "Content-Length: 60\r\nTransfer-Encoding: chunked", "0\r\n\r\n" + smuggled),
    ("te+cl", "Transfer-Encoding: chunked\r\nContent-Length: 5", "0\r\n\r\n" + smuggled),
    ("te-gzip", "Transfer-Encoding: gzip, chunked", "0\r\n\r\n" + smuggled),
    ("cl-twice", "Content-Length: 0\r\nContent-Length: 60", smuggled),
    ("chunk-sign", "Transfer-Encoding: chunked", "+5\r\nhello\r\n0\r\n\r\n" + smuggled),
    ("chunk-lf", "Transfer-Encoding: chunked", "5\nhello\r\n0\r\n\r\n" + smuggled),
]:
    c = Conn()
    c.send(f"POST {E}/{name} HTTP/1.1\r\n{framing}\r\n\r\n{body}".encode())
    c.done()
    case(name, c.rest())
"#;

#[test]
fn each_request_on_a_connection_reaches_only_the_server_decided_for_it() {
    if !require("egress_pipelined") {
        return;
    }
    let n = net_with("egpipe", &conf_ports(), true);
    for who in BOTH {
        let s = client_session(&n, who, PIPELINES);
        let got = cases(&s, who);
        let shown = || format!("{who:?}: {got:#?}\n{}", s.shown());
        // Nothing the proxy refused (or never read as a request) reached a server.
        for (status, body) in got.values().flatten() {
            if status.starts_with("HTTP/1.1 200") {
                assert!(
                    !body.contains("denied") && !body.contains("smuggled"),
                    "{}",
                    shown()
                );
                assert!(!body.contains("Proxy-"), "{}", shown());
            }
        }
        // Pipelined: the same host and port on one upstream; another host
        // on a connection of its own, with its own Host; a name not on the
        // list refused, and nothing read after it.
        let p = &got["pipelined"];
        assert_eq!(p.len(), 3, "{}", shown());
        let conn = |body: &str| body.lines().next().unwrap_or_default().to_string();
        assert!(
            p[0].1
                .contains("\nGET /one HTTP/1.1\r\nHost: echo.test:8080\r\n"),
            "{}",
            shown()
        );
        assert!(
            p[1].1
                .contains("\nGET /two HTTP/1.1\r\nHost: other.test:8080\r\n"),
            "{}",
            shown()
        );
        assert_ne!(conn(&p[0].1), conn(&p[1].1), "{}", shown());
        assert_eq!(p[2].0, "HTTP/1.1 403 Forbidden", "{}", shown());
        assert!(p[2].1.contains("denied.test:8080 refused"), "{}", shown());
        // Keep-alive to the same host: both answered, over one upstream, in
        // origin form, the proxy's own headers not passed on.
        let k = &got["keep-alive"];
        assert_eq!(k.len(), 2, "{}", shown());
        assert!(k[0].1.contains("\nGET /a HTTP/1.1\r\n"), "{}", shown());
        assert!(k[1].1.contains("\nGET /b HTTP/1.1\r\n"), "{}", shown());
        assert_eq!(conn(&k[0].1), conn(&k[1].1), "{}", shown());
        // Framing two readers could read differently: 400, nothing sent on.
        for name in [
            "cl+te",
            "te+cl",
            "te-gzip",
            "cl-twice",
            "chunk-sign",
            "chunk-lf",
        ] {
            let r = &got[name];
            assert_eq!(r.len(), 1, "{name}: {}", shown());
            assert_eq!(r[0].0, "HTTP/1.1 400 Bad Request", "{name}: {}", shown());
        }
        // One line per request read, each with its own decision.
        let lines: Vec<(&str, &str, u16, &str)> = s
            .lines
            .iter()
            .map(|l| {
                (
                    l.method.as_str(),
                    l.host.as_str(),
                    l.port,
                    l.decision.as_str(),
                )
            })
            .collect();
        let p = ECHO_PORT;
        assert_eq!(
            &lines[..5],
            [
                ("GET", "echo.test", p, "allowed"),
                ("GET", "other.test", p, "allowed"),
                ("GET", "denied.test", p, "refused"),
                ("GET", "echo.test", p, "allowed"),
                ("GET", "echo.test", p, "allowed"),
            ],
            "{}",
            shown()
        );
        assert_eq!(lines.len(), 11, "{}", shown());
    }
}

/// `egress report SESSION` as text, as `who`.
fn report_text(n: &Net, who: Who, id: &str) -> String {
    let o = n.w.run(
        who,
        &[],
        &[
            "/usr/libexec/claude-sandbox/claude-sandbox",
            "egress",
            "report",
            id,
        ],
    );
    assert!(o.status.success(), "{who:?}: egress report: {}", stderr(&o));
    stdout(&o)
}

#[test]
fn the_report_tells_an_allowed_request_whose_server_failed_from_an_allowed_one() {
    if !require("egress_failed") {
        return;
    }
    let n = net_with("egfailed", &conf_ports(), false);
    for who in BOTH {
        // Allowed by `allow-domain = allowed.test:8081`; nothing listens there.
        let s = session(
            &n,
            who,
            &format!(
                "{CURL} https://allowed.test:8081/ 2>&1; echo \"rc=$?\"; \
                 {CURL} -o /dev/null https://allowed.test/; echo \"rc=$?\""
            ),
        );
        assert!(
            s.stdout().contains("CONNECT tunnel failed, response 502")
                && s.stdout().ends_with("rc=56\nrc=0\n"),
            "{who:?}: {}",
            s.shown()
        );
        assert_eq!(s.lines.len(), 2, "{who:?}: {}", s.shown());
        let failed = &s.lines[0];
        assert_eq!(
            (failed.port, failed.decision.as_str()),
            (8081, "allowed"),
            "{who:?}: {failed:?}"
        );
        assert!(
            failed
                .error
                .as_deref()
                .is_some_and(|e| e.contains("cannot connect to 203.0.113.10:8081")),
            "{who:?}: {failed:?}"
        );
        let r = report_json(&n, who, &s.id);
        let num = |k: &str| {
            r[k].as_u64()
                .unwrap_or_else(|| panic!("{who:?}: no `{k}`: {r:#}"))
        };
        assert_eq!(
            (
                num("requests"),
                num("allowed"),
                num("failed"),
                num("refused")
            ),
            (2, 1, 1, 0),
            "{who:?}: {r:#}"
        );
        assert_eq!(r["domains"][0]["failed"], 1, "{who:?}: {r:#}");
        assert_eq!(r["domains"][0]["allowed"], 1, "{who:?}: {r:#}");
        assert_eq!(
            r["failures"].as_array().map(Vec::len),
            Some(1),
            "{who:?}: {r:#}"
        );
        assert_eq!(r["failures"][0], s.raw[0], "{who:?}: {r:#}");
        let text = report_text(&n, who, &s.id);
        assert!(
            text.contains("2 requests, 1 allowed, 1 failed upstream, 0 refused")
                && text.contains("\nallowed, upstream failed:\n")
                && text.contains("CONNECT allowed.test:8081  cannot connect to 203.0.113.10:8081"),
            "{who:?}: {text}"
        );
    }
}
