//! Request JSON, then the request routed through a chain of every built-in router over a
//! few providers: located errors, and routing answers (the exit codes 0 / 3 of `route`)
//! whatever the request carries.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use routechain_core::{CallState, ChainState, Snapshot};
use routechain_rules::load::{LoadError, build_state, parse_request};
use routechain_rules::ChainFile;

const CHAIN: &str = r#"
routers:
  - type: mock
  - type: tag
    rule:
      force: false
      tags:
        - {name: gray, addresses: ["10.0.0.2:20880"]}
        - {name: "gray|canary", addresses: ["10.0.0.3"]}
  - type: condition
    rule:
      conditions:
        - "method = get* & arguments[0] = 1~9 => region = hz"
        - "attachments[x] = y => region != bj"
  - type: group
  - type: idc-weight
"#;

const PROVIDERS: &str = "\
dubbo://10.0.0.1:20880/s?region=hz&idc=hz1&group=g1&dubbo.tag=blue
dubbo://10.0.0.2:20880/s?region=hz&idc=hz2&group=g2
dubbo://10.0.0.3:20880/s?region=bj&idc=bj1
mock://10.0.0.4:20880/s
";

fn state() -> &'static ChainState {
    static STATE: OnceLock<ChainState> = OnceLock::new();
    STATE.get_or_init(|| {
        let chain = ChainFile::parse("chain.yaml", CHAIN, None).expect("the chain parses");
        let providers = Snapshot::parse_lines(1, PROVIDERS).expect("providers parse");
        build_state(
            &chain,
            &routechain_routers::builtin_registry(),
            Arc::new(providers),
            None,
        )
        .expect("the chain prepares")
    })
}

fuzz_target!(|text: &str| {
    match parse_request("request.json", text) {
        Ok(request) => {
            let mut call = CallState::new();
            // Ok: providers left (exit 0); Err: none left (exit 3). Never a panic.
            let _ = state().route(&request, &mut call);
        }
        Err(LoadError::Invalid(errors)) => routechain_fuzz::check_located(
            "request.json",
            routechain_rules::input::strip_bom(text),
            &errors,
        ),
        Err(e) => panic!("a request fails only with located problems: {e}"),
    }
});
