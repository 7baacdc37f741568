//! Apache Dubbo's ZooKeeper layout, independent of any client: node paths, the component
//! encoding of provider nodes, and service keys (which providers a consumer takes, which
//! rule keys apply).

use routechain_core::Url;

use crate::RuleKey;

/// The ZooKeeper root of Dubbo's nodes.
pub const DUBBO_ROOT: &str = "/dubbo";

/// The node of a rule: `/dubbo/config/dubbo/<key>.<type>-router`.
pub fn rule_path(key: &RuleKey) -> String {
    format!("{DUBBO_ROOT}/config/dubbo/{key}")
}

/// The directory of a service's providers: `/dubbo/<interface>/providers`.
pub fn providers_path(interface: &str) -> String {
    format!("{DUBBO_ROOT}/{interface}/providers")
}

/// Encodes like Java's `URLEncoder.encode(s, "UTF-8")` (what Dubbo's `URL.encode` does):
/// letters, digits and `.-*_` stay, a space becomes `+`, every other byte `%XX`.
pub fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3 / 2);
    for b in s.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Decodes like Java's `URLDecoder.decode(s, "UTF-8")`: `+` is a space, `%XX` a byte.
pub fn decode_component(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("bad escape at byte {i} of {s:?}"))?;
                out.push(hex);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} does not decode to UTF-8"))
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

    /// The config-center rule key `interface:version:group`, both colons always written.
    pub fn rule_key(&self) -> String {
        format!(
            "{}:{}:{}",
            self.interface,
            self.version.as_deref().unwrap_or(""),
            self.group.as_deref().unwrap_or("")
        )
    }

    /// Whether a consumer of this key uses `provider` (Dubbo's consumer/provider match):
    /// the provider is enabled, its version equals (or the key's is `*`), and its group
    /// equals, is one of the key's comma-separated groups, or the key's group is `*`.
    pub fn matches(&self, provider: &Url) -> bool {
        let param = |k: &str| provider.param(k).filter(|v| !v.is_empty());
        if param("enabled") == Some("false") {
            return false;
        }
        let version_ok = match self.version.as_deref() {
            Some("*") => true,
            v => v == param("version"),
        };
        let group_ok = match (self.group.as_deref(), param("group")) {
            (Some("*"), _) => true,
            (None, g) => g.is_none(),
            (Some(want), Some(g)) => want == g || want.split(',').any(|w| w.trim() == g),
            (Some(_), None) => false,
        };
        version_ok && group_ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn service_key_forms_and_rule_key_always_has_both_colons() {
        let table = [
            ("com.foo.Bar", "com.foo.Bar::"),
            ("com.foo.Bar:1.0.0", "com.foo.Bar:1.0.0:"),
            ("com.foo.Bar:1.0.0:g1", "com.foo.Bar:1.0.0:g1"),
            ("com.foo.Bar::g1", "com.foo.Bar::g1"),
            ("g1/com.foo.Bar:1.0.0", "com.foo.Bar:1.0.0:g1"),
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
