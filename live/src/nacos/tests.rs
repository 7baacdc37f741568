use std::collections::HashMap;

use nacos_sdk::api::naming::ServiceInstance;

use super::*;

fn instance(ip: &str, port: i32, metadata: &[(&str, &str)]) -> ServiceInstance {
    ServiceInstance {
        ip: ip.into(),
        port,
        metadata: metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<HashMap<_, _>>(),
        ..ServiceInstance::default()
    }
}

fn taken(read: Result<Read, String>) -> Url {
    match read {
        Ok(Read::Taken(u)) => u,
        Ok(Read::Excluded(why)) => panic!("excluded by {why}"),
        Err(e) => panic!("skipped: {e}"),
    }
}

#[test]
fn an_instance_is_the_url_dubbo_builds_and_registering_it_gives_it_back() {
    let url = Url::parse_provider(
        "tri://10.0.0.1:50051/com.foo.Bar?application=shop&group=g&version=1.0&note=a%26b%3Dc%20d",
    )
    .unwrap();
    let i = provider_instance(&url);
    assert_eq!((i.ip.as_str(), i.port), ("10.0.0.1", 50051));
    assert_eq!(i.metadata["category"], "providers");
    assert_eq!(i.metadata["protocol"], "tri");
    assert_eq!(i.metadata["path"], "com.foo.Bar");
    assert_eq!(i.metadata["note"], "a&b=c d");
    assert_eq!(
        NacosAdmin::service_of("com.foo.Bar", &url),
        "providers:com.foo.Bar:1.0:g"
    );
    let back = instance_url(&i).unwrap();
    assert_eq!(back.protocol(), "tri");
    assert_eq!(back.address(), "10.0.0.1:50051");
    assert_eq!(back.path(), "com.foo.Bar");
    for (k, v) in url.params() {
        assert_eq!(back.param(k), Some(v), "{k}");
    }
    assert_eq!(back.param("category"), Some("providers"));
}

#[test]
fn enabled_false_is_left_out_as_dubbo_does_even_in_dubbo_exact_mode() {
    for exact in [false, true] {
        let mut i = instance("10.0.0.1", 20880, &[("path", "com.foo.Bar")]);
        i.enabled = false;
        assert!(
            matches!(
                instance::read(&i, exact),
                Ok(Read::Excluded("enabled=false"))
            ),
            "exact={exact}"
        );
    }
}

#[test]
fn unhealthy_and_the_nacos_weight_apply_unless_dubbo_exact() {
    let mut i = instance("10.0.0.1", 20880, &[("path", "com.foo.Bar")]);
    i.healthy = false;
    assert!(matches!(
        instance::read(&i, false),
        Ok(Read::Excluded("healthy=false"))
    ));
    assert_eq!(taken(instance::read(&i, true)).address(), "10.0.0.1:20880");
    i.healthy = true;
    i.weight = 0.5;
    assert_eq!(taken(instance::read(&i, false)).param("weight"), Some("50"));
    assert_eq!(taken(instance::read(&i, true)).param("weight"), None);
    // The URL's own weight wins; Nacos's default weight 1 adds nothing.
    i.metadata.insert("weight".into(), "7".into());
    assert_eq!(taken(instance::read(&i, false)).param("weight"), Some("7"));
    i.metadata.remove("weight");
    i.weight = 1.0;
    assert_eq!(taken(instance::read(&i, false)).param("weight"), None);
}

#[test]
fn a_bad_instance_is_an_error_of_its_own() {
    assert!(instance::read(&instance("10.0.0.1", 0, &[]), false).is_err());
    assert!(instance::read(&instance("", 20880, &[]), false).is_err());
    let u = taken(instance::read(&instance("::1", 20880, &[]), false));
    assert_eq!(u.protocol(), "dubbo");
}

#[test]
fn service_names_and_data_ids_are_dubbos() {
    assert_eq!(
        service_name("com.foo.Bar", "", ""),
        "providers:com.foo.Bar::"
    );
    assert_eq!(service_name("a$B", "1", "g"), "providers:a___B:1:g");
    assert_eq!(
        rule_data_id(&RuleKey::new("com.foo.Bar::", "condition")),
        "com.foo.Bar::.condition-router"
    );
    assert_eq!(
        rule_data_id(&RuleKey::new("shop", RuleKey::MESH)),
        "shop.MESHAPPRULE"
    );
    assert_eq!(
        rule_data_id(&RuleKey::new("com.foo.Bar:1:g", RuleKey::CONFIGURATORS)),
        "com.foo.Bar:1:g.configurators"
    );
    assert_eq!(
        rule_data_id(&RuleKey::new("a/b$c", "tag")),
        "a-b___c.tag-router"
    );
}

#[test]
fn wildcard_and_list_references_follow_compatible_services_as_dubbo_does() {
    let key = |v: &str, g: &str| ServiceKey {
        interface: "com.foo.Bar".into(),
        version: Some(v.to_string()).filter(|v| !v.is_empty()),
        group: Some(g.to_string()).filter(|g| !g.is_empty()),
    };
    // (reference version, group, service name, followed)
    let table = [
        ("*", "", "providers:com.foo.Bar:1.0:", true),
        ("*", "", "providers:com.foo.Bar:2.0:x", true),
        ("", "*", "providers:com.foo.Bar::a", true),
        ("", "a,b", "providers:com.foo.Bar::b", true),
        ("", "a,b", "providers:com.foo.Bar::c", false),
        ("1,2", "", "providers:com.foo.Bar:2:", true),
        ("*", "", "providers:com.foo.Other:1:", false),
        ("*", "", "consumers:com.foo.Bar:1:", false),
        ("*", "", "providers:com.foo.Bar:1", false),
    ];
    for (v, g, name, followed) in table {
        assert_eq!(compatible(&key(v, g), name), followed, "{v} {g} {name}");
    }
    assert!(concrete(&key("1", "g")));
    assert!(!concrete(&key("*", "")));
    assert!(!concrete(&key("", "a,b")));
}

#[test]
#[cfg(feature = "zookeeper")]
fn a_nacos_entry_of_a_registry_address_is_checked_when_parsed() {
    use crate::registry::{Registry, RegistryAddress};
    let a = RegistryAddress::parse("zookeeper://zk:2181 | nacos://h:8848?namespace=dev").unwrap();
    assert!(matches!(a.entries()[1].registry, Registry::Nacos(_)));
    let e = RegistryAddress::parse("nacos://u:secret@h:port")
        .unwrap_err()
        .to_string();
    assert!(e.contains("port") && !e.contains("secret"), "{e}");
}
