//! End-to-end: the credential broker (issue #25, decision 0015) in the
//! private site network of `tests/testnet/lan.sh`, in allowlist mode, as
//! root and as an unprivileged user. The test CA of [`common::site`] plays
//! the public one: it is added to the world's system bundle, which the
//! broker verifies upstreams against. The test servers (`github.com`,
//! `api.github.com`, `api.anthropic.com`, `allowed.test`: all the
//! "internet" host) accept only the real tokens on `/user` and under
//! `/private/`.

mod common;
use common::lan::*;
use common::site::{Site, README};
use common::*;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const CONF: &str = "egress = allowlist\nallow-domain = allowed.test\nallow-domains = github\npass-env = ANTHROPIC_API_KEY\n";

/// The real values: each test world gets its own.
struct Reals {
    gh: String,
    api_key: String,
}

/// `PREFIX` and 36 characters of this test's own: never in the repository.
fn real(prefix: &str, salt: &str) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(format!("{salt}-{}", std::process::id()).as_bytes());
    let tail: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}{}", &tail[..36])
}

/// A grep pattern for `s` that does not match itself (`gho_[a]bc…`), so a
/// search inside never finds its own command line.
fn pattern(s: &str) -> String {
    format!("{}[{}]{}", &s[..4], &s[4..5], &s[5..])
}

struct Net {
    lan: Lan,
    site: Site,
    w: World,
    reals: Reals,
}

fn net(name: &str) -> Net {
    let mut lan = Lan::up();
    let site = Site::new(name);
    let reals = Reals {
        gh: real("gho_", name),
        api_key: real("sk-ant-api03-", name),
    };
    std::fs::write(
        site.dir.join("auth-token"),
        format!("{}\n{}\n", reals.gh, reals.api_key),
    )
    .unwrap();
    site.start(&mut lan);
    let w = jail_world(name, CONF);
    // The test CA is "public": in the world's system bundle.
    let o = w.run_root_raw(&format!(
        "cat {} >> /etc/ssl/certs/ca-certificates.crt",
        site.ca().display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    for who in BOTH {
        site.ca_into(&w, who);
        w.put(
            who,
            ".config/gh/hosts.yml",
            &format!(
                "github.com:\n    users:\n        octo:\n            oauth_token: {0}\n    git_protocol: https\n    oauth_token: {0}\n    user: octo\n",
                reals.gh
            ),
        );
    }
    Net {
        lan,
        site,
        w,
        reals,
    }
}

/// Run `script` inside (`claude shell`) as `who`, `ANTHROPIC_API_KEY` set
/// to the real key in the launching environment.
fn session(n: &Net, who: Who, script: &str) -> Output {
    let cmd = n.w.command_with_setup(
        who,
        &n.w.workspace(who),
        "",
        &[("ANTHROPIC_API_KEY", &n.reals.api_key)],
        &["claude", "shell", script],
    );
    in_netns(&n.lan.host, &cmd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn shown(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status,
        stdout(o),
        stderr(o)
    )
}

/// The value after `NAME=` on a line of `out`.
fn value<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= in\n{out}"))
}

/// The newest connection log of `who`, as text.
fn newest_log(n: &Net, who: Who) -> String {
    let dir = n.w.home(who).join(".local/state/claude-sandbox/egress");
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    logs.sort();
    std::fs::read_to_string(logs.last().expect("a log")).unwrap()
}

/// curl from the host's side (the "devcontainer", outside any sandbox),
/// to `url` at the internet host, with `header`.
fn from_host(n: &Net, host: &str, path: &str, header: &str) -> String {
    let mut c = Command::new("curl");
    c.args(["-sS", "-m", "10", "--cacert"])
        .arg(n.site.ca())
        .args([
            "--resolve",
            &format!("{host}:443:203.0.113.10"),
            "-H",
            header,
        ])
        .arg(format!("https://{host}{path}"));
    let o = in_netns(&n.lan.host, &c).output().unwrap();
    stdout(&o)
}

/// A search for the real values in every readable file that could hold
/// one inside and every process's environment and command line: the files
/// it found, on one line.
fn search(n: &Net) -> String {
    format!(
        "$(grep -rlsaE '{}|{}' ~ /etc /tmp /usr/libexec \"$PWD\" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\n' ' ')",
        pattern(&n.reals.gh),
        pattern(&n.reals.api_key)
    )
}

/// Inside: the stand-ins, the forge and the API through the broker, an
/// unbrokered host, a search for the real values; each result a line.
fn inside_script(n: &Net) -> String {
    let search = search(n);
    format!(
        "export T=$(sed -n 's/^ *oauth_token: //p' ~/.config/gh/hosts.yml | head -1)\n\
         echo \"standin=$T\"\n\
         echo \"key=$ANTHROPIC_API_KEY\"\n\
         echo \"forge=$(curl -sS -m 10 -H \"Authorization: token $T\" https://api.github.com/user)\"\n\
         echo \"api=$(curl -sS -m 10 -H \"x-api-key: $ANTHROPIC_API_KEY\" https://api.anthropic.com/user)\"\n\
         echo \"other=$(curl -sS -m 10 -H \"Authorization: token $T\" https://allowed.test/user)\"\n\
         echo \"clone=$(git -c credential.helper= -c credential.helper='!f() {{ echo username=x-access-token; echo password=$T; }}; f' \
            clone -q https://github.com/private/org/repo.git c 2>&1 && cat c/README)\"\n\
         echo \"bundle=$(grep -c 'BEGIN CERTIFICATE' \"$SSL_CERT_FILE\") $GIT_SSL_CAINFO $NODE_EXTRA_CA_CERTS\"\n\
         echo \"found={search}\"\n\
         echo \"tunnelled=$(curl -sS -m 10 --cacert ca.pem -H \"Authorization: token $T\" https://allowed.test/user)\"\n\
         curl -sS -m 10 --cacert ca.pem -o /dev/null https://api.github.com/ 2>/dev/null; echo \"intercepted=$?\"\n\
         echo \"otherport=$(curl -sS -m 10 -o /dev/null -w '%{{http_connect}}' -H \"Authorization: token $T\" https://api.github.com:8443/user 2>/dev/null)\"\n"
    )
}

/// The log of a finished session: every request closed (the broker's
/// lines between them left whole), the refusal of port 8443 in it, and
/// `egress report` reads it all: the credential lines are neither
/// requests nor unreadable.
fn log_reads_whole(n: &Net, who: Who, log: &str) {
    let mut requests = 0;
    for l in log.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        if v["event"] == "credential" {
            assert_eq!(l, l.trim_end(), "{who:?}: a credential line padded");
            continue;
        }
        requests += 1;
        assert!(v.get("open").is_none(), "{who:?}: still open: {l}");
    }
    assert!(
        log.lines()
            .any(|l| l.contains("\"host\":\"api.github.com\",\"port\":8443")
                && l.contains("\"decision\":\"refused\"")),
        "{who:?}:\n{log}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_claude-sandbox"))
        .args(["egress", "report", "--json", "--last"])
        .env_clear()
        .env("HOME", n.w.home(who))
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(o.status.success(), "{who:?}: {}", shown(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["unreadable_lines"], 0, "{who:?}: {v}");
    assert_eq!(v["requests"], requests, "{who:?}: {v}");
    assert!(requests >= 5, "{who:?}:\n{log}");
}

#[test]
fn inside_only_standins_and_the_broker_swaps_them_for_their_own_hosts() {
    if !require("broker_standins") {
        return;
    }
    let n = net("brkstand");
    // Positive control: the test servers accept the real token, from anywhere.
    let ok = from_host(
        &n,
        "api.github.com",
        "/user",
        &format!("Authorization: token {}", n.reals.gh),
    );
    assert_eq!(ok, "authenticated\n");
    for who in BOTH {
        let o = session(&n, who, &inside_script(&n));
        let out = stdout(&o);
        assert!(o.status.success(), "{who:?}: {}", shown(&o));
        let standin = value(&out, "standin");
        let key = value(&out, "key");
        assert!(
            standin.starts_with("gho_") && standin.len() == n.reals.gh.len(),
            "{who:?}: {out}"
        );
        assert_ne!(standin, n.reals.gh, "{who:?}");
        assert!(
            key.starts_with("sk-ant-api03-") && key != n.reals.api_key,
            "{who:?}: {out}"
        );
        // Through the broker, the stand-ins work against their own hosts...
        assert_eq!(
            value(&out, "forge"),
            "authenticated",
            "{who:?}: {}",
            shown(&o)
        );
        assert_eq!(
            value(&out, "api"),
            "authenticated",
            "{who:?}: {}",
            shown(&o)
        );
        assert_eq!(
            value(&out, "clone"),
            README.trim_end(),
            "{who:?}: {}",
            shown(&o)
        );
        // ...and arrive as stand-ins anywhere else.
        assert_eq!(
            value(&out, "other"),
            format!("got: token {standin}"),
            "{who:?}: {}",
            shown(&o)
        );
        // Not on the table: the real server's own certificate, which only
        // the test CA vouches for. On it: the session CA's, which the test
        // CA does not (curl: 60, the peer's certificate not trusted).
        assert_eq!(
            value(&out, "tunnelled"),
            format!("got: token {standin}"),
            "{who:?}: {out}"
        );
        assert_eq!(value(&out, "intercepted"), "60", "{who:?}: {out}");
        // The port rule holds for a brokered host too: its rule names no
        // port, so a tunnel to 8443 is refused (443 above: allowed).
        assert_eq!(value(&out, "otherport"), "403", "{who:?}: {out}");
        // The bundle inside: the system's (with the test CA) and the session CA.
        let bundle = value(&out, "bundle");
        let (count, paths) = bundle.split_once(' ').unwrap();
        assert!(count.parse::<u32>().unwrap() >= 2, "{who:?}: {out}");
        assert_eq!(
            paths,
            ["/etc/ssl/certs/ca-certificates.crt"; 2].join(" "),
            "{who:?}"
        );
        // No real value in any file, environment or command line inside.
        assert_eq!(value(&out, "found").trim(), "", "{who:?}: {out}");
        // Copied out and replayed from the host: worthless.
        let replay = from_host(
            &n,
            "api.github.com",
            "/user",
            &format!("Authorization: token {standin}"),
        );
        assert_eq!(replay, format!("got: token {standin}\n"), "{who:?}");
        let replay = from_host(
            &n,
            "api.anthropic.com",
            "/user",
            &format!("x-api-key: {key}"),
        );
        assert_eq!(replay, format!("got: {key}\n"), "{who:?}");
        // Each swap is a line: host and credential, never a value.
        let log = newest_log(&n, who);
        for (host, cred) in [
            ("api.github.com", "github"),
            ("api.anthropic.com", "anthropic-api-key"),
            ("github.com", "github"),
        ] {
            assert!(
                log.contains(&format!(
                    "\"event\":\"credential\",\"method\":\"GET\",\"host\":\"{host}\",\"credential\":\"{cred}\""
                )),
                "{who:?}: {host} {cred}:\n{log}"
            );
        }
        assert!(
            !log.contains("\"host\":\"allowed.test\",\"credential\""),
            "{who:?}:\n{log}"
        );
        log_reads_whole(&n, who, &log);
        for secret in [
            &n.reals.gh,
            &n.reals.api_key,
            &standin.to_string(),
            &key.to_string(),
        ] {
            assert!(
                !log.contains(secret.as_str()),
                "{who:?}: a value in the log:\n{log}"
            );
        }
        // The host's own files are untouched.
        let hosts = std::fs::read_to_string(n.w.home(who).join(".config/gh/hosts.yml")).unwrap();
        assert!(hosts.contains(&n.reals.gh), "{who:?}");
    }
}

#[test]
fn broker_off_binds_the_real_token_as_before() {
    if !require("broker_off") {
        return;
    }
    let n = net("brkoff");
    let o =
        n.w.run_root_raw("echo 'broker = off' >> /etc/claude-sandbox.conf");
    assert!(o.status.success(), "{}", stderr(&o));
    for who in BOTH {
        let script = format!(
            "sed -n 's/^ *oauth_token: //p' ~/.config/gh/hosts.yml | head -1; echo \"cert=${{SSL_CERT_FILE:-unset}}\"; echo \"found={}\"",
            search(&n)
        );
        let o = session(&n, who, &script);
        let out = stdout(&o);
        assert!(o.status.success(), "{who:?}: {}", shown(&o));
        // The positive control of the search the broker's test relies on:
        // it finds the real values where they are (the file, then the
        // environment of a process).
        let want = format!(
            "{}\ncert=unset\nfound={}/.config/gh/hosts.yml /proc/",
            n.reals.gh,
            n.w.home(who).display()
        );
        assert!(out.starts_with(&want), "{who:?}: {}", shown(&o));
    }
}

#[test]
fn real_claude_code_answers_with_a_brokered_api_key() {
    if !require("broker_real_claude") {
        return;
    }
    let Some(real_bin) = real_claude() else {
        return;
    };
    let mut lan = Lan::up();
    let l = lan.lan.clone();
    // Certificates only: the fake Messages API is the one server on
    // 203.0.113.10:443, where every name resolves.
    let site = Site::new("brkclaude");
    lan.listen(&l, &["dns", common::site::RESOLVER, "240"]);
    let key = real("sk-ant-api03-", "brkclaude");
    let api_log = site.dir.join("api.log");
    std::fs::write(&api_log, "").unwrap();
    let d = site.dir.to_path_buf();
    lan.listeners.push(
        Command::new("ip")
            .args(["netns", "exec", &l, "python3"])
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/fake_anthropic.py"
            ))
            .args(["443"])
            .arg(&api_log)
            .args(["240", "203.0.113.10", "--tls"])
            .arg(d.join("server.pem"))
            .arg(d.join("server.key"))
            .args(["--require-key", &key])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    lan.wait_listening(
        &l,
        &["203.0.113.10:443"],
        &[&format!("{}:53", common::site::RESOLVER)],
    );
    let w = World::new("brkclaude");
    w.install_by_hand(
        &real_bin,
        "egress = allowlist\npass-env = ANTHROPIC_API_KEY, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC\n",
    );
    let o = w.run_root_raw(&format!(
        "rm -f /etc/resolv.conf && echo 'nameserver {}' > /etc/resolv.conf && cat {} >> /etc/ssl/certs/ca-certificates.crt",
        common::site::RESOLVER,
        site.ca().display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    for who in BOTH {
        let prompt = format!("hello-broker-{who:?}");
        let cmd = w.command_with_setup(
            who,
            &w.workspace(who),
            "",
            &[
                ("ANTHROPIC_API_KEY", &key),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ],
            &["claude", "-p", &prompt],
        );
        let o = in_netns(&lan.host, &cmd)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let logged = std::fs::read_to_string(&api_log).unwrap_or_default();
        assert!(
            o.status.success() && stdout(&o).contains("PONG-FROM-FAKE-API"),
            "{who:?}: {}\napi log:\n{logged}",
            shown(&o)
        );
        // It reached the API with the real key, which it never had.
        let line = logged
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["body"].as_str().is_some_and(|b| b.contains(&prompt)))
            .unwrap_or_else(|| panic!("{who:?}: the prompt never reached the API:\n{logged}"));
        assert_eq!(line["key_ok"], true, "{who:?}: {line}");
        let dir = w.home(who).join(".local/state/claude-sandbox/egress");
        let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        logs.sort();
        let log = std::fs::read_to_string(logs.last().unwrap()).unwrap();
        assert!(
            log.contains("\"host\":\"api.anthropic.com\",\"credential\":\"anthropic-api-key\""),
            "{who:?}:\n{log}"
        );
        assert!(!log.contains(&key), "{who:?}");
    }
}

#[test]
fn a_broker_that_cannot_start_stops_the_launch() {
    if !require("broker_fails_closed") {
        return;
    }
    // No network is needed: the launch stops before anything is spawned.
    let w = jail_world("brkfail", CONF);
    let o = w.run_root_raw("rm -f /etc/ssl/certs/ca-certificates.crt");
    assert!(o.status.success(), "{}", stderr(&o));
    for who in BOTH {
        w.put(
            who,
            ".config/gh/hosts.yml",
            "github.com:\n    oauth_token: gho_0123456789abcdefghijABCDEFGHIJ012345\n",
        );
        let o = w.run(who, &[], &["claude", "shell", "echo ran"]);
        assert_eq!(o.status.code(), Some(125), "{who:?}: {}", shown(&o));
        assert!(!stdout(&o).contains("ran"), "{who:?}: {}", shown(&o));
        let e = stderr(&o);
        assert!(
            e.contains("the credential broker cannot start")
                && e.contains("/etc/ssl/certs/ca-certificates.crt")
                && e.contains("broker = off"),
            "{who:?}: {e}"
        );
        // Without a credential to broker there is nothing to fail: it runs
        // (the control: the refusal above is the broker's).
        std::fs::remove_file(w.home(who).join(".config/gh/hosts.yml")).unwrap();
        let o = w.run(who, &[], &["claude", "shell", "echo ran"]);
        assert_eq!(stdout(&o), "ran\n", "{who:?}: {}", shown(&o));
    }
}

// ---------------------------------------------------------------------
// Open jail (issue #25 item 2, decision 0016): the broker in the default
// `egress = open` jail. With a brokered credential held, the proxy on the
// jail's loopback is the broker and HTTPS_PROXY names it; everything else
// still goes out through the jail's routes, and the proxy reaches only
// what the jail routes.

/// `egress = open` (the default, said aloud), the API key forwarded, and
/// `NO_PROXY` too (for the test of a forwarded one).
const OPEN_CONF: &str = "egress = open\npass-env = ANTHROPIC_API_KEY, NO_PROXY\n";

/// [`net`] with the open jail's configuration instead of allowlist mode's.
fn open_net(name: &str) -> Net {
    let n = net(name);
    let o = n.w.run_root_raw(&format!(
        "printf '{}' > /etc/claude-sandbox.conf",
        OPEN_CONF.replace('\n', "\\n")
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    n
}

/// [`session`] with more of the launching environment (`env`); the real
/// API key only when `key`.
fn open_session(n: &Net, who: Who, key: bool, env: &[(&str, &str)], script: &str) -> Output {
    let mut all: Vec<(&str, &str)> = env.to_vec();
    if key {
        all.push(("ANTHROPIC_API_KEY", &n.reals.api_key));
    }
    let cmd = n.w.command_with_setup(
        who,
        &n.w.workspace(who),
        "",
        &all,
        &["claude", "shell", script],
    );
    in_netns(&n.lan.host, &cmd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Inside the open jail: the stand-ins and the proxy variables; the forge
/// and the API through the default proxy; the forge straight through the
/// jail (`--noproxy '*'`); an unbrokered host; the LAN host through the
/// proxy and directly; a search for the real values.
fn open_script(n: &Net) -> String {
    format!(
        "export T=$(sed -n 's/^ *oauth_token: //p' ~/.config/gh/hosts.yml | head -1)\n\
         echo \"standin=$T\"\n\
         echo \"key=$ANTHROPIC_API_KEY\"\n\
         echo \"proxy=${{HTTPS_PROXY:-unset}} ${{https_proxy:-unset}} ${{HTTP_PROXY:-unset}}\"\n\
         echo \"noproxy=${{NO_PROXY:-unset}}\"\n\
         echo \"forge=$(curl -sS -m 10 -H \"Authorization: token $T\" https://api.github.com/user)\"\n\
         echo \"api=$(curl -sS -m 10 -H \"x-api-key: $ANTHROPIC_API_KEY\" https://api.anthropic.com/user)\"\n\
         echo \"direct=$(curl -sS -m 10 --noproxy '*' -w ' %{{http_code}}' -H \"Authorization: token $T\" https://api.github.com/user | tr -d '\\n')\"\n\
         echo \"other=$(curl -sS -m 10 -H \"Authorization: token $T\" https://allowed.test/user)\"\n\
         echo \"internal=$(curl -sS -m 10 -o /dev/null -w '%{{http_code}}' http://internal.test/)\"\n\
         echo \"internaltls=$(curl -sS -m 10 -o /dev/null -w '%{{http_connect}}' https://internal.test/ 2>/dev/null)\"\n\
         echo \"internaldirect=$(curl -sS -m 5 --noproxy '*' http://internal.test/ 2>/dev/null || echo unreachable)\"\n\
         echo \"found={}\"\n",
        search(n)
    )
}

#[test]
fn open_jail_brokers_through_its_proxy_and_routes_nothing_internal() {
    if !require("broker_open_jail") {
        return;
    }
    let n = open_net("brkopen");
    // Positive controls from the host's side: the forge takes the real
    // token, and the LAN host answers (so a refusal inside is the proxy's).
    let ok = from_host(
        &n,
        "api.github.com",
        "/user",
        &format!("Authorization: token {}", n.reals.gh),
    );
    assert_eq!(ok, "authenticated\n");
    let mut c = Command::new("curl");
    c.args(["-sS", "-m", "10", "http://10.77.0.9/"]);
    let lan = stdout(&in_netns(&n.lan.host, &c).output().unwrap());
    assert_eq!(lan, common::site::INTERNAL_INDEX);
    for who in BOTH {
        let o = open_session(&n, who, true, &[], &open_script(&n));
        let out = stdout(&o);
        assert!(o.status.success(), "{who:?}: {}", shown(&o));
        let standin = value(&out, "standin");
        let key = value(&out, "key");
        assert!(
            standin.starts_with("gho_") && standin != n.reals.gh,
            "{who:?}: {out}"
        );
        assert!(
            key.starts_with("sk-ant-api03-") && key != n.reals.api_key,
            "{who:?}: {out}"
        );
        let url = "http://127.0.0.1:3128";
        assert_eq!(value(&out, "proxy"), [url; 3].join(" "), "{who:?}");
        assert_eq!(value(&out, "noproxy"), "localhost,127.0.0.1", "{who:?}");
        // Through the default proxy: the broker swaps the stand-ins in.
        for k in ["forge", "api"] {
            assert_eq!(
                value(&out, k),
                "authenticated",
                "{who:?} {k}: {}",
                shown(&o)
            );
        }
        // Straight through the jail (the route exists): the stand-in only.
        assert_eq!(
            value(&out, "direct"),
            format!("got: token {standin} 401"),
            "{who:?}: {}",
            shown(&o)
        );
        // An unbrokered host gets the stand-in as it was sent.
        assert_eq!(
            value(&out, "other"),
            format!("got: token {standin}"),
            "{who:?}: {}",
            shown(&o)
        );
        // The proxy is no way around the jail: the LAN host is refused
        // through it, plain or tunnelled, as the jail refuses it directly.
        assert_eq!(value(&out, "internal"), "403", "{who:?}: {out}");
        assert_eq!(value(&out, "internaltls"), "403", "{who:?}: {out}");
        assert_eq!(value(&out, "internaldirect"), "unreachable", "{who:?}");
        assert_eq!(value(&out, "found").trim(), "", "{who:?}: {out}");
        // The proxied requests are logged (the swaps too, never a value),
        // and `egress report` reads the log.
        let log = newest_log(&n, who);
        for (host, cred) in [
            ("api.github.com", "github"),
            ("api.anthropic.com", "anthropic-api-key"),
        ] {
            assert!(
                log.contains(&format!("\"host\":\"{host}\",\"credential\":\"{cred}\"")),
                "{who:?}: {host}:\n{log}"
            );
        }
        assert!(
            log.lines().any(|l| l.contains("\"host\":\"allowed.test\"")
                && l.contains("\"reason\":\"egress = open\"")),
            "{who:?}:\n{log}"
        );
        assert!(
            log.lines().any(|l| l.contains("\"host\":\"internal.test\"")
                && l.contains("\"decision\":\"refused\"")
                && l.contains("10.77.0.9")),
            "{who:?}:\n{log}"
        );
        for secret in [&n.reals.gh, &n.reals.api_key] {
            assert!(!log.contains(secret.as_str()), "{who:?}:\n{log}");
        }
        let o = Command::new(env!("CARGO_BIN_EXE_claude-sandbox"))
            .args(["egress", "report", "--json", "--last"])
            .env_clear()
            .env("HOME", n.w.home(who))
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        assert!(o.status.success(), "{who:?}: {}", shown(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v["unreadable_lines"], 0, "{who:?}: {v}");
        assert!(v["requests"].as_u64().unwrap() >= 5, "{who:?}: {v}");
    }
}

#[test]
fn open_jail_a_forwarded_no_proxy_cannot_send_a_standin_direct_and_no_credential_no_proxy() {
    if !require("broker_open_no_proxy") {
        return;
    }
    let n = open_net("brknoproxy");
    let script = format!(
        "export T=$(sed -n 's/^ *oauth_token: //p' ~/.config/gh/hosts.yml | head -1)\n\
         echo \"noproxy=${{NO_PROXY:-unset}} ${{no_proxy:-unset}}\"\n\
         echo \"forge=$(curl -sS -m 10 -H \"Authorization: token $T\" https://api.github.com/user)\"\n\
         echo \"found={}\"\n",
        search(&n)
    );
    let bare =
        "echo \"proxy=${HTTPS_PROXY:-unset} ${https_proxy:-unset} ${SSL_CERT_FILE:-unset}\"\n";
    for who in BOTH {
        // The hostile setting: NO_PROXY naming the brokered hosts (and one
        // that names none, kept).
        let fwd = [("NO_PROXY", "github.com,.github.com,*,example.org")];
        let o = open_session(&n, who, true, &fwd, &script);
        let out = stdout(&o);
        assert!(o.status.success(), "{who:?}: {}", shown(&o));
        let want = "localhost,127.0.0.1,example.org";
        assert_eq!(value(&out, "noproxy"), format!("{want} {want}"), "{who:?}");
        // The stand-in still goes through the broker (so it works), and
        // nothing real is readable.
        assert_eq!(
            value(&out, "forge"),
            "authenticated",
            "{who:?}: {}",
            shown(&o)
        );
        assert_eq!(value(&out, "found").trim(), "", "{who:?}: {out}");
        // No credential held: no proxy at all, nothing changed inside.
        std::fs::remove_file(n.w.home(who).join(".config/gh/hosts.yml")).unwrap();
        let o = open_session(&n, who, false, &[], bare);
        assert!(o.status.success(), "{who:?}: {}", shown(&o));
        assert_eq!(
            stdout(&o),
            "proxy=unset unset unset\n",
            "{who:?}: {}",
            shown(&o)
        );
        // The control: with the key held, the same script sees the proxy.
        let o = open_session(&n, who, true, &[], bare);
        assert!(
            stdout(&o).starts_with("proxy=http://127.0.0.1:3128 http://127.0.0.1:3128 /etc/ssl/"),
            "{who:?}: {}",
            shown(&o)
        );
    }
}

#[test]
fn open_jail_a_broker_that_cannot_start_stops_the_launch() {
    if !require("broker_open_fails_closed") {
        return;
    }
    let w = jail_world("brkopenfail", OPEN_CONF);
    let o = w.run_root_raw("rm -f /etc/ssl/certs/ca-certificates.crt");
    assert!(o.status.success(), "{}", stderr(&o));
    for who in BOTH {
        w.put(
            who,
            ".config/gh/hosts.yml",
            "github.com:\n    oauth_token: gho_0123456789abcdefghijABCDEFGHIJ012345\n",
        );
        let o = w.run(who, &[], &["claude", "shell", "echo ran"]);
        assert_eq!(o.status.code(), Some(125), "{who:?}: {}", shown(&o));
        assert!(!stdout(&o).contains("ran"), "{who:?}: {}", shown(&o));
        let e = stderr(&o);
        assert!(
            e.contains("the credential broker cannot start") && e.contains("broker = off"),
            "{who:?}: {e}"
        );
        // broker = off: the old behaviour, the real token bound (control).
        let o = w.run_root_raw("echo 'broker = off' >> /etc/claude-sandbox.conf");
        assert!(o.status.success(), "{}", stderr(&o));
        let o = w.run(
            who,
            &[],
            &["claude", "shell", "grep -c gho_0123 ~/.config/gh/hosts.yml"],
        );
        assert_eq!(stdout(&o), "1\n", "{who:?}: {}", shown(&o));
        let o = w.run_root_raw(&format!(
            "printf '{}' > /etc/claude-sandbox.conf",
            OPEN_CONF.replace('\n', "\\n")
        ));
        assert!(o.status.success(), "{}", stderr(&o));
    }
}

#[test]
fn egress_off_keeps_the_real_values_as_documented_weaker() {
    if !require("broker_egress_off") {
        return;
    }
    // Decision 0016: no broker on the host's network. No network needed.
    let w = jail_world("brkegoff", "egress = off\n");
    let token = "gho_0123456789abcdefghijABCDEFGHIJ012345";
    for who in BOTH {
        w.put(
            who,
            ".config/gh/hosts.yml",
            &format!("github.com:\n    oauth_token: {token}\n"),
        );
        let o = w.run(
            who,
            &[],
            &[
                "claude",
                "shell",
                "sed -n 's/^ *oauth_token: //p' ~/.config/gh/hosts.yml; echo \"proxy=${HTTPS_PROXY:-unset} ${SSL_CERT_FILE:-unset}\"",
            ],
        );
        assert_eq!(
            stdout(&o),
            format!("{token}\nproxy=unset unset\n"),
            "{who:?}: {}",
            shown(&o)
        );
    }
    // The same world in the open jail brokers it (the control: the real
    // value above is the mode's, not a broker that failed to run).
    let o = w.run_root_raw("echo 'egress = open' > /etc/claude-sandbox.conf");
    assert!(o.status.success(), "{}", stderr(&o));
    for who in BOTH {
        let o = w.run(
            who,
            &[],
            &[
                "claude",
                "shell",
                "grep -c gho_0123456789 ~/.config/gh/hosts.yml",
            ],
        );
        assert_eq!(stdout(&o), "0\n", "{who:?}: {}", shown(&o));
    }
}
