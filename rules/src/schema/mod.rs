//! Rule schemas of the built-in routers: the documents as written (serde types) and their
//! validation, reporting problems by field path. The routers crate compiles them.

pub mod affinity;
pub mod condition;
pub mod dubbo;
pub mod group;
pub mod idc_cidrs;
pub mod idc_weight;
pub mod tag;
