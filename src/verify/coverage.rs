//! The battery's coverage of the plan (test code only): every operation
//! of a full sandbox has a check that fails when it is missing
//! ([`covering_check`], read off the same tables the plan is built from),
//! every check has its row in docs/verify.md, and the `/verify-sandbox`
//! command runs the battery.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use super::battery::BATTERY;
use super::fixtures::lockdown_settings;
use crate::sandbox::LaunchRecord;
use crate::sandbox::{self, Data, Namespace, Sandbox};
use crate::{plan, sys::paths};

/// The battery check that fails when `m` is missing from a sandbox whose
/// launch record is `rec`, read off the same tables the plan is built from;
/// `None` for an operation no check notices. The unit test
/// `every_plan_operation_has_a_check` builds a full sandbox and requires a
/// check for each of its operations: so a defence added to the plan needs a
/// check here, or that test fails.
pub(super) fn covering_check(m: &sandbox::Mount, rec: &LaunchRecord) -> Option<&'static str> {
    let home = &rec.home;
    let in_home = |table: &[&str], p: &Path| table.iter().any(|r| home.join(r) == p);
    let in_system = |table: &[&str], p: &Path| table.iter().any(|t| Path::new(t) == p);
    let real = home.join(paths::INSIDE_REAL_CLAUDE_REL);
    let check = match m {
        sandbox::Mount::ReadOnly { src, dst } if src == Path::new("/") && dst == Path::new("/") => {
            "workspace-scoped"
        }
        sandbox::Mount::ReadOnly { dst, .. } if dst == Path::new("/proc") => "pid-namespace",
        sandbox::Mount::ReadOnly { dst, .. } if in_home(plan::HOME_RO, dst) || *dst == real => {
            "strict-home"
        }
        sandbox::Mount::ReadWrite { src, dst } if src == dst && in_home(plan::HOME_RW, dst) => {
            "strict-home"
        }
        sandbox::Mount::ReadWrite { src, dst }
            if plan::HOME_PRIVATE.iter().any(|(rel, name)| {
                home.join(rel) == *dst && plan::private_dir(home, name) == *src
            }) =>
        {
            "private-state"
        }
        sandbox::Mount::ReadOnly { dst, .. } if in_home(plan::HOME_FORGE, dst) => "private-state",
        // Issue #44: a git directory's hooks, a held copy.
        sandbox::Mount::ReadWrite { src, dst }
            if src.starts_with(home.join(crate::held::STATE_REL)) && dst.ends_with("hooks") =>
        {
            "git-held"
        }
        sandbox::Mount::CheckedReadOnly(_) => "protected-paths",
        sandbox::Mount::Checked(_) => "workspace-scoped",
        sandbox::Mount::Tmpfs { dst } if dst == Path::new("/tmp") => "tmp-tmpfs",
        sandbox::Mount::Tmpfs { dst } if in_system(plan::SYSTEM_TMPFS, dst) => "run-masked",
        sandbox::Mount::ReadOnly { dst, .. } if dst.starts_with("/run") => "run-masked",
        sandbox::Mount::Tmpfs { dst }
            if dst == home
                || in_home(plan::HOME_SHARE_MASKED, dst)
                || in_home(plan::HOME_CLAUDE_MASKED, dst)
                || rec.other_homes.contains(dst) =>
        {
            "strict-home"
        }
        sandbox::Mount::Empty { dst }
            if in_system(plan::SYSTEM_NULLED, dst) || in_home(plan::HOME_NULLED, dst) =>
        {
            "masked-files-empty"
        }
        // Sockets under /run: verify looks for every socket there.
        sandbox::Mount::Empty { dst } if dst.starts_with("/run") => "run-masked",
        sandbox::Mount::Empty { dst } | sandbox::Mount::Tmpfs { dst }
            if rec.root_view && crate::launch::rootview::covers(dst) =>
        {
            "root-view"
        }
        sandbox::Mount::Dev { .. } => "dev-fresh",
        sandbox::Mount::Proc { .. } => "pid-namespace",
        sandbox::Mount::Empty { dst } if in_system(plan::PID1_MEM, dst) => "pid1-sealed",
        sandbox::Mount::Data { dst, .. } if dst == Path::new(paths::GITCONFIG) => {
            "gitconfig-curated"
        }
        sandbox::Mount::Data {
            data: Data::Record(_),
            ..
        } => "inside-marker",
        sandbox::Mount::Data { dst, .. } if dst == Path::new("/etc/resolv.conf") => "jail-routes",
        sandbox::Mount::Data { dst, .. } if dst == Path::new(paths::MANAGED_SETTINGS) => {
            "managed-settings-inside"
        }
        _ => return None,
    };
    Some(check)
}

/// Every defence of `sb` with the check that notices its absence (see
/// [`covering_check`]); `None` where no check does.
pub(super) fn coverage(sb: &Sandbox, rec: &LaunchRecord) -> Vec<(String, Option<&'static str>)> {
    let mut v: Vec<(String, Option<&'static str>)> = sb
        .namespaces
        .iter()
        .map(|ns| {
            let check = match ns {
                Namespace::Pid => Some("pid-namespace"),
                Namespace::Ipc | Namespace::Uts => Some("ipc-uts-namespaces"),
                Namespace::CgroupIfSupported => None,
            };
            (format!("namespace {ns:?}"), check)
        })
        .collect();
    v.push((
        format!("capabilities {:?}", sb.capabilities),
        Some("capabilities-dropped"),
    ));
    v.push(("seccomp".into(), Some("syscalls-refused")));
    if !sb.nested_userns {
        v.push((
            "nested user namespaces disabled".into(),
            Some("no-nested-userns"),
        ));
    }
    v.push(("environment".into(), Some("token-env-absent")));
    // Issue #24: what a session may exhaust.
    v.push((format!("pids {:?}", sb.limits.pids), Some("pids-limit")));
    v.push(("tmpfs sizes".into(), Some("tmpfs-sized")));
    if sb.limits.private_state_max.is_some() {
        v.push(("private state bound".into(), Some("private-state-bounded")));
    }
    match &sb.network {
        sandbox::Network::Jail(j) => {
            v.push(("network jail".into(), Some("jail-routes")));
            if j.dns_forward.is_some() {
                v.push((
                    "the jail's DNS forwarder".into(),
                    Some("dns-forwarder-only"),
                ));
            }
        }
        sandbox::Network::Allowlist(_) => {
            v.push(("allowlist proxy".into(), Some("egress-allowlist")))
        }
        sandbox::Network::Host => {}
    }
    if !sb.network.published().is_empty() {
        v.push(("published ports".into(), Some("published-ports")));
    }
    v.extend(
        sb.mounts
            .iter()
            .map(|m| (format!("{m:?}"), covering_check(m, rec))),
    );
    v
}

/// Operations of the plan no check covers, each with the reason.
pub(super) const UNCHECKED: &[(&str, &str)] = &[(
    "namespace CgroupIfSupported",
    "best effort: bubblewrap skips it where the kernel has no cgroup namespaces; the cgroup tree is read-only inside anyway",
)];

/// A sandbox with every table of the plan in play.
fn full_sandbox() -> (Sandbox, LaunchRecord) {
    let mut f = crate::plan::fixtures::facts();
    for p in plan::candidates(&f.home) {
        f.existing.insert(p);
    }
    f.passwd_home = Some(PathBuf::from("/home/real"));
    // A root launch, so the root-view masks are in play too.
    crate::plan::fixtures::as_root(&mut f);
    let extra = PathBuf::from("/srv/data");
    f.resolved.insert(extra.clone(), Some(extra.clone()));
    if let Some(j) = f.jail.as_mut() {
        j.resolv.nameservers = vec![Ipv4Addr::new(10, 77, 0, 1)];
    }
    f.managed_settings = Some(lockdown_settings());
    let cfg = crate::config::Config {
        allow_write: vec![extra],
        publish_port: vec![3000],
        ..Default::default()
    };
    let sb = plan::build(&cfg, &f, &[]).unwrap();
    let rec = sb.record().expect("a launch record").clone();
    (sb, rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plan_operation_has_a_check() {
        let (sb, rec) = full_sandbox();
        let names: Vec<&str> = BATTERY.iter().map(|d| d.name).collect();
        let cov = coverage(&sb, &rec);
        assert!(cov.len() > 30, "{cov:?}");
        for (op, check) in &cov {
            match check {
                Some(c) => assert!(names.contains(c), "{op}: {c} is not in the battery"),
                None => assert!(
                    UNCHECKED.iter().any(|(o, _)| o == op),
                    "the plan's operation {op} has no check in the battery: add one (verify::covering_check) or list it in UNCHECKED with the reason"
                ),
            }
        }
        // Every table the plan masks from is covered, not just some entries.
        for dst in plan::SYSTEM_NULLED
            .iter()
            .map(PathBuf::from)
            .chain(plan::HOME_NULLED.iter().map(|r| rec.home.join(r)))
        {
            assert!(
                sb.mounts
                    .contains(&sandbox::Mount::Empty { dst: dst.clone() }),
                "{} not masked in the full sandbox",
                dst.display()
            );
        }
    }

    #[test]
    fn an_operation_no_check_knows_fails_the_coverage_test() {
        let (_, mut rec) = full_sandbox();
        // (A root launch's masks under /etc are the root-view check's.)
        rec.root_view = false;
        for m in [
            sandbox::Mount::Empty {
                dst: "/etc/new-secret".into(),
            },
            sandbox::Mount::Tmpfs {
                dst: "/var/lib/secrets".into(),
            },
            sandbox::Mount::ReadWrite {
                src: rec.home.join(".ssh"),
                dst: rec.home.join(".ssh"),
            },
        ] {
            assert_eq!(covering_check(&m, &rec), None, "{m:?}");
        }
    }

    #[test]
    fn every_check_is_documented() {
        let doc = include_str!("../../docs/verify.md");
        for (i, d) in BATTERY.iter().enumerate() {
            assert!(
                doc.contains(&format!("| {} | {} |", i + 1, d.name)),
                "docs/verify.md lacks row {} {}",
                i + 1,
                d.name
            );
        }
    }

    #[test]
    fn slash_command_runs_the_battery_by_path_then_probes() {
        let cmd = crate::install::promote::VERIFY_COMMAND;
        assert!(cmd.contains(&format!("{} verify", paths::SELF_BIN)));
        for w in [
            "at least 10",
            "BLOCKED",
            "ESCAPED",
            "INCONCLUSIVE",
            "RESULT: SANDBOX LEAKING",
        ] {
            assert!(cmd.contains(w), "{w}");
        }
    }
}
