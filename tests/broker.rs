//! End-to-end: the credential broker (issue #25, decision 0015) in the
//! private site network of `tests/testnet/lan.sh`, in allowlist mode, as
//! root and as an unprivileged user. The test CA of [`common::site`] plays
//! the public one: it is added to the world's system bundle, which the
//! broker verifies upstreams against. The test servers (`github.com`,
//! `api.github.com`, `api.anthropic.com`, `allowed.test`: all the
//! "internet" host) accept only the real tokens on `/user` and under
//! `/private/`.

mod common;
use common::broker::*;
use common::lan::*;
use common::site::{Site, README};
use common::*;

use std::path::PathBuf;
use std::process::{Command, Stdio};

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
