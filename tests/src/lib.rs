//! # routechain-tests
//!
//! Workspace-level tests that exercise routechain only through its public API. The crate
//! itself is empty; the tests live in `tests/`:
//!
//! - `conformance.rs`: every case of `conformance/dubbo-cases.yaml` (facts transcribed from
//!   Apache Dubbo 3.3's router unit tests) through the built-in registry;
//! - `live/`: live chains from files and from a real ZooKeeper;
//! - `zero_alloc_chain/`: the full chain allocates nothing per call;
//! - `naive_equivalence/`: the prepared chain answers as the naive `Vec` filter does.
