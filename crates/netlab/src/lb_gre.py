#!/usr/bin/python3
# netlab's user-space GRE for kernels built without GRE tunnels (CONFIG_NET_IPGRE unset).
# decap (on a server): GRE over IPv4 and IPv6 read from raw sockets (so the kernel sends no
#   "protocol unreachable"), the inner IPv4/IPv6 packet written into a TUN device.
# encap (the kernel reference LB): inner packets read from a TUN device the VIPs are routed
#   to, a server picked by a hash of the flow (weighted slots), sent as GRE over IPv4 or IPv6.
# Standard library only; it never opens anything but its TUN device and raw GRE sockets.
import fcntl, os, select, socket, struct, sys, zlib

IPPROTO_GRE = 47
TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000


def open_tun(name):
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def gre_payload(data):
    """The inner packet of a GRE packet (header at data[0]), or None."""
    if len(data) < 4:
        return None
    flags, proto = struct.unpack("!HH", data[:4])
    if flags & 0x7 or proto not in (0x0800, 0x86DD):
        return None
    off = 4 + 4 * bool(flags & 0x8000) + 4 * bool(flags & 0x2000) + 4 * bool(flags & 0x1000)
    return data[off:] if len(data) > off else None


def decap(tun_name):
    tun = open_tun(tun_name)
    s4 = socket.socket(socket.AF_INET, socket.SOCK_RAW, IPPROTO_GRE)
    s6 = socket.socket(socket.AF_INET6, socket.SOCK_RAW, IPPROTO_GRE)
    print("ready", flush=True)
    count = 0
    while True:
        r, _, _ = select.select([s4, s6], [], [])
        for s in r:
            data = s.recv(65535)
            if s is s4:
                # IPv4 raw sockets hand over the IP header too.
                data = data[(data[0] & 0xF) * 4:]
            inner = gre_payload(data)
            if inner is not None:
                os.write(tun, inner)
                count += 1
                if count in (1, 10, 100, 1000) or count % 10000 == 0:
                    print(f"decapsulated {count}", flush=True)


def flow_key(pkt):
    """Source, destination, protocol and ports of an inner packet."""
    if pkt[0] >> 4 == 4:
        ihl = (pkt[0] & 0xF) * 4
        proto, addrs, l4 = pkt[9], pkt[12:20], pkt[ihl:ihl + 4]
    else:
        proto, addrs, l4 = pkt[6], pkt[8:40], pkt[40:44]
    return addrs + bytes([proto]) + (l4 if proto in (6, 17) else b"")


def encap(tun_name, routes, servers, weights):
    # routes: VIP -> "gre4" | "gre6"; servers: [(ip4, ip6)], one slot per unit of weight.
    tun = open_tun(tun_name)
    s4 = socket.socket(socket.AF_INET, socket.SOCK_RAW, IPPROTO_GRE)
    s6 = socket.socket(socket.AF_INET6, socket.SOCK_RAW, IPPROTO_GRE)
    slots = [i for i, w in enumerate(weights) if w for _ in range(w)]
    vips = {socket.inet_pton(socket.AF_INET6 if ":" in v else socket.AF_INET, v): (k, v) for v, k in routes.items()}
    print("ready", flush=True)
    count = 0
    while True:
        pkt = os.read(tun, 65535)
        if len(pkt) < 20:
            continue
        v4 = pkt[0] >> 4 == 4
        dst = pkt[16:20] if v4 else pkt[24:40]
        hit = vips.get(dst)
        if hit is None or not slots:
            continue
        server = servers[slots[zlib.crc32(flow_key(pkt)) % len(slots)]]
        gre = struct.pack("!HH", 0, 0x0800 if v4 else 0x86DD)
        try:
            if hit[0] == "gre4":
                s4.sendto(gre + pkt, (server[0], 0))
            else:
                s6.sendto(gre + pkt, (server[1], 0, 0, 0))
        except OSError as e:
            print(f"send to {server}: {e}", flush=True)
            continue
        count += 1
        if count in (1, 10, 100, 1000) or count % 10000 == 0:
            print(f"encapsulated {count}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    opts = dict(zip(args[1::2], args[2::2]))
    if args[:1] == ["decap"]:
        decap(opts["--tun"])
    elif args[:1] == ["encap"]:
        # --routes VIP=gre4,VIP=gre6 --servers IP4/IP6,... --weights W,...
        routes = dict(r.split("=") for r in opts["--routes"].split(","))
        servers = [tuple(s.split("/")) for s in opts["--servers"].split(",")]
        weights = [int(w) for w in opts["--weights"].split(",")]
        encap(opts["--tun"], routes, servers, weights)
    else:
        sys.exit("usage: lb_gre.py decap --tun DEV | encap --tun DEV --routes .. --servers .. --weights ..")
