//! What the proxy's connections share with the shadow's side ([`Shared`]:
//! the policy, the session's log, the open sockets, the refusal counts, the
//! credential broker) and the answers the proxy itself sends ([`respond`],
//! [`refusal_body`]). `shadow.rs` makes it and serves the listener;
//! `connection.rs` uses it for each request.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::logfile::{LogFile, Slot};
use crate::egress::policy::{Decision, LogLine, Policy};

/// At the end of a session: how long open connections get to close.
const DRAIN: Duration = Duration::from_millis(500);

/// What every connection's thread shares.
pub(super) struct Shared {
    pub(super) policy: Policy,
    pub(super) session: String,
    /// The log's path (an empty log is removed at the end).
    pub(super) log_path: std::path::PathBuf,
    pub(super) log: Mutex<LogFile>,
    pub(super) state: Mutex<State>,
    pub(super) idle: Condvar,
    /// The credential broker, when this session brokers (issue #25).
    pub(super) broker: Option<Arc<crate::egress::broker::Broker>>,
    /// The session's notices file (issue #44): each refused host is told
    /// to the agent there, once, as it happens.
    pub(super) notices: Option<std::os::fd::OwnedFd>,
}

/// An open connection's sockets (handles of them), to shut down at the end.
pub(super) struct Sockets {
    pub(super) client: TcpStream,
    pub(super) upstream: Option<TcpStream>,
}

#[derive(Default)]
pub(super) struct State {
    next: u64,
    pub(super) open: BTreeMap<u64, Sockets>,
    /// Refusals per host, for the summary at exit.
    pub(super) refused: BTreeMap<String, u64>,
    pub(super) stopping: bool,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// Wait until no connection is open, for at most [`DRAIN`].
    pub(super) fn until_idle<'a>(
        &self,
        mut st: std::sync::MutexGuard<'a, State>,
    ) -> std::sync::MutexGuard<'a, State> {
        let deadline = Instant::now() + DRAIN;
        while !st.open.is_empty() && Instant::now() < deadline {
            st = self
                .idle
                .wait_timeout(st, deadline.saturating_duration_since(Instant::now()))
                .map_or_else(|e| e.into_inner().0, |r| r.0);
        }
        st
    }

    /// Register an open connection (a handle of its client socket);
    /// `None` once stopping.
    pub(super) fn open(&self, client: TcpStream) -> Option<u64> {
        let mut st = lock(&self.state);
        if st.stopping {
            return None;
        }
        st.next += 1;
        let id = st.next;
        st.open.insert(
            id,
            Sockets {
                client,
                upstream: None,
            },
        );
        Some(id)
    }

    /// The connection's upstream now (a handle of it), replacing the last.
    pub(super) fn set_upstream(&self, id: u64, s: Option<TcpStream>) {
        let mut st = lock(&self.state);
        if st.stopping {
            if let Some(s) = &s {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        if let Some(o) = st.open.get_mut(&id) {
            o.upstream = s;
        }
    }

    /// The connection ended.
    pub(super) fn forget(&self, id: u64) {
        let mut st = lock(&self.state);
        st.open.remove(&id);
        self.idle.notify_all();
    }

    /// A request is open: its line, written now (see logfile.rs).
    pub(super) fn log_open(&self, line: &LogLine) -> Option<Slot> {
        lock(&self.log).open(line)
    }

    /// The credential broker's line for one swap (issue #25): a complete
    /// line of its own, appended at once (never an open one).
    pub(super) fn log_event(&self, line: &str) {
        lock(&self.log).event(line);
    }

    /// The credential broker, when it intercepts a tunnel to `host:port`
    /// (issue #25): only a brokered host, on port 443, with a credential
    /// this session holds.
    pub(super) fn broker_for(
        &self,
        host: &str,
        port: u16,
    ) -> Option<&crate::egress::broker::Broker> {
        self.broker.as_deref().filter(|b| b.intercepts(host, port))
    }

    /// Tell the agent, once per host, that a request to `host:port` was
    /// refused, why, and the line that would allow it.
    pub(super) fn tell(&self, host: &str, port: u16, reason: &str, fix: &str) {
        let Some(fd) = &self.notices else {
            return;
        };
        if lock(&self.state).refused.contains_key(host) {
            return;
        }
        let allow = if fix.is_empty() {
            String::new()
        } else {
            format!(
                "; the user can allow it with `{fix}` in {}",
                crate::sys::paths::CONFIG_FILE
            )
        };
        crate::notices::append(
            std::os::fd::AsRawFd::as_raw_fd(fd),
            &format!("claude-sandbox: refused a connection to {host}:{port}: {reason}{allow}."),
        );
    }

    /// A request is over: its complete line, over its open one if any.
    pub(super) fn log_close(&self, slot: Option<Slot>, line: &LogLine) {
        lock(&self.log).close(slot, line);
        if line.decision == Decision::Refused {
            *lock(&self.state)
                .refused
                .entry(line.host.clone())
                .or_default() += 1;
        }
    }
}

/// A response the proxy itself sends; the connection ends after it.
pub(super) fn respond(mut client: &TcpStream, status: &str, body: &str) {
    let text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nX-Claude-Sandbox: {status}\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(text.as_bytes());
    let _ = client.shutdown(Shutdown::Write);
}

/// The 403's body: what was refused, why, and the line that would allow it.
pub(super) fn refusal_body(host: &str, port: u16, reason: &str, fix: &str) -> String {
    let mut s = format!("claude-sandbox: {host}:{port} refused: {reason}.\n");
    if !fix.is_empty() {
        s.push_str(&format!(
            "To allow it, add this line to {}:\n    {fix}\n",
            crate::sys::paths::CONFIG_FILE
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_body_names_the_line() {
        let b = refusal_body(
            "denied.test",
            443,
            "denied.test is not on the allowlist",
            "allow-domain = denied.test",
        );
        assert!(b.contains("denied.test:443 refused"), "{b}");
        assert!(
            b.contains("/etc/claude-sandbox.conf:\n    allow-domain = denied.test\n"),
            "{b}"
        );
    }
}
