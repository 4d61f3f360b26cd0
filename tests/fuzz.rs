//! Property tests of the parsers that take input from outside (issue #10
//! §3): the configuration parser with its environment overrides, the hooks'
//! managed-settings merge (and the sandbox's view of its result), and
//! promote's JSONC editor. Each runs for a time
//! budget: `CSB_FUZZ_SECS` seconds (default 20: the CI budget), `just fuzz`
//! sets 600. Inputs are generated from each format's grammar (so most of
//! them get deep into the parser) and then mutated at the byte level
//! (truncated, spliced, a byte flipped), next to plain arbitrary strings.
//! Properties: never a panic; what is accepted is consistent (an edit is
//! idempotent, a merge yields JSON). A failure prints the shrunk input;
//! each one found becomes a regression test in the module it concerns.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use claude_sandbox::fuzz_targets::{config, hooks, promote};

fn budget() -> Duration {
    let secs = std::env::var("CSB_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    Duration::from_secs(secs)
}

/// Run `test` on inputs from `strategy` until the budget is spent; returns
/// how many cases ran. Panics (with the shrunk input) on the first failure.
fn run_for<S: Strategy>(
    name: &str,
    strategy: S,
    test: impl Fn(S::Value) -> Result<bool, TestCaseError>,
) -> u64
where
    S::Value: std::fmt::Debug,
{
    let deadline = Instant::now() + budget();
    let accepted = std::sync::atomic::AtomicU64::new(0);
    let counted = |v: S::Value| {
        if test(v)? {
            accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    };
    let mut total = 0u64;
    while Instant::now() < deadline {
        // A fresh runner per batch: a runner stops after `cases`, and each
        // new one draws a new random seed.
        let mut runner = TestRunner::new(Config {
            cases: 512,
            failure_persistence: None,
            ..Config::default()
        });
        if let Err(e) = runner.run(&strategy, counted) {
            panic!("{name}: {e}");
        }
        total += 512;
    }
    let accepted = accepted.into_inner();
    eprintln!(
        "{name}: {total} cases in {:?} ({accepted} accepted by the parser), no failure",
        budget()
    );
    // Most generated inputs must get through the parser, or the properties
    // about accepted input would test nothing.
    assert!(
        accepted * 10 >= total,
        "{name}: only {accepted} of {total} inputs were accepted"
    );
    total
}

/// Byte-level damage to a text: truncate, drop a range, insert junk, flip.
fn mutated(text: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    (
        text,
        any::<u8>(),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        ".{0,8}",
    )
        .prop_map(|(t, op, a, b, junk)| {
            let bytes = t.as_bytes();
            if bytes.is_empty() {
                return junk;
            }
            let i = a.index(bytes.len());
            let j = b.index(bytes.len());
            let (lo, hi) = (i.min(j), i.max(j));
            let out: Vec<u8> = match op % 5 {
                0 => bytes[..lo].to_vec(),
                1 => [&bytes[..lo], &bytes[hi..]].concat(),
                2 => [&bytes[..lo], junk.as_bytes(), &bytes[lo..]].concat(),
                3 => {
                    let mut v = bytes.to_vec();
                    v[lo] ^= 1 << (op % 8);
                    v
                }
                _ => bytes.to_vec(),
            };
            String::from_utf8_lossy(&out).into_owned()
        })
}

/// Configuration text: mostly well-formed lines of every key (so parsing
/// gets past the first line), some of any shape.
fn config_text() -> impl Strategy<Value = String> {
    let path = "(/[a-zA-Z0-9._~ -]{1,10}){1,4}";
    let valid = prop_oneof![
        path.prop_map(|p| format!("workspace-root = {p}")),
        path.prop_map(|p| format!("allow-write = {p}")),
        "(0|1|true|false|yes|no|on|off)?".prop_map(|v| format!("no-forge = {v}")),
        "(0|1|true|false|yes|no|on|off)".prop_map(|v| format!("egress-jail={v}")),
        "(open|allowlist|off|on|)".prop_map(|v| format!("egress = {v}")),
        "(\\*\\.)?[a-z0-9-]{1,8}(\\.[a-z0-9-]{1,8}){0,2}(:[0-9]{1,6})?"
            .prop_map(|v| format!("allow-domain = {v}")),
        "(github|npm|pypi|crates|debian|ubuntu|go|nope)([, ]+(github|go|x)){0,2}"
            .prop_map(|v| format!("allow-domains = {v}")),
        "(0|1|true|false|yes|no|on|off)?".prop_map(|v| format!("allow-env-overrides = {v}")),
        "[A-Z][A-Z_0-9]{0,8}([, ]+[A-Z][A-Z_0-9]{0,8}){0,3}"
            .prop_map(|v| format!("pass-env = {v}")),
        (0u8..=255, 0u8..=255, 0u8..=255, 0u8..=255)
            .prop_map(|(a, b, c, d)| format!("allow-ip = {a}.{b}.{c}.{d}")),
        "#.{0,20}",
        Just(String::new()),
    ];
    let any_line = (
        "[a-z-]{0,14}",
        prop_oneof![Just(" = "), Just("="), Just(" "), Just("")],
        ".{0,20}",
    )
        .prop_map(|(k, eq, v)| format!("{k}{eq}{v}"));
    let line = prop_oneof![12 => valid, 1 => any_line];
    prop::collection::vec(line, 0..8).prop_map(|ls| ls.join("\n"))
}

#[test]
fn config_parser_and_environment_never_panic() {
    let strategy = prop_oneof![
        3 => config_text(),
        2 => mutated(config_text()),
        1 => any::<String>(),
    ];
    let env_value = prop_oneof![
        Just(None),
        "(/[a-z]{0,6}){0,3}".prop_map(Some),
        "(0|1|)".prop_map(Some),
        "(open|allowlist|off)".prop_map(Some),
        "[a-z]{1,6}\\.test(,[a-z]{1,4}\\.test)?".prop_map(Some),
        ".{0,12}".prop_map(Some),
    ];
    let env = prop::collection::vec(env_value, 8);
    run_for("config", (strategy, env), |(text, env)| {
        let _ = config::parse(&text, "fuzz.conf");
        let names = [
            config::ENV_WORKSPACE_ROOT,
            config::ENV_NO_FORGE,
            config::ENV_ALLOW_WRITE,
            config::ENV_PASS_ENV,
            config::ENV_EGRESS_JAIL,
            config::ENV_ALLOW_IP,
            config::ENV_EGRESS,
            config::ENV_ALLOW_DOMAIN,
        ];
        let lookup = |name: &str| -> Option<OsString> {
            let i = names.iter().position(|n| *n == name)?;
            env[i].clone().map(OsString::from)
        };
        if let Ok(cfg) = config::parse(&text, "fuzz.conf") {
            let file = cfg.clone();
            let cwd = std::path::Path::new("/a");
            if let Ok(l) = config::apply_env(cfg, &lookup, &|p| p == cwd) {
                let cfg = l.config;
                // What is accepted is usable: no relative path slips through.
                prop_assert!(cfg.allow_write.iter().all(|p| p.is_absolute()));
                prop_assert!(cfg.workspace_root.iter().all(|p| p.is_absolute()));
                // No variable sets the opt-in; without it, the environment
                // gave the sandbox nothing the file did not.
                prop_assert_eq!(cfg.allow_env_overrides, file.allow_env_overrides);
                if !file.allow_env_overrides {
                    prop_assert!(l.weakened.is_empty());
                    prop_assert!(cfg.egress >= file.egress);
                    prop_assert!(cfg
                        .allow_domain
                        .iter()
                        .all(|r| file.allow_domain.contains(r)));
                    prop_assert!(cfg.no_forge || !file.no_forge);
                    prop_assert!(cfg.allow_write.iter().all(|p| file.allow_write.contains(p)));
                    prop_assert!(cfg.allow_ip.iter().all(|p| file.allow_ip.contains(p)));
                    prop_assert!(cfg.pass_env.iter().all(|p| file.pass_env.contains(p)));
                    prop_assert!(
                        cfg.workspace_root.is_none()
                            || cfg.workspace_root == file.workspace_root
                            || cfg.workspace_root.as_deref() == Some(cwd)
                    );
                }
            }
            return Ok(true);
        }
        Ok(false)
    });
}

/// A JSON value of any shape (for settings and devcontainer files).
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(Value::from),
        "[a-zA-Z0-9 /:._-]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        let key = object_key();
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::Array),
            object(key, inner),
        ]
    })
}

fn object_key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("hooks".to_string()),
        Just("SessionStart".to_string()),
        Just("UserPromptSubmit".to_string()),
        Just("env".to_string()),
        Just("command".to_string()),
        Just("features".to_string()),
        Just("runArgs".to_string()),
        Just("allowManagedHooksOnly".to_string()),
        Just("allowedMcpServers".to_string()),
        Just("apiKeyHelper".to_string()),
        "[a-zA-Z]{0,8}",
    ]
}

fn object(
    key: impl Strategy<Value = String>,
    value: impl Strategy<Value = serde_json::Value>,
) -> impl Strategy<Value = serde_json::Value> {
    prop::collection::btree_map(key, value, 0..5)
        .prop_map(|m| serde_json::Value::Object(m.into_iter().collect()))
}

/// A JSON object at the top, any value inside (what settings files hold).
fn json_object() -> impl Strategy<Value = serde_json::Value> {
    object(object_key(), json_value())
}

#[test]
fn managed_settings_merge_never_panics_and_is_idempotent() {
    let text = || json_object().prop_map(|v| serde_json::to_string_pretty(&v).unwrap());
    let strategy = prop_oneof![3 => text(), 2 => mutated(text()), 1 => any::<String>()];
    run_for(
        "managed-settings",
        (strategy, any::<bool>()),
        |(text, wrapper): (String, bool)| {
            if let Ok((merged, added)) = hooks::merge_managed(Some(&text), wrapper) {
                let v: serde_json::Value = serde_json::from_str(&merged)
                    .map_err(|e| TestCaseError::fail(format!("merge wrote invalid JSON: {e}")))?;
                prop_assert!(v.is_object());
                prop_assert!(merged.contains(hooks::PROMPT_GATE_CMD));
                let (again, _) = hooks::merge_managed(Some(&merged), wrapper)
                    .map_err(|e| TestCaseError::fail(format!("own output refused: {e}")))?;
                prop_assert_eq!(&again, &merged, "a second merge changed the text");
                let _ = hooks::unmerge_managed(&merged, &added);
                // The sandbox's view: the guard stays, the lockdown goes,
                // never longer than the host's file, and stable.
                let inside = hooks::inside_managed(&merged)
                    .ok_or_else(|| TestCaseError::fail("the merge's output has no inside view"))?;
                prop_assert!(inside.len() <= merged.len());
                prop_assert!(inside.contains(hooks::PROMPT_GATE_CMD));
                let iv: serde_json::Value = serde_json::from_str(&inside).map_err(|e| {
                    TestCaseError::fail(format!("inside view is invalid JSON: {e}"))
                })?;
                prop_assert!(iv.get("allowManagedHooksOnly").is_none(), "{}", inside);
                prop_assert!(
                    iv.get("apiKeyHelper") != Some(&serde_json::json!(hooks::API_KEY_HELPER_CMD))
                );
                prop_assert_eq!(hooks::inside_managed(&inside), Some(inside.clone()));
                return Ok(true);
            }
            // Whatever install refuses, the launch's view never panics.
            let _ = hooks::inside_managed(&text);
            Ok(false)
        },
    );
}

/// devcontainer.json as people write it: JSONC with comments, trailing
/// commas and odd spacing around a JSON value.
fn jsonc_text() -> impl Strategy<Value = String> {
    (
        json_object(),
        any::<u8>(),
        prop::collection::vec("(//[^\n]{0,10}\n|/\\*[^*]{0,10}\\*/|\\s{0,3}|,)", 0..6),
    )
        .prop_map(|(v, seed, decorations)| {
            let mut s = serde_json::to_string_pretty(&v).unwrap();
            // Scatter the decorations after structural characters, from the
            // end backwards so earlier offsets stay valid.
            let positions: Vec<usize> = s
                .char_indices()
                .filter(|(_, c)| matches!(c, '{' | '[' | ',' | '\n'))
                .map(|(i, _)| i + 1)
                .collect();
            if positions.is_empty() {
                return s;
            }
            let mut picks: Vec<(usize, &String)> = decorations
                .iter()
                .enumerate()
                .map(|(n, d)| (positions[(n * 7 + seed as usize) % positions.len()], d))
                .collect();
            picks.sort_by_key(|p| std::cmp::Reverse(p.0));
            for (at, d) in picks {
                s.insert_str(at, d);
            }
            s
        })
}

#[test]
fn promote_jsonc_editor_never_panics_and_is_idempotent() {
    let strategy = prop_oneof![3 => jsonc_text(), 2 => mutated(jsonc_text()), 1 => any::<String>()];
    run_for("promote-jsonc", strategy, |text| {
        if let Ok(out) = promote::edit(&text) {
            prop_assert!(
                out.contains(promote::FEATURE_REF),
                "feature missing:\n{}",
                out
            );
            let again = promote::edit(&out)
                .map_err(|e| TestCaseError::fail(format!("own output refused: {e:?}")))?;
            prop_assert_eq!(&again, &out, "a second edit changed the text");
            return Ok(true);
        }
        Ok(false)
    });
}

/// Hosts as clients write them, and some they should not.
fn host_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9-]{1,8}(\\.[a-z0-9-]{1,8}){0,3}\\.?",
        "(allowed|denied)\\.test",
        "[A-Za-z]{1,5}\\.(ALLOWED|allowed)\\.test",
        "\\[[0-9a-f:]{2,12}\\]",
        "[0-9]{1,3}(\\.[0-9]{1,3}){3}",
        ".{0,12}",
    ]
}

/// Request heads as tools send them to a proxy: CONNECT, absolute-form with
/// headers (Host among them, proxy headers too), some odd.
fn request_head() -> impl Strategy<Value = Vec<u8>> {
    let port = prop_oneof![
        Just(String::new()),
        (0u32..70000).prop_map(|p| format!(":{p}"))
    ];
    let header = prop_oneof![
        host_text().prop_map(|h| format!("Host: {h}")),
        Just("Proxy-Connection: keep-alive".to_string()),
        Just("Proxy-Authorization: Basic eDp5".to_string()),
        Just("Connection: Upgrade".to_string()),
        Just("Connection: close".to_string()),
        Just("Content-Length: 5".to_string()),
        Just("Content-Length: +5".to_string()),
        Just("Transfer-Encoding: chunked".to_string()),
        Just("Transfer-Encoding: gzip, chunked".to_string()),
        "[A-Za-z-]{1,10}: [ -~]{0,20}",
    ];
    (
        prop_oneof![
            Just("CONNECT".to_string()),
            Just("GET".to_string()),
            Just("POST".to_string()),
            "[A-Z]{1,8}"
        ],
        host_text(),
        port,
        "(/[a-z0-9._~%?=&-]{0,10}){0,3}",
        prop::collection::vec(header, 0..5),
        prop_oneof![
            Just("http://".to_string()),
            Just("HTTP://".to_string()),
            Just("https://".to_string()),
            Just(String::new())
        ],
    )
        .prop_map(|(method, host, port, path, headers, scheme)| {
            let target = if method == "CONNECT" {
                format!("{host}{port}")
            } else {
                format!("{scheme}{host}{port}{path}")
            };
            let mut s = format!("{method} {target} HTTP/1.1\r\n");
            for h in headers {
                s.push_str(&h);
                s.push_str("\r\n");
            }
            s.push_str("\r\n");
            s.into_bytes()
        })
}

#[test]
fn proxy_request_parser_never_panics_and_forwards_one_clean_head() {
    use claude_sandbox::fuzz_targets::egress::{parse_head, verdict};
    let strategy = prop_oneof![
        3 => request_head(),
        2 => mutated(request_head().prop_map(|b| String::from_utf8_lossy(&b).into_owned()))
            .prop_map(String::into_bytes),
        1 => prop::collection::vec(any::<u8>(), 0..200),
    ];
    const RULES: &[&str] = &["allowed.test", "*.wild.test", "git.test:8443"];
    run_for("proxy-request", strategy, |head| {
        let Ok((method, host, port, forward)) = parse_head(&head) else {
            return Ok(false);
        };
        prop_assert!(port != 0);
        if let Some(f) = forward {
            let f = String::from_utf8_lossy(&f).into_owned();
            prop_assert!(f.starts_with(&format!("{method} /")), "{f:?}");
            prop_assert!(f.ends_with("\r\n\r\n"), "{f:?}");
            let lines: Vec<String> = f.split("\r\n").map(|l| l.to_ascii_lowercase()).collect();
            // Exactly one Host, and it is the host the proxy decided on.
            let hosts: Vec<&String> = lines.iter().filter(|l| l.starts_with("host:")).collect();
            prop_assert_eq!(hosts.len(), 1, "{:?}", f);
            prop_assert!(
                !lines
                    .iter()
                    .any(|l| l.starts_with("proxy-") || l.starts_with("connection: upgrade")),
                "{:?}",
                f
            );
            // One framing at most, written by the proxy: never both, never twice.
            let te = lines
                .iter()
                .filter(|l| l.starts_with("transfer-encoding:"))
                .count();
            let cl = lines
                .iter()
                .filter(|l| l.starts_with("content-length:"))
                .count();
            prop_assert!(te + cl <= 1, "{:?}", f);
            prop_assert!(
                te == 0 || lines.iter().any(|l| l == "transfer-encoding: chunked"),
                "{:?}",
                f
            );
            prop_assert!(
                lines
                    .iter()
                    .filter(|l| l.starts_with("connection:"))
                    .all(|l| l == "connection: close"),
                "{:?}",
                f
            );
        }
        // The verdict, against a plain model of the rules.
        let h = host.to_ascii_lowercase();
        let h = h.strip_suffix('.').unwrap_or(&h);
        let under = |name: &str| h.len() > name.len() && h.ends_with(&format!(".{name}"));
        // Only a DNS name is ever allowed by name.
        let dns = h.len() <= 253
            && h.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        // Without a port, a rule opens tunnels to 443 and plain http to 80.
        let connect = method == "CONNECT";
        let web = port == if connect { 443 } else { 80 };
        let model = dns
            && ((web && (h == "allowed.test" || under("allowed.test") || under("wild.test")))
                || ((h == "git.test" || under("git.test")) && port == 8443));
        let got = verdict(RULES, &host, port, connect);
        prop_assert_eq!(got.is_ok(), model, "{}:{} -> {:?}", host, port, got);
        Ok(true)
    });
}

#[test]
fn egress_report_never_panics_on_any_log() {
    use claude_sandbox::fuzz_targets::egress::report_json;
    let line = prop_oneof![
        3 => (
            host_text(),
            any::<u16>(),
            prop_oneof![Just("allowed".to_string()), Just("refused".to_string()), Just("maybe".to_string())],
            0u64..u64::MAX,
            0u32..100_000,
            "2026-11-2[0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]\\.[0-9]{3}Z|garbage",
            (any::<bool>(), any::<bool>()),
        )
            .prop_map(|(host, port, decision, bytes, ms, time, (error, open))| {
                let mut v = serde_json::json!({
                    "time": time, "session": "s", "method": "CONNECT", "host": host,
                    "port": port, "address": null, "decision": decision, "reason": "r",
                    "bytes_up": bytes, "bytes_down": bytes, "duration_ms": ms
                });
                if error {
                    v["error"] = "cannot connect".into();
                }
                if open {
                    v["open"] = true.into();
                }
                let mut line = v.to_string();
                if open {
                    line.push_str("    ");
                }
                line.into_bytes()
            }),
        1 => prop::collection::vec(any::<u8>(), 0..120),
    ];
    let strategy = prop::collection::vec(line, 0..40);
    run_for("egress-report", strategy, |lines| {
        let out: serde_json::Value = serde_json::from_str(&report_json(&lines)).unwrap();
        let n = |k: &str| out[k].as_u64().unwrap();
        prop_assert_eq!(n("requests"), n("allowed") + n("failed") + n("refused"));
        prop_assert!(n("open") <= n("requests"));
        prop_assert_eq!(
            out["failures"].as_array().unwrap().len() as u64,
            n("failed")
        );
        prop_assert_eq!(n("requests") + n("unreadable_lines"), lines.len() as u64);
        prop_assert_eq!(
            out["refusals"].as_array().unwrap().len() as u64,
            n("refused")
        );
        prop_assert!(out["risk"]["score"].as_u64().unwrap() <= 100);
        Ok(true)
    });
}

/// A git config file from git's grammar, with its odd corners: section and
/// key names in any case, quoted subsections with escapes, the old
/// `[section.sub]` form, keys on a header's line, quoting, escapes (known
/// and unknown), continuations, comments, CRLF, non-UTF-8 bytes and lines
/// git refuses.
fn git_config_text() -> impl Strategy<Value = Vec<u8>> {
    let name = "(core|Alias|fIlTeR|remote|url|includeIf|include|protocol|x-y|a1|-x|1a|)";
    let sub = prop_oneof![
        Just(String::new()),
        "[a-zA-Z0-9 .:/!-]{0,6}".prop_map(|s| format!(" \"{s}\"")),
        "([a-zA-Z .#;]|\\\\[\"\\\\nqt]|\t){0,5}".prop_map(|s| format!("\t\"{s}\"")),
        "[a-zA-Z0-9.-]{0,5}".prop_map(|s| format!(".{s}")),
        "[a-z]{1,3}".prop_map(|s| format!(".{s} \"{s}\"")),
    ];
    let header = (name, sub, "( |\t)?", "(\\]|\\] |\\]\\[a\\]|)")
        .prop_map(|(n, s, sp, close)| format!("[{n}{s}{sp}{close}"));
    let key = "(fsmonitor|hooksPath|PATH|helper|x-y|k|K2|1k|-k|k_k)";
    let piece = prop_oneof![
        4 => "[a-zA-Z!:/.=-]{1,5}".prop_map(String::into_bytes),
        2 => "( |\t){1,3}".prop_map(String::into_bytes),
        2 => "\"[a-z #;\\\\]{0,4}\"?".prop_map(String::into_bytes),
        2 => "\\\\[nbt\"\\\\q ]".prop_map(String::into_bytes),
        1 => "(\\\\\n|\\\\\r\n|\\\\)( |\t)?".prop_map(String::into_bytes),
        1 => "( |\t)?(#|;)[a-z \"]{0,4}".prop_map(String::into_bytes),
        1 => prop::collection::vec(128u8..=255, 1..3),
        1 => Just(b"\r".to_vec()),
    ];
    let value = prop::collection::vec(piece, 0..6).prop_map(|ps| ps.concat());
    let entry = (
        "( |\t){0,2}",
        key,
        "( |\t){0,2}",
        prop_oneof![
            3 => value.prop_map(Ok),
            1 => "(| |\t|#c| ;c| y|\ty)".prop_map(Err),
        ],
    )
        .prop_map(|(ind, k, sp, v)| {
            let mut out = format!("{ind}{k}{sp}").into_bytes();
            match v {
                Ok(v) => {
                    out.push(b'=');
                    out.extend(v);
                }
                // A bare key, and what may follow it on its line.
                Err(after) => out.extend(after.into_bytes()),
            }
            out
        });
    let line = prop_oneof![
        2 => header.clone().prop_map(String::into_bytes),
        6 => entry.clone(),
        1 => (header, entry).prop_map(|(h, e)| [h.into_bytes(), e].concat()),
        1 => "( |\t)*(#|;).{0,6}".prop_map(String::into_bytes),
        1 => Just(Vec::new()),
        1 => ".{0,8}".prop_map(String::into_bytes),
    ];
    let ending = prop_oneof![5 => Just(&b"\n"[..]), 1 => Just(&b"\r\n"[..])];
    (
        "(\u{feff})?\\[[a-zA-Z]{1,5}\\]\n",
        prop::collection::vec((line, ending), 0..8),
    )
        .prop_map(|(first, ls)| {
            let mut out = first.into_bytes();
            for (l, e) in ls {
                out.extend(l);
                out.extend_from_slice(e);
            }
            out
        })
}

/// Bytes that print as escaped text when a case fails.
#[derive(Clone, PartialEq)]
struct Text(Vec<u8>);

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "b\"{}\"", self.0.escape_ascii())
    }
}

/// Entries, printable.
fn shown(e: &[(Vec<u8>, Option<Vec<u8>>)]) -> Vec<(Text, Option<Text>)> {
    e.iter()
        .map(|(k, v)| (Text(k.clone()), v.clone().map(Text)))
        .collect()
}

/// What git itself reads from config file `path`: `Some(entries)` as
/// `git config --list --null` prints them, `None` when git refuses it.
#[allow(clippy::type_complexity)]
fn git_reads(
    path: &std::path::Path,
    home: &std::path::Path,
) -> Option<Vec<(Vec<u8>, Option<Vec<u8>>)>> {
    let out = std::process::Command::new("git")
        .args(["config", "--list", "--null", "--no-includes", "--file"])
        .arg(path)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    if !out.status.success() {
        return None;
    }
    let mut records: Vec<&[u8]> = out.stdout.split(|&b| b == 0).collect();
    assert_eq!(records.pop(), Some(&b""[..]), "git's output ends in NUL");
    Some(
        records
            .into_iter()
            .map(|r| match r.iter().position(|&b| b == b'\n') {
                Some(i) => (r[..i].to_vec(), Some(r[i + 1..].to_vec())),
                None => (r.to_vec(), None),
            })
            .collect(),
    )
}

/// The key names and values the git config reader sees are git's own
/// (`git config --list --file`), and every file git refuses is refused
/// (`Err`): where gix-config and git disagree, the reader fails closed.
#[test]
fn git_config_reader_reads_what_git_reads_or_refuses() {
    use claude_sandbox::fuzz_targets::gitconfig::{entries, unlisted_keys};
    let dir = std::env::temp_dir().join(format!("csb-fuzz-gitconfig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config");
    let strategy = prop_oneof![
        6 => git_config_text(),
        2 => mutated(git_config_text().prop_map(|b| String::from_utf8_lossy(&b).into_owned()))
            .prop_map(String::into_bytes),
        1 => prop::collection::vec(any::<u8>(), 0..40),
    ]
    .prop_map(Text);
    let refused_but_git_reads = std::sync::atomic::AtomicU64::new(0);
    run_for("git-config-reader", strategy, |Text(bytes)| {
        std::fs::write(&file, &bytes).unwrap();
        let ours = entries(&bytes);
        prop_assert_eq!(ours.is_ok(), unlisted_keys(&bytes).is_ok());
        match (git_reads(&file, &dir), ours) {
            (None, Ok(e)) => prop_assert!(false, "git refuses, we read {:?}", shown(&e)),
            (Some(git), Ok(e)) => prop_assert_eq!(shown(&git), shown(&e)),
            (Some(_), Err(_)) => {
                refused_but_git_reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            (None, Err(_)) => {}
        }
        Ok(entries(&bytes).is_ok())
    });
    eprintln!(
        "git-config-reader: {} files git reads were refused (fail closed)",
        refused_but_git_reads.into_inner()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// One `hosts.yml` generated from YAML's odd corners as gh reads them: the
/// file's text and every token written in it (comments included).
#[derive(Debug, Clone)]
struct GhHosts {
    text: String,
    tokens: Vec<String>,
}

/// A token `n` of the generated file: distinct from every other one.
fn gh_token(n: usize, tail: &str) -> String {
    format!("gho_{n}x{tail}")
}

/// `oauth_token` written as gh reads it in many ways (and some it does not).
fn gh_token_entry(n: usize) -> impl Strategy<Value = (String, Vec<String>)> {
    let key = prop_oneof![
        Just("oauth_token:"),
        Just("\"oauth_token\":"),
        Just("'oauth_token':"),
        Just("oauth_token :"),
        Just("oauth_token  :"),
        Just("OAuth_Token:"),
        Just("\"oauth_\\x74oken\":"),
    ];
    let value = prop_oneof![
        6 => Just("{t}"),
        4 => Just("\"{t}\""),
        2 => Just("'{t}'"),
        2 => Just("\"{t}\\u0021\""),
        2 => Just("&a{n} {t}"),
        2 => Just("!!str {t}"),
        2 => Just("{t} # was {old}"),
        2 => Just("\"{t}\" # {old}"),
        1 => Just("*a0"),
        1 => Just("|\n        {t}"),
        1 => Just("\t{t}"),
    ];
    let sp = prop_oneof![1 => Just(""), 4 => Just(" "), 1 => Just("  ")];
    (key, sp, value, "[A-Za-z0-9]{8,20}").prop_map(move |(k, sp, v, tail)| {
        let t = gh_token(n, &tail);
        let old = gh_token(n + 50, &tail);
        let v = v
            .replace("{t}", &t)
            .replace("{old}", &old)
            .replace("{n}", &n.to_string());
        (format!("{k}{sp}{v}"), vec![t, old])
    })
}

fn gh_hosts_text() -> impl Strategy<Value = GhHosts> {
    let host = prop_oneof![
        4 => Just("github.com"),
        2 => Just("ghe.example.test"),
        1 => Just("\"github.com\""),
        1 => Just("'ghe.example.test'"),
        1 => Just("GitHub.com"),
    ];
    let other = prop_oneof![
        Just("user: octo".to_string()),
        Just("git_protocol: https".to_string()),
        Just("# a comment: oauth_token: gho_COMMENTED0".to_string()),
        Just("users:\n        octo: {}".to_string()),
    ];
    let block = (
        host,
        prop::collection::vec(other, 0..3),
        prop::collection::vec((0usize..6).prop_flat_map(gh_token_entry), 1..3).prop_map(|mut v| {
            // Mostly one token a host: two are refused (a key twice).
            if v.len() > 1 && v[0].0.len() % 3 != 0 {
                v.truncate(1);
            }
            v
        }),
        any::<bool>(),
        prop_oneof![Just("  "), Just("    ")],
    )
        .prop_map(|(h, others, entries, flow, ind)| {
            let mut tokens = vec!["gho_COMMENTED0".to_string()];
            let mut lines: Vec<String> = others;
            for (e, t) in entries {
                lines.push(e);
                tokens.extend(t);
            }
            let text = if flow && lines.iter().all(|l| !l.contains(['\n', '#', '|'])) {
                format!("{h}: {{{}}}\n", lines.join(", "))
            } else {
                let body: Vec<String> = lines.iter().map(|l| format!("{ind}{l}")).collect();
                format!("{h}:\n{}\n", body.join("\n"))
            };
            (text, tokens)
        });
    (
        "(|# gh's file\n|---\n)",
        prop_oneof![3 => prop::collection::vec(block.clone(), 1..2), 1 => prop::collection::vec(block, 2..3)],
        "(|\n|---\n|# end: gho_COMMENTED0\n)",
    )
        .prop_map(|(head, blocks, tail)| {
            let mut text = head;
            let mut tokens = Vec::new();
            for (b, t) in blocks {
                text.push_str(&b);
                tokens.extend(t);
            }
            text.push_str(&tail);
            GhHosts { text, tokens }
        })
}

/// `gh auth token --hostname host` on `hosts.yml` `text`, in `dir` (a
/// temporary HOME and GH_CONFIG_DIR, never the machine's own).
fn gh_reads(dir: &std::path::Path, text: &str, host: &str) -> Option<String> {
    std::fs::write(dir.join("gh/hosts.yml"), text).unwrap();
    let out = std::process::Command::new("gh")
        .args(["auth", "token", "--hostname", host])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir)
        .env("GH_CONFIG_DIR", dir.join("gh"))
        .output()
        .expect("gh runs");
    let t = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !t.is_empty()).then_some(t)
}

/// Issue #45: every token `gh auth token` reads from a generated
/// `hosts.yml` is one the broker found for that host, or the broker
/// refuses the file; the sandbox's copy gives gh the stand-in, never a
/// real value, and holds none of the file's tokens (comments included).
#[test]
fn gh_hosts_reader_reads_what_gh_reads_or_refuses() {
    use claude_sandbox::fuzz_targets::broker::{gh_copy, gh_tokens};
    if std::process::Command::new("gh")
        .arg("--version")
        .output()
        .is_err()
    {
        let msg = "gh is not installed (Debian's package `gh`)";
        assert!(
            std::env::var_os("CI").is_none(),
            "{msg}; CI is set: a failure"
        );
        eprintln!("\n!!!! SKIPPED gh_hosts_reader_reads_what_gh_reads_or_refuses: {msg} !!!!\n");
        return;
    }
    let dir = std::env::temp_dir().join(format!("csb-fuzz-gh-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("gh")).unwrap();
    let check = |h: &GhHosts| -> Result<bool, TestCaseError> {
        let ours = match gh_tokens(&h.text) {
            Ok(t) => t,
            Err(e) => {
                prop_assert!(!e.contains('\n'), "one line: {}", e);
                return Ok(false);
            }
        };
        let pairs: Vec<(String, String)> = ours
            .iter()
            .enumerate()
            .map(|(i, (_, t))| (t.clone(), format!("gho_STANDIN{i:04}")))
            .collect();
        let copy = gh_copy(&h.text, &pairs).unwrap();
        for t in &h.tokens {
            prop_assert!(!copy.contains(t.as_str()), "{} in the copy:\n{}", t, copy);
        }
        for host in ["github.com", "ghe.example.test"] {
            let Some(real) = gh_reads(&dir, &h.text, host) else {
                continue;
            };
            prop_assert!(
                ours.contains(&(host.to_string(), real.clone())),
                "gh reads {} for {}, the broker found {:?}",
                real,
                host,
                ours
            );
            let inside = gh_reads(&dir, &copy, host);
            let want = pairs
                .iter()
                .find(|(r, _)| *r == real)
                .map(|(_, s)| s.clone());
            prop_assert_eq!(inside, want, "gh on the copy:\n{}", copy);
        }
        Ok(true)
    };
    // The finding's own files first (positive controls of the old reader's
    // miss): gh reads each, so the broker must find the token.
    for text in [
        "github.com:\n    \"oauth_token\": gho_FINDING1quoted\n",
        "github.com:\n    oauth_token : gho_FINDING2spaced\n",
    ] {
        let h = GhHosts {
            text: text.into(),
            tokens: vec![],
        };
        assert_eq!(
            gh_reads(&dir, text, "github.com")
                .as_deref()
                .map(|t| t.len() > 4),
            Some(true)
        );
        assert_eq!(check(&h).map_err(|e| e.to_string()), Ok(true), "{text}");
    }
    let cases: u32 = std::env::var("CSB_GH_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64);
    let accepted = std::sync::atomic::AtomicU32::new(0);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let r = runner.run(&gh_hosts_text(), |h| {
        if check(&h)? {
            accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = r {
        panic!("gh-hosts-reader: {e}");
    }
    let accepted = accepted.into_inner();
    eprintln!("gh-hosts-reader: {cases} files, {accepted} read by the broker, the rest refused");
    assert!(
        accepted * 5 >= cases,
        "only {accepted} of {cases} files were read"
    );
}
