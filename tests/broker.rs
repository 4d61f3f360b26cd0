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
use std::process::{Command, Output, Stdio};

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
         printf -- '-----BEGIN PRIVATE %s-----\\n' KEY > /tmp/control.pem\n\
         echo \"keys=$(grep -rlsa 'PRIVATE KEY[-]----' ~ /tmp /run /dev/shm /etc/ssl/certs \"$PWD\" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\n' ' ')\"\n\
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
        // The session CA's key is nowhere a session can read or write: the
        // only private key the search finds is its own control.
        assert_eq!(
            value(&out, "keys").trim(),
            "/tmp/control.pem",
            "{who:?}: {out}"
        );
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

/// Issue #45: `api.github.com` as a shared front that routes by host
/// (netprobe's `/front`: an absolute target, `X-Forwarded-Host` or the
/// first `Host` picks the backend). The hostile session names its own
/// backend every way it can; the real token must reach the decided host's
/// backend only, or not go at all. The positive control, from the host
/// with the real token: the front does route by `Host`.
#[test]
fn a_front_that_routes_by_host_gets_the_decided_host_only() {
    if !require("broker_front") {
        return;
    }
    let n = net("brkfront");
    let routed = from_host(
        &n,
        "api.github.com",
        "/front",
        &format!("Authorization: token {}", n.reals.gh),
    );
    assert_eq!(routed, "backend=api.github.com hosts=1 real=yes\n");
    let mut c = Command::new("curl");
    c.args(["-sS", "-m", "10", "--cacert"])
        .arg(n.site.ca())
        .args(["--resolve", "api.github.com:443:203.0.113.10"])
        .args(["-H", "Host: backend.test", "-H"])
        .arg(format!("Authorization: token {}", n.reals.gh))
        .arg("https://api.github.com/front");
    let o = in_netns(&n.lan.host, &c).output().unwrap();
    assert_eq!(
        stdout(&o),
        "backend=backend.test hosts=1 real=yes\n",
        "{}",
        shown(&o)
    );
    let script = "T=$(sed -n 's/^ *oauth_token: //p' ~/.config/gh/hosts.yml | head -1)\n\
         front() { n=$1; shift; echo \"$n=$(curl -sS -m 10 \"$@\" -H \"Authorization: token $T\" https://api.github.com/front 2>&1 | head -1)\"; }\n\
         front plain\n\
         front host -H 'Host: backend.test'\n\
         front port -H 'host: backend.test:443'\n\
         front twice -H 'Host: api.github.com' -H 'Host: backend.test'\n\
         front forwarded -H 'X-Forwarded-Host: backend.test'\n\
         front absolute --request-target https://backend.test/front\n\
         front own --request-target https://api.github.com/front -H 'Host: backend.test'\n";
    for who in BOTH {
        let o = session(&n, who, script);
        let out = stdout(&o);
        assert!(o.status.success(), "{who:?}: {}", shown(&o));
        for name in ["plain", "host", "port", "twice", "forwarded", "own"] {
            assert_eq!(
                value(&out, name),
                "backend=api.github.com hosts=1 real=yes",
                "{who:?} {name}: {}",
                shown(&o)
            );
        }
        // Another host in the target: refused, nothing reaches the front.
        let absolute = value(&out, "absolute");
        assert!(
            absolute.starts_with("curl: (52)") || absolute.starts_with("curl: (56)"),
            "{who:?}: {}",
            shown(&o)
        );
        let log = newest_log(&n, who);
        assert!(
            log.contains("a request for `backend.test` on the connection to api.github.com"),
            "{who:?}:\n{log}"
        );
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
    // Certificates only: the fake Messages API is the one server on
    // 203.0.113.10:443, where every name resolves.
    let site = Site::new("brkclaude");
    let key = real("sk-ant-api03-", "brkclaude");
    let api_log = fake_api(&mut lan, &site, &key, None);
    let w = real_claude_world("brkclaude", &real_bin, "egress = allowlist\npass-env = ANTHROPIC_API_KEY, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC\n", &site);
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

/// With a credential to broker and the system CA bundle gone, a launch as
/// `who` stops with exit 125 and the one line naming the bundle and the
/// opt-out; nothing inside ran.
fn stops_without_a_bundle(w: &World, who: Who) {
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
        stops_without_a_bundle(&w, who);
        // Without a credential to broker there is nothing to fail: it runs
        // (the control: the refusal above is the broker's).
        std::fs::remove_file(w.home(who).join(".config/gh/hosts.yml")).unwrap();
        let o = w.run(who, &[], &["claude", "shell", "echo ran"]);
        assert_eq!(stdout(&o), "ran\n", "{who:?}: {}", shown(&o));
    }
}

// ---------------------------------------------------------------------------
// issue #45 item 3: token files read as the tools read them, or refused.

/// `hosts.yml` with github.com's token written as gh reads it but the old
/// line reader did not (a quoted key, a blank before the colon).
fn hosts_yml_as_gh_reads_it(real: &str, shape: usize) -> String {
    match shape {
        0 => format!("github.com:\n    \"oauth_token\": {real}\n    user: octo\n"),
        _ => format!("github.com:\n    oauth_token : {real} # gh reads this\n    user: octo\n"),
    }
}

#[test]
fn a_token_gh_reads_however_written_is_brokered_never_bound() {
    if !require("broker_yaml") {
        return;
    }
    let n = net("brkyaml");
    let script = format!(
        "T=$(sed -n 's/^ *oauth_token: //p' ~/.config/gh/hosts.yml | head -1)\n\
         echo \"standin=$T\"\n\
         echo \"forge=$(curl -sS -m 10 -H \"Authorization: token $T\" https://api.github.com/user)\"\n\
         echo \"found={}\"\n",
        search(&n)
    );
    for who in BOTH {
        for shape in 0..2 {
            let real = n.reals.gh.as_str();
            n.w.put(
                who,
                ".config/gh/hosts.yml",
                &hosts_yml_as_gh_reads_it(real, shape),
            );
            let o = session(&n, who, &script);
            let out = stdout(&o);
            assert!(o.status.success(), "{who:?} {shape}: {}", shown(&o));
            let standin = value(&out, "standin");
            assert!(
                standin.starts_with("gho_") && standin.len() == real.len() && standin != real,
                "{who:?} {shape}: {out}"
            );
            // Brokered: the stand-in works towards its host...
            assert_eq!(
                value(&out, "forge"),
                "authenticated",
                "{who:?} {shape}: {}",
                shown(&o)
            );
            // ...and the real value is nowhere inside (the file not bound).
            assert_eq!(value(&out, "found"), "", "{who:?} {shape}: {}", shown(&o));
        }
    }
    // Positive control: not brokered (broker = off), the same file is
    // bound as it is and the search finds the real token in it: what the
    // line reader's miss let through.
    let o =
        n.w.run_root_raw("echo 'broker = off' >> /etc/claude-sandbox.conf");
    assert!(o.status.success(), "{}", stderr(&o));
    for who in BOTH {
        n.w.put(
            who,
            ".config/gh/hosts.yml",
            &hosts_yml_as_gh_reads_it(&n.reals.gh, 1),
        );
        let o = session(&n, who, &format!("echo \"found={}\"", search(&n)));
        let want = format!("{}/.config/gh/hosts.yml", n.w.home(who).display());
        assert!(
            value(&stdout(&o), "found").contains(&want),
            "{who:?}: {}",
            shown(&o)
        );
    }
}

#[test]
fn a_token_file_the_broker_cannot_read_as_gh_stops_the_launch() {
    if !require("broker_yaml_refused") {
        return;
    }
    // No network is needed: the launch stops before anything is spawned.
    let w = jail_world("brkyamlno", CONF);
    let real = real("gho_", "brkyamlno");
    for who in BOTH {
        for bad in [
            // gh reads the first of a key written twice; the broker refuses.
            format!("github.com:\n    oauth_token: {real}\n    oauth_token: gho_x\n"),
            // gh reads an alias as the anchor's name.
            format!("t: &t {real}\ngithub.com:\n    oauth_token: *t\n"),
        ] {
            let p = w.put(who, ".config/gh/hosts.yml", &bad);
            let o = w.run(who, &[], &["claude", "shell", "echo ran"]);
            assert_eq!(o.status.code(), Some(125), "{who:?}: {}", shown(&o));
            assert!(!stdout(&o).contains("ran"), "{who:?}: {}", shown(&o));
            let e = stderr(&o);
            let line = e
                .lines()
                .find(|l| l.contains("credential broker"))
                .unwrap_or_else(|| panic!("{who:?}: {e}"));
            assert!(
                line.contains(&p.display().to_string())
                    && line.contains("as gh reads it")
                    && line.contains("broker = off")
                    && !line.contains(&real),
                "{who:?}: {e}"
            );
        }
        // The control: the same token written plainly launches.
        w.put(
            who,
            ".config/gh/hosts.yml",
            &format!("github.com:\n    oauth_token: {real}\n"),
        );
        let o = w.run(who, &[], &["claude", "shell", "echo ran"]);
        assert_eq!(stdout(&o), "ran\n", "{who:?}: {}", shown(&o));
    }
}

/// Decision 0030: a Console API key in `~/.claude.json` (the host's own
/// file, read-write inside) is brokered: the session sees a private copy
/// of the file with a stand-in of the key's shape, writes to that copy,
/// and the host's file keeps the real key and nothing the session wrote.
/// Control: with `broker = off` the real key is readable inside.
#[test]
fn a_console_api_key_in_claude_json_is_never_readable_inside() {
    if !require("broker_console_key") {
        return;
    }
    let w = jail_world("brkconsole", CONF);
    let key = real_key("brkconsole");
    let inside = "python3 -c 'import json,os; p=os.path.expanduser(\"~/.claude.json\"); \
        v=json.load(open(p)); print(\"key=\"+v[\"primaryApiKey\"]); v[\"numStartups\"]=7; \
        json.dump(v, open(p, \"w\"))'";
    for who in BOTH {
        let text = format!("{{\"projects\":{{}},\"primaryApiKey\":\"{key}\"}}");
        let p = w.put(who, ".claude.json", &text);
        let o = w.run(who, &[], &["claude", "shell", inside]);
        let out = stdout(&o);
        let seen = value(&out, "key");
        assert!(
            seen.starts_with("sk-ant-api03-") && seen.len() == key.len() && seen != key,
            "{who:?}: {}",
            shown(&o)
        );
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            text,
            "{who:?}: the host's file changed"
        );
    }
    w.run_root_raw("echo 'broker = off' >> /etc/claude-sandbox.conf");
    for who in BOTH {
        w.put(
            who,
            ".claude.json",
            &format!("{{\"projects\":{{}},\"primaryApiKey\":\"{key}\"}}"),
        );
        let o = w.run(who, &[], &["claude", "shell", inside]);
        assert_eq!(
            value(&stdout(&o), "key"),
            key,
            "{who:?}: control: {}",
            shown(&o)
        );
    }
}

fn real_key(salt: &str) -> String {
    real("sk-ant-api03-", salt)
}

/// Decision 0030: an MCP server's OAuth login in Claude Code's credentials
/// file. Inside, its access token is a stand-in that works towards the
/// server's host only; neither it nor the refresh token is readable.
#[test]
fn mcp_oauth_tokens_are_brokered_for_their_server_and_never_inside() {
    if !require("broker_mcp") {
        return;
    }
    let n = net("brkmcp");
    let (access, refresh) = (real("mcpat_", "brkmcp-a"), real("mcprt_", "brkmcp-r"));
    let tokens = n.site.dir.join("auth-token");
    let listed = std::fs::read_to_string(&tokens).unwrap();
    std::fs::write(&tokens, format!("{listed}{access}\n")).unwrap();
    // Positive control: the server takes the real access token from anywhere.
    let bearer = format!("Authorization: Bearer {access}");
    assert_eq!(
        from_host(&n, "allowed.test", "/user", &bearer),
        "authenticated\n"
    );
    let file = format!(
        r#"{{"mcpOAuth":{{"srv|0a1b":{{"serverName":"srv","serverUrl":"https://allowed.test/mcp","accessToken":"{access}","refreshToken":"{refresh}","expiresAt":4102444800000,"clientId":"cid"}}}}}}"#
    );
    let script = format!(
        "A=$(grep -o '\"accessToken\":\"[^\"]*\"' ~/.claude/.credentials.json | cut -d'\"' -f4)\n\
         echo \"standin=$A\"\n\
         echo \"mcp=$(curl -sS -m 10 -H \"Authorization: Bearer $A\" https://allowed.test/user)\"\n\
         echo \"elsewhere=$(curl -sS -m 10 -H \"Authorization: Bearer $A\" https://api.github.com/user)\"\n\
         echo \"found=$(grep -rlsaE '{}|{}' ~ /etc /tmp \"$PWD\" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\n' ' ')\"\n",
        pattern(&access),
        pattern(&refresh)
    );
    for who in BOTH {
        let p = n.w.put(who, ".claude/.credentials.json", &file);
        let o = session(&n, who, &script);
        let out = stdout(&o);
        assert!(o.status.success(), "{who:?}: {}", shown(&o));
        let standin = value(&out, "standin");
        assert!(
            standin.starts_with("mcpat_") && standin.len() == access.len() && standin != access,
            "{who:?}: {out}"
        );
        assert_eq!(
            value(&out, "mcp"),
            "authenticated",
            "{who:?}: {}",
            shown(&o)
        );
        assert_ne!(value(&out, "elsewhere"), "authenticated", "{who:?}: {out}");
        assert_eq!(value(&out, "found"), "", "{who:?}: {}", shown(&o));
        // The host's file is left as it was (nothing of mcpOAuth written back).
        assert_eq!(std::fs::read_to_string(&p).unwrap(), file, "{who:?}");
    }
}

// ---------------------------------------------------------------------------
// forges (issue #25 items 1-2): glab's hosts, gh's GitHub Enterprise hosts,
// GITLAB_TOKEN, and a `broker-host` line; each host's token its own
// credential, swapped only towards its own hosts.

/// Allowlist mode with the forge hosts allowed, `GITLAB_TOKEN` forwarded,
/// and `allowed.test` added to the table for gitlab.com's token.
const FORGES_CONF: &str = "egress = allowlist\nallow-domain = allowed.test\nallow-domain = gitlab.com\nallow-domain = gitlab.example.test\nallow-domain = ghe.example.test\nallow-domains = github\npass-env = GITLAB_TOKEN\nbroker-host = allowed.test gitlab\n";

/// The real forge tokens of a forges world (github.com's is `Net::reals.gh`).
struct ForgeReals {
    ghe: String,
    gitlab: String,
    gitlab_ex: String,
    /// `GITLAB_TOKEN` in the launching environment (for gitlab.com).
    env: String,
    /// A real token in a comment of glab's file (an old one, still valid).
    commented: String,
}

impl ForgeReals {
    fn all<'a>(&'a self, n: &'a Net) -> [&'a str; 6] {
        [
            &n.reals.gh,
            &self.ghe,
            &self.gitlab,
            &self.gitlab_ex,
            &self.env,
            &self.commented,
        ]
    }
}

fn forges_net(name: &str) -> (Net, ForgeReals) {
    let mut lan = Lan::up();
    let site = Site::new(name);
    let reals = Reals {
        gh: real("gho_", name),
        api_key: real("sk-ant-api03-", name),
    };
    let f = ForgeReals {
        ghe: real("ghp_", &format!("{name}-ghe")),
        gitlab: real("glpat-", &format!("{name}-gl")),
        gitlab_ex: real("glpat-", &format!("{name}-glex")),
        env: real("glpat-", &format!("{name}-env")),
        commented: real("glpat-", &format!("{name}-old")),
    };
    let tokens: Vec<&str> = vec![
        &reals.gh,
        &f.ghe,
        &f.gitlab,
        &f.gitlab_ex,
        &f.env,
        &f.commented,
    ];
    std::fs::write(site.dir.join("auth-token"), tokens.join("\n") + "\n").unwrap();
    site.start(&mut lan);
    let w = jail_world(name, FORGES_CONF);
    trust_site(&w, &site);
    for who in BOTH {
        site.ca_into(&w, who);
        w.put(
            who,
            ".config/gh/hosts.yml",
            &format!(
                "github.com:\n    oauth_token: {}\n    user: octo\nghe.example.test:\n    oauth_token: {}\n    git_protocol: https\n    user: octo\n",
                reals.gh, f.ghe
            ),
        );
        w.put(
            who,
            ".config/glab-cli/config.yml",
            &format!(
                "git_protocol: https\nhost: gitlab.com\nhosts:\n    gitlab.com:\n        api_protocol: https\n        api_host: gitlab.com\n        # old: {}\n        token: {}\n    gitlab.example.test:\n        api_host: gitlab.example.test\n        token: \"{}\"\n",
                f.commented, f.gitlab, f.gitlab_ex
            ),
        );
    }
    let n = Net {
        lan,
        site,
        w,
        reals,
    };
    (n, f)
}

/// `script` inside as `who`, `GITLAB_TOKEN` set to its real value outside.
fn forges_session(n: &Net, f: &ForgeReals, who: Who, script: &str) -> Output {
    let cmd = n.w.command_with_setup(
        who,
        &n.w.workspace(who),
        "",
        &[("GITLAB_TOKEN", &f.env)],
        &["claude", "shell", script],
    );
    in_netns(&n.lan.host, &cmd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Inside: the stand-ins of every forge file and of `GITLAB_TOKEN`, each
/// sent to its own host and to another one, a clone over Basic
/// `oauth2:…`, a search for every real value; each result a line.
fn forges_script(n: &Net, f: &ForgeReals) -> String {
    let reals = f.all(n).map(pattern).join("|");
    let curl = "curl -sS -m 10";
    format!(
        "GH=$(sed -n 's/^ *oauth_token: //p' ~/.config/gh/hosts.yml | sed -n 1p)\n\
         GHE=$(sed -n 's/^ *oauth_token: //p' ~/.config/gh/hosts.yml | sed -n 2p)\n\
         GL=$(sed -n 's/^ *token: //p' ~/.config/glab-cli/config.yml | sed -n 1p)\n\
         export GLX=$(sed -n 's/^ *token: //p' ~/.config/glab-cli/config.yml | sed -n 2p)\n\
         echo \"gh=$GH\"; echo \"ghe=$GHE\"; echo \"gl=$GL\"; echo \"glx=$GLX\"; echo \"env=$GITLAB_TOKEN\"\n\
         echo \"mode=$(stat -c %a ~/.config/glab-cli/config.yml)\"\n\
         echo \"gl_private=$({curl} -H \"PRIVATE-TOKEN: $GL\" https://gitlab.com/user)\"\n\
         echo \"glx_bearer=$({curl} -H \"Authorization: Bearer $GLX\" https://gitlab.example.test/user)\"\n\
         echo \"env_private=$({curl} -H \"PRIVATE-TOKEN: $GITLAB_TOKEN\" https://gitlab.com/user)\"\n\
         echo \"ghe_token=$({curl} -H \"Authorization: token $GHE\" https://ghe.example.test/user)\"\n\
         echo \"gh_token=$({curl} -H \"Authorization: token $GH\" https://api.github.com/user)\"\n\
         echo \"clone=$(git -c credential.helper= -c credential.helper='!f() {{ echo username=oauth2; echo password=$GLX; }}; f' \
            clone -q https://gitlab.example.test/private/org/repo.git c 2>&1 && cat c/README)\"\n\
         echo \"gl_to_github=$({curl} -H \"PRIVATE-TOKEN: $GL\" https://github.com/user)\"\n\
         echo \"gl_bearer_to_github=$({curl} -H \"Authorization: Bearer $GL\" https://api.github.com/user)\"\n\
         echo \"gh_to_gitlab=$({curl} -H \"Authorization: token $GH\" https://gitlab.com/user)\"\n\
         echo \"ghe_to_github=$({curl} -H \"Authorization: token $GHE\" https://github.com/user)\"\n\
         echo \"glx_to_gitlab=$({curl} -H \"PRIVATE-TOKEN: $GLX\" https://gitlab.com/user)\"\n\
         echo \"env_to_glx=$({curl} -H \"PRIVATE-TOKEN: $GITLAB_TOKEN\" https://gitlab.example.test/user)\"\n\
         echo \"extra=$({curl} -H \"PRIVATE-TOKEN: $GL\" https://allowed.test/user)\"\n\
         echo \"extra_ghe=$({curl} -H \"Authorization: token $GHE\" https://allowed.test/user)\"\n\
         echo \"found=$(grep -rlsaE '{reals}' ~ /etc /tmp /usr/libexec \"$PWD\" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\n' ' ')\"\n"
    )
}

#[test]
fn every_forge_host_gets_a_standin_that_works_only_towards_its_own_hosts() {
    if !require("broker_forges") {
        return;
    }
    let (n, f) = forges_net("brkforge");
    // Positive control: every real token authenticates from the host, and
    // the search inside finds what it looks for (broker_off's test).
    for (host, header) in [
        ("gitlab.com", format!("PRIVATE-TOKEN: {}", f.gitlab)),
        (
            "ghe.example.test",
            format!("Authorization: token {}", f.ghe),
        ),
        (
            "gitlab.example.test",
            format!("PRIVATE-TOKEN: {}", f.commented),
        ),
    ] {
        assert_eq!(from_host(&n, host, "/user", &header), "authenticated\n");
    }
    for who in BOTH {
        let o = forges_session(&n, &f, who, &forges_script(&n, &f));
        let out = stdout(&o);
        assert!(o.status.success(), "{who:?}: {}", shown(&o));
        let v = |name: &str| value(&out, name).to_string();
        let (gh, ghe, gl, glx, env) = (v("gh"), v("ghe"), v("gl"), v("glx"), v("env"));
        for (standin, real, prefix) in [
            (&gh, &n.reals.gh, "gho_"),
            (&ghe, &f.ghe, "ghp_"),
            (&gl, &f.gitlab, "glpat-"),
            (&glx, &f.gitlab_ex, "glpat-"),
            (&env, &f.env, "glpat-"),
        ] {
            assert!(
                standin.starts_with(prefix) && standin.len() == real.len() && standin != real,
                "{who:?}: {standin} for {prefix}: {}",
                shown(&o)
            );
        }
        // glab refuses a config.yml whose mode is not 600.
        assert_eq!(v("mode"), "600", "{who:?}");
        // Each stand-in works against its own host, in its protocol's headers...
        for name in [
            "gl_private",
            "glx_bearer",
            "env_private",
            "ghe_token",
            "gh_token",
            "extra",
        ] {
            assert_eq!(v(name), "authenticated", "{who:?}: {name}: {}", shown(&o));
        }
        assert_eq!(v("clone"), README.trim_end(), "{who:?}: {}", shown(&o));
        // ...and arrives as itself anywhere else: another forge, another
        // host of the same forge, a broker-host row of another credential.
        for (name, want) in [
            ("gl_to_github", gl.clone()),
            ("gl_bearer_to_github", format!("Bearer {gl}")),
            ("gh_to_gitlab", format!("token {gh}")),
            ("ghe_to_github", format!("token {ghe}")),
            ("glx_to_gitlab", glx.clone()),
            ("env_to_glx", env.clone()),
            ("extra_ghe", format!("token {ghe}")),
        ] {
            assert_eq!(
                v(name),
                format!("got: {want}"),
                "{who:?}: {name}: {}",
                shown(&o)
            );
        }
        // No real value in any file (the commented one included), any
        // environment or command line inside.
        assert_eq!(v("found").trim(), "", "{who:?}: {out}");
        // Copied out and replayed from the host: worthless.
        let replay = from_host(&n, "gitlab.com", "/user", &format!("PRIVATE-TOKEN: {gl}"));
        assert_eq!(replay, format!("got: {gl}\n"), "{who:?}");
        // Each swap a line naming the host's own credential.
        let log = newest_log(&n, who);
        for (host, cred) in [
            ("gitlab.com", "gitlab"),
            ("gitlab.example.test", "gitlab:gitlab.example.test"),
            ("ghe.example.test", "github:ghe.example.test"),
            ("allowed.test", "gitlab"),
        ] {
            assert!(
                log.contains(&format!("\"host\":\"{host}\",\"credential\":\"{cred}\"")),
                "{who:?}: {host} {cred}:\n{log}"
            );
        }
        for real in f.all(&n) {
            assert!(!log.contains(real), "{who:?}: a value in the log");
        }
        // The host's own files are untouched.
        let glab =
            std::fs::read_to_string(n.w.home(who).join(".config/glab-cli/config.yml")).unwrap();
        assert!(
            glab.contains(&f.gitlab) && glab.contains(&f.commented),
            "{who:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// claude oauth (decision 0017): Claude Code's own login brokered, with
// refresh. The test site's token endpoint (`netprobe.py web`, POST
// /v1/oauth/token on platform.claude.com) exchanges only a real refresh
// token, once, and its API (`/user` on api.anthropic.com) accepts only the
// real access tokens.

const OAUTH_CONF: &str = "egress = allowlist\nallow-domain = allowed.test\n";

struct OauthNet {
    lan: Lan,
    site: Site,
    w: World,
    /// The real access and refresh tokens at launch.
    access: String,
    refresh: String,
}

fn credentials_json(access: &str, refresh: &str) -> String {
    format!(
        r#"{{"claudeAiOauth":{{"accessToken":"{access}","refreshToken":"{refresh}","expiresAt":1764000000000,"scopes":["user:inference"],"subscriptionType":"max"}}}}"#
    )
}

fn oauth_net(name: &str) -> OauthNet {
    let mut lan = Lan::up();
    let site = Site::new(name);
    let access = real("sk-ant-oat01-", &format!("{name}-a"));
    let refresh = real("sk-ant-ort01-", &format!("{name}-r"));
    std::fs::write(site.dir.join("auth-token"), format!("{access}\n")).unwrap();
    std::fs::write(site.dir.join("oauth-issued"), "").unwrap();
    site.start(&mut lan);
    let w = jail_world(name, OAUTH_CONF);
    trust_site(&w, &site);
    OauthNet {
        lan,
        site,
        w,
        access,
        refresh,
    }
}

/// A fresh login of `who` on the host (the site's refresh list reset to
/// it): the host's credentials file, mode 0600.
fn fresh_login(n: &OauthNet, who: Who) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(n.site.dir.join("oauth-refresh"), format!("{}\n", n.refresh)).unwrap();
    let p = n.w.put(
        who,
        ".claude/.credentials.json",
        &credentials_json(&n.access, &n.refresh),
    );
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

fn oauth_session(n: &OauthNet, who: Who, script: &str) -> Output {
    let cmd = n.w.command_with_setup(
        who,
        &n.w.workspace(who),
        "",
        &[],
        &["claude", "shell", script],
    );
    in_netns(&n.lan.host, &cmd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// curl from the host's side to `https://HOST/PATH` with `args`.
fn oauth_from_host(n: &OauthNet, host: &str, path: &str, args: &[&str]) -> String {
    let mut c = Command::new("curl");
    c.args(["-sS", "-m", "10", "--cacert"])
        .arg(n.site.ca())
        .args(["--resolve", &format!("{host}:443:203.0.113.10")])
        .args(args)
        .arg(format!("https://{host}{path}"));
    stdout(&in_netns(&n.lan.host, &c).output().unwrap())
}

/// The JSON string field `name` of the text `of`, in shell.
fn field(of: &str, name: &str) -> String {
    format!("$(printf '%s' \"{of}\" | grep -o '\"{name}\":\"[^\"]*\"' | cut -d'\"' -f4)")
}

/// Inside: the stand-ins of the file, the API with the access stand-in, a
/// refresh through the broker and the API with its new stand-in, the
/// hostile requests at the token endpoint, the file rewritten the way
/// Claude Code writes it, a search for the real values.
fn oauth_script(n: &OauthNet) -> String {
    let file = "$(cat ~/.claude/.credentials.json)";
    let refresh_body = "{\\\"grant_type\\\":\\\"refresh_token\\\",\\\"refresh_token\\\":\\\"$R\\\",\\\"client_id\\\":\\\"c\\\"}";
    let in_scope = "{\\\"grant_type\\\":\\\"refresh_token\\\",\\\"refresh_token\\\":\\\"x\\\",\\\"scope\\\":\\\"$R2\\\"}";
    let token = "https://platform.claude.com/v1/oauth/token";
    let json = "-H 'Content-Type: application/json'";
    format!(
        "A={a}; R={r}\n\
         echo \"access=$A\"; echo \"refresh=$R\"\n\
         echo \"api=$(curl -sS -m 10 -H \"Authorization: Bearer $A\" https://api.anthropic.com/user)\"\n\
         OUT=$(curl -sS -m 10 {json} -d \"{refresh_body}\" {token})\n\
         echo \"answer=$OUT\"\n\
         A2={a2}; R2={r2}\n\
         echo \"access2=$A2\"; echo \"refresh2=$R2\"\n\
         echo \"api2=$(curl -sS -m 10 -H \"Authorization: Bearer $A2\" https://api.anthropic.com/user)\"\n\
         echo \"apiold=$(curl -sS -m 10 -H \"Authorization: Bearer $A\" https://api.anthropic.com/user)\"\n\
         echo \"inscope=$(curl -sS -m 10 {json} -d \"{in_scope}\" {token})\"\n\
         curl -sS -m 10 {json} -H 'Transfer-Encoding: chunked' -d \"{{\\\"grant_type\\\":\\\"refresh_token\\\",\\\"refresh_token\\\":\\\"$R2\\\"}}\" {token} >/dev/null 2>&1; echo \"chunked=$?\"\n\
         echo \"other=$(curl -sS -m 10 -H \"Authorization: Bearer $A2\" https://allowed.test/user)\"\n\
         sed \"s/$A/$A2/; s/$R/$R2/\" ~/.claude/.credentials.json > ~/.claude/cred.tmp\n\
         mv ~/.claude/cred.tmp ~/.claude/.credentials.json 2>/dev/null; echo \"rename=$?\"\n\
         cat ~/.claude/cred.tmp > ~/.claude/.credentials.json; echo \"inplace=$?\"; rm -f ~/.claude/cred.tmp\n\
         rm -f ~/.claude/.credentials.json 2>/dev/null; echo \"unlink=$?\"\n\
         echo \"found=$(grep -rlsaE '{pa}|{pr}' ~ /etc /tmp \"$PWD\" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\n' ' ')\"\n",
        a = field(file, "accessToken"),
        r = field(file, "refreshToken"),
        a2 = field("$OUT", "access_token"),
        r2 = field("$OUT", "refresh_token"),
        pa = pattern(&n.access),
        pr = pattern(&n.refresh),
    )
}

#[test]
fn claude_codes_login_is_brokered_and_its_refresh_comes_back_real_to_the_host() {
    if !require("broker_claude_oauth") {
        return;
    }
    let n = oauth_net("brkoauth");
    // Positive control: the site accepts the real access token.
    let bearer = |t: &str| format!("Authorization: Bearer {t}");
    let ok = oauth_from_host(
        &n,
        "api.anthropic.com",
        "/user",
        &["-H", &bearer(&n.access)],
    );
    assert_eq!(ok, "authenticated\n");
    for who in BOTH {
        let host_file = fresh_login(&n, who);
        let o = oauth_session(&n, who, &oauth_script(&n));
        let out = stdout(&o);
        assert!(o.status.success(), "{who:?}: {}", shown(&o));
        let (a, r) = (value(&out, "access"), value(&out, "refresh"));
        assert!(
            a.starts_with("sk-ant-oat01-") && a.len() == n.access.len() && a != n.access,
            "{who:?}: {out}"
        );
        assert!(
            r.starts_with("sk-ant-ort01-") && r != n.refresh,
            "{who:?}: {out}"
        );
        assert_eq!(
            value(&out, "api"),
            "authenticated",
            "{who:?}: {}",
            shown(&o)
        );
        // The refresh: new stand-ins inside (the answer rewritten: compact
        // JSON), and the new access stand-in authenticates.
        let (a2, r2) = (value(&out, "access2"), value(&out, "refresh2"));
        assert!(
            a2.starts_with("sk-ant-oat01-") && a2 != a,
            "{who:?}: {}",
            shown(&o)
        );
        assert!(r2.starts_with("sk-ant-ort01-") && r2 != r, "{who:?}: {out}");
        assert!(
            value(&out, "answer").contains("\"expires_in\":28800"),
            "{who:?}: {out}"
        );
        assert_eq!(
            value(&out, "api2"),
            "authenticated",
            "{who:?}: {}",
            shown(&o)
        );
        assert_eq!(value(&out, "apiold"), "authenticated", "{who:?}: {out}");
        // The stand-in in another field arrives as the stand-in; a chunked
        // token request is refused (the connection ends: curl 52/56).
        let inscope = value(&out, "inscope");
        assert!(
            inscope.contains("invalid_grant") && inscope.contains(r2),
            "{who:?}: {out}"
        );
        assert!(
            ["52", "56"].contains(&value(&out, "chunked")),
            "{who:?}: {out}"
        );
        assert_eq!(
            value(&out, "other"),
            format!("got: Bearer {a2}"),
            "{who:?}: {out}"
        );
        // Claude Code's rename onto the copy fails (EBUSY) and it writes in
        // place: that works, inside only; /logout's unlink fails (EBUSY).
        assert_eq!(
            (
                value(&out, "rename"),
                value(&out, "inplace"),
                value(&out, "unlink")
            ),
            ("1", "0", "1"),
            "{who:?}: {out}"
        );
        assert_eq!(value(&out, "found").trim(), "", "{who:?}: {out}");
        // The host's file: the newest real tokens the site issued, its
        // mode and owner kept, no stand-in; said on stderr.
        let issued = std::fs::read_to_string(n.site.dir.join("oauth-issued")).unwrap();
        let (new_a, new_r) = issued.lines().last().unwrap().split_once(' ').unwrap();
        let host = std::fs::read_to_string(&host_file).unwrap();
        assert!(
            host.contains(&format!(
                "\"accessToken\":\"{new_a}\",\"refreshToken\":\"{new_r}\""
            )),
            "{who:?}: {host}"
        );
        assert!(
            host.contains(
                "\"scopes\":[\"user:inference\",\"user:profile\"],\"subscriptionType\":\"max\""
            ),
            "{who:?}: {host}"
        );
        for s in [a, r, a2, r2] {
            assert!(
                !host.contains(s),
                "{who:?}: a stand-in in the host's file: {host}"
            );
        }
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(&host_file).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600, "{who:?}");
        let uid = if who == Who::User { TEST_UID } else { 0 };
        assert_eq!(meta.uid(), uid, "{who:?}");
        assert!(
            stderr(&o).contains("Claude Code's login was refreshed in the session"),
            "{who:?}: {}",
            shown(&o)
        );
        // Copied out and replayed from the host: worthless. The launch's
        // real refresh token was spent by the refresh (why the write-back).
        let replay = oauth_from_host(&n, "api.anthropic.com", "/user", &["-H", &bearer(a2)]);
        assert_eq!(replay, format!("got: Bearer {a2}\n"), "{who:?}");
        for spent in [r2, n.refresh.as_str()] {
            let body =
                format!("{{\"grant_type\":\"refresh_token\",\"refresh_token\":\"{spent}\"}}");
            let replay = oauth_from_host(
                &n,
                "platform.claude.com",
                "/v1/oauth/token",
                &["-H", "Content-Type: application/json", "-d", &body],
            );
            assert!(replay.contains("invalid_grant"), "{who:?}: {replay}");
        }
        // Each swap logged: host and credential, never a value.
        let log = newest_log_of(&n.w, who);
        for (method, host) in [
            ("GET", "api.anthropic.com"),
            ("POST", "platform.claude.com"),
        ] {
            assert!(
                log.contains(&format!(
                    "\"method\":\"{method}\",\"host\":\"{host}\",\"credential\":\"claude-oauth\""
                )),
                "{who:?}:\n{log}"
            );
        }
        for s in [a, r, a2, r2, new_a, new_r, &n.access, &n.refresh] {
            assert!(!log.contains(s), "{who:?}: a value in the log:\n{log}");
        }
        // The next session starts from the refreshed login.
        let next = oauth_session(
            &n,
            who,
            &format!("A={}; curl -sS -m 10 -H \"Authorization: Bearer $A\" https://api.anthropic.com/user", field("$(cat ~/.claude/.credentials.json)", "accessToken")),
        );
        assert_eq!(
            stdout(&next),
            "authenticated\n",
            "{who:?}: {}",
            shown(&next)
        );
        assert_eq!(
            std::fs::read_to_string(&host_file).unwrap(),
            host,
            "{who:?}: no refresh, no write"
        );
    }
}

/// The newest connection log of `who` in `w`.
fn newest_log_of(w: &World, who: Who) -> String {
    let dir = w.home(who).join(".local/state/claude-sandbox/egress");
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    logs.sort();
    std::fs::read_to_string(logs.last().expect("a log")).unwrap()
}

#[test]
fn real_claude_code_refreshes_its_brokered_login_and_answers() {
    if !require("broker_real_claude_oauth") {
        return;
    }
    let Some(real_bin) = real_claude() else {
        return;
    };
    let mut lan = Lan::up();
    let site = Site::new("brkclaudeoa");
    let access = real("sk-ant-oat01-", "brkclaudeoa-a");
    let refresh = real("sk-ant-ort01-", "brkclaudeoa-r");
    let api_log = fake_api(&mut lan, &site, &access, Some(&refresh));
    let w = real_claude_world(
        "brkclaudeoa",
        &real_bin,
        "egress = allowlist\npass-env = CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC\n",
        &site,
    );
    // Root first, then the user: each starts from the login the one
    // before left in the fake's state (its current refresh token).
    let mut current = refresh.clone();
    for who in BOTH {
        // Expired an hour ago: Claude Code refreshes before it asks.
        let expired = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            - 3_600_000;
        let file = w.put(
            who,
            ".claude/.credentials.json",
            &format!(
                r#"{{"claudeAiOauth":{{"accessToken":"{access}","refreshToken":"{current}","expiresAt":{expired},"scopes":["user:inference","user:profile"],"subscriptionType":"max"}}}}"#
            ),
        );
        let prompt = format!("hello-oauth-{who:?}");
        let cmd = w.command_with_setup(
            who,
            &w.workspace(who),
            "",
            &[("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")],
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
        let lines: Vec<serde_json::Value> = logged
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        // It refreshed with the real refresh token, which it never had...
        let issued = lines
            .iter()
            .rev()
            .find_map(|v| v["issued"].as_array().cloned())
            .unwrap_or_else(|| panic!("{who:?}: no refresh went through:\n{logged}"));
        let (new_a, new_r) = (issued[0].as_str().unwrap(), issued[1].as_str().unwrap());
        // ...and asked with the new real access token it never had either.
        let line = lines
            .iter()
            .find(|v| v["body"].as_str().is_some_and(|b| b.contains(&prompt)))
            .unwrap_or_else(|| panic!("{who:?}: the prompt never reached the API:\n{logged}"));
        assert_eq!(line["key_ok"], true, "{who:?}: {line}");
        // The host's file: the new real tokens.
        let host = std::fs::read_to_string(&file).unwrap();
        assert!(
            host.contains(&format!(
                "\"accessToken\":\"{new_a}\",\"refreshToken\":\"{new_r}\""
            )),
            "{who:?}: {host}\n{}",
            shown(&o)
        );
        current = new_r.to_string();
        let log = newest_log_of(&w, who);
        assert!(
            log.contains("\"host\":\"platform.claude.com\",\"credential\":\"claude-oauth\""),
            "{who:?}:\n{log}"
        );
    }
}

// ---- Issue #25 item 4, "Visible": `egress report` lists the swaps ----

/// `egress report --last` of `who` (text, or `--json`), as the user runs it.
fn report_of(n: &Net, who: Who, json: bool) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_claude-sandbox"));
    c.args(["egress", "report", "--last"]);
    if json {
        c.arg("--json");
    }
    c.env_clear()
        .env("HOME", n.w.home(who))
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap()
}

/// A brokered session's swaps are in `egress report`, per host and
/// credential, text and JSON, with no value in either; lines another
/// process of the user appends to the log (it lies in the user's home)
/// show names only, escaped, and a line whose credential is a value is
/// skipped as no log line.
#[test]
fn egress_report_lists_the_swaps_by_host_and_credential() {
    if !require("broker_report") {
        return;
    }
    let n = net("brkreport");
    let script = "T=$(sed -n 's/^ *oauth_token: //p' ~/.config/gh/hosts.yml | head -1)\n\
         for i in 1 2; do curl -sS -m 10 -o /dev/null -H \"Authorization: token $T\" https://api.github.com/user; done\n\
         curl -sS -m 10 -o /dev/null -H \"x-api-key: $ANTHROPIC_API_KEY\" https://api.anthropic.com/user\n\
         curl -sS -m 10 -o /dev/null -H \"Authorization: token $T\" https://allowed.test/user\n\
         echo \"standin=$T\"\n";
    for who in BOTH {
        let o = session(&n, who, script);
        assert!(o.status.success(), "{who:?}: {}", shown(&o));
        let out = stdout(&o);
        let standin = value(&out, "standin").to_string();
        let key_standin = |s: &str| s.contains("sk-ant-api03-");
        let o = report_of(&n, who, true);
        assert!(o.status.success(), "{who:?}: {}", shown(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(
            v["credentials"],
            serde_json::json!([
                {"host": "api.github.com", "credential": "github", "requests": 2},
                {"host": "api.anthropic.com", "credential": "anthropic-api-key", "requests": 1}
            ]),
            "{who:?}: {v}"
        );
        assert_eq!(v["unreadable_lines"], 0, "{who:?}: {v}");
        let t = report_of(&n, who, false);
        let text = stdout(&t);
        let section = text
            .split("credentials swapped in by the broker:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("{who:?}: no section:\n{text}"));
        let rows: Vec<Vec<&str>> = section
            .lines()
            .take_while(|l| !l.is_empty())
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows,
            [
                vec!["host", "credential", "requests"],
                vec!["api.github.com", "github", "2"],
                vec!["api.anthropic.com", "anthropic-api-key", "1"]
            ],
            "{who:?}:\n{text}"
        );
        for o in [&stdout(&o), &text] {
            for secret in [&n.reals.gh, &n.reals.api_key, &standin] {
                assert!(!o.contains(secret.as_str()), "{who:?}: a value shown:\n{o}");
            }
            assert!(!key_standin(o), "{who:?}: a value shown:\n{o}");
        }
        // Hostile lines appended by another process of the user.
        let dir = n.w.home(who).join(".local/state/claude-sandbox/egress");
        let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        logs.sort();
        let log = logs.last().unwrap();
        let hostile = |host: &str, cred: &str, extra: &str| {
            format!(
                "{{\"time\":\"2026-11-26T05:00:00.000Z\",\"session\":\"x\",\"event\":\"credential\",\"method\":\"GET\",\"host\":\"{host}\",{extra}\"credential\":\"{cred}\"}}\n"
            )
        };
        let mut f = std::fs::OpenOptions::new().append(true).open(log).unwrap();
        use std::io::Write;
        f.write_all(
            [
                hostile("evil\\u001b]0;pwned\\u0007.test", "github", ""),
                hostile("api.github.com", &n.reals.gh, ""),
                hostile(
                    "api.github.com",
                    "github",
                    &format!("\"value\":\"{}\",", n.reals.gh),
                ),
                hostile(&"h".repeat(300), "github", ""),
            ]
            .concat()
            .as_bytes(),
        )
        .unwrap();
        drop(f);
        let o = report_of(&n, who, true);
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v["unreadable_lines"], 2, "{who:?}: {v}");
        let t = stdout(&report_of(&n, who, false));
        assert!(
            t.lines()
                .any(|l| l.split_whitespace().eq(["api.github.com", "github", "3"])),
            "{who:?}: the line claiming a value counts by its names:\n{t}"
        );
        assert!(
            t.contains("evil\\u{1b}]0;pwned\\u{7}.test"),
            "{who:?}:\n{t}"
        );
        for o in [&stdout(&o), &t] {
            assert!(!o.contains(&n.reals.gh), "{who:?}: a value shown:\n{o}");
            assert!(
                !o.contains('\u{1b}') && !o.contains('\u{7}'),
                "{who:?}:\n{o}"
            );
        }
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
        stops_without_a_bundle(&w, who);
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

// ---------------------------------------------------------------------------
// host /proc: where the kernel refuses the sandbox a /proc of its own, the
// session sees the host's PIDs. The shell that started `claude` holds the
// real `ANTHROPIC_API_KEY` in its environment; the kernel must keep it from
// a session in a user namespace of its own (reading another namespace's
// process environment takes CAP_SYS_PTRACE there).

/// Run `script` inside as `who` from a shell (`sh -c`, not exec'd away)
/// whose own environment holds the real `ANTHROPIC_API_KEY`, with the
/// kernel refusing a fresh /proc; the shell's PID is in `ppid`, and the
/// shell first shows (`own=`) that it can read that key in its own
/// /proc environment.
fn host_proc_session(n: &Net, who: Who, script: &str) -> Output {
    let line = format!(
        "echo $$ > ppid; echo \"own=$(tr '\\0' '\\n' < /proc/$$/environ | grep -c '^ANTHROPIC_API_KEY=sk-ant-api03-')\"; claude shell {}; echo \"exit=$?\"",
        shell_quote(script)
    );
    let cmd = n.w.command_with_setup(
        who,
        &n.w.workspace(who),
        REFUSE_FRESH_PROC,
        &[("ANTHROPIC_API_KEY", &n.reals.api_key)],
        &["sh", "-c", &line],
    );
    in_netns(&n.lan.host, &cmd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn with_the_hosts_proc_the_launching_shells_key_stays_unreadable() {
    if !require("broker_host_proc") {
        return;
    }
    let n = net("brkhostproc");
    let look = format!(
        "echo \"nspid=$(awk '/^NSpid:/{{print NF - 1}}' /proc/self/status)\"; \
         echo \"parent=$(cat /proc/$(cat ppid)/environ >/dev/null 2>&1 && echo readable || echo refused)\"; \
         echo \"key=$ANTHROPIC_API_KEY\"; \
         echo \"found={}\"",
        search(&n)
    );
    for who in BOTH {
        let o = host_proc_session(&n, who, &look);
        let out = stdout(&o);
        assert!(out.contains("exit=0"), "{who:?}: {}", shown(&o));
        // Behind the wall: the launching shell holds the real key, readable
        // to the same user outside.
        assert_eq!(value(&out, "own"), "1", "{who:?}: {}", shown(&o));
        // The session sees the host's PIDs, the shell's among them...
        assert_eq!(value(&out, "nspid"), "2", "{who:?}: host /proc: {out}");
        // ...but not its environment, and nothing real anywhere.
        assert_eq!(value(&out, "parent"), "refused", "{who:?}: {out}");
        assert_ne!(value(&out, "key"), n.reals.api_key, "{who:?}");
        assert!(
            value(&out, "key").starts_with("sk-ant-api03-"),
            "{who:?}: {out}"
        );
        assert_eq!(value(&out, "found").trim(), "", "{who:?}: {out}");
    }
}
