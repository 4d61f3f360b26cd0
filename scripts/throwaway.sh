#!/usr/bin/env bash
# Run a command as root in a private mount namespace in which the machine's
# system trees are overlays whose writes are thrown away when it ends:
# /etc, /usr, /opt, /root, /srv, /home and every directory of /var but
# /var/tmp. What the command installs there (Debian packages, the sandbox
# at /usr/local/bin/claude, /etc/claude-*, the system git config, root's
# ~/.cargo) is gone afterwards; the machine is as it was. The current
# directory (a checkout: its build is kept), /tmp and /var/tmp stay the
# machine's own. CI runs the README's two commands this way (.ci/run), so an
# install there is the one the suite runs beside, and a developer can try
# `bash scripts/throwaway.sh bash scripts/setup.sh` without changing the
# machine.
#
# Exit status: the command's; 2 when this script cannot set the namespace up.
set -euo pipefail

die() { echo "throwaway.sh: $*" >&2; exit 2; }
[ "$#" -gt 0 ] || die "usage: bash scripts/throwaway.sh COMMAND [ARG...]"
[ "$(id -u)" -eq 0 ] || die "needs root (a mount namespace and overlays); run it with sudo"

# The trees overlaid: what package installs, `claude-sandbox install`, rustup
# and npm write. /var/tmp is left out: the upper layers live there, and so do
# the tests' worlds and engines (Docker's storage cannot be on an overlay).
trees() {
    local d
    for d in /etc /usr /opt /root /srv /home /var/*; do
        [ "$d" = /var/tmp ] && continue
        [ -d "$d" ] && [ ! -L "$d" ] && echo "$d"
    done
}

if [ -z "${CSB_THROWAWAY_SCRATCH:-}" ]; then
    # A mount below a tree would be hidden by its overlay: say which, and stop.
    while read -r point; do
        die "$point is a mount point inside a tree this script overlays; its writes could not be thrown away"
    done < <(trees | awk 'NR == FNR { t[$0] = 1; next }
        { p = $5; for (d in t) if (index(p, d "/") == 1 && p != "/var/tmp" && index(p, "/var/tmp/") != 1) print p }' - /proc/self/mountinfo)
    scratch="$(mktemp -d /var/tmp/csb-throwaway.XXXXXX)"
    trap 'rm -rf --one-file-system "$scratch"' EXIT
    set +e
    CSB_THROWAWAY_SCRATCH="$scratch" unshare --mount --propagation private bash "$0" "$@"
    rc=$?
    set -e
    exit "$rc"
fi

s="$CSB_THROWAWAY_SCRATCH"
here="$(pwd -P)"
mkdir "$s/keep"
mount --bind "$here" "$s/keep"
while read -r d; do
    key="$(printf '%s' "${d#/}" | tr / _)"
    mkdir "$s/up-$key" "$s/wk-$key"
    # The overlay's root takes the upper directory's mode and owner (/root is 0700).
    chmod --reference="$d" "$s/up-$key"
    chown --reference="$d" "$s/up-$key"
    # volatile: nothing here needs to survive a crash, and it spares the
    # whole disk's sync when the namespace's last process leaves.
    mount -t overlay csb-throwaway \
        -o "volatile,lowerdir=$d,upperdir=$s/up-$key,workdir=$s/wk-$key" "$d" \
        || die "could not overlay $d (overlayfs with upper layers in $s)"
done < <(trees)
# The working directory is the machine's own again, wherever it lives.
mount --move "$s/keep" "$here"
cd "$here"
# Packages installed in here start no service outside it.
printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
chmod 0755 /usr/sbin/policy-rc.d
echo "==> in a throwaway mount namespace: writes to $(trees | tr '\n' ' ')are discarded at its end"
# The command may start a throwaway namespace of its own (tests/ci.rs does).
unset CSB_THROWAWAY_SCRATCH
exec "$@"
