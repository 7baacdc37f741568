//! The JSON request format of the command line and of request files: every field optional.

use routechain_core::{Request, Url, UrlError};
use serde::Deserialize;

/// The JSON request format of the CLI; every field optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestSpec {
    /// `service`.
    #[serde(default)]
    pub service: Option<String>,
    /// `consumer`: a consumer URL.
    #[serde(default)]
    pub consumer: Option<String>,
    /// `method`: string or null.
    #[serde(default)]
    pub method: Option<String>,
    /// `arguments`: any JSON values.
    #[serde(default)]
    pub arguments: Vec<serde_json::Value>,
    /// `parameter_types`: the declared parameter types, Java `Class.getName()` strings
    /// (read by the mesh router's `argp`).
    #[serde(default)]
    pub parameter_types: Vec<String>,
    /// `attachments`: strings.
    #[serde(default)]
    pub attachments: std::collections::BTreeMap<String, String>,
    /// `attributes`: strings.
    #[serde(default)]
    pub attributes: std::collections::BTreeMap<String, String>,
}

impl RequestSpec {
    /// Builds the request, parsing the consumer URL.
    pub fn into_request(self) -> Result<Request, UrlError> {
        Ok(Request {
            service: self.service,
            consumer: self.consumer.map(|c| Url::parse(&c)).transpose()?,
            method: self.method,
            arguments: self.arguments,
            parameter_types: self.parameter_types,
            attachments: self.attachments.into_iter().collect(),
            attributes: self.attributes.into_iter().collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_spec_parses_the_cli_format() {
        let spec: RequestSpec = serde_json::from_str(
            r#"{"consumer":"consumer://10.0.0.1/s?dubbo.tag=gray","method":null,
                "attachments":{"a":"b"},"attributes":{"group":"g1"}}"#,
        )
        .unwrap();
        let r = spec.into_request().unwrap();
        assert_eq!(r.consumer.unwrap().get("dubbo.tag"), Some("gray"));
        assert_eq!(r.method, None);
        assert_eq!(r.attributes.get("group"), Some("g1"));
    }
}
