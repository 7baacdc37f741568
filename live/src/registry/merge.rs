//! Several registries feeding one chain: each registry's provider list kept apart (with
//! its own empty-push protection), and the list the chain takes made from them: all of
//! them merged, an address present in several taken once. With Dubbo's zone-aware choice
//! (some registry sets `preferred`, `zone` or `weight`), the merged list comes with a
//! [`RegistryTable`] saying which registries list each address: the chain then routes one
//! registry's providers per call ([`routechain_balance::Registries`]).
//!
//! The registries' sources push into [`Merge::pass`], which rewrites each provider list
//! into the combined one; everything else a source pushes (rules, unreadable nodes,
//! status lines) goes through with the registry named.
//!
//! Nothing is served before the config center's first read, as a Dubbo consumer reads its
//! rules before a reference serves: the other registries' lists are kept until then, and
//! the combined list goes with the config center's rules in one update. A chain never
//! routes the registries' providers without the rules, and a cold start's cache (rules
//! included) keeps serving until that update replaces it whole.

use std::collections::HashSet;
use std::sync::Arc;

use routechain_balance::{RegistryInfo, RegistryTable};
use routechain_core::Url;

use super::address::RegistryParams;
use crate::{ProviderText, Skipped, Update, parse_providers};

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
    local_zone: Option<Arc<str>>,
    protect_empty: bool,
    /// The position of the config center among `members`.
    center: usize,
    /// Whether the config center's first read went through.
    center_read: bool,
    /// Whether the wait for the config center was reported.
    waiting_said: bool,
    /// What the registries' lists skipped while kept, reported with the first combined
    /// list.
    kept_skipped: Vec<Skipped>,
    /// Whether a combined list was pushed yet.
    pushed: bool,
}

impl Merge {
    /// A merge of the registries `members` (name shown, parameters) whose rules come from
    /// `members[center]`; `zone_aware`: the combined list comes with the registries'
    /// table, for a consumer in `local_zone`.
    pub(super) fn new(
        members: Vec<(String, RegistryParams)>,
        center: usize,
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
            local_zone: local_zone.map(Arc::from),
            protect_empty,
            center,
            center_read: false,
            waiting_said: false,
            kept_skipped: Vec::new(),
            pushed: false,
        }
    }

    /// What registry `from` pushed, as the chain takes it: its provider list replaced by
    /// the combined one (left out when its empty list was held back, or kept while the
    /// config center has not been read), the rest with the registry named. `None`:
    /// nothing to push.
    pub(super) fn pass(&mut self, from: usize, update: Update) -> Option<Update> {
        let first_read = from == self.center
            && !self.center_read
            && matches!(
                update,
                Update::Providers { .. } | Update::Rule { .. } | Update::Batch(_)
            );
        if !first_read {
            return self.pass_one(from, update);
        }
        self.center_read = true;
        let passed = self.pass_one(from, update);
        if self.pushed || self.members.iter().all(|m| m.urls.is_empty()) {
            return passed;
        }
        // The config center's read held no provider list: the others' lists go with it.
        let name = self.members[from].name.clone();
        let mut updates: Vec<Update> = passed.into_iter().collect();
        updates.extend(self.combined_update(&format!("the first read at {name}"), Vec::new()));
        Some(Update::Batch(updates))
    }

    fn pass_one(&mut self, from: usize, update: Update) -> Option<Update> {
        let name = self.members[from].name.clone();
        match update {
            Update::Providers { origin, text } => self.providers(from, &origin, text),
            Update::Batch(items) => {
                let mut out: Vec<Update> = items
                    .into_iter()
                    .filter_map(|u| self.pass_one(from, u))
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
        let mut updates = Vec::new();
        let held = urls.is_empty() && !member.urls.is_empty() && self.protect_empty;
        let still_empty = urls.is_empty() && member.urls.is_empty();
        if held {
            // This registry's empty list is held back alone: the others' providers and
            // its last ones keep serving.
            tracing::warn!(registry = %name, "empty provider list held back");
            updates.push(Update::Status {
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
        if !self.center_read {
            // Kept, with what it skipped, until the config center's first read; said once.
            self.kept_skipped.extend(skipped);
            if !std::mem::replace(&mut self.waiting_said, true) {
                updates.push(Update::Status {
                    source: name.clone(),
                    message: format!(
                        "providers kept until the config center {} is read (no provider \
                         is served without its rules)",
                        self.members[self.center].name
                    ),
                });
            }
        } else if !(held || still_empty) || !self.pushed || !skipped.is_empty() {
            // Otherwise nothing to push: this registry's empty list was held back, or it
            // had none before either (the combined list is the one pushed before); the
            // first list is pushed whatever it is.
            updates.extend(self.combined_update(&format!("{origin} at {name}"), skipped));
        }
        match updates.len() {
            0 => None,
            1 => updates.pop(),
            _ => Some(Update::Batch(updates)),
        }
    }

    /// The combined list (and the registries' table, zone-aware) as the chain takes it,
    /// made on `origin`'s push.
    fn combined_update(&mut self, origin: &str, mut skipped: Vec<Skipped>) -> Vec<Update> {
        skipped.append(&mut self.kept_skipped);
        let serving: Vec<&str> = self
            .members
            .iter()
            .filter(|m| !m.urls.is_empty())
            .map(|m| m.name.as_str())
            .collect();
        let serving = if serving.is_empty() {
            "no registry".to_string()
        } else {
            serving.join(" + ")
        };
        let how = if self.zone_aware {
            "one chosen per call"
        } else {
            "merged"
        };
        let mut updates = vec![Update::Providers {
            origin: format!("{origin} (serving {serving}, {how})"),
            text: ProviderText::Parsed {
                urls: self.combined(),
                skipped,
            },
        }];
        if self.zone_aware {
            updates.push(Update::Registries(Arc::new(self.table())));
        }
        self.pushed = true;
        updates
    }

    /// The registries' providers in their order, each address once (the first registry's
    /// URL of it).
    fn combined(&self) -> Vec<Url> {
        let with: Vec<&Member> = self.members.iter().filter(|m| !m.urls.is_empty()).collect();
        if let [one] = with.as_slice() {
            return one.urls.clone();
        }
        let total = with.iter().map(|m| m.urls.len()).sum();
        let mut seen: HashSet<&str> = HashSet::with_capacity(total);
        let mut out = Vec::with_capacity(total);
        for m in with {
            for u in &m.urls {
                if seen.insert(u.address()) {
                    out.push(u.clone());
                }
            }
        }
        out
    }

    /// The registries Dubbo's consumer chooses among (those it subscribes to, in order)
    /// and which of them lists each address.
    fn table(&self) -> RegistryTable {
        let subscribed: Vec<&Member> = self.members.iter().filter(|m| m.params.subscribe).collect();
        let mut table = RegistryTable::new(
            subscribed
                .iter()
                .map(|m| RegistryInfo {
                    name: Arc::from(m.name.as_str()),
                    preferred: m.params.preferred,
                    zone: m.params.zone.as_deref().map(Arc::from),
                    weight: m.params.weight,
                    weighted: m.params.weighted,
                })
                .collect(),
            self.local_zone.clone(),
        );
        for (i, m) in subscribed.iter().enumerate() {
            for u in &m.urls {
                table.insert(u.address(), i);
            }
        }
        table
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

    /// Registries `a` (the config center) and `b`, merged; `protect`: each one's empty
    /// list held back.
    fn two(protect: bool) -> Merge {
        let plain = || RegistryParams::default();
        Merge::new(
            vec![("a".into(), plain()), ("b".into(), plain())],
            0,
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
            push(&mut m, 0, &[]),
            Some(Update::Providers { .. })
        ));
        assert!(push(&mut m, 1, &[]).is_none());
        assert_eq!(addresses(&push(&mut m, 1, &["h1:1"])), ["h1:1"]);
    }

    #[test]
    fn nothing_is_served_before_the_config_center_is_read() {
        let mut m = two(true);
        // b answers first: its list is kept, said once, with what it skipped.
        let kept = m.pass(
            1,
            Update::Providers {
                origin: "zookeeper:/dubbo/S/providers".into(),
                text: ProviderText::Urls(vec!["dubbo://h2:1/S".into(), "bad".into()]),
            },
        );
        assert!(
            matches!(&kept, Some(Update::Status { source, message }) if source == "b" && message.contains("config center a")),
            "{kept:?}"
        );
        assert!(push(&mut m, 1, &["h2:1", "h3:1"]).is_none());
        // a's first read: its rule and the combined list go in one update.
        let rule = Update::Rule {
            key: crate::RuleKey::new("S", "condition"),
            event: crate::RuleEvent::Added("conditions: []".into()),
            origin: "zookeeper:/dubbo/config/dubbo/S.condition-router".into(),
        };
        let first = m.pass(0, Update::Batch(vec![rule]));
        let Some(Update::Batch(items)) = &first else {
            panic!("{first:?}")
        };
        assert!(matches!(items[0], Update::Rule { .. }), "{items:?}");
        assert_eq!(addresses(&first), ["h2:1", "h3:1"]);
        let skipped = items.iter().find_map(|u| match u {
            Update::Providers {
                text: ProviderText::Parsed { skipped, .. },
                ..
            } => Some(skipped.len()),
            _ => None,
        });
        assert_eq!(skipped, Some(1));
        // Then each list goes through as it comes.
        assert_eq!(
            addresses(&push(&mut m, 0, &["h1:1"])),
            ["h1:1", "h2:1", "h3:1"]
        );
    }

    #[test]
    fn zone_aware_registries_merge_with_a_table_of_who_lists_each_address() {
        let mut m = Merge::new(
            vec![
                ("a".into(), RegistryParams::default()),
                ("b".into(), params(true, None)),
                (
                    "rules".into(),
                    RegistryParams {
                        subscribe: false,
                        ..RegistryParams::default()
                    },
                ),
            ],
            2,
            true,
            Some("hz".into()),
            false,
        );
        let table = |u: &Option<Update>| match u {
            Some(Update::Batch(items)) => items.iter().find_map(|u| match u {
                Update::Registries(t) => Some(t.clone()),
                _ => None,
            }),
            _ => None,
        };
        push(&mut m, 0, &["h1:1", "h2:1"]);
        push(&mut m, 1, &["h2:1", "h3:1"]);
        // The config center follows rules alone: its first read, with none, sends the
        // lists kept until then.
        let both = m.pass(2, Update::Batch(Vec::new()));
        assert_eq!(addresses(&both), ["h1:1", "h2:1", "h3:1"]);
        let t = table(&both).expect("a table with the list");
        // The registry not subscribed to is not chosen among.
        let names: Vec<&str> = t.registries().iter().map(|r| &*r.name).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(t.registries()[1].preferred);
        assert_eq!(t.zone(), Some("hz"));
        // An address in both registries is in each one's.
        let of = |a| t.registries_of(a);
        assert_eq!((of("h1:1"), of("h2:1"), of("h3:1")), (0b01, 0b11, 0b10));
        // The preferred one empties (no protection): the list and the table follow.
        let emptied = push(&mut m, 1, &[]);
        assert_eq!(addresses(&emptied), ["h1:1", "h2:1"]);
        let t = table(&emptied).unwrap();
        assert_eq!(
            (t.registries_of("h2:1"), t.registries_of("h3:1")),
            (0b01, 0)
        );
    }

    #[test]
    fn other_updates_pass_with_the_registry_named() {
        let mut m = Merge::new(
            vec![("zk b:2".into(), RegistryParams::default())],
            0,
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
