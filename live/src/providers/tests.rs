//! The provider-list edits against their definition: after any sequence of pushed lists
//! and override-rule changes, the serving snapshot holds exactly the registered providers
//! with the rules applied, and providers the rules did not touch keep their URLs.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use routechain_core::{Snapshot, Url};
use routechain_rules::configurators::OverrideRule;

use super::{AppCounts, Registered, TextCache, follow, parse_providers_reusing};
use crate::ProviderText;
use crate::overrides::{self, OverrideContext};

/// The override rules a step may serve under: none; a weight for three providers; two
/// providers disabled and one weighted.
const RULES: [&str; 3] = [
    "",
    "configVersion: v2.7\nkey: svc\nconfigs:\n  - side: consumer\n    \
     providerAddresses: ['10.0.0.1:20880', '10.0.0.2:20880', '10.0.0.3:20880']\n    \
     parameters: {weight: '7'}\n",
    "configVersion: v2.7\nkey: svc\nconfigs:\n  - side: consumer\n    \
     providerAddresses: ['10.0.0.2:20880', '10.0.0.5:20880']\n    \
     parameters: {disabled: 'true'}\n  - side: consumer\n    \
     providerAddresses: ['10.0.0.4:20880']\n    parameters: {weight: '3'}\n",
];

fn universe() -> Vec<Url> {
    (0..20)
        .map(|i| {
            Url::parse(&format!(
                "dubbo://10.0.0.{i}:20880/svc?application={}",
                ["shop", "cart", ""][i % 3]
            ))
            .unwrap()
        })
        .collect()
}

fn raws(urls: &[Url]) -> Vec<String> {
    let mut v: Vec<String> = urls.iter().map(|u| u.raw().to_string()).collect();
    v.sort();
    v
}

proptest! {
    #[test]
    fn the_serving_snapshot_is_the_registered_list_with_the_rules_applied(
        steps in proptest::collection::vec(
            (proptest::collection::vec(0usize..20, 0..25), 0usize..3), 1..12),
    ) {
        let all = universe();
        let parsed: Vec<OverrideRule> = RULES[1..]
            .iter()
            .map(|t| OverrideRule::parse("rules", t).unwrap())
            .collect();
        let nodes: Vec<BTreeMap<crate::RuleKey, Arc<OverrideRule>>> = std::iter::once(BTreeMap::new())
            .chain(parsed.iter().map(|r| {
                BTreeMap::from([(crate::RuleKey::new("svc::", "configurators"), Arc::new(r.clone()))])
            }))
            .collect();
        let cx = OverrideContext { consumer_host: "", consumer_app: None, provider_side: false };
        let mut registered = Registered::default();
        let mut serving = Snapshot::default();
        let mut rule = 0;
        for (generation, (picks, next_rule)) in steps.into_iter().enumerate() {
            // A list may name a provider twice.
            let list: Vec<Url> = picks.iter().map(|&i| all[i].clone()).collect();
            let entries = overrides::ordered(&nodes[next_rule], std::iter::empty());
            let rules_changed = next_rule != rule;
            rule = next_rule;
            let generation = generation as u64 + 2;
            let next = follow(registered.list(&serving), &registered.apps, list.clone(), generation);
            let d = registered.derive(
                Some(next), rules_changed, &entries, &cx, &serving, generation,
            );
            let edit = d.edit.expect("an edit of the serving snapshot");
            prop_assert_eq!(edit.old_len(), serving.len());
            prop_assert_eq!(edit.new_len(), d.snapshot.len());
            if !rules_changed {
                // The providers kept are the same URLs, in their order.
                for (i, p) in serving.providers().iter().enumerate() {
                    if let Some(j) = edit.new_index(i) {
                        prop_assert!(Url::ptr_eq(p, &d.snapshot.providers()[j]));
                    }
                }
            }
            let want = overrides::apply(&list, &entries, &cx);
            prop_assert_eq!(raws(d.snapshot.providers()), raws(&want));
            // The invariant: the registered list's served providers are the snapshot's.
            prop_assert_eq!(d.snapshot.generation(), generation);
            let served = d.registered.served(&d.snapshot);
            prop_assert_eq!(served.len(), d.snapshot.len());
            prop_assert!(served.iter().zip(d.snapshot.providers()).all(|(a, b)| Url::ptr_eq(a, b)));
            prop_assert_eq!(raws(d.registered.list(&d.snapshot).providers()), raws(&list));
            prop_assert_eq!(&d.registered.apps, &AppCounts::of(list.iter()));
            registered = d.registered;
            serving = d.snapshot;
        }
    }
}

#[test]
fn the_text_cache_keeps_the_lines_of_the_last_list_only() {
    let mut cache = TextCache::default();
    let line = |n: u8| format!("dubbo://10.0.0.{n}:20880/svc");
    let push = |cache: &mut TextCache, ns: &[u8]| {
        parse_providers_reusing(
            "t",
            ProviderText::Urls(ns.iter().map(|&n| line(n)).collect()),
            cache,
        )
        .0
    };
    let first = push(&mut cache, &[1, 2, 3, 3]);
    assert_eq!(cache.len(), 3);
    assert!(Url::ptr_eq(&first[2], &first[3]), "equal lines share a URL");
    let second = push(&mut cache, &[3, 1, 4]);
    assert_eq!(cache.len(), 3, "2 left, 4 came");
    assert!(Url::ptr_eq(&second[0], &first[2]) && Url::ptr_eq(&second[1], &first[0]));
    // Unchanged: nothing leaves; an empty list empties the cache.
    push(&mut cache, &[3, 1, 4]);
    assert_eq!(cache.len(), 3);
    push(&mut cache, &[]);
    assert_eq!(cache.len(), 0);
    // Lists that keep changing: the cache holds the last one and a few texts more.
    for k in 0..40u8 {
        push(&mut cache, &(k..k + 50).collect::<Vec<u8>>());
        assert_eq!(cache.len(), 50);
        assert!(
            cache.held() <= 50 + 8 + cache.held() / 64,
            "{}",
            cache.held()
        );
    }
}

#[test]
fn a_list_in_another_order_or_grown_in_the_middle_keeps_every_provider_in_place() {
    let all = universe();
    let list = Snapshot::from_shared(1, all.clone());
    let apps = AppCounts::of(all.iter());
    // Reversed: nothing changes.
    let reversed: Vec<Url> = all.iter().rev().cloned().collect();
    let (new, edit, counts) = follow(&list, &apps, reversed, 2);
    assert!(edit.is_identity(), "{edit:?}");
    assert_eq!(new.generation(), 2);
    assert_eq!(counts, apps);
    // One inserted in the middle, one removed: exactly that edit.
    let extra = Url::parse("dubbo://10.0.1.1:20880/svc?application=cart").unwrap();
    let mut grown = all.clone();
    grown.insert(7, extra.clone());
    grown.remove(3);
    let (new, edit, counts) = follow(&list, &apps, grown.clone(), 3);
    assert_eq!(edit.removed(), [3]);
    assert_eq!(edit.added(), 19..20);
    assert!(Url::ptr_eq(&new.providers()[19], &extra));
    assert_eq!(counts, AppCounts::of(grown.iter()));
    // Grown and cut at the end (a source keeping the same order): the pointer pass.
    let mut cut = all[2..].to_vec();
    cut.push(extra.clone());
    let (_, edit, _) = follow(&list, &apps, cut, 4);
    assert_eq!(edit.removed(), [0, 1]);
    assert_eq!(edit.added(), 18..19);
}

proptest! {
    /// The text cache (keyed by hashes of the texts) gives, for any sequence of lists pushed
    /// as lines or as URLs, exactly what parsing each list afresh gives (the same providers
    /// in order, the same skipped entries), reuses the URL of every text it held, and holds
    /// the valid texts of the last list only.
    #[test]
    fn the_text_cache_gives_what_a_fresh_parse_gives(
        steps in proptest::collection::vec(
            (proptest::collection::vec((0usize..12, 0usize..4), 0..16), any::<bool>()), 1..8),
    ) {
        // Valid URLs, one that does not parse, and lines the file format skips.
        let text = |i: usize| match i {
            10 => "dubbo://10.0.0.1:x/svc".to_string(),
            11 => "# a comment".to_string(),
            i => format!("dubbo://10.0.0.{i}:20880/svc?application=shop&k={}", "v".repeat(i * 40)),
        };
        let breaks = ["\n", "\r\n", "\r", "\n\n"];
        let mut cache = TextCache::default();
        let mut last: std::collections::HashMap<String, Url> = Default::default();
        for (entries, as_lines) in steps {
            let pushed = if as_lines {
                let mut s = String::new();
                for &(i, b) in &entries {
                    s.push_str(&text(i));
                    s.push_str(breaks[b]);
                }
                ProviderText::Lines(s)
            } else {
                ProviderText::Urls(entries.iter().filter(|e| e.0 != 11).map(|e| text(e.0)).collect())
            };
            let (fresh, fresh_skipped) = super::parse_providers("t", pushed.clone());
            let (got, skipped) = parse_providers_reusing("t", pushed, &mut cache);
            prop_assert_eq!(
                got.iter().map(|u| u.raw()).collect::<Vec<_>>(),
                fresh.iter().map(|u| u.raw()).collect::<Vec<_>>()
            );
            prop_assert_eq!(skipped, fresh_skipped);
            let mut now: std::collections::HashMap<String, Url> = Default::default();
            for u in &got {
                if let Some(before) = last.get(&*u.raw()) {
                    prop_assert!(Url::ptr_eq(before, u), "a text cached is reused");
                }
                if let Some(same) = now.get(&*u.raw()) {
                    prop_assert!(Url::ptr_eq(same, u), "equal texts share a URL");
                }
                now.insert(u.raw().to_string(), u.clone());
            }
            prop_assert_eq!(cache.len(), now.len());
            // Texts of earlier lists are forgotten within a small slack.
            prop_assert!(cache.held() <= now.len() + 8 + cache.held() / 64);
            last = now;
        }
    }

    /// Lines end at `\n`, `\r\n` or a lone `\r`, as in every other input.
    #[test]
    fn lines_split_as_the_rule_files_do(text in "[a\r\n ]{0,24}") {
        let ours: Vec<(usize, &str)> = super::numbered_lines(&text).collect();
        let theirs: Vec<(usize, &str)> =
            routechain_rules::located::lines(&text).enumerate().collect();
        prop_assert_eq!(ours, theirs);
    }
}

/// What a list pushed as lines or URLs must give, computed plainly: every entry parsed on
/// its own, in order, lines numbered by `routechain_rules::located::lines`.
fn plain_parse(origin: &str, text: &ProviderText) -> (Vec<String>, Vec<crate::Skipped>) {
    let mut urls = Vec::new();
    let mut skipped = Vec::new();
    match text {
        ProviderText::Lines(t) => {
            for (n, line) in routechain_rules::located::lines(t).enumerate() {
                let trimmed = line.trim();
                if trimmed.is_empty() || trimmed.starts_with('#') {
                    continue;
                }
                let lead = &line[..line.len() - line.trim_start().len()];
                match Url::parse(trimmed) {
                    Ok(u) => urls.push(u.raw().to_string()),
                    Err(e) => skipped.push(crate::Skipped {
                        location: format!("{origin}:{}:{}", n + 1, lead.chars().count() + e.column),
                        reason: format!("invalid provider URL: {}", e.reason),
                    }),
                }
            }
        }
        ProviderText::Urls(us) => {
            for u in us {
                match Url::parse(u) {
                    Ok(u) => urls.push(u.raw().to_string()),
                    Err(e) => skipped.push(crate::Skipped {
                        location: format!("{origin}: {u:?} column {}", e.column),
                        reason: format!("invalid provider URL: {}", e.reason),
                    }),
                }
            }
        }
        ProviderText::Parsed { .. } => unreachable!("not a text"),
    }
    (urls, skipped)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// A list resolved in stretches on two threads, split at any line break (lines) or any
    /// index (URLs), or at all of them, gives what parsing every entry on its own gives, in order (the
    /// skipped entries' line numbers included), reuses the URL of every text the cache
    /// held from the list before, shares one URL between equal texts (also when one is in
    /// each stretch, or both are new), and leaves exactly the list's valid texts marked.
    #[test]
    fn a_list_split_anywhere_gives_what_the_whole_list_gives(
        before in proptest::collection::vec(0usize..8, 0..6),
        entries in proptest::collection::vec((0usize..11, 0usize..5), 0..9),
        as_lines in any::<bool>(),
    ) {
        let text = |i: usize| match i {
            7 => "dubbo://10.0.0.1:x/svc".to_string(),
            8 => "# a comment".to_string(),
            9 => "  dubbo://10.0.0.9:20880/svc  ".to_string(),
            10 => String::new(),
            i => format!("dubbo://10.0.0.{i}:20880/svc?application=shop"),
        };
        let breaks = ["\n", "\r\n", "\r", "\n\n", "\r\r\n"];
        let make = |entries: &[(usize, usize)]| {
            if as_lines {
                let mut s = String::new();
                for &(i, b) in entries {
                    s.push_str(&text(i));
                    s.push_str(breaks[b]);
                }
                ProviderText::Lines(s)
            } else {
                ProviderText::Urls(
                    entries.iter().filter(|e| e.0 != 8).map(|e| text(e.0)).collect(),
                )
            }
        };
        let first = make(&before.iter().map(|&i| (i, 0)).collect::<Vec<_>>());
        let pushed = make(&entries);
        let (want, want_skipped) = plain_parse("t", &pushed);
        let points: Vec<usize> = match &pushed {
            ProviderText::Lines(t) => {
                let mut p: Vec<usize> = (0..=t.len()).filter_map(|k| super::split_lines(t, k)).collect();
                p.dedup();
                p
            }
            ProviderText::Urls(u) => (0..=u.len()).collect(),
            ProviderText::Parsed { .. } => unreachable!(),
        };
        // Two stretches split at each point, and as many stretches as there are points.
        let mut splits: Vec<Vec<usize>> = points.iter().map(|&p| vec![p]).collect();
        splits.push(points.clone());
        for at in splits {
            let mut cache = TextCache::default();
            let (held, _) = super::parse_split("t", first.clone(), &mut cache, &[]);
            let held: std::collections::HashMap<String, Url> =
                held.iter().map(|u| (u.raw().to_string(), u.clone())).collect();
            let (got, skipped) = super::parse_split("t", pushed.clone(), &mut cache, &at);
            prop_assert_eq!(got.iter().map(|u| u.raw().to_string()).collect::<Vec<_>>(), want.clone(), "split at {:?}", at);
            prop_assert_eq!(&skipped, &want_skipped, "split at {:?}", at);
            let mut now: std::collections::HashMap<String, Url> = Default::default();
            for u in &got {
                if let Some(before) = held.get(&*u.raw()) {
                    prop_assert!(Url::ptr_eq(before, u), "a text cached is reused (split at {:?})", at);
                }
                if let Some(same) = now.get(&*u.raw()) {
                    prop_assert!(Url::ptr_eq(same, u), "equal texts share a URL (split at {:?})", at);
                }
                now.insert(u.raw().to_string(), u.clone());
            }
            prop_assert_eq!(cache.len(), now.len(), "split at {:?}", at);
        }
    }

    /// Lines split anywhere ([`super::split_lines`]) are the lines of the whole, the second
    /// stretch's numbered on from the first's count.
    #[test]
    fn lines_split_at_a_break_are_the_lines_of_the_whole(text in "[a\r\n ]{0,24}", from in 0usize..26) {
        let whole: Vec<(usize, &str)> = super::numbered_lines(&text).collect();
        match super::split_lines(&text, from) {
            Some(at) => {
                prop_assert!(at >= from && at <= text.len());
                let mut first = super::numbered_lines(&text[..at]);
                let mut got: Vec<(usize, &str)> = first.by_ref().collect();
                let base = first.read;
                got.extend(super::numbered_lines(&text[at..]).map(|(n, l)| (n + base, l)));
                prop_assert_eq!(got, whole);
            }
            None => prop_assert!(!text.as_bytes().get(from..).is_some_and(|b| b.contains(&b'\n') || b.contains(&b'\r'))),
        }
    }
}

proptest! {
    /// The stretches of a list of lines start just after a line break (never between `\r`
    /// and `\n`), ascending, inside the text.
    #[test]
    fn stretches_of_lines_start_after_a_break(text in "[a\r\n ]{0,40}", size in 1usize..12) {
        let bounds = super::line_bounds(&text, size);
        let b = text.as_bytes();
        let mut last = 0;
        for &at in &bounds {
            prop_assert!(at > last && at < text.len(), "{:?}", bounds);
            prop_assert!(b[at - 1] == b'\n' || (b[at - 1] == b'\r' && b[at] != b'\n'), "{:?}", bounds);
            last = at;
        }
    }
}
