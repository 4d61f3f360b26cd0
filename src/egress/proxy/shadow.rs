//! Allowlist mode's runtime (SPEC §4.9, decision 0008).
//!
//! 1. The **allowlist holder** (`holder.rs`), spawned in place of
//!    bubblewrap, makes the proxy's listening socket in the sandbox's
//!    network namespace (loopback only) and sends it to the shadow.
//! 2. The shadow serves it from threads of its own ([`Proxy`]), in the host's
//!    network namespace: no process inside carries the proxy, and it ends
//!    with the shadow however the shadow ends (`kill -9` included), taking
//!    the listener with it.
//! 3. Each request is decided by [`crate::egress::policy::Policy`]: the name
//!    and port, then every address it resolves to; one line per request
//!    goes to the session's log as it opens, rewritten as it closes.
//!
//! This file is the shadow's side: the [`Proxy`] and the accept loop;
//! what its connections share (the policy, the log, the open sockets, the
//! refusal counts) is `shared.rs`. `connection.rs` serves one connection's requests,
//! `request.rs` parses a request head, `http.rs` carries plain-HTTP
//! exchanges, `relay.rs` tunnels, `logfile.rs` writes the log.

use std::collections::BTreeMap;
use std::net::{Shutdown, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Condvar, Mutex};

use super::connection::connection;
use super::logfile::LogFile;
use super::shared::{lock, respond, Shared, State};
use crate::egress::holders::Ends;
use crate::error::setup;
use crate::sandbox::{FdContent, ProxyNet, Rendered};

/// Connections served at once; more are answered 503 at once (a session
/// cannot make the shadow start threads without bound).
const MAX_OPEN: usize = 256;

/// Allowlist mode in the shadow: the log, the counters, and per attempt the
/// holder's channel and the serving threads.
pub(crate) struct Proxy {
    shared: Arc<Shared>,
    /// Our end of the current attempt's channel.
    channel: Option<OwnedFd>,
    /// The current attempt's listener (shut down to stop accepting).
    listener: Option<Arc<TcpListener>>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("log", &self.shared.log_path)
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// Create the session's log (its directory private to the user) before
    /// anything starts: a launch that cannot log does not run.
    pub(crate) fn prepare(
        net: &ProxyNet,
        broker: Option<Arc<crate::egress::broker::Broker>>,
        notices: Option<std::os::fd::OwnedFd>,
    ) -> anyhow::Result<Proxy> {
        let dir = net.log.parent().unwrap_or(Path::new("/"));
        let fail = |what: &str, p: &Path, e: std::io::Error| {
            setup(if net.policy.any_name {
                format!(
                    "the credential broker's proxy cannot {what} {}: {e}; its connection log must be writable (make $HOME writable, or set broker = off in {})",
                    p.display(),
                    crate::sys::paths::CONFIG_FILE
                )
            } else {
                format!(
                    "egress = allowlist: cannot {what} {}: {e}; the connection log must be writable (make $HOME writable, or set egress = open)",
                    p.display()
                )
            })
        };
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| fail("create", dir, e))?;
        }
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            // Not O_APPEND: lines are rewritten in place (logfile.rs).
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
                .open(&net.log)
                .map_err(|e| fail("create", &net.log, e))?
        };
        Ok(Proxy {
            shared: Arc::new(Shared {
                policy: net.policy.clone(),
                session: net.session.clone(),
                log_path: net.log.clone(),
                log: Mutex::new(LogFile::new(file)),
                state: Mutex::new(State::default()),
                idle: Condvar::new(),
                broker,
                notices,
            }),
            channel: None,
            listener: None,
        })
    }

    /// The command to spawn in place of `bwrap ARGS`: the allowlist holder,
    /// with the holder's end of a fresh channel (numbered `num` by
    /// [`crate::sandbox::render`]). The previous attempt's serving stops.
    pub(crate) fn command(
        &mut self,
        bwrap: &Path,
        rendered: &Rendered,
        num: RawFd,
    ) -> anyhow::Result<(Command, Ends)> {
        let theirs = self.channel()?;
        let me = std::env::current_exe()
            .map_err(|e| setup(format!("cannot find our own binary: {e}")))?;
        let mut c = Command::new(me);
        c.arg0("claude-sandbox-allowlist")
            .arg("__holder-allowlist")
            .arg(nix::unistd::getuid().as_raw().to_string())
            .arg(nix::unistd::getgid().as_raw().to_string())
            .arg(num.to_string())
            .args(&rendered.inward_args)
            .arg("--")
            .arg(bwrap)
            .args(&rendered.args);
        Ok((c, Ends::new(vec![(FdContent::ProxyChannel, theirs)])))
    }

    /// A fresh channel for this attempt's holder (its end returned; ours
    /// kept for [`Proxy::serve`]); the previous attempt's serving stops.
    pub(in crate::egress) fn channel(&mut self) -> anyhow::Result<OwnedFd> {
        self.stop_accepting();
        use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| setup(format!("cannot create the proxy's channel: {e}")))?;
        self.channel = Some(ours);
        Ok(theirs)
    }

    /// Once the holder runs: take the listener it sends and serve it. `false`
    /// when the holder ended without sending one (its message says why).
    pub(crate) fn serve(&mut self) -> bool {
        let Some(channel) = self.channel.take() else {
            return false;
        };
        let Some(fd) = crate::sys::fd::recv_fd(channel.as_raw_fd()) else {
            return false;
        };
        let listener = Arc::new(TcpListener::from(fd));
        self.listener = Some(listener.clone());
        let shared = self.shared.clone();
        std::thread::spawn(move || accept_loop(&listener, &shared));
        true
    }

    fn stop_accepting(&mut self) {
        if let Some(l) = self.listener.take() {
            // Wakes the accept loop (accept fails on a shut-down listener).
            unsafe { nix::libc::shutdown(l.as_raw_fd(), nix::libc::SHUT_RDWR) };
        }
    }

    /// The session ended: stop accepting, give open connections a moment,
    /// then cut them (each still logs its line), and print one line on
    /// stderr when anything was refused or the log could not be written.
    pub(crate) fn finish(mut self) {
        self.stop_accepting();
        let mut st = lock(&self.shared.state);
        st.stopping = true;
        st = self.shared.until_idle(st);
        for s in st.open.values() {
            let _ = s.client.shutdown(Shutdown::Both);
            if let Some(u) = &s.upstream {
                let _ = u.shutdown(Shutdown::Both);
            }
        }
        st = self.shared.until_idle(st);
        if let Some(line) = summary(&st.refused, self.shared.policy.any_name) {
            eprintln!("{line}");
        }
        drop(st);
        let log = lock(&self.shared.log);
        if let Some(e) = log.failed() {
            eprintln!("claude-sandbox: the egress log could not be written ({e}); requests were still decided by the allowlist");
        } else if log.written() == 0 {
            // A session that made no request (`claude --version`, an IDE's
            // probe) leaves no log behind.
            let _ = std::fs::remove_file(&self.shared.log_path);
        }
        if let Some(dir) = self.shared.log_path.parent() {
            prune(dir);
        }
    }
}

/// Keep the newest [`crate::egress::policy::KEEP_LOGS`] logs in `dir`.
fn prune(dir: &Path) {
    for old in crate::egress::policy::sessions_in(dir)
        .iter()
        .skip(crate::egress::policy::KEEP_LOGS)
    {
        let _ = std::fs::remove_file(dir.join(format!("{old}.jsonl")));
    }
}

/// The line printed at exit when anything was refused (`open`: by the
/// open jail's proxy, which refuses only what the jail would not route).
fn summary(refused: &BTreeMap<String, u64>, open: bool) -> Option<String> {
    let total: u64 = refused.values().sum();
    if total == 0 {
        return None;
    }
    let mut by: Vec<(&String, &u64)> = refused.iter().collect();
    by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let names: Vec<String> = by
        .iter()
        .take(3)
        .map(|(h, n)| {
            if **n > 1 {
                format!("{h} ×{n}")
            } else {
                h.to_string()
            }
        })
        .collect();
    let more = if by.len() > 3 {
        format!(" and {} more", by.len() - 3)
    } else {
        String::new()
    };
    Some(format!(
        "claude-sandbox: the egress {} refused {total} request{} ({}{more}); details: {} egress report --last",
        if open { "proxy" } else { "allowlist" },
        if total == 1 { "" } else { "s" },
        names.join(", "),
        crate::sys::paths::SELF_BIN
    ))
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    loop {
        match listener.accept() {
            Ok((client, _)) => {
                if lock(&shared.state).open.len() >= MAX_OPEN {
                    respond(
                        &client,
                        "503 Service Unavailable",
                        &format!("claude-sandbox: more than {MAX_OPEN} connections open at once through the egress proxy\n"),
                    );
                    continue;
                }
                let shared = shared.clone();
                std::thread::spawn(move || connection(client, &shared));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // ECONNABORTED and the like: the next one may work.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => continue,
            Err(_) => return, // shut down (the session ended)
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::egress::policy::{Decision, LogLine, Policy};
    use std::io::{Read, Write};
    use std::net::SocketAddr;
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    /// A proxy served in this process on 127.0.0.1:PORT, logging to a
    /// file of its own; `allow_ip` lets it reach this process's servers.
    pub(in crate::egress) struct Served {
        pub(in crate::egress) addr: SocketAddr,
        proxy: Proxy,
        pub(in crate::egress) log: std::path::PathBuf,
        _dir: TempDir,
    }

    struct TempDir(std::path::PathBuf);
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    pub(in crate::egress) fn served(rules: &[&str], allow_ip: &[std::net::Ipv4Addr]) -> Served {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "csb-proxy-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        ));
        let log = dir.join("egress/s.jsonl");
        let rules: Vec<_> = rules
            .iter()
            .map(|r| crate::egress::policy::DomainRule::parse(r).unwrap())
            .collect();
        let net = ProxyNet {
            listen: crate::egress::policy::PROXY_ADDR,
            policy: Policy::new(&rules, &[], Default::default(), allow_ip, Vec::new()),
            session: "s".into(),
            log: log.clone(),
            publish: Vec::new(),
        };
        let mut proxy = Proxy::prepare(&net, None, None).unwrap();
        let listener = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
        let addr = listener.local_addr().unwrap();
        proxy.listener = Some(listener.clone());
        let shared = proxy.shared.clone();
        std::thread::spawn(move || accept_loop(&listener, &shared));
        Served {
            addr,
            proxy,
            log,
            _dir: TempDir(dir),
        }
    }

    /// A server on loopback that reads `expect` bytes, then sends `reply` and closes.
    fn upstream(expect: usize, reply: &'static [u8]) -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            if let Ok((mut c, _)) = l.accept() {
                let mut got = vec![0u8; expect];
                let _ = c.read_exact(&mut got);
                let _ = c.write_all(reply);
            }
        });
        port
    }

    pub(in crate::egress) fn ask(addr: SocketAddr, req: &str, body: &[u8]) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(req.as_bytes()).unwrap();
        c.write_all(body).unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// End the session; its log's lines.
    pub(in crate::egress) fn finish(s: Served) -> Vec<LogLine> {
        let Served {
            proxy, log, _dir, ..
        } = s;
        proxy.finish();
        // A session without requests leaves no log.
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn a_session_without_requests_leaves_no_log_and_old_logs_go() {
        let s = served(&[], &[]);
        let dir = s.log.parent().unwrap().to_path_buf();
        for i in 0..crate::egress::policy::KEEP_LOGS + 3 {
            std::fs::write(
                dir.join(format!("20200101T0000{:02}Z-{i}.jsonl", i % 60)),
                "",
            )
            .unwrap();
        }
        std::fs::write(dir.join("notes.txt"), "").unwrap();
        let Served {
            proxy,
            log,
            _dir: keep,
            ..
        } = s;
        proxy.finish();
        assert!(!log.exists(), "an empty log stays");
        let left = crate::egress::policy::sessions_in(&dir);
        assert_eq!(left.len(), crate::egress::policy::KEEP_LOGS);
        assert!(dir.join("notes.txt").exists(), "only logs are pruned");
        drop(keep);
    }

    #[test]
    fn a_tunnel_counts_its_bytes_and_logs_one_line() {
        let lo = std::net::Ipv4Addr::LOCALHOST;
        let s = served(&[], &[lo]);
        let port = upstream(5, b"world!");
        let out = ask(
            s.addr,
            &format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n"),
            b"hello",
        );
        assert_eq!(out, "HTTP/1.1 200 Connection established\r\n\r\nworld!");
        let l = finish(s);
        assert_eq!(l.len(), 1, "{l:?}");
        assert_eq!(
            (l[0].decision, l[0].bytes_up, l[0].bytes_down),
            (Decision::Allowed, 5, 6)
        );
        assert_eq!(l[0].reason, "allow-ip = 127.0.0.1");
        assert_eq!(l[0].address.as_deref(), Some("127.0.0.1"));
    }

    #[test]
    fn refusals_say_which_line_would_allow_them() {
        let s = served(&["localhost"], &[]);
        let out = ask(
            s.addr,
            "GET http://denied.test/x HTTP/1.1\r\nHost: denied.test\r\n\r\n",
            b"",
        );
        assert!(out.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{out}");
        assert!(
            out.contains(
                "add this line to /etc/claude-sandbox.conf:\n    allow-domain = denied.test\n"
            ),
            "{out}"
        );
        // On the list, but it resolves to loopback: refused, allow-ip named.
        let out = ask(s.addr, "CONNECT localhost:443 HTTP/1.1\r\n\r\n", b"");
        assert!(out.starts_with("HTTP/1.1 403"), "{out}");
        assert!(out.contains("allow-ip = 127.0.0.1"), "{out}");
        let out = ask(s.addr, "GET /relative HTTP/1.1\r\nHost: x\r\n\r\n", b"");
        assert!(out.starts_with("HTTP/1.1 400"), "{out}");
        // A refusal's line is written after the client has its answer:
        // compare in the order of the hosts.
        let mut l = finish(s);
        l.sort_by(|a, b| a.host.cmp(&b.host));
        let got: Vec<(&str, Decision)> = l.iter().map(|x| (x.host.as_str(), x.decision)).collect();
        assert_eq!(
            got,
            [
                ("-", Decision::Refused),
                ("denied.test", Decision::Refused),
                ("localhost", Decision::Refused)
            ]
        );
        assert!(
            l[2].reason.contains("resolves to 127.0.0.1"),
            "{}",
            l[2].reason
        );
        assert!(l[0].reason.starts_with("bad request"), "{}", l[0].reason);
    }

    /// Read one request head (through its empty line) from `c`.
    pub(in crate::egress) fn head_from(c: &mut TcpStream) -> String {
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && c.read(&mut b).unwrap_or(0) == 1 {
            head.push(b[0]);
        }
        String::from_utf8_lossy(&head).into_owned()
    }

    #[test]
    fn plain_http_goes_out_in_origin_form() {
        let lo = std::net::Ipv4Addr::LOCALHOST;
        let s = served(&[], &[lo]);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let head = head_from(&mut c);
            c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .unwrap();
            head
        });
        let out = ask(
            s.addr,
            &format!("GET http://127.0.0.1:{port}/p?q HTTP/1.1\r\nHost: 127.0.0.1\r\nProxy-Connection: keep-alive\r\nConnection: close\r\n\r\n"),
            b"",
        );
        assert!(out.ends_with("\r\n\r\nok"), "{out}");
        let head = seen.join().unwrap();
        assert!(
            head.starts_with("GET /p?q HTTP/1.1\r\n") && head.contains("\r\nConnection: close\r\n"),
            "{head}"
        );
        assert!(!head.contains("Proxy-Connection"), "{head}");
        let l = finish(s);
        assert_eq!(l[0].method, "GET");
        assert_eq!(l[0].bytes_up as usize, head.len());
    }

    #[test]
    fn open_connections_are_capped_and_cut_at_the_end() {
        let s = served(&[], &[]);
        let held: Vec<TcpStream> = (0..MAX_OPEN)
            .map(|_| TcpStream::connect(s.addr).unwrap())
            .collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        while lock(&s.proxy.shared.state).open.len() < MAX_OPEN && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let out = ask(s.addr, "CONNECT a.test:443 HTTP/1.1\r\n\r\n", b"");
        assert!(out.starts_with("HTTP/1.1 503"), "{out}");
        // The session ends with them all open (sending nothing): cut, fast.
        let t = Instant::now();
        let l = finish(s);
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        assert!(
            l.is_empty(),
            "connections that sent nothing log nothing: {l:?}"
        );
        drop(held);
    }

    #[test]
    fn the_summary_names_the_most_refused() {
        assert_eq!(summary(&BTreeMap::new(), false), None);
        let m: BTreeMap<String, u64> = [("a.test", 1), ("b.test", 3), ("c.test", 1), ("d.test", 1)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let s = summary(&m, false).unwrap();
        assert!(summary(&m, true)
            .unwrap()
            .contains("the egress proxy refused 6"));
        assert!(
            s.contains("refused 6 requests (b.test ×3, a.test, c.test and 1 more)"),
            "{s}"
        );
        assert!(s.contains("egress report --last"), "{s}");
    }
}
