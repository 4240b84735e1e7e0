//! Shared parts of the integration tests.
pub mod kit;
pub mod tools;
