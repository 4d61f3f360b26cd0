//! End-to-end: the root view fails closed (issue #24 item 4). A root
//! launch masks what only root may read under the system trees, whatever
//! the walk's bounds (depth, entries) and whatever a hostile host user or
//! an earlier session piled up to make it skip or stop early; and the
//! kernel's root-only files (ACPI tables, the host's timers, the host
//! network's TCP Fast Open key) are masked. Root-only files are planted in
//! tmpfs mounts over the system trees in each command's private mount
//! namespace: the machine's own `/var`, `/srv`, `/opt` are never written.
//! As the unprivileged user, the same files stay unreadable by the kernel's
//! own permissions (the regression a user would notice too).

mod common;
use common::*;

/// Plant `secret` (root-only, with `content`) at each path, creating parents.
fn plant(paths: &[&str]) -> String {
    paths
        .iter()
        .map(|p| {
            format!(
                "mkdir -p \"$(dirname {p})\" && echo SECRET-{} > {p} && chmod 600 {p}\n",
                p.replace('/', "_")
            )
        })
        .collect()
}

/// A shell loop printing `READ path` for each path whose content it could
/// read (an empty `/dev/null` mask reads as nothing) and `unreadable path`
/// otherwise.
fn try_read(paths: &[&str]) -> String {
    format!(
        "for f in {}; do if c=$(head -c 64 \"$f\" 2>/dev/null) && [ -n \"$c\" ]; then echo \"READ $f\"; else echo \"unreadable $f\"; fi; done",
        paths.join(" ")
    )
}

fn run_inside(w: &World, who: Who, setup: &str, script: &str) -> String {
    let o = w.shell_with_setup(who, setup, script).output().unwrap();
    assert!(
        o.status.success(),
        "{who:?}: {}\n{}",
        stderr(&o),
        stdout(&o)
    );
    stdout(&o)
}

/// The same script run by root outside the sandbox, in the same set-up.
fn run_outside(w: &World, setup: &str, script: &str) -> String {
    let o = w
        .command_with_setup(
            Who::Root,
            &w.workspace(Who::Root),
            setup,
            &[],
            &["sh", "-c", script],
        )
        .output()
        .unwrap();
    stdout(&o)
}

fn assert_none_read(who: Who, out: &str, paths: &[&str]) {
    for p in paths {
        assert!(
            out.contains(&format!("unreadable {p}\n")),
            "{who:?}: {p} was read inside:\n{out}"
        );
    }
}

/// Deeper than the old walk went under `/var` (4) and `/srv` (4), in a
/// chroot under `/var/cache` (its `shadow`, a debconf `passwords.dat`),
/// deeper than the new depth bound (24), and in three directories of
/// 10,000 entries each (more than the old walk's whole budget of 20,000
/// could cover after the system's own trees).
const SETUP_TREES: &str = "mount -t tmpfs tmpfs /srv\n\
    mount -t tmpfs tmpfs /var/cache\n\
    mount -t tmpfs tmpfs /opt\n\
    for d in 1 2 3; do mkdir -p /srv/big$d && (cd /srv/big$d && seq -f 'f%g' 10000 | xargs touch); done\n\
    mkdir -p /srv/pub && echo public > /srv/pub/readme\n";

const DEEP: &[&str] = &[
    "/srv/a/b/c/d/e/secret",
    "/var/cache/x/chroot/etc/shadow",
    "/var/cache/x/chroot/var/cache/debconf/passwords.dat",
    "/opt/t/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17/18/19/20/21/22/23/24/25/26/secret",
    "/srv/big1/secret",
    "/srv/big2/secret",
    "/srv/big3/secret",
];

#[test]
fn root_only_files_deep_or_in_huge_directories_stay_unreadable() {
    if !require("rootview_deep_and_huge") {
        return;
    }
    let w = World::with_probe_default_root_view("rvdeep");
    let setup = format!("{SETUP_TREES}{}", plant(DEEP));
    let script = format!(
        "{}; cat /srv/pub/readme; grep -c '^root:' /etc/passwd; echo x > written && cat written",
        try_read(DEEP)
    );
    for who in BOTH {
        let out = run_inside(&w, who, &setup, &script);
        assert_none_read(who, &out, DEEP);
        // Not everything is masked: a public file in an examined tree, the
        // user database and the workspace are there.
        assert!(
            out.ends_with("public\n1\nx\n"),
            "{who:?}: /srv/pub, /etc/passwd and the workspace: {out}"
        );
    }
    // Control: outside the sandbox, root reads every one of them.
    let out = run_outside(&w, &setup, &try_read(DEEP));
    assert_eq!(out.matches("READ ").count(), DEEP.len(), "{out}");
}

#[test]
fn a_hostile_pile_of_entries_hides_nothing() {
    if !require("rootview_bound") {
        return;
    }
    let w = World::with_probe_default_root_view("rvbound");
    // Another user fills a world-writable tree (as a hostile user of the
    // host, or an earlier session through its workspace, would) to use up
    // the walk; root's own trees hold many entries, secrets among the last
    // examined.
    // The pile lies between the two halves of root's trees, whatever order
    // a directory lists in; more than the old walk's whole bound.
    let setup = format!(
        "mount -t tmpfs tmpfs /srv\n\
         for i in $(seq 1 40); do mkdir -p /srv/t$i && (cd /srv/t$i && seq -f f%g 60 | xargs touch); done\n\
         mkdir -m 1777 /srv/shared\n\
         setpriv --reuid={TEST_UID} --regid={TEST_UID} --clear-groups sh -c 'mkdir /srv/shared/pile && cd /srv/shared/pile && seq -f p%g 25000 | xargs touch'\n\
         for i in $(seq 41 80); do mkdir -p /srv/t$i && (cd /srv/t$i && seq -f f%g 60 | xargs touch); done\n\
         {}",
        plant(&["/srv/t80/z/secret", "/srv/t1/secret", "/srv/shared/root-owned/key"])
    );
    let secrets = [
        "/srv/t80/z/secret",
        "/srv/t1/secret",
        "/srv/shared/root-owned/key",
    ];
    let out = run_inside(&w, Who::Root, &setup, &try_read(&secrets));
    assert_none_read(Who::Root, &out, &secrets);
    let out = run_outside(&w, &setup, &try_read(&secrets));
    assert_eq!(out.matches("READ ").count(), secrets.len(), "{out}");
}

#[test]
fn loops_of_symlinks_and_mounts_do_not_open_the_view() {
    if !require("rootview_loops") {
        return;
    }
    let w = World::with_probe_default_root_view("rvloops");
    // A symlink to its own directory, one to the tree's top, and a
    // directory bound inside itself again and again (each recursive bind
    // copies the ones before): the same root-only file under many paths,
    // some deeper than any bound.
    let setup = format!(
        "mount -t tmpfs tmpfs /srv\n{}\
         ln -s . /srv/loop/self && ln -s /srv /srv/loop/up\n\
         mkdir -p /srv/m/x && for i in 1 2 3 4 5 6 7; do mount --rbind /srv/m /srv/m/x; done\n",
        plant(&["/srv/loop/secret", "/srv/m/secret"])
    );
    let paths = [
        "/srv/loop/secret",
        "/srv/loop/self/self/self/secret",
        "/srv/loop/up/loop/up/loop/secret",
        "/srv/m/secret",
        "/srv/m/x/secret",
        "/srv/m/x/x/secret",
        "/srv/m/x/x/x/x/x/x/secret",
    ];
    for who in BOTH {
        let out = run_inside(&w, who, &setup, &try_read(&paths));
        assert_none_read(who, &out, &paths);
    }
    let out = run_outside(&w, &setup, &try_read(&paths));
    assert_eq!(out.matches("READ ").count(), paths.len(), "{out}");
}

#[test]
fn a_root_only_directory_holding_the_workspace_is_masked_around_it() {
    if !require("rootview_holder") {
        return;
    }
    let w = World::with_probe_default_root_view("rvholder");
    let setup = format!(
        "mount -t tmpfs tmpfs /srv\nmkdir -p /srv/private/ws && chmod 700 /srv/private\n{}",
        plant(&["/srv/private/secret"])
    );
    let o = w
        .command_with_setup(
            Who::Root,
            std::path::Path::new("/srv/private/ws"),
            &setup,
            &[],
            &[
                "claude",
                "shell",
                &format!(
                    "{}; echo x > written && cat written; ls /srv/private",
                    try_read(&["/srv/private/secret"])
                ),
            ],
        )
        .output()
        .unwrap();
    let out = stdout(&o);
    assert!(o.status.success(), "{}\n{out}", stderr(&o));
    assert_eq!(out, "unreadable /srv/private/secret\nx\nws\n");
}

/// The kernel's root-only files that exist on this machine, with what
/// reading them takes (`sh` reads text; the ACPI tables are binary).
fn kernel_files() -> Vec<&'static str> {
    [
        "/sys/firmware/acpi/tables/DSDT",
        "/sys/firmware/acpi/tables/FACP",
        "/sys/firmware/dmi/tables/DMI",
        "/sys/devices/virtual/dmi/id/product_serial",
        "/sys/kernel/slab/kmalloc-64/alloc_calls",
        "/sys/class/zram-control/hot_add",
        "/proc/timer_list",
        "/proc/slabinfo",
        "/proc/vmallocinfo",
        "/proc/sys/net/ipv4/tcp_fastopen_key",
    ]
    .into_iter()
    .filter(|p| {
        std::fs::metadata(p).is_ok_and(|m| {
            use std::os::unix::fs::PermissionsExt;
            m.permissions().mode() & 0o004 == 0
        })
    })
    .collect()
}

#[test]
fn the_kernel_s_root_only_files_are_unreadable() {
    if !require("rootview_kernel") {
        return;
    }
    let files = kernel_files();
    assert!(
        files.contains(&"/proc/timer_list"),
        "no root-only kernel file to test here: {files:?}"
    );
    let w = World::with_probe_default_root_view("rvkernel");
    // `od` reads binary tables; a mask reads as nothing (or not at all).
    let script = format!(
        "for f in {}; do if [ -n \"$(od -An -N8 -tx1 \"$f\" 2>/dev/null)\" ]; then echo \"READ $f\"; else echo \"unreadable $f\"; fi; done; cat /sys/devices/system/cpu/online",
        files.join(" ")
    );
    for who in BOTH {
        let out = run_inside(&w, who, "", &script);
        assert_none_read(who, &out, &files);
        // What sessions need from /sys is still there.
        assert!(
            out.lines().last().is_some_and(|l| l.starts_with('0')),
            "{who:?}: {out}"
        );
    }
    let out = run_outside(
        &w,
        "",
        &script.replace("; cat /sys/devices/system/cpu/online", ""),
    );
    assert_eq!(out.matches("READ ").count(), files.len(), "{out}");
}

/// A root launch holding `CAP_SYS_ADMIN` makes the root view's file masks
/// itself, before bubblewrap (issue #23 item 3, decision 0018): they must
/// hide as much as bubblewrap's, stay put when the session tries to remove
/// them, and never reach the namespace the launch started from (a mount
/// there would be a mount on the machine).
#[test]
fn masks_made_before_bubblewrap_hide_the_file_and_stay_in_the_sandbox() {
    if !require("rootview_premask") {
        return;
    }
    let w = World::with_probe("rvpremask");
    let out = premask_session(&w, "");
    // A mount is what hides it, made before bubblewrap's /proc: the root's
    // bind carried it in. (mountinfo lists a namespace's mounts in the order
    // they were made, kernel 6.8 and later.)
    assert!(
        out.contains("mask proc "),
        "the mask and /proc inside:\n{out}"
    );
}

/// Where the child cannot make them (here: one of them is on a path that
/// does not exist, as when AppArmor refuses `mount` or a file went away),
/// nothing was started and bubblewrap makes every mask, as it does for an
/// unprivileged launch: the session starts, the file stays hidden.
#[test]
fn masks_the_child_cannot_make_are_bubblewrap_s() {
    if !require("rootview_premask_fails") {
        return;
    }
    let w = World::new("rvprefail");
    w.use_mutation_binary();
    w.install_by_hand(&w.root.join("bin/probe"), "egress-jail = 0\n");
    let out = premask_session(&w, "CLAUDE_SANDBOX_TEST_MUTATION=pre-mask-fails ");
    // bubblewrap's: after its /proc.
    assert!(
        out.contains("proc mask "),
        "the mask and /proc inside:\n{out}"
    );
}

/// A root session in `w` (the launch prefixed with `env`) over a root-only
/// file planted under `/srv`, with shared mounts as systemd makes them;
/// asserts what holds however the mask was made, and returns the output
/// (the inside's `mask`/`proc` lines in mountinfo order).
fn premask_session(w: &World, env: &str) -> String {
    let key = "/srv/premask/key";
    // Shared mounts: a mount in a copy of this namespace would propagate
    // back here unless the launch cut it off. (This namespace is the
    // world's own; the machine's stays apart.)
    let setup = format!(
        "mount -t tmpfs tmpfs /srv\n{}mount --make-rshared /\n",
        plant(&[key])
    );
    let inside = format!(
        "{}; umount {key} 2>/dev/null && echo UNMOUNTED; umount -l {key} 2>/dev/null && echo UNMOUNTED; {}; \
         awk '$5 == \"{key}\" {{ print \"mask\" }} $5 == \"/proc\" {{ print \"proc\" }}' /proc/self/mountinfo | tr '\\n' ' '",
        try_read(&[key]),
        try_read(&[key]),
    );
    // The session runs while the launching namespace is looked at.
    let script = format!(
        "{env}claude shell {} > inside.out 2>&1 &\n\
         sleep 0.3; while ! [ -s inside.out ]; do sleep 0.05; done\n\
         awk '$5 == \"{key}\"' /proc/self/mountinfo | grep -q . && echo 'MOUNT-OUTSIDE'\n\
         wait $!; cat inside.out; {}",
        shell_quote(&format!("{inside}; sleep 0.5")),
        try_read(&[key]),
    );
    let out = run_outside(w, &setup, &script);
    // The launching namespace never had the mask.
    assert!(
        !out.contains("MOUNT-OUTSIDE"),
        "the mask reached the machine's side:\n{out}"
    );
    // Inside: unreadable before and after the attempts to unmount it.
    assert_eq!(
        out.matches(&format!("unreadable {key}\n")).count(),
        2,
        "the mask inside:\n{out}"
    );
    assert!(
        !out.contains("UNMOUNTED"),
        "the session removed a mask:\n{out}"
    );
    // Outside, root reads the file (the control: the same check sees a
    // readable file).
    assert!(
        out.ends_with(&format!("READ {key}\n")),
        "outside, after:\n{out}"
    );
    out
}

/// A root-only path the root view masks that vanishes before every attempt
/// (what heavy churn under `/var` or `/opt` looks like to the launch): the
/// launch still fails closed, with exit 125 and one line naming the path,
/// the directory that churns and what to do (issue #43 item 5). The
/// control: the same world launches without the fault.
#[test]
fn a_mask_vanishing_on_every_attempt_names_the_churning_directory() {
    if !require("rootview_churn") {
        return;
    }
    let w = World::new("rvchurn");
    w.use_mutation_binary();
    w.install_by_hand(&w.root.join("bin/probe"), "egress-jail = 0\n");
    let ok = w.run(Who::Root, &[], &["claude", "shell", "echo LAUNCHED"]);
    assert!(
        ok.status.success() && stdout(&ok).contains("LAUNCHED"),
        "control: {}",
        stderr(&ok)
    );
    let o = w.run(
        Who::Root,
        &[("CLAUDE_SANDBOX_TEST_MUTATION", "root-mask-vanishes")],
        &["claude", "shell", "echo LAUNCHED"],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(!stdout(&o).contains("LAUNCHED"), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("vanished"))
        .unwrap_or_else(|| panic!("no line says what vanished: {err}"));
    assert!(
        line.contains("/var/lib/csb-vanished-root-mask vanished")
            && line.contains("4 attempts")
            && line.contains("entries in /var/lib ")
            && line.contains("once that work has finished"),
        "{line}"
    );
}
