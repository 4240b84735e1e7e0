//! vhost-user ports: vecplane as the virtio-net device of a QEMU guest (or of DPDK's
//! virtio-user), over the guest's shared memory.
//!
//! * `backend`: the control thread speaking the vhost-user protocol (rust-vmm's `vhost`).
//! * `memory`: the guest's memory table, mapped (rust-vmm's `vm-memory`) and translated.
//! * `guest_access`: every load and store in guest memory (volatile or atomic).
//! * `fault_guard`: the SIGBUS handler that keeps a frontend shrinking a memory file from
//!   killing the process.
//! * `ring`: the split virtqueue, device side: the fast path (our own; see its header).
//! * `packed_ring`: the packed virtqueue (VIRTIO_F_RING_PACKED), device side, likewise.
//! * `device`: what the control thread and the worker share, and how they hand over.
//! * `net_header`: the virtio-net header and the offloads it carries (checksum, TSO).
//! * `port`, `port_tx`: the receive and transmit nodes.
//! * `socket_file`: the server-mode socket, created with its final mode and group.
//! * `virtqueue`: what the nodes need of a ring, of either layout.
//!
//! It never trusts the guest: every index, descriptor and address is checked, a malformed
//! ring stops the queue and resets the connection, and nothing is read or written outside the
//! memory the guest shared.
#![deny(missing_docs)]

pub mod backend;
pub mod device;
#[cfg(any(test, feature = "fake-guest"))]
#[doc(hidden)]
#[allow(missing_docs)]
pub mod fake_guest;
pub mod fault_guard;
#[doc(hidden)]
pub mod fuzzing;
mod guest_access;
pub mod memory;
pub mod net_header;
pub mod packed_ring;
pub mod port;
mod port_tx;
pub mod ring;
pub mod socket_file;
pub mod virtqueue;

pub use backend::{OpenError, SocketMode, VhostUserDevice};
pub use device::{DeviceCounters, Shared};
pub use port::{VhostRx, VhostTx, DRIVER};
pub use socket_file::{SocketAccess, SocketGroup};
