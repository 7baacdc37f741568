//! # routechain-rules
//!
//! Loading what users write: chain files and rule documents in YAML, with every problem
//! reported at once by origin (file or config-center node), line, column and field path.
//!
//! - [`yaml`]: YAML → JSON value plus a location for every field; [`located`]: located
//!   problems, [`LocatedErrors`] (every problem of an input, a `std::error::Error`: what
//!   [`ChainFile::parse`] and [`ChainFile::load`] return) and their bounded rendering; [`input`]: reading input files (regular files
//!   only, a size limit, located UTF-8 errors, a byte-order mark accepted).
//! - [`chain_file`]: the chain file schema; compiling its entries through a
//!   [`routechain_core::Registry`].
//! - [`service_config`]: the chain file's load-balancing, failover and health settings.
//! - [`load`]: a chain, a provider list and a request loaded from files, every problem
//!   located; [`request`]: the JSON request format.
//!
//! The rule schemas of the built-in routers (Dubbo's own documents for condition, tag and
//! affinity, routechain's for group and IDC-weight) live with their routers, in
//! `routechain-routers` (`routers/src/<name>/rule.rs`): each router deserializes and
//! validates its rule from the [`routechain_core::RuleDoc`] this crate hands it.
//! `rules/examples/` holds a commented example of each.

pub mod chain_file;
pub mod configurators;
pub mod input;
pub mod load;
pub mod located;
pub mod request;
pub mod service_config;
pub mod yaml;

mod provider_file;
mod scalar;
mod tree;

pub use chain_file::{ChainFile, EntryDef, RuleOverride, RuleSource};
pub use load::LoadError;
pub use located::LocatedErrors;
pub use request::RequestSpec;
pub use yaml::{LocatedError, Location, YamlDoc};

/// The directory of the shipped examples (`rules/examples/`).
pub fn examples_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}
