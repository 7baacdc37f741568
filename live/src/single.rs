//! One registry address, dispatched by its scheme ([`registry_address`]), and the
//! connection state every registry source shares ([`RegistryConnection`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a registry source is connected now: shared by the source and whoever shows it
/// (`watch --metrics` exports it as `routechain_registry_connected`).
#[derive(Debug, Clone, Default)]
pub struct RegistryConnection(Arc<AtomicBool>);

impl RegistryConnection {
    /// True while connected (a session, and a server answering).
    pub fn is_connected(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub(crate) fn set(&self, connected: bool) {
        self.0.store(connected, Ordering::Relaxed);
    }
}

/// One registry, by its address's scheme.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SingleRegistry {
    /// `zookeeper://…`, or an address without a scheme.
    #[cfg(feature = "zookeeper")]
    ZooKeeper(crate::ZkAddress),
    /// `nacos://…`.
    #[cfg(feature = "nacos")]
    Nacos(crate::NacosAddress),
}

impl std::fmt::Display for SingleRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            #[cfg(feature = "zookeeper")]
            SingleRegistry::ZooKeeper(a) => write!(f, "ZooKeeper {a}"),
            #[cfg(feature = "nacos")]
            SingleRegistry::Nacos(a) => write!(f, "Nacos {a}"),
        }
    }
}

/// Parses one registry address as Dubbo users write it: `nacos://…` is Nacos,
/// `zookeeper://…` or no scheme is ZooKeeper. An error says why (password masked).
pub fn registry_address(text: &str) -> Result<SingleRegistry, String> {
    let scheme = text
        .trim()
        .split_once("://")
        .map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        #[cfg(feature = "nacos")]
        Some("nacos") => crate::NacosAddress::parse(text)
            .map(SingleRegistry::Nacos)
            .map_err(|e| e.to_string()),
        #[cfg(feature = "zookeeper")]
        Some("zookeeper") | None => crate::ZkAddress::parse(text)
            .map(SingleRegistry::ZooKeeper)
            .map_err(|e| e.to_string()),
        _ => Err(format!(
            "`{}`: a registry address is zookeeper://host:port or nacos://host:port{}",
            crate::address::mask(text),
            if cfg!(feature = "nacos") {
                ""
            } else {
                " (this build has no nacos feature)"
            }
        )),
    }
}
