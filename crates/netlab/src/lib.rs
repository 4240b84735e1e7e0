//! netlab: reusable network-namespace topologies for vecplane's demo, veth benchmarks and
//! end-to-end tests. One [`Topology`] is namespaces A, R and B joined by veth pairs A0 <-> Ra and
//! Rb <-> B0, with R as a kernel router, a Linux bridge, or left to a data plane
//! ([`Mode::Dataplane`]) that [`Vecplane`] runs inside R from a generated, validated config.
//!
//! It owns everything it creates (namespaces, veths, a bridge, a scratch directory, the
//! processes it spawns there) and deletes all of it on drop, on SIGINT/SIGTERM/SIGHUP, and on a
//! panic that aborts; names are unique per process and per run ([`Names`]) so runs never collide.
//! It never touches interfaces, namespaces or processes it did not create (except leftovers of
//! dead runs carrying its own prefix), and it only uses addresses from 198.18.0.0/15 and
//! 2001:db8::/32. [`LbLab`] is the load-balancer lab: client, router, the LB's namespace (bare
//! veth ends for vecplane, or the kernel reference) and nginx servers set up for every
//! encapsulation; [`LbFleet`] is its scale-out sibling: a BIRD router with ECMP in front of
//! several vecplane load balancers, each announcing the VIP over eBGP with its own BIRD.
//! [`Guest`] runs a QEMU guest (busybox, iperf3, virtio-net, a Linux bridge for VNF mode) built
//! from Debian packages by scripts/guest/build-guest.sh ([`GuestImage`]), with vhost-user, QEMU
//! socket or TAP NICs and a scriptable serial console; [`TapBridges`] holds Linux bridges with
//! TAP ports for guests in a namespace of its own, [`chain`] builds service chains of VNF guests
//! (vecplane flow rules, or Linux bridges), and [`VhostLab`] runs vecplane for guests on its
//! vhost-user ports.
#![deny(missing_docs)]

pub mod chain;
pub mod cleanup;
pub mod cmd;
pub mod guest;
pub mod guest_spec;
pub mod lb;
pub mod lb_fleet;
pub mod lb_kernel;
pub mod lb_load;
pub mod lb_servers;
pub mod lb_spec;
pub mod lb_vecplane;
pub mod names;
pub mod ovs;
pub mod tap_bridge;
pub mod topology;
pub mod vecplane;
pub mod vm_lab;

pub use chain::LinuxChain;
pub use cleanup::{
    cleanup_all, delete_leftovers, install_cleanup_handlers, namespace_exists, RegisteredDir,
};
pub use cmd::{missing_prerequisite, Spawned};
pub use guest::{
    free_port, guest_mac, missing_guest_packages, missing_guest_packages_reason,
    missing_guest_prerequisite, Guest, GuestImage, GuestSpec, Mac, NicSpec, GUEST_PREFIX,
    READY_LINE,
};
pub use lb::{
    Encap, KernelHash, LbLab, LbMode, LbNames, LbPort, LbSpec, ServerInfo, Vip, LAB_TOOLS,
    LB_PREFIX, VIP_PORT,
};
pub use lb_fleet::{FleetNames, FleetSpec, LbFleet, WrkJob, FLEET_PREFIX, FLEET_TOOLS};
pub use lb_load::{LoadResult, WrkSpec};
pub use names::{Names, DEFAULT_PREFIX};
pub use ovs::{AfxdpSwitch, DpdkVhostSwitch, Ovs, Trace, OVS_VSWITCHD_DPDK};
pub use tap_bridge::{TapBridges, TAP_PREFIX};
pub use topology::{addr, Addressing, Host, LinkStats, Mode, Topology};
pub use vecplane::{
    render_config, unsupported_feature, validate_config, Driver, Forwarding, PortCounters,
    Unsupported, Vecplane, VecplaneConfig, XdpMode,
};
pub use vm_lab::{VhostLab, VM_BRIDGE_CONFIG};
