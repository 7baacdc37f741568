//! # routechain-tests
//!
//! Workspace-level tests that exercise routechain only through its public API. The crate
//! itself is empty; the tests live in `tests/`:
//!
//! - `tests/conformance.rs` runs every case of `conformance/dubbo-cases.yaml` (facts
//!   transcribed from Apache Dubbo 3.3's router unit tests) through the built-in registry.
