//! Support for vecplane's fuzz targets: the router graph with a frame injector (`harness`), and
//! the body of the flow extraction target (`flow_check`).
pub mod flow_check;
pub mod harness;
