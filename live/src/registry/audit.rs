//! [`RuleStore`]: what an audit of a live registry reads (`routechain check --registry`):
//! the rules it holds, each one's text and location, and a service's providers. ZooKeeper
//! implements it with [`crate::ZkAdmin`], Nacos with `NacosAdmin` (its config group
//! `dubbo` listed over Nacos's HTTP config API, the rules located at
//! `nacos:<namespace>/dubbo/<dataId>` as its source reports them); [`RegistryStore`] is
//! either, for an address naming several registries. [`RuleWriter`] adds the writes of the
//! rule commands (`routechain zk|nacos put-rule/delete-rule`), so they are one
//! implementation over both admins.

use std::future::Future;

use crate::dubbo::{DUBBO_ROOT, decode_component, rule_path};
use crate::registry::{Registry, RegistryEntry};
use crate::{RuleKey, ZkAdmin, ZkError};

/// A rule a registry holds, read once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRule {
    /// Its key and kind.
    pub key: RuleKey,
    /// Where it is (a node path, a dataId): problems are located there.
    pub location: String,
    /// Its text.
    pub text: String,
}

/// The rule key a config-center name stands for: `<key>.<type>-router`, `<key>.MESHAPPRULE`
/// or `<key>.configurators` (Dubbo's names, in ZooKeeper's `/dubbo/config/dubbo` and as
/// Nacos dataIds); `None` for any other name (application configuration...).
pub fn rule_key_of(name: &str) -> Option<RuleKey> {
    if let Some(key) = name.strip_suffix(".MESHAPPRULE") {
        return Some(RuleKey::new(key, RuleKey::MESH));
    }
    if let Some(key) = name.strip_suffix(".configurators") {
        return Some(RuleKey::new(key, RuleKey::CONFIGURATORS));
    }
    let rest = name.strip_suffix("-router")?;
    let (key, ty) = rest.rsplit_once('.')?;
    (!key.is_empty() && !ty.is_empty()).then(|| RuleKey::new(key, ty))
}

/// The reads an audit of a registry makes.
pub trait RuleStore {
    /// Why a read failed.
    type Error: std::error::Error + Send;
    /// Every rule the registry holds (its config center's rule names, [`rule_key_of`]),
    /// sorted.
    fn rule_keys(&self) -> impl Future<Output = Result<Vec<RuleKey>, Self::Error>> + Send;
    /// A rule's text, `None` when it is gone.
    fn rule(
        &self,
        key: &RuleKey,
    ) -> impl Future<Output = Result<Option<String>, Self::Error>> + Send;
    /// Where a rule is, for its problems: a node path, a dataId.
    fn location(&self, key: &RuleKey) -> String;
    /// The services (interfaces) that have a providers directory, sorted.
    fn services(&self) -> impl Future<Output = Result<Vec<String>, Self::Error>> + Send;
    /// The provider URLs registered for `interface`, decoded, sorted.
    fn providers(
        &self,
        interface: &str,
    ) -> impl Future<Output = Result<Vec<String>, Self::Error>> + Send;

    /// Every rule with its text and location.
    fn rules(&self) -> impl Future<Output = Result<Vec<StoredRule>, Self::Error>> + Send
    where
        Self: Sync,
    {
        async move {
            let mut out = Vec::new();
            for key in self.rule_keys().await? {
                if let Some(text) = self.rule(&key).await? {
                    out.push(StoredRule {
                        location: self.location(&key),
                        key,
                        text,
                    });
                }
            }
            Ok(out)
        }
    }
}

/// The writes of the rule commands, over a registry's config center.
pub trait RuleWriter: RuleStore {
    /// Writes a rule's text (created, or replaced).
    fn put_rule(
        &self,
        key: &RuleKey,
        text: &str,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// Removes a rule; `false` when there was none.
    fn delete_rule(&self, key: &RuleKey) -> impl Future<Output = Result<bool, Self::Error>> + Send;
}

impl RuleWriter for ZkAdmin {
    async fn put_rule(&self, key: &RuleKey, text: &str) -> Result<(), ZkError> {
        ZkAdmin::put_rule(self, key, text).await
    }

    async fn delete_rule(&self, key: &RuleKey) -> Result<bool, ZkError> {
        ZkAdmin::delete_rule(self, key).await
    }
}

#[cfg(feature = "nacos")]
impl RuleWriter for crate::NacosAdmin {
    async fn put_rule(&self, key: &RuleKey, text: &str) -> Result<(), crate::NacosError> {
        crate::NacosAdmin::put_rule(self, key, text).await
    }

    async fn delete_rule(&self, key: &RuleKey) -> Result<bool, crate::NacosError> {
        crate::NacosAdmin::delete_rule(self, key).await
    }
}

impl RuleStore for ZkAdmin {
    type Error = ZkError;

    async fn rule_keys(&self) -> Result<Vec<RuleKey>, ZkError> {
        let dir = format!("{DUBBO_ROOT}/config/dubbo");
        let mut keys: Vec<RuleKey> = self
            .children(&dir)
            .await?
            .iter()
            .filter_map(|n| rule_key_of(n))
            .collect();
        keys.sort();
        Ok(keys)
    }

    async fn rule(&self, key: &RuleKey) -> Result<Option<String>, ZkError> {
        self.get_rule(key).await
    }

    fn location(&self, key: &RuleKey) -> String {
        rule_path(key)
    }

    async fn services(&self) -> Result<Vec<String>, ZkError> {
        let mut services = Vec::new();
        for child in self.children(DUBBO_ROOT).await? {
            if child == "config" {
                continue;
            }
            let interface = decode_component(&child).unwrap_or(child);
            if !self
                .children(&crate::providers_path(&interface))
                .await?
                .is_empty()
            {
                services.push(interface);
            }
        }
        services.sort();
        Ok(services)
    }

    async fn providers(&self, interface: &str) -> Result<Vec<String>, ZkError> {
        ZkAdmin::providers(self, interface).await
    }
}

#[cfg(feature = "nacos")]
impl RuleStore for crate::NacosAdmin {
    type Error = crate::NacosError;

    async fn rule_keys(&self) -> Result<Vec<RuleKey>, crate::NacosError> {
        // A dataId writes `$` as `___` (`crate::rule_data_id`).
        let mut keys: Vec<RuleKey> = self
            .rule_data_ids()
            .await?
            .iter()
            .filter_map(|id| rule_key_of(&id.replace("___", "$")))
            .collect();
        keys.sort();
        Ok(keys)
    }

    async fn rule(&self, key: &RuleKey) -> Result<Option<String>, crate::NacosError> {
        self.get_rule(key).await
    }

    fn location(&self, key: &RuleKey) -> String {
        self.address().location(&format!(
            "{}/{}",
            crate::RULE_GROUP,
            crate::rule_data_id(key)
        ))
    }

    async fn services(&self) -> Result<Vec<String>, crate::NacosError> {
        crate::NacosAdmin::services(self).await
    }

    async fn providers(&self, interface: &str) -> Result<Vec<String>, crate::NacosError> {
        crate::NacosAdmin::providers(self, interface).await
    }
}

/// Why a [`RegistryStore`] read failed: its registry's error.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A ZooKeeper read.
    #[error(transparent)]
    ZooKeeper(#[from] ZkError),
    /// A Nacos read.
    #[cfg(feature = "nacos")]
    #[error(transparent)]
    Nacos(#[from] crate::NacosError),
}

/// One registry of an address, connected for an audit: whichever kind it is.
#[derive(Debug)]
pub enum RegistryStore {
    /// A ZooKeeper registry.
    ZooKeeper(ZkAdmin),
    /// A Nacos registry.
    #[cfg(feature = "nacos")]
    Nacos(crate::NacosAdmin),
}

impl RegistryStore {
    /// Connects to the registry `entry` names.
    pub async fn connect(entry: &RegistryEntry) -> Result<Self, StoreError> {
        Ok(match &entry.registry {
            Registry::ZooKeeper(zk) => Self::ZooKeeper(ZkAdmin::connect_to(zk).await?),
            #[cfg(feature = "nacos")]
            Registry::Nacos(nacos) => Self::Nacos(crate::NacosAdmin::connect_to(nacos).await?),
        })
    }
}

impl RuleStore for RegistryStore {
    type Error = StoreError;

    async fn rule_keys(&self) -> Result<Vec<RuleKey>, StoreError> {
        Ok(match self {
            Self::ZooKeeper(s) => s.rule_keys().await?,
            #[cfg(feature = "nacos")]
            Self::Nacos(s) => s.rule_keys().await?,
        })
    }

    async fn rule(&self, key: &RuleKey) -> Result<Option<String>, StoreError> {
        Ok(match self {
            Self::ZooKeeper(s) => s.rule(key).await?,
            #[cfg(feature = "nacos")]
            Self::Nacos(s) => s.rule(key).await?,
        })
    }

    fn location(&self, key: &RuleKey) -> String {
        match self {
            Self::ZooKeeper(s) => s.location(key),
            #[cfg(feature = "nacos")]
            Self::Nacos(s) => s.location(key),
        }
    }

    async fn services(&self) -> Result<Vec<String>, StoreError> {
        Ok(match self {
            Self::ZooKeeper(s) => s.services().await?,
            #[cfg(feature = "nacos")]
            Self::Nacos(s) => s.services().await?,
        })
    }

    async fn providers(&self, interface: &str) -> Result<Vec<String>, StoreError> {
        Ok(match self {
            Self::ZooKeeper(s) => RuleStore::providers(s, interface).await?,
            #[cfg(feature = "nacos")]
            Self::Nacos(s) => RuleStore::providers(s, interface).await?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_center_names_give_their_rule_keys() {
        let table = [
            (
                "com.foo.Bar::.condition-router",
                Some(("com.foo.Bar::", "condition")),
            ),
            ("demo-app.tag-router", Some(("demo-app", "tag"))),
            (
                "a.b:1.0:g.idc-weight-router",
                Some(("a.b:1.0:g", "idc-weight")),
            ),
            ("demo-app.MESHAPPRULE", Some(("demo-app", "mesh"))),
            (
                "com.foo.Bar::.configurators",
                Some(("com.foo.Bar::", "configurators")),
            ),
            ("dubbo.properties", None),
            (".condition-router", None),
            ("router", None),
        ];
        for (name, want) in table {
            let got = rule_key_of(name);
            assert_eq!(got, want.map(|(k, t)| RuleKey::new(k, t)), "{name}");
            if let Some(k) = got {
                assert_eq!(k.to_string(), name);
            }
        }
    }
}
