//! The sandbox plan (SPEC §4.1–4.7): [`build`] assembles a typed
//! [`Sandbox`] from the configuration and a snapshot of host facts
//! ([`Facts`]): the filesystem view, the process and its environment, the
//! network mode and the launch record `verify` reads from inside.
//!
//! Nothing here touches the file system, so every rule is unit-tested
//! without namespaces; [`crate::sandbox::render`] turns the result into
//! bubblewrap's arguments and [`crate::launch`] executes it.

use std::ffi::OsString;
use std::path::Path;

use super::env::{claude_args, environment};
use super::facts::Facts;
use super::mounts::{check_home_masks, home_mounts, other_homes, rw_binds, system_mounts};
use super::network::{egress, network};
use super::protect;
use crate::config::Config;
use crate::sandbox::LaunchRecord;
use crate::sandbox::{
    Capabilities, Data, Mount, Namespace, Network, Program, RwBind, Sandbox, Seccomp,
};
use crate::sys::paths;

/// Build the sandbox for one launch of the real binary with `user_args`.
pub(crate) fn build(
    cfg: &Config,
    facts: &Facts,
    user_args: &[OsString],
) -> anyhow::Result<Sandbox> {
    let rw = rw_binds(cfg, facts)?;
    check_home_masks(facts)?;
    let workspace = rw[0].resolved.clone();
    let (network, resolv_conf) = network(cfg, facts, &rw)?;
    let mounts = mounts(cfg, facts, rw, &network, resolv_conf);
    // §4.8: what is protected and does not exist cannot be created either
    // (what exists is bound read-only): in the workspace only (issue #22).
    let creation_guard: Vec<std::path::PathBuf> = facts
        .discovered
        .paths
        .iter()
        .filter(|p| protect::inside(&workspace, p))
        .cloned()
        .collect();
    let held_hooks = facts
        .held_hooks
        .iter()
        .map(|(_, hooks)| hooks.clone())
        .filter(|hooks| protect::inside(&workspace, hooks))
        .collect();
    let chdir = if facts.cwd.starts_with(&workspace) {
        facts.cwd.clone()
    } else {
        workspace
    };
    Ok(Sandbox {
        uid: facts.uid,
        gid: facts.gid,
        // §4.4 process isolation.
        namespaces: vec![
            Namespace::Pid,
            Namespace::Ipc,
            Namespace::Uts,
            Namespace::CgroupIfSupported,
        ],
        nested_userns: false,
        capabilities: Capabilities::DropAll,
        mounts,
        chdir,
        env: broker_env(environment(cfg, facts), facts),
        // §4.4 terminal-injection defence (TIOCSTI/TIOCLINUX), keyrings, and
        // the kernel interfaces a session does not need (decision 0007).
        seccomp: Seccomp {
            program: seccomp_program(&creation_guard),
        },
        network,
        creation_guard,
        held_hooks,
        folds: facts.discovered.folds,
        notices: true,
        limits: super::limits::limits(cfg, facts),
        command: Program {
            path: facts.home.join(paths::INSIDE_REAL_CLAUDE_REL),
            args: claude_args(user_args),
            ignored: facts.ignored_at_launch.clone(),
        },
    })
}

/// The sandbox's seccomp filter: where the creation guard stands, its
/// filter refuses `pidfd_getfd` itself, which the supervisor needs (issue
/// #45); everywhere else the sandbox's own refuses it.
fn seccomp_program(creation_guard: &[std::path::PathBuf]) -> Vec<u8> {
    if creation_guard.is_empty() {
        crate::seccomp::program_bytes()
    } else {
        crate::seccomp::guarded_program_bytes()
    }
}

/// Every mount, in order: the system view and `$HOME` (§4.1, §4.2), the
/// data files, the read-write roots and the protected paths over them.
fn mounts(
    cfg: &Config,
    facts: &Facts,
    rw: Vec<RwBind>,
    network: &Network,
    resolv_conf: Option<String>,
) -> Vec<Mount> {
    let mut mounts = system_mounts(facts);
    mounts.extend(home_mounts(cfg, facts));
    // Issue #25: the broker's stand-ins over the real files, the CA bundle.
    mounts.extend(broker_mounts(facts));
    // §4.6 curated git config, rendered per launch, read-only.
    mounts.push(Mount::Data {
        dst: paths::GITCONFIG.into(),
        data: Data::GitConfig {
            forge: !cfg.no_forge,
        },
    });
    // What `verify` needs to know from outside, read-only (§7).
    if facts.existing.contains(Path::new(paths::LAUNCH_RECORD)) {
        mounts.push(Mount::Data {
            dst: paths::LAUNCH_RECORD.into(),
            data: Data::Record(Box::new(record(cfg, facts, &rw, network))),
        });
    }
    let ws = rw[0].resolved.clone();
    // §4.3 workspace, then allow-write (after the masks, so it can punch through one).
    mounts.extend(rw.into_iter().map(Mount::Checked));
    // §4.8 protected paths, read-only over the read-write roots.
    // Never a path outside the workspace, whatever the walk said (issue
    // #22): the launch names such a path and drops it already.
    mounts.extend(
        facts
            .protected
            .iter()
            .filter(|b| protect::inside(&ws, &b.requested) && protect::inside(&ws, &b.resolved))
            .cloned()
            .map(Mount::CheckedReadOnly),
    );
    // Issue #44: each git directory's `hooks`, a held copy, read-write.
    mounts.extend(
        facts
            .held_hooks
            .iter()
            .filter(|(_, hooks)| protect::inside(&ws, hooks))
            .map(|(copy, hooks)| Mount::ReadWrite {
                src: copy.clone(),
                dst: hooks.clone(),
            }),
    );
    if let Some(text) = resolv_conf {
        mounts.push(Mount::Data {
            dst: "/etc/resolv.conf".into(),
            data: Data::Text(text),
        });
    }
    // §6: the managed settings without the lockdown, which is there for
    // unsandboxed sessions only (decisions/0005): the user's own hooks and
    // MCP servers run here, the guard hooks too. A file that does not parse
    // is left as the host has it.
    if let Some(text) = facts
        .managed_settings
        .as_deref()
        .and_then(crate::plan::managed_settings::inside_managed)
    {
        mounts.push(Mount::Data {
            dst: paths::MANAGED_SETTINGS.into(),
            data: Data::Text(text),
        });
    }
    mounts
}

/// The credential broker's files (issue #25): each stand-in file over the
/// real one (after the forge directories' binds), the CA bundle that adds
/// the session CA over the system's.
fn broker_mounts(facts: &Facts) -> Vec<Mount> {
    let Some(b) = &facts.broker else {
        return Vec::new();
    };
    let mut m: Vec<Mount> = b
        .files
        .iter()
        .map(|(dst, text)| Mount::Data {
            dst: dst.clone(),
            data: Data::Text(text.clone()),
        })
        .collect();
    // Read-write copies (Claude Code's credentials file): the session
    // rewrites its own copy; nothing of it reaches the host's file.
    m.extend(b.writable.iter().map(|(dst, text)| Mount::Data {
        dst: dst.clone(),
        data: Data::Writable(text.clone()),
    }));
    m.push(Mount::Data {
        dst: b.bundle_path.clone(),
        data: Data::Text(b.bundle.clone()),
    });
    m
}

/// The environment with the broker's stand-ins in place of the real
/// values, and the CA bundle named for every TLS stack inside.
fn broker_env(mut env: Vec<(OsString, OsString)>, facts: &Facts) -> Vec<(OsString, OsString)> {
    let Some(b) = &facts.broker else {
        return env;
    };
    for (k, v) in &mut env {
        if let Some((_, s)) = b
            .env
            .iter()
            .find(|(name, _)| k.as_os_str() == name.as_str())
        {
            *v = s.into();
        }
    }
    for var in crate::egress::policy::broker::CA_VARS {
        env.retain(|(k, _)| k != var);
        env.push((var.into(), b.bundle_path.clone().into()));
    }
    env
}

/// The launch record `verify` reads from inside.
fn record(cfg: &Config, facts: &Facts, rw: &[RwBind], network: &Network) -> LaunchRecord {
    LaunchRecord {
        version: crate::sandbox::RECORD_VERSION,
        egress: egress(cfg),
        no_forge: cfg.no_forge,
        home: facts.home.clone(),
        workspace: rw[0].resolved.clone(),
        workspace_configured: cfg.workspace_root.is_some(),
        allow_write: rw[1..].iter().map(|b| b.resolved.clone()).collect(),
        pass_env: cfg.pass_env.clone(),
        allow_ip: cfg.allow_ip.clone(),
        site_subnets: match (network, &facts.jail) {
            (Network::Jail(_), Some(j)) => j.routes.connected.clone(),
            _ => Vec::new(),
        },
        launcher_ns: facts.launcher_ns.clone(),
        host_loopback_tcp: facts.host_loopback_tcp.clone(),
        other_homes: other_homes(facts),
        allow_env_overrides: cfg.allow_env_overrides,
        root_view: facts.uid == 0,
        weakened_by_env: cfg.weakened_by_env.clone(),
        publish_port: network.published().to_vec(),
        limits: super::limits::limits(cfg, facts),
        broker: facts.broker.as_ref().map(|b| b.digests.clone()),
        broker_off: !cfg.broker,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use super::*;
    use crate::egress::policy::Egress;
    use crate::plan::fixtures::facts;
    use crate::plan::*;

    fn args_of(plan: &Sandbox) -> Vec<String> {
        crate::sandbox::render(plan)
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// The `--setenv` pairs of a plan.
    fn env_of(plan: &Sandbox) -> BTreeMap<String, String> {
        let a = args_of(plan);
        let mut m = BTreeMap::new();
        let mut i = 0;
        while i < a.len() {
            if a[i] == "--setenv" {
                m.insert(a[i + 1].clone(), a[i + 2].clone());
                i += 3;
            } else if a[i] == "--" {
                break;
            } else {
                i += 1;
            }
        }
        m
    }

    fn has_seq(plan: &Sandbox, seq: &[&str]) -> bool {
        args_of(plan).windows(seq.len()).any(|w| w == seq)
    }

    fn pos(plan: &Sandbox, seq: &[&str]) -> usize {
        args_of(plan)
            .windows(seq.len())
            .position(|w| w == seq)
            .unwrap_or_else(|| panic!("{seq:?} not in plan"))
    }

    /// The git config the executor would render for this sandbox.
    fn gitconfig_data(plan: &Sandbox, name: Option<&str>, email: Option<&str>) -> String {
        let forge = plan
            .mounts
            .iter()
            .find_map(|m| match m {
                Mount::Data {
                    data: Data::GitConfig { forge },
                    ..
                } => Some(*forge),
                _ => None,
            })
            .expect("a git config mount");
        crate::plan::gitconfig::render(name, email, forge)
    }

    #[test]
    fn no_secret_reaches_the_sandbox() {
        let cfg = Config {
            pass_env: vec!["FOO".into()],
            ..Config::default()
        };
        let plan = build(&cfg, &facts(), &[]).unwrap();
        let all = args_of(&plan).join("\n");
        for secret in [
            "ghp_secret",
            "ghs_secret",
            "sk-ant-secret",
            "ssh-agent.sock",
            "aws-secret",
            "evil",
        ] {
            assert!(!all.contains(secret), "{secret} leaked into the plan");
        }
        let env = env_of(&plan);
        for name in [
            "GH_TOKEN",
            "GITHUB_TOKEN",
            "ANTHROPIC_API_KEY",
            "SSH_AUTH_SOCK",
            "DISPLAY",
            "AWS_SECRET_ACCESS_KEY",
            "LD_PRELOAD",
            "BASH_ENV",
        ] {
            assert!(!env.contains_key(name), "{name} in the sandbox environment");
        }
        assert_eq!(env["FOO"], "foo-value");
    }

    #[test]
    fn pass_env_of_protected_names_forwards_none() {
        // Even if a Config were built around the parser, the plan re-checks.
        let cfg = Config {
            pass_env: vec!["LD_PRELOAD".into(), "PATH".into(), "IS_SANDBOX".into()],
            ..Config::default()
        };
        let plan = build(&cfg, &facts(), &[]).unwrap();
        let env = env_of(&plan);
        assert!(!env.contains_key("LD_PRELOAD"));
        assert_eq!(env["IS_SANDBOX"], "1");
        assert!(
            env["PATH"].starts_with("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        );
    }

    #[test]
    fn environment_is_exactly_the_spec() {
        let plan = build(&Config::default(), &facts(), &[]).unwrap();
        let env = env_of(&plan);
        let keys: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "GIT_CONFIG_GLOBAL",
                "GIT_CONFIG_SYSTEM",
                "HOME",
                "IS_SANDBOX",
                "LANG",
                "LC_ALL",
                "PATH",
                "TERM",
                "USER"
            ]
        );
        assert_eq!(
            env["USER"], "dev",
            "USER is the real user, not the caller's variable"
        );
        assert_eq!(env["HOME"], "/home/dev");
        assert_eq!(env["GIT_CONFIG_GLOBAL"], "/home/dev/.gitconfig");
        assert_eq!(env["GIT_CONFIG_SYSTEM"], "/etc/claude-gitconfig");
        assert_eq!(
            env["PATH"],
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/cargo/bin:/home/dev/.local/bin"
        );
        assert!(has_seq(&plan, &["--clearenv"]));
    }

    #[test]
    fn virtualenv_bin_appended_last() {
        let mut f = facts();
        f.env
            .insert("VIRTUAL_ENV".into(), "/workspaces/app/.venv".into());
        let env = env_of(&build(&Config::default(), &f, &[]).unwrap());
        assert!(
            env["PATH"].ends_with(":/home/dev/.local/bin:/workspaces/app/.venv/bin"),
            "{}",
            env["PATH"]
        );
        assert_eq!(env["VIRTUAL_ENV"], "/workspaces/app/.venv");
    }

    #[test]
    fn home_by_inversion() {
        let plan = build(&Config::default(), &facts(), &[]).unwrap();
        let tmpfs_home = pos(&plan, &["--tmpfs", "/home/dev"]);
        for rel in [".claude", ".claude.json"] {
            let p = format!("/home/dev/{rel}");
            assert!(
                pos(&plan, &["--bind", &p, &p]) > tmpfs_home,
                "{rel} bound back after the tmpfs"
            );
        }
        // §4.8: the sandbox's own cache and share, never the user's.
        for (rel, name) in [(".cache", "cache"), (".local/share", "share")] {
            let src = format!("/home/dev/.local/state/claude-sandbox/{name}");
            let dst = format!("/home/dev/{rel}");
            assert!(pos(&plan, &["--bind", &src, &dst]) > tmpfs_home, "{rel}");
            assert!(
                !has_seq(&plan, &["--bind", &dst, &dst]),
                "{rel} of the host"
            );
        }
        // The forge dirs read-only (gh aliases and extensions run on the host).
        let gh = "/home/dev/.config/gh";
        assert!(pos(&plan, &["--ro-bind", gh, gh]) > tmpfs_home);
        assert!(!has_seq(&plan, &["--bind", gh, gh]));
        // Absent entries are not bound (bwrap would fail or create them on the host).
        assert!(!has_seq(
            &plan,
            &[
                "--bind",
                "/home/dev/.config/glab-cli",
                "/home/dev/.config/glab-cli"
            ]
        ));
        assert!(has_seq(
            &plan,
            &["--tmpfs", "/home/dev/.local/share/applications"]
        ));
        assert!(has_seq(
            &plan,
            &["--tmpfs", "/home/dev/.local/share/claude"]
        ));
        assert!(has_seq(
            &plan,
            &[
                "--ro-bind",
                "/usr/libexec/claude-sandbox/claude",
                "/home/dev/.local/bin/claude"
            ]
        ));
        for f in [".netrc", ".Xauthority", ".ICEauthority"] {
            assert!(has_seq(
                &plan,
                &["--ro-bind", "/dev/null", &format!("/home/dev/{f}")]
            ));
        }
        // The one `.gitconfig` named is the session's own, on the tmpfs.
        let all = args_of(&plan)
            .join("\n")
            .replace("GIT_CONFIG_GLOBAL\n/home/dev/.gitconfig", "");
        for hidden in [
            ".ssh",
            ".aws",
            ".gnupg",
            ".docker",
            ".kube",
            ".gitconfig",
            ".bash_history",
            ".config/gcloud",
        ] {
            assert!(!all.contains(hidden), "{hidden} appears in the plan");
        }
    }

    #[test]
    fn claude_local_is_masked_under_a_bound_back_claude_dir_and_never_through_a_link() {
        // Issue #24: the old launcher alias runs ~/.claude/local/claude outside.
        let plan = build(&Config::default(), &facts(), &[]).unwrap();
        let bound = pos(&plan, &["--bind", "/home/dev/.claude", "/home/dev/.claude"]);
        assert!(pos(&plan, &["--tmpfs", "/home/dev/.claude/local"]) > bound);
        // No ~/.claude on the host: it is the home tmpfs's own, nothing to mask.
        let mut f = facts();
        f.existing.remove(Path::new("/home/dev/.claude"));
        let plan = build(&Config::default(), &f, &[]).unwrap();
        assert!(!has_seq(&plan, &["--tmpfs", "/home/dev/.claude/local"]));
        // A link (or a file) there would take the mask elsewhere: refused.
        let mut f = facts();
        let local = PathBuf::from("/home/dev/.claude/local");
        f.existing.insert(local.clone());
        f.not_directories.insert(local);
        let err = build(&Config::default(), &f, &[]).unwrap_err().to_string();
        assert!(
            err.contains("/home/dev/.claude/local is not a directory")
                && err.contains("rm /home/dev/.claude/local"),
            "{err}"
        );
    }

    #[test]
    fn the_brokered_login_is_a_writable_copy_over_the_bound_claude_dir() {
        // Decision 0017: after ~/.claude's bind, or the host's file shows.
        let mut f = facts();
        f.broker = Some(crate::egress::policy::broker::Inside {
            files: Vec::new(),
            writable: vec![(
                PathBuf::from("/home/dev/.claude/.credentials.json"),
                "{}".into(),
            )],
            env: Vec::new(),
            bundle_path: "/etc/ssl/certs/ca-certificates.crt".into(),
            bundle: "pem".into(),
            ..Default::default()
        });
        let plan = build(&Config::default(), &f, &[]).unwrap();
        let bound = pos(&plan, &["--bind", "/home/dev/.claude", "/home/dev/.claude"]);
        let copy = args_of(&plan)
            .windows(3)
            .position(|w| w[0] == "--bind-data" && w[2] == "/home/dev/.claude/.credentials.json")
            .expect("the copy is bound");
        assert!(copy > bound);
        let read_only = args_of(&plan)
            .windows(3)
            .any(|w| w[0] == "--ro-bind-data" && w[2] == "/home/dev/.claude/.credentials.json");
        assert!(
            !read_only,
            "Claude Code could not write its refreshed login"
        );
    }

    #[test]
    fn no_forge_drops_forge_dirs_and_helpers() {
        let mut f = facts();
        f.existing
            .insert(PathBuf::from("/home/dev/.config/glab-cli"));
        let cfg = Config {
            no_forge: true,
            ..Config::default()
        };
        let plan = build(&cfg, &f, &[]).unwrap();
        assert!(!args_of(&plan).join("\n").contains(".config/g"));
        let git = gitconfig_data(&plan, Some("Dev"), None);
        assert!(!git.contains("auth git-credential"), "{git}");
        let plan = build(&Config::default(), &f, &[]).unwrap();
        assert!(has_seq(
            &plan,
            &[
                "--ro-bind",
                "/home/dev/.config/glab-cli",
                "/home/dev/.config/glab-cli"
            ]
        ));
        let git = gitconfig_data(&plan, Some("Dev"), None);
        assert!(git.contains("gh auth git-credential") && git.contains("glab auth git-credential"));
    }

    #[test]
    fn system_masks_and_process_isolation() {
        let plan = build(&Config::default(), &facts(), &[]).unwrap();
        for seq in [
            &["--ro-bind", "/", "/"][..],
            &["--dev", "/dev"],
            &["--proc", "/proc"],
            &["--tmpfs", "/tmp"],
            &["--tmpfs", "/run"],
            &["--ro-bind", "/run/systemd/resolve", "/run/systemd/resolve"],
            &["--ro-bind", "/dev/null", "/etc/shadow"],
            &["--cap-drop", "ALL"],
            &["--unshare-pid"],
            &["--unshare-ipc"],
            &["--unshare-uts"],
            &["--unshare-user"],
            &["--die-with-parent"],
            &["--seccomp", "200"],
        ] {
            assert!(has_seq(&plan, seq), "{seq:?} missing");
        }
        assert!(
            pos(&plan, &["--tmpfs", "/run"])
                < pos(
                    &plan,
                    &["--ro-bind", "/run/systemd/resolve", "/run/systemd/resolve"]
                ),
            "the resolver's files come back after /run is replaced"
        );
        assert!(!has_seq(&plan, &["--ro-bind", "/dev/null", "/etc/gshadow"]));
        let mut f = facts();
        f.proc_mode = ProcMode::HostReadOnly;
        let plan = build(&Config::default(), &f, &[]).unwrap();
        assert!(has_seq(&plan, &["--ro-bind", "/proc", "/proc"]));
        assert!(!has_seq(&plan, &["--proc", "/proc"]));
    }

    /// The managed settings the plan binds, if any.
    fn managed_of(plan: &Sandbox) -> Option<String> {
        plan.mounts.iter().find_map(|m| match m {
            Mount::Data {
                dst,
                data: Data::Text(t),
            } if dst == Path::new(paths::MANAGED_SETTINGS) => Some(t.clone()),
            _ => None,
        })
    }

    #[test]
    fn managed_settings_bound_without_the_lockdown_only_when_they_parse() {
        // None on the host: nothing bound (the golden plans have none).
        let plan = build(&Config::default(), &facts(), &[]).unwrap();
        assert_eq!(managed_of(&plan), None);
        // As install writes them: bound read-only, lockdown gone, guard kept.
        let (host, _) =
            crate::plan::managed_settings::merge_managed(Some(r#"{"model": "corp"}"#), true)
                .unwrap();
        let mut f = facts();
        f.managed_settings = Some(host.clone());
        let plan = build(&Config::default(), &f, &[]).unwrap();
        let inside = managed_of(&plan).expect("managed settings bound");
        assert_eq!(
            Some(inside.clone()),
            crate::plan::managed_settings::inside_managed(&host)
        );
        assert!(
            inside.contains(crate::plan::managed_settings::PROMPT_GATE_CMD),
            "{inside}"
        );
        assert!(inside.contains("\"corp\""), "{inside}");
        for k in [
            "allowManagedHooksOnly",
            "allowManagedMcpServersOnly",
            "apiKeyHelper",
        ] {
            assert!(!inside.contains(k), "{k} inside: {inside}");
        }
        let args = args_of(&plan);
        let at = args
            .iter()
            .position(|a| a == paths::MANAGED_SETTINGS)
            .unwrap();
        assert_eq!(args[at - 2], "--ro-bind-data", "{args:?}");
        // Bound after the read-only root, which it lies on.
        let mount_at = |dst: &str| {
            plan.mounts
                .iter()
                .position(|m| m.dst() == Path::new(dst))
                .unwrap()
        };
        assert!(mount_at("/") < mount_at(paths::MANAGED_SETTINGS));
        // Not JSON: nothing bound, the host's file stands as it is.
        for bad in ["{ not json", "[]"] {
            f.managed_settings = Some(bad.into());
            let plan = build(&Config::default(), &f, &[]).unwrap();
            assert_eq!(managed_of(&plan), None, "{bad}");
        }
    }

    #[test]
    fn workspace_and_allow_write_come_after_masks() {
        let mut f = facts();
        let sock = PathBuf::from("/run/user/1000/podman/podman.sock");
        f.resolved.insert(sock.clone(), Some(sock.clone()));
        let cfg = Config {
            allow_write: vec![sock],
            ..Config::default()
        };
        let plan = build(&cfg, &f, &[]).unwrap();
        let ws = pos(&plan, &["--bind-fd", "210", "/workspaces/app"]);
        let aw = pos(
            &plan,
            &["--bind-fd", "211", "/run/user/1000/podman/podman.sock"],
        );
        assert!(
            pos(&plan, &["--tmpfs", "/run"]) < aw,
            "allow-write punches through /run"
        );
        assert!(pos(&plan, &["--tmpfs", "/home/dev"]) < ws);
        assert!(has_seq(&plan, &["--chdir", "/workspaces/app"]));
        assert_eq!(plan.rw_binds().count(), 2);
    }

    #[test]
    fn symlinked_workspace_binds_its_target() {
        let mut f = facts();
        f.cwd = PathBuf::from("/workspaces/link");
        f.resolved
            .insert(f.cwd.clone(), Some(PathBuf::from("/srv/real")));
        let plan = build(&Config::default(), &f, &[]).unwrap();
        assert!(has_seq(&plan, &["--bind-fd", "210", "/srv/real"]));
        let ws = plan.rw_binds().next().unwrap();
        assert_eq!(ws.resolved, PathBuf::from("/srv/real"));
        assert_eq!(ws.requested, PathBuf::from("/workspaces/link"));
    }

    #[test]
    fn refuses_home_root_and_security_inputs_as_workspace() {
        for (cwd, target, needle) in [
            ("/home/dev", "/home/dev", "holds $HOME"),
            ("/", "/", "whole file system"),
            ("/home", "/home", "holds $HOME"),
            ("/etc", "/etc", "/etc/claude-sandbox.conf"),
            ("/usr/local", "/usr/local", "/usr/local/bin/claude"),
            ("/workspaces/evil", "/home/dev", "resolves to /home/dev"),
        ] {
            let mut f = facts();
            f.cwd = PathBuf::from(cwd);
            f.resolved
                .insert(f.cwd.clone(), Some(PathBuf::from(target)));
            let e = build(&Config::default(), &f, &[]).unwrap_err();
            assert_eq!(crate::error::exit_code(&e), 2);
            assert!(e.to_string().contains(needle), "{cwd}: {e}");
        }
        let mut f = facts();
        f.resolved.insert(
            PathBuf::from("/etc/claude-code"),
            Some(PathBuf::from("/etc/claude-code")),
        );
        let cfg = Config {
            allow_write: vec![PathBuf::from("/etc/claude-code")],
            ..Config::default()
        };
        assert!(build(&cfg, &f, &[])
            .unwrap_err()
            .to_string()
            .contains("allow-write"));
    }

    #[test]
    fn the_user_databases_home_is_masked_when_home_differs() {
        let mut f = facts();
        f.passwd_home = Some(PathBuf::from("/home/real"));
        let plan = build(&Config::default(), &f, &[]).unwrap();
        let args = args_of(&plan);
        let masked = args.windows(2).position(|w| w == ["--tmpfs", "/home/real"]);
        let home = args.windows(2).position(|w| w == ["--tmpfs", "/home/dev"]);
        assert!(masked.is_some() && masked < home, "{args:?}");
        // A workspace holding the real home is refused like one holding $HOME.
        f.cwd = PathBuf::from("/home");
        f.resolved
            .insert(f.cwd.clone(), Some(PathBuf::from("/home")));
        assert!(build(&Config::default(), &f, &[])
            .unwrap_err()
            .to_string()
            .contains("holds $HOME (/home/"));
        // Under $HOME already, or /: nothing more to mask.
        for ph in ["/home/dev/sub", "/"] {
            let mut f = facts();
            f.passwd_home = Some(PathBuf::from(ph));
            let plan = build(&Config::default(), &f, &[]).unwrap();
            let n = args_of(&plan).iter().filter(|a| *a == "--tmpfs").count();
            assert_eq!(
                n,
                args_of(&build(&Config::default(), &facts(), &[]).unwrap())
                    .iter()
                    .filter(|a| *a == "--tmpfs")
                    .count(),
                "{ph}"
            );
        }
    }

    #[test]
    fn protected_paths_are_read_only_by_checked_fd_over_the_workspace() {
        let mut f = facts();
        let cfgp = PathBuf::from("/workspaces/app/.git/config");
        f.protected = vec![RwBind {
            requested: cfgp.clone(),
            resolved: cfgp,
        }];
        let plan = build(&Config::default(), &f, &[]).unwrap();
        let ws = pos(&plan, &["--bind-fd", "210", "/workspaces/app"]);
        let ro = pos(
            &plan,
            &["--ro-bind-fd", "211", "/workspaces/app/.git/config"],
        );
        assert!(ro > ws, "protected paths come after the workspace bind");
    }

    #[test]
    fn nothing_outside_the_workspace_is_bound_or_guarded_because_the_walk_said_so() {
        let mut f = facts();
        let kube = PathBuf::from("/home/dev/.kube/config");
        let dotdot = PathBuf::from("/workspaces/app/../../home/dev/.ssh/config");
        let inside = PathBuf::from("/workspaces/app/.git/config");
        f.protected = [&kube, &dotdot, &inside]
            .iter()
            .map(|p| RwBind {
                requested: (*p).clone(),
                resolved: (*p).clone(),
            })
            .collect();
        // A symlink in the workspace resolved out of it.
        f.protected.push(RwBind {
            requested: "/workspaces/app/.envrc".into(),
            resolved: "/etc/shadow".into(),
        });
        f.discovered.paths = vec![kube.clone(), dotdot.clone(), inside.clone()];
        let plan = build(&Config::default(), &f, &[]).unwrap();
        let args = args_of(&plan);
        let ro_fd: Vec<&String> = args
            .windows(3)
            .filter(|w| w[0] == "--ro-bind-fd" && w[2] != paths::INSIDE_NOTICES)
            .map(|w| &w[2])
            .collect();
        assert_eq!(ro_fd, vec!["/workspaces/app/.git/config"], "{args:?}");
        assert_eq!(
            plan.creation_guard,
            vec![inside],
            "control: inside is guarded"
        );
    }

    #[test]
    fn a_workspace_in_a_hidden_home_entry_is_refused() {
        for (cwd, target) in [
            ("/workspaces/app/docs", "/home/dev/.ssh"),
            ("/home/dev/.config/proj", "/home/dev/.config/proj"),
            ("/workspaces/x", "/home/real/.aws/sub"),
        ] {
            let mut f = facts();
            f.passwd_home = Some(PathBuf::from("/home/real"));
            f.cwd = PathBuf::from(cwd);
            f.resolved
                .insert(f.cwd.clone(), Some(PathBuf::from(target)));
            let e = build(&Config::default(), &f, &[]).unwrap_err();
            assert_eq!(crate::error::exit_code(&e), 2);
            assert!(e.to_string().contains("which the sandbox hides"), "{e}");
            assert!(
                e.to_string().contains(
                    target
                        .split('/')
                        .take(4)
                        .collect::<Vec<_>>()
                        .join("/")
                        .as_str()
                ),
                "{e}"
            );
        }
        // A project directory under $HOME is still a workspace.
        let mut f = facts();
        f.cwd = PathBuf::from("/home/dev/projects/app");
        f.resolved.insert(f.cwd.clone(), Some(f.cwd.clone()));
        assert!(build(&Config::default(), &f, &[]).is_ok());
    }

    #[test]
    fn missing_workspace_is_an_error() {
        let mut f = facts();
        let cfg = Config {
            workspace_root: Some("/nope".into()),
            ..Config::default()
        };
        f.resolved.insert(PathBuf::from("/nope"), None);
        let e = build(&cfg, &f, &[]).unwrap_err();
        assert!(e.to_string().contains("/nope does not exist"), "{e}");
    }

    #[test]
    fn lone_version_query_keeps_its_fast_path() {
        for v in ["--version", "-v", "-V"] {
            assert_eq!(claude_args(&[OsString::from(v)]), [OsString::from(v)]);
        }
        // With anything else, --no-chrome is injected as always.
        let a = claude_args(&["--version".into(), "--chrome".into()]);
        assert_eq!(a, ["--no-chrome", "--version"].map(OsString::from));
        assert_eq!(claude_args(&[]), ["--no-chrome"].map(OsString::from));
    }

    #[test]
    fn chrome_flag_dropped_no_chrome_injected() {
        let args: Vec<OsString> = ["-p", "--chrome", "hi", "--chrome=x", "--", "--chrome"]
            .iter()
            .map(OsString::from)
            .collect();
        let out = claude_args(&args);
        assert_eq!(
            out,
            ["--no-chrome", "-p", "hi", "--", "--chrome"].map(OsString::from)
        );
        let plan = build(&Config::default(), &facts(), &args).unwrap();
        let a = args_of(&plan);
        let tail = &a[a.iter().position(|x| x == "--").unwrap()..];
        assert_eq!(
            tail,
            [
                "--",
                "/usr/libexec/claude-sandbox/claude-sandbox",
                "__shim",
                "203",
                "204",
                if Config::default().egress == Egress::Open {
                    "209"
                } else {
                    "-"
                },
                // No protected path in these facts: no creation guard.
                "-",
                "--",
                "/home/dev/.local/bin/claude",
                "--no-chrome",
                "-p",
                "hi",
                "--",
                "--chrome"
            ]
        );
    }
}
