//! [`NacosAdmin`]: writes and reads rules and providers in Dubbo's Nacos layout (what
//! `routechain nacos` uses, and what a test or an operator seeds Nacos with).

use nacos_sdk::api::config::ConfigService;
use nacos_sdk::api::naming::NamingService;
use routechain_core::Url;

use super::{
    NacosAddress, NacosError, RULE_GROUP, compatible, instance_url, provider_instance,
    rule_data_id, service_name,
};
use crate::RuleKey;
use crate::dubbo::ServiceKey;

/// Writes and reads rules (config center, group `dubbo`) and providers (naming, the
/// address's group) in the address's namespace. Needs a tokio runtime.
///
/// Providers are registered as Dubbo's `NacosRegistry` registers them: ephemeral instances
/// held by this admin's connection (the client registers them again after a reconnect,
/// and drops them when the admin is dropped).
pub struct NacosAdmin {
    address: NacosAddress,
    naming: NamingService,
    config: ConfigService,
}

impl std::fmt::Debug for NacosAdmin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NacosAdmin({})", self.address)
    }
}

fn op(op: &'static str, what: &str) -> impl FnOnce(nacos_sdk::api::error::Error) -> NacosError {
    let what = what.to_string();
    move |e| NacosError::Op {
        op,
        what,
        reason: e.to_string(),
    }
}

impl NacosAdmin {
    /// Connects to `address`: the form [`NacosAddress::parse`] takes (a bad address is
    /// refused at once).
    pub async fn connect(address: &str) -> Result<Self, NacosError> {
        Self::connect_to(&NacosAddress::parse(address)?).await
    }

    /// Connects to a parsed address.
    pub async fn connect_to(address: &NacosAddress) -> Result<Self, NacosError> {
        // Every server: the client fails over by itself, as an admin's writes need.
        let clients = super::connect(address, &address.server_addr()).await?;
        Ok(NacosAdmin {
            address: address.clone(),
            naming: clients.naming,
            config: clients.config,
        })
    }

    /// The address (password masked when shown).
    pub fn address(&self) -> &NacosAddress {
        &self.address
    }

    /// Creates or replaces the rule config of `key` (group `dubbo`) with `text`.
    pub async fn put_rule(&self, key: &RuleKey, text: &str) -> Result<(), NacosError> {
        let data_id = rule_data_id(key);
        let written = self
            .config
            .publish_config(data_id.clone(), RULE_GROUP.into(), text.into(), None)
            .await
            .map_err(op("publish config", &data_id))?;
        if !written {
            return Err(NacosError::Op {
                op: "publish config",
                what: data_id,
                reason: "the server refused it".into(),
            });
        }
        Ok(())
    }

    /// The rule config's text, `None` when there is none.
    pub async fn get_rule(&self, key: &RuleKey) -> Result<Option<String>, NacosError> {
        let data_id = rule_data_id(key);
        match self
            .config
            .get_config(data_id.clone(), RULE_GROUP.into())
            .await
        {
            Ok(r) if r.content().is_empty() => Ok(None),
            Ok(r) => Ok(Some(r.content().clone())),
            Err(nacos_sdk::api::error::Error::ConfigNotFound(_)) => Ok(None),
            Err(e) => Err(op("get config", &data_id)(e)),
        }
    }

    /// Removes the rule config; false when there was none.
    pub async fn delete_rule(&self, key: &RuleKey) -> Result<bool, NacosError> {
        if self.get_rule(key).await?.is_none() {
            return Ok(false);
        }
        let data_id = rule_data_id(key);
        self.config
            .remove_config(data_id.clone(), RULE_GROUP.into())
            .await
            .map_err(op("remove config", &data_id))
    }

    /// The dataIds of every config of group `dubbo` in the address's namespace (rules and
    /// any other config), sorted: read with Nacos's HTTP config API, as the client has no
    /// list call.
    pub async fn rule_data_ids(&self) -> Result<Vec<String>, NacosError> {
        super::configs::data_ids(&self.address, RULE_GROUP).await
    }

    /// The interfaces with a provider service (`providers:<interface>:…`) in the address's
    /// group, sorted.
    pub async fn services(&self) -> Result<Vec<String>, NacosError> {
        let names = super::service_list(&self.naming, self.address.group()).await?;
        let mut interfaces: Vec<String> = names
            .iter()
            .filter_map(|name| {
                let mut parts = name.split(':');
                (parts.next() == Some("providers"))
                    .then(|| parts.next())
                    .flatten()
                    .filter(|i| !i.is_empty())
                    .map(|i| i.replace("___", "$"))
            })
            .collect();
        interfaces.sort();
        interfaces.dedup();
        Ok(interfaces)
    }

    /// The service name Dubbo registers `url` under for `interface`:
    /// `providers:<interface>:<version>:<group>` from the URL's `version` and `group`.
    pub fn service_of(interface: &str, url: &Url) -> String {
        service_name(
            interface,
            url.param("version").unwrap_or(""),
            url.param("group").unwrap_or(""),
        )
    }

    fn parse(url: &str) -> Result<Url, NacosError> {
        Url::parse_provider(url).map_err(|e| NacosError::Op {
            op: "parse provider URL",
            what: url.to_string(),
            reason: format!("at column {}: {}", e.column, e.reason),
        })
    }

    /// Registers a provider of `interface` as Dubbo's providers do: an ephemeral instance
    /// of [`NacosAdmin::service_of`] in the address's group, held while this admin lives.
    pub async fn register(&self, interface: &str, url: &str) -> Result<(), NacosError> {
        let url = Self::parse(url)?;
        let name = Self::service_of(interface, &url);
        self.naming
            .register_instance(
                name.clone(),
                Some(self.address.group().into()),
                provider_instance(&url),
            )
            .await
            .map_err(op("register instance of", &name))
    }

    /// Removes a provider registered with `url`.
    pub async fn unregister(&self, interface: &str, url: &str) -> Result<(), NacosError> {
        let url = Self::parse(url)?;
        let name = Self::service_of(interface, &url);
        self.naming
            .deregister_instance(
                name.clone(),
                Some(self.address.group().into()),
                provider_instance(&url),
            )
            .await
            .map_err(op("deregister instance of", &name))
    }

    /// The provider URLs registered for `interface` (every version and group), as a
    /// consumer builds them from the instances, sorted.
    pub async fn providers(&self, interface: &str) -> Result<Vec<String>, NacosError> {
        let key = ServiceKey {
            interface: interface.to_string(),
            version: Some("*".into()),
            group: Some("*".into()),
        };
        let group = Some(self.address.group().to_string());
        let mut names = super::service_list(&self.naming, self.address.group()).await?;
        names.retain(|n| compatible(&key, n));
        let mut urls = Vec::new();
        for name in names {
            let instances = self
                .naming
                .get_all_instances(name.clone(), group.clone(), Vec::new(), false)
                .await
                .map_err(op("list instances of", &name))?;
            for i in &instances {
                match instance_url(i) {
                    Ok(u) => urls.push(u.raw().into_owned()),
                    Err(e) => urls.push(format!("# {}:{} {e}", i.ip, i.port)),
                }
            }
        }
        urls.sort();
        Ok(urls)
    }
}
