//! The egress proxy (`egress = allowlist`; SPEC §4.9, decision 0008): the
//! sandbox has no route at all; its one way out is a proxy on its
//! loopback, served from the shadow, that lets through only names on the
//! allowlist, on the ports their rules allow and only to addresses the
//! jail would route, decides each plain-http request on its own and sends
//! it only where it was decided, and logs every request as it opens and as
//! it closes. In the open jail, while the session holds a brokered
//! credential, the same proxy lets every name through, to the addresses
//! the jail routes only (decision 0016). Inward, only the `publish-port`
//! ports, from the host's 127.0.0.1 (decision 0011).
//!
//! Files: `shadow.rs` the shadow's side ([`Proxy`], the accept loop);
//! `shared.rs` what its connections share, and the proxy's own answers;
//! `holder.rs` the allowlist holder (`__holder-allowlist`);
//! `connection.rs` one client connection's requests, each decided;
//! `request.rs` a request head parsed; `http.rs` plain-HTTP framing and
//! exchanges; `relay.rs` a tunnel carried; `logfile.rs` the log, written as
//! requests open and close; `publish.rs` `publish-port` (the host-side
//! check; in allowlist mode the shadow's relay and the holder's connector).
//!
//! May import: `egress::policy`, `egress::wire` (HTTP/1.1's grammar),
//! `egress::holders` (what both holders share), `egress::broker` (brokered
//! hosts are handed to it), `sandbox`, `sys`, `error`.
//!
//! Exports: [`Proxy`], [`Published`], [`allowlist_holder_main`]
//! (`__holder-allowlist`), [`parse_request`] (lib.rs's `fuzz_targets`);
//! to the jail's holder, [`send_listener`] (the broker's proxy in the open
//! jail).

mod connection;
mod holder;
mod http;
mod logfile;
mod publish;
mod relay;
mod request;
mod shadow;
mod shared;

pub(crate) use holder::allowlist_holder_main;
pub(in crate::egress) use holder::send_listener;
pub(crate) use publish::Published;
pub(crate) use request::parse_request;
pub(crate) use shadow::Proxy;
