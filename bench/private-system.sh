# Sourced by the benches' inner scripts (bench.sh, broker-speed.sh,
# launch.sh), inside their private mount namespace, before they install:
# an overlay over each system tree an install writes, so the machine is
# unchanged afterwards whatever happens. `volatile`: nothing in them needs
# to last, and without it releasing the mounts makes overlayfs sync the
# whole file system under STATE (the tests' overlays stalled on that for
# seconds, d458e1b); a volatile work directory cannot be mounted again, so
# each is new.
# Usage: private_system STATE
private_system() {
    local state=$1 d k wk
    for d in etc usr/libexec usr/local/bin; do
        k=${d//\//_}
        mkdir -p "$state/ov/up/$k" "$state/ov/wk"
        wk=$(mktemp -d "$state/ov/wk/$k.XXXXXX")
        mount -t overlay overlay -o "volatile,lowerdir=/$d,upperdir=$state/ov/up/$k,workdir=$wk" "/$d"
    done
}
