//! Support for vecplane's fuzz targets: the router graph with a frame injector (`harness`), and
//! the bodies of the flow extraction target (`flow_check`) and of the segmentation target
//! (`gso_check`).
pub mod flow_check;
pub mod gso_check;
pub mod harness;
