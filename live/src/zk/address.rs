//! A ZooKeeper registry address as Dubbo writes it, with its digest credentials, and the
//! connection made from it.
//!
//! Accepted forms (Dubbo's `RegistryConfig.setAddress` and ZooKeeper's connection string):
//! - `host:port[,host:port...][/chroot]`, optionally `user:pass@` in front;
//! - `zookeeper://[user:pass@]host:port[,host:port...][/chroot][?backup=h:p,...&username=u&password=p&session=ms]`
//!   (a path `/org.apache.dubbo.registry.RegistryService`, Dubbo's registry service, is
//!   no chroot).
//!
//! A missing port is 2181. With a user and no password (`user@host:2181`), the password is
//! read from the environment variable [`PASSWORD_ENV`], else from the file named by
//! [`PASSWORD_FILE_ENV`] (its first line), so that it need not sit in a shell history.
//! `user:` (a colon, nothing after) is an empty password, as in Dubbo.
//!
//! Credentials are only ever shown masked (`user:***@host:2181`): [`ZkAddress`]'s
//! `Display` and [`mask`] for a text that does not parse.

use std::fmt;
use std::time::Duration;

use zookeeper_client::{Acl, Acls, Client, Permission};

use super::ZkError;

/// The environment variable holding the password of an address that names a user without
/// one.
pub const PASSWORD_ENV: &str = "ROUTECHAIN_ZK_PASSWORD";
/// The environment variable naming a file whose first line is that password.
pub const PASSWORD_FILE_ENV: &str = "ROUTECHAIN_ZK_PASSWORD_FILE";

/// Dubbo's registry service path, which a `zookeeper://` URL may carry: no chroot.
const REGISTRY_SERVICE: &str = "org.apache.dubbo.registry.RegistryService";

/// Creator-only with read for everyone: the ACL of nodes written world-readable on purpose.
static CREATOR_ALL_WORLD_READ: [Acl; 2] = [
    Acl::new_const(Permission::ALL, "auth", ""),
    Acl::new_const(Permission::READ, "world", "anyone"),
];

/// The ACL of created nodes: see [`ZkAddress::acls`].
pub(super) fn acls(authenticated: bool, world_readable: bool) -> Acls<'static> {
    match (authenticated, world_readable) {
        (false, _) => Acls::anyone_all(),
        (true, false) => Acls::creator_all(),
        (true, true) => Acls::new(&CREATOR_ALL_WORLD_READ),
    }
}

/// A parsed ZooKeeper address: servers, chroot, digest credentials, session timeout.
#[derive(Clone, PartialEq, Eq)]
pub struct ZkAddress {
    hosts: Vec<String>,
    chroot: String,
    credentials: Option<(String, String)>,
    session: Option<Duration>,
}

impl fmt::Debug for ZkAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ZkAddress({self})")
    }
}

/// Shows the address with the password masked: `user:***@h1:2181,h2:2181/chroot`.
impl fmt::Display for ZkAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((user, _)) = &self.credentials {
            write!(f, "{user}:***@")?;
        }
        write!(f, "{}", self.connect_string())
    }
}

fn invalid(text: &str, reason: impl Into<String>) -> ZkError {
    ZkError::Address {
        address: mask(text),
        reason: reason.into(),
    }
}

/// `text` with any password replaced by `***` (see [`crate::address::mask`]).
pub(crate) fn mask(text: &str) -> String {
    crate::address::mask(text)
}

/// Checks one `host[:port]`, 2181 when it has no port.
fn host_port(text: &str, hp: &str) -> Result<String, ZkError> {
    crate::address::host_port(hp, 2181).map_err(|reason| invalid(text, reason))
}

impl ZkAddress {
    /// Parses an address in one of the forms of the module documentation; a password left
    /// out is read as said there. Refused at once, with the reason, when it cannot be used.
    pub fn parse(text: &str) -> Result<Self, ZkError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(invalid(text, "the address is empty"));
        }
        let (scheme, rest) = match trimmed.split_once("://") {
            Some((s, r)) => (Some(s), r),
            None => (None, trimmed),
        };
        if let Some(s) = scheme
            && !s.eq_ignore_ascii_case("zookeeper")
        {
            return Err(invalid(
                text,
                format!("`{s}://` is not a ZooKeeper address (write `zookeeper://` or host:port)"),
            ));
        }
        let (head, query) = match rest.split_once('?') {
            Some((h, q)) => (h, q),
            None => (rest, ""),
        };
        let (authority, path) = match head.find('/') {
            Some(i) => (&head[..i], &head[i..]),
            None => (head, ""),
        };
        let (userinfo, servers) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        let mut hosts = Vec::new();
        for hp in servers.split(',') {
            hosts.push(host_port(text, hp)?);
        }
        let mut username = None;
        let mut password = None;
        let mut session = None;
        for param in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = param.split_once('=').unwrap_or((param, ""));
            match k {
                "backup" => {
                    for hp in v.split(',') {
                        hosts.push(host_port(text, hp)?);
                    }
                }
                "username" => {
                    username = Some(crate::address::decode(v).map_err(|r| invalid(text, r))?)
                }
                "password" => {
                    password = Some(crate::address::decode(v).map_err(|r| invalid(text, r))?)
                }
                "session" => match v.parse::<u64>() {
                    Ok(ms) if ms > 0 => session = Some(Duration::from_millis(ms)),
                    _ => {
                        return Err(invalid(
                            text,
                            format!("session={v}: the session timeout is in milliseconds, above 0"),
                        ));
                    }
                },
                // Dubbo's other registry parameters do not change how ZooKeeper is reached.
                _ => {}
            }
        }
        if let Some(info) = userinfo {
            let (u, p) = crate::address::userinfo(info).map_err(|r| invalid(text, r))?;
            username = Some(u);
            password = p.or(password);
        }
        let credentials =
            crate::address::credentials(username, password, PASSWORD_ENV, PASSWORD_FILE_ENV)
                .map_err(|reason| invalid(text, reason))?;
        let chroot = match path {
            "" | "/" => String::new(),
            p if scheme.is_some() && p.trim_start_matches('/') == REGISTRY_SERVICE => String::new(),
            p if p.ends_with('/') || p.contains("//") => {
                return Err(invalid(
                    text,
                    format!("the chroot `{p}` has an empty part or ends with `/`"),
                ));
            }
            p => p.to_string(),
        };
        Ok(ZkAddress {
            hosts,
            chroot,
            credentials,
            session,
        })
    }

    /// The connection string the client takes: `host:port[,host:port...][/chroot]`
    /// (no credentials).
    pub fn connect_string(&self) -> String {
        format!("{}{}", self.hosts.join(","), self.chroot)
    }

    /// The digest user, if the address has credentials.
    pub fn user(&self) -> Option<&str> {
        self.credentials.as_ref().map(|(u, _)| u.as_str())
    }

    /// The session timeout the address asks for (`session=` in milliseconds).
    pub fn session_timeout(&self) -> Option<Duration> {
        self.session
    }

    /// The ACL of the nodes this address's sessions create: without credentials, open to
    /// all (ZooKeeper's `OPEN_ACL_UNSAFE`, as Dubbo writes); with them, the creator only
    /// (`CREATOR_ALL_ACL`, as Dubbo writes), plus read for everyone when `world_readable`.
    pub fn acls(&self, world_readable: bool) -> Acls<'static> {
        acls(self.credentials.is_some(), world_readable)
    }

    /// Connects (a writer: `ZkAdmin`, registrations): one session with the digest
    /// credentials, if any, on the client's own choice of server; a server that stops
    /// answering is left after the client's default 2/5 of the session timeout, which a
    /// loaded server is less likely to exceed. The source opens its connections itself
    /// (`failover.rs`).
    pub(crate) async fn connect(&self, session_timeout: Duration) -> Result<Client, ZkError> {
        let session_timeout = self.session.unwrap_or(session_timeout);
        let connector = self.connector(session_timeout, false).with_fail_eagerly();
        let servers = self.connect_string();
        let attempt = connector.connect(&servers);
        let failed = |reason: String| ZkError::Connect {
            servers: self.to_string(),
            reason,
        };
        match tokio::time::timeout(session_timeout + Duration::from_secs(1), attempt).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(failed(e.to_string())),
            Err(_) => Err(failed("timed out".into())),
        }
    }
}

impl ZkAddress {
    /// The servers, `host:port` each.
    pub(crate) fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// The chroot (`/path`, or empty).
    pub(crate) fn chroot(&self) -> &str {
        &self.chroot
    }

    /// A connector with the address's session timeout (`session=`, else
    /// `session_timeout`) and credentials; with `fast_failover` (the source, which must see
    /// changes soon) a server that stops answering is left within [`ping_window`].
    pub(crate) fn connector(
        &self,
        session_timeout: Duration,
        fast_failover: bool,
    ) -> zookeeper_client::Connector {
        let session_timeout = self.session.unwrap_or(session_timeout);
        let mut connector = Client::connector().with_session_timeout(session_timeout);
        if fast_failover {
            connector = connector.with_connection_timeout(ping_window(session_timeout));
        }
        if let Some((user, password)) = &self.credentials {
            connector = connector.with_auth("digest", format!("{user}:{password}").as_bytes());
        }
        connector
    }
}

/// How long a connection may stay silent before the source leaves its server: 1.6 s, or
/// 2/5 of a shorter session timeout (ZooKeeper's own default share). The client pings
/// after 3/8 of it and checks for silence every 1/8, so a server that answers keeps the
/// connection, and one that froze (SIGSTOP, a long pause) is noticed between 5/8 and 9/8 of
/// it after it froze: at most 1.8 s, within the 2 s the source may take to leave a frozen
/// server (`cargo test -p routechain-tests --test zk_failover -- --nocapture` prints it).
fn ping_window(session_timeout: Duration) -> Duration {
    Duration::from_millis(1600).min(session_timeout * 2 / 5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_parse_to_servers_chroot_and_credentials() {
        // (address, connection string, user, password)
        let table: &[(&str, &str, Option<&str>, Option<&str>)] = &[
            ("127.0.0.1:2181", "127.0.0.1:2181", None, None),
            ("a:1,b:2/chroot/x", "a:1,b:2/chroot/x", None, None),
            ("a", "a:2181", None, None),
            ("u:p@a:1,b:2", "a:1,b:2", Some("u"), Some("p")),
            ("u:@a:1", "a:1", Some("u"), Some("")),
            ("u:p@ss@a:1", "a:1", Some("u"), Some("p@ss")),
            ("zookeeper://a:1", "a:1", None, None),
            ("zookeeper://u:p%40x@a:1/g", "a:1/g", Some("u"), Some("p@x")),
            (
                "zookeeper://a:1/org.apache.dubbo.registry.RegistryService?backup=b:2,c:3",
                "a:1,b:2,c:3",
                None,
                None,
            ),
            (
                "zookeeper://a:1?username=u&password=p&group=x",
                "a:1",
                Some("u"),
                Some("p"),
            ),
            ("[::1]:2181", "[::1]:2181", None, None),
        ];
        for (text, servers, user, password) in table {
            let a = ZkAddress::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(a.connect_string(), *servers, "{text}");
            assert_eq!(a.user(), *user, "{text}");
            assert_eq!(
                a.credentials.as_ref().map(|(_, p)| p.as_str()),
                *password,
                "{text}"
            );
        }
    }

    #[test]
    fn bad_addresses_are_refused_with_the_reason_and_no_password() {
        // (address, part of the reason)
        let table = [
            ("", "empty"),
            ("nacos://a:8848", "not a ZooKeeper address"),
            ("u:secret@", "empty"),
            ("u:secret@a:port", "port must be a number"),
            ("a:0", "port must be a number"),
            ("a:1,,b:2", "empty"),
            (":p@a:1", "user name is empty"),
            ("zookeeper://a:1?password=secret", "without a user"),
            ("a:1/x/", "chroot"),
            ("zookeeper://a:1?session=x", "milliseconds"),
        ];
        for (text, reason) in table {
            let e = ZkAddress::parse(text).expect_err(text).to_string();
            assert!(e.contains(reason), "{text}: {e}");
            assert!(!e.contains("secret"), "{text}: {e}");
        }
    }

    #[test]
    fn display_and_mask_hide_the_password() {
        let a = ZkAddress::parse("zookeeper://admin:s3cret@a:1,b:2/c?backup=d:4").unwrap();
        assert_eq!(a.to_string(), "admin:***@a:1,b:2,d:4/c");
        assert_eq!(format!("{a:?}"), "ZkAddress(admin:***@a:1,b:2,d:4/c)");
        assert_eq!(mask("admin:s3cret@a:1"), "admin:***@a:1");
        assert_eq!(
            mask("zookeeper://u@a:1?username=u&password=s3cret&x=1"),
            "zookeeper://u@a:1?username=u&password=***&x=1"
        );
        assert_eq!(mask("a:1/x@y"), "a:1/x@y");
        let config = format!(
            "{:?}",
            crate::ZkSource::new(crate::ZkConfig {
                servers: "admin:s3cret@a:1".into(),
                following: crate::Following {
                    rule_keys: Vec::new(),
                    provider_app_kinds: Vec::new(),
                    each_app_kinds: Vec::new(),
                    service: None,
                    retry_delay: Duration::from_secs(1),
                    connection: Default::default(),
                },
                session_timeout: Duration::from_secs(1),
            })
        );
        assert!(
            config.contains("admin:***@a:1") && !config.contains("s3cret"),
            "{config}"
        );
    }

    #[test]
    fn the_ping_window_leaves_a_silent_server_within_two_seconds() {
        // Noticed at most 9/8 of the window after the server froze.
        assert_eq!(
            ping_window(Duration::from_secs(60)),
            Duration::from_millis(1600)
        );
        assert!(ping_window(Duration::from_secs(60)) * 9 / 8 <= Duration::from_secs(2));
        assert_eq!(
            ping_window(Duration::from_secs(2)),
            Duration::from_millis(800)
        );
    }
}
