//! A minimal rtnetlink client for XDP: read which XDP programs an interface has (`RTM_GETLINK`,
//! `IFLA_XDP`), and set or clear a netlink-attached program (`RTM_SETLINK`). Only the socket
//! calls are unsafe; message building and parsing are plain byte handling.

use super::{last_error, owned_fd};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

const NETLINK_ROUTE: libc::c_int = 0;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLMSG_ERROR: u16 = 2;
const NLA_F_NESTED: u16 = 1 << 15;
const NLA_TYPE_MASK: u16 = !(1 << 15 | 1 << 14);

const IFLA_XDP: u16 = 43;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_PROG_ID: u16 = 4;
const IFLA_XDP_DRV_PROG_ID: u16 = 5;
const IFLA_XDP_SKB_PROG_ID: u16 = 6;
const IFLA_XDP_HW_PROG_ID: u16 = 7;
const IFLA_XDP_EXPECTED_FD: u16 = 8;

/// `XDP_FLAGS_REPLACE`: only replace the program given as expected.
pub(crate) const XDP_FLAGS_REPLACE: u32 = 1 << 4;

/// What `IFLA_XDP` says about an interface.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct XdpState {
    /// `XDP_ATTACHED_*`: 0 none, 1 driver, 2 generic, 3 offloaded, 4 several.
    pub attached: u8,
    /// Id of the single attached program (0 when none or several).
    pub prog_id: u32,
    /// Id of the program in driver (native) mode, 0 if none.
    pub drv_prog_id: u32,
    /// Id of the program in generic (SKB) mode, 0 if none.
    pub skb_prog_id: u32,
    /// Id of the offloaded program, 0 if none.
    pub hw_prog_id: u32,
}

fn open() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked by `owned_fd`.
    owned_fd(unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_ROUTE,
        )
    })
}

fn send(fd: &OwnedFd, msg: &[u8]) -> io::Result<()> {
    // SAFETY: an all-zero sockaddr_nl is valid (the kernel, pid 0); we set the family.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: `msg` and `addr` are valid for the lengths passed, alive for the call.
    let ret = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            msg.as_ptr() as *const libc::c_void,
            msg.len(),
            0,
            &addr as *const libc::sockaddr_nl as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if ret < 0 {
        return Err(last_error());
    }
    Ok(())
}

fn recv(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is writable for its length.
    let ret = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            0,
        )
    };
    if ret < 0 {
        return Err(last_error());
    }
    Ok(ret as usize)
}

/// A netlink message under construction.
struct Msg {
    buf: Vec<u8>,
    nests: Vec<usize>,
}

impl Msg {
    fn new(kind: u16, flags: u16, seq: u32, ifindex: u32) -> Msg {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, set in `finish`
        buf.extend_from_slice(&kind.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // port id
                                                    // struct ifinfomsg: family, pad, type, index, flags, change
        buf.extend_from_slice(&[libc::AF_UNSPEC as u8, 0]);
        buf.extend_from_slice(&0u16.to_ne_bytes());
        buf.extend_from_slice(&(ifindex as i32).to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes());
        Msg {
            buf,
            nests: Vec::new(),
        }
    }

    fn attr(&mut self, kind: u16, data: &[u8]) {
        let len = 4 + data.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(data);
        while self.buf.len() % 4 != 0 {
            self.buf.push(0);
        }
    }

    fn begin_nest(&mut self, kind: u16) {
        self.nests.push(self.buf.len());
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf
            .extend_from_slice(&(kind | NLA_F_NESTED).to_ne_bytes());
    }

    fn end_nest(&mut self) {
        if let Some(start) = self.nests.pop() {
            let len = (self.buf.len() - start) as u16;
            self.buf[start..start + 2].copy_from_slice(&len.to_ne_bytes());
        }
    }

    fn finish(mut self) -> Vec<u8> {
        let len = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&len.to_ne_bytes());
        self.buf
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2)?.try_into().ok().map(u16::from_ne_bytes)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)?.try_into().ok().map(u32::from_ne_bytes)
}

/// Attributes (type, payload) of a run of netlink attributes.
fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = u16_at(b, 0)? as usize;
        let kind = u16_at(b, 2)? & NLA_TYPE_MASK;
        if len < 4 || len > b.len() {
            return None;
        }
        let data = &b[4..len];
        b = b.get(len.next_multiple_of(4)..).unwrap_or(&[]);
        Some((kind, data))
    })
}

/// Send `msg` (which asks for an ACK) and return the payloads of the reply messages of type
/// `want`, failing with the kernel's error if it sent one.
fn transact(msg: Vec<u8>, seq: u32, want: u16) -> io::Result<Vec<Vec<u8>>> {
    let fd = open()?;
    send(&fd, &msg)?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::new();
    loop {
        let n = recv(&fd, &mut buf)?;
        let mut off = 0;
        while off + 16 <= n {
            let len = u32_at(&buf, off).unwrap_or(0) as usize;
            if len < 16 || off + len > n {
                break;
            }
            let kind = u16_at(&buf, off + 4).unwrap_or(0);
            let mseq = u32_at(&buf, off + 8).unwrap_or(0);
            let payload = &buf[off + 16..off + len];
            if mseq == seq {
                if kind == NLMSG_ERROR {
                    let err = u32_at(payload, 0).unwrap_or(0) as i32;
                    if err != 0 {
                        return Err(io::Error::from_raw_os_error(-err));
                    }
                    return Ok(out);
                }
                if kind == want {
                    out.push(payload.to_vec());
                }
            }
            off += len.next_multiple_of(4);
        }
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
    }
}

fn next_seq() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static SEQ: AtomicU32 = AtomicU32::new(1);
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// The XDP programs attached to interface `ifindex` (any attach method).
pub(crate) fn xdp_state(ifindex: u32) -> io::Result<XdpState> {
    let seq = next_seq();
    let msg = Msg::new(RTM_GETLINK, NLM_F_REQUEST | NLM_F_ACK, seq, ifindex).finish();
    let mut state = XdpState::default();
    for payload in transact(msg, seq, RTM_NEWLINK)? {
        let Some(rest) = payload.get(16..) else {
            continue;
        };
        for (kind, data) in attrs(rest) {
            if kind != IFLA_XDP {
                continue;
            }
            for (k, d) in attrs(data) {
                match k {
                    IFLA_XDP_ATTACHED => state.attached = d.first().copied().unwrap_or(0),
                    IFLA_XDP_PROG_ID => state.prog_id = u32_at(d, 0).unwrap_or(0),
                    IFLA_XDP_DRV_PROG_ID => state.drv_prog_id = u32_at(d, 0).unwrap_or(0),
                    IFLA_XDP_SKB_PROG_ID => state.skb_prog_id = u32_at(d, 0).unwrap_or(0),
                    IFLA_XDP_HW_PROG_ID => state.hw_prog_id = u32_at(d, 0).unwrap_or(0),
                    _ => {}
                }
            }
        }
    }
    Ok(state)
}

/// Attach program `prog_fd` (or detach with -1) to `ifindex` the legacy way (netlink, no bpf
/// link: it stays attached after the process dies). `flags` are `XDP_FLAGS_*`; with
/// `expected_fd` the kernel only acts if that program is the one attached (XDP_FLAGS_REPLACE).
pub(crate) fn xdp_set_fd(
    ifindex: u32,
    prog_fd: i32,
    flags: u32,
    expected_fd: Option<i32>,
) -> io::Result<()> {
    let seq = next_seq();
    let mut msg = Msg::new(RTM_SETLINK, NLM_F_REQUEST | NLM_F_ACK, seq, ifindex);
    msg.begin_nest(IFLA_XDP);
    msg.attr(IFLA_XDP_FD, &prog_fd.to_ne_bytes());
    let flags = flags
        | if expected_fd.is_some() {
            XDP_FLAGS_REPLACE
        } else {
            0
        };
    msg.attr(IFLA_XDP_FLAGS, &flags.to_ne_bytes());
    if let Some(e) = expected_fd {
        msg.attr(IFLA_XDP_EXPECTED_FD, &e.to_ne_bytes());
    }
    msg.end_nest();
    transact(msg.finish(), seq, 0).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_layout_and_attribute_walk() {
        let mut m = Msg::new(RTM_SETLINK, NLM_F_REQUEST | NLM_F_ACK, 7, 3);
        m.begin_nest(IFLA_XDP);
        m.attr(IFLA_XDP_FD, &(-1i32).to_ne_bytes());
        m.attr(IFLA_XDP_FLAGS, &4u32.to_ne_bytes());
        m.end_nest();
        let b = m.finish();
        assert_eq!(u32_at(&b, 0), Some(b.len() as u32));
        assert_eq!(b.len(), 16 + 16 + 4 + 8 + 8);
        assert_eq!(u32_at(&b, 20), Some(3), "ifindex");
        let outer: Vec<_> = attrs(&b[32..]).collect();
        assert_eq!(outer.len(), 1);
        assert_eq!(outer[0].0, IFLA_XDP, "nested flag masked off");
        let inner: Vec<_> = attrs(outer[0].1).collect();
        assert_eq!(inner[0], (IFLA_XDP_FD, &(-1i32).to_ne_bytes()[..]));
        assert_eq!(inner[1], (IFLA_XDP_FLAGS, &4u32.to_ne_bytes()[..]));
        // A truncated attribute ends the walk instead of panicking.
        assert_eq!(attrs(&[8, 0, 1, 0, 0]).count(), 0);
    }
}
