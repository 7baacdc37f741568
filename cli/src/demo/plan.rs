//! The demo's call mix: what call number `n` is, and the gRPC request that makes it.
//!
//! Every 20 calls: 2 gray `getUser` calls (header `dubbo-tag: gray`, which the layer copies
//! into the `dubbo.tag` attachment), 1 `reindex` (idx_order), 8 `getUser` (idx_user),
//! 9 `listOrders` (idx_order). Every call carries the `group` and `user` attributes and the
//! user as its first argument (997 users), in a [`RouteAttributes`] extension.

use routechain_tower::RouteAttributes;

use super::rpc::Call;

/// What kind of call number `n` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// getUser with dubbo.tag=gray (the canary's users).
    Gray,
    /// reindex, group idx_order (condition: only in zf).
    Reindex,
    /// getUser, group idx_user.
    GetUser,
    /// listOrders, group idx_order.
    ListOrders,
}

/// The kind of call number `n`.
pub fn kind_of(n: u64) -> Kind {
    match n % 20 {
        0 | 10 => Kind::Gray,
        5 => Kind::Reindex,
        x if x % 2 == 0 => Kind::GetUser,
        _ => Kind::ListOrders,
    }
}

/// Call number `n`, planned.
#[derive(Debug, Clone)]
pub struct Planned {
    /// Its kind.
    pub kind: Kind,
    /// The method called.
    pub method: &'static str,
    /// The group it asks for.
    pub group: &'static str,
    /// The user it is about.
    pub user: String,
}

/// Plans call number `n`.
pub fn plan(n: u64) -> Planned {
    let kind = kind_of(n);
    let (method, group) = match kind {
        Kind::Gray | Kind::GetUser => ("getUser", "idx_user"),
        Kind::Reindex => ("reindex", "idx_order"),
        Kind::ListOrders => ("listOrders", "idx_order"),
    };
    Planned {
        kind,
        method,
        group,
        user: format!("u-{}", n % 997),
    }
}

impl Planned {
    /// The gRPC request of call number `n`: the message, the routing attributes and
    /// argument in its extensions, the tag in its `dubbo-tag` header.
    pub fn request(&self, n: u64) -> tonic::Request<Call> {
        let mut request = tonic::Request::new(Call {
            id: n,
            user: self.user.clone(),
        });
        request.extensions_mut().insert(
            RouteAttributes::new()
                .with("group", self.group)
                .with("user", self.user.as_str())
                .with_argument(serde_json::Value::String(self.user.clone())),
        );
        if self.kind == Kind::Gray {
            request.metadata_mut().insert(
                "dubbo-tag",
                tonic::metadata::MetadataValue::from_static("gray"),
            );
        }
        request
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_call_mix_has_every_kind() {
        let kinds: Vec<Kind> = (0..20).map(kind_of).collect();
        let count = |k| kinds.iter().filter(|x| **x == k).count();
        assert_eq!(count(Kind::Gray), 2);
        assert_eq!(count(Kind::Reindex), 1);
        assert_eq!(count(Kind::GetUser), 8);
        assert_eq!(count(Kind::ListOrders), 9);
    }

    #[test]
    fn a_gray_call_carries_its_tag_header_and_every_call_its_attributes() {
        let gray = plan(0).request(0);
        assert_eq!(gray.metadata().get("dubbo-tag").unwrap(), "gray");
        let a = gray.extensions().get::<RouteAttributes>().unwrap();
        assert_eq!(a.attributes.get("group"), Some("idx_user"));
        assert_eq!(a.attributes.get("user"), Some("u-0"));
        assert_eq!(a.arguments, [serde_json::json!("u-0")]);
        let reindex = plan(5).request(5);
        assert!(reindex.metadata().get("dubbo-tag").is_none());
        assert_eq!(plan(5).method, "reindex");
    }
}
