//! End-to-end: `publish-port` (issue #26 item 2) in the private site network
//! of `tests/testnet/lan.sh`, as root and as an unprivileged user, with the
//! open jail and in allowlist mode. The LAN's "devcontainer" namespace plays
//! the container: its loopback is where VS Code's port forwarding (or the
//! user's browser) would connect. Every packet stays in namespaces the test
//! created; every listener is on their loopback or their test addresses.
//!
//! A session (`claude shell SCRIPT`, the probe as the real binary) starts
//! `python3 -m http.server 3000` and the same on 8888 in the workspace,
//! which holds an `index.html` with a token of this run; the test fetches
//! from outside while the session waits, then lets it end. The positive
//! control of every "unreachable" is the same fetch answering with the
//! token when the port is published.

mod common;
use common::lan::*;
use common::tracked::Tracked;
use common::*;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The configuration of each mode, without `publish-port`.
const OPEN: &str = "";
const ALLOWLIST: &str = "egress = allowlist\n";

/// The published port and one the session also serves but nobody listed.
const PUBLISHED: u16 = 3000;
const UNLISTED: u16 = 8888;

/// Give the world this configuration (its /etc persists between runs).
fn configure(w: &World, conf: &str) {
    let r = w.root.display();
    std::fs::write(w.root.join("bin/conf"), conf).unwrap();
    let o = w.run_root_raw(&format!(
        "install -m 0644 {r}/bin/conf /etc/claude-sandbox.conf"
    ));
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `GET http://ADDR:PORT/` from namespace `ns`: the body, or why not.
fn fetch(ns: &str, addr: &str, port: u16) -> Result<String, String> {
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-c"])
        .arg(
            "import sys, urllib.request\n\
             try:\n    print('OK ' + urllib.request.urlopen(sys.argv[1], timeout=3).read().decode(), end='')\n\
             except Exception as e:\n    print('ERR %r' % (e,))",
        )
        .arg(format!("http://{addr}:{port}/"))
        .output()
        .unwrap();
    let out = stdout(&o);
    match out.strip_prefix("OK ") {
        Some(body) => Ok(body.to_string()),
        None => Err(format!("{}{}", out.trim(), stderr(&o))),
    }
}

/// A session serving the workspace on both ports until told to end.
struct Session {
    child: Child,
    ws: std::path::PathBuf,
    who: Who,
}

/// The script the session runs: two servers, a ready mark once both
/// listen, then wait (at most 60 s) for the end mark.
const SERVE: &str = "python3 -m http.server 3000 >/dev/null 2>&1 & a=$!\n\
     python3 -m http.server 8888 >/dev/null 2>&1 & b=$!\n\
     i=0; until listening 3000 8888 || [ $i -ge 200 ]; do sleep 0.05; i=$((i+1)); done\n\
     listening 3000 8888 || { echo 'the servers did not start' >&2; kill $a $b; exit 3; }\n\
     touch .csb-ready\n\
     i=0; while [ ! -e .csb-end ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n\
     kill $a $b; wait";

/// A shell function for the session's scripts: `listening PORT…` succeeds
/// once every port accepts on the sandbox's own loopback.
const LISTENING: &str = "listening() { python3 -c 'import socket, sys; [socket.create_connection((\"127.0.0.1\", int(p)), 1).close() for p in sys.argv[1:]]' \"$@\" 2>/dev/null; }\n";

impl Session {
    /// Start it as `who` in the LAN's "devcontainer" namespace and wait
    /// until both servers listen inside.
    fn start(w: &World, lan: &Lan, t: &Tracked, who: Who, token: &str) -> Session {
        let ws = w.workspace(who);
        for f in [".csb-ready", ".csb-end"] {
            let _ = std::fs::remove_file(ws.join(f));
        }
        std::fs::write(ws.join("index.html"), token).unwrap();
        let script = format!("{LISTENING}{SERVE}");
        let cmd = w.command(who, &[], &["claude", "shell", &script]);
        let child = t
            .wrap(&in_netns(&lan.host, &cmd))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut s = Session { child, ws, who };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !s.ws.join(".csb-ready").exists() {
            if let Ok(Some(_)) = s.child.try_wait() {
                let o = s.finish();
                panic!(
                    "{who:?}: the session ended before its servers listened: {:?}\n{}{}",
                    o.status,
                    stdout(&o),
                    stderr(&o)
                );
            }
            assert!(Instant::now() < deadline, "{who:?}: no ready mark in 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }

    /// `kill -9` of the shadow (every exec of the wrapper chain ends in it).
    fn kill_shadow(mut self) {
        self.child.kill().unwrap();
        let _ = self.child.wait();
    }

    /// Let the session end; its output (killed after 20 s).
    fn finish(mut self) -> Output {
        std::fs::write(self.ws.join(".csb-end"), "").unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let o = self.child.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "{:?}: the session failed: {:?}\n{}{}",
            self.who,
            o.status,
            stdout(&o),
            stderr(&o)
        );
        o
    }
}

/// TCP listeners on `port` in namespace `ns` (`ss` lines).
fn listeners(ns: &str, port: u16) -> String {
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "ss", "-Hltn"])
        .arg(format!("sport = :{port}"))
        .output()
        .unwrap();
    stdout(&o)
}

/// After a session: nothing it started runs, and nothing listens on the
/// published port any more.
fn assert_all_gone(lan: &Lan, t: &Tracked, who: Who) {
    let left = t.leftovers_after(Duration::from_secs(3));
    assert!(left.is_empty(), "{who:?}: left running: {left:?}");
    assert_eq!(listeners(&lan.host, PUBLISHED), "", "{who:?}");
}

/// One mode: published, the page answers on the host's loopback and
/// nothing else does; not published, nothing answers.
fn publish_matrix(name: &str, base: &str) {
    let lan = Lan::up();
    let w = jail_world(name, base);
    for who in BOTH {
        let t = Tracked::new("ports");
        let token = format!("csb-page-{name}-{who:?}-{}", std::process::id());
        configure(&w, &format!("{base}publish-port = {PUBLISHED}\n"));
        let s = Session::start(&w, &lan, &t, who, &token);
        let page = fetch(&lan.host, "127.0.0.1", PUBLISHED);
        let unlisted = fetch(&lan.host, "127.0.0.1", UNLISTED);
        // The container's other address, and another machine on the site
        // network: the port is published on loopback only.
        let by_address = fetch(&lan.host, "10.77.0.2", PUBLISHED);
        let from_lan = fetch(&lan.lan, "10.77.0.2", PUBLISHED);
        let held = listeners(&lan.host, PUBLISHED);
        s.finish();
        assert_eq!(page.as_deref(), Ok(token.as_str()), "{who:?}: published");
        assert!(
            unlisted.is_err(),
            "{who:?}: {UNLISTED} answered: {unlisted:?}"
        );
        assert!(by_address.is_err(), "{who:?}: {by_address:?}");
        assert!(from_lan.is_err(), "{who:?}: from the LAN: {from_lan:?}");
        assert!(
            held.contains(&format!("127.0.0.1:{PUBLISHED}")) && held.lines().count() == 1,
            "{who:?}: the host side must listen on 127.0.0.1 only: {held:?}"
        );
        assert_all_gone(&lan, &t, who);

        // Not published: the same session, and nothing answers.
        configure(&w, base);
        let s = Session::start(&w, &lan, &t, who, &token);
        let page = fetch(&lan.host, "127.0.0.1", PUBLISHED);
        let unlisted = fetch(&lan.host, "127.0.0.1", UNLISTED);
        s.finish();
        assert!(page.is_err(), "{who:?}: unpublished {PUBLISHED}: {page:?}");
        assert!(unlisted.is_err(), "{who:?}: {unlisted:?}");
        assert_all_gone(&lan, &t, who);
    }
}

#[test]
fn open_jail_publishes_exactly_the_listed_port_on_host_loopback() {
    if !require("ports_open") {
        return;
    }
    publish_matrix("portsopen", OPEN);
}

#[test]
fn allowlist_mode_publishes_exactly_the_listed_port_on_host_loopback() {
    if !require("ports_allowlist") {
        return;
    }
    publish_matrix("portsallow", ALLOWLIST);
}

/// The session's egress logs (allowlist mode) under a home.
fn egress_logs(w: &World, who: Who) -> usize {
    std::fs::read_dir(w.home(who).join(".local/state/claude-sandbox/egress"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn a_port_taken_on_the_host_stops_the_launch_before_anything_starts() {
    if !require("ports_taken") {
        return;
    }
    let mut lan = Lan::up();
    let h = lan.host.clone();
    let taken = format!("127.0.0.1:{PUBLISHED}");
    lan.listen(&h, &["serve", &taken, "HOSTSERVICE", LISTEN_SECS]);
    lan.wait_listening(&h, &[&taken], &[]);
    for (name, base) in [("takenopen", OPEN), ("takenallow", ALLOWLIST)] {
        let w = jail_world(name, &format!("{base}publish-port = 8888, {PUBLISHED}\n"));
        for who in BOTH {
            let t = Tracked::new("taken");
            let ran = w.workspace(who).join("ran");
            let logs = egress_logs(&w, who);
            let cmd = w.command(who, &[], &["claude", "shell", "touch ran"]);
            let o = t
                .wrap(&in_netns(&h, &cmd))
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(125), "{name} {who:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{name} {who:?}: {err}");
            assert!(
                err.contains(&format!(
                    "publish-port = {PUBLISHED} in /etc/claude-sandbox.conf: cannot listen on 127.0.0.1:{PUBLISHED}"
                )) && err.contains("already listens there"),
                "{name} {who:?}: {err}"
            );
            assert!(!ran.exists(), "{name} {who:?}: the session ran");
            assert_eq!(egress_logs(&w, who), logs, "{name} {who:?}: a log was made");
            let left = t.leftovers_after(Duration::from_secs(3));
            assert!(left.is_empty(), "{name} {who:?}: left running: {left:?}");
            // Nothing half-done: 8888, checked first, is not held either,
            // and the host's service still answers.
            assert_eq!(listeners(&h, UNLISTED), "", "{name} {who:?}");
            let o = Command::new("ip")
                .args(["netns", "exec", &h, "python3"])
                .arg(testnet("netprobe.py"))
                .args(["connect", &taken])
                .output()
                .unwrap();
            assert!(
                stdout(&o).contains(&format!("{taken} REACHED HOSTSERVICE")),
                "{name} {who:?}: {}",
                stdout(&o)
            );
        }
    }
}

/// A listener on `[::]:PORT` for IPv6 alone (`IPV6_V6ONLY`, which
/// netprobe's dual-stack `[::]` is not) in namespace `ns`, for `LISTEN_SECS`.
fn v6only_wildcard(ns: &str, port: u16) -> Child {
    Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-c"])
        .arg(format!(
            "import socket, time\n\
             s = socket.socket(socket.AF_INET6)\n\
             s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
             s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)\n\
             s.bind(('::', {port}))\n\
             s.listen(4)\n\
             time.sleep({LISTEN_SECS})"
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Issue #45: a host service on `[::1]` only (and its other spelling, the
/// IPv6 wildcard alone) holds the port too: host clients of
/// `localhost:PORT` may reach it or the session's server, whichever their
/// resolver tries first. Every mode and user stops before anything starts,
/// naming the port and the address. The positive control: the service
/// gone, the same configuration publishes and the page answers.
#[test]
fn a_host_service_on_ipv6_loopback_holds_the_port_too() {
    if !require("ports_taken_v6") {
        return;
    }
    let mut lan = Lan::up();
    let h = lan.host.clone();
    let v6 = format!("[::1]:{PUBLISHED}");
    let modes = [("v6open", OPEN), ("v6allow", ALLOWLIST)];
    let worlds: Vec<(&str, World)> = modes
        .iter()
        .map(|(name, base)| {
            let conf = format!("{base}publish-port = {PUBLISHED}\n");
            (*name, jail_world(name, &conf))
        })
        .collect();
    for holder in ["loopback", "wildcard"] {
        match holder {
            "loopback" => lan.listen(&h, &["serve", &v6, "HOSTSERVICE", LISTEN_SECS]),
            _ => lan.listeners.push(v6only_wildcard(&h, PUBLISHED)),
        }
        let shown = format!("[::]:{PUBLISHED}");
        lan.wait_listening(&h, &[if holder == "loopback" { &v6 } else { &shown }], &[]);
        for (name, w) in &worlds {
            for who in BOTH {
                let t = Tracked::new("takenv6");
                let ran = w.workspace(who).join("ran");
                let cmd = w.command(who, &[], &["claude", "shell", "touch ran"]);
                let o = t
                    .wrap(&in_netns(&h, &cmd))
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                let err = stderr(&o);
                let at = format!("{name} {who:?} {holder}");
                assert_eq!(o.status.code(), Some(125), "{at}: {err}");
                assert_eq!(err.lines().count(), 1, "{at}: {err}");
                assert!(
                    err.contains(&format!(
                        "publish-port = {PUBLISHED} in /etc/claude-sandbox.conf: something on this machine already listens on {v6}"
                    )),
                    "{at}: {err}"
                );
                assert!(!ran.exists(), "{at}: the session ran");
                let left = t.leftovers_after(Duration::from_secs(3));
                assert!(left.is_empty(), "{at}: left running: {left:?}");
            }
        }
        // The host's service is untouched, and goes.
        let mut service = lan.listeners.pop().unwrap();
        let _ = service.kill();
        let _ = service.wait();
    }
    // The positive control: nothing holds the port, it publishes.
    for (name, w) in &worlds {
        for who in BOTH {
            let t = Tracked::new("freev6");
            let token = format!("csb-page-{name}-{who:?}-{}", std::process::id());
            let s = Session::start(w, &lan, &t, who, &token);
            let page = fetch(&lan.host, "127.0.0.1", PUBLISHED);
            s.finish();
            assert_eq!(page.as_deref(), Ok(token.as_str()), "{name} {who:?}");
            assert_all_gone(&lan, &t, who);
        }
    }
}

/// The hostile session: with a port published, it tries to reach the host
/// through it (the host's side of the port is the forwarder, which would
/// accept), the host's own services on loopback and through the gateway,
/// and the host's LAN address. Every one must fail; a host listener on
/// the container's LAN address, reached from outside, is the control that
/// these targets exist.
#[test]
fn a_published_port_opens_no_way_out_of_the_sandbox() {
    if !require("ports_hostile") {
        return;
    }
    let mut lan = Lan::up();
    let h = lan.host.clone();
    lan.listen(
        &h,
        &["serve", "127.0.0.1:9090", "HOSTLOOPBACK", LISTEN_SECS],
    );
    lan.listen(&h, &["serve", "10.77.0.2:9092", "HOSTLAN", LISTEN_SECS]);
    lan.wait_listening(&h, &["127.0.0.1:9090", "10.77.0.2:9092"], &[]);
    let targets = [
        format!("127.0.0.1:{PUBLISHED}"),
        format!("10.77.0.2:{PUBLISHED}"),
        format!("10.77.0.1:{PUBLISHED}"),
        "127.0.0.1:9090".to_string(),
        "10.77.0.1:9090".to_string(),
        "10.77.0.2:9092".to_string(),
    ];
    let control = Command::new("ip")
        .args(["netns", "exec", &h, "python3"])
        .arg(testnet("netprobe.py"))
        .args(["connect", "127.0.0.1:9090", "10.77.0.2:9092"])
        .output()
        .unwrap();
    for t in ["127.0.0.1:9090 REACHED", "10.77.0.2:9092 REACHED"] {
        assert!(
            stdout(&control).contains(t),
            "control: {}",
            stdout(&control)
        );
    }
    for (name, base) in [("hostileopen", OPEN), ("hostileallow", ALLOWLIST)] {
        let w = jail_world(name, &format!("{base}publish-port = {PUBLISHED}\n"));
        for who in BOTH {
            let t = Tracked::new("hostile");
            let mut script = format!(
                "python3 {}/bin/netprobe.py connect {}",
                w.root.display(),
                targets.join(" ")
            );
            if base == ALLOWLIST {
                // The one way out, the proxy, refuses the host's loopback.
                script.push_str(&format!("\n{PROXY_TO_PUBLISHED}"));
            }
            let cmd = w.command(who, &[], &["claude", "shell", &script]);
            let o = t
                .wrap(&in_netns(&h, &cmd))
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let out = stdout(&o);
            assert!(o.status.success(), "{name} {who:?}: {}", stderr(&o));
            for target in &targets {
                assert!(
                    out.contains(&format!("{target} BLOCKED")),
                    "{name} {who:?}: {target} not blocked:\n{out}"
                );
            }
            if base == ALLOWLIST {
                for host in ["127.0.0.1", "localhost"] {
                    assert!(
                        out.contains(&format!("PROXY {host}:{PUBLISHED} HTTP/1.1 403")),
                        "{name} {who:?}: the proxy did not refuse {host}:{PUBLISHED}:\n{out}"
                    );
                }
            }
            assert_all_gone(&lan, &t, who);
        }
        // Nor can a port be published over a host service: 9090 is taken.
        configure(&w, &format!("{base}publish-port = {PUBLISHED}, 9090\n"));
        let o = in_netns(&h, &w.command(Who::User, &[], &["claude", "shell", "true"]))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(125), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains("publish-port = 9090"), "{}", stderr(&o));
    }
}

/// Inside, in allowlist mode: `CONNECT` to the published port on the
/// host's loopback through the proxy; one `PROXY HOST:PORT STATUS` line each.
const PROXY_TO_PUBLISHED: &str = "for h in 127.0.0.1 localhost; do python3 -c 'import socket, sys\nt = sys.argv[1]\ns = socket.create_connection((\"127.0.0.1\", 3128), 3)\ns.sendall((\"CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n\" % (t, t)).encode())\nprint(\"PROXY\", t, s.recv(200).decode().splitlines()[0])' $h:3000; done";

/// `kill -9` of the shadow while a published port is served: nothing is
/// left running (the allowlist holder's connector included) and the port
/// is free again on the host.
#[test]
fn kill_9_of_the_shadow_frees_the_published_port() {
    if !require("ports_kill9") {
        return;
    }
    let lan = Lan::up();
    for (name, base) in [("kill9open", OPEN), ("kill9allow", ALLOWLIST)] {
        let w = jail_world(name, &format!("{base}publish-port = {PUBLISHED}\n"));
        for who in BOTH {
            let t = Tracked::new("kill9");
            let token = format!("csb-kill9-{name}-{who:?}");
            let s = Session::start(&w, &lan, &t, who, &token);
            let page = fetch(&lan.host, "127.0.0.1", PUBLISHED);
            s.kill_shadow();
            assert_eq!(page.as_deref(), Ok(token.as_str()), "{name} {who:?}");
            assert_all_gone(&lan, &t, who);
        }
    }
}

/// `verify` inside a session names the published ports, and which of them
/// a server listens on.
#[test]
fn verify_reports_the_published_ports() {
    if !require("ports_verify") {
        return;
    }
    let lan = Lan::up();
    let w = jail_world("portsverify", "publish-port = 3000, 8888\n");
    let script = format!(
        "{LISTENING}python3 -m http.server 3000 >/dev/null 2>&1 & a=$!\n\
         i=0; until listening 3000 || [ $i -ge 200 ]; do sleep 0.05; i=$((i+1)); done\n\
         /usr/libexec/claude-sandbox/claude-sandbox verify --json; kill $a"
    );
    for who in BOTH {
        let o = in_netns(
            &lan.host,
            &w.command(who, &[], &["claude", "shell", &script]),
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
        let checks: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| {
            panic!(
                "{who:?}: verify --json ({e}):\n{}{}",
                stdout(&o),
                stderr(&o)
            )
        });
        let c = checks
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "published-ports")
            .unwrap_or_else(|| panic!("no published-ports check: {checks}"));
        assert_eq!(c["status"], "PASS", "{who:?}: {c}");
        let d = c["detail"].as_str().unwrap();
        assert!(
            d.contains("3000 (a server listens here), 8888 (nothing listens here yet)"),
            "{who:?}: {d}"
        );
    }
}
