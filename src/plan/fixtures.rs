//! Test fixtures shared by the unit tests of several folders (the plan's,
//! the golden plans, the battery's coverage check, the launch's): a
//! typical user's host facts, and the same as root sees them.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::PathBuf;

use crate::egress::policy::{HostRoutes, JailFacts, Resolv};
use crate::plan::{Facts, ProcMode, Unreadable};

pub(crate) fn facts() -> Facts {
    let home = PathBuf::from("/home/dev");
    let ws = PathBuf::from("/workspaces/app");
    let mut env = BTreeMap::new();
    for (k, v) in [
        (
            "PATH",
            "/home/dev/.local/bin:/usr/local/cargo/bin:/usr/bin:.:relative",
        ),
        ("HOME", "/home/dev"),
        ("USER", "mallory"),
        ("TERM", "xterm-256color"),
        ("LANG", "C.UTF-8"),
        ("LC_ALL", "C.UTF-8"),
        ("GH_TOKEN", "ghp_secret"),
        ("GITHUB_TOKEN", "ghs_secret"),
        ("ANTHROPIC_API_KEY", "sk-ant-secret"),
        ("SSH_AUTH_SOCK", "/tmp/ssh-agent.sock"),
        ("DISPLAY", ":0"),
        ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
        ("LD_PRELOAD", "/tmp/evil.so"),
        ("IS_SANDBOX", "0"),
        ("BASH_ENV", "/tmp/evil.sh"),
        ("FOO", "foo-value"),
    ] {
        env.insert(OsString::from(k), OsString::from(v));
    }
    let mut existing = BTreeSet::new();
    for rel in [
        ".claude",
        ".claude.json",
        ".cache",
        ".local/share",
        ".config/gh",
    ] {
        existing.insert(home.join(rel));
    }
    existing.insert(PathBuf::from("/etc/shadow"));
    let mut resolved = BTreeMap::new();
    resolved.insert(ws.clone(), Some(ws.clone()));
    Facts {
        uid: 1000,
        gid: 1000,
        user: "dev".into(),
        home,
        cwd: ws,
        env,
        existing,
        not_directories: BTreeSet::new(),
        run_dirs: vec![PathBuf::from("/run")],
        run_keep: vec![PathBuf::from("/run/systemd/resolve")],
        root_masks: Vec::new(),
        hidden_whole: Vec::new(),
        root_view_told: Default::default(),
        resolved,
        proc_mode: ProcMode::Fresh,
        launcher_ns: BTreeMap::new(),
        host_loopback_tcp: Vec::new(),
        passwd_home: None,
        protected: Vec::new(),
        held_hooks: Vec::new(),
        discovered: Default::default(),
        jail: Some(JailFacts {
            routes: HostRoutes {
                iface: "eth0".into(),
                gateway: std::net::Ipv4Addr::new(10, 77, 0, 1),
                connected: vec![(std::net::Ipv4Addr::new(10, 77, 0, 0), 24)],
            },
            resolv: Resolv::default(),
            resolv_missing: false,
        }),
        managed_settings: None,
        session: "20261123T120000Z-4242".into(),
        claude_traffic: Default::default(),
        memory: 8 << 30,
        pids: crate::plan::PidsMechanism::Rlimit,
        broker: None,
        ignored_at_launch: Vec::new(),
    }
}

/// `f` as a root launch sees it: root-only entries masked, /home hidden.
pub(crate) fn as_root(f: &mut Facts) {
    f.uid = 0;
    f.gid = 0;
    f.pids = crate::plan::PidsMechanism::Cgroup {
        parent: "/sys/fs/cgroup/pids".into(),
    };
    f.hidden_whole = vec![PathBuf::from("/home")];
    f.root_masks = vec![
        Unreadable {
            path: "/etc/ssl/private".into(),
            dir: true,
        },
        Unreadable {
            path: "/etc/shadow-".into(),
            dir: false,
        },
    ];
}
