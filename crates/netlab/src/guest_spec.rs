//! What a QEMU guest runs with: [`GuestSpec`] (name, NICs, addresses, VNF mode, memory, the
//! network namespace QEMU starts in) and [`NicSpec`] (vhost-user sockets, QEMU socket netdevs,
//! TAP devices), their validation, the kernel command line the guest's /init reads, and QEMU's
//! arguments. Pure data and text: it never starts a process nor creates a device.

use crate::guest::GuestImage;
use anyhow::{anyhow, bail, Context, Result};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default deadline for a guest to print [`crate::guest::READY_LINE`] (about 3 s under TCG here).
pub const DEFAULT_BOOT_TIMEOUT: Duration = Duration::from_secs(60);

/// Longest kernel command line on x86 (bytes, without the terminating zero).
const CMDLINE_MAX: usize = 2047;

/// A MAC address.
pub type Mac = [u8; 6];

/// A locally administered unicast MAC for NIC `nic` of guest number `guest`.
pub fn guest_mac(guest: u8, nic: u8) -> Mac {
    [0x52, 0x54, 0x00, 0x76, guest, nic]
}

fn show_mac(m: &Mac) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// One NIC of a guest; they become eth0, eth1, ... in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NicSpec {
    /// A vhost-user virtio-net NIC on unix socket `socket`: QEMU listens there (`server`) or
    /// connects to a backend already listening. Either way QEMU 7.2 does not start the guest
    /// before the backend is connected (`wait=off` only lets QEMU start listening), so the
    /// guest boots once vecplane serves the socket.
    VhostUser {
        /// The vhost-user socket (owned by the caller; never deleted by the guest).
        socket: PathBuf,
        /// Whether QEMU is the socket's server.
        server: bool,
        /// The NIC's MAC.
        mac: Mac,
        /// Queue pairs offered (virtio-net multiqueue when more than 1; the guest's kernel
        /// enables as many as it has vCPUs, see [`GuestSpec::cpus`]).
        queues: u16,
    },
    /// A QEMU socket netdev listening on 127.0.0.1:`port` (for joining guests without vecplane).
    SocketListen {
        /// TCP port on 127.0.0.1.
        port: u16,
        /// The NIC's MAC.
        mac: Mac,
    },
    /// A QEMU socket netdev connecting to a [`NicSpec::SocketListen`] of another guest, which
    /// must be listening already ([`crate::Guest::spawn`] waits up to the boot timeout for that).
    SocketConnect {
        /// TCP port on 127.0.0.1.
        port: u16,
        /// The NIC's MAC.
        mac: Mac,
    },
    /// A TAP device `ifname` that already exists in the guest's network namespace (QEMU's tap
    /// backend in user space, `vhost=off`: there is no vhost-net here). QEMU negotiates the
    /// checksum and TSO offloads with the TAP itself, so the guest sends and receives 64 KB
    /// TCP segments through it; [`crate::TapBridges`] makes such devices.
    Tap {
        /// The TAP's interface name (1 to 15 bytes, no `/`, `,`, `:` or whitespace).
        ifname: String,
        /// The NIC's MAC.
        mac: Mac,
    },
}

/// What one guest runs with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestSpec {
    /// Host name (1 to 32 of `[a-z0-9-]`).
    pub name: String,
    /// NICs, in order (eth0, eth1, ...).
    pub nics: Vec<NicSpec>,
    /// IPv4 address with prefix length for eth0 (`198.18.5.1/24`), from 198.18.0.0/15.
    pub ip: Option<String>,
    /// IPv6 address with prefix length for eth0 (`2001:db8:5::1/64`), from 2001:db8::/32.
    pub ip6: Option<String>,
    /// VNF mode: eth0 and eth1 in Linux bridge br0, up, without addresses.
    pub bridge: bool,
    /// Guest memory in MiB (shared memfd, as vhost-user needs).
    pub memory_mib: u32,
    /// vCPUs (1 to 8; under TCG each is a host thread).
    pub cpus: u8,
    /// QEMU accelerator: `tcg` by default, or `$VP_GUEST_ACCEL` (e.g. `kvm`).
    pub accel: String,
    /// Deadline for the ready line.
    pub boot_timeout: Duration,
    /// Network namespace (its name under /run/netns) QEMU starts in, where its TAP devices
    /// are; None: this process's namespace.
    pub netns: Option<String>,
    /// Vhost-user NICs offer packed virtqueues (`packed=on`); the guest's driver uses them when
    /// the backend offers VIRTIO_F_RING_PACKED too.
    pub packed_rings: bool,
}

impl GuestSpec {
    /// A guest named `name` without NICs or addresses, 256 MiB, the default accelerator.
    pub fn new(name: &str) -> GuestSpec {
        GuestSpec {
            name: name.to_string(),
            nics: Vec::new(),
            ip: None,
            ip6: None,
            bridge: false,
            memory_mib: 256,
            cpus: 1,
            accel: std::env::var("VP_GUEST_ACCEL").unwrap_or_else(|_| "tcg".to_string()),
            boot_timeout: DEFAULT_BOOT_TIMEOUT,
            netns: None,
            packed_rings: false,
        }
    }

    /// Start QEMU in network namespace `ns` (where its TAP devices are).
    pub fn in_namespace(mut self, ns: &str) -> GuestSpec {
        self.netns = Some(ns.to_string());
        self
    }

    /// Add a NIC.
    pub fn nic(mut self, nic: NicSpec) -> GuestSpec {
        self.nics.push(nic);
        self
    }

    /// Set eth0's IPv4 and IPv6 addresses (`ADDR/LEN`).
    pub fn addresses(mut self, ip: &str, ip6: &str) -> GuestSpec {
        self.ip = Some(ip.to_string());
        self.ip6 = Some(ip6.to_string());
        self
    }

    /// Run with `cpus` vCPUs.
    pub fn cpus(mut self, cpus: u8) -> GuestSpec {
        self.cpus = cpus;
        self
    }

    /// Packed virtqueues on the vhost-user NICs.
    pub fn packed_rings(mut self) -> GuestSpec {
        self.packed_rings = true;
        self
    }

    /// VNF mode (bridge eth0 and eth1).
    pub fn bridged(mut self) -> GuestSpec {
        self.bridge = true;
        self
    }

    /// Check the name, the addresses, the NICs and the command line's length.
    pub fn validate(&self) -> Result<()> {
        let n = &self.name;
        if n.is_empty()
            || n.len() > 32
            || !n
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            bail!("guest name `{n}`: accepted: 1 to 32 of a-z, 0-9 and -");
        }
        if let Some(ip) = &self.ip {
            let (a, len) = split_prefix(ip)?;
            let a: Ipv4Addr = a.parse().with_context(|| format!("`{ip}`: not IPv4"))?;
            let o = a.octets();
            if o[0] != 198 || o[1] & 0xfe != 18 || len > 32 {
                bail!("`{ip}`: guests only use 198.18.0.0/15 (prefix length at most 32)");
            }
        }
        if let Some(ip6) = &self.ip6 {
            let (a, len) = split_prefix(ip6)?;
            let a: Ipv6Addr = a.parse().with_context(|| format!("`{ip6}`: not IPv6"))?;
            let s = a.segments();
            if s[0] != 0x2001 || s[1] != 0x0db8 || len > 128 {
                bail!("`{ip6}`: guests only use 2001:db8::/32 (prefix length at most 128)");
            }
        }
        if self.bridge && self.nics.len() != 2 {
            bail!(
                "guest {n}: VNF (bridge) mode needs exactly two NICs, not {}",
                self.nics.len()
            );
        }
        if self.bridge && (self.ip.is_some() || self.ip6.is_some()) {
            bail!("guest {n}: a VNF (bridge) guest has no addresses");
        }
        if self.memory_mib < 64 {
            bail!("guest {n}: {} MiB is too little memory", self.memory_mib);
        }
        if !(1..=8).contains(&self.cpus) {
            bail!("guest {n}: {} vCPUs: accepted: 1 to 8", self.cpus);
        }
        let bad_tap = |name: &str| {
            name.is_empty()
                || name.len() > 15
                || name
                    .chars()
                    .any(|c| c.is_whitespace() || matches!(c, '/' | ',' | ':'))
        };
        for nic in &self.nics {
            match nic {
                NicSpec::VhostUser { queues, .. } if !(1..=8).contains(queues) => {
                    bail!("guest {n}: {queues} vhost-user queue pairs: accepted: 1 to 8");
                }
                NicSpec::Tap { ifname, .. } if bad_tap(ifname) => {
                    bail!(
                        "guest {n}: TAP name `{ifname}`: accepted: 1 to 15 bytes without `/`, \
                         `,`, `:` or whitespace"
                    );
                }
                NicSpec::SocketListen { .. } | NicSpec::SocketConnect { .. }
                    if self.netns.is_some() =>
                {
                    bail!(
                        "guest {n}: socket NICs join guests over 127.0.0.1 of this process's \
                         namespace; a guest in namespace {:?} cannot have one",
                        self.netns.as_deref().unwrap_or_default()
                    );
                }
                _ => {}
            }
        }
        if let Some(ns) = &self.netns {
            if ns.is_empty() || ns.contains('/') || ns.starts_with('.') {
                bail!("guest {n}: namespace `{ns}`: accepted: a name under /run/netns");
            }
        }
        let line = self.kernel_cmdline();
        if line.len() > CMDLINE_MAX {
            bail!(
                "guest {n}: kernel command line is {} bytes, more than {CMDLINE_MAX}",
                line.len()
            );
        }
        Ok(())
    }

    /// The kernel command line: console, quiet, no reboot on panic, and the `vp.*` settings.
    pub fn kernel_cmdline(&self) -> String {
        let mut s = format!(
            "console=ttyS0 quiet panic=-1 vp.name={} vp.nics={}",
            self.name,
            self.nics.len()
        );
        if let Some(ip) = &self.ip {
            s.push_str(&format!(" vp.ip={ip}"));
        }
        if let Some(ip6) = &self.ip6 {
            s.push_str(&format!(" vp.ip6={ip6}"));
        }
        if self.bridge {
            s.push_str(" vp.bridge=1");
        }
        s
    }
}

fn split_prefix(s: &str) -> Result<(&str, u8)> {
    let (a, l) = s
        .split_once('/')
        .ok_or_else(|| anyhow!("`{s}`: expected ADDRESS/PREFIX-LENGTH"))?;
    let l = l
        .parse()
        .with_context(|| format!("`{s}`: bad prefix length"))?;
    Ok((a, l))
}

/// QEMU's arguments (without the program) for `spec`, with its console connecting to
/// `console_sock`.
pub fn qemu_args(image: &GuestImage, spec: &GuestSpec, console_sock: &Path) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    let mut push = |s: &[&str]| a.extend(s.iter().map(|x| x.to_string()));
    let mem = format!(
        "memory-backend-memfd,id=mem,size={}M,share=on",
        spec.memory_mib
    );
    let console = format!("socket,id=con,path={}", console_sock.display());
    push(&[
        "-accel",
        &spec.accel,
        "-m",
        &format!("{}M", spec.memory_mib),
        "-smp",
        &spec.cpus.to_string(),
        "-nodefaults",
        "-no-reboot",
        "-display",
        "none",
        "-object",
        &mem,
        "-numa",
        "node,memdev=mem",
        "-kernel",
        &image.vmlinux.to_string_lossy(),
        "-initrd",
        &image.initrd.to_string_lossy(),
        "-append",
        &spec.kernel_cmdline(),
        "-chardev",
        &console,
        "-serial",
        "chardev:con",
    ]);
    for (i, nic) in spec.nics.iter().enumerate() {
        let (netdev, mac, vectors) = match nic {
            NicSpec::VhostUser {
                socket,
                server,
                mac,
                queues,
            } => {
                let server = if *server { ",server=on,wait=off" } else { "" };
                push(&[
                    "-chardev",
                    &format!("socket,id=vu{i},path={}{server}", socket.display()),
                ]);
                // QEMU 7.2 under TCG crashes in vhost_net_start with MSI-X vectors; with
                // legacy interrupts all queues share one line, which multiqueue allows.
                let extra = match (*queues > 1, spec.packed_rings) {
                    (true, true) => ",mq=on,vectors=0,packed=on",
                    (true, false) => ",mq=on,vectors=0",
                    (false, true) => ",vectors=0,packed=on",
                    (false, false) => ",vectors=0",
                };
                let netdev = if *queues > 1 {
                    format!("vhost-user,id=n{i},chardev=vu{i},queues={queues}")
                } else {
                    format!("vhost-user,id=n{i},chardev=vu{i}")
                };
                (netdev, mac, extra)
            }
            NicSpec::SocketListen { port, mac } => {
                (format!("socket,id=n{i},listen=127.0.0.1:{port}"), mac, "")
            }
            NicSpec::SocketConnect { port, mac } => {
                (format!("socket,id=n{i},connect=127.0.0.1:{port}"), mac, "")
            }
            // The same device as a vhost-user NIC (vectors=0, so legacy interrupts), so that a
            // comparison of the two measures the switch behind them, not the interrupt mode.
            NicSpec::Tap { ifname, mac } => (
                format!("tap,id=n{i},ifname={ifname},script=no,downscript=no,vhost=off"),
                mac,
                ",vectors=0",
            ),
        };
        push(&[
            "-netdev",
            &netdev,
            "-device",
            &format!("virtio-net-pci,netdev=n{i},mac={}{vectors}", show_mac(mac)),
        ]);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> GuestImage {
        GuestImage {
            vmlinux: "/i/vmlinux".into(),
            initrd: "/i/initrd.gz".into(),
        }
    }

    #[test]
    fn specs_are_validated() {
        let ok = GuestSpec::new("g1")
            .nic(NicSpec::SocketListen {
                port: 4000,
                mac: guest_mac(1, 0),
            })
            .addresses("198.18.5.1/24", "2001:db8:5::1/64");
        ok.validate().expect("valid");
        assert_eq!(
            ok.kernel_cmdline(),
            "console=ttyS0 quiet panic=-1 vp.name=g1 vp.nics=1 vp.ip=198.18.5.1/24 vp.ip6=2001:db8:5::1/64"
        );
        for (ip, ip6) in [
            ("10.0.0.1/24", "2001:db8::1/64"),
            ("198.20.0.1/24", "2001:db8::1/64"),
            ("198.19.0.1/33", "2001:db8::1/64"),
            ("198.18.0.1", "2001:db8::1/64"),
            ("198.18.0.1/24", "2001:db9::1/64"),
            ("198.18.0.1/24", "fe80::1/64"),
        ] {
            let s = ok.clone().addresses(ip, ip6);
            assert!(s.validate().is_err(), "{ip} {ip6} accepted");
        }
        assert!(GuestSpec::new("Bad name").validate().is_err());
        assert!(GuestSpec::new("v").bridged().validate().is_err());
        let mut long = ok.clone();
        long.name = "x".repeat(33);
        assert!(long.validate().is_err());
    }

    #[test]
    fn qemu_arguments_describe_every_nic() {
        let spec = GuestSpec::new("v")
            .nic(NicSpec::VhostUser {
                socket: "/s/vu0".into(),
                server: true,
                mac: guest_mac(2, 0),
                queues: 1,
            })
            .nic(NicSpec::SocketConnect {
                port: 4001,
                mac: guest_mac(2, 1),
            })
            .bridged();
        spec.validate().expect("valid");
        let a = qemu_args(&image(), &spec, Path::new("/d/console.sock")).join(" ");
        for want in [
            "-accel ",
            "-object memory-backend-memfd,id=mem,size=256M,share=on -numa node,memdev=mem",
            "-kernel /i/vmlinux -initrd /i/initrd.gz",
            "vp.name=v vp.nics=2 vp.bridge=1",
            "-chardev socket,id=con,path=/d/console.sock -serial chardev:con",
            "-chardev socket,id=vu0,path=/s/vu0,server=on,wait=off",
            "-netdev vhost-user,id=n0,chardev=vu0",
            "-device virtio-net-pci,netdev=n0,mac=52:54:00:76:02:00,vectors=0",
            "-netdev socket,id=n1,connect=127.0.0.1:4001",
            "-device virtio-net-pci,netdev=n1,mac=52:54:00:76:02:01",
        ] {
            assert!(a.contains(want), "{want} not in {a}");
        }
        assert!(a.ends_with("mac=52:54:00:76:02:01"), "{a}");
        assert!(a.contains("-smp 1 "), "{a}");

        // Two vCPUs and two queue pairs: multiqueue.
        let mut mq = spec.clone().cpus(2);
        mq.nics[0] = NicSpec::VhostUser {
            socket: "/s/vu0".into(),
            server: false,
            mac: guest_mac(2, 0),
            queues: 2,
        };
        mq.validate().expect("valid");
        let a = qemu_args(&image(), &mq, Path::new("/d/console.sock")).join(" ");
        for want in [
            "-smp 2 ",
            "-netdev vhost-user,id=n0,chardev=vu0,queues=2",
            "-device virtio-net-pci,netdev=n0,mac=52:54:00:76:02:00,mq=on,vectors=0",
        ] {
            assert!(a.contains(want), "{want} not in {a}");
        }
        for (cpus, queues) in [(0, 1), (9, 1), (2, 0), (2, 9)] {
            let mut bad = mq.clone().cpus(cpus);
            if let NicSpec::VhostUser { queues: q, .. } = &mut bad.nics[0] {
                *q = queues;
            }
            assert!(
                bad.validate().is_err(),
                "{cpus} vCPUs, {queues} queues accepted"
            );
        }
    }

    #[test]
    fn tap_nics_use_the_tap_backend_without_vhost_net() {
        let spec = GuestSpec::new("t")
            .nic(NicSpec::Tap {
                ifname: "tap3".into(),
                mac: guest_mac(3, 0),
            })
            .addresses("198.18.31.1/24", "2001:db8:31::1/64")
            .in_namespace("vtb-1-2-r");
        spec.validate().expect("valid");
        let a = qemu_args(&image(), &spec, Path::new("/d/console.sock")).join(" ");
        assert!(
            a.contains(
                "-netdev tap,id=n0,ifname=tap3,script=no,downscript=no,vhost=off -device \
                 virtio-net-pci,netdev=n0,mac=52:54:00:76:03:00,vectors=0"
            ),
            "{a}"
        );
        for bad in ["", "a-name-too-long-x", "a,b", "a b", "x/y"] {
            let mut s = spec.clone();
            s.nics[0] = NicSpec::Tap {
                ifname: bad.into(),
                mac: guest_mac(3, 0),
            };
            assert!(s.validate().is_err(), "{bad:?} accepted");
        }
        // Socket NICs are 127.0.0.1 of this namespace: not for a guest in another one.
        let s = GuestSpec::new("s")
            .nic(NicSpec::SocketListen {
                port: 4000,
                mac: guest_mac(4, 0),
            })
            .in_namespace("vtb-1-2-r");
        assert!(s.validate().is_err());
        assert!(GuestSpec::new("n").in_namespace("../x").validate().is_err());
    }
}
