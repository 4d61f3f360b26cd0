//! End-to-end: the egress jail (issue #3) on a private site network built by
//! `tests/testnet/lan.sh` in namespaces this test creates. Every packet
//! stays between those namespaces.

mod common;
use common::*;

use common::lan::*;
use std::process::Command;

/// Every destination of acceptance line 1, with what it answers.
const INTERNET: &str = "203.0.113.10:8080";
const BLOCKED: &[&str] = &[
    "10.77.0.1:8080",       // the gateway's own service
    "10.77.0.9:8080",       // LAN host on the connected subnet
    "172.16.5.9:8080",      // RFC1918
    "192.168.5.9:8080",     // RFC1918
    "100.64.5.9:8080",      // CGNAT
    "169.254.169.254:8080", // metadata
    "198.18.0.1:8080",      // IANA benchmarking range (corporate, container networks)
    "240.0.0.1:8080",       // IANA reserved (class E)
    "192.0.0.8:8080",       // IANA protocol assignments
    "[fd77::1]:8080",       // IPv6
    "127.0.0.1:9090",       // the devcontainer's own loopback service
    "10.77.0.1:9090",       // that service through the gateway address
];

/// Root lines that give the world's mount namespace this resolv.conf.
fn resolv(nameserver: &str) -> String {
    format!("rm -f /etc/resolv.conf && echo 'nameserver {nameserver}' > /etc/resolv.conf\n")
}

/// Run netprobe inside the sandbox in the LAN's host namespace.
fn probe_net(
    w: &World,
    lan: &Lan,
    who: Who,
    setup: &str,
    env: &[(&str, &str)],
    netprobe_args: &str,
) -> std::process::Output {
    let script = format!("{} {netprobe_args}", netprobe_cmd(w));
    lan.shell(w, who, setup, env, &script)
}

fn start_services(lan: &mut Lan) {
    let (l, h) = (lan.lan.clone(), lan.host.clone());
    lan.listen(&l, &["serve", "[::]:8080", "LAN", LISTEN_SECS]);
    lan.listen(
        &h,
        &["serve", "127.0.0.1:9090", "HOSTLOOPBACK", LISTEN_SECS],
    );
    lan.wait_listening(&l, &["*:8080"], &[]);
    lan.wait_listening(&h, &["127.0.0.1:9090"], &[]);
}

fn reached(out: &str, target: &str) -> bool {
    out.lines()
        .any(|l| l.starts_with(&format!("{target} REACHED")))
}

/// netprobe tried `target` and it did not answer.
fn assert_blocked(out: &str, target: &str, who: Who) {
    assert!(!reached(out, target), "{who:?}: reached {target}: {out}");
    assert!(
        out.contains(&format!("{target} BLOCKED")),
        "{who:?}: {target} not tried: {out}"
    );
}

#[test]
fn jail_reaches_the_internet_and_nothing_internal() {
    if !require("jail_matrix") {
        return;
    }
    let mut lan = Lan::up();
    start_services(&mut lan);
    let w = jail_world("jail", "");
    let all: Vec<&str> = std::iter::once(INTERNET)
        .chain(BLOCKED.iter().copied())
        .collect();
    // Control: outside the sandbox, in the same namespace, everything answers —
    // so each BLOCKED below is the jail's doing. (The loopback service "through
    // the gateway address" is a path pasta would open by default; there is no
    // pasta in the control.)
    let control_targets: Vec<&str> = all
        .iter()
        .copied()
        .filter(|t| *t != "10.77.0.1:9090")
        .collect();
    let mut args = vec!["connect"];
    args.extend(&control_targets);
    let control = lan.probe_outside(&args);
    for t in &control_targets {
        assert!(
            reached(&stdout(&control), t),
            "control could not reach {t}: {}",
            stdout(&control)
        );
    }
    let setup = resolv("127.0.0.53");
    for who in BOTH {
        let o = probe_net(
            &w,
            &lan,
            who,
            &setup,
            &[],
            &format!("connect {}", all.join(" ")),
        );
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        let out = stdout(&o);
        assert!(
            reached(&out, INTERNET),
            "{who:?}: internet unreachable: {out}"
        );
        for t in BLOCKED {
            assert_blocked(&out, t, who);
        }
    }
}

#[test]
fn allow_ip_opens_exactly_that_host() {
    if !require("jail_allow_ip") {
        return;
    }
    let mut lan = Lan::up();
    start_services(&mut lan);
    let w = jail_world("jailallow", "allow-ip = 10.77.0.9\n");
    let all: Vec<&str> = std::iter::once(INTERNET)
        .chain(BLOCKED.iter().copied())
        .collect();
    for who in BOTH {
        let o = probe_net(
            &w,
            &lan,
            who,
            &resolv("127.0.0.53"),
            &[],
            &format!("connect {}", all.join(" ")),
        );
        let out = stdout(&o);
        assert!(
            reached(&out, "10.77.0.9:8080"),
            "{who:?}: allow-ip host unreachable: {out}"
        );
        assert!(reached(&out, INTERNET), "{who:?}: {out}");
        for t in BLOCKED.iter().filter(|t| **t != "10.77.0.9:8080") {
            assert!(
                !reached(&out, t),
                "{who:?}: allow-ip 10.77.0.9 also opened {t}: {out}"
            );
        }
    }
}

#[test]
fn dns_works_with_a_stub_resolver_and_goes_to_a_routable_one() {
    if !require("jail_dns") {
        return;
    }
    let mut lan = Lan::up();
    let (l, h) = (lan.lan.clone(), lan.host.clone());
    // A stub resolver on the devcontainer's loopback (like systemd-resolved),
    // and one on the gateway (internal, so reached through the forwarder, see
    // `internal_resolvers_answer_dns_and_open_nothing_else`); both answer
    // 203.0.113.10, so which one answered is shown by which one is running.
    let w = jail_world("jaildns", "");
    let resolve = |lan: &Lan, who: Who, ns: &str| {
        let o = probe_net(&w, lan, who, &resolv(ns), &[], "resolve example.test");
        stdout(&o).trim().to_string()
    };
    // Only the stub runs: a loopback-only resolv.conf resolves (through the
    // jail's forwarder to the host's stub); one naming 10.77.0.1 does not.
    lan.listen(&h, &["dns", "127.0.0.53", LISTEN_SECS]);
    lan.wait_listening(&h, &[], &["127.0.0.53:53"]);
    for who in BOTH {
        assert_eq!(
            resolve(&lan, who, "127.0.0.53"),
            "203.0.113.10",
            "{who:?} via the stub"
        );
        assert!(
            resolve(&lan, who, "10.77.0.1").starts_with("NORESOLVE"),
            "{who:?}: answered without the routable resolver"
        );
    }
    // Only the routable one runs: queries go to it, and the stub path is dead.
    for c in &mut lan.listeners {
        let _ = c.kill();
        let _ = c.wait();
    }
    lan.listen(&l, &["dns", "10.77.0.1", LISTEN_SECS]);
    lan.wait_listening(&l, &[], &["10.77.0.1:53"]);
    for who in BOTH {
        assert_eq!(
            resolve(&lan, who, "10.77.0.1"),
            "203.0.113.10",
            "{who:?} via 10.77.0.1"
        );
        assert!(
            resolve(&lan, who, "127.0.0.53").starts_with("NORESOLVE"),
            "{who:?}: the stub path answered with no stub running"
        );
    }
}

/// With the gateway punched open (`allow-ip`), the gateway address must
/// still not lead to the devcontainer's own loopback services: pasta maps the
/// gateway to host loopback unless told `--no-map-gw`. (Otherwise the gateway
/// is blackholed and this path is untestable.)
#[test]
fn host_loopback_unreachable_through_a_punched_gateway() {
    if !require("jail_map_gw") {
        return;
    }
    let mut lan = Lan::up();
    start_services(&mut lan);
    let w = jail_world("jailmapgw", "allow-ip = 10.77.0.1\n");
    for who in BOTH {
        let o = probe_net(
            &w,
            &lan,
            who,
            &resolv("127.0.0.53"),
            &[],
            &format!("connect {INTERNET} 10.77.0.1:9090 127.0.0.1:9090"),
        );
        let out = stdout(&o);
        assert!(reached(&out, INTERNET), "{who:?}: {out}{}", stderr(&o));
        for t in ["10.77.0.1:9090", "127.0.0.1:9090"] {
            assert_blocked(&out, t, who);
        }
    }
}

/// A resolver on an internal address — the gateway (home routers), or the
/// metadata server (Google Cloud's resolver is 169.254.169.254) — answers
/// through pasta's DNS forwarder, and none of its other ports opens. A public
/// resolver is used directly, through the host's own resolv.conf.
#[test]
fn internal_resolvers_answer_dns_and_open_nothing_else() {
    if !require("jail_internal_resolver") {
        return;
    }
    let mut lan = Lan::up();
    start_services(&mut lan);
    let l = lan.lan.clone();
    for ns in ["10.77.0.1", "169.254.169.254", "203.0.113.10"] {
        lan.listen(&l, &["dns", ns, LISTEN_SECS]);
    }
    lan.wait_listening(
        &l,
        &[],
        &["10.77.0.1:53", "169.254.169.254:53", "203.0.113.10:53"],
    );
    let w = jail_world("jailresolver", "");
    let netprobe = netprobe_cmd(&w);
    for who in BOTH {
        for ns in ["10.77.0.1", "169.254.169.254"] {
            let script = format!(
                "grep ^nameserver /etc/resolv.conf; {netprobe} resolve example.test; \
                 {netprobe} connect {INTERNET} {ns}:8080 169.254.0.53:8080"
            );
            let o = lan.shell(&w, who, &resolv(ns), &[], &script);
            let out = stdout(&o);
            assert!(
                out.starts_with("nameserver 169.254.0.53\n203.0.113.10\n"),
                "{who:?} resolver {ns}: not answered through the forwarder: {out}{}",
                stderr(&o)
            );
            assert!(!out.contains(&format!("nameserver {ns}")), "{who:?}: {out}");
            assert!(reached(&out, INTERNET), "{who:?} resolver {ns}: {out}");
            assert_blocked(&out, &format!("{ns}:8080"), who);
            // The forwarder's address passes DNS and nothing else.
            assert_blocked(&out, "169.254.0.53:8080", who);
        }
        let script = format!("grep ^nameserver /etc/resolv.conf; {netprobe} resolve example.test");
        let o = lan.shell(&w, who, &resolv("203.0.113.10"), &[], &script);
        assert_eq!(
            stdout(&o),
            "nameserver 203.0.113.10\n203.0.113.10\n",
            "{who:?}: public resolver: {}",
            stderr(&o)
        );
    }
}

#[test]
fn routes_cannot_be_changed_from_inside() {
    if !require("jail_eperm") {
        return;
    }
    let lan = Lan::up();
    let w = jail_world("jaileperm", "");
    for who in BOTH {
        let script = "ip route | grep -q 'blackhole 10.0.0.0/8' && echo JAILED; \
                      for c in 'route add 1.2.3.4/32 dev lo' 'route del default' 'route del blackhole 10.0.0.0/8' 'link add x0 type dummy'; do \
                      ip $c 2>&1 | head -1; done";
        let o = lan.shell(&w, who, &resolv("127.0.0.53"), &[], script);
        let out = stdout(&o);
        assert!(
            out.starts_with("JAILED\n"),
            "{who:?}: the jail was not on: {out}"
        );
        assert_eq!(
            out.matches("Operation not permitted").count(),
            4,
            "{who:?}: {out}{}",
            stderr(&o)
        );
    }
}

#[test]
fn jail_off_by_config_or_env_and_env_wins() {
    if !require("jail_switch") {
        return;
    }
    let lan = Lan::up();
    // The jail shows as a blackhole route; without it the host's table is seen.
    let jailed = |w: &World, env: &[(&str, &str)]| -> bool {
        let o = lan.shell(w, Who::User, &resolv("127.0.0.53"), env, "ip route");
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o).contains("blackhole 10.0.0.0/8")
    };
    let off = jail_world("jailoff", "egress-jail = 0\n");
    assert!(!jailed(&off, &[]), "config egress-jail = 0");
    assert!(
        jailed(&off, &[("CLAUDE_SANDBOX_EGRESS_JAIL", "1")]),
        "env =1 wins over config = 0"
    );
    // Turning the jail off from the environment weakens the sandbox: only
    // where the file allows it (refused otherwise; tests/e2e_shadow.rs).
    let on = jail_world("jailon", "allow-env-overrides\n");
    assert!(jailed(&on, &[]), "on by default");
    assert!(
        !jailed(&on, &[("CLAUDE_SANDBOX_EGRESS_JAIL", "0")]),
        "env =0 with allow-env-overrides"
    );
}

#[test]
fn each_missing_prerequisite_refuses_before_the_probe_runs() {
    if !require("jail_prereqs") {
        return;
    }
    let lan = Lan::up();
    let w = World::new("jailprereq");
    w.use_mutation_binary();
    w.install_by_hand(&w.root.join("bin/probe"), "");
    netprobe_in(&w);
    let r = w.root.display().to_string();
    std::fs::write(w.root.join("bin/not-exec"), "").unwrap();
    type Case<'a> = (String, Vec<(&'a str, &'a str)>, &'a str, &'a str);
    let cases: Vec<Case> = vec![
        (
            format!("mount --bind {r}/bin/not-exec /usr/bin/pasta"),
            vec![],
            "pasta is not installed",
            "apt-get install passt",
        ),
        (
            "mount -t tmpfs tmpfs /dev/net".into(),
            vec![],
            "/dev/net/tun does not exist",
            "--device=/dev/net/tun",
        ),
        (
            String::new(),
            vec![("CLAUDE_SANDBOX_TEST_MUTATION", "pasta-attach-fails")],
            "pasta could not attach",
            "check that /dev/net/tun works",
        ),
        (
            String::new(),
            vec![("CLAUDE_SANDBOX_TEST_MUTATION", "route-step-fails")],
            "route step failed",
            "claude-sandbox doctor",
        ),
    ];
    for (setup, env, what, fix) in &cases {
        for who in BOTH {
            let setup = format!("{}{setup}\n", resolv("127.0.0.53"));
            let cmd = lan.command(&w, who, &setup, env, &["claude", "report"]);
            let t = common::tracked::Tracked::new("prereq");
            let o = t.wrap(&cmd).output().unwrap();
            let left = t.leftovers_after(std::time::Duration::from_secs(1));
            assert!(
                left.is_empty(),
                "{who:?} {what}: still running after the refusal:\n{}",
                left.join("\n")
            );
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(125), "{who:?} {what}: {err}");
            assert!(stdout(&o).is_empty(), "{who:?} {what}: the probe ran");
            assert_eq!(err.lines().count(), 1, "{who:?}: one line: {err}");
            assert!(err.contains(what), "{who:?}: {err}");
            assert!(
                err.contains(fix),
                "{who:?} {what}: the fix ({fix}) is not named: {err}"
            );
            assert!(
                err.contains("egress-jail = 0 in /etc/claude-sandbox.conf"),
                "{who:?}: no escape hatch named: {err}"
            );
        }
    }
}

/// The forwarder's address answers DNS and nothing else, even when the
/// host's resolver is a loopback stub and host services listen on the stub's
/// address or on every address (pasta must not map other ports through it).
#[test]
fn the_dns_forwarder_passes_dns_only() {
    if !require("jail_forwarder_dns_only") {
        return;
    }
    let mut lan = Lan::up();
    let h = lan.host.clone();
    lan.listen(&h, &["dns", "127.0.0.53", LISTEN_SECS]);
    lan.listen(&h, &["serve", "0.0.0.0:9191", "WILDCARD", LISTEN_SECS]);
    lan.listen(&h, &["serve", "127.0.0.53:9192", "STUBADDR", LISTEN_SECS]);
    lan.wait_listening(&h, &["0.0.0.0:9191", "127.0.0.53:9192"], &["127.0.0.53:53"]);
    // Control: on the host, both services answer.
    let control = lan.probe_outside(&["connect", "127.0.0.1:9191", "127.0.0.53:9192"]);
    assert!(
        reached(&stdout(&control), "127.0.0.1:9191")
            && reached(&stdout(&control), "127.0.0.53:9192"),
        "control: {}",
        stdout(&control)
    );
    let w = jail_world("jailfwd", "");
    for who in BOTH {
        let o = probe_net(
            &w,
            &lan,
            who,
            &resolv("127.0.0.53"),
            &[],
            "connect 169.254.0.53:9191 169.254.0.53:9192 169.254.0.53:80",
        );
        let out = stdout(&o);
        for t in ["169.254.0.53:9191", "169.254.0.53:9192", "169.254.0.53:80"] {
            assert_blocked(&out, t, who);
        }
        let o = probe_net(
            &w,
            &lan,
            who,
            &resolv("127.0.0.53"),
            &[],
            "resolve example.test",
        );
        assert_eq!(
            stdout(&o).trim(),
            "203.0.113.10",
            "{who:?}: DNS through the forwarder"
        );
    }
}

/// The forwarder's address, which the site network routes (tests/testnet/lan.sh).
const FORWARDER: &str = "169.254.0.53";

/// Listeners at the forwarder's address in the site network, as a
/// link-local service a real host can route to: TCP 80, 8080 and 53, each
/// sending its name, and an impostor resolver there that answers
/// `example.test` with the LAN host. The host's own resolver (the gateway)
/// answers 203.0.113.10. Checked from the host's namespace, where pasta
/// runs: every listener answers there.
fn link_local_services(lan: &mut Lan) {
    let l = lan.lan.clone();
    for port in [80, 8080, 53] {
        let token = format!("LINKLOCAL-{port}");
        lan.listen(
            &l,
            &["serve", &format!("{FORWARDER}:{port}"), &token, LISTEN_SECS],
        );
    }
    lan.listen(&l, &["dns", "10.77.0.1", LISTEN_SECS]);
    lan.listen(&l, &["dns", FORWARDER, "120", "example.test=10.77.0.9"]);
    let tcp: Vec<String> = [80, 8080, 53]
        .iter()
        .map(|p| format!("{FORWARDER}:{p}"))
        .collect();
    let tcp: Vec<&str> = tcp.iter().map(String::as_str).collect();
    let udp = format!("{FORWARDER}:53");
    lan.wait_listening(&l, &tcp, &["10.77.0.1:53", &udp]);
    let host = |args: &[&str]| stdout(&lan.probe_outside(args));
    let mut args = vec!["connect"];
    args.extend(&tcp);
    let out = host(&args);
    for port in [80, 8080, 53] {
        assert!(
            out.contains(&format!("{FORWARDER}:{port} REACHED LINKLOCAL-{port}")),
            "control: the site does not route {FORWARDER}:{port} from the host: {out}"
        );
    }
    assert_eq!(
        host(&["query", FORWARDER, "example.test"]),
        "10.77.0.9\n",
        "control: the impostor resolver at {FORWARDER} answers from the host"
    );
}

/// Issue #24 item 1: where the site routes the forwarder's address to a
/// host that listens there, nothing but DNS passes to it from inside: TCP
/// 80, 8080 and 53 (pasta relays TCP to the address itself, not to the
/// resolver) do not answer, while DNS through the forwarder still reaches
/// the host's resolver (the gateway), never the impostor at the address.
#[test]
fn the_forwarder_passes_only_dns_where_the_site_routes_its_address() {
    if !require("jail_forwarder_routed") {
        return;
    }
    let mut lan = Lan::up();
    let l = lan.lan.clone();
    lan.listen(&l, &["serve", INTERNET, "INTERNET", LISTEN_SECS]);
    link_local_services(&mut lan);
    let w = jail_world("jailfwdrouted", "");
    let np = netprobe_cmd(&w);
    for who in BOTH {
        let script = format!(
            "grep ^nameserver /etc/resolv.conf; {np} resolve example.test; \
             {np} query {FORWARDER} example.test; \
             {np} connect {FORWARDER}:80 {FORWARDER}:8080 {FORWARDER}:53 {INTERNET}"
        );
        let o = lan.shell(&w, who, "", &[], &script);
        let out = stdout(&o);
        assert!(
            out.starts_with("nameserver 169.254.0.53\n203.0.113.10\n203.0.113.10\n"),
            "{who:?}: DNS did not go through the forwarder to the host's resolver: {out}{}",
            stderr(&o)
        );
        for port in [80, 8080, 53] {
            assert_blocked(&out, &format!("{FORWARDER}:{port}"), who);
        }
        assert!(!out.contains("LINKLOCAL"), "{who:?}: {out}");
        // The internet still answers: the jail is up, only the forwarder is narrow.
        assert!(reached(&out, INTERNET), "{who:?}: {out}");
    }
    // And through the jail itself, with the forwarder routed on every port
    // as before issue #24 (the test mutation), the same listeners answer:
    // what keeps them out above is that route and nothing else.
    let m = jail_world("jailfwdopen", "");
    m.use_mutation_binary();
    m.install_by_hand(&m.root.join("bin/probe"), "");
    let np = netprobe_cmd(&m);
    for who in BOTH {
        let env = [("CLAUDE_SANDBOX_TEST_MUTATION", "forwarder-all-ports")];
        let script = format!("{np} connect {FORWARDER}:80 {FORWARDER}:8080");
        let o = lan.shell(&m, who, "", &env, &script);
        let out = stdout(&o);
        for port in [80, 8080] {
            assert!(
                out.contains(&format!("{FORWARDER}:{port} REACHED LINKLOCAL-{port}")),
                "{who:?}: mutation control: {out}{}",
                stderr(&o)
            );
        }
    }
}

/// A session that names the jail's interface to its socket, as any
/// unprivileged process may (`SO_BINDTODEVICE`, `SO_BINDTOIFINDEX`,
/// `IP_UNICAST_IF`, an `IP_PKTINFO` message): the kernel then skips a
/// blackhole or unreachable route and sends "on link", to pasta. None of
/// the internal destinations answers that way either, TCP or UDP, while
/// the internet, a public resolver and DNS through the forwarder still do
/// (so each refusal is the jail's, not a socket that cannot send at all).
#[test]
fn sockets_bound_to_the_jails_interface_reach_nothing_internal() {
    if !require("jail_bound_sockets") {
        return;
    }
    let mut lan = Lan::up();
    start_services(&mut lan);
    let l = lan.lan.clone();
    for ns in ["10.77.0.1", "10.77.0.9", "169.254.169.254", "203.0.113.10"] {
        lan.listen(&l, &["dns", ns, LISTEN_SECS]);
    }
    lan.wait_listening(
        &l,
        &[],
        &[
            "10.77.0.1:53",
            "10.77.0.9:53",
            "169.254.169.254:53",
            "203.0.113.10:53",
        ],
    );
    let internal = [
        "10.77.0.1:8080",
        "10.77.0.9:8080",
        "172.16.5.9:8080",
        "192.168.5.9:8080",
        "100.64.5.9:8080",
        "169.254.169.254:8080",
        "169.254.0.53:8080",
        "198.18.0.1:8080",
        "240.0.0.1:8080",
        "192.0.0.8:8080",
    ];
    // Control: from the host's namespace every one answers, TCP and UDP.
    let np_host = |args: &[&str]| stdout(&lan.probe_outside(args));
    let mut args = vec!["connect"];
    args.extend(internal);
    let out = np_host(&args);
    for t in internal {
        assert!(reached(&out, t), "control: {t}: {out}");
    }
    for ns in ["10.77.0.9", "169.254.169.254"] {
        assert_eq!(
            np_host(&["query", ns, "x.test"]),
            "203.0.113.10\n",
            "control: {ns}"
        );
    }
    let w = jail_world("jailbound", "");
    let np = netprobe_cmd(&w);
    let mut script = String::new();
    for via in ["device", "ifindex"] {
        script.push_str(&format!(
            "echo VIA {via}; {np} connect --via {via} {} {INTERNET}\n",
            internal.join(" ")
        ));
    }
    for via in ["device", "ifindex", "unicast-if", "pktinfo"] {
        for ns in ["10.77.0.9", "169.254.169.254", "203.0.113.10", FORWARDER] {
            script.push_str(&format!(
                "echo \"UDP {via} {ns} $({np} query --via {via} {ns} x.test)\"\n"
            ));
        }
    }
    for who in BOTH {
        let o = lan.shell(&w, who, "", &[], &script);
        let out = stdout(&o);
        for part in out.split("VIA ").skip(1) {
            let part = part.split("UDP ").next().unwrap();
            for t in internal {
                assert_blocked(part, t, who);
            }
            assert!(reached(part, INTERNET), "{who:?}: {part}{}", stderr(&o));
        }
        assert_eq!(out.matches("VIA ").count(), 2, "{who:?}: {out}");
        for via in ["device", "ifindex", "unicast-if", "pktinfo"] {
            for ns in ["10.77.0.9", "169.254.169.254"] {
                let line = format!("UDP {via} {ns} NOANSWER");
                assert!(out.contains(&line), "{who:?}: no {line:?} in {out}");
            }
            for ns in ["203.0.113.10", FORWARDER] {
                let line = format!("UDP {via} {ns} 203.0.113.10\n");
                assert!(out.contains(&line), "{who:?}: no {line:?} in {out}");
            }
        }
    }
}

/// /dev/net/tun as the devcontainer feature provides it where no device node
/// can be made (rootless Podman; rootful Podman, which withholds
/// CAP_MKNOD): a link to the host's node, which its mounts bind at
/// /dev/net/host-tun (tests/podman.rs runs the real thing). The jail works
/// through the link; the host's node at mode 0600 refuses a non-root user
/// with the fix on the host; a bound but unlinked node names the
/// entrypoint, which links it only as root. Each in a tmpfs over /dev/net
/// in the world's mount namespace.
#[test]
fn the_hosts_tun_device_through_the_features_link_and_its_fixes() {
    if !require("jail_host_tun") {
        return;
    }
    let lan = Lan::up();
    let w = World::new("jailhosttun");
    w.install_by_hand(&w.root.join("bin/probe"), "");
    let link = "ln -s host-tun /dev/net/tun";
    // (the tmpfs's content, who, None for a launch that runs, or the
    // refusal's what and fix)
    type Case<'a> = (String, Who, Option<(&'a str, &'a str)>);
    let mut cases: Vec<Case> = Vec::new();
    for who in BOTH {
        cases.push((
            format!("mknod -m 0666 /dev/net/host-tun c 10 200\n{link}"),
            who,
            None,
        ));
        cases.push((
            "mknod -m 0666 /dev/net/host-tun c 10 200".into(),
            who,
            Some((
                "the feature's entrypoint links it only when the container starts as root",
                "no non-root \"containerUser\"",
            )),
        ));
    }
    cases.push((
        format!("mknod -m 0600 /dev/net/host-tun c 10 200\n{link}"),
        Who::Root,
        None,
    ));
    cases.push((
        format!("mknod -m 0600 /dev/net/host-tun c 10 200\n{link}"),
        Who::User,
        Some((
            "/dev/net/tun is the host's device (mode 0600, owner uid 0)",
            "on the host, not in the container, run sudo chmod 0666 /dev/net/tun",
        )),
    ));
    for (content, who, refusal) in &cases {
        let setup = format!(
            "{}mount -t tmpfs -o mode=755 tmpfs /dev/net\n{content}\n",
            resolv("127.0.0.53")
        );
        let o = lan
            .command(&w, *who, &setup, &[], &["claude", "report"])
            .output()
            .unwrap();
        let err = stderr(&o);
        match refusal {
            None => assert!(
                o.status.success() && !stdout(&o).is_empty(),
                "{who:?} through the link ({content}): {err}"
            ),
            Some((what, fix)) => {
                assert_eq!(o.status.code(), Some(125), "{who:?} {content}: {err}");
                assert!(stdout(&o).is_empty(), "{who:?} {content}: the probe ran");
                assert!(err.contains(what) && err.contains(fix), "{who:?}: {err}");
            }
        }
    }
}

/// Decision 0019: the holder joins the jail's namespaces through a pidfd
/// of their owner and checks it left both of its own. Handed a pidfd of a
/// process that has a user namespace of its own but the host's network, or
/// of one in the host's namespaces altogether, it refuses in one line and
/// runs nothing: bubblewrap never starts with the host's network.
#[test]
fn a_holder_handed_anything_but_the_jails_namespaces_runs_nothing() {
    use nix::libc;
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    if !require("holder_join") {
        return;
    }
    let dir = TestDir::new("test", "holderjoin");
    let ns = |pid: u32, kind: &str| std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).ok();
    let cases: [(&str, &[&str], &str); 2] = [
        (
            "its own user namespace, the host's network",
            &["unshare", "-U", "sleep", "30"],
            "the jail's namespaces were not joined",
        ),
        (
            "the host's namespaces",
            &["sleep", "30"],
            "cannot join the jail's namespaces",
        ),
    ];
    for (what, argv, said) in cases {
        let mut target = Command::new(argv[0]).args(&argv[1..]).spawn().unwrap();
        let pid = target.id();
        // `unshare -U` has left the host's user namespace once it runs sleep.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while argv.len() > 2 && ns(pid, "user") == ns(std::process::id(), "user") {
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: never unshared"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(ns(pid, "net"), ns(std::process::id(), "net"), "{what}");
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        assert!(pidfd >= 0, "{what}: pidfd_open");
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
        let marker = dir.join(format!("ran-{}", argv.len()));
        let o = run_holder(&pidfd, &format!("touch {}", marker.display()));
        let _ = target.kill();
        let _ = target.wait();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{what}: {err}");
        assert!(err.contains(said), "{what}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{what}: one line: {err}");
        assert!(
            !marker.exists(),
            "{what}: the holder ran bubblewrap's place"
        );
    }
    // Control: the same holder, handed a real owner's pidfd, does run it.
    let mut owner = Command::new(our_binary())
        .arg0("claude-sandbox-jail")
        .args(["__jail-ns", "csbj0", "0", "0"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(owner.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), owner.id().to_string());
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, owner.id() as libc::pid_t, 0) };
    assert!(pidfd >= 0);
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    let marker = dir.join("ran-control");
    let o = run_holder(
        &pidfd,
        &format!("readlink /proc/self/ns/net > {}", marker.display()),
    );
    let net = ns(owner.id(), "net");
    drop(owner.stdin.take()); // the owner's lifeline
    let _ = owner.wait();
    assert!(o.status.success(), "control: {}", stderr(&o));
    let seen = std::fs::read_to_string(&marker).unwrap();
    assert_eq!(
        Some(seen.trim().into()),
        net,
        "control: the holder's program ran in the owner's network namespace"
    );
}

/// `claude-sandbox __holder` with the namespace owner's pidfd `join` and
/// `sh -c SCRIPT` in bubblewrap's place: no route batch, no "go" (its route
/// keeper ends with it).
fn run_holder(join: &std::os::fd::OwnedFd, script: &str) -> std::process::Output {
    use nix::libc;
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let (routes, _) = nix::unistd::pipe().unwrap();
    let (go, go_w) = nix::unistd::pipe().unwrap();
    let (_gate_r, gate) = nix::unistd::pipe().unwrap();
    let map = [
        (routes.as_raw_fd(), 10),
        (join.as_raw_fd(), 11),
        (go.as_raw_fd(), 12),
        (gate.as_raw_fd(), 13),
    ];
    let mut holder = Command::new(our_binary());
    holder
        .arg0("claude-sandbox-jail")
        .args(["__holder", "/usr/sbin/ip", "10", "11", "12", "13", "--"])
        .args(["/bin/sh", "-c", script]);
    unsafe {
        holder.pre_exec(move || {
            // Every source first above the targets: a source that is
            // already some target's number is neither overwritten by
            // another's dup2 nor left close-on-exec by dup2 onto itself.
            let mut high = [0; 4];
            for (i, (from, _)) in map.iter().enumerate() {
                high[i] = libc::fcntl(*from, libc::F_DUPFD, 100);
                if high[i] < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for (i, (_, to)) in map.iter().enumerate() {
                if libc::dup2(high[i], *to) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let o = holder.output().unwrap();
    drop(go_w);
    o
}

/// Issue #45 item 10: multicast and broadcast never leave the open jail,
/// however a process names the interface (the kernel sends a local
/// multicast or the limited broadcast with an output interface, or from the
/// interface's own address, without looking at a route). Behind the wall:
/// a LAN listener joined to the groups, which gets every datagram from the
/// host's namespace (the control), and gets the multicast from inside too
/// when the jail's tap has no transmit filter (the test mutation): what
/// keeps it out is that filter and nothing else.
#[test]
fn multicast_and_broadcast_stay_inside_the_jail() {
    if !require("jail_multicast") {
        return;
    }
    let mut lan = Lan::up();
    let cast = Cast::listen(&mut lan);
    cast.control(&lan);
    let w = jail_world("jailcast", "");
    for who in BOTH {
        let leaked = cast.inside(&lan, &w, who, &[]);
        assert!(leaked.is_empty(), "{who:?}: left the jail: {leaked:?}");
    }
    let m = jail_world("jailcastopen", "");
    m.use_mutation_binary();
    m.install_by_hand(&m.root.join("bin/probe"), "");
    for who in BOTH {
        let env = [("CLAUDE_SANDBOX_TEST_MUTATION", "jail-multicast")];
        let leaked = cast.inside(&lan, &m, who, &env);
        for group in ["224.0.0.251:5400", "239.1.1.1:5400"] {
            assert!(
                leaked.iter().any(|l| l.contains(&format!(" {group} "))),
                "{who:?}: mutation control: {group} did not arrive without the filter: {leaked:?}"
            );
        }
    }
}

/// Where the multicast test's listener writes what arrived.
struct Cast {
    got: std::path::PathBuf,
}

/// The destinations the multicast test sends to, and the ways it sends.
const CAST_TARGETS: [&str; 4] = [
    "224.0.0.251:5400",     // local multicast (mDNS's group)
    "239.1.1.1:5400",       // site-scoped multicast
    "255.255.255.255:5400", // the limited broadcast
    "10.77.0.255:5400",     // the interface's own broadcast
];
/// The multicast test's fence: the "internet" host, on the listener's port.
const CAST_FENCE: &str = "203.0.113.10:5400";
const CAST_HOWS: [&str; 7] = [
    "plain",
    "source",
    "mcif",
    "device",
    "ifindex",
    "unicast-if",
    "pktinfo",
];

impl Cast {
    /// A LAN listener joined to both groups, on UDP port 5400.
    fn listen(lan: &mut Lan) -> Cast {
        let dir = std::env::temp_dir().join(format!("csb-cast-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let got = dir.join("gathered");
        std::fs::write(&got, "").unwrap();
        let l = lan.lan.clone();
        let gather = got.to_str().unwrap().to_string();
        lan.listen(
            &l,
            &[
                "gather",
                "5400",
                &gather,
                LISTEN_SECS,
                "224.0.0.251",
                "239.1.1.1",
            ],
        );
        lan.wait_listening(&l, &[], &["0.0.0.0:5400"]);
        Cast { got }
    }

    /// What arrived, once every line starting with `tag` and holding
    /// `what` is in (at most 10 s: a datagram may still be on its way).
    fn arrived(&self, tag: &str, what: &str, count: usize) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let text = std::fs::read_to_string(&self.got).unwrap();
            let n = text
                .lines()
                .filter(|l| l.starts_with(tag) && l.contains(what))
                .count();
            if n >= count || std::time::Instant::now() > deadline {
                return text;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Every way of sending, from the host's namespace: all arrive.
    fn control(&self, lan: &Lan) {
        let mut args = vec!["shout", "OUTSIDE"];
        args.extend(CAST_TARGETS);
        let out = stdout(&lan.probe_outside(&args));
        let control = self.arrived("OUTSIDE", "", CAST_TARGETS.len() * CAST_HOWS.len());
        for t in CAST_TARGETS {
            for how in CAST_HOWS {
                assert!(
                    control.contains(&format!("OUTSIDE {t} {how}\n")),
                    "control: {t} sent {how} from the host's namespace did not arrive: {out}\n{control}"
                );
            }
        }
        std::fs::write(&self.got, "").unwrap();
    }

    /// Every way of sending, from inside `w` as `who`, then the fence:
    /// the lines that arrived, the fence's apart. The fence is a unicast
    /// datagram to the "internet" host (the same listener), sent last each
    /// way: it goes through pasta, which relays in order, so once it is in,
    /// whatever pasta relayed before it is too. The datagrams sent from the
    /// host's namespace after it show the listener still hears.
    fn inside(&self, lan: &Lan, w: &World, who: Who, env: &[(&str, &str)]) -> Vec<String> {
        let tag = format!("INSIDE-{who:?}");
        let np = netprobe_cmd(w);
        let cmd = format!("{np} shout {tag} {} {CAST_FENCE}", CAST_TARGETS.join(" "));
        let o = lan.shell(w, who, "", env, &cmd);
        let out = stdout(&o);
        for t in CAST_TARGETS.iter().chain([&CAST_FENCE]) {
            for how in CAST_HOWS {
                assert!(
                    out.contains(&format!("{how} {t} ")),
                    "{who:?}: {how} {t} not tried: {out}{}",
                    stderr(&o)
                );
            }
        }
        let fenced = self.arrived(&tag, &format!(" {CAST_FENCE} "), CAST_HOWS.len());
        assert!(
            fenced.contains(&format!("{tag} {CAST_FENCE} plain\n")),
            "{who:?}: the fence through pasta never arrived (is the jail up?): {out}\n{fenced}"
        );
        let mut args = vec!["shout", "LATER"];
        args.extend(CAST_TARGETS);
        lan.probe_outside(&args);
        let text = self.arrived("LATER", "", CAST_TARGETS.len() * CAST_HOWS.len());
        std::fs::write(&self.got, "").unwrap();
        text.lines()
            .filter(|l| l.starts_with(&tag) && !l.contains(CAST_FENCE))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Cast {
    fn drop(&mut self) {
        if let Some(dir) = self.got.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
