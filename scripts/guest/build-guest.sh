#!/usr/bin/env bash
# build-guest.sh OUTDIR: build the QEMU test guest of vecplane from installed Debian packages
# only (linux-image-amd64, busybox-static, iperf3): OUTDIR/vmlinux (the uncompressed kernel, for
# PVH boot) and OUTDIR/initrd.gz (busybox, iperf3 and its libraries, the virtio-net and bridge
# modules, and an /init configured from the kernel command line). It owns OUTDIR only; it never
# downloads anything and never touches the host's kernel, modules or boot files. Cached: nothing
# is rebuilt while the outputs are newer than every input and the inputs are the same files.
#
# Guest settings (kernel command line): vp.name=NAME (hostname), vp.ip=ADDR/LEN and
# vp.ip6=ADDR/LEN (on eth0), vp.nics=N (wait for eth0..eth<N-1>, default 1), vp.bridge=1 (VNF
# mode: eth0 and eth1 in bridge br0, no addresses).
# The guest prints VP-READY on the console once set up, then runs a shell there.
# Environment: VP_GUEST_KVER picks the kernel version (default: the running kernel if its image
# is installed, else the newest installed one); VP_GUEST_FORCE=1 rebuilds.
set -euo pipefail

die() { echo "build-guest: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 OUTDIR"
out=$1
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The kernel: one with both /boot/vmlinuz-V and /lib/modules/V.
kver=${VP_GUEST_KVER:-}
if [ -z "$kver" ]; then
    running=$(uname -r)
    if [ -f "/boot/vmlinuz-$running" ] && [ -d "/lib/modules/$running" ]; then
        kver=$running
    else
        kver=$(for k in /boot/vmlinuz-*; do
                   v=${k#/boot/vmlinuz-}
                   [ -f "$k" ] && [ -f "/lib/modules/$v/modules.dep" ] && echo "$v"
               done | sort -V | tail -n 1)
    fi
fi
[ -n "$kver" ] || die "no kernel image with modules installed (/boot/vmlinuz-* and /lib/modules/*): install linux-image-amd64"
kernel=/boot/vmlinuz-$kver
moddir=/lib/modules/$kver
[ -r "$kernel" ] || die "$kernel is missing or unreadable: install linux-image-amd64"
[ -f "$moddir/modules.dep" ] || die "$moddir/modules.dep is missing: install linux-image-amd64"

busybox=$(command -v busybox || true)
[ -n "$busybox" ] || die "busybox is missing: install busybox-static"
file -L "$busybox" | grep -q 'statically linked' || die "$busybox is not static: install busybox-static"
iperf3=$(command -v iperf3 || true)
[ -n "$iperf3" ] || die "iperf3 is missing: install iperf3"
for tool in xz gzip cpio file ldd flock; do
    command -v "$tool" >/dev/null || die "$tool is missing"
done

# Cache check: same inputs, and outputs newer than each of them.
self=$(readlink -f "${BASH_SOURCE[0]}")
inputs=("$self" "$kernel" "$moddir/modules.dep" "$(readlink -f "$busybox")" "$(readlink -f "$iperf3")")
stamp="kernel=$kver ${inputs[*]}"
exec 9>"$out/.lock"
flock -w 300 9 || die "cannot lock $out/.lock within 300 s"
fresh() {
    [ "${VP_GUEST_FORCE:-0}" != 1 ] || return 1
    [ -s "$out/vmlinux" ] && [ -s "$out/initrd.gz" ] && [ -f "$out/inputs" ] || return 1
    [ "$(cat "$out/inputs")" = "$stamp" ] || return 1
    local f
    for f in "${inputs[@]}"; do
        [ "$out/vmlinux" -nt "$f" ] && [ "$out/initrd.gz" -nt "$f" ] || return 1
    done
}
if fresh; then
    echo "build-guest: $out is up to date (kernel $kver)"
    exit 0
fi

work=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# vmlinux: the xz payload of the bzImage, decompressed. xz reports the bytes after the payload
# as corrupt data; the output is complete, so its status is ignored and the result checked.
off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$kernel" | head -n 1 | cut -d: -f1 || true)
[ -n "$off" ] || die "$kernel has no xz payload (only xz-compressed kernels are supported)"
tail -c +"$((off + 1))" "$kernel" | xz -dc >"$work/vmlinux" 2>/dev/null || true
file "$work/vmlinux" | grep -q 'ELF 64-bit' || die "decompressing $kernel did not give an ELF vmlinux"

# The initramfs tree.
root=$work/root
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,tmp,root,lib/modules,usr/bin,usr/sbin}
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
done
cp "$(readlink -f "$iperf3")" "$root/usr/bin/iperf3"
# iperf3's libraries (and the dynamic loader) at the paths ldd names.
ldd "$iperf3" | awk '/=>/ { print $3 } !/=>/ && $1 ~ /^\// { print $1 }' | while read -r lib; do
    [ -n "$lib" ] && [ -e "$lib" ] || continue
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done
ls "$root"/lib64/ld-linux-x86-64.so.2 >/dev/null 2>&1 || die "the dynamic loader was not found by ldd"

# Modules with their dependencies first (from modules.dep), decompressed, in load order.
declare -A seen=()
order=()
modpath() { # NAME -> relative path in modules.dep
    awk -F: -v n="$1" '{ b = $1; sub(/.*\//, "", b); sub(/\.ko(\.xz|\.zst|\.gz)?$/, "", b);
        gsub(/-/, "_", b); if (b == n) { print $1; exit } }' "$moddir/modules.dep"
}
add_module() { # relative path
    local rel=$1 dep
    [ -z "${seen[$rel]:-}" ] || return 0
    seen[$rel]=1
    for dep in $(grep -m1 "^$rel:" "$moddir/modules.dep" | cut -d: -f2-); do
        add_module "$dep"
    done
    order+=("$rel")
}
for name in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci \
            failover net_failover virtio_net llc stp bridge; do
    rel=$(modpath "$name")
    if [ -z "$rel" ]; then
        # Built into the kernel needs no module.
        grep -q "/$name.ko" "$moddir/modules.builtin" 2>/dev/null && continue
        die "module $name is neither in $moddir/modules.dep nor built in"
    fi
    add_module "$rel"
done
: >"$root/etc/modules"
for rel in "${order[@]}"; do
    base=$(basename "$rel")
    case "$base" in
        *.ko.xz) xz -dc "$moddir/$rel" >"$root/lib/modules/${base%.xz}"; base=${base%.xz} ;;
        *.ko.zst) command -v zstd >/dev/null || die "zstd is missing (for $rel)"
                  zstd -qdc "$moddir/$rel" >"$root/lib/modules/${base%.zst}"; base=${base%.zst} ;;
        *.ko.gz) gzip -dc "$moddir/$rel" >"$root/lib/modules/${base%.gz}"; base=${base%.gz} ;;
        *) cp "$moddir/$rel" "$root/lib/modules/$base" ;;
    esac
    echo "$base" >>"$root/etc/modules"
done

cat >"$root/init" <<'INIT'
#!/bin/sh
# vecplane test guest: mount, load modules, configure from vp.* on the kernel command line.
export PATH=/bin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
dmesg -n 1
# No duplicate address detection (the addresses are usable at once): set before the NICs exist,
# which inherit the default.
echo 0 >/proc/sys/net/ipv6/conf/all/accept_dad
echo 0 >/proc/sys/net/ipv6/conf/default/accept_dad
for m in $(cat /etc/modules); do
    insmod "/lib/modules/$m" || echo "VP-ERROR: insmod $m failed"
done
ip link set lo up
name=guest ip4= ip6= bridge=0 nics=1
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        vp.name=*) name=${arg#vp.name=} ;;
        vp.ip=*) ip4=${arg#vp.ip=} ;;
        vp.ip6=*) ip6=${arg#vp.ip6=} ;;
        vp.bridge=*) bridge=${arg#vp.bridge=} ;;
        vp.nics=*) nics=${arg#vp.nics=} ;;
    esac
done
hostname "$name"
# The NICs appear as their drivers probe: wait for them (at most 10 s).
want=
for i in $(seq 0 $((nics - 1))); do want="$want eth$i"; done
for i in $(seq 100); do
    ok=1
    for d in $want; do [ -e "/sys/class/net/$d" ] || ok=0; done
    [ $ok = 1 ] && break
    sleep 0.1
done
for d in $want; do [ -e "/sys/class/net/$d" ] || echo "VP-ERROR: no $d"; done
if [ "$bridge" = 1 ]; then
    brctl addbr br0
    echo 0 >/sys/class/net/br0/bridge/stp_state
    echo 0 >/sys/class/net/br0/bridge/forward_delay
    for d in eth0 eth1 br0; do echo 1 >"/proc/sys/net/ipv6/conf/$d/disable_ipv6"; done
    for d in eth0 eth1; do
        ip link set "$d" up
        brctl addif br0 "$d"
    done
    ip link set br0 up
elif [ -e /sys/class/net/eth0 ]; then
    echo 0 >/proc/sys/net/ipv6/conf/eth0/accept_dad
    ip link set eth0 up
    [ -n "$ip4" ] && ip addr add "$ip4" dev eth0
    [ -n "$ip6" ] && ip -6 addr add "$ip6" dev eth0
fi
export PS1='# '
echo VP-READY
exec setsid cttyhack sh -i
INIT
chmod 755 "$root/init"

(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet -R 0:0) \
    | gzip -6 >"$work/initrd.gz"
mv -f "$work/vmlinux" "$out/vmlinux"
mv -f "$work/initrd.gz" "$out/initrd.gz"
echo "$stamp" >"$out/inputs"
echo "build-guest: built $out/vmlinux and $out/initrd.gz (kernel $kver, modules: ${#order[@]})"
