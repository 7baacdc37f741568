//! The memory a large tag rule takes while it is loaded, compiled and prepared, measured
//! with a counting global allocator (`allocation-counter`): the peak of heap bytes in use
//! (above what was in use before) at each step, and the multiple of the rule's size.
//!
//! Run: `cargo run --release -p routechain-benches --example hostile_memory [TAGS]` (default
//! 100,000 tags, about 7.5 MB; 725,092 tags is a 52 MB rule);
//! `… hostile_memory conditions N` measures a condition rule of `N` conditions
//! (`method = mI => region = rJ & env != eK`) instead.

use std::sync::Arc;

use routechain::rules::ChainFile;
use routechain_testkit::hostile::{providers, tag_rule_chain};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let conditions = args.first().is_some_and(|a| a == "conditions");
    let tags: usize = args
        .get(usize::from(conditions))
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let snapshot = providers(10_000);
    let text = if conditions {
        routechain_testkit::hostile::conditions(tags)
    } else {
        tag_rule_chain(tags)
    };
    let size = text.len() as f64;
    let mb = |b: u64| b as f64 / 1e6;
    let mut file = None;
    let parse = allocation_counter::measure(|| {
        file = Some(ChainFile::parse("big.chain.yaml", &text, None).expect("the chain parses"));
    });
    let file = file.expect("measured");
    let mut state = None;
    let build = allocation_counter::measure(|| {
        state = Some(
            routechain::rules::load::build_state(
                &file,
                &routechain::registry(),
                snapshot.clone(),
                None,
            )
            .expect("the chain prepares"),
        );
    });
    drop(state);
    drop(file);
    let mut all = None;
    let whole = allocation_counter::measure(|| {
        let file = ChainFile::parse("big.chain.yaml", &text, None).expect("the chain parses");
        let state = routechain::rules::load::build_state(
            &file,
            &routechain::registry(),
            Arc::clone(&snapshot),
            None,
        )
        .expect("the chain prepares");
        all = Some((file, state));
    });
    let what = if conditions {
        "condition rule of"
    } else {
        "tag rule of"
    };
    println!("{what} {tags} entries: {:.1} MB", size / 1e6);
    println!(
        "parse: peak {:.1} MB, kept {:.1} MB",
        mb(parse.bytes_max),
        mb(parse.bytes_current.max(0) as u64)
    );
    println!(
        "compile + prepare: peak {:.1} MB, kept {:.1} MB",
        mb(build.bytes_max),
        mb(build.bytes_current.max(0) as u64)
    );
    println!(
        "whole load (parse, compile, prepare): peak {:.1} MB = {:.1}x the rule, kept {:.1} MB = {:.1}x",
        mb(whole.bytes_max),
        whole.bytes_max as f64 / size,
        mb(whole.bytes_current.max(0) as u64),
        whole.bytes_current as f64 / size
    );
}
