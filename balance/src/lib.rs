//! # routechain-balance
//!
//! From a routed set to one provider, and what calls teach about providers:
//!
//! - [`lb`]: load balancers (`random`, `roundrobin`, `leastactive`, `consistenthash`, `p2c`)
//!   picking one provider from the candidate bitset, prepared per snapshot.
//! - [`health`]: failure counting, cool-downs and probation, marking the chain's
//!   [`routechain_core::DegradedSet`].
//! - [`service`]: [`Service`], route + balance + failover (async [`Service::call`], sync
//!   [`Service::invoke`]) + health tracking + the service breaker, over a live
//!   [`routechain_core::Chain`], published to calls as one atomically swapped view.
//!
//! Depends only on `routechain-core`.

pub mod health;
pub mod lb;
pub mod service;

pub use health::{Clock, HealthConfig, HealthTable, ManualClock, ProviderHealth, SystemClock};
pub use lb::{BalanceConfig, BalancerSpec, LoadBalanceKind, SnapshotBalance};
pub use service::{
    CallError, InFlight, InvokeError, Invoked, MethodCall, PerThread, Pooled, SelectError,
    Selected, Service, ServiceConfig, ServiceStats, Target,
};
