//! A method's own weight (`<method>.weight`, Dubbo's `getWeight` reads the weight at
//! method level) through the tower layer, on real tonic providers on 127.0.0.1: from a
//! provider's URL and from an override rule.

mod common;

use common::Provider;
use common::greeter::greeter_client::GreeterClient;

/// 40 round-robin calls of `SayHello` over `a` and `b` with `settings` added to the chain
/// file; the calls each answered.
async fn served(settings: &str, a: &Provider, b: &Provider) -> (u64, u64) {
    let (_live, mut client): (_, GreeterClient<_>) = common::layer_client(
        &format!(
            "service: helloworld.Greeter\nload_balance: roundrobin\ntimeout: 60s\nrouters: []\n{settings}\n"
        ),
        &[a, b],
    );
    for _ in 0..40 {
        client
            .say_hello(common::idempotent_hello())
            .await
            .expect("answered");
    }
    (a.served(), b.served())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_providers_method_weight_counts_for_a_method_it_lists() {
    // `a` weighs 300 for SayHello, 100 for the service: round robin gives it 3 calls of 4.
    let a = Provider::start("a", "methods=SayHello&SayHello.weight=300").await;
    let b = Provider::start("b", "").await;
    assert_eq!(served("", &a, &b).await, (30, 10));
    // Dubbo's getMethodParameterStrict: a method the provider does not list is not read.
    let a = Provider::start("a", "methods=Other&SayHello.weight=300").await;
    let b = Provider::start("b", "").await;
    assert_eq!(served("", &a, &b).await, (20, 20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_rules_method_weight_beats_the_providers() {
    // The rule gives `a` weight=900 (service level): `a`'s own SayHello.weight=100 (method
    // level) still wins, as in Dubbo's order. It gives `b` SayHello.weight=300, which `b`
    // does not list in `methods`: a rule's method level needs no listing, and beats `b`'s
    // own weight=5.
    let a = Provider::start("a", "methods=SayHello&SayHello.weight=100").await;
    let b = Provider::start("b", "weight=5").await;
    let dir = std::env::temp_dir().join(format!("routechain-method-weight-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rule = dir.join("weights.configurators.yaml");
    std::fs::write(
        &rule,
        format!(
            "configVersion: v2.7\nscope: service\nkey: helloworld.Greeter\nenabled: true\nconfigs:\n\
             - side: consumer\n  addresses: [0.0.0.0]\n  providerAddresses: ['{a}']\n  parameters: {{weight: '900'}}\n\
             - side: consumer\n  addresses: [0.0.0.0]\n  providerAddresses: ['{b}']\n  parameters: {{SayHello.weight: '300'}}\n",
            a = a.address,
            b = b.address
        ),
    )
    .unwrap();
    let got = served(&format!("overrides: ['{}']", rule.display()), &a, &b).await;
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(got, (10, 30));
}
