//! The errors of the port drivers: opening, reading and writing pcap files, building flow sets, and
//! opening kernel ports (AF_PACKET sockets, TAP devices). Every message names the file or
//! interface concerned and says what is accepted or what to do; never a panic.

use std::path::Path;
use thiserror::Error;

/// An error of a port driver.
#[derive(Debug, Error)]
pub enum PortError {
    /// The operating system refused an operation on a file.
    #[error("pcap file `{path}`: cannot {op}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What was attempted ("open", "read record 7", "write", "flush", ...).
        op: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The file is shorter than the 24-byte pcap file header.
    #[error("pcap file `{path}`: truncated file header ({got} bytes); accepted: a classic pcap file starting with a 24-byte header")]
    TruncatedHeader {
        /// The file.
        path: String,
        /// Bytes present.
        got: usize,
    },
    /// The magic number is not one of classic pcap's.
    #[error("pcap file `{path}`: magic number 0x{magic:08x} is not classic pcap; accepted: 0xa1b2c3d4 (microseconds) or 0xa1b23c4d (nanoseconds) in either byte order (pcapng is not supported)")]
    BadMagic {
        /// The file.
        path: String,
        /// The first four bytes, read little-endian.
        magic: u32,
    },
    /// The format version is not 2.x.
    #[error("pcap file `{path}`: format version {major}.{minor}; accepted: 2.x")]
    BadVersion {
        /// The file.
        path: String,
        /// Major version.
        major: u16,
        /// Minor version.
        minor: u16,
    },
    /// The link type is not Ethernet.
    #[error("pcap file `{path}`: link type {linktype}; accepted: 1 (Ethernet)")]
    BadLinkType {
        /// The file.
        path: String,
        /// The link type found.
        linktype: u32,
    },
    /// A record header or its data ends before the file does.
    #[error("pcap file `{path}`: record {record} is truncated ({what}); accepted: complete 16-byte record headers followed by their captured bytes")]
    TruncatedRecord {
        /// The file.
        path: String,
        /// Record number, from 1.
        record: u64,
        /// What is missing.
        what: String,
    },
    /// A record claims more captured bytes than the file's snap length allows.
    #[error("pcap file `{path}`: record {record} captures {caplen} bytes; accepted: at most {limit} (the file's snaplen, capped at 256 KiB)")]
    RecordTooLarge {
        /// The file.
        path: String,
        /// Record number, from 1.
        record: u64,
        /// Captured length claimed.
        caplen: u32,
        /// The limit.
        limit: u32,
    },
    /// The caller's buffer cannot hold a record (the record was skipped; the reader stays usable).
    #[error("pcap file `{path}`: record {record} captures {caplen} bytes but the buffer holds {capacity}; accepted: a buffer of at least `max_caplen()` bytes")]
    BufferTooSmall {
        /// The file.
        path: String,
        /// Record number, from 1.
        record: u64,
        /// Captured length.
        caplen: u32,
        /// Size of the buffer given.
        capacity: usize,
    },
    /// A flow set could not be built.
    #[error("memory port flows: {0}")]
    Flows(String),
    /// The kernel interface a port names does not exist (in this network namespace).
    #[error(
        "{driver} port: interface `{interface}` does not exist; create it first or check `ip link`"
    )]
    NoSuchInterface {
        /// The driver (`af-packet`, `tap`).
        driver: &'static str,
        /// The interface name.
        interface: String,
    },
    /// The kernel refused an operation for lack of privilege.
    #[error("{driver} port on interface `{interface}`: cannot {op}: permission denied; {needs}")]
    NotPermitted {
        /// The driver (`af-packet`, `tap`).
        driver: &'static str,
        /// The interface name.
        interface: String,
        /// What was attempted.
        op: String,
        /// What is needed, e.g. "AF_PACKET needs CAP_NET_RAW (run as root)".
        needs: &'static str,
    },
    /// A system call on a kernel port failed.
    #[error("{driver} port on interface `{interface}`: cannot {op}: {source}")]
    Os {
        /// The driver (`af-packet`, `tap`).
        driver: &'static str,
        /// The interface name.
        interface: String,
        /// What was attempted ("set PACKET_RX_RING", "mmap the rings", ...).
        op: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A setting of a kernel port is out of range.
    #[error("{driver} port on interface `{interface}`: {reason}")]
    BadSetting {
        /// The driver (`af-packet`, `tap`).
        driver: &'static str,
        /// The interface name.
        interface: String,
        /// What is wrong and what is accepted.
        reason: String,
    },
}

impl PortError {
    /// An I/O error on `path` while doing `op`.
    pub(crate) fn io(path: &str, op: impl Into<String>, source: std::io::Error) -> PortError {
        PortError::Io {
            path: path.to_string(),
            op: op.into(),
            source,
        }
    }
}

/// The display form of a path used in messages.
pub(crate) fn path_name(path: &Path) -> String {
    path.display().to_string()
}
