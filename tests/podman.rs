//! The devcontainer feature on rootless Podman with the official
//! devcontainer CLI (`--docker-path podman`; issue #26 item 1): a
//! devcontainer.json holding only "image" and the "features" entry (no
//! runArgs) gives a working, sandboxed `claude` for the container's root
//! and for a non-root remoteUser, and the egress jail holds.
//!
//! Podman runs as an unprivileged user that exists only in this test's
//! private "host": a mount, network and PID namespace of its own
//! ([`Host`]) with an overlay over /etc (the user, /etc/subuid and
//! /etc/subgid, which newuidmap reads there), the user's home and
//! XDG_RUNTIME_DIR in a [`TestDir`], its Podman storage on a tmpfs there,
//! loopback plus a host address
//! (192.168.5.9, what the container sees as host.containers.internal), and
//! a 0666 /dev/net/tun on a tmpfs over /dev/net: the mode Debian's and
//! Fedora's udev give it (KERNEL=="tun", MODE="0666"), which rootless
//! Podman's own slirp4netns needs to start any container; this machine has
//! no udev and leaves the host's node 0600. Nothing here changes the
//! machine: the /etc changes, the user and its mounts exist only in that
//! namespace, and dropping [`Host`] kills the namespace's init, which ends
//! every process Podman started (pause process, conmon, slirp4netns,
//! containers), panics included; the test then checks that none is left.
//!
//! No image registry is reachable: the base image is imported into the
//! user's storage from the debootstrap cache (tests/common/devcontainer.rs),
//! as tests/docker.rs does.
//!
//! In the root container the jail is probed as in tests/docker.rs: a
//! listener on the container's loopback, one on the host's loopback that
//! the container reaches at slirp4netns's gateway (10.0.2.2; Podman's
//! `allow_host_loopback`, turned on here as the worst case), and one on the
//! host's address are reached from the container and blocked from its
//! sandbox.

mod common;
use common::devcontainer::*;
use common::podman::*;
use common::*;

use std::process::Command;
use std::time::Instant;

/// The feature's way to /dev/net/tun under rootless Podman (no device
/// nodes): a link to the host's device, bound at /dev/net/host-tun by its
/// `mounts`, made by its entrypoint at every start. Without the link,
/// `claude` refuses (exit 125) and doctor fails, both naming what is
/// missing and the fix; `podman restart` makes it again.
fn tun_link_and_its_absence(host: &Host, id: &str, dir: &str) {
    let exec = |script: &str| host.podman(&["exec", "-w", dir, id, "bash", "-lc", script]);
    let o = exec("rm /dev/net/tun && claude --version");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(125), "{}{err}", stdout(&o));
    assert!(
        err.contains("/dev/net/tun does not exist")
            && err.contains("/dev/net/host-tun")
            && err.contains("\"containerUser\"")
            && err.contains("--device=/dev/net/tun"),
        "{err}"
    );
    let o = exec("/usr/libexec/claude-sandbox/claude-sandbox doctor");
    assert!(
        !o.status.success() && stdout(&o).contains("FAIL egress jail prerequisites"),
        "doctor without the device:\n{}",
        stdout(&o)
    );
    let o = host.podman(&["restart", "-t", "0", id]);
    assert!(o.status.success(), "podman restart: {}", stderr(&o));
    let o = exec("readlink /dev/net/tun && claude --version");
    assert!(
        o.status.success() && stdout(&o).starts_with("host-tun\n"),
        "after a restart:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
}

#[test]
fn feature_on_rootless_podman_with_the_official_cli_and_no_run_args() {
    let Some(real) = podman_prerequisites() else {
        return;
    };
    let t0 = Instant::now();
    let before = machine_state();
    let expected = stdout(&Command::new(&real).arg("--version").output().unwrap())
        .trim()
        .to_string();
    build_feature();
    let mut host = Host::start();
    let t_host = t0.elapsed();
    import_image(&host, &real);
    let t_image = t0.elapsed();

    let wsd = host.dir.join("ws");
    let root_id = up_and_check(&host, &workspace(&wsd, "rootws", None), None, &expected);
    let userws = workspace(&wsd, "userws", Some("vscode"));
    up_and_check(&host, &userws, Some("vscode"), &expected);
    let t_up = t0.elapsed();
    tun_link_and_its_absence(&host, &root_id, "/workspaces/rootws");
    jail_probe(&host, &root_id, &host.dir.join("ws/rootws"));
    let t_jail = t0.elapsed();

    let left = host.stop();
    assert!(left.is_empty(), "processes left in the host: {left:?}");
    let t_stop = t0.elapsed();
    let dir = host.dir.to_path_buf();
    drop(host);
    assert!(!dir.exists(), "{} left behind", dir.display());
    assert_eq!(machine_state(), before, "the machine changed");
    eprintln!(
        "podman feature e2e: host up {:.1?}, image imported {:.1?}, two `up`s {:.1?}, tun and jail probe {:.1?}, stop {:.1?}, removal {:.1?}, total {:.1?}",
        t_host,
        t_image - t_host,
        t_up - t_image,
        t_jail - t_up,
        t_stop - t_jail,
        t0.elapsed() - t_stop,
        t0.elapsed()
    );
}
