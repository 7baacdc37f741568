//! The outcomes the comments of `rules/examples/tag/*.chain.yaml` promise.

use std::sync::Arc;

use crate::builtin_registry;
use crate::test_support::route_state;
use routechain_core::{ChainState, Request, Snapshot, Url};
use routechain_rules::ChainFile;

fn load(name: &str) -> ChainState {
    let dir = routechain_rules::examples_dir().join("tag");
    let file = ChainFile::load(&dir.join(name)).expect("example parses");
    let entries = file.compile(&builtin_registry()).expect("example compiles");
    let text = std::fs::read_to_string(dir.join("providers.txt")).unwrap();
    let snapshot = Arc::new(Snapshot::parse_lines(1, &text).unwrap());
    let consumer = file.consumer.clone().unwrap_or_else(Url::empty);
    ChainState::new(None, snapshot, consumer, entries).unwrap()
}

fn with(attachments: &[(&str, &str)]) -> Request {
    let mut r = Request::new();
    for (k, v) in attachments {
        r = r.with_attachment(*k, *v);
    }
    r
}

#[test]
fn example_chains_route_as_their_comments_say() {
    let tag = |t: &'static str| with(&[("dubbo.tag", t)]);
    let forced = |t: &'static str| with(&[("dubbo.tag", t), ("dubbo.force.tag", "true")]);
    let cases: &[(&str, Request, &[usize])] = &[
        ("static.chain.yaml", tag("blue"), &[8]),
        ("static.chain.yaml", tag("red"), &[0, 1, 2, 3, 4, 5, 6, 7]),
        ("static.chain.yaml", forced("red"), &[]),
        (
            "static.chain.yaml",
            Request::new(),
            &[0, 1, 2, 3, 4, 5, 6, 7],
        ),
        ("dynamic.chain.yaml", tag("gray"), &[4, 5]),
        ("dynamic.chain.yaml", Request::new(), &[0, 1, 2, 3, 6, 7]),
        ("dynamic.chain.yaml", tag("blue"), &[8]),
        ("dynamic.chain.yaml", tag("red"), &[0, 1, 2, 3, 6, 7]),
        ("dynamic.chain.yaml", forced("red"), &[]),
        ("match.chain.yaml", tag("beta|team1|alice"), &[7]),
        ("match.chain.yaml", tag("beta|team2"), &[6, 7]),
        ("match.chain.yaml", forced("beta|team2"), &[]),
        ("match.chain.yaml", tag("no-region"), &[9]),
        (
            "mock.chain.yaml",
            Request::new(),
            &[0, 1, 2, 3, 4, 5, 6, 7, 8],
        ),
        (
            "mock.chain.yaml",
            with(&[("invocation.need.mock", "true")]),
            &[9],
        ),
        (
            "mock.chain.yaml",
            with(&[("invocation.need.mock", "no")]),
            &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        ),
        // Untagged: 0-3, 6, 7 after the tag router; beijing among them: 0, 1, 6, 7 (4 of 6).
        ("affinity.chain.yaml", Request::new(), &[0, 1, 6, 7]),
        // Gray: 4 (beijing) and 5 (shanghai): 1 of 2 is 50% >= 20%.
        ("affinity.chain.yaml", tag("gray"), &[4]),
    ];
    for (file, request, want) in cases {
        let state = load(file);
        assert_eq!(route_state(&state, request), *want, "{file} {request:?}");
    }
}
