//! ZooKeeper in production, against a real server: digest credentials and creator-only
//! ACLs, a node the source may not read (reported, counted, retried until it reads),
//! registrations made again on a new session, a bad address refused at once.

use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use routechain::live::{
    Report, RuleKey, UpdateResult, ZkAddress, ZkAdmin, ZkConfig, ZkRegistration, ZkSource,
};
use zookeeper_client::{Acls, Client, Error as ZkClientError};

use super::support::zookeeper::ZooKeeper;
use super::{live, wait_report, wait_route, watch};

const SERVICE: &str = "com.foo.BarService";
const CHAIN: &str = "service: com.foo.BarService\nrouters:\n  - type: condition\n";
const RULE: &str = "/dubbo/config/dubbo/com.foo.BarService::.condition-router";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

fn provider(n: u8) -> String {
    format!("dubbo://10.0.0.{n}:20880/{SERVICE}?side=provider")
}

fn rule_key() -> RuleKey {
    RuleKey::new(format!("{SERVICE}::"), "condition")
}

/// A bare client, with digest credentials when `auth` is given.
async fn raw(addr: &str, auth: Option<&str>) -> Client {
    let mut connector = Client::connector();
    if let Some(auth) = auth {
        connector = connector.with_auth("digest", auth.as_bytes());
    }
    connector.connect(addr).await.expect("connect")
}

#[test]
fn credentials_write_creator_only_nodes_parents_included_and_world_readable_on_purpose() {
    let zk = ZooKeeper::start("acl");
    let rt = runtime();
    rt.block_on(async {
        let alice = ZkAdmin::connect(&format!("alice:secret@{}", zk.address()))
            .await
            .unwrap();
        alice
            .put_rule(&rule_key(), "conditions: []\n")
            .await
            .unwrap();
        alice.register(SERVICE, &provider(1)).await.unwrap();
        let anyone = raw(&zk.address(), None).await;
        // (Reading an ACL takes READ or ADMIN: the owner reads it.)
        let owner = raw(&zk.address(), Some("alice:secret")).await;
        for path in [
            "/dubbo",
            "/dubbo/config",
            "/dubbo/config/dubbo",
            RULE,
            "/dubbo/com.foo.BarService/providers",
        ] {
            let (acls, _) = owner.get_acl(path).await.unwrap();
            assert_eq!(acls.len(), 1, "{path}: {acls:?}");
            assert_eq!(
                anyone.get_data(path).await.unwrap_err(),
                ZkClientError::NoAuth
            );
            assert_eq!(acls[0].scheme(), "digest", "{path}");
            assert!(acls[0].id().starts_with("alice:"), "{path}: {acls:?}");
        }
        assert_eq!(
            anyone.get_data(RULE).await.unwrap_err(),
            ZkClientError::NoAuth
        );
        // The same credentials read it, from either form of the address.
        let again = ZkAdmin::connect(&format!(
            "zookeeper://{}?username=alice&password=secret",
            zk.address()
        ))
        .await
        .unwrap();
        assert_eq!(
            again.get_rule(&rule_key()).await.unwrap().as_deref(),
            Some("conditions: []\n")
        );

        // World-readable on purpose: everyone reads, only the creator writes.
        let open = alice.clone().world_readable(true);
        let key = RuleKey::new("demo-app", "condition");
        open.put_rule(&key, "conditions: []\n").await.unwrap();
        let path = "/dubbo/config/dubbo/demo-app.condition-router";
        assert_eq!(anyone.get_data(path).await.unwrap().0, b"conditions: []\n");
        assert_eq!(
            anyone.set_data(path, b"x", None).await.unwrap_err(),
            ZkClientError::NoAuth
        );

        // The parents are the creator's too: a client without the credentials cannot
        // register under them (as with Dubbo's CREATOR_ALL_ACL).
        let plain = ZkAdmin::connect(&zk.address()).await.unwrap();
        let e = plain
            .register_persistent("com.foo.Other", &provider(2))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("not authorized"), "{e}");
    });
}

#[test]
fn an_unreadable_rule_is_reported_counted_and_retried_while_the_rest_applies_then_it_reads() {
    let zk = ZooKeeper::start("noauth");
    let rt = runtime();
    let alice = rt.block_on(async {
        let plain = ZkAdmin::connect(&zk.address()).await.unwrap();
        plain
            .register_persistent(SERVICE, &provider(1))
            .await
            .unwrap();
        plain
            .register_persistent(SERVICE, &provider(2))
            .await
            .unwrap();
        let alice = ZkAdmin::connect(&format!("alice:secret@{}", zk.address()))
            .await
            .unwrap();
        alice
            .put_rule(&rule_key(), "conditions: ['=> host = 10.0.0.2']\n")
            .await
            .unwrap();
        alice
    });

    // A fresh source without credentials: the rule is refused as unreadable, the
    // providers apply.
    let live = live(CHAIN);
    let mut config = ZkConfig::for_chain(&live, zk.address());
    config.following.retry_delay = Duration::from_millis(100);
    let (_watching, rx) = watch(&live, Box::new(ZkSource::new(config)));
    let refused = wait_report(&rx, "the unreadable rule", |r| {
        matches!(r, Report::Refused { .. })
    });
    let text = refused.to_string();
    assert!(text.contains(RULE) && text.contains("NoAuth"), "{text}");
    wait_route(&live, &["10.0.0.1:20880", "10.0.0.2:20880"]);
    assert_eq!(live.stats().refused(), 1);
    assert!(
        live.stats()
            .by_source()
            .iter()
            .any(|c| &*c.source == "zookeeper"
                && c.result == UpdateResult::Refused
                && c.count == 1)
    );

    // Retried with backoff: reported once while it stays unreadable.
    std::thread::sleep(Duration::from_millis(1800));
    assert_eq!(live.stats().refused(), 1, "one report per reason");

    // Opened (an ACL change fires no watch): the next retry reads and applies it.
    let opened = Instant::now();
    rt.block_on(async {
        let owner = raw(&zk.address(), Some("alice:secret")).await;
        owner
            .set_acl(RULE, &Acls::anyone_all(), None)
            .await
            .unwrap();
    });
    wait_route(&live, &["10.0.0.2:20880"]);
    wait_report(
        &rx,
        "reads again",
        |r| matches!(r, Report::Status { message, .. } if message.contains("reads again")),
    );
    // The backoff tops out at 5 s: a read well within 12 s shows the node was retried (the
    // margin is for a loaded machine; the retry times are in docs/live.md).
    assert!(
        opened.elapsed() < Duration::from_secs(12),
        "{:?}",
        opened.elapsed()
    );
    drop(alice);
}

#[test]
fn registrations_are_made_again_on_every_new_session() {
    let mut zk = ZooKeeper::start("reregister");
    let rt = runtime();
    let (tx, rx) = channel::<String>();
    let address = ZkAddress::parse(&format!("zookeeper://{}?session=2000", zk.address())).unwrap();
    let registration = rt
        .block_on(ZkRegistration::start(
            &address,
            false,
            vec![(SERVICE.to_string(), provider(1))],
            move |e| {
                eprintln!("event: {e}");
                let _ = tx.send(e);
            },
        ))
        .unwrap();
    let providers = |zk: &ZooKeeper| {
        rt.block_on(async {
            ZkAdmin::connect(&zk.address())
                .await
                .unwrap()
                .providers(SERVICE)
                .await
                .unwrap()
        })
    };
    assert_eq!(providers(&zk), vec![provider(1)]);

    // Down longer than the session: the client declares it expired; the restarted
    // server still holds the old node until it expires the old session there.
    zk.stop();
    let expired = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(expired.contains("session expired"), "{expired}");
    zk.resume();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let e = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("re-registered");
        if e.contains("re-registered 1 provider(s)") {
            assert!(e.starts_with("new session 0x"), "{e}");
            break;
        }
    }
    // Past the old session's expiry on the server, the node is the new session's.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(providers(&zk), vec![provider(1)]);

    rt.block_on(registration.close());
    assert_eq!(providers(&zk), Vec::<String>::new());
}

#[test]
fn a_bad_address_is_refused_at_once_with_the_password_masked() {
    let live = live(CHAIN);
    for bad in [
        "zookeeper://alice:secret@",
        "alice:secret@127.0.0.1:21x81",
        "nacos://alice:secret@127.0.0.1:8848",
    ] {
        let started = Instant::now();
        let config = ZkConfig::for_chain(&live, bad);
        let error = match live.watch(Box::new(ZkSource::new(config)), |_| {}) {
            Ok(_) => panic!("{bad} accepted"),
            Err(e) => e.to_string(),
        };
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(error.contains("alice:***"), "{error}");
        assert!(!error.contains("secret"), "{error}");
        let admin = runtime().block_on(ZkAdmin::connect(bad)).unwrap_err();
        assert!(!admin.to_string().contains("secret"), "{admin}");
    }
}
