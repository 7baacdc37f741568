//! Apache Dubbo's ZooKeeper layout, independent of any client: node paths, the component
//! encoding of provider nodes, and service keys (which providers a consumer takes, which
//! rule keys apply).

use routechain_core::Url;

use crate::RuleKey;

/// The ZooKeeper root of Dubbo's nodes.
pub const DUBBO_ROOT: &str = "/dubbo";

/// The node of a rule: `/dubbo/config/dubbo/<key>.<type>-router` (or `.MESHAPPRULE`,
/// `.configurators`; the legacy override directory `/dubbo/<interface>/configurators`).
pub fn rule_path(key: &RuleKey) -> String {
    if key.router_type == RuleKey::LEGACY_OVERRIDES {
        return configurators_path(&key.key);
    }
    format!("{DUBBO_ROOT}/config/dubbo/{key}")
}

/// The directory of a service's legacy `override://` URLs: `/dubbo/<interface>/configurators`.
pub fn configurators_path(interface: &str) -> String {
    format!("{DUBBO_ROOT}/{interface}/configurators")
}

/// The directory of a service's providers: `/dubbo/<interface>/providers`.
pub fn providers_path(interface: &str) -> String {
    format!("{DUBBO_ROOT}/{interface}/providers")
}

/// What Java's `URLEncoder` leaves as it is: ASCII letters and digits, `.`, `-`, `*`, `_`
/// (and the space, which it writes as `+`; see [`encode_component`]). The
/// `percent-encoding` crate's own sets follow the WHATWG URL standard instead (its
/// `NON_ALPHANUMERIC` also escapes `.-*_`, and nothing in the crate writes a space as `+`).
const JAVA_URL_ENCODER: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'.')
    .remove(b'-')
    .remove(b'*')
    .remove(b'_')
    .remove(b' ');

/// Encodes like Java's `URLEncoder.encode(s, "UTF-8")` (what Dubbo's `URL.encode` does to a
/// provider URL to name its registry node): letters, digits and `.-*_` stay, a space
/// becomes `+`, every other UTF-8 byte `%XX` (upper-case hex, as Java writes it).
pub fn encode_component(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, JAVA_URL_ENCODER)
        .to_string()
        .replace(' ', "+")
}

/// Decodes like Java's `URLDecoder.decode(s, "UTF-8")` and Dubbo's
/// `URLStrParser.decodeComponent`: `+` is a space, `%XX` a byte. Like them (and unlike the
/// `percent-encoding` crate, which keeps a bad escape as written) a `%` that does not start
/// a two-digit hex escape is an error: in a node name every `%` of the URL was itself
/// encoded (`%25`), so a bad escape means the node was not written by an encoder.
pub fn decode_component(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    for (i, _) in s.match_indices('%') {
        let hex = bytes.get(i + 1..i + 3);
        if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
            return Err(format!("bad escape at byte {i}"));
        }
    }
    percent_encoding::percent_decode_str(&s.replace('+', " "))
        .decode_utf8()
        .map(|d| d.into_owned())
        .map_err(|_| "does not decode to UTF-8".to_string())
}

/// Parses a provider node name as Dubbo's consumer does: the name is decoded once
/// ([`decode_component`]) and the result parsed with its parameter values taken as
/// written ([`Url::parse_as_written`]), so `discount=100%` keeps its bare `%` and a value
/// written `a%2Cb` stays `a%2Cb`, exactly as Java Dubbo's consumer reads them.
///
/// The official Python implementation (`apache-dubbo` 3.0.0b1) writes differently: it
/// form-encodes every query key and value (`urlencode`: a space is `+`, a `,` is `%2C`)
/// before percent-encoding the whole URL for the node name, so after one decode its values
/// are still encoded. Its URLs are recognisable: `tri://host:port?service=<interface>...`
/// with no path and no `side` (Java Dubbo always writes the interface as the path and
/// `side=provider`). Such a URL's query keys and values are form-decoded once more (`+` is
/// a space, `%XX` a byte; a `%` that starts no escape is kept), as the package's own
/// consumer does (`unquote` then `parse_qs`).
pub fn parse_provider_node(name: &str) -> Result<Url, String> {
    let decoded = decode_component(name).map_err(|e| format!("node name: {e}"))?;
    let invalid = |e: routechain_core::UrlError| {
        format!("invalid provider URL at column {}: {}", e.column, e.reason)
    };
    let url = Url::parse_as_written(&decoded).map_err(invalid)?;
    if url.param("side").is_some() || !url.path().is_empty() {
        return Ok(url);
    }
    // Form-decoding the query: `+` becomes `%20` before `Url::parse` percent-decodes it.
    let form = match decoded.split_once('?') {
        Some((head, query)) => format!("{head}?{}", query.replace('+', "%20")),
        None => decoded,
    };
    Url::parse(&form).map_err(invalid)
}

/// The providers' application (Dubbo's `remote.application` on the consumer side): the
/// `application` parameter of the most providers, the alphabetically first on a tie. Tag
/// and mesh rules are read under this name.
///
/// Dubbo takes the first invoker's; the providers of one service normally all belong to one
/// application, and a live chain's provider order is its own stable order (see
/// `docs/live.md`), so the choice is made from the providers as a set, which a live chain
/// and its ZooKeeper source also keep counted as providers come and go.
pub fn providers_application<'a>(providers: impl IntoIterator<Item = &'a Url>) -> Option<String> {
    crate::providers::AppCounts::of(providers).application()
}

/// Why a reference does not take a provider (see [`ServiceKey::exclusion`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Exclusion {
    /// The provider serves another interface.
    Interface,
    /// Its group is not the reference's.
    Group,
    /// Its version is not the reference's.
    Version,
    /// It is registered with `enabled=false`.
    NotEnabled,
    /// It is registered with `disabled=true`.
    Disabled,
}

impl std::fmt::Display for Exclusion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Exclusion::Interface => "interface",
            Exclusion::Group => "group",
            Exclusion::Version => "version",
            Exclusion::NotEnabled => "enabled=false",
            Exclusion::Disabled => "disabled=true",
        })
    }
}

/// A Dubbo service key: interface, version and group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceKey {
    /// The interface (`com.foo.BarService`).
    pub interface: String,
    /// The version, if any (`*` accepts every version).
    pub version: Option<String>,
    /// The group, if any (`*` accepts every group; `a,b` accepts either).
    pub group: Option<String>,
}

impl ServiceKey {
    /// Parses `interface`, `interface:version`, `interface:version:group` (the config-center
    /// form) or `group/interface:version` (Dubbo's service-key form).
    pub fn parse(s: &str) -> Self {
        let non_empty = |v: Option<&str>| v.filter(|v| !v.is_empty()).map(str::to_string);
        let (group, rest) = match s.split_once('/') {
            Some((g, rest)) => (non_empty(Some(g)), rest),
            None => (None, s),
        };
        let mut parts = rest.splitn(3, ':');
        let interface = parts.next().unwrap_or_default().to_string();
        let version = non_empty(parts.next());
        let group = group.or_else(|| non_empty(parts.next()));
        ServiceKey {
            interface,
            version,
            group,
        }
    }

    /// The reference as the chain file gives it: `service` (which may itself be written
    /// `interface:version:group` or `group/interface:version`), with `group` and `version`
    /// fields taking precedence when given.
    pub fn reference(service: &str, group: Option<&str>, version: Option<&str>) -> Self {
        let mut key = ServiceKey::parse(service);
        if let Some(g) = group {
            key.group = Some(g.to_string()).filter(|g| !g.is_empty());
        }
        if let Some(v) = version {
            key.version = Some(v.to_string()).filter(|v| !v.is_empty());
        }
        key
    }

    /// The config-center rule key `interface:version:group`, both colons always written.
    /// A wildcard (`*`) or list (`a,b`) group or version is written empty, as Dubbo Admin
    /// keys a service's rules: a `group: "*"` reference reads `com.acme.OrderService::`.
    pub fn rule_key(&self) -> String {
        let concrete = |v: Option<&str>| -> String {
            match v {
                Some(v) if v != "*" && !v.contains(',') => v.to_string(),
                _ => String::new(),
            }
        };
        format!(
            "{}:{}:{}",
            self.interface,
            concrete(self.version.as_deref()),
            concrete(self.group.as_deref())
        )
    }

    /// `group=…, version=…` as the reference asks (empty when absent).
    pub fn describe_filter(&self) -> String {
        format!(
            "group={}, version={}",
            self.group.as_deref().unwrap_or(""),
            self.version.as_deref().unwrap_or("")
        )
    }

    /// Whether a consumer of this key uses `provider` (see [`ServiceKey::exclusion`]).
    pub fn matches(&self, provider: &Url) -> bool {
        self.exclusion(provider).is_none()
    }

    /// Why a consumer of this key does not use `provider`, `None` when it does (Dubbo's
    /// `UrlUtils.isMatch`): the provider's interface (its `interface` parameter, else its
    /// path, else the `service` parameter the Python implementation writes; not checked
    /// when it states none, as the registry path already names it) is the key's; its
    /// group equals the key's, is one of the key's comma-separated groups, or the key's
    /// group is `*`; its version equals the key's or the key's is `*` (an absent and an
    /// empty value are the same); and it is not registered `enabled=false` or
    /// `disabled=true`.
    pub fn exclusion(&self, provider: &Url) -> Option<Exclusion> {
        let param = |k: &str| provider.param(k).filter(|v| !v.is_empty());
        let interface = param("interface")
            .or(Some(provider.path()).filter(|p| !p.is_empty()))
            .or_else(|| param("service"));
        if let Some(i) = interface
            && self.interface != "*"
            && i != "*"
            && i != self.interface
        {
            return Some(Exclusion::Interface);
        }
        let want_group = self.group.as_deref().filter(|g| !g.is_empty());
        let group_ok = match (want_group, param("group")) {
            (Some("*"), _) => true,
            (None, g) => g.is_none(),
            (Some(want), Some(g)) => want == g || want.split(',').any(|w| w.trim() == g),
            (Some(_), None) => false,
        };
        if !group_ok {
            return Some(Exclusion::Group);
        }
        let version_ok = match self.version.as_deref().filter(|v| !v.is_empty()) {
            Some("*") => true,
            v => v == param("version"),
        };
        if !version_ok {
            return Some(Exclusion::Version);
        }
        if param("enabled") == Some("false") {
            return Some(Exclusion::NotEnabled);
        }
        if param("disabled") == Some("true") {
            return Some(Exclusion::Disabled);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_nodes_decode_like_dubbos_consumer_and_pythons_values_once_more() {
        // Java: encoded once; a bare `%` and a literal `%2C` in values are kept.
        let java = encode_component(
            "dubbo://10.0.0.1:20880/com.foo.Bar?side=provider&discount=100%&raw=a%2Cb",
        );
        let u = parse_provider_node(&java).unwrap();
        assert_eq!(u.param("discount"), Some("100%"));
        assert_eq!(u.param("raw"), Some("a%2Cb"));
        // Python: values form-encoded, then the whole URL encoded; no path, no `side`.
        let python = "tri%3A%2F%2F127.0.0.1%3A50063%3Fservice%3Dorg.example.Greeter%26group%3Da%252Cb\
                      %26discount%3D100%2525%26note%3Dx%2By%252Fz%253A1%26methods%3DsayHello%252CsayHelloRaw";
        let u = parse_provider_node(python).unwrap();
        assert_eq!(u.param("group"), Some("a,b"));
        assert_eq!(u.param("discount"), Some("100%"));
        assert_eq!(u.param("note"), Some("x y/z:1"));
        assert_eq!(u.param("methods"), Some("sayHello,sayHelloRaw"));
        assert_eq!(u.param("service"), Some("org.example.Greeter"));
        // routechain's own `zk register` (a path, no side): as written, like Java.
        let ours = encode_component("dubbo://10.0.0.3:20880/com.foo.Bar?k=a+b");
        assert_eq!(parse_provider_node(&ours).unwrap().param("k"), Some("a+b"));
        assert!(parse_provider_node("dubbo%3A%2F%2F10.0.0.1%3Ax").is_err());
        assert!(parse_provider_node("dubbo%zz").is_err());
    }

    #[test]
    fn encode_and_decode_round_trip_like_java_url_encoder() {
        let url = "dubbo://10.0.0.1:20880/com.foo.Bar?application=a b&methods=x,y";
        let enc = encode_component(url);
        assert_eq!(
            enc,
            "dubbo%3A%2F%2F10.0.0.1%3A20880%2Fcom.foo.Bar%3Fapplication%3Da+b%26methods%3Dx%2Cy"
        );
        assert_eq!(decode_component(&enc).unwrap(), url);
        assert!(decode_component("%zz").is_err());
        assert!(decode_component("abc%2").is_err());
        assert_eq!(encode_component("a é/b"), "a+%C3%A9%2Fb");
        assert_eq!(decode_component("a+%C3%A9%2Fb%2B").unwrap(), "a é/b+");
    }

    #[test]
    fn service_key_forms_and_rule_key_always_has_both_colons() {
        let table = [
            ("com.foo.Bar", "com.foo.Bar::"),
            ("com.foo.Bar:1.0.0", "com.foo.Bar:1.0.0:"),
            ("com.foo.Bar:1.0.0:g1", "com.foo.Bar:1.0.0:g1"),
            ("com.foo.Bar::g1", "com.foo.Bar::g1"),
            ("g1/com.foo.Bar:1.0.0", "com.foo.Bar:1.0.0:g1"),
            ("com.foo.Bar:*:*", "com.foo.Bar::"),
            ("com.foo.Bar:1.0.0:a,b", "com.foo.Bar:1.0.0:"),
        ];
        for (input, key) in table {
            assert_eq!(ServiceKey::parse(input).rule_key(), key, "{input}");
        }
    }

    #[test]
    fn service_key_selects_providers_like_dubbo_consumers() {
        let p = |q: &str| Url::parse(&format!("dubbo://10.0.0.1:20880/com.foo.Bar?{q}")).unwrap();
        let table = [
            ("com.foo.Bar", "", true),
            ("com.foo.Bar", "version=1.0.0", false),
            ("com.foo.Bar:1.0.0", "version=1.0.0", true),
            ("com.foo.Bar:*", "version=2.0.0", true),
            ("com.foo.Bar::g1", "group=g1", true),
            ("com.foo.Bar::g1,g2", "group=g2", true),
            ("com.foo.Bar::g1", "group=g3", false),
            ("com.foo.Bar", "group=g1", false),
            ("com.foo.Bar::*", "group=g1", true),
            ("com.foo.Bar", "enabled=false", false),
            ("com.foo.Bar", "disabled=true", false),
            ("com.foo.Bar", "interface=com.foo.Other", false),
            ("com.foo.Bar:*:*", "group=a&version=3", true),
        ];
        for (key, query, expected) in table {
            assert_eq!(
                ServiceKey::parse(key).matches(&p(query)),
                expected,
                "{key} vs {query}"
            );
        }
    }
}
