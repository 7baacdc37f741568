//! Several registries feeding one chain: each registry's provider list kept apart (with
//! its own empty-push protection), and the list the chain takes made from them: all of
//! them merged, an address present in several taken once, or Dubbo's zone-aware choice.
//!
//! The registries' sources push into [`Merge::pass`], which rewrites each provider list
//! into the combined one; everything else a source pushes (rules, unreadable nodes,
//! status lines) goes through with the registry named.

use std::collections::HashSet;

use routechain_core::Url;

use super::address::RegistryParams;
use crate::{ProviderText, Skipped, Update, parse_providers};

/// The registries whose providers the chain takes, by position. `zone_aware` (some
/// registry sets `preferred`, `zone` or `weight`) applies Dubbo's
/// `ZoneAwareClusterInvoker` order among the registries that have providers: the first
/// `preferred=true` one; else the first whose `zone` is `local_zone`; else all of them.
/// Without `zone_aware`, all of them. `counts[i]` is registry `i`'s provider count.
pub fn choose(
    params: &[&RegistryParams],
    counts: &[usize],
    zone_aware: bool,
    local_zone: Option<&str>,
) -> Vec<usize> {
    let available = |i: &usize| counts.get(*i).copied().unwrap_or(0) > 0;
    let all: Vec<usize> = (0..params.len()).filter(available).collect();
    if !zone_aware {
        return all;
    }
    if let Some(i) = all.iter().copied().find(|&i| params[i].preferred) {
        return vec![i];
    }
    if let Some(zone) = local_zone
        && let Some(i) = all
            .iter()
            .copied()
            .find(|&i| params[i].zone.as_deref() == Some(zone))
    {
        return vec![i];
    }
    all
}

/// One registry's last provider list.
struct Member {
    name: String,
    params: RegistryParams,
    urls: Vec<Url>,
}

/// The combined provider list of several registries, rebuilt on each registry's push.
pub(super) struct Merge {
    members: Vec<Member>,
    zone_aware: bool,
    local_zone: Option<String>,
    protect_empty: bool,
    /// The registries the last combined list came from; `None` before the first list.
    chosen: Option<Vec<usize>>,
}

impl Merge {
    /// A merge of the registries `members` (name shown, parameters).
    pub(super) fn new(
        members: Vec<(String, RegistryParams)>,
        zone_aware: bool,
        local_zone: Option<String>,
        protect_empty: bool,
    ) -> Self {
        Merge {
            members: members
                .into_iter()
                .map(|(name, params)| Member {
                    name,
                    params,
                    urls: Vec::new(),
                })
                .collect(),
            zone_aware,
            local_zone,
            protect_empty,
            chosen: None,
        }
    }

    /// What registry `from` pushed, as the chain takes it: its provider list replaced by
    /// the combined one (left out when the combined list is the same registries' and
    /// `from` is not among them), the rest with the registry named. `None`: nothing to
    /// push.
    pub(super) fn pass(&mut self, from: usize, update: Update) -> Option<Update> {
        let name = self.members[from].name.clone();
        match update {
            Update::Providers { origin, text } => self.providers(from, &origin, text),
            Update::Batch(items) => {
                let mut out: Vec<Update> = items
                    .into_iter()
                    .filter_map(|u| self.pass(from, u))
                    .collect();
                match out.len() {
                    0 => None,
                    1 => out.pop(),
                    _ => Some(Update::Batch(out)),
                }
            }
            Update::Status { message, .. } => Some(Update::Status {
                source: name,
                message,
            }),
            Update::Unreadable { origin, reason } => Some(Update::Unreadable {
                origin: format!("{origin} at {name}"),
                reason,
            }),
            other => Some(other),
        }
    }

    fn providers(&mut self, from: usize, origin: &str, text: ProviderText) -> Option<Update> {
        let (urls, skipped) = match text {
            ProviderText::Parsed { urls, skipped } => (urls, skipped),
            text => parse_providers(origin, text),
        };
        let member = &mut self.members[from];
        let name = member.name.clone();
        let skipped: Vec<Skipped> = skipped
            .into_iter()
            .map(|s| Skipped {
                location: format!("{} at {name}", s.location),
                reason: s.reason,
            })
            .collect();
        let mut notes = Vec::new();
        let held = urls.is_empty() && !member.urls.is_empty() && self.protect_empty;
        if held {
            // This registry's empty list is held back alone: the others' providers and
            // its last ones keep serving.
            tracing::warn!(registry = %name, "empty provider list held back");
            notes.push(Update::Status {
                source: name.clone(),
                message: format!(
                    "held back an empty provider list from {origin} (empty-push protection); \
                     its {} provider(s) keep serving",
                    member.urls.len()
                ),
            });
        } else {
            member.urls = urls;
        }
        let params: Vec<&RegistryParams> = self.members.iter().map(|m| &m.params).collect();
        let counts: Vec<usize> = self.members.iter().map(|m| m.urls.len()).collect();
        let chosen = choose(
            &params,
            &counts,
            self.zone_aware,
            self.local_zone.as_deref(),
        );
        // Nothing to push when the same registries serve and this one's list did not
        // change what they serve (it is not among them, or its empty list was held back);
        // the first list is pushed whatever it is.
        let unchanged = self.chosen.as_ref() == Some(&chosen) && (held || !chosen.contains(&from));
        let mut updates = notes;
        if !unchanged || !skipped.is_empty() {
            let merged = self.combined(&chosen);
            let from_names: Vec<&str> = chosen
                .iter()
                .map(|&i| self.members[i].name.as_str())
                .collect();
            updates.push(Update::Providers {
                origin: format!(
                    "{origin} at {name} (serving {})",
                    if from_names.is_empty() {
                        "no registry".to_string()
                    } else {
                        from_names.join(" + ")
                    }
                ),
                text: ProviderText::Parsed {
                    urls: merged,
                    skipped,
                },
            });
            self.chosen = Some(chosen);
        }
        match updates.len() {
            0 => None,
            1 => updates.pop(),
            _ => Some(Update::Batch(updates)),
        }
    }

    /// The providers of the `chosen` registries in their order, each address once (the
    /// first registry's URL of it).
    fn combined(&self, chosen: &[usize]) -> Vec<Url> {
        if let [one] = chosen {
            return self.members[*one].urls.clone();
        }
        let total = chosen.iter().map(|&i| self.members[i].urls.len()).sum();
        let mut seen: HashSet<&str> = HashSet::with_capacity(total);
        let mut out = Vec::with_capacity(total);
        for &i in chosen {
            for u in &self.members[i].urls {
                if seen.insert(u.address()) {
                    out.push(u.clone());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(preferred: bool, zone: Option<&str>) -> RegistryParams {
        RegistryParams {
            preferred,
            zone: zone.map(str::to_string),
            ..RegistryParams::default()
        }
    }

    #[test]
    fn the_zone_aware_choice_follows_dubbos_order() {
        let plain = params(false, None);
        let pref = params(true, None);
        let hz = params(false, Some("hz"));
        let sh = params(false, Some("sh"));
        // (registries, their provider counts, zone-aware, local zone, chosen)
        type Row<'a> = (
            Vec<&'a RegistryParams>,
            Vec<usize>,
            bool,
            Option<&'a str>,
            Vec<usize>,
        );
        let table: Vec<Row<'_>> = vec![
            // Merged by default, registries without providers left out.
            (vec![&plain, &plain], vec![2, 3], false, None, vec![0, 1]),
            (vec![&plain, &plain], vec![0, 3], false, None, vec![1]),
            (vec![&pref, &plain], vec![2, 3], false, None, vec![0, 1]),
            // Preferred first, while it has providers.
            (vec![&plain, &pref], vec![2, 3], true, None, vec![1]),
            (vec![&plain, &pref], vec![2, 0], true, None, vec![0]),
            (vec![&pref, &pref], vec![2, 3], true, None, vec![0]),
            (vec![&hz, &pref], vec![2, 3], true, Some("hz"), vec![1]),
            // Then the consumer's zone.
            (vec![&hz, &sh], vec![2, 3], true, Some("sh"), vec![1]),
            (vec![&hz, &sh], vec![2, 0], true, Some("sh"), vec![0]),
            (vec![&hz, &sh], vec![2, 3], true, Some("bj"), vec![0, 1]),
            (vec![&hz, &sh], vec![2, 3], true, None, vec![0, 1]),
            // Then all of them.
            (
                vec![&plain, &plain, &hz],
                vec![1, 0, 1],
                true,
                None,
                vec![0, 2],
            ),
            (vec![&plain, &plain], vec![0, 0], true, None, vec![]),
        ];
        for (i, (ps, counts, aware, zone, want)) in table.into_iter().enumerate() {
            assert_eq!(choose(&ps, &counts, aware, zone), want, "row {i}");
        }
    }

    fn urls(addrs: &[&str]) -> ProviderText {
        ProviderText::Urls(addrs.iter().map(|a| format!("dubbo://{a}/S")).collect())
    }

    fn addresses(update: &Option<Update>) -> Vec<String> {
        let providers = match update {
            Some(Update::Providers { text, .. }) => text,
            Some(Update::Batch(items)) => match items.iter().find_map(|u| match u {
                Update::Providers { text, .. } => Some(text),
                _ => None,
            }) {
                Some(t) => t,
                None => return Vec::new(),
            },
            _ => return Vec::new(),
        };
        match providers {
            ProviderText::Parsed { urls, .. } => {
                urls.iter().map(|u| u.address().to_string()).collect()
            }
            _ => panic!("not parsed"),
        }
    }

    /// Registries `a` and `b`, merged; `protect`: each one's empty list held back.
    fn two(protect: bool) -> Merge {
        let plain = || RegistryParams::default();
        Merge::new(
            vec![("a".into(), plain()), ("b".into(), plain())],
            false,
            None,
            protect,
        )
    }

    fn push(m: &mut Merge, from: usize, addrs: &[&str]) -> Option<Update> {
        m.pass(
            from,
            Update::Providers {
                origin: "zookeeper:/dubbo/S/providers".into(),
                text: urls(addrs),
            },
        )
    }

    #[test]
    fn lists_merge_once_per_address_and_an_empty_registry_is_held_alone() {
        let mut m = two(true);
        assert_eq!(
            addresses(&push(&mut m, 0, &["h1:1", "h2:1"])),
            ["h1:1", "h2:1"]
        );
        assert_eq!(
            addresses(&push(&mut m, 1, &["h2:1", "h3:1"])),
            ["h1:1", "h2:1", "h3:1"]
        );
        // Registry b empties: held back alone, said so; the merge is unchanged, not pushed.
        let held = push(&mut m, 1, &[]);
        assert!(
            matches!(&held, Some(Update::Status { source, message }) if source == "b" && message.contains("held back")),
            "{held:?}"
        );
        // Registry a's next change merges with b's last list.
        assert_eq!(
            addresses(&push(&mut m, 0, &["h1:1"])),
            ["h1:1", "h2:1", "h3:1"]
        );
        // Without protection, its providers leave the merge.
        let mut m = two(false);
        push(&mut m, 0, &["h1:1"]);
        push(&mut m, 1, &["h3:1"]);
        assert_eq!(addresses(&push(&mut m, 1, &[])), ["h1:1"]);
    }

    #[test]
    fn the_first_list_is_pushed_even_when_empty() {
        let mut m = two(true);
        assert!(matches!(
            push(&mut m, 1, &[]),
            Some(Update::Providers { .. })
        ));
        assert!(push(&mut m, 0, &[]).is_none());
        assert_eq!(addresses(&push(&mut m, 0, &["h1:1"])), ["h1:1"]);
    }

    #[test]
    fn a_preferred_registry_serves_alone_and_the_others_changes_are_not_pushed() {
        let mut m = Merge::new(
            vec![
                ("a".into(), RegistryParams::default()),
                ("b".into(), params(true, None)),
            ],
            true,
            None,
            false,
        );
        assert_eq!(addresses(&push(&mut m, 0, &["h1:1"])), ["h1:1"]);
        assert_eq!(addresses(&push(&mut m, 1, &["h2:1"])), ["h2:1"]);
        // A change of a registry not serving pushes nothing.
        assert!(push(&mut m, 0, &["h1:1", "h4:1"]).is_none());
        // The preferred one empties (no protection): the other serves.
        assert_eq!(addresses(&push(&mut m, 1, &[])), ["h1:1", "h4:1"]);
    }

    #[test]
    fn other_updates_pass_with_the_registry_named() {
        let mut m = Merge::new(
            vec![("zk b:2".into(), RegistryParams::default())],
            false,
            None,
            true,
        );
        let status = m.pass(
            0,
            Update::Status {
                source: "zookeeper".into(),
                message: "connected".into(),
            },
        );
        assert!(
            matches!(&status, Some(Update::Status { source, .. }) if source == "zk b:2"),
            "{status:?}"
        );
        let unreadable = m.pass(
            0,
            Update::Unreadable {
                origin: "zookeeper:/x".into(),
                reason: "NoAuth".into(),
            },
        );
        assert!(
            matches!(&unreadable, Some(Update::Unreadable { origin, .. }) if origin == "zookeeper:/x at zk b:2"),
            "{unreadable:?}"
        );
    }
}
