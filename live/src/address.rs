//! What every registry address shares, whatever its scheme: the password masked in every
//! message, user-info and `password=` decoded, `host[:port]` checked, and a password left
//! out read from an environment variable or a file named by one (ZooKeeper's and Nacos's
//! addresses, `zk::ZkAddress` and `nacos::NacosAddress`).

/// `text` with any password replaced by `***`: the user-info's password and a `password=`
/// parameter's value. For messages about an address that may not parse.
pub(crate) fn mask(text: &str) -> String {
    let (head, query) = match text.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (text, None),
    };
    let scheme_end = head.find("://").map_or(0, |i| i + 3);
    let authority_end = head[scheme_end..]
        .find('/')
        .map_or(head.len(), |i| scheme_end + i);
    let mut out = String::with_capacity(text.len());
    match head[scheme_end..authority_end].rfind('@') {
        Some(at) => {
            let userinfo = &head[scheme_end..scheme_end + at];
            out.push_str(&head[..scheme_end]);
            match userinfo.split_once(':') {
                Some((user, _)) => {
                    out.push_str(user);
                    out.push_str(":***");
                }
                None => out.push_str(userinfo),
            }
            out.push_str(&head[scheme_end + at..]);
        }
        None => out.push_str(head),
    }
    if let Some(query) = query {
        out.push('?');
        let parts: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k == "password" => format!("{k}=***"),
                _ => p.to_string(),
            })
            .collect();
        out.push_str(&parts.join("&"));
    }
    out
}

/// A percent-encoded user, password or parameter value, decoded.
pub(crate) fn decode(part: &str) -> Result<String, String> {
    percent_encoding::percent_decode_str(part)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| "the user or password is not valid UTF-8 once decoded".to_string())
}

/// Checks one `host[:port]` (or `[v6]:port`) and writes it with its port (`default_port`
/// when it has none).
pub(crate) fn host_port(hp: &str, default_port: u16) -> Result<String, String> {
    let hp = hp.trim();
    if hp.is_empty() {
        return Err("a server is empty (two commas, or nothing after `@`)".into());
    }
    let (host, port) = if let Some(rest) = hp.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("`{hp}`: `[` without `]`"))?;
        (format!("[{host}]"), after.strip_prefix(':'))
    } else {
        match hp.split_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (hp.to_string(), None),
        }
    };
    if host.is_empty() || host == "[]" {
        return Err(format!("`{hp}` has no host"));
    }
    if host.contains(['@', '/', ' ', '?', '#']) {
        return Err(format!("`{host}` is not a host name"));
    }
    let port = match port {
        None => default_port,
        Some(p) => match p.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err(format!("`{hp}`: the port must be a number from 1 to 65535")),
        },
    };
    Ok(format!("{host}:{port}"))
}

/// The password from the environment variable `env`, else the first line of the file
/// named by `file_env`; `Ok(None)` when neither is set.
pub(crate) fn password_from_env(env: &str, file_env: &str) -> Result<Option<String>, String> {
    if let Ok(p) = std::env::var(env) {
        return Ok(Some(p));
    }
    let Ok(file) = std::env::var(file_env) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&file)
        .map_err(|e| format!("{file_env}={file}: cannot read the password file: {e}"))?;
    Ok(Some(text.lines().next().unwrap_or("").to_string()))
}

/// The credentials of an address from its user-info and its `username`/`password`
/// parameters (user-info wins), a password left out read as [`password_from_env`] says.
pub(crate) fn credentials(
    username: Option<String>,
    password: Option<String>,
    env: &str,
    file_env: &str,
) -> Result<Option<(String, String)>, String> {
    match (username, password) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err("a password without a user name".into()),
        (Some(u), _) if u.is_empty() => Err("the user name is empty".into()),
        (Some(u), Some(p)) => Ok(Some((u, p))),
        (Some(u), None) => match password_from_env(env, file_env)? {
            Some(p) => Ok(Some((u, p))),
            None => Err(format!(
                "the user {u} has no password: write `{u}:PASSWORD@`, or set {env} or {file_env}"
            )),
        },
    }
}

/// Splits user-info `user[:password]` into its decoded parts.
pub(crate) fn userinfo(info: &str) -> Result<(String, Option<String>), String> {
    match info.split_once(':') {
        Some((u, p)) => Ok((decode(u)?, Some(decode(p)?))),
        None => Ok((decode(info)?, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_hides_the_userinfo_password_and_the_password_parameter() {
        assert_eq!(mask("admin:s3cret@a:1"), "admin:***@a:1");
        assert_eq!(
            mask("zookeeper://u@a:1?username=u&password=s3cret&x=1"),
            "zookeeper://u@a:1?username=u&password=***&x=1"
        );
        assert_eq!(
            mask("nacos://u:s3cret@a:8848?namespace=dev"),
            "nacos://u:***@a:8848?namespace=dev"
        );
        assert_eq!(mask("a:1/x@y"), "a:1/x@y");
    }

    #[test]
    fn host_port_takes_a_default_port_and_refuses_bad_ones() {
        assert_eq!(host_port("a", 8848).unwrap(), "a:8848");
        assert_eq!(host_port("[::1]:1", 8848).unwrap(), "[::1]:1");
        for bad in ["", "a:0", "a:x", ":1", "a/b:1", "[::1"] {
            assert!(host_port(bad, 1).is_err(), "{bad}");
        }
    }
}
