//! A Nacos registry address as Dubbo writes it, with its credentials.
//!
//! Accepted form (Dubbo's `RegistryConfig.setAddress`, §1 and §3 of the registries
//! reference): `nacos://[user:pass@]host[:port][,host:port...][/path][?backup=h:p,...&namespace=dev&group=G&username=u&password=p]`;
//! without a scheme, `host:port[,host:port...]`. A missing port is 8848, Nacos's own.
//! The Nacos group of providers is `group` (else `DEFAULT_GROUP`), the namespace
//! `namespace` (else Nacos's public one); rules are read from the config center's group
//! `dubbo` in that namespace, as Dubbo reads them.
//!
//! `dubbo-exact=true` takes instances exactly as Dubbo does: an unhealthy instance is kept
//! and Nacos's `weight` is ignored (by default routechain leaves unhealthy instances out
//! and takes the Nacos weight, ×100, as the provider's `weight` when the URL sets none).
//!
//! With a user and no password, the password is read from [`PASSWORD_ENV`], else from the
//! file named by [`PASSWORD_FILE_ENV`] (its first line). Credentials are only ever shown
//! masked (`user:***@host:8848`).

use std::fmt;

use super::NacosError;

/// The environment variable holding the password of a Nacos address that names a user
/// without one.
pub const PASSWORD_ENV: &str = "ROUTECHAIN_NACOS_PASSWORD";
/// The environment variable naming a file whose first line is that password.
pub const PASSWORD_FILE_ENV: &str = "ROUTECHAIN_NACOS_PASSWORD_FILE";

/// Nacos's default group, where Dubbo registers when the address names none.
pub const DEFAULT_GROUP: &str = "DEFAULT_GROUP";

/// A parsed Nacos address: servers, namespace, group, credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct NacosAddress {
    hosts: Vec<String>,
    namespace: String,
    group: String,
    credentials: Option<(String, String)>,
    dubbo_exact: bool,
}

impl fmt::Debug for NacosAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NacosAddress({self})")
    }
}

/// Shows the address with the password masked:
/// `nacos://user:***@h1:8848,h2:8848?namespace=dev&group=G`.
impl fmt::Display for NacosAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("nacos://")?;
        if let Some((user, _)) = &self.credentials {
            write!(f, "{user}:***@")?;
        }
        f.write_str(&self.hosts.join(","))?;
        let mut sep = '?';
        if !self.namespace.is_empty() {
            write!(f, "{sep}namespace={}", self.namespace)?;
            sep = '&';
        }
        if self.group != DEFAULT_GROUP {
            write!(f, "{sep}group={}", self.group)?;
            sep = '&';
        }
        if self.dubbo_exact {
            write!(f, "{sep}dubbo-exact=true")?;
        }
        Ok(())
    }
}

fn invalid(text: &str, reason: impl Into<String>) -> NacosError {
    NacosError::Address {
        address: crate::address::mask(text),
        reason: reason.into(),
    }
}

impl NacosAddress {
    /// Parses an address in the form of the module documentation; a password left out is
    /// read as said there. Refused at once, with the reason, when it cannot be used.
    pub fn parse(text: &str) -> Result<Self, NacosError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(invalid(text, "the address is empty"));
        }
        let rest = match trimmed.split_once("://") {
            Some((s, r)) if s.eq_ignore_ascii_case("nacos") => r,
            Some((s, _)) => {
                return Err(invalid(
                    text,
                    format!("`{s}://` is not a Nacos address (write `nacos://host:port`)"),
                ));
            }
            None => trimmed,
        };
        let (head, query) = rest.split_once('?').unwrap_or((rest, ""));
        // A path (Dubbo's `/org.apache.dubbo.registry.RegistryService`) names no part of
        // the Nacos connection.
        let authority = head.split_once('/').map_or(head, |(a, _)| a);
        let (info, servers) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        let bad = |reason: String| invalid(text, reason);
        let mut hosts = Vec::new();
        for hp in servers.split(',') {
            hosts.push(crate::address::host_port(hp, 8848).map_err(bad)?);
        }
        let mut username = None;
        let mut password = None;
        let mut namespace = String::new();
        let mut group = DEFAULT_GROUP.to_string();
        let mut dubbo_exact = false;
        for param in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = param.split_once('=').unwrap_or((param, ""));
            let value = || crate::address::decode(v).map_err(bad);
            match k {
                "backup" => {
                    for hp in v.split(',') {
                        hosts.push(crate::address::host_port(hp, 8848).map_err(bad)?);
                    }
                }
                "username" => username = Some(value()?),
                "password" => password = Some(value()?),
                "namespace" => namespace = value()?,
                "group" if !v.is_empty() => group = value()?,
                "dubbo-exact" => match v {
                    "true" => dubbo_exact = true,
                    "false" => dubbo_exact = false,
                    _ => return Err(bad(format!("dubbo-exact={v}: write true or false"))),
                },
                // Dubbo's other registry parameters do not change how Nacos is reached.
                _ => {}
            }
        }
        if let Some(info) = info {
            let (u, p) = crate::address::userinfo(info).map_err(bad)?;
            username = Some(u);
            password = p.or(password);
        }
        let credentials =
            crate::address::credentials(username, password, PASSWORD_ENV, PASSWORD_FILE_ENV)
                .map_err(bad)?;
        // Nacos's public namespace has the empty id, and `public` names it too.
        if namespace == "public" {
            namespace.clear();
        }
        Ok(NacosAddress {
            hosts,
            namespace,
            group,
            credentials,
            dubbo_exact,
        })
    }

    /// The servers as the client takes them: `host:port[,host:port...]`.
    pub fn server_addr(&self) -> String {
        self.hosts.join(",")
    }

    /// The namespace id (empty: the public namespace).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The Nacos group of the providers (`DEFAULT_GROUP` unless the address names one).
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The user, if the address has credentials.
    pub fn user(&self) -> Option<&str> {
        self.credentials.as_ref().map(|(u, _)| u.as_str())
    }

    /// Whether instances are taken exactly as Dubbo takes them (`dubbo-exact=true`):
    /// unhealthy ones kept, the Nacos weight ignored.
    pub fn dubbo_exact(&self) -> bool {
        self.dubbo_exact
    }

    /// The client's properties: servers, namespace, credentials; no environment variable
    /// of the client read, no cache loaded from disk.
    pub(crate) fn client_props(&self) -> nacos_sdk::api::props::ClientProps {
        let mut props = nacos_sdk::api::props::ClientProps::new()
            .server_addr(self.server_addr())
            .namespace(self.namespace.clone())
            .app_name("routechain")
            .env_first(false)
            .load_cache_at_start(false)
            // Empty lists are routechain's to hold back (`LiveOptions::protect_empty`).
            .naming_push_empty_protection(false)
            .cache_dir(std::env::temp_dir().join("routechain-nacos"));
        if let Some((user, password)) = &self.credentials {
            props = props
                .auth_username(user.clone())
                .auth_password(password.clone());
        }
        props
    }

    pub(crate) fn has_credentials(&self) -> bool {
        self.credentials.is_some()
    }

    /// Where `what` (`dubbo/<dataId>`, a service's instance) is, as problems and updates
    /// name it: `nacos:<namespace>/<what>`, the public namespace named `public`.
    pub fn location(&self, what: &str) -> String {
        let ns = match self.namespace.as_str() {
            "" => "public",
            ns => ns,
        };
        format!("nacos:{ns}/{what}")
    }

    /// The servers, `host:port` each: the HTTP port (the client's gRPC port is 1000 above).
    pub(crate) fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// The user and password, if the address has credentials.
    pub(crate) fn credentials(&self) -> Option<(&str, &str)> {
        self.credentials
            .as_ref()
            .map(|(u, p)| (u.as_str(), p.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_parse_to_servers_namespace_group_and_credentials() {
        // (address, servers, namespace, group, user, password)
        type Row<'a> = (
            &'a str,
            &'a str,
            &'a str,
            &'a str,
            Option<&'a str>,
            Option<&'a str>,
        );
        let table: &[Row<'_>] = &[
            ("nacos://h:8848", "h:8848", "", DEFAULT_GROUP, None, None),
            ("h", "h:8848", "", DEFAULT_GROUP, None, None),
            ("a:1,b:2", "a:1,b:2", "", DEFAULT_GROUP, None, None),
            (
                "nacos://h:8848?namespace=dev&group=G&username=u&password=p",
                "h:8848",
                "dev",
                "G",
                Some("u"),
                Some("p"),
            ),
            (
                "nacos://u:p%40x@a:1/org.apache.dubbo.registry.RegistryService?backup=b:2,c",
                "a:1,b:2,c:8848",
                "",
                DEFAULT_GROUP,
                Some("u"),
                Some("p@x"),
            ),
            (
                "nacos://a?namespace=public",
                "a:8848",
                "",
                DEFAULT_GROUP,
                None,
                None,
            ),
        ];
        for (text, servers, namespace, group, user, password) in table {
            let a = NacosAddress::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(a.server_addr(), *servers, "{text}");
            assert_eq!(a.namespace(), *namespace, "{text}");
            assert_eq!(a.group(), *group, "{text}");
            assert_eq!(a.user(), *user, "{text}");
            assert_eq!(
                a.credentials.as_ref().map(|(_, p)| p.as_str()),
                *password,
                "{text}"
            );
        }
        assert!(
            NacosAddress::parse("nacos://a?dubbo-exact=true")
                .unwrap()
                .dubbo_exact()
        );
    }

    #[test]
    fn bad_addresses_are_refused_with_the_reason_and_no_password() {
        let table = [
            ("", "empty"),
            ("zookeeper://a:2181", "not a Nacos address"),
            ("nacos://u:secret@", "empty"),
            ("nacos://u:secret@a:port", "port must be a number"),
            ("nacos://a:1?password=secret", "without a user"),
            ("nacos://:secret@a", "user name is empty"),
            ("nacos://a?dubbo-exact=yes&password=secret", "dubbo-exact"),
        ];
        for (text, reason) in table {
            let e = NacosAddress::parse(text).expect_err(text).to_string();
            assert!(e.contains(reason), "{text}: {e}");
            assert!(!e.contains("secret"), "{text}: {e}");
        }
    }

    #[test]
    fn display_and_debug_hide_the_password() {
        let a = NacosAddress::parse("nacos://admin:s3cret@a:1?backup=b:2&namespace=dev&group=G")
            .unwrap();
        assert_eq!(
            a.to_string(),
            "nacos://admin:***@a:1,b:2?namespace=dev&group=G"
        );
        assert_eq!(
            format!("{a:?}"),
            "NacosAddress(nacos://admin:***@a:1,b:2?namespace=dev&group=G)"
        );
    }

    #[test]
    fn a_user_without_a_password_names_where_to_put_it() {
        // The variables are set only by the CLI tests, on the binary they run.
        let e = NacosAddress::parse("nacos://ops@a")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(PASSWORD_ENV) && e.contains(PASSWORD_FILE_ENV),
            "{e}"
        );
    }
}
