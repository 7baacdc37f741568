//! # routechain-balance
//!
//! From a routed set to one provider, and what calls teach about providers:
//!
//! - [`lb`]: load balancers (`random`, `roundrobin`, `leastactive`, `consistenthash`, `p2c`,
//!   `shortestresponse`, `adaptive`)
//!   picking one provider from the candidate bitset, prepared per snapshot.
//! - [`health`]: failure counting, cool-downs and probation, marking the chain's
//!   [`routechain_core::DegradedSet`].
//! - [`service`]: [`Cluster`], route + balance + failover ([`Cluster::select`] for the
//!   caller's own loop, async [`Cluster::call`] around a closure) + health tracking + the
//!   service breaker, over one published state (chain state, balancer and health tables,
//!   configuration) that [`Cluster::apply`] replaces whole; the cluster modes (`failover`,
//!   `failfast`, `failsafe`, `forking`, `broadcast`: [`ClusterMode`]) and the call
//!   parameters merged in Dubbo's order from the consumer, the providers' URLs and the
//!   override rules ([`service::params`]); with several registries, one chosen per call
//!   before routing (Dubbo's zone-aware cluster, [`service::registries`]).
//!
//! Depends only on `routechain-core`.

pub mod health;
pub mod lb;
pub mod service;

pub use health::{Clock, HealthConfig, HealthTable, ManualClock, ProviderHealth, SystemClock};
pub use lb::{BalanceConfig, BalancerSpec, LoadBalanceKind, SnapshotBalance};
pub use service::params::{CallParams, Source as ParamSource};
pub use service::{
    CallError, Caller, Cluster, ClusterChange, ClusterMode, ClusterStats, InFlight, InvokeError,
    Invoked, MethodCall, OverrideKeys, OverrideLayer, Published, REGISTRY_ZONE,
    REGISTRY_ZONE_FORCE, Registries, RegistryInfo, RegistryTable, RetryBudget, SelectError,
    Selected, ServiceConfig, Target,
};
#[doc(hidden)]
pub use service::{PerThread, Pooled};
