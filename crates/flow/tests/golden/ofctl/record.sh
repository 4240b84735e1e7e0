#!/bin/sh
# Record the golden text of tests/ofctl_golden.rs from a real Open vSwitch (3.1 was used):
# starts a private ovsdb-server + ovs-vswitchd (netdev datapath, three internal ports with
# OpenFlow numbers 1..3) in a temporary directory, feeds it *.in, writes *.txt, stops it and
# deletes the directory. Runs in a private network namespace (needs root): the netdev
# datapath's tap devices (one named ovs-netdev in every instance) stay out of the host's and
# out of any other Open vSwitch's way, and vanish with the namespace.
#   crates/flow/tests/golden/ofctl/record.sh
set -eu
if [ -z "${VP_OFCTL_IN_NETNS:-}" ]; then
    VP_OFCTL_IN_NETNS=1 exec unshare --net "$0" "$@"
fi
here="$(cd "$(dirname "$0")" && pwd)"
O="$(mktemp -d /tmp/vp-ofctl-golden.XXXXXX)"
export OVS_RUNDIR="$O" OVS_LOGDIR="$O" OVS_DBDIR="$O" OVS_SYSCONFDIR="$O"
cleanup() {
    ovs-appctl -t "$O/ovs-vswitchd.ctl" exit --cleanup 2>/dev/null || true
    [ -f "$O/ovs-vswitchd.pid" ] && kill "$(cat "$O/ovs-vswitchd.pid")" 2>/dev/null || true
    [ -f "$O/ovsdb-server.pid" ] && kill "$(cat "$O/ovsdb-server.pid")" 2>/dev/null || true
    sleep 0.5
    rm -rf "$O"
}
trap cleanup EXIT INT TERM
ovsdb-tool create "$O/conf.db" /usr/share/openvswitch/vswitch.ovsschema
ovsdb-server "$O/conf.db" --remote="punix:$O/db.sock" --pidfile="$O/ovsdb-server.pid" \
    --unixctl="$O/ovsdb-server.ctl" --detach --log-file="$O/ovsdb.log"
ovs-vsctl --db="unix:$O/db.sock" --no-wait init
ovs-vswitchd "unix:$O/db.sock" --pidfile="$O/ovs-vswitchd.pid" --unixctl="$O/ovs-vswitchd.ctl" \
    --detach --log-file="$O/vswitchd.log"
B=vpofg0
ovs-vsctl --db="unix:$O/db.sock" add-br $B -- set bridge $B datapath_type=netdev \
    -- add-port $B vpofg1 -- set Interface vpofg1 type=internal ofport_request=1 \
    -- add-port $B vpofg2 -- set Interface vpofg2 type=internal ofport_request=2 \
    -- add-port $B vpofg3 -- set Interface vpofg3 type=internal ofport_request=3
of13() { ovs-ofctl -O OpenFlow13 "$@"; }
version="$(ovs-vswitchd --version | head -1)"

# Groups 1 and 2 exist so that rules may point at them.
of13 add-group $B "group_id=1,type=all,bucket=output:1"
of13 add-group $B "group_id=2,type=all,bucket=output:2"

# 1. One rule at a time: what add-flow accepted and how dump-flows prints it.
{
    echo "# $version: each 'in:' line given to 'ovs-ofctl -O OpenFlow13 add-flow', then the"
    echo "# 'out:' line 'ovs-ofctl -O OpenFlow13 --no-stats --no-names dump-flows' printed for it"
    echo "# (leading space removed). Inputs OVS refused over OpenFlow 1.3 are left out."
    echo "# Recorded by record.sh from flows.in."
    grep -v '^#' "$here/flows.in" | while IFS= read -r l; do
        [ -z "$l" ] && continue
        of13 del-flows $B
        if of13 add-flow $B "$l" 2>/dev/null; then
            printf 'in: %s\nout: %s\n' "$l" "$(of13 --no-stats --no-names dump-flows $B | sed 's/^ //')"
        fi
    done
} >"$here/flows.txt"

# 1b. The same for the random rules of flows-random.in (random_flows.py).
{
    echo "# $version: as flows.txt, for the random rules of flows-random.in."
    grep -v '^#' "$here/flows-random.in" | while IFS= read -r l; do
        [ -z "$l" ] && continue
        of13 del-flows $B
        if of13 add-flow $B "$l" 2>/dev/null; then
            printf 'in: %s\nout: %s\n' "$l" "$(of13 --no-stats --no-names dump-flows $B | sed 's/^ //')"
        fi
    done
} >"$here/flows-random.txt"

# 2. All of them at once, dumped with statistics over OpenFlow 1.3 and 1.0 (as pasted by users).
of13 del-flows $B
grep -v '^#' "$here/flows.in" | while IFS= read -r l; do
    [ -n "$l" ] && of13 add-flow $B "$l" 2>/dev/null || true
done
of13 --no-names dump-flows $B >"$here/dump-of13.txt"
ovs-ofctl --no-names dump-flows $B >"$here/dump-of10.txt"
of13 del-flows $B

# 3. What OVS says about the inputs vecplane refuses.
{
    echo "# $version on each input vecplane refuses (rejects.in): 'refused: <its message>', or"
    echo "# 'accepted: <its dump>' where OVS is laxer (drops a field missing its prerequisite,"
    echo "# truncates a value, keeps the last of a repeated field)."
    grep -v '^#' "$here/rejects.in" | while IFS="$(printf '\t')" read -r l tok; do
        [ -z "$l" ] && continue
        of13 del-flows $B
        case "$l" in
        group:*)
            g="${l#group:}"
            of13 del-groups $B "group_id=${g#group_id=}" >/dev/null 2>&1 || true
            if out="$(ovs-ofctl -O OpenFlow15 add-group $B "$g" 2>&1)"; then
                res="accepted: $(ovs-ofctl -O OpenFlow15 --no-names dump-groups $B | tail -n +2 | tr -s ' \n' ' ')"
            else
                res="refused: $(printf '%s' "$out" | grep -v '|WARN|' | head -1)"
            fi ;;
        *)
            if out="$(of13 add-flow $B "$l" 2>&1)"; then
                res="accepted: $(of13 --no-stats --no-names dump-flows $B | sed 's/^ //')"
            else
                res="refused: $(printf '%s' "$out" | grep -v '|WARN|' | head -1)"
            fi ;;
        esac
        printf 'in: %s\ntoken: %s\novs %s\n' "$l" "$tok" "$res"
    done
} >"$here/rejects.txt"

# 4. Groups: add-group over OpenFlow 1.5, dump-groups.
of13 del-flows $B
ovs-ofctl -O OpenFlow15 del-groups $B
{
    echo "# $version: 'in:' given to 'ovs-ofctl -O OpenFlow15 add-group', 'out:' what"
    echo "# 'ovs-ofctl -O OpenFlow15 --no-names dump-groups' printed (leading space removed), 'of13:'"
    echo "# what '-O OpenFlow13 dump-groups' printed (no bucket ids, no selection method)."
    grep -v '^#' "$here/groups.in" | while IFS= read -r l; do
        [ -z "$l" ] && continue
        ovs-ofctl -O OpenFlow15 del-groups $B
        ovs-ofctl -O OpenFlow15 add-group $B "group_id=1,type=all,bucket=output:1" 2>/dev/null || true
        case "$l" in group_id=1,*) ovs-ofctl -O OpenFlow15 del-groups $B ;; esac
        if ovs-ofctl -O OpenFlow15 add-group $B "$l" 2>/dev/null; then
            id="$(printf '%s' "$l" | sed 's/^group_id=\([^,]*\),.*/\1/')"
            printf 'in: %s\nout: %s\n' "$l" "$(ovs-ofctl -O OpenFlow15 --no-names dump-groups $B \
                | sed 's/^ //' | grep "^group_id=$id,")"
            printf 'of13: %s\n' "$(of13 --no-names dump-groups $B | sed 's/^ //' | grep "^group_id=$id,")"
        fi
    done
} >"$here/groups.txt"

# 5. Megaflows: rules, then ofproto/trace of packets; the "Megaflow:" line of each.
ovs-ofctl -O OpenFlow15 del-groups $B
{
    echo "# $version: the rules of megaflows.in loaded, 'packet:' given to ofproto/trace,"
    echo "# 'megaflow:' the Megaflow line it printed."
    grep '^rule: ' "$here/megaflows.in" | sed 's/^rule: //' | while IFS= read -r l; do of13 add-flow $B "$l"; done
    grep '^packet: ' "$here/megaflows.in" | sed 's/^packet: //' | while IFS= read -r p; do
        mf="$(ovs-appctl -t "$O/ovs-vswitchd.ctl" ofproto/trace $B "$p" | sed -n 's/^Megaflow: //p')"
        printf 'packet: %s\nmegaflow: %s\n' "$p" "$mf"
    done
} >"$here/megaflows.txt"
