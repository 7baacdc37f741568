//! [`RegistryAddress`]: the whole `--registry` value as Dubbo users write it, one or several
//! registries, each with the registry parameters Dubbo reads.
//!
//! Dubbo's rules (`ConfigValidationUtils.loadRegistries`, `UrlUtils.parseURLs`):
//! - registries are separated by `|` or `;` (blanks around them ignored);
//! - an entry without `://` whose hosts are a comma list (`h1:p,h2:p`) is one registry with
//!   backups (`h1:p?backup=h2:p`), as is `?backup=h2:p,h3:p`;
//! - the scheme picks the registry: `zookeeper://` (also the default without a scheme) or
//!   `nacos://`;
//! - the parameters: `preferred`, `zone` and `weight` (the zone-aware choice among several
//!   registries), `use-as-config-center` (which registry the rules come from), `subscribe`
//!   (`false`: no provider followed there), `group`,
//!   `namespace`, and the credentials `user:pass@` or `username`/`password`, which are
//!   only ever shown masked.

use std::fmt;

use routechain_balance::service::MAX_REGISTRIES;

use crate::zk::ZkAddress;

/// Why a registry address cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RegistryAddressError {
    /// The address as a whole, or one of its registries, is malformed.
    #[error("bad registry address `{address}`: {reason}")]
    Invalid {
        /// The address (or the registry's entry), its password masked.
        address: String,
        /// Why.
        reason: String,
    },
    /// A ZooKeeper entry is malformed.
    #[error(transparent)]
    ZooKeeper(#[from] crate::ZkError),
}

/// The registry Dubbo's zone-aware choice gives when no registry sets `weight`.
pub const DEFAULT_WEIGHT: u32 = 100;

/// The registry parameters Dubbo reads besides how to reach the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryParams {
    /// `preferred=true`: this registry's providers are used while it has any.
    pub preferred: bool,
    /// `zone`: the registry's zone, chosen when it is the consumer's.
    pub zone: Option<String>,
    /// `weight` (default 100): the registry's share among several.
    pub weight: u32,
    /// Whether `weight` was written (Dubbo weights the registries only then).
    pub weighted: bool,
    /// `use-as-config-center`: `Some(true)` names the registry the rules come from,
    /// `Some(false)` excludes it.
    pub config_center: Option<bool>,
    /// `subscribe` (default true): `false` follows no provider of this registry, as a
    /// Dubbo consumer subscribes to none there.
    pub subscribe: bool,
    /// `group`: ZooKeeper's root (`/<group>`, only `dubbo` is read), Nacos's group.
    pub group: Option<String>,
    /// `namespace` (Nacos).
    pub namespace: Option<String>,
}

impl Default for RegistryParams {
    fn default() -> Self {
        RegistryParams {
            preferred: false,
            zone: None,
            weight: DEFAULT_WEIGHT,
            weighted: false,
            config_center: None,
            subscribe: true,
            group: None,
            namespace: None,
        }
    }
}

/// One registry of a [`RegistryAddress`].
#[derive(Clone, PartialEq, Eq)]
pub enum Registry {
    /// A ZooKeeper registry.
    ZooKeeper(ZkAddress),
    /// A Nacos registry.
    #[cfg(feature = "nacos")]
    Nacos(crate::NacosAddress),
}

/// One registry of an address: where it is, and its parameters.
#[derive(Clone, PartialEq, Eq)]
pub struct RegistryEntry {
    /// How to reach it.
    pub registry: Registry,
    /// Its parameters.
    pub params: RegistryParams,
    /// The entry as written (with its password: never shown, see [`fmt::Display`]).
    text: String,
}

impl RegistryEntry {
    /// The entry as written, password included, for a source that connects with it.
    /// Never print it: its `Display` is the masked form.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The ZooKeeper address, when this registry is one.
    pub fn zookeeper(&self) -> Option<&ZkAddress> {
        match &self.registry {
            Registry::ZooKeeper(a) => Some(a),
            #[cfg(feature = "nacos")]
            Registry::Nacos(_) => None,
        }
    }

    /// The Nacos address, when this registry is one.
    #[cfg(feature = "nacos")]
    pub fn nacos(&self) -> Option<&crate::NacosAddress> {
        match &self.registry {
            Registry::Nacos(a) => Some(a),
            Registry::ZooKeeper(_) => None,
        }
    }

    /// `zookeeper` or `nacos`.
    pub fn kind(&self) -> &'static str {
        match &self.registry {
            Registry::ZooKeeper(_) => "zookeeper",
            #[cfg(feature = "nacos")]
            Registry::Nacos(_) => "nacos",
        }
    }
}

/// `zookeeper://user:***@h1:2181,h2:2181/chroot`, with its zone-aware parameters.
impl fmt::Display for RegistryEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.registry {
            Registry::ZooKeeper(a) => write!(f, "zookeeper://{a}")?,
            #[cfg(feature = "nacos")]
            Registry::Nacos(_) => write!(f, "{}", mask(&self.text))?,
        }
        let p = &self.params;
        let mut params = Vec::new();
        if p.preferred {
            params.push("preferred=true".to_string());
        }
        if let Some(z) = &p.zone {
            params.push(format!("zone={z}"));
        }
        if p.weighted {
            params.push(format!("weight={}", p.weight));
        }
        if !params.is_empty() {
            write!(f, " ({})", params.join(", "))?;
        }
        Ok(())
    }
}

impl fmt::Debug for RegistryEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RegistryEntry({self})")
    }
}

/// The whole registry address: one registry or several (see the module documentation).
#[derive(Clone, PartialEq, Eq)]
pub struct RegistryAddress {
    entries: Vec<RegistryEntry>,
}

impl fmt::Debug for RegistryAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RegistryAddress({self})")
    }
}

/// The registries joined by ` | `, each masked.
impl fmt::Display for RegistryAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.entries.iter().enumerate() {
            if i > 0 {
                write!(f, " | ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// `text` with any password masked (`user:***@`, `password=***`).
pub fn mask(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(['|', ';']) {
        out.push_str(&crate::zk::mask(&rest[..i]));
        out.push_str(&rest[i..=i]);
        rest = &rest[i + 1..];
    }
    out.push_str(&crate::zk::mask(rest));
    out
}

fn invalid(text: &str, reason: impl Into<String>) -> RegistryAddressError {
    RegistryAddressError::Invalid {
        address: mask(text),
        reason: reason.into(),
    }
}

impl RegistryAddress {
    /// Parses the address: one or several registries (see the module documentation).
    /// A password left out of a ZooKeeper entry is read as [`ZkAddress::parse`] says.
    pub fn parse(text: &str) -> Result<Self, RegistryAddressError> {
        let mut entries = Vec::new();
        for entry in text.split(['|', ';']).map(str::trim) {
            if entry.is_empty() {
                // Dubbo's pattern is `[|;]+`: repeated separators are one.
                continue;
            }
            if entries.len() == MAX_REGISTRIES {
                // A provider's registries are one word in the per-call choice.
                return Err(invalid(
                    entry,
                    format!(
                        "registry {} of the address: at most {MAX_REGISTRIES} registries are followed",
                        MAX_REGISTRIES + 1
                    ),
                ));
            }
            entries.push(parse_entry(entry)?);
        }
        if entries.is_empty() {
            return Err(invalid(text, "the address names no registry"));
        }
        let centers = entries
            .iter()
            .filter(|e| e.params.config_center == Some(true))
            .count();
        if centers > 1 {
            return Err(invalid(
                text,
                "more than one registry sets use-as-config-center=true: rules come from one",
            ));
        }
        if entries
            .iter()
            .all(|e| e.params.config_center == Some(false))
        {
            return Err(invalid(
                text,
                "every registry sets use-as-config-center=false: rules come from one of them",
            ));
        }
        Ok(RegistryAddress { entries })
    }

    /// The registries, in the order written.
    pub fn entries(&self) -> &[RegistryEntry] {
        &self.entries
    }

    /// The position of the registry the rules come from: the one with
    /// `use-as-config-center=true`, else the first not excluded by `=false`.
    pub fn config_center(&self) -> usize {
        self.entries
            .iter()
            .position(|e| e.params.config_center == Some(true))
            .or_else(|| {
                self.entries
                    .iter()
                    .position(|e| e.params.config_center != Some(false))
            })
            .unwrap_or(0)
    }

    /// Whether the registry at `position` is followed at all: it is the config center, or
    /// its providers are subscribed to (`subscribe` is not `false`).
    pub fn followed(&self, position: usize) -> bool {
        position == self.config_center()
            || self
                .entries
                .get(position)
                .is_some_and(|e| e.params.subscribe)
    }

    /// Whether several registries are followed with Dubbo's zone-aware choice rather than
    /// merged: some registry sets `preferred=true`, `zone` or `weight`.
    pub fn zone_aware(&self) -> bool {
        self.entries
            .iter()
            .any(|e| e.params.preferred || e.params.zone.is_some() || e.params.weighted)
    }

    /// The ZooKeeper address when the address is one ZooKeeper registry.
    pub fn single_zookeeper(&self) -> Option<&ZkAddress> {
        match self.entries.as_slice() {
            [one] => one.zookeeper(),
            _ => None,
        }
    }
}

fn parse_entry(entry: &str) -> Result<RegistryEntry, RegistryAddressError> {
    let (scheme, rest) = match entry.split_once("://") {
        Some((s, r)) => (Some(s.to_ascii_lowercase()), r),
        None => (None, entry),
    };
    let query = rest.split_once('?').map_or("", |(_, q)| q);
    let mut params = RegistryParams::default();
    for param in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = param.split_once('=').unwrap_or((param, ""));
        let flag = |v: &str| {
            if v.eq_ignore_ascii_case("true") {
                Ok(true)
            } else if v.eq_ignore_ascii_case("false") {
                Ok(false)
            } else {
                Err(invalid(entry, format!("{k}={v}: write true or false")))
            }
        };
        match k {
            "preferred" => params.preferred = flag(v)?,
            "zone" if !v.is_empty() => params.zone = Some(v.to_string()),
            "weight" => {
                params.weight = v.parse().map_err(|_| {
                    invalid(
                        entry,
                        format!("weight={v}: a registry's weight is a whole number"),
                    )
                })?;
                params.weighted = true;
            }
            "use-as-config-center" => params.config_center = Some(flag(v)?),
            "subscribe" => params.subscribe = flag(v)?,
            "group" if !v.is_empty() => params.group = Some(v.to_string()),
            "namespace" if !v.is_empty() => params.namespace = Some(v.to_string()),
            _ => {}
        }
    }
    let registry = match scheme.as_deref() {
        None | Some("zookeeper") => {
            if let Some(g) = params.group.as_deref().filter(|g| *g != "dubbo") {
                return Err(invalid(
                    entry,
                    format!(
                        "group={g}: ZooKeeper's root would be /{g}; routechain reads Dubbo's \
                         default root /dubbo (leave group out, or write group=dubbo)"
                    ),
                ));
            }
            Registry::ZooKeeper(ZkAddress::parse(entry)?)
        }
        Some("nacos") => nacos(entry)?,
        Some(s) => {
            return Err(invalid(
                entry,
                format!("`{s}://` is not a registry routechain reads (zookeeper:// or nacos://)"),
            ));
        }
    };
    Ok(RegistryEntry {
        registry,
        params,
        text: entry.to_string(),
    })
}

#[cfg(feature = "nacos")]
fn nacos(entry: &str) -> Result<Registry, RegistryAddressError> {
    // Refused when parsed, as a ZooKeeper entry is, when it cannot be used.
    let address = crate::NacosAddress::parse(entry).map_err(|e| match e {
        crate::NacosError::Address { reason, .. } => invalid(entry, reason),
        other => invalid(entry, other.to_string()),
    })?;
    Ok(Registry::Nacos(address))
}

#[cfg(not(feature = "nacos"))]
fn nacos(entry: &str) -> Result<Registry, RegistryAddressError> {
    Err(invalid(
        entry,
        "this build has no Nacos support (the live crate's `nacos` feature)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> RegistryAddress {
        RegistryAddress::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn separators_backups_and_schemes_give_the_registries() {
        // (address, each registry's connection string)
        let table: &[(&str, &[&str])] = &[
            ("127.0.0.1:2181", &["127.0.0.1:2181"]),
            ("a:1,b:2", &["a:1,b:2"]),
            ("zookeeper://a:1?backup=b:2,c:3", &["a:1,b:2,c:3"]),
            ("zookeeper://a:1|zookeeper://b:2", &["a:1", "b:2"]),
            ("zookeeper://a:1 ; b:2,c:3", &["a:1", "b:2,c:3"]),
            ("a:1||;b:2", &["a:1", "b:2"]),
            ("ZooKeeper://a:1", &["a:1"]),
            (
                "zookeeper://u:p@a:1/org.apache.dubbo.registry.RegistryService?group=dubbo",
                &["a:1"],
            ),
        ];
        for (text, servers) in table {
            let a = parse(text);
            let got: Vec<String> = a
                .entries()
                .iter()
                .map(|e| match &e.registry {
                    Registry::ZooKeeper(z) => z.connect_string(),
                    #[cfg(feature = "nacos")]
                    Registry::Nacos(_) => e.text().to_string(),
                })
                .collect();
            assert_eq!(got, *servers, "{text}");
        }
    }

    #[test]
    fn registry_parameters_are_read() {
        let a = parse(
            "zookeeper://a:1?preferred=TRUE&zone=hz&weight=20&namespace=dev \
             | zookeeper://b:2?use-as-config-center=true&group=dubbo&subscribe=false",
        );
        let (first, second) = (&a.entries()[0].params, &a.entries()[1].params);
        assert!(first.preferred && first.weighted);
        assert_eq!(first.zone.as_deref(), Some("hz"));
        assert_eq!(first.weight, 20);
        assert_eq!(first.namespace.as_deref(), Some("dev"));
        assert_eq!(second.weight, DEFAULT_WEIGHT);
        assert!(!second.weighted && !second.preferred && !second.subscribe);
        assert!(first.subscribe);
        assert_eq!(second.group.as_deref(), Some("dubbo"));
        assert!(a.zone_aware());
        assert_eq!(a.config_center(), 1);
        assert!(!parse("a:1|b:2").zone_aware());
        assert_eq!(parse("a:1|b:2").config_center(), 0);
        assert_eq!(
            parse("a:1?use-as-config-center=false|b:2").config_center(),
            1
        );
        assert!(parse("a:1").single_zookeeper().is_some());
        assert!(parse("a:1|b:2").single_zookeeper().is_none());
    }

    #[test]
    fn bad_addresses_are_refused_with_the_reason_and_no_password() {
        let mut table = vec![
            ("", "names no registry"),
            (" | ; ", "names no registry"),
            ("etcd://a:1", "not a registry routechain reads"),
            ("u:secret@a:1?weight=x", "whole number"),
            ("u:secret@a:1?preferred=yes", "true or false"),
            (
                "zookeeper://u:secret@a:1?group=other",
                "root would be /other",
            ),
            ("a:1|u:secret@b:port", "port must be a number"),
            (
                "a:1?use-as-config-center=true|u:secret@b:1?use-as-config-center=true",
                "more than one",
            ),
            ("u:secret@a:1?use-as-config-center=false", "every registry"),
        ];
        if cfg!(not(feature = "nacos")) {
            table.push(("nacos://u:secret@a:8848", "no Nacos support"));
        }
        for (text, reason) in table {
            let e = RegistryAddress::parse(text).expect_err(text).to_string();
            assert!(e.contains(reason), "{text}: {e}");
            assert!(!e.contains("secret"), "{text}: {e}");
        }
    }

    #[test]
    fn more_registries_than_the_choice_holds_are_refused_at_the_first_one_past() {
        let entries = |n: usize| {
            (0..n)
                .map(|i| format!("zookeeper://u:secret@zk-{i}:2181"))
                .collect::<Vec<_>>()
                .join("|")
        };
        assert_eq!(
            RegistryAddress::parse(&entries(MAX_REGISTRIES))
                .expect("64 registries")
                .entries()
                .len(),
            MAX_REGISTRIES
        );
        let e = RegistryAddress::parse(&entries(MAX_REGISTRIES + 3))
            .expect_err("67 registries")
            .to_string();
        assert!(e.contains("zk-64:2181"), "{e}");
        assert!(e.contains("registry 65 of the address"), "{e}");
        assert!(e.contains("at most 64 registries"), "{e}");
        assert!(!e.contains("secret"), "{e}");
    }

    #[test]
    fn display_masks_every_password() {
        let a = parse(
            "zookeeper://admin:s3cret@a:1?zone=hz|zookeeper://b:2?username=u&password=s3cret&preferred=true",
        );
        let shown = format!("{a} {a:?} {:?}", a.entries());
        assert!(!shown.contains("s3cret"), "{shown}");
        assert_eq!(
            a.to_string(),
            "zookeeper://admin:***@a:1 (zone=hz) | zookeeper://u:***@b:2 (preferred=true)"
        );
        assert_eq!(
            mask("a:1?password=s3cret|u:s3cret@b:2"),
            "a:1?password=***|u:***@b:2"
        );
        // The text a source connects with keeps it.
        assert!(a.entries()[0].text().contains("s3cret"));
    }
}
