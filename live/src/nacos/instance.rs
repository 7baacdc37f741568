//! A Nacos instance ↔ a Dubbo provider URL, as Dubbo's `NacosRegistry` converts them
//! (`buildURL` and `createInstance`).

use std::collections::HashMap;

use nacos_sdk::api::naming::ServiceInstance;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use routechain_core::Url;

use super::Read;

/// What a URL part written from metadata must escape to read back as it is.
const PART: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'%')
    .add(b'&')
    .add(b'=')
    .add(b'#')
    .add(b'?');

/// The provider URL Dubbo builds from an instance: `<protocol>://<ip>:<port>/<path>` with
/// every metadata entry as a parameter (`protocol` and `path` from the metadata;
/// `dubbo` when the metadata names no protocol). A URL that does not parse is an error
/// (the instance is skipped alone).
pub fn instance_url(instance: &ServiceInstance) -> Result<Url, String> {
    let metadata = &instance.metadata;
    let protocol = metadata
        .get("protocol")
        .map(String::as_str)
        .filter(|p| !p.is_empty())
        .unwrap_or("dubbo");
    let path = metadata.get("path").map(String::as_str).unwrap_or("");
    if !(1..=65535).contains(&instance.port) {
        return Err(format!("port {} is not from 1 to 65535", instance.port));
    }
    let ip = if instance.ip.contains(':') && !instance.ip.starts_with('[') {
        format!("[{}]", instance.ip)
    } else {
        instance.ip.clone()
    };
    let mut keys: Vec<&String> = metadata.keys().collect();
    keys.sort();
    let mut text = format!(
        "{protocol}://{ip}:{}/{}",
        instance.port,
        utf8_percent_encode(path, PART)
    );
    for (n, k) in keys.into_iter().enumerate() {
        text.push(if n == 0 { '?' } else { '&' });
        text.push_str(&utf8_percent_encode(k, PART).to_string());
        text.push('=');
        text.push_str(&utf8_percent_encode(&metadata[k], PART).to_string());
    }
    Url::parse_provider(&text)
        .map_err(|e| format!("invalid provider URL at column {}: {}", e.column, e.reason))
}

/// The provider an instance is, or why it is not: `enabled=false` is left out (Dubbo's
/// `filterEnabledInstances`); unless `dubbo_exact`, so is `healthy=false`, and a Nacos
/// weight other than 1 becomes `weight` = weight × 100 when the metadata sets none.
pub(super) fn read(instance: &ServiceInstance, dubbo_exact: bool) -> Result<Read, String> {
    if !instance.enabled {
        return Ok(Read::Excluded("enabled=false"));
    }
    if !dubbo_exact && !instance.healthy {
        return Ok(Read::Excluded("healthy=false"));
    }
    if !dubbo_exact && instance.weight != 1.0 && !instance.metadata.contains_key("weight") {
        let mut weighted = instance.clone();
        let weight = (instance.weight * 100.0).round().max(0.0) as u64;
        weighted
            .metadata
            .insert("weight".into(), weight.to_string());
        return instance_url(&weighted).map(Read::Taken);
    }
    instance_url(instance).map(Read::Taken)
}

/// The instance Dubbo registers for a provider URL (`createInstance`): its ip and port,
/// every parameter as metadata plus `category=providers`, `protocol` and `path`; weight,
/// health and `enabled` left at Nacos's defaults.
pub fn provider_instance(url: &Url) -> ServiceInstance {
    let mut metadata: HashMap<String, String> = url
        .params()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    metadata
        .entry("category".into())
        .or_insert_with(|| "providers".into());
    metadata.insert("protocol".into(), url.protocol().to_string());
    metadata.insert("path".into(), url.path().to_string());
    ServiceInstance {
        ip: url
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port: i32::from(url.port()),
        metadata,
        ..ServiceInstance::default()
    }
}
