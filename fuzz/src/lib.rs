//! Support for vecplane's fuzz targets: the router graph with a frame injector (`harness`).
pub mod harness;
