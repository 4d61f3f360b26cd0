//! A private "site network" for end-to-end tests: the project's own
//! `tests/testnet/lan.sh` builds gateway, LAN host, internal ranges, metadata,
//! IPv6 and an "internet" host in namespaces the test owns; every packet stays
//! there. `tests/testnet/netprobe.py` provides the listeners and probes.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{in_netns, stderr, Who, World};

static NETS: AtomicUsize = AtomicUsize::new(0);

/// `file` of the test network in `tests/testnet/` (`lan.sh`, `netprobe.py`),
/// inside this repository.
pub(crate) fn testnet(file: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/testnet")
        .join(file);
    assert!(p.exists(), "{} missing from the repository", p.display());
    p
}

/// How long a listener of [`Lan::listen`] serves (netprobe's last
/// argument; its own bound, `MAX_LIFETIME`): longer than any test runs, so
/// that a negative check never passes because the listener behind the wall
/// had already gone (a 120-second listener could, under CI's load: "0 host
/// loopback listener(s) tried" in tests/verify.rs). [`Lan`]'s drop ends
/// every listener with its test.
pub(crate) const LISTEN_SECS: &str = "600";

/// A private site network; torn down on drop, listeners included.
pub(crate) struct Lan {
    pub(crate) prefix: String,
    /// The "devcontainer" namespace.
    pub(crate) host: String,
    /// The LAN host's namespace (10.77.0.9).
    pub(crate) lan: String,
    pub(crate) listeners: Vec<Child>,
}

impl Lan {
    pub(crate) fn up() -> Lan {
        let prefix = format!(
            "cj{}x{}",
            std::process::id() % 100_000,
            NETS.fetch_add(1, Ordering::SeqCst)
        );
        let out = Command::new("bash")
            .arg(testnet("lan.sh"))
            .args(["up", &prefix])
            .output()
            .unwrap();
        assert!(out.status.success(), "lan.sh up: {}", stderr(&out));
        Lan {
            host: format!("{prefix}-host"),
            lan: format!("{prefix}-lan"),
            prefix,
            listeners: Vec::new(),
        }
    }

    /// Start a bounded netprobe listener in namespace `ns`.
    pub(crate) fn listen(&mut self, ns: &str, args: &[&str]) {
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "python3"])
            .arg(testnet("netprobe.py"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.listeners.push(child);
    }

    /// Wait (at most 10 s) until namespace `ns` has a listener on each TCP
    /// `ADDR:PORT` of `tcp` and a bound socket on each UDP one of `udp`.
    pub(crate) fn wait_listening(&self, ns: &str, tcp: &[&str], udp: &[&str]) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let seen = |flag: &str| {
            let o = Command::new("ip")
                .args(["netns", "exec", ns, "ss", "-Hn", flag])
                .output()
                .unwrap();
            let out = String::from_utf8_lossy(&o.stdout).into_owned();
            // Local address is the fourth column ("UNCONN 0 0 10.77.0.1:53 …").
            out.lines()
                .filter_map(|l| l.split_whitespace().nth(3).map(str::to_string))
                .collect::<Vec<_>>()
        };
        loop {
            let (t, u) = (seen("-lt"), seen("-lu"));
            let missing: Vec<&&str> = tcp
                .iter()
                .filter(|a| !t.iter().any(|x| x == **a))
                .chain(udp.iter().filter(|a| !u.iter().any(|x| x == **a)))
                .collect();
            if missing.is_empty() {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{ns}: nothing listening on {missing:?} after 10 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// `argv` as `who` in the world `w`, from `who`'s workspace, after the
    /// root lines `setup`, with `env` ([`World::command_with_setup`]), in
    /// this network's "devcontainer" namespace.
    pub(crate) fn command(
        &self,
        w: &World,
        who: Who,
        setup: &str,
        env: &[(&str, &str)],
        argv: &[&str],
    ) -> Command {
        in_netns(
            &self.host,
            &w.command_with_setup(who, &w.workspace(who), setup, env, argv),
        )
    }

    /// `claude shell SCRIPT` run as [`Lan::command`] runs a command, its
    /// input closed; what it printed.
    pub(crate) fn shell(
        &self,
        w: &World,
        who: Who,
        setup: &str,
        env: &[(&str, &str)],
        script: &str,
    ) -> Output {
        self.command(w, who, setup, env, &["claude", "shell", script])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// netprobe.py with `args` in the "devcontainer" namespace, outside
    /// any sandbox: the controls that show each refusal is the jail's.
    pub(crate) fn probe_outside(&self, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.host, "python3"])
            .arg(testnet("netprobe.py"))
            .args(args)
            .output()
            .unwrap()
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        for c in &mut self.listeners {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("bash")
            .arg(testnet("lan.sh"))
            .args(["down", &self.prefix])
            .output();
    }
}

/// netprobe.py copied into `w` (beside the probe, readable by the test
/// user and inside the sandbox); its path.
pub(crate) fn netprobe_in(w: &World) -> std::path::PathBuf {
    let p = w.root.join("bin/netprobe.py");
    std::fs::copy(testnet("netprobe.py"), &p).unwrap();
    p
}

/// The command that runs the netprobe.py copy in `w` ([`netprobe_in`])
/// inside the sandbox.
pub(crate) fn netprobe_cmd(w: &World) -> String {
    format!("python3 {}/bin/netprobe.py", w.root.display())
}

/// A world for the LAN: the probe as the real binary, `conf` as the
/// configuration (the jail is on unless it says otherwise), the LAN's
/// gateway as resolver (set once: the world's /etc persists), and
/// netprobe.py beside the probe, where the sandbox can read it.
pub(crate) fn jail_world(name: &str, conf: &str) -> World {
    let w = World::new(name);
    w.install_by_hand(&w.root.join("bin/probe"), conf);
    netprobe_in(&w);
    let o =
        w.run_root_raw("rm -f /etc/resolv.conf && echo 'nameserver 10.77.0.1' > /etc/resolv.conf");
    assert!(o.status.success(), "{}", stderr(&o));
    w
}
