# bench/lib.sh: what the benches that install the product privately
# (bench.sh, launch.sh, broker-speed.sh) share. Sourced twice by each:
# by the script itself, as root from the repository's top, and by its
# inner script, inside the private mount namespace, before it installs.
# $repo: the repository's top.
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# bench_as_root KEEP [ARGS…]: from the repository's top; without root,
# the calling script again through sudo with ARGS, keeping the
# environment variables KEEP names (comma-separated).
bench_as_root() {
    local keep=$1
    shift
    cd "$repo"
    [ "$(id -u)" -eq 0 ] || exec sudo --preserve-env="$keep" bash "$0" "$@"
}

# bench_needs_launch NAME: hyperfine and the real Claude Code ($real,
# CSB_REAL_CLAUDE or the one scripts/test.sh installs), or NAME's message
# and exit 1.
bench_needs_launch() {
    command -v hyperfine >/dev/null || { echo "$1: hyperfine missing: sudo apt-get install hyperfine" >&2; exit 1; }
    real="${CSB_REAL_CLAUDE:-/opt/csb-claude/node_modules/@anthropic-ai/claude-code-linux-x64/claude}"
    [ -x "$real" ] || { echo "$1: real Claude Code not found at $real (bash scripts/test.sh installs it)" >&2; exit 1; }
}

# bench_dirs KIND PREFIX: $work (/var/tmp/csb-KIND-XXXXXX) and $state
# (/tmp/csb-KIND-state-XXXXXX), both 0755, and $prefix, the site
# network's name (PREFIX and this shell's PID); $servers, the PIDs
# bench_stop ends. What only root may read (the overlays' upper and work
# directories, root's homes with the sandbox's private state, keys) goes
# in $state, outside /var: a root launch masks such entries under /var,
# and when they are many, their parents whole (src/launch/rootview),
# which would hide the bench's own tools and inputs from its sessions.
# Root's real home is not under /var either. The EXIT trap runs
# bench_cleanup; a bench that leaves more behind sets its own.
bench_dirs() {
    work=$(mktemp -d "/var/tmp/csb-$1-XXXXXX")
    state=$(mktemp -d "/tmp/csb-$1-state-XXXXXX")
    chmod 755 "$work" "$state"
    prefix="$2$$"
    servers=()
    trap bench_cleanup EXIT
}

# bench_stop: the servers in $servers ended, the site network down.
bench_stop() {
    local p
    for p in "${servers[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    bash "$repo/tests/testnet/lan.sh" down "$prefix" >/dev/null 2>&1 || true
}

# bench_cleanup: bench_stop, then $work and $state removed.
bench_cleanup() {
    bench_stop
    rm -rf "$work" "$state"
}

# bench_site_up: the private site network $prefix (tests/testnet/lan.sh)
# and its resolver on the gateway, 10.77.0.1, answering every name with
# the "internet" host 203.0.113.10 (tests/testnet/netprobe.py).
bench_site_up() {
    local lan="$repo/tests/testnet/lan.sh"
    [ -f "$lan" ] || { echo "bench: $lan missing from the repository" >&2; exit 1; }
    bash "$lan" up "$prefix" >/dev/null
    ip netns exec "$prefix-lan" python3 "$repo/tests/testnet/netprobe.py" dns 10.77.0.1 600 &
    servers+=($!)
}

# bench_repo_workspace DIR: a repository workspace at DIR, what the
# protected-path walk, its read-only binds and the tripwire cost on a real
# project: this project's own history, an editor and a devcontainer
# folder, a nested repository.
bench_repo_workspace() {
    git clone -q --no-hardlinks "$repo" "$1"
    mkdir -p "$1/.vscode" "$1/.devcontainer" "$1/vendor-lib"
    echo '{}' > "$1/.vscode/settings.json"
    git -C "$1/vendor-lib" init -q
}

# private_system STATE: in the inner script's private mount namespace, an
# overlay over each system tree an install writes, so the machine is
# unchanged afterwards whatever happens. `volatile`: nothing in them needs
# to last, and without it releasing the mounts makes overlayfs sync the
# whole file system under STATE (the tests' overlays stalled on that for
# seconds, d458e1b); a volatile work directory cannot be mounted again, so
# each is new.
private_system() {
    local state=$1 d k wk
    for d in etc usr/libexec usr/local/bin; do
        k=${d//\//_}
        mkdir -p "$state/ov/up/$k" "$state/ov/wk"
        wk=$(mktemp -d "$state/ov/wk/$k.XXXXXX")
        mount -t overlay overlay -o "volatile,lowerdir=/$d,upperdir=$state/ov/up/$k,workdir=$wk" "/$d"
    done
}

# private_install STATE BINARY REAL [fresh]: in the inner script, over
# private_system's overlays, BINARY installed as the product, REAL as the
# real Claude Code, the shadow's link, the git config template, and the
# site network's resolver in /etc/resolv.conf; with `fresh`, an
# installation on the machine removed from the overlays first. The
# configuration and the pin are the caller's.
private_install() {
    private_system "$1"
    if [ "${4:-}" = fresh ]; then
        rm -rf /usr/local/bin/claude /usr/libexec/claude-sandbox /etc/claude-sandbox.conf /etc/claude-gitconfig /etc/claude-code
    fi
    mkdir -p /usr/libexec/claude-sandbox
    install -m 0755 "$2" /usr/libexec/claude-sandbox/claude-sandbox
    cp "$3" /usr/libexec/claude-sandbox/claude
    ln -sfn /usr/libexec/claude-sandbox/claude-sandbox /usr/local/bin/claude
    install -m 0644 "$repo/etc/claude-gitconfig" /etc/claude-gitconfig
    rm -f /etc/resolv.conf; echo 'nameserver 10.77.0.1' > /etc/resolv.conf
}

# bench_opt_tree DIRS FILES: in the inner script's mount namespace, a
# private /opt (a tmpfs over the machine's) of DIRS directories (a hundred
# to a parent) of FILES empty world-readable files each, what a root
# launch's view walks (issue #48); then two seconds, so that the kept root
# view keeps it (a directory changed in the walk's last second is examined
# again at the next launch). Prints how many entries it holds.
bench_opt_tree() {
    mount -t tmpfs -o mode=755 tmpfs /opt
    python3 - "$1" "$2" <<'PY'
import os, sys
dirs, files = int(sys.argv[1]), int(sys.argv[2])
n = 0
for i in range(dirs):
    d = f"/opt/t/p{i // 100}/d{i}"
    os.makedirs(d, exist_ok=True)
    for j in range(files):
        os.close(os.open(f"{d}/f{j}", os.O_CREAT | os.O_WRONLY, 0o644))
n = sum(len(ds) + len(fs) for _, ds, fs in os.walk("/opt"))
print(n)
PY
    sleep 2
}
