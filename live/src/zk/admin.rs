//! [`ZkAdmin`]: writes and reads rules and providers in Dubbo's layout (seeding ZooKeeper
//! for tests, operators and `routechain zk`).

use std::time::Duration;

use zookeeper_client::{Acls, Client, CreateMode, Error as ZkClientError};

use super::{ZkAddress, ZkError, op_error};
use crate::RuleKey;
use crate::dubbo::{
    decode_component, encode_component, parse_provider_node, providers_path, rule_path,
};

/// Writes and reads rules and providers in Dubbo's layout (what `routechain zk` uses, and
/// what a test or an operator seeds ZooKeeper with). Needs a tokio runtime.
///
/// The nodes it creates, parents included, get the address's ACL ([`ZkAddress::acls`]):
/// open to all without credentials, the creator only with them (Dubbo's
/// `CREATOR_ALL_ACL`), readable by all too with [`ZkAdmin::world_readable`].
#[derive(Debug, Clone)]
pub struct ZkAdmin {
    client: Client,
    authenticated: bool,
    acls: Acls<'static>,
}

impl ZkAdmin {
    /// Connects to `servers`: any form [`ZkAddress::parse`] takes (a bad address is
    /// refused at once), with its digest credentials if it has some.
    pub async fn connect(servers: &str) -> Result<Self, ZkError> {
        Self::connect_to(&ZkAddress::parse(servers)?).await
    }

    /// Connects to a parsed address.
    pub async fn connect_to(address: &ZkAddress) -> Result<Self, ZkError> {
        Ok(ZkAdmin {
            client: address.connect(Duration::from_secs(10)).await?,
            authenticated: address.user().is_some(),
            acls: address.acls(false),
        })
    }

    /// Writes the nodes it creates readable by everyone (still written by the creator
    /// only) when `on`; the default with credentials is the creator only. Without
    /// credentials nodes are open to all either way.
    pub fn world_readable(mut self, on: bool) -> Self {
        self.acls = super::address::acls(self.authenticated, on);
        self
    }

    /// The client (for [`super::ZkRegistration`] and tests).
    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    async fn put(&self, path: &str, data: &[u8]) -> Result<(), ZkError> {
        let options = CreateMode::Persistent.with_acls(self.acls);
        if let Some((parent, _)) = path.rsplit_once('/')
            && !parent.is_empty()
        {
            self.client
                .mkdir(parent, &options)
                .await
                .map_err(op_error("mkdir", parent))?;
        }
        match self.client.create(path, data, &options).await {
            Ok(_) => Ok(()),
            Err(ZkClientError::NodeExists) => self
                .client
                .set_data(path, data, None)
                .await
                .map(|_| ())
                .map_err(op_error("set", path)),
            Err(e) => Err(op_error("create", path)(e)),
        }
    }

    async fn remove(&self, path: &str) -> Result<bool, ZkError> {
        match self.client.delete(path, None).await {
            Ok(()) => Ok(true),
            Err(ZkClientError::NoNode) => Ok(false),
            Err(e) => Err(op_error("delete", path)(e)),
        }
    }

    /// Creates or replaces the rule node of `key` with `text`.
    pub async fn put_rule(&self, key: &RuleKey, text: &str) -> Result<(), ZkError> {
        self.put(&rule_path(key), text.as_bytes()).await
    }

    /// The rule node's text, `None` when there is no such node.
    pub async fn get_rule(&self, key: &RuleKey) -> Result<Option<String>, ZkError> {
        let path = rule_path(key);
        match self.client.get_data(&path).await {
            Ok((data, _)) => Ok(Some(String::from_utf8_lossy(&data).into_owned())),
            Err(ZkClientError::NoNode) => Ok(None),
            Err(e) => Err(op_error("get", &path)(e)),
        }
    }

    /// Deletes the rule node; false when there was none.
    pub async fn delete_rule(&self, key: &RuleKey) -> Result<bool, ZkError> {
        self.remove(&rule_path(key)).await
    }

    /// Registers a provider of `interface` as Dubbo's providers do: creates the ephemeral
    /// child `/dubbo/<interface>/providers/<URL-encoded url>`, which lives as long as this
    /// admin's session (drop the admin, or [`ZkAdmin::close`], and it is gone).
    pub async fn register(&self, interface: &str, url: &str) -> Result<(), ZkError> {
        let path = format!("{}/{}", providers_path(interface), encode_component(url));
        let persistent = CreateMode::Persistent.with_acls(self.acls);
        self.client
            .mkdir(&providers_path(interface), &persistent)
            .await
            .map_err(op_error("mkdir", &path))?;
        let ephemeral = CreateMode::Ephemeral.with_acls(self.acls);
        match self.client.create(&path, b"", &ephemeral).await {
            Ok(_) => Ok(()),
            Err(ZkClientError::NodeExists) => {
                // Another session's node (a restarted provider): take it over.
                self.remove(&path).await?;
                self.client
                    .create(&path, b"", &ephemeral)
                    .await
                    .map(|_| ())
                    .map_err(op_error("create", &path))
            }
            Err(e) => Err(op_error("create", &path)(e)),
        }
    }

    /// Registers a provider with a persistent node, which stays until
    /// [`ZkAdmin::unregister`] (like Dubbo's `dynamic=false` registrations).
    pub async fn register_persistent(&self, interface: &str, url: &str) -> Result<(), ZkError> {
        let path = format!("{}/{}", providers_path(interface), encode_component(url));
        self.put(&path, b"").await
    }

    /// Closes the session now (its ephemeral nodes are removed by the server at once).
    pub async fn close(self) {
        // The session closes when the last client handle is dropped; wait (briefly) for
        // the close to reach the server so that the ephemeral nodes are gone on return.
        let mut states = self.client.state_watcher();
        drop(self);
        let _ = tokio::time::timeout(Duration::from_secs(3), async {
            while !states.changed().await.is_terminated() {}
        })
        .await;
    }

    /// Removes a provider registered with `url`; false when there was none.
    pub async fn unregister(&self, interface: &str, url: &str) -> Result<bool, ZkError> {
        let path = format!("{}/{}", providers_path(interface), encode_component(url));
        self.remove(&path).await
    }

    /// The children of `path` (none when there is no such node).
    pub async fn children(&self, path: &str) -> Result<Vec<String>, ZkError> {
        match self.client.list_children(path).await {
            Ok(children) => Ok(children),
            Err(ZkClientError::NoNode) => Ok(Vec::new()),
            Err(e) => Err(op_error("list", path)(e)),
        }
    }

    /// The decoded provider URLs registered under `interface`, sorted.
    pub async fn providers(&self, interface: &str) -> Result<Vec<String>, ZkError> {
        let path = providers_path(interface);
        match self.client.list_children(&path).await {
            Ok(children) => {
                let mut urls: Vec<String> = children
                    .iter()
                    .map(|c| match parse_provider_node(c) {
                        Ok(u) => u.raw().to_string(),
                        Err(_) => decode_component(c).unwrap_or_else(|_| c.clone()),
                    })
                    .collect();
                urls.sort();
                Ok(urls)
            }
            Err(ZkClientError::NoNode) => Ok(Vec::new()),
            Err(e) => Err(op_error("list", &path)(e)),
        }
    }
}
