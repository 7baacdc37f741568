//! The dataIds of a config group, read with Nacos's HTTP config API: the gRPC client has
//! no list call. `GET /nacos/v1/cs/configs?search=blur&group=…&tenant=…` page by page,
//! after `POST /nacos/v1/auth/login` when the address has credentials, on the address's
//! servers in turn until one answers (the HTTP port of each: the one the address names);
//! and whether another server holds a config the source's server said it has not.

use std::time::Duration;

use serde_json::Value;

use super::{NacosAddress, NacosError};

/// Configs asked for per page.
const PAGE_SIZE: usize = 500;

/// How long another server may take to say whether it holds a config: one that answers at
/// all answers in milliseconds.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(1);

/// Why one server's answer is not the list.
fn failed(what: &str, reason: impl std::fmt::Display) -> NacosError {
    NacosError::Op {
        op: "list configs of group",
        what: what.to_string(),
        reason: reason.to_string(),
    }
}

/// The dataIds of `group` in the address's namespace (exactly that group: Nacos's blur
/// search may match more), sorted.
pub(super) async fn data_ids(
    address: &NacosAddress,
    group: &str,
) -> Result<Vec<String>, NacosError> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| failed(group, e))?;
    let mut error = None;
    for host in address.hosts() {
        match from_server(&http, address, host, group).await {
            Ok(ids) => return Ok(ids),
            Err(e) => error = Some(e),
        }
    }
    Err(error.unwrap_or_else(|| failed(group, "the address names no server")))
}

/// The body of an answer as JSON, or why it is not a 2xx one.
async fn json(answer: Result<reqwest::Response, reqwest::Error>) -> Result<Value, String> {
    let answer = answer.map_err(|e| e.to_string())?;
    let status = answer.status();
    let body = answer.text().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        let body: String = body.chars().take(200).collect();
        return Err(format!("HTTP {status}: {}", body.trim()));
    }
    serde_json::from_str(&body).map_err(|e| format!("not JSON ({e}): {}", body.trim()))
}

async fn from_server(
    http: &reqwest::Client,
    address: &NacosAddress,
    host: &str,
    group: &str,
) -> Result<Vec<String>, NacosError> {
    let base = format!("http://{host}/nacos/v1");
    let token = login(http, address, host).await?;
    let mut ids = Vec::new();
    let size = PAGE_SIZE.to_string();
    let mut page: u64 = 1;
    loop {
        let page_no = page.to_string();
        let mut query = vec![
            ("search", "blur"),
            ("dataId", ""),
            ("group", group),
            ("tenant", address.namespace()),
            ("pageNo", &page_no),
            ("pageSize", &size),
        ];
        if let Some(t) = &token {
            query.push(("accessToken", t));
        }
        let answer = http
            .get(format!("{base}/cs/configs"))
            .query(&query)
            .send()
            .await;
        let v = json(answer)
            .await
            .map_err(|reason| failed(group, format!("at {host}: {reason}")))?;
        let Some(items) = v["pageItems"].as_array() else {
            return Err(failed(
                group,
                format!("at {host}: the answer has no pageItems: {v}"),
            ));
        };
        ids.extend(
            items
                .iter()
                .filter(|i| i["group"].as_str() == Some(group))
                .filter_map(|i| i["dataId"].as_str())
                .map(str::to_string),
        );
        let pages = v["pagesAvailable"].as_u64().unwrap_or(0);
        if items.is_empty() || page >= pages {
            break;
        }
        page += 1;
    }
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// The access token of a login at `host` when the address has credentials.
async fn login(
    http: &reqwest::Client,
    address: &NacosAddress,
    host: &str,
) -> Result<Option<String>, NacosError> {
    let Some((username, password)) = address.credentials() else {
        return Ok(None);
    };
    let answer = http
        .post(format!("http://{host}/nacos/v1/auth/login"))
        .form(&[("username", username), ("password", password)])
        .send()
        .await;
    let failed = |reason: String| NacosError::Op {
        op: "log in",
        what: format!("as {username} at {host}"),
        reason,
    };
    let v = json(answer).await.map_err(failed)?;
    match v["accessToken"].as_str() {
        Some(t) => Ok(Some(t.to_string())),
        None => Err(failed("the answer has no accessToken".into())),
    }
}

/// Whether a server of the address other than `server` holds the config `data_id` of
/// `group` (`GET /nacos/v1/cs/configs`, each server given [`CONFIRM_TIMEOUT`]; one that
/// does not answer holds nothing here).
pub(super) async fn held_elsewhere(
    address: &NacosAddress,
    server: &str,
    data_id: &str,
    group: &str,
) -> bool {
    let Ok(http) = reqwest::Client::builder().timeout(CONFIRM_TIMEOUT).build() else {
        return false;
    };
    for host in address.hosts().iter().filter(|h| *h != server) {
        let Ok(token) = login(&http, address, host).await else {
            continue;
        };
        let mut query = vec![
            ("dataId", data_id),
            ("group", group),
            ("tenant", address.namespace()),
        ];
        if let Some(t) = &token {
            query.push(("accessToken", t));
        }
        let answer = http
            .get(format!("http://{host}/nacos/v1/cs/configs"))
            .query(&query)
            .send()
            .await;
        if let Ok(answer) = answer
            && answer.status().is_success()
            && answer.text().await.is_ok_and(|body| !body.is_empty())
        {
            return true;
        }
    }
    false
}
