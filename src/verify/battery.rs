//! The battery itself: every check in order with the defence it proves
//! ([`BATTERY`]; ids are positions and stay stable), its evaluation against
//! what was observed, and the output: a table (or `--json`, an array of
//! `{id, name, status, detail, defence}`), then `N PASS / M FAIL`; the exit
//! status is M.

use serde::Serialize;

use super::check_broker::check_broker_no_real_values;
use super::check_files::{
    check_dev, check_git_held, check_git_rule, check_git_worktree, check_masked_files,
    check_protected, check_protected_creation, check_root_view, check_run, check_tmp,
    check_workspace,
};
use super::check_home::{check_home, check_private_state};
use super::check_limits::{check_pids, check_private_bounded, check_tmpfs_sized};
use super::check_net::{
    check_egress_allowlist, check_forwarder, check_internal, check_ipv6, check_jail_routes,
    check_loopback, check_published,
};
use super::check_process::{
    check_caps, check_inside, check_ipc_uts, check_keyring, check_nnp, check_pid1, check_pid_ns,
    check_syscalls, check_tiocsti, check_userns,
};
use super::check_settings::{
    check_config, check_display, check_env_overrides, check_gitconfig, check_managed_settings,
    check_pin, check_tokens,
};
use super::observe::{Observed, Outcome};

/// Command-line arguments of `claude-sandbox verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Print one JSON array of {id, name, status, detail, defence} instead of the table.
    #[arg(long)]
    json: bool,
}

/// PASS or FAIL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub(super) enum Status {
    Pass,
    Fail,
}

/// One result.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Check {
    pub(super) id: u32,
    pub(super) name: &'static str,
    pub(super) status: Status,
    pub(super) detail: String,
    /// The defence this check proves.
    pub(super) defence: &'static str,
}

pub(super) struct Def {
    pub(super) name: &'static str,
    defence: &'static str,
    run: fn(&Observed) -> Outcome,
}

const fn def(name: &'static str, defence: &'static str, run: fn(&Observed) -> Outcome) -> Def {
    Def { name, defence, run }
}

/// The battery, in order; ids are positions (1-based) and stay stable.
pub(super) const BATTERY: &[Def] = &[
    def("inside-marker", "the recursion rule and the prompt gate tell a sandbox by kernel facts, not IS_SANDBOX alone (§2.1)", check_inside),
    def("no-new-privs", "no setuid or file-capability gain inside (§4.4)", check_nnp),
    def("strict-home", "$HOME by inversion: only the allowlisted entries are bound back (§4.2)", check_home),
    def("token-env-absent", "credentials in the environment never arrive (§4.5)", check_tokens),
    def("display-empty", "no X11/Wayland display to drive (§4.5)", check_display),
    def("capabilities-dropped", "every capability dropped (§4.4)", check_caps),
    def("pid-namespace", "own PID namespace: host processes invisible and unsignalable (§4.4)", check_pid_ns),
    def("ipc-uts-namespaces", "own IPC and UTS namespaces (§4.4)", check_ipc_uts),
    def("dev-fresh", "a fresh /dev: no host devices (§4.1)", check_dev),
    def("tmp-tmpfs", "a fresh /tmp: no VS Code IPC sockets or host temp files (§4.1)", check_tmp),
    def("run-masked", "/run is a fresh tmpfs: no host socket, secret or runtime directory under it, even one created after the launch (§4.1)", check_run),
    def("masked-files-empty", "~/.netrc, ~/.Xauthority, ~/.ICEauthority, /etc/shadow, /etc/gshadow, /etc/sudoers read as empty (§4.1, §4.2)", check_masked_files),
    def("gitconfig-curated", "the curated git config is in effect and read-only (§4.6)", check_gitconfig),
    def("workspace-scoped", "only the workspace and allow-write paths are writable (§4.3)", check_workspace),
    def("config-pinned", "the config is read from /etc only and cannot be changed from inside (§1, §3)", check_config),
    def("jail-routes", "egress jail: internal ranges blackholed, link-local unreachable (§4.7)", check_jail_routes),
    def("internal-unroutable", "egress jail: site subnets and cloud metadata unroutable while the gateway carries internet traffic (§4.7)", check_internal),
    def("no-ipv6", "egress jail: no IPv6 at all (§4.7)", check_ipv6),
    def("host-loopback-unreachable", "egress jail: the host's loopback services are out of reach (§4.7)", check_loopback),
    def("real-binary-pinned", "the real Claude Code matches its install-time SHA-256 (§5)", check_pin),
    def("tiocsti-refused", "no terminal injection into the caller's terminal (§4.4)", check_tiocsti),
    def("keyring-refused", "no reach into the caller's kernel keyring (§4.4)", check_keyring),
    def("protected-paths", "git config, hooks and attributes, editor, devcontainer, direnv and MCP files of the workspace and its repositories are read-only (§4.8)", check_protected),
    def("private-state", "~/.cache and ~/.local/share are the sandbox's own, the forge dirs read-only (§4.8)", check_private_state),
    def("no-nested-userns", "no new user namespaces inside: kernel attack surface nothing in a session needs (§4.4)", check_userns),
    def("env-overrides", "the launching environment cannot weaken the sandbox unless /etc allows it (§4.8)", check_env_overrides),
    def("root-view", "launched by root, the sandbox reads no more than an unprivileged user could (issue #13)", check_root_view),
    def("managed-settings-inside", "the user's own hooks and MCP servers run inside: the managed settings' lockdown for unsandboxed sessions is not in effect here, the guard hooks are (§6)", check_managed_settings),
    def("syscalls-refused", "kernel interfaces a session does not need are refused: namespaces, mounts, bpf, perf, userfaultfd, io_uring (§4.4, issue #13)", check_syscalls),
    def("egress-allowlist", "allowlist mode: no route at all, tools pointed at the proxy, a name on no list refused (§4.9)", check_egress_allowlist),
    def("protected-creation", "a protected path that does not exist cannot be created either: the creation guard refuses it (§4.8)", check_protected_creation),
    def("pid1-sealed", "the sandbox's PID 1 (bubblewrap's init, outside the seccomp filter) cannot be traced or have its memory written from inside (§4.4)", check_pid1),
    def("git-rule", "a repository made inside cannot be given a config key or hook that host git runs: the creation guard's git rule (issue #22)", check_git_rule),
    def("published-ports", "only the ports publish-port names are reachable inward, from the host's loopback (§4.7, issue #26)", check_published),
    def("dns-forwarder-only", "egress jail: pasta's DNS forwarder address passes DNS (UDP port 53) only; nothing else sent there reaches the host's network (§4.7, issue #24)", check_forwarder),
    def("pids-limit", "the session's processes are bounded (pids-limit: its own cgroup, else RLIMIT_NPROC): a fork bomb cannot take the machine (issue #24)", check_pids),
    def("tmpfs-sized", "every tmpfs the sandbox mounts is sized (tmpfs-size; masks 1M): a session cannot fill memory through /tmp, $HOME or /dev/shm (issue #24)", check_tmpfs_sized),
    def("private-state-bounded", "the private ~/.cache and ~/.local/share kept between sessions hold at most private-state-max (issue #24)", check_private_bounded),
    def("broker-no-real-values", "the real value of no brokered credential is readable inside: files, environments, command lines (issue #25)", check_broker_no_real_values),
    def("git-held", "a transport key git writes into a repository's config, and a hook installed in the workspace's repository, are held for the user: out of host git's reach, told to the agent (issue #44)", check_git_held),
    def("git-worktree", "a work tree a repository's config names stays inside the workspace: a later symlink or rename cannot turn it outward (issue #45)", check_git_worktree),
];

/// Evaluate every check against `o`.
pub(super) fn evaluate(o: &Observed) -> Vec<Check> {
    BATTERY
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let (status, detail) = match (d.run)(o) {
                Ok(note) => (Status::Pass, note),
                Err(why) => (Status::Fail, why),
            };
            Check {
                id: i as u32 + 1,
                name: d.name,
                status,
                detail,
                defence: d.defence,
            }
        })
        .collect()
}

/// The table a person reads.
fn render_table(checks: &[Check]) -> String {
    let mut out = String::new();
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for c in checks {
        let st = match c.status {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
        };
        out.push_str(&format!(
            "{:>2}  {st}  {:width$}  {}\n",
            c.id, c.name, c.detail
        ));
    }
    out.push_str(&summary(checks));
    out.push('\n');
    out
}

/// `N PASS / M FAIL`.
fn summary(checks: &[Check]) -> String {
    let fail = failures(checks);
    format!("{} PASS / {fail} FAIL", checks.len() - fail)
}

fn failures(checks: &[Check]) -> usize {
    checks.iter().filter(|c| c.status == Status::Fail).count()
}

/// Run `claude-sandbox verify`; the exit status is the number of failures.
pub(crate) fn main(args: &Args) -> anyhow::Result<i32> {
    let checks = evaluate(&Observed::gather());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&checks)?);
    } else {
        print!("{}", render_table(&checks));
    }
    Ok(failures(&checks) as i32)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::fixtures::{failing, healthy, lockdown_settings};
    use super::super::mountinfo::Mount;
    use super::super::probe_files::ProtectedPath;
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    #[test]
    fn each_regression_fails_exactly_its_check() {
        // (Workspace writability is a live probe; everything else is pure.)
        let base: Vec<&str> = failing(&healthy());
        assert_eq!(base, ["workspace-scoped"], "only the live probe fails here");
        type Mutate = Box<dyn Fn(&mut Observed)>;
        let cases: Vec<(&str, Mutate)> = vec![
            (
                "token-env-absent",
                Box::new(|o| {
                    o.env.insert("GH_TOKEN".into(), "ghp_x".into());
                }),
            ),
            (
                "capabilities-dropped",
                Box::new(|o| {
                    o.status = o
                        .status
                        .replace("CapEff:\t0000000000000000", "CapEff:\t000001ffffffffff")
                }),
            ),
            (
                "tmp-tmpfs",
                Box::new(|o| o.mounts.retain(|m| m.point != Path::new("/tmp"))),
            ),
            (
                "jail-routes",
                Box::new(|o| {
                    o.lookups
                        .insert(IpAddr::V4(Ipv4Addr::new(172, 16, 0, 1)), Ok(()));
                }),
            ),
            (
                "protected-paths",
                Box::new(|o| {
                    o.protected.push(ProtectedPath {
                        path: "/workspaces/app/.git/config".into(),
                        exists: true,
                        writable: true,
                        creatable: false,
                    })
                }),
            ),
            (
                "git-rule",
                Box::new(|o| o.git_rule = Ok(vec!["config".into()])),
            ),
            (
                "git-held",
                Box::new(|o| o.git_held = Ok((0, vec!["config took http.proxy".into()]))),
            ),
            (
                "git-worktree",
                Box::new(|o| o.git_worktree = Ok(vec!["a symlink made at the work tree".into()])),
            ),
            (
                "protected-creation",
                Box::new(|o| {
                    o.protected.push(ProtectedPath {
                        path: "/workspaces/app/.envrc".into(),
                        exists: false,
                        writable: false,
                        creatable: true,
                    })
                }),
            ),
            (
                "private-state",
                Box::new(|o| {
                    o.mounts
                        .retain(|m| m.point != Path::new("/home/dev/.cache"))
                }),
            ),
            (
                "private-state",
                Box::new(|o| {
                    for m in &mut o.mounts {
                        if m.point == Path::new("/home/dev/.config/gh") {
                            m.read_only = false;
                        }
                    }
                }),
            ),
            ("no-nested-userns", Box::new(|o| o.userns_errno = 0)),
            (
                "root-view",
                Box::new(|o| {
                    if let Ok(r) = o.record.as_mut() {
                        r.root_view = true;
                    }
                    o.root_only_readable = vec!["/etc/ssl/private".into()];
                }),
            ),
            (
                "syscalls-refused",
                Box::new(|o| o.syscall_samples[1].got = nix::libc::EFAULT),
            ),
            ("syscalls-refused", Box::new(|o| o.syscall_samples.clear())),
            ("pid1-sealed", Box::new(|o| o.pid1_samples[0].got = 0)),
            ("pid1-sealed", Box::new(|o| o.pid1_samples[1].got = 0)),
            ("pid1-sealed", Box::new(|o| o.pid1_samples.clear())),
            (
                "pid1-sealed",
                Box::new(|o| o.pid1_mem_writable.push("/proc/1/mem".into())),
            ),
            (
                "run-masked",
                Box::new(|o| o.mounts.retain(|m| m.point != Path::new("/run"))),
            ),
            (
                "run-masked",
                Box::new(|o| o.run_sockets.push("/run/docker.sock".into())),
            ),
            (
                "env-overrides",
                Box::new(|o| {
                    if let Ok(r) = o.record.as_mut() {
                        r.weakened_by_env = vec!["CLAUDE_SANDBOX_EGRESS_JAIL=0".into()];
                    }
                }),
            ),
            (
                "real-binary-pinned",
                Box::new(|o| o.pin = Err("sha256 differs".into())),
            ),
            (
                "strict-home",
                Box::new(|o| {
                    o.mounts.push(Mount {
                        root: "/home/dev/.ssh".into(),
                        point: "/home/dev/.ssh".into(),
                        read_only: false,
                        fstype: "ext4".into(),
                        source: "/dev/vda1".into(),
                    })
                }),
            ),
            (
                "tiocsti-refused",
                Box::new(|o| o.tiocsti_errno = nix::libc::ENOTTY),
            ),
            (
                "ipc-uts-namespaces",
                Box::new(|o| {
                    o.ns_ino.insert("uts".into(), 1);
                }),
            ),
            (
                "managed-settings-inside",
                Box::new(|o| o.managed_settings = Ok(Some(lockdown_settings()))),
            ),
            (
                "managed-settings-inside",
                Box::new(|o| o.managed_settings_writable = true),
            ),
            (
                "dns-forwarder-only",
                Box::new(|o| {
                    let l = o.forwarder.iter_mut().find(|l| l.proto == "tcp").unwrap();
                    l.result = Ok(1);
                }),
            ),
        ];
        for (name, mutate) in cases {
            let mut o = healthy();
            mutate(&mut o);
            let mut f = failing(&o);
            f.retain(|n| *n != "workspace-scoped");
            assert_eq!(f, [name], "{name}");
        }
    }

    #[test]
    fn outside_fails_the_marker_and_names_it() {
        let mut o = healthy();
        o.record = Err("placeholder".into());
        o.facts.is_sandbox_env = false;
        let c = &evaluate(&o)[0];
        assert_eq!((c.name, c.status), ("inside-marker", Status::Fail));
        assert!(c.detail.contains("IS_SANDBOX=1 is not set"), "{}", c.detail);
        let table = render_table(&evaluate(&o));
        assert!(table.lines().last().unwrap().ends_with(" FAIL"));
    }
}
