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

/// Issue #48: where the kept root view lives (in a world, its overlay of
/// /usr/libexec: kept between the world's commands, never the machine's).
const KEPT: &str = "/usr/libexec/claude-sandbox/root-view";
/// `/etc`'s kept view, every entry in it (decision 0037).
const KEPT_ETC: &str = "/usr/libexec/claude-sandbox/root-view-etc";

/// A private /opt (a tmpfs in the command's mount namespace) holding a tool
/// of 2,500 files (`/opt/tool/bin/run` lists its `lib` and sources one of
/// them) and a tree of 200,000 files in 200 directories (`/opt/big`), all
/// world-readable.
fn opt_trees(big: bool) -> String {
    let mut s = String::from(
        "mount -t tmpfs tmpfs /opt\n\
         mkdir -p /opt/tool/bin /opt/tool/lib && (cd /opt/tool/lib && seq -f m%g.sh 2500 | xargs touch)\n\
         echo 'echo TOOL-OK' > /opt/tool/lib/m2500.sh && echo 'public conf' > /opt/tool/conf\n\
         printf '#!/bin/sh\\nls /opt/tool/lib | wc -l\\n. /opt/tool/lib/m2500.sh\\n' > /opt/tool/bin/run && chmod 755 /opt/tool/bin/run\n",
    );
    if big {
        s.push_str(
            "for d in $(seq 200); do mkdir -p /opt/big/d$d && (cd /opt/big/d$d && seq -f f%g 1000 | xargs touch); done\n",
        );
    }
    s
}

/// The last line of a setup: two seconds, so the kept view may keep what
/// it made (a directory changed in the walk's last second is examined
/// again at the next launch).
const SETTLE: &str = "sleep 2\n";

/// `claude shell SCRIPT` as a line of a root script outside, stderr with
/// stdout.
fn launch_line(script: &str) -> String {
    format!("claude shell {} 2>&1\necho ---\n", shell_quote(script))
}

/// The kept view rewritten at `KEPT` by root with `edit` (a sed script)
/// applied to its body and its checksum made to match again: what a forger
/// writing as root would leave. Put at `to`.
fn forge(edit: &str, to: &str) -> String {
    format!(
        "b=$(mktemp) && tail -n +2 {KEPT} | sed '{edit}' > \"$b\"\n\
         {{ printf 'csb-root-view 1 %s\\n' \"$(sha256sum < \"$b\" | cut -d' ' -f1)\"; cat \"$b\"; }} > {to}.new\n\
         chmod 644 {to}.new && mv {to}.new {to}\n"
    )
}

#[test]
fn as_root_tools_of_2500_and_200000_files_run_inside_and_root_only_files_stay_hidden() {
    if !require("rootview_kept_trees") {
        return;
    }
    let w = World::with_probe_default_root_view("rvkept");
    let before = ["/opt/big/d117/secret", "/opt/tool/secret"];
    let between = ["/opt/big/d42/later-secret", "/opt/tool/new/deeper/secret"];
    let setup = format!("{}{}{SETTLE}", opt_trees(true), plant(&before));
    let all: Vec<&str> = before.iter().chain(&between).copied().collect();
    let inside = format!(
        "/opt/tool/bin/run; find /opt/big -type f -name 'f*' | wc -l; {}; cat /run/claude-sandbox/notices; : > {KEPT} 2>/dev/null && echo WROTE-KEPT-VIEW; true",
        try_read(&all)
    );
    let script = format!(
        "{}{}{}{}",
        launch_line(&inside),
        plant(&between),
        launch_line(&inside),
        try_read(&all)
    );
    let out = run_outside(&w, &setup, &script);
    let parts: Vec<&str> = out.split("---\n").collect();
    assert_eq!(parts.len(), 3, "{out}");
    for (i, inside) in parts[..2].iter().enumerate() {
        // The tools run whole, nothing under /opt is hidden whole (what
        // is, elsewhere, the session was told), and the session cannot
        // write the kept view.
        assert!(
            inside.starts_with("2500\nTOOL-OK\n200000\n"),
            "launch {i}: {inside}"
        );
        assert!(
            !inside
                .lines()
                .any(|l| l.starts_with("claude-sandbox: hidden whole: /opt")),
            "launch {i}: {inside}"
        );
        assert!(!inside.contains("WROTE-KEPT-VIEW"), "launch {i}: {inside}");
        assert_none_read(Who::Root, inside, &before);
    }
    // Planted between the two launches: hidden from the second.
    assert_none_read(Who::Root, parts[1], &between);
    // Control: outside, root reads every one of them.
    assert_eq!(parts[2].matches("READ ").count(), all.len(), "{out}");
}

#[test]
fn a_file_narrowed_after_it_was_recorded_is_hidden_once_the_view_is_refreshed() {
    if !require("rootview_kept_narrowed") {
        return;
    }
    let w = World::with_probe_default_root_view("rvnarrow");
    let conf = ["/opt/tool/conf"];
    let script = format!(
        "{}chmod 600 /opt/tool/conf && echo SECRET-conf > /opt/tool/conf\n{}{}{}{}",
        launch_line(&try_read(&conf)),
        launch_line(&try_read(&conf)),
        // An hour on (decision 0036): the last whole walk is too old.
        forge("s/^full-at .*/full-at 0/", KEPT),
        launch_line(&try_read(&conf)),
        try_read(&conf)
    );
    let out = run_outside(&w, &format!("{}{SETTLE}", opt_trees(false)), &script);
    let parts: Vec<&str> = out.split("---\n").collect();
    assert_eq!(parts.len(), 4, "{out}");
    // Public when recorded: readable, as it is to everyone.
    assert!(parts[0].contains("READ /opt/tool/conf"), "{out}");
    // Narrowed by chmod (its directory unchanged): the kept view, not yet
    // refreshed, does not see it — the window decision 0036 bounds.
    assert!(parts[1].contains("READ /opt/tool/conf"), "{out}");
    // Refreshed: a whole walk, and the file is hidden.
    assert_none_read(Who::Root, parts[2], &conf);
    // Control: outside, root reads it.
    assert!(parts[3].contains("READ /opt/tool/conf"), "{out}");
}

/// A root-only file mounted over a recorded public one between two
/// launches changes no directory's times (a mount moves nothing of its
/// mount point's parent): the kept view notices the mount table instead,
/// and the next launch walks whole and hides it.
#[test]
fn a_root_only_file_mounted_over_a_recorded_one_is_hidden_at_the_next_launch() {
    if !require("rootview_kept_mounted") {
        return;
    }
    let w = World::with_probe_default_root_view("rvmounted");
    let conf = ["/opt/tool/conf"];
    let script = format!(
        "{}echo SECRET-mounted > /run/csb-secret && chmod 600 /run/csb-secret && mount --bind /run/csb-secret /opt/tool/conf\n{}{}",
        launch_line(&try_read(&conf)),
        launch_line(&format!("{}; cat /run/claude-sandbox/notices", try_read(&conf))),
        try_read(&conf)
    );
    let out = run_outside(&w, &format!("{}{SETTLE}", opt_trees(false)), &script);
    let parts: Vec<&str> = out.split("---\n").collect();
    assert_eq!(parts.len(), 3, "{out}");
    // Public when recorded: readable, as it is to everyone.
    assert!(parts[0].contains("READ /opt/tool/conf"), "{out}");
    // The mount is seen, the trees walked whole: hidden.
    assert_none_read(Who::Root, parts[1], &conf);
    // Control: outside, root reads the mounted secret.
    assert!(parts[2].contains("READ /opt/tool/conf"), "{out}");
}

/// A launch recording `/opt/tool/secret` as masked, then `tamper` done to
/// the kept view, then a launch reading the secret; returns the output of
/// the second launch.
fn after_tampering(name: &str, tamper: &str) -> String {
    let w = World::with_probe_default_root_view(name);
    let secret = ["/opt/tool/secret"];
    let setup = format!("{}{}{SETTLE}", opt_trees(false), plant(&secret));
    let script = format!(
        "{}{tamper}\n{}",
        launch_line("true"),
        launch_line(&try_read(&secret))
    );
    let out = run_outside(&w, &setup, &script);
    let parts: Vec<&str> = out.split("---\n").collect();
    assert_eq!(parts.len(), 3, "{out}");
    parts[1].to_string()
}

/// Taking the secret's mask out of the kept view, checksum fixed.
const UNMASK: &str = "/^m secret$/d";

#[test]
fn a_kept_view_forged_as_root_is_what_the_next_launch_uses() {
    if !require("rootview_kept_forged") {
        return;
    }
    // The control for the tampering tests: a kept view root wrote, as the
    // launch writes it, is trusted and reused — the secret it no longer
    // names is readable. What the tests below change is all that differs.
    let out = after_tampering("rvforged", &forge(UNMASK, KEPT));
    assert!(out.contains("READ /opt/tool/secret"), "{out}");
    assert!(!out.contains("not trusted"), "{out}");
}

#[test]
fn an_edited_kept_view_is_discarded_and_the_trees_walked_whole() {
    if !require("rootview_kept_edited") {
        return;
    }
    let out = after_tampering("rvedited", &format!("sed -i '{UNMASK}' {KEPT}"));
    assert_none_read(Who::Root, &out, &["/opt/tool/secret"]);
    assert!(
        out.contains(&format!(
            "the kept root view {KEPT} was not trusted (its checksum"
        )),
        "{out}"
    );
}

#[test]
fn a_kept_view_replaced_by_a_symlink_is_discarded() {
    if !require("rootview_kept_symlink") {
        return;
    }
    let forged = "/usr/libexec/claude-sandbox/forged";
    let tamper = format!("{}ln -sfn {forged} {KEPT}", forge(UNMASK, forged));
    let out = after_tampering("rvsymlink", &tamper);
    assert_none_read(Who::Root, &out, &["/opt/tool/secret"]);
    assert!(out.contains("not trusted (it is a symlink)"), "{out}");
}

#[test]
fn a_kept_view_owned_by_another_user_is_discarded() {
    if !require("rootview_kept_foreign") {
        return;
    }
    let tamper = format!("{}chown {TEST_UID} {KEPT}", forge(UNMASK, KEPT));
    let out = after_tampering("rvforeign", &tamper);
    assert_none_read(Who::Root, &out, &["/opt/tool/secret"]);
    assert!(out.contains(&format!("owned by uid {TEST_UID}")), "{out}");
}

#[test]
fn install_walks_whole_and_the_next_root_view_reuses_what_it_kept() {
    if !require("rootview_kept_install") {
        return;
    }
    let w = World::with_default_root_view("rvinstall");
    let r = w.root.display();
    // One mount namespace for all three, as in a container: a mount added
    // or changed under the walked trees would mean a whole walk.
    let doctor =
        "/usr/libexec/claude-sandbox/claude-sandbox doctor 2>&1 | grep 'root view'; echo ---";
    let o = w.run_root_raw(&format!(
        "{r}/bin/claude-sandbox install --no-packages --user root --real-claude {r}/bin/probe || echo INSTALL-FAILED\n\
         echo ---\n{doctor}\nrm {KEPT}\n{doctor}\n"
    ));
    let out = stdout(&o);
    let parts: Vec<&str> = out.split("---\n").collect();
    assert_eq!(parts.len(), 4, "{out}{}", stderr(&o));
    assert!(
        parts[0].contains("root view walked whole and kept"),
        "{out}{}",
        stderr(&o)
    );
    assert!(
        parts[1].contains(&format!("the kept view {KEPT} reused")),
        "{out}"
    );
    // Control: with the kept view gone, doctor walks those trees whole.
    assert!(
        parts[2].contains(&format!("{KEPT} walked whole, kept")),
        "{out}"
    );
}

/// Decision 0037: `/etc` is kept too, every entry in it stat'ed again at
/// each launch, so a file narrowed there by `chmod` in a directory that
/// did not change is hidden from the next launch, not an hour later.
#[test]
fn a_file_in_etc_narrowed_in_place_is_hidden_at_the_next_launch() {
    if !require("rootview_kept_etc_narrowed") {
        return;
    }
    let w = World::with_probe_default_root_view("rvetcnarrow");
    let conf = ["/etc/csb-tool.conf"];
    let setup =
        format!("echo public-conf > /etc/csb-tool.conf && chmod 644 /etc/csb-tool.conf\n{SETTLE}");
    let script = format!(
        "{}chmod 600 /etc/csb-tool.conf && echo SECRET-etc > /etc/csb-tool.conf\n{}{}\n/usr/libexec/claude-sandbox/claude-sandbox doctor 2>&1 | grep 'root view'",
        launch_line(&try_read(&conf)),
        launch_line(&try_read(&conf)),
        try_read(&conf)
    );
    let out = run_outside(&w, &setup, &script);
    let parts: Vec<&str> = out.split("---\n").collect();
    assert_eq!(parts.len(), 3, "{out}");
    // Public when recorded: readable, as it is to everyone.
    assert!(parts[0].contains("READ /etc/csb-tool.conf"), "{out}");
    // Narrowed in place, /etc unchanged: hidden at once, from the kept view.
    assert_none_read(Who::Root, parts[1], &conf);
    assert!(!parts[1].contains("not trusted"), "{out}");
    // Control: outside, root reads it.
    assert!(parts[2].contains("READ /etc/csb-tool.conf"), "{out}");
    // What hid it was /etc's kept view, reused, not a walk of /etc.
    assert!(
        parts[2].contains(&format!("the kept view {KEPT_ETC} reused")),
        "{out}"
    );
}

#[test]
fn an_edited_etc_view_is_discarded_and_etc_walked_whole() {
    if !require("rootview_kept_etc_edited") {
        return;
    }
    let w = World::with_probe_default_root_view("rvetcedited");
    let secret = ["/etc/csb-secret"];
    let setup = format!("{}{SETTLE}", plant(&secret));
    // The secret's mask taken out of /etc's kept view, its checksum left.
    let script = format!(
        "{}grep -q '^m csb-secret$' {KEPT_ETC} && echo RECORDED\nsed -i '/^m csb-secret$/d' {KEPT_ETC}\n{}{}",
        launch_line("true"),
        launch_line(&try_read(&secret)),
        try_read(&secret)
    );
    let out = run_outside(&w, &setup, &script);
    let parts: Vec<&str> = out.split("---\n").collect();
    assert_eq!(parts.len(), 3, "{out}");
    assert!(parts[1].starts_with("RECORDED\n"), "{out}");
    assert_none_read(Who::Root, parts[1], &secret);
    assert!(
        parts[1].contains(&format!(
            "the kept root view {KEPT_ETC} was not trusted (its checksum"
        )),
        "{out}"
    );
    // Control: outside, root reads it.
    assert!(parts[2].contains("READ /etc/csb-secret"), "{out}");
}
