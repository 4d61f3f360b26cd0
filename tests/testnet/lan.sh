#!/usr/bin/env bash
# lan.sh — the project's private "site network" for end-to-end tests and the
# benchmark. It builds two network namespaces joined only to each other by a
# veth pair, created directly inside them. The machine's own interfaces,
# routes and namespaces are never touched, and every packet stays in the
# namespaces this script created.
#
#   <P>-host  "the devcontainer"            <P>-lan  "the site network"
#   <P>-h0  10.77.0.2/24, fd77::2/64  ====  <P>-l0  10.77.0.1/24   gateway, DNS host
#   default routes via 10.77.0.1 / fd77::1           10.77.0.9/24   LAN host
#   own loopback (host-local services)               fd77::1/64     IPv6 on the link
#                                           on lo:   172.16.5.9     RFC1918
#                                                    192.168.5.9    RFC1918
#                                                    100.64.5.9     CGNAT
#                                                    169.254.169.254 metadata
#                                                    169.254.0.53   the jail's DNS forwarder address,
#                                                                   as a link-local service the site routes
#                                                    198.18.0.1     benchmarking range, used internally
#                                                    240.0.0.1      reserved (class E), used internally
#                                                    192.0.0.8      IETF protocol assignments
#                                                    203.0.113.10   "internet" (TEST-NET-3)
#
# Usage:  lan.sh up [PREFIX]     (re)create both namespaces; print the layout as
#                                NAME=value lines
#         lan.sh down [PREFIX]   delete both namespaces (and so the veth pair)
# PREFIX (default "csb": letters and digits, at most 12 so interface names
# fit) keeps concurrent runs apart. Run things in <P>-host with
# `ip netns exec`; start listeners (netprobe.py) in <P>-lan. Needs root and
# iproute2.
set -euo pipefail

usage() { echo "usage: $0 up|down [PREFIX]" >&2; exit 2; }

action="${1:-}"
prefix="${2:-csb}"
[[ "$prefix" =~ ^[A-Za-z0-9]{1,12}$ ]] || { echo "lan.sh: bad PREFIX '$prefix' (1-12 letters/digits)" >&2; exit 2; }

host_ns="$prefix-host"
lan_ns="$prefix-lan"
host_if="$prefix-h0"
lan_if="$prefix-l0"

# Addresses on the LAN side's loopback: each one a distinct kind of destination.
lo_hosts=(172.16.5.9 192.168.5.9 100.64.5.9 169.254.169.254 169.254.0.53 198.18.0.1 240.0.0.1 192.0.0.8 203.0.113.10)

in_host() { ip -n "$host_ns" "$@"; }
in_lan() { ip -n "$lan_ns" "$@"; }

teardown() {
    local ns
    for ns in "$host_ns" "$lan_ns"; do
        ip netns del "$ns" 2>/dev/null || true
    done
}

build() {
    teardown
    # A half-built network is removed, not left behind (set -e exits on the
    # first failing step; this trap then runs).
    built=0
    trap '[ "$built" = 1 ] || teardown' EXIT

    ip netns add "$host_ns"
    ip netns add "$lan_ns"
    ip link add "$host_if" netns "$host_ns" type veth peer name "$lan_if" netns "$lan_ns"

    # The devcontainer side.
    in_host link set lo up
    in_host addr add 10.77.0.2/24 dev "$host_if"
    in_host addr add fd77::2/64 dev "$host_if" nodad
    in_host link set "$host_if" up
    in_host route add default via 10.77.0.1
    in_host -6 route add default via fd77::1 dev "$host_if" 2>/dev/null || true

    # The site network side.
    in_lan link set lo up
    in_lan addr add 10.77.0.1/24 dev "$lan_if"
    in_lan addr add 10.77.0.9/24 dev "$lan_if"
    in_lan addr add fd77::1/64 dev "$lan_if" nodad
    local a
    for a in "${lo_hosts[@]}"; do
        in_lan addr add "$a/32" dev lo
    done
    in_lan link set "$lan_if" up
    # Everything the LAN side answers for routes its replies back over the veth.
    in_lan route add default via 10.77.0.2 2>/dev/null || true

    built=1
    printf '%s\n' \
        "NS_HOST=$host_ns" \
        "NS_LAN=$lan_ns" \
        "LAN_GATEWAY=10.77.0.1" \
        "LAN_HOST=10.77.0.9" \
        "LAN_RFC1918_B=172.16.5.9" \
        "LAN_RFC1918_C=192.168.5.9" \
        "LAN_CGNAT=100.64.5.9" \
        "LAN_METADATA=169.254.169.254" \
        "LAN_FORWARDER_ADDR=169.254.0.53" \
        "LAN_INTERNET=203.0.113.10" \
        "LAN_IPV6=fd77::1"
}

case "$action" in
    up) build ;;
    down) teardown ;;
    *) usage ;;
esac
