//! End-to-end: `claude-sandbox verify` (issue #5) inside a real sandbox with
//! the egress jail on, on the private site network of `tests/testnet`;
//! outside any sandbox; and against deliberate regressions (debug-build
//! test mutations, see src/testhooks.rs), each of which must turn exactly
//! its own check to FAIL.

mod common;
use common::lan::*;
use common::*;

use serde_json::Value;

const BATTERY: &str = "/usr/libexec/claude-sandbox/claude-sandbox";

/// A world with the probe as the real binary and the jail on (the default),
/// and the managed settings as install writes them.
fn verify_world(name: &str) -> World {
    let w = World::with_default_root_view(name);
    w.install_by_hand(&w.root.join("bin/probe"), "");
    install_managed_settings(&w);
    gateway_resolver(&w);
    w
}

/// The LAN's gateway as the world's resolver: internal, so the jail's DNS
/// goes through pasta's forwarder, which `dns-forwarder-only` then checks.
fn gateway_resolver(w: &World) {
    let o =
        w.run_root_raw("rm -f /etc/resolv.conf && echo 'nameserver 10.77.0.1' > /etc/resolv.conf");
    assert!(o.status.success(), "{}", stderr(&o));
}

/// The managed settings as install writes them, lockdown included, in `w`.
fn install_managed_settings(w: &World) {
    let (managed, _) = claude_sandbox::fuzz_targets::hooks::merge_managed(None, false).unwrap();
    std::fs::write(w.root.join("bin/managed.json"), managed).unwrap();
    let o = w.run_root_raw(&format!(
        "mkdir -p /etc/claude-code && install -m 0644 {}/bin/managed.json /etc/claude-code/managed-settings.json",
        w.root.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
}

/// [`verify_world`] with the binary that has the deliberate regressions.
fn mutated_verify_world(name: &str) -> World {
    let w = World::with_default_root_view(name);
    w.use_mutation_binary();
    w.install_by_hand(&w.root.join("bin/probe"), "");
    gateway_resolver(&w);
    w
}

/// Run `verify ARGS` inside the sandbox, launched through `claude` in the
/// LAN's "devcontainer" namespace, whose own loopback has a service listening.
fn verify_inside(
    w: &World,
    lan: &Lan,
    who: Who,
    env: &[(&str, &str)],
    args: &str,
) -> std::process::Output {
    let cmd = w.command(
        who,
        env,
        &["claude", "shell", &format!("{BATTERY} verify {args}")],
    );
    in_netns(&lan.host, &cmd).output().unwrap()
}

/// The JSON report: one object per check.
fn checks(o: &std::process::Output) -> Vec<Value> {
    let v: Value = serde_json::from_str(&stdout(o)).unwrap_or_else(|e| {
        panic!(
            "verify --json did not parse ({e}): {}{}",
            stdout(o),
            stderr(o)
        )
    });
    v.as_array().expect("a JSON array").clone()
}

fn failing(checks: &[Value]) -> Vec<String> {
    checks
        .iter()
        .filter(|c| c["status"] == "FAIL")
        .map(|c| {
            format!(
                "{}: {}",
                c["name"].as_str().unwrap(),
                c["detail"].as_str().unwrap()
            )
        })
        .collect()
}

/// A jail-side loopback service the sandbox must not reach.
const LOOPBACK_SERVICE: &str = "127.0.0.1:9191";

fn lan_with_loopback_service() -> Lan {
    let mut lan = Lan::up();
    let h = lan.host.clone();
    lan.listen(
        &h,
        &[
            "serve",
            LOOPBACK_SERVICE,
            "HOST-LOOPBACK-SECRET",
            LISTEN_SECS,
        ],
    );
    lan.wait_listening(&h, &[LOOPBACK_SERVICE], &[]);
    lan
}

#[test]
fn inside_a_jailed_sandbox_every_check_passes_for_root_and_user() {
    if !require("verify_inside") {
        return;
    }
    let lan = lan_with_loopback_service();
    let w = verify_world("verifyok");
    for who in BOTH {
        let o = verify_inside(&w, &lan, who, &[], "--json");
        let c = checks(&o);
        assert!(c.len() >= 20, "{who:?}: only {} checks", c.len());
        for (i, check) in c.iter().enumerate() {
            assert_eq!(check["id"], i + 1, "{who:?}: ids are 1..N in order");
            for k in ["name", "status", "detail"] {
                assert!(check[k].is_string(), "{who:?}: {k} missing in {check}");
            }
        }
        assert_eq!(failing(&c), Vec::<String>::new(), "{who:?}: {}", stderr(&o));
        assert_eq!(
            o.status.code(),
            Some(0),
            "{who:?}: exit status is the failure count"
        );
        // The loopback check really tried the devcontainer's own service.
        let lb = c
            .iter()
            .find(|x| x["name"] == "host-loopback-unreachable")
            .unwrap();
        assert!(
            !lb["detail"].as_str().unwrap().contains(" 0 host loopback"),
            "{who:?}: the loopback service was not among those tried: {lb}"
        );
        let ms = c
            .iter()
            .find(|x| x["name"] == "managed-settings-inside")
            .unwrap();
        assert!(
            ms["detail"]
                .as_str()
                .unwrap()
                .contains("without the lockdown, guard hooks kept"),
            "{who:?}: {ms}"
        );
        let jr = c.iter().find(|x| x["name"] == "jail-routes").unwrap();
        assert!(
            !jr["detail"].as_str().unwrap().contains("deliberately off"),
            "{who:?}: the jail was on: {jr}"
        );
        // The forwarder was in use, and its ports were looked up.
        let fw = c
            .iter()
            .find(|x| x["name"] == "dns-forwarder-only")
            .unwrap();
        assert!(
            fw["detail"]
                .as_str()
                .unwrap()
                .starts_with("169.254.0.53: UDP port 53 routed"),
            "{who:?}: {fw}"
        );
    }
    // The table a person reads ends with the summary.
    let o = verify_inside(&w, &lan, Who::Root, &[], "");
    let out = stdout(&o);
    let last = out.lines().last().unwrap_or_default();
    assert!(
        last.ends_with(" PASS / 0 FAIL"),
        "summary line: {last:?} in {out}"
    );
    assert!(out.contains("PASS  strict-home"), "{out}");
}

/// Allowlist mode (issue #15): every check passes for root and user, the
/// allowlist's own check says what it tried; a proxy that lets verify's
/// name through fails exactly that check.
#[test]
fn inside_an_allowlist_sandbox_every_check_passes_and_an_open_proxy_fails() {
    if !require("verify_allowlist") {
        return;
    }
    let lan = lan_with_loopback_service();
    let w = World::with_default_root_view("verifyallow");
    w.use_mutation_binary();
    w.install_by_hand(&w.root.join("bin/probe"), "egress = allowlist\n");
    install_managed_settings(&w);
    // Names resolve (if ever) only inside the test network.
    let o =
        w.run_root_raw("rm -f /etc/resolv.conf && echo 'nameserver 10.77.0.1' > /etc/resolv.conf");
    assert!(o.status.success(), "{}", stderr(&o));
    for who in BOTH {
        let o = verify_inside(&w, &lan, who, &[], "--json");
        let c = checks(&o);
        assert_eq!(failing(&c), Vec::<String>::new(), "{who:?}: {}", stderr(&o));
        let detail = |n: &str| {
            c.iter().find(|x| x["name"] == n).unwrap()["detail"]
                .as_str()
                .unwrap()
                .to_string()
        };
        let a = detail("egress-allowlist");
        assert!(
            a.contains("no route at all") && a.contains("refused (HTTP/1.1 403"),
            "{who:?}: {a}"
        );
        assert!(
            detail("jail-routes").contains("egress = allowlist"),
            "{who:?}"
        );
        let lb = detail("host-loopback-unreachable");
        assert!(!lb.contains(" 0 host loopback"), "{who:?}: {lb}");
    }
    let o = verify_inside(
        &w,
        &lan,
        Who::Root,
        &[("CLAUDE_SANDBOX_TEST_MUTATION", "allowlist-open")],
        "--json",
    );
    let f = failing(&checks(&o));
    assert_eq!(f.len(), 1, "allowlist-open: {f:#?}");
    assert!(
        f[0].starts_with("egress-allowlist: the proxy did not refuse"),
        "{f:#?}"
    );
}

#[test]
fn jail_checks_pass_with_a_note_when_the_jail_is_deliberately_off() {
    if !require("verify_jail_off") {
        return;
    }
    let w = World::with_probe_default_root_view("verifyoff");
    let o = w.run(
        Who::User,
        &[],
        &["claude", "shell", &format!("{BATTERY} verify --json")],
    );
    let c = checks(&o);
    assert_eq!(failing(&c), Vec::<String>::new(), "{}", stderr(&o));
    for name in [
        "jail-routes",
        "internal-unroutable",
        "no-ipv6",
        "host-loopback-unreachable",
    ] {
        let x = c.iter().find(|x| x["name"] == name).unwrap();
        assert!(
            x["detail"].as_str().unwrap().contains("deliberately off"),
            "{name}: {x}"
        );
    }
}

/// A host with a Docker socket under /run (and one a daemon re-creates
/// after the launch): run-masked passes, since /run inside is a fresh tmpfs,
/// and verify judges sockets by stat through the mount, not by the host's
/// directory entries.
#[test]
fn run_masked_passes_on_a_host_with_a_docker_socket() {
    if !require("verify_docker_socket") {
        return;
    }
    let w = World::with_probe_default_root_view("verifysock");
    let netprobe = netprobe_in(&w).display().to_string();
    let listen = |p: &str| {
        format!(
            "python3 {netprobe} unix-serve {p} TOKEN 30 >/dev/null 2>&1 &\n\
             for i in $(seq 50); do [ -S {p} ] && break; sleep 0.1; done\n"
        )
    };
    let setup = format!(
        "mount -t tmpfs tmpfs /run && mkdir -p /run/docker\n{}{}",
        listen("/run/docker.sock"),
        listen("/run/docker/containerd.sock")
    );
    for who in BOTH {
        let o = w
            .command_with_setup(
                who,
                &w.workspace(who),
                &setup,
                &[],
                &[
                    "claude",
                    "shell",
                    &format!("ls -A /run >&2; {BATTERY} verify --json"),
                ],
            )
            .output()
            .unwrap();
        let listing = stderr(&o);
        assert!(
            !listing.contains("docker"),
            "{who:?}: /run inside shows the host's: {listing}"
        );
        let c = checks(&o);
        let run = c.iter().find(|x| x["name"] == "run-masked").unwrap();
        assert_eq!(run["status"], "PASS", "{who:?}: {run}");
    }
}

#[test]
fn outside_any_sandbox_verify_fails_and_names_the_missing_defences() {
    if !require("verify_outside") {
        return;
    }
    // Run straight on this machine (read-only: it looks, sends no packet).
    let o = std::process::Command::new(our_binary())
        .arg("verify")
        .env_remove("IS_SANDBOX")
        .output()
        .unwrap();
    let out = stdout(&o);
    assert_ne!(o.status.code(), Some(0), "{out}");
    for name in ["inside-marker", "no-new-privs", "capabilities-dropped"] {
        assert!(
            out.lines().any(|l| l.contains("FAIL") && l.contains(name)),
            "{name} not failed outside: {out}"
        );
    }
    let fails = out.lines().filter(|l| l.contains("  FAIL  ")).count();
    assert_eq!(
        o.status.code(),
        Some(fails as i32),
        "exit status = failures: {out}"
    );
    // A forged IS_SANDBOX=1 changes nothing.
    let o = std::process::Command::new(our_binary())
        .args(["verify", "--json"])
        .env("IS_SANDBOX", "1")
        .output()
        .unwrap();
    let f = failing(&checks(&o));
    assert!(f.iter().any(|l| l.starts_with("inside-marker")), "{f:?}");
}

#[test]
fn each_deliberate_regression_fails_exactly_its_check() {
    if !require("verify_regressions") {
        return;
    }
    let lan = lan_with_loopback_service();
    let w = mutated_verify_world("verifyreg");
    w.put(Who::Root, ".ssh/id_ed25519", "DECOY-SSH-KEY\n");
    // Claude Code's runtime state on the host, masked by a tmpfs inside;
    // its ~/.claude, under which ~/.claude/local is masked.
    w.put(Who::Root, ".local/share/claude/versions", "host state\n");
    w.put(Who::Root, ".claude/settings.json", "{}\n");
    install_managed_settings(&w);
    // A protected path in the workspace, and the user's own cache; the
    // workspace a repository (its hooks held, issue #44).
    std::fs::create_dir_all(w.workspace(Who::Root).join(".vscode")).unwrap();
    let o = w.run(Who::Root, &[], &["git", "init", "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    w.put(Who::Root, ".cache/host-cache", "host\n");
    // A root-only file in the world's /etc (its own overlay), masked for root.
    let o = w.run_root_raw("echo root-only > /etc/csb-root-only && chmod 600 /etc/csb-root-only");
    assert!(o.status.success(), "{}", stderr(&o));
    let cases: &[(&str, &[&str])] = &[
        ("bind-ssh", &["strict-home"]),
        ("pass-gh-token", &["token-env-absent"]),
        ("tmp-not-tmpfs", &["tmp-tmpfs"]),
        ("keep-caps", &["capabilities-dropped"]),
        ("jail-no-172", &["jail-routes"]),
        // The forwarder routed on every port (before issue #24).
        ("forwarder-all-ports", &["dns-forwarder-only"]),
        // Masks the plan takes from its tables; verify reads the same tables.
        // (/etc/shadow is root-only too, so a root launch masks it twice.)
        (
            "drop-mount=/etc/shadow",
            &["masked-files-empty", "root-view"],
        ),
        ("drop-mount=~/.local/share/claude", &["strict-home"]),
        ("drop-mount=/etc/csb-root-only", &["root-view"]),
        ("unprotect", &["protected-paths"]),
        // Without the guard or its git rule nothing is held either.
        (
            "unguarded",
            &["protected-creation", "git-rule", "git-held", "git-worktree"],
        ),
        ("no-git-rule", &["git-rule", "git-held", "git-worktree"]),
        ("no-held", &["git-held"]),
        ("unsupervised-bind", &["git-rule"]),
        ("worktree-unkept", &["git-worktree"]),
        ("host-state", &["private-state"]),
        ("allow-userns", &["no-nested-userns"]),
        // The filter before issue #13: TIOCSTI and keyrings still refused
        // (and PID 1 reachable).
        ("seccomp-minimal", &["syscalls-refused", "pid1-sealed"]),
        // PID 1 (bubblewrap's init, unfiltered): traced, or its memory
        // opened for writing.
        ("pid1-open", &["pid1-sealed"]),
        // The creation guard now serves opens that write, and refuses
        // another process's /proc entries: the binds over PID 1's memory
        // files are shown to matter with it off too.
        (
            "unguarded,drop-mount=/proc/1/mem,drop-mount=/proc/1/task/1/mem",
            &[
                "protected-creation",
                "pid1-sealed",
                "git-rule",
                "git-held",
                "git-worktree",
            ],
        ),
        ("accept-env-overrides", &["env-overrides"]),
        // The sandbox's view of the managed settings, without the lockdown.
        (
            "drop-mount=/etc/claude-code/managed-settings.json",
            &["managed-settings-inside"],
        ),
        // ~/.claude/local, where the old launcher alias looks (issue #24).
        ("drop-mount=~/.claude/local", &["strict-home"]),
        // Issue #24: no process limit put in force; no tmpfs sized.
        ("no-pids-limit", &["pids-limit"]),
        ("tmpfs-unsized", &["tmpfs-sized"]),
    ];
    for &(mutation, expected) in cases {
        let mut env = vec![
            ("CLAUDE_SANDBOX_TEST_MUTATION", mutation),
            ("GH_TOKEN", "ghp_decoy_token"),
        ];
        if mutation == "accept-env-overrides" {
            // A weakening override the configuration does not allow.
            env.push(("CLAUDE_SANDBOX_PASS_ENV", "CSB_HARMLESS"));
        }
        let o = verify_inside(&w, &lan, Who::Root, &env, "--json");
        let f = failing(&checks(&o));
        let names: Vec<&str> = f.iter().map(|l| l.split(':').next().unwrap()).collect();
        assert_eq!(names, expected, "{mutation}: exactly these FAIL: {f:#?}");
        // verify exits with the number of FAILs.
        assert_eq!(o.status.code(), Some(expected.len() as i32), "{mutation}");
    }
    // The kernel's root-only files (issue #24): without the mask over
    // /sys/firmware, the ACPI tables read inside, where the machine has them.
    let acpi_root_only = std::fs::read_dir("/sys/firmware/acpi/tables").is_ok_and(|d| {
        use std::os::unix::fs::PermissionsExt;
        d.flatten().any(|e| {
            e.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o004 == 0)
        })
    });
    if acpi_root_only {
        let mutation = "drop-mount=/sys/firmware";
        let o = verify_inside(
            &w,
            &lan,
            Who::Root,
            &[("CLAUDE_SANDBOX_TEST_MUTATION", mutation)],
            "--json",
        );
        let f = failing(&checks(&o));
        let names: Vec<&str> = f.iter().map(|l| l.split(':').next().unwrap()).collect();
        assert_eq!(
            names,
            ["root-view"],
            "{mutation}: exactly these FAIL: {f:#?}"
        );
    }
    // The real binary changed after install, launched anyway.
    let o = w.run_root_raw("printf x >> /usr/libexec/claude-sandbox/claude");
    assert!(o.status.success(), "{}", stderr(&o));
    let refused = verify_inside(&w, &lan, Who::Root, &[], "--json");
    assert_eq!(
        refused.status.code(),
        Some(126),
        "the shadow refuses a changed binary"
    );
    let o = verify_inside(
        &w,
        &lan,
        Who::Root,
        &[("CLAUDE_SANDBOX_TEST_MUTATION", "skip-pin-check")],
        "--json",
    );
    let f = failing(&checks(&o));
    assert_eq!(f.len(), 1, "skip-pin-check: {f:#?}");
    assert!(f[0].starts_with("real-binary-pinned: "), "{f:#?}");
}

#[test]
fn the_battery_is_off_path_root_owned_and_read_only_inside() {
    if !require("verify_battery_ro") {
        return;
    }
    let w = World::with_probe_default_root_view("verifyro");
    let o = w.run_root_raw(&format!(
        "stat -c '%u %a' {BATTERY} /usr/libexec/claude-sandbox"
    ));
    assert_eq!(
        stdout(&o),
        "0 755\n0 755\n",
        "root-owned 0755: {}",
        stderr(&o)
    );
    let script = format!(
        "command -v claude-sandbox && echo ON-PATH; \
         for t in 'printf x >> {BATTERY}' 'truncate -s 0 {BATTERY}' 'chmod 777 {BATTERY}' \
                  'mv {BATTERY} /usr/libexec/claude-sandbox/moved' 'rm -f {BATTERY}' \
                  'cp /bin/true /usr/libexec/claude-sandbox/planted' 'touch {BATTERY}'; do \
           if sh -c \"$t\" 2>/dev/null; then echo \"MODIFIED by: $t\"; fi; \
         done; sha256sum {BATTERY}"
    );
    let before = stdout(&w.run_root_raw(&format!("sha256sum {BATTERY}")));
    for who in BOTH {
        let o = w.run(who, &[], &["claude", "shell", &script]);
        let out = stdout(&o);
        assert!(
            !out.contains("ON-PATH"),
            "{who:?}: the battery is on PATH: {out}"
        );
        assert!(!out.contains("MODIFIED"), "{who:?}: {out}");
        assert!(
            out.contains(before.split_whitespace().next().unwrap()),
            "{who:?}: {out}"
        );
    }
    assert_eq!(
        stdout(&w.run_root_raw(&format!("sha256sum {BATTERY}"))),
        before
    );
}

// ---- Issue #25, "Visible": check 39 broker-no-real-values ----

/// A credential of `prefix` and 36 characters of this test's own: never
/// in the repository.
fn broker_real(prefix: &str) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(format!("verify-broker-{prefix}-{}", std::process::id()));
    let tail: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}{}", &tail[..36])
}

/// Check 39 of a `verify --json` run: (status, detail).
fn check_39(o: &std::process::Output) -> (String, String) {
    let c = checks(o);
    let x = c
        .iter()
        .find(|x| x["name"] == "broker-no-real-values")
        .unwrap_or_else(|| panic!("no check broker-no-real-values: {}", stdout(o)));
    assert_eq!(x["id"], 39);
    (
        x["status"].as_str().unwrap().to_string(),
        x["detail"].as_str().unwrap().to_string(),
    )
}

/// The number before ` candidates compared` in a PASS detail.
fn candidates_in(detail: &str) -> u64 {
    detail
        .split(" candidates compared")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no candidate count in: {detail}"))
}

/// In an allowlist session whose broker holds the GitHub token and
/// `ANTHROPIC_API_KEY`, every check passes for root and the user, and
/// check 39 says it compared the stand-ins it found (in `hosts.yml` and the
/// environments) against both credentials' digests. With the real
/// `hosts.yml` bound over the stand-in copy (`broker-real-file`) exactly
/// check 39 fails, naming the credential and the file, never the value.
/// `broker = off`: a PASS that says so.
#[test]
fn broker_no_real_values_passes_brokered_and_fails_with_the_real_file_bound() {
    if !require("verify_broker") {
        return;
    }
    let lan = lan_with_loopback_service();
    let w = World::with_default_root_view("verifybrk");
    w.use_mutation_binary();
    w.install_by_hand(
        &w.root.join("bin/probe"),
        "egress = allowlist\npass-env = ANTHROPIC_API_KEY\n",
    );
    install_managed_settings(&w);
    gateway_resolver(&w);
    let gh = broker_real("gho_");
    let key = broker_real("sk-ant-api03-");
    for who in BOTH {
        w.put(
            who,
            ".config/gh/hosts.yml",
            &format!(
                "github.com:\n    oauth_token: {gh}\n    git_protocol: https\n    user: octo\n"
            ),
        );
        let env = [("ANTHROPIC_API_KEY", key.as_str())];
        let o = verify_inside(&w, &lan, who, &env, "--json");
        let c = checks(&o);
        assert_eq!(failing(&c), Vec::<String>::new(), "{who:?}: {}", stderr(&o));
        let (status, detail) = check_39(&o);
        assert_eq!(status, "PASS", "{who:?}: {detail}");
        assert!(
            detail.contains("2 brokered credentials (github, anthropic-api-key)"),
            "{who:?}: {detail}"
        );
        // The stand-ins are candidates: in hosts.yml, and in the
        // environment of verify and the shell that ran it.
        assert!(candidates_in(&detail) >= 3, "{who:?}: {detail}");
        // The real file bound in: exactly this check fails.
        let env = [
            ("ANTHROPIC_API_KEY", key.as_str()),
            ("CLAUDE_SANDBOX_TEST_MUTATION", "broker-real-file"),
        ];
        let o = verify_inside(&w, &lan, who, &env, "--json");
        let f = failing(&checks(&o));
        let names: Vec<&str> = f.iter().map(|l| l.split(':').next().unwrap()).collect();
        assert_eq!(names, ["broker-no-real-values"], "{who:?}: {f:#?}");
        assert_eq!(o.status.code(), Some(1), "{who:?}");
        let (_, detail) = check_39(&o);
        let file = w.home(who).join(".config/gh/hosts.yml");
        assert!(
            detail.ends_with(&format!("github in {}", file.display())),
            "{who:?}: {detail}"
        );
        assert!(
            !stdout(&o).contains(&gh) && !stdout(&o).contains(&key),
            "{who:?}: a value shown"
        );
    }
    // Issue #45, decision 0030: an MCP server's login is brokered (its
    // access token) and masked (its refresh token); check 39 knows both,
    // so a copy of the masked one planted where the session reads it is
    // reported by its name, never its value.
    let (access, refresh) = (broker_real("mcpat_"), broker_real("mcprt_"));
    w.put(
        Who::User,
        ".claude/.credentials.json",
        &format!(
            r#"{{"mcpOAuth":{{"s|1":{{"serverUrl":"https://mcp.example.test/x","accessToken":"{access}","refreshToken":"{refresh}"}}}}}}"#
        ),
    );
    let leak = w.workspace(Who::User).join("leak.txt");
    std::fs::write(&leak, format!("kept: {refresh}\n")).unwrap();
    let env = [("ANTHROPIC_API_KEY", key.as_str())];
    let o = verify_inside(&w, &lan, Who::User, &env, "--json");
    let (status, detail) = check_39(&o);
    assert_eq!(status, "FAIL", "{detail}");
    assert!(
        detail.ends_with(&format!("masked in {}", leak.display())),
        "{detail}"
    );
    assert!(!stdout(&o).contains(&refresh) && !stdout(&o).contains(&access));
    std::fs::remove_file(&leak).unwrap();
    std::fs::remove_file(w.home(Who::User).join(".claude/.credentials.json")).unwrap();
    let o = w.run_root_raw("echo 'broker = off' >> /etc/claude-sandbox.conf");
    assert!(o.status.success(), "{}", stderr(&o));
    let o = verify_inside(
        &w,
        &lan,
        Who::User,
        &[("ANTHROPIC_API_KEY", &key)],
        "--json",
    );
    let (status, detail) = check_39(&o);
    assert_eq!(status, "PASS", "{detail}");
    assert!(
        detail.starts_with("deliberately off (broker = off)"),
        "{detail}"
    );
}
