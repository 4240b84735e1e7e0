//! What the generator asks of the operating system outside AF_XDP: pinning the calling thread to
//! a CPU, SIGINT/SIGTERM as a stop flag, the privilege check, and an interface's facts (index,
//! MAC, MTU, drop counter) in this process's network namespace. The only module with `unsafe`;
//! each block says why it is sound. It never touches packets and never decides policy.
#![allow(unsafe_code)]

use anyhow::{bail, Context, Result};
use packet::headers::Mac;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Longest interface name Linux accepts (IFNAMSIZ - 1).
pub const MAX_IFNAME_LEN: usize = 15;

/// Set by SIGINT/SIGTERM.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // A second signal while stopping ends the process at once (async-signal-safe calls only).
    if STOP.swap(true, Ordering::SeqCst) {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(130) };
    }
}

/// Make SIGINT and SIGTERM set the stop flag (a second one exits at once).
pub fn install_stop_signals() {
    let handler: extern "C" fn(libc::c_int) = on_signal;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only touches an atomic and calls _exit, both async-signal-safe.
        unsafe {
            libc::signal(sig, handler as libc::sighandler_t);
        }
    }
}

/// True once SIGINT or SIGTERM arrived.
#[inline(always)]
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// CPU time the calling thread has used, in seconds (user + system, including softirq work
/// the kernel did in its context).
pub fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Pin the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> Result<()> {
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    if cpu >= max {
        bail!("--cpu {cpu} is out of range; accepted: 0..{max}");
    }
    // SAFETY: cpu_set_t is plain data for which all-zero is valid; CPU_ZERO/CPU_SET write inside
    // it (cpu < its bit count, checked above); sched_setaffinity(0, ..) reads it for the call.
    let ok = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    };
    if !ok {
        let e = std::io::Error::last_os_error();
        bail!("cannot pin to CPU {cpu}: {e} (is CPU {cpu} online and in this process's allowed set? see `taskset -p $$`)");
    }
    Ok(())
}

/// Fail with a clear message unless this process may open AF_XDP sockets and attach XDP
/// programs: root, or the capabilities CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF (or
/// CAP_SYS_ADMIN).
pub fn check_privileges() -> Result<()> {
    let status = std::fs::read_to_string("/proc/self/status")
        .context("cannot read /proc/self/status to check privileges")?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or("")
    };
    let euid = field("Uid:").split_whitespace().nth(1).unwrap_or("");
    if euid == "0" {
        return Ok(());
    }
    let caps = u64::from_str_radix(field("CapEff:"), 16).unwrap_or(0);
    let has = |bit: u32| caps & (1u64 << bit) != 0;
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_NET_RAW: u32 = 13;
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_BPF: u32 = 39;
    if has(CAP_NET_ADMIN) && has(CAP_NET_RAW) && (has(CAP_BPF) || has(CAP_SYS_ADMIN)) {
        return Ok(());
    }
    bail!(
        "not root (effective uid {euid}): AF_XDP sockets and XDP programs need root, or \
         CAP_NET_ADMIN + CAP_NET_RAW + CAP_BPF; run it with sudo"
    )
}

/// An interface as this process's network namespace sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterfaceFacts {
    /// Interface index.
    pub index: u32,
    /// Hardware (MAC) address.
    pub mac: Mac,
    /// MTU in bytes (the largest L3 packet; a frame adds 14 bytes of Ethernet header).
    pub mtu: u32,
}

fn check_ifname(name: &str) -> Result<CString> {
    if name.is_empty()
        || name.len() > MAX_IFNAME_LEN
        || name.contains('/')
        || name.chars().any(char::is_whitespace)
    {
        bail!(
            "`{name}` is not an interface name; accepted: 1..={MAX_IFNAME_LEN} characters, \
             no '/' or spaces"
        );
    }
    CString::new(name).with_context(|| format!("`{name}` is not an interface name (NUL byte)"))
}

/// Index, MAC and MTU of `name`; an error saying so when there is no such interface here.
pub fn interface_facts(name: &str) -> Result<InterfaceFacts> {
    let cname = check_ifname(name)?;
    // SAFETY: `cname` is a NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if index == 0 {
        bail!(
            "no interface `{name}` in this network namespace (see `ip link`; inside a namespace \
             run under `ip netns exec NS`)"
        );
    }
    // SAFETY: plain socket(2) call; the result is checked before it is wrapped.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        let e = std::io::Error::last_os_error();
        bail!("cannot open a socket to query `{name}`: {e}");
    }
    // SAFETY: `raw` is a fresh descriptor owned by nothing else; OwnedFd closes it once.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let request = || {
        // SAFETY: ifreq is plain data for which all-zero is valid.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, &src) in req.ifr_name.iter_mut().zip(cname.as_bytes()) {
            *dst = src as libc::c_char;
        }
        req
    };
    let mut hw = request();
    // SAFETY: SIOCGIFHWADDR reads the NUL-terminated name in `hw` and writes its union, both
    // inside the struct that lives for the call.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFHWADDR, &mut hw) } < 0 {
        let e = std::io::Error::last_os_error();
        bail!("cannot read the MAC address of `{name}`: {e}");
    }
    // SAFETY: after a successful SIOCGIFHWADDR the union holds `ifru_hwaddr`.
    let addr = unsafe { hw.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (dst, &src) in mac.iter_mut().zip(addr.sa_data.iter()) {
        *dst = src as u8;
    }
    let mut m = request();
    // SAFETY: as above, for SIOCGIFMTU.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFMTU, &mut m) } < 0 {
        let e = std::io::Error::last_os_error();
        bail!("cannot read the MTU of `{name}`: {e}");
    }
    // SAFETY: after a successful SIOCGIFMTU the union holds `ifru_mtu`.
    let mtu = unsafe { m.ifr_ifru.ifru_mtu }.max(0) as u32;
    Ok(InterfaceFacts { index, mac, mtu })
}

/// The interface's `tx_dropped` counter, when /sys shows this network namespace's interface of
/// that name (same index); `None` otherwise.
pub fn interface_tx_dropped(name: &str, index: u32) -> Option<u64> {
    let dir = format!("/sys/class/net/{name}");
    let sys_index: u32 = std::fs::read_to_string(format!("{dir}/ifindex"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    if sys_index != index {
        return None;
    }
    std::fs::read_to_string(format!("{dir}/statistics/tx_dropped"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;

/// Two u32 fields laid out in memory one after the other, as one u64 word.
fn u32_pair(first: u32, second: u32) -> u64 {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&first.to_ne_bytes());
    b[4..].copy_from_slice(&second.to_ne_bytes());
    u64::from_ne_bytes(b)
}

/// The u32 field in the first half (in memory) of a u64 word.
fn first_u32(word: u64) -> u32 {
    let b = word.to_ne_bytes();
    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}

/// One SIOCETHTOOL request whose buffer is `buf` (u64 words, so every ethtool struct is aligned).
fn ethtool(sock: &OwnedFd, cname: &CString, buf: &mut [u64]) -> bool {
    // SAFETY: ifreq is plain data for which all-zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(cname.as_bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_data = buf.as_mut_ptr() as *mut libc::c_char;
    // SAFETY: SIOCETHTOOL reads the command at the start of `buf` and writes at most the sizes
    // that command's header (which the caller set from earlier answers) says `buf` holds; `buf`
    // and `req` outlive the call.
    unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL, &mut req) >= 0 }
}

/// The driver's statistics (`ethtool -S`) of `name`, or `None` when it has none or they cannot
/// be read. Cold path: a few ioctls.
pub fn device_stats(name: &str) -> Option<Vec<(String, u64)>> {
    let cname = check_ifname(name).ok()?;
    // SAFETY: plain socket(2) call; the result is checked before it is wrapped.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return None;
    }
    // SAFETY: `raw` is a fresh descriptor owned by nothing else.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    // struct ethtool_sset_info: cmd, reserved, sset_mask (u64), data[1] (u32).
    let mut info = [0u64; 3];
    info[0] = u32_pair(ETHTOOL_GSSET_INFO, 0);
    info[1] = 1 << ETH_SS_STATS;
    if !ethtool(&sock, &cname, &mut info) || info[1] == 0 {
        return None;
    }
    let count = first_u32(info[2]) as usize;
    if count == 0 || count > 1 << 16 {
        return None;
    }
    // struct ethtool_gstrings: cmd, string_set, len (u32 each), then len * 32 bytes.
    let mut strings = vec![0u64; 2 + count * ETH_GSTRING_LEN / 8];
    strings[0] = u32_pair(ETHTOOL_GSTRINGS, ETH_SS_STATS);
    strings[1] = u32_pair(count as u32, 0);
    if !ethtool(&sock, &cname, &mut strings) {
        return None;
    }
    // struct ethtool_stats: cmd, n_stats (u32 each), then n_stats u64 values.
    let mut stats = vec![0u64; 1 + count];
    stats[0] = u32_pair(ETHTOOL_GSTATS, count as u32);
    if !ethtool(&sock, &cname, &mut stats) {
        return None;
    }
    let bytes: Vec<u8> = strings[1..]
        .iter()
        .flat_map(|w| w.to_ne_bytes())
        .skip(4)
        .collect();
    Some(
        bytes
            .chunks(ETH_GSTRING_LEN)
            .take(count)
            .zip(&stats[1..])
            .map(|(raw, &v)| {
                let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
                (String::from_utf8_lossy(&raw[..end]).into_owned(), v)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_interface_names_are_refused_with_what_is_accepted() {
        for bad in ["", "a/b", "sixteen-chars-xx", "a b"] {
            let e = interface_facts(bad).expect_err(bad);
            assert!(e.to_string().contains("accepted"), "{bad}: {e}");
        }
        let e = interface_facts("vgenabsent0").expect_err("absent");
        assert!(e.to_string().contains("no interface `vgenabsent0`"), "{e}");
    }

    #[test]
    fn loopback_has_facts() {
        let lo = interface_facts("lo").expect("lo");
        assert!(lo.index > 0);
        assert_eq!(lo.mac, [0; 6]);
        assert!(lo.mtu >= 1500);
    }

    #[test]
    fn cpu_out_of_range_is_refused() {
        assert!(pin_to_cpu(1 << 20).is_err());
    }
}
