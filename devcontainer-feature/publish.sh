#!/usr/bin/env bash
# Publish the devcontainer feature: the one packaging step the release
# workflow (.github/workflows/publish-feature.yml) and the release
# rehearsal (`just release-rehearsal`, tests/release.rs) both run, so what
# the rehearsal installs from its local registry is what the workflow pushes.
#
#   publish.sh REGISTRY NAMESPACE [SRC]
#
# SRC (default devcontainer-feature/src) is the collection: one folder per
# feature with devcontainer-feature.json, install.sh and both static
# binaries, claude-sandbox-x86_64 and claude-sandbox-aarch64 (build.sh or
# the workflow's build jobs stage them). `devcontainer features publish`
# pushes REGISTRY/NAMESPACE/claude-sandbox as :MAJOR, :MAJOR.MINOR,
# :VERSION and :latest (the version from devcontainer-feature.json). A
# REGISTRY named localhost[:PORT] is spoken to over plain HTTP (the CLI's
# own rule; docs/decisions/0035-release-rehearsal.md). Credentials: the
# CLI's own (GITHUB_TOKEN for ghcr.io, DEVCONTAINERS_OCI_AUTH, docker's).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: publish.sh REGISTRY NAMESPACE [SRC]" >&2; exit 2; }
registry=$1 namespace=$2 src=${3:-$here/src}
feature=$src/claude-sandbox
# Both architectures or nothing: install.sh picks the machine's binary, and
# a feature missing one fails only on that architecture, at a user's build.
declare -A elf=([x86_64]=x86-64 [aarch64]=aarch64)
for arch in x86_64 aarch64; do
    bin=$feature/claude-sandbox-$arch
    [ -x "$bin" ] || { echo "publish.sh: $bin is missing or not executable; stage it first (just feature)" >&2; exit 1; }
    desc=$(file -b "$bin")
    case "$desc" in
        *"${elf[$arch]}"*"statically linked"*|*"${elf[$arch]}"*"static-pie linked"*) ;;
        *) echo "publish.sh: $bin is not a static ${elf[$arch]} binary ($desc); rebuild it (just feature)" >&2; exit 1 ;;
    esac
done
# shellcheck source=devcontainer-feature/cli.sh
. "$here/cli.sh"
"$cli" features publish --registry "$registry" --namespace "$namespace" "$src"
