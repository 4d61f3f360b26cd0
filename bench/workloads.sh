#!/usr/bin/env bash
# Part of `just bench` (bench/bench.sh runs it inside its private mount and
# network namespaces, with the product installed and the probe as the real
# binary): what a coding session's everyday work costs through the shadow
# (jail on, creation guard on) against bare bubblewrap (what every peer
# sandbox costs: `bwrap --dev-bind / / --unshare-pid --unshare-user`) and
# the host (issue #23 item 2):
#   untar     `tar -xf` of 20,000 files of 1 KB
#   cp        `cp -r` of an 8,500-file source tree
#   clone     `git clone --no-hardlinks` of that tree as a local repository
#             (two branches, packed), 8,500 files checked out
#   checkout  `git checkout` of a second branch and back to the first, in
#             the fresh clone (2,000 files changed, 500 removed and 400 added
#             each way). Not the issue's `cp -a` of a repository: inside,
#             the git rule (issue #22) refuses a git directory's `config`
#             made any way but git's own lock file and rename, so `cp -a`
#             of a repository fails there by design.
#   npm       `npm ci --offline` of 40 packages from a local npm cache
#   cargo     `cargo build --offline` (debug) of a crate with 14 vendored
#             dependencies, CARGO_HOME and the target directory fresh
# The inputs are made once (bench/workloads-inputs.py, git, `npm cache add`,
# `cargo vendor`), outside every timing, into a workspace on a tmpfs and
# copied into one on the disk (the file system under /var/tmp). All three
# environments run the same script (WORK/wl-round.sh) with the workspace as
# the current directory; it times each workload from inside (`date +%s%N`
# before and after), so no launch is counted, and removes its outputs
# afterwards (each run in a new directory). Five runs, the file systems
# and the environments taken in turn within each run, the environments'
# order turning with the run. WORK/workloads-raw gets "FS ENV WORKLOAD NS"
# lines.
#
#     workloads.sh WORK SYSROOT CARGO_HOME
#
# SYSROOT is the Rust toolchain (`rustc --print sysroot`) and CARGO_HOME the
# cargo home whose registry cache holds the vendored crates (this project's
# own dependencies, so its release build has fetched them). Root's home is
# hidden inside the sandbox (a tmpfs), so the toolchain is hard-linked (or
# copied, across file systems) into WORK, where all three can run it.
set -euo pipefail
work=$1 sysroot=$2 cargo_home=$3
here=$(cd "$(dirname "$0")" && pwd)
wl=$work/wl
tc=$wl/toolchain
cleanup() {
    cd /
    mountpoint -q "$wl/tmpfs" 2>/dev/null && umount "$wl/tmpfs"
    rm -rf "$wl"
}
trap cleanup EXIT
mkdir -p "$wl/tmpfs" "$wl/disk/ws" "$tc/bin" "$tc/lib/rustlib/x86_64-unknown-linux-gnu"
mount -t tmpfs -o mode=0755 tmpfs "$wl/tmpfs"
mkdir "$wl/tmpfs/ws"
# This VM's ext4 (no journal, `discard`) has two costs that have nothing to
# do with a sandbox and would swamp the disk rows: without a journal, ext4
# skips inodes deleted in the last minute (five while their table block is
# dirty) when it allocates (recently_deleted(), fs/ext4/ialloc.c), so a
# round right after another one's `rm -rf` scans past all of them on each
# creation (untar 0.6-1 s becomes 8-13 s); and a file whose blocks are
# already allocated is freed with a synchronous discard (~1.5 ms each).
# So each round writes into a new directory that the Orlov allocator
# places in a block group of its own (+T: "top of a directory hierarchy"),
# nothing forces writeback (no sync: delayed allocation has not yet given
# the files blocks when the round removes them), and the round removes its
# outputs at once.
chattr +T "$wl/disk/ws" 2>/dev/null || true

# The toolchain, where the sandbox can see it.
link() { cp -al "$@" 2>/dev/null || cp -a "$@"; }
link "$sysroot"/bin/cargo "$sysroot"/bin/rustc "$tc/bin/"
link "$sysroot"/lib/lib* "$tc/lib/"
link "$sysroot"/lib/rustlib/x86_64-unknown-linux-gnu/lib "$sysroot"/lib/rustlib/x86_64-unknown-linux-gnu/bin \
    "$tc/lib/rustlib/x86_64-unknown-linux-gnu/"

# The inputs, made in the tmpfs workspace (what the making deletes is not
# deleted on the disk: see above) and copied to the disk.
in=$wl/tmpfs/ws/in
python3 "$here/workloads-inputs.py" "$in"
tar -cf "$in/untar.tar" -C "$in/untar" . && rm -rf "$in/untar"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@invalid \
    GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@invalid GIT_AUTHOR_DATE=@499162500 GIT_COMMITTER_DATE=@499162500
cp -r "$in/tree" "$in/repo"
git -C "$in/repo" init -q -b main
# Packed, as git's automatic gc leaves a repository after such a commit, but
# here once and synchronously (the automatic one runs in the background).
git -C "$in/repo" add -A && git -C "$in/repo" -c gc.auto=0 commit -q -m first
git -C "$in/repo" checkout -q -b other
python3 "$here/workloads-inputs.py" --branch "$in/repo"
git -C "$in/repo" add -A && git -C "$in/repo" -c gc.auto=0 commit -q -m second
git -C "$in/repo" checkout -q main
git -C "$in/repo" gc -q
# The source of the clone needs no work tree (8,500 files fewer to remove).
git clone -q --bare --no-hardlinks "$in/repo" "$in/repo.git" && rm -rf "$in/repo"
unset GIT_CONFIG_NOSYSTEM GIT_CONFIG_GLOBAL GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL \
    GIT_AUTHOR_DATE GIT_COMMITTER_DATE
(cd "$in/npm-pkgs" && npm cache add --cache "$in/npm-cache" --logs-max=0 ./*.tgz >/dev/null)
mkdir -p "$in/crate/src" "$in/crate/.cargo"
cat > "$in/crate/Cargo.toml" <<'EOF'
[package]
name = "csb-bench-crate"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
byteorder = "=1.5.0"
cfg-if = "=1.0.5"
equivalent = "=1.0.3"
fnv = "=1.0.7"
heck = "=0.5.0"
itoa = "=1.0.19"
log = "=0.4.35"
memchr = "=2.8.3"
once_cell = "=1.21.4"
scopeguard = "=1.2.0"
smallvec = "=1.16.6"
strsim = "=0.11.1"
unicode-ident = "=1.0.27"
utf8parse = "=0.2.2"
EOF
cat > "$in/crate/src/main.rs" <<'EOF'
use byteorder::ByteOrder;
use heck::ToSnakeCase;

static ONE: once_cell::sync::Lazy<u8> = once_cell::sync::Lazy::new(|| 1);

fn main() {
    let mut buf = itoa::Buffer::new();
    let mut map: fnv::FnvHashMap<&str, usize> = Default::default();
    map.insert("itoa", buf.format(42u32).len());
    let small: smallvec::SmallVec<[u8; 4]> = smallvec::smallvec![1, 2];
    let _guard = scopeguard::guard((), |_| log::info!("done"));
    println!(
        "{} {} {} {:?} {} {} {} {}",
        map.len(),
        small.len(),
        strsim::levenshtein("kitten", "sitting"),
        memchr::memchr(b'z', b"xyz"),
        "HelloWorld".to_snake_case(),
        *ONE,
        unicode_ident::is_xid_start('a'),
        byteorder::LE::read_u16(&[1, 2]),
    );
}
EOF
(cd "$in/crate" && CARGO_HOME=$cargo_home PATH=$tc/bin:$PATH cargo generate-lockfile --offline --quiet &&
    CARGO_HOME=$cargo_home PATH=$tc/bin:$PATH cargo vendor --offline --locked vendor 2>/dev/null > .cargo/config.toml) || {
    echo "bench: cargo vendor of the workload crate failed: its crates are this project's dependencies; run cargo fetch (cargo home $cargo_home)" >&2
    exit 1
}
# A root session masks what only root may read outside its workspace, and
# the parents of many such entries whole (src/launch/rootview): vendored
# `fnv` ships 0600 files, and the other workspace's copy of them can take
# the directories beside them along (the likeliest cause of a round's
# `cargo: not found`, 2026-11-26 08:28; docs/benchmarks-history.md). The inputs
# are readable to all, as a checkout is.
chmod -R a+rX "$in"
cp -a "$in" "$wl/disk/ws/in"

# One run of every workload, in whatever environment runs it.
cat > "$work/wl-round.sh" <<'ROUND'
set -eu
in=$1 out=$2
export PATH="$3/bin:/usr/local/bin:/usr/bin:/bin" NPM_CONFIG_USERCONFIG=/dev/null NPM_CONFIG_UPDATE_NOTIFIER=false
t() { name=$1; shift; s=$(date +%s%N); "$@"; e=$(date +%s%N); echo "$name $((e - s))"; }
checkout() { git -C "$out/clone" checkout -q other && git -C "$out/clone" checkout -q main; }
npmci() ( cd "$out/app" && npm ci --offline --no-audit --no-fund --logs-max=0 --loglevel=error \
    --cache "$in/npm-cache" --registry http://registry.invalid/ >/dev/null )
cargob() ( cd "$in/crate" && CARGO_HOME="$out/cargo-home" cargo build --offline --locked --quiet --target-dir "$out/target" )
rm -rf "$out"; mkdir "$out" "$out/untar" "$out/app"
cp "$in/npm-app/package.json" "$in/npm-app/package-lock.json" "$out/app/"
t untar tar -xf "$in/untar.tar" -C "$out/untar"
t cp cp -r "$in/tree" "$out/tree"
t clone git clone -q --no-hardlinks "$in/repo.git" "$out/clone"
t checkout checkout
t npm npmci
t cargo cargob
rm -rf "$out"
ROUND

# Every input the shadow's rounds need, seen from a session in each
# workspace (a root view that hid one would fail a round midway).
for fs in tmpfs disk; do
    (cd "$wl/$fs/ws" && CLAUDE_SANDBOX_EGRESS=open /usr/local/bin/claude shell \
        "test -x $tc/bin/cargo && test -r $work/wl-round.sh && test -r $wl/$fs/ws/in/untar.tar") 2>/dev/null || {
        echo "bench: a root session in $wl/$fs/ws does not see the workloads' toolchain or inputs (doctor below says what the root view masked)" >&2
        /usr/libexec/claude-sandbox/claude-sandbox doctor >&2 || true
        exit 1
    }
done
raw=$work/workloads-raw
: > "$raw"
# Host and bare bwrap get an environment as small as the shadow's own
# (--clearenv: PATH, HOME, USER, TERM, LANG and its git config variables),
# so that no inherited variable (NODE_EXTRA_CA_CERTS makes every node start
# parse a certificate bundle) weighs on one side only.
clean=(env -i "HOME=$HOME" "USER=${USER:-root}" "TERM=${TERM:-dumb}" LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin)
in_env() {
    case $1 in
    host) "${clean[@]}" sh $args ;;
    bwrap) "${clean[@]}" bwrap --dev-bind / / --unshare-pid --unshare-user sh $args ;;
    shadow) CLAUDE_SANDBOX_EGRESS=open /usr/local/bin/claude shell "sh $args" ;;
    esac
}
# The order of the environments turns with each run, so that no one of them
# always runs first (or right after the shadow's launch).
orders=("host bwrap shadow" "bwrap shadow host" "shadow host bwrap")
for run in 0 1 2 3 4; do
    for fs in tmpfs disk; do
        ws=$wl/$fs/ws
        cd "$ws"
        for env in ${orders[run % 3]}; do
            args="$work/wl-round.sh $ws/in $ws/out-$run-$env $tc"
            # A failed round names itself.
            in_env "$env" | sed "s/^/$fs $env /" >> "$raw" || {
                echo "bench: workloads round $run, $fs workspace, $env environment failed (PATH inside: $tc/bin first; its bin: $(ls "$tc/bin" 2>&1 | tr '\n' ' '))" >&2
                exit 1
            }
        done
    done
done
cd "$work"
[ "$(wc -l < "$raw")" -eq $((5 * 2 * 3 * 6)) ] || { echo "bench: the workloads did not all report (see $raw)" >&2; exit 1; }
