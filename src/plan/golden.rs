//! The rendered plan for a table of configurations, compared with the
//! output recorded before the typed-sandbox refactor (issue #11): the
//! bubblewrap argv exactly as `claude-sandbox plan` prints it, plus the
//! contents of the data fds (launch record, resolv.conf, route batch).
//! `CSB_BLESS=1 cargo test --lib golden` rewrites tests/fixtures/plan/.
//! The text goes through the same `plan_text` the `plan` subcommand prints.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use sha2::Digest;

use crate::config::Config;
use crate::egress::policy::{HostRoutes, JailFacts, Resolv};
use crate::plan::fixtures::facts;
use crate::plan::{self, Facts, ProcMode};
use crate::sandbox::FdContent;

fn site() -> HostRoutes {
    HostRoutes {
        iface: "eth0".into(),
        gateway: Ipv4Addr::new(10, 77, 0, 1),
        connected: vec![(Ipv4Addr::new(10, 77, 0, 0), 24)],
    }
}

fn with_record(mut f: Facts) -> Facts {
    f.existing
        .insert(PathBuf::from(crate::sys::paths::LAUNCH_RECORD));
    f.launcher_ns.insert("net".into(), 4026531840);
    f.host_loopback_tcp = vec![22, 8080];
    f
}

/// What `claude-sandbox plan` prints, plus the data fds, for one case.
fn render(cfg: &Config, facts: &Facts, resolv: &Resolv, args: &[&str]) -> String {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    let mut facts = facts.clone();
    facts.jail = Some(JailFacts {
        routes: site(),
        resolv: resolv.clone(),
        resolv_missing: false,
    });
    let sb = plan::build(cfg, &facts, &args).unwrap();
    let mut out = crate::cli::plan_text(&sb, false).unwrap();
    let r = crate::sandbox::render(&sb);
    let seccomp = r
        .args
        .windows(2)
        .find(|w| w[0] == "--seccomp")
        .map(|w| w[1].to_string_lossy().into_owned());
    let mut data: Vec<(i32, &Vec<u8>)> = r
        .fds
        .iter()
        .filter_map(|(n, c)| match c {
            FdContent::Bytes(b) => Some((*n, b)),
            _ => None,
        })
        .collect();
    data.sort();
    for (fd, bytes) in data {
        if Some(fd.to_string()) == seccomp {
            // The filter is this machine's architecture's (x86_64 and i386
            // ABIs, or aarch64 and arm); the table records the x86_64 one.
            // Elsewhere the plan must carry this machine's sandbox filter,
            // and the line shows the x86_64 filter it stands for.
            let guarded = *bytes == crate::seccomp::guarded_program_bytes();
            let x86 = crate::seccomp::x86_64_program_bytes(guarded);
            let bytes = if cfg!(target_arch = "x86_64") {
                bytes
            } else {
                assert!(
                    guarded || *bytes == crate::seccomp::program_bytes(),
                    "fd {fd}"
                );
                &x86
            };
            out.push_str(&format!(
                "=== fd {fd}: seccomp, {} bytes, sha256 {:x}\n",
                bytes.len(),
                sha2::Sha256::digest(bytes)
            ));
        } else {
            // NUL-separated lists (the creation guard's paths) one per line.
            let text = String::from_utf8_lossy(bytes).replace('\0', "\\0\n");
            out.push_str(&format!("=== fd {fd}\n{text}"));
        }
    }
    if let crate::sandbox::Network::Allowlist(p) = &sb.network {
        out.push_str(&format!(
            "=== proxy\n{}\n",
            serde_json::to_string_pretty(p).unwrap()
        ));
    }
    let forge = r
        .fds
        .iter()
        .find_map(|(_, c)| match c {
            FdContent::GitConfig { forge } => Some(*forge),
            _ => None,
        })
        .unwrap();
    out.push_str(&format!(
        "=== gitconfig\n{}",
        crate::plan::gitconfig::render(Some("Dev"), Some("dev@example.com"), forge)
    ));
    out
}

/// bubblewrap applies its mount operations in order, and its other options
/// (namespaces, environment, working directory, seccomp) whatever their
/// place: so the argv is compared as the sequence of mount operations and
/// the sequence of the other options, each in order.
fn canonical(text: &str) -> (Vec<String>, Vec<String>) {
    const MOUNTS: &[(&str, usize)] = &[
        ("--ro-bind", 2),
        ("--bind", 2),
        ("--bind-fd", 2),
        ("--ro-bind-fd", 2),
        ("--ro-bind-data", 2),
        ("--tmpfs", 1),
        ("--dev", 1),
        ("--proc", 1),
    ];
    const OTHERS: &[(&str, usize)] = &[
        ("--uid", 1),
        ("--gid", 1),
        ("--cap-drop", 1),
        ("--cap-add", 1),
        ("--chdir", 1),
        ("--setenv", 2),
        ("--seccomp", 1),
    ];
    let lines: Vec<&str> = text.lines().collect();
    let (mut mounts, mut others) = (Vec::new(), Vec::new());
    let mut i = 1; // after "bwrap"
    while i < lines.len() {
        let w = lines[i];
        if let Some((_, n)) = MOUNTS.iter().find(|(f, _)| *f == w) {
            mounts.push(lines[i..=i + n].join(" "));
            i += n + 1;
        } else if let Some((_, n)) = OTHERS.iter().find(|(f, _)| *f == w) {
            others.push(lines[i..=i + n].join(" "));
            i += n + 1;
        } else if w == "--" {
            // The command and everything after it (data fds) stay in order.
            others.extend(lines[i..].iter().map(|l| l.to_string()));
            break;
        } else {
            others.push(w.to_string());
            i += 1;
        }
    }
    (mounts, others)
}

fn cases() -> Vec<(&'static str, String)> {
    let lan_resolv = Resolv {
        nameservers: vec![Ipv4Addr::new(10, 77, 0, 1)],
        other_lines: vec!["search corp.example".into()],
    };
    let public_resolv = Resolv {
        nameservers: vec![Ipv4Addr::new(9, 9, 9, 9)],
        other_lines: Vec::new(),
    };
    let off = Config {
        egress: crate::egress::policy::Egress::Off,
        ..Config::default()
    };
    let mut v = Vec::new();
    v.push((
        "default-jail",
        render(&Config::default(), &with_record(facts()), &lan_resolv, &[]),
    ));
    v.push((
        "jail-off-args",
        render(
            &off,
            &with_record(facts()),
            &lan_resolv,
            &["-p", "hi", "--chrome", "--", "--chrome"],
        ),
    ));
    v.push((
        "version-only-no-record",
        render(&Config::default(), &facts(), &public_resolv, &["--version"]),
    ));
    v.extend(more_cases(&lan_resolv, &public_resolv, off));
    v
}

/// The cases with more host facts in play: forge, allow-write and protected
/// paths; host /proc with a differing home and a symlinked workspace; root.
fn more_cases(
    lan_resolv: &Resolv,
    public_resolv: &Resolv,
    off: Config,
) -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    let mut f = with_record(facts());
    f.existing
        .insert(PathBuf::from("/home/dev/.config/glab-cli"));
    f.existing.insert(PathBuf::from("/home/dev/.local/bin/uv"));
    f.existing.insert(PathBuf::from("/run/secrets"));
    f.existing.insert(PathBuf::from("/etc/sudoers"));
    let extra = PathBuf::from("/srv/data");
    f.resolved.insert(extra.clone(), Some(extra.clone()));
    for p in ["/workspaces/app/.git/config", "/workspaces/app/.vscode"] {
        f.protected.push(crate::sandbox::RwBind {
            requested: p.into(),
            resolved: p.into(),
        });
        f.discovered.paths.push(p.into());
    }
    // A missing one: for the creation guard only (issue #12).
    f.discovered.paths.push("/workspaces/app/.envrc".into());
    let cfg = Config {
        no_forge: true,
        allow_write: vec![extra],
        pass_env: vec!["FOO".into()],
        allow_ip: vec![Ipv4Addr::new(10, 77, 0, 9)],
        ..Config::default()
    };
    v.push(("no-forge-allow-write", render(&cfg, &f, public_resolv, &[])));
    let mut f = with_record(facts());
    f.proc_mode = ProcMode::HostReadOnly;
    f.passwd_home = Some(PathBuf::from("/home/real"));
    f.cwd = PathBuf::from("/workspaces/link/src");
    f.resolved.insert(
        PathBuf::from("/workspaces/link"),
        Some(PathBuf::from("/srv/real")),
    );
    f.existing = f
        .existing
        .into_iter()
        .filter(|p| !p.ends_with(".local/share"))
        .collect::<BTreeSet<_>>();
    let cfg = Config {
        workspace_root: Some(PathBuf::from("/workspaces/link")),
        ..off
    };
    v.push((
        "host-proc-passwd-home-symlink",
        render(&cfg, &f, lan_resolv, &["-c"]),
    ));
    // Allowlist mode (issue #15): no route, the proxy's variables, its policy.
    let cfg = Config {
        egress: crate::egress::policy::Egress::Allowlist,
        allow_domain: vec![
            crate::egress::policy::DomainRule::parse("allowed.test").unwrap(),
            crate::egress::policy::DomainRule::parse("*.git.test:8443").unwrap(),
        ],
        allow_domains: vec![crate::egress::policy::preset("crates").unwrap()],
        allow_ip: vec![Ipv4Addr::new(10, 77, 0, 9)],
        pass_env: vec!["HTTPS_PROXY".into()],
        ..Config::default()
    };
    let mut f = with_record(facts());
    f.env
        .insert("HTTPS_PROXY".into(), "http://user-proxy:1".into());
    v.push(("allowlist", render(&cfg, &f, lan_resolv, &[])));
    // Launched by root: what only root may read is masked (issue #13).
    let mut f = with_record(facts());
    crate::plan::fixtures::as_root(&mut f);
    v.push((
        "root-launch",
        render(&Config::default(), &f, lan_resolv, &[]),
    ));
    v
}

#[test]
fn plan_output_matches_the_recorded_table() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/plan");
    let bless = std::env::var_os("CSB_BLESS").is_some();
    for (name, got) in cases() {
        let path = dir.join(format!("{name}.txt"));
        if bless {
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (CSB_BLESS=1 records it)", path.display()));
        assert!(
            canonical(&got) == canonical(&want),
            "plan for case {name} differs from {}:\n--- got\n{got}\n--- want\n{want}",
            path.display()
        );
    }
}
