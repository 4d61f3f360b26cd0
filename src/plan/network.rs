//! The network decisions (SPEC §4.7, §4.9): host, the open egress jail,
//! or allowlist mode's proxy, decided in one place ([`egress`]).

use super::facts::Facts;
use crate::config::Config;
use crate::egress::policy::Egress;
use crate::error::bad_input;
use crate::sandbox::{JailNet, Network, ProxyNet, RwBind};
use crate::sys::paths;

/// How the sandbox reaches the network: the one place this is decided
/// (facts are gathered for it, the plan adds it; everything after reads
/// [`crate::sandbox::Sandbox::network`]).
pub(crate) fn egress(cfg: &Config) -> Egress {
    cfg.egress
}

/// Whether the sandbox gets a network namespace of its own (open jail or
/// allowlist): the host's routes are then gathered ([`Facts::jail`]).
pub(crate) fn jailed(cfg: &Config) -> bool {
    egress(cfg).jailed()
}

/// The network mode (§4.7, §4.9) and, with the jail, the resolv.conf to
/// bind over the host's when the host's would not work inside.
pub(super) fn network(
    cfg: &Config,
    facts: &Facts,
    rw: &[RwBind],
) -> anyhow::Result<(Network, Option<String>)> {
    let mode = egress(cfg);
    if !mode.jailed() {
        return Ok((Network::Host, None));
    }
    let j = facts.jail.as_ref().ok_or_else(|| {
        crate::error::setup("internal error: the egress jail's host facts were not gathered")
    })?;
    if mode == Egress::Allowlist {
        return Ok((Network::Allowlist(proxy_net(cfg, facts, j, rw)?), None));
    }
    let plan = crate::egress::policy::plan_jail(&j.routes, &j.resolv, &cfg.allow_ip);
    let resolv_conf = plan.resolv_conf.filter(|_| !j.resolv_missing);
    // Decision 0016: the broker's proxy only when something is brokered.
    let proxy = match facts.broker {
        Some(_) => Some(ProxyNet {
            publish: Vec::new(),
            ..proxy_net(cfg, facts, j, rw)?
        }),
        None => None,
    };
    Ok((
        Network::Jail(JailNet {
            route_batch: plan.route_batch,
            dns_forward: plan.dns_forward,
            iface: j.routes.iface.clone(),
            publish: cfg.publish_port.clone(),
            proxy,
        }),
        resolv_conf,
    ))
}

/// Allowlist mode's proxy: the configuration's rules and presets, Claude
/// Code's own domains, and what the open jail would block; in the open jail
/// (the credential broker's, decision 0016) every name, and what the jail
/// blocks. The log must lie outside every read-write root, or the session
/// could rewrite it.
pub(super) fn proxy_net(
    cfg: &Config,
    facts: &Facts,
    j: &crate::egress::policy::JailFacts,
    rw: &[RwBind],
) -> anyhow::Result<ProxyNet> {
    let log = crate::egress::policy::log_path(&facts.home, &facts.session);
    if let Some(b) = rw.iter().find(|b| log.starts_with(&b.resolved)) {
        return Err(bad_input(format!(
            "refusing egress = {}{}: the connection log {} would lie in the read-write {}; narrow workspace-root or allow-write in {}",
            egress(cfg).name(),
            if egress(cfg) == Egress::Open { " with the credential broker" } else { "" },
            log.display(),
            b.resolved.display(),
            paths::CONFIG_FILE
        )));
    }
    let listen = crate::egress::policy::PROXY_ADDR;
    let open = egress(cfg) == Egress::Open;
    if cfg.publish_port.contains(&listen.port()) {
        return Err(bad_input(format!(
            "refusing publish-port = {}: with egress = {} that port inside the sandbox is the proxy's ({listen}){}; pick another port in {}",
            listen.port(),
            egress(cfg).name(),
            if open { ", which the credential broker serves while a brokered credential is held" } else { "" },
            paths::CONFIG_FILE
        )));
    }
    let blocked = crate::egress::policy::blocked_ranges(&j.routes);
    Ok(ProxyNet {
        listen,
        policy: if open {
            crate::egress::policy::Policy::open(&cfg.allow_ip, blocked)
        } else {
            crate::egress::policy::Policy::new(
                &cfg.allow_domain,
                &cfg.allow_domains,
                facts.claude_traffic,
                &cfg.allow_ip,
                blocked,
            )
        },
        session: facts.session.clone(),
        log,
        publish: cfg.publish_port.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixtures::facts;

    fn plan(egress: Egress, ports: &[u16]) -> anyhow::Result<crate::sandbox::Sandbox> {
        let mut f = facts();
        f.existing
            .insert(std::path::PathBuf::from(paths::LAUNCH_RECORD));
        let cfg = Config {
            egress,
            publish_port: ports.to_vec(),
            ..Default::default()
        };
        crate::plan::build(&cfg, &f, &[])
    }

    #[test]
    fn published_ports_reach_the_network_runtime_and_the_record() {
        for mode in [Egress::Open, Egress::Allowlist] {
            let sb = plan(mode, &[3000, 8888]).unwrap();
            assert_eq!(sb.network.published(), [3000, 8888], "{mode:?}");
            assert_eq!(sb.record().unwrap().publish_port, [3000, 8888]);
            let sb = plan(mode, &[]).unwrap();
            assert!(sb.network.published().is_empty());
            assert!(sb.record().unwrap().publish_port.is_empty());
        }
        // The host's network shares every port: nothing to forward.
        let sb = plan(Egress::Off, &[3000]).unwrap();
        assert!(sb.network.published().is_empty());
        assert!(sb.record().unwrap().publish_port.is_empty());
    }

    #[test]
    fn the_proxys_own_port_is_not_published_in_allowlist_mode() {
        let port = crate::egress::policy::PROXY_ADDR.port();
        let e = plan(Egress::Allowlist, &[3000, port]).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_BAD_INPUT);
        assert!(
            e.to_string()
                .starts_with(&format!("refusing publish-port = {port}: ")),
            "{e}"
        );
        // The open jail has no proxy there.
        assert!(plan(Egress::Open, &[port]).is_ok());
    }

    #[test]
    fn the_open_jail_gets_the_brokers_proxy_only_with_a_brokered_credential() {
        let plan_with = |broker: bool, ports: &[u16]| {
            let mut f = facts();
            f.existing
                .insert(std::path::PathBuf::from(paths::LAUNCH_RECORD));
            f.broker = broker.then(|| crate::egress::policy::broker::Inside {
                files: Vec::new(),
                env: Vec::new(),
                bundle_path: "/etc/ssl/certs/ca-certificates.crt".into(),
                bundle: "PEM".into(),
                ..Default::default()
            });
            let cfg = Config {
                publish_port: ports.to_vec(),
                ..Default::default()
            };
            crate::plan::build(&cfg, &f, &[])
        };
        let env_has_proxy =
            |sb: &crate::sandbox::Sandbox| sb.env.iter().any(|(k, _)| k == "HTTPS_PROXY");
        let sb = plan_with(false, &[]).unwrap();
        let Network::Jail(j) = &sb.network else {
            panic!("{:?}", sb.network)
        };
        assert!(j.proxy.is_none() && !env_has_proxy(&sb));
        let sb = plan_with(true, &[3000]).unwrap();
        let Network::Jail(j) = &sb.network else {
            panic!("{:?}", sb.network)
        };
        let p = j.proxy.as_ref().expect("the broker's proxy");
        assert!(p.policy.any_name && p.policy.rules.is_empty());
        assert!(!p.policy.blocked.is_empty(), "the jail's blocked ranges");
        // pasta forwards the published ports; the proxy relays none.
        assert!(p.publish.is_empty() && j.publish == [3000]);
        assert!(env_has_proxy(&sb));
        // The proxy's port is not published while it serves there.
        let port = crate::egress::policy::PROXY_ADDR.port();
        let e = plan_with(true, &[port]).unwrap_err();
        assert!(e.to_string().contains("credential broker"), "{e}");
        assert!(plan_with(false, &[port]).is_ok());
    }
}
