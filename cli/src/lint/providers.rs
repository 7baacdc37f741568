//! Lints of a rule against a provider list (`routechain check --providers FILE`): IDCs a
//! route table forgets or lists in vain, values a rule names that no provider carries, a
//! then-part that matches no provider, and a condition an earlier one shadows.
//!
//! Each lint reads the rule through the routers' public compiled forms and the provider
//! URLs as the routers read them (`Url::get`: parameters and derived keys such as
//! `address`), so what it says is what the router would do over that list.

use std::collections::{BTreeMap, BTreeSet};

use routechain::core::TypedFactory;
use routechain::core::{Snapshot, Url};
use routechain::routers::condition::matcher::{Key, Pattern, Term};
use routechain::routers::condition::parser::Side;
use routechain::routers::condition::{Action, SourceText};
use routechain::routers::group::{GroupRouter, group_names};
use routechain::routers::tag::{HostPort, TagRouter};
use serde_json::Value;

use routechain::balance::lb::{WeightParam, parse_weight};
use routechain::rules::{LocatedError, Location};

use super::condition::{definition, texts};
use super::{Code, Problem, RuleRef};

/// RC206 for each provider whose `weight` Dubbo would not read as a weight: negative (the
/// provider gets no call while another has a weight), out of Java's int range or not a
/// number (Dubbo's pick fails; routechain reads 100). `text` reads the list's text again,
/// only when there is a problem, to locate each at its line and `weight=`; when it cannot,
/// the problem names the provider by its position.
pub fn weights(
    origin: &str,
    text: impl FnOnce() -> Option<String>,
    providers: &Snapshot,
) -> Vec<Problem> {
    let bad: Vec<(usize, &str, &str)> = providers
        .providers()
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let value = p.get("weight")?;
            let what = match parse_weight(value) {
                WeightParam::Weight(_) => return None,
                WeightParam::Negative => {
                    "is negative: the provider weighs 0 and gets no call while another candidate weighs more (Dubbo's `Math.max(weight, 0)`)"
                }
                WeightParam::OutOfRange => {
                    "is out of range: a weight is an integer from 0 to 2147483647 (Dubbo's pick fails on it; routechain reads the default, 100)"
                }
                WeightParam::NotANumber => {
                    "is not a number: a weight is an integer from 0 to 2147483647 (Dubbo's pick fails on it; routechain reads the default, 100)"
                }
            };
            Some((i, value, what))
        })
        .collect();
    if bad.is_empty() {
        return Vec::new();
    }
    let text = text().unwrap_or_default();
    let text = text.trim_start_matches('\u{feff}').replace("\r\n", "\n");
    // The provider lines in list order (blank lines and comments skipped), numbered from 1.
    let lines: Vec<(usize, &str)> = text
        .split(['\n', '\r'])
        .enumerate()
        .filter(|(_, l)| {
            let l = l.trim();
            !l.is_empty() && !l.starts_with('#')
        })
        .map(|(i, l)| (i + 1, l))
        .collect();
    let located = lines.len() == providers.len();
    bad.into_iter()
        .map(|(i, value, what)| {
            let p = &providers.providers()[i];
            let message = format!("provider {i} ({}): weight={value} {what}", p.address());
            let error = match lines.get(i) {
                Some(&(line, l)) if located => {
                    // Columns count characters, as every location does.
                    let column = l
                        .find("weight=")
                        .map_or(1, |at| l[..at].chars().count() + 1);
                    let mut e = LocatedError::in_source(
                        origin,
                        l,
                        Location { line: 1, column },
                        None,
                        message,
                    );
                    e.location.line = line;
                    e
                }
                _ => LocatedError::in_source(
                    origin,
                    "",
                    Location { line: 1, column: 1 },
                    None,
                    message,
                ),
            };
            Problem::new(Code::ProviderWeight, error)
        })
        .collect()
}

/// The provider-list lints of one rule; `consumer` resolves `$name` references.
pub fn lint(rule: RuleRef<'_>, providers: &Snapshot, consumer: Option<&Url>) -> Vec<Problem> {
    match rule.type_name {
        "condition" => condition(rule, providers, consumer),
        "idc-weight" => idc_weight(rule, providers),
        "tag" => tags(rule, providers),
        "group" => group(rule, providers),
        "affinity" => affinity(rule, providers),
        _ => Vec::new(),
    }
}

/// Up to five values of `key` among the providers, for messages.
fn seen_values(providers: &Snapshot, key: &str) -> String {
    let values: BTreeSet<&str> = providers
        .providers()
        .iter()
        .filter_map(|p| p.get(key))
        .collect();
    if values.is_empty() {
        return format!("no provider has `{key}`");
    }
    let shown: Vec<&str> = values.iter().take(5).copied().collect();
    let more = if values.len() > 5 { ", ..." } else { "" };
    format!("providers have {key} = {}{more}", shown.join(", "))
}

/// The providers a then-part keeps (every term holds).
fn kept(terms: &[Term], providers: &Snapshot, consumer: Option<&Url>) -> Vec<usize> {
    providers
        .providers()
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            terms.iter().all(|t| match &t.key {
                Key::Provider(name) => t.matches_value(p.get(name), consumer),
                _ => false,
            })
        })
        .map(|(i, _)| i)
        .collect()
}

/// True when a then-part reads `$name` and no consumer is known to resolve it.
fn unresolved(terms: &[Term], consumer: Option<&Url>) -> bool {
    consumer.is_none() && terms.iter().any(Term::has_consumer_ref)
}

fn condition(rule: RuleRef<'_>, providers: &Snapshot, consumer: Option<&Url>) -> Vec<Problem> {
    let mut out = Vec::new();
    let Some(def) = definition(rule) else {
        return out;
    };
    let compiled = &def;
    let n = providers.len();
    let mut then_sets: Vec<Option<Vec<usize>>> = Vec::new();
    for (i, cond) in compiled.conditions.iter().enumerate() {
        let parts: Vec<&[Term]> = match &cond.action {
            Action::Then(terms) => vec![&terms[..]],
            Action::Destinations(ds) => ds.iter().map(|d| d.terms.as_slice()).collect(),
            Action::Blocklist | Action::TrafficDisabled => Vec::new(),
        };
        // The then-part texts of this condition, in order: its v3.0 text, or one per v3.1
        // destination (read from the document: the compiled rule keeps none).
        let then_texts: Vec<Option<SourceText>> = if parts.is_empty() {
            Vec::new()
        } else {
            texts(rule, compiled, i)
                .into_iter()
                .filter(|(_, side)| side != &Some(Side::When))
                .map(|(text, _)| text)
                .collect()
        };
        let mut set = None;
        for (terms, field) in parts.into_iter().zip(&then_texts) {
            if unresolved(terms, consumer) {
                continue;
            }
            if let Some(field) = field {
                for t in terms {
                    value_lints(rule, field, t, providers, consumer, &mut out);
                }
            }
            let keep = kept(terms, providers, consumer);
            if keep.is_empty() && !terms.is_empty() {
                let effect = if compiled.force {
                    "with `force: true` every call it applies to gets no provider"
                } else {
                    "with `force: false` it is ignored and every provider stays"
                };
                // A part with terms was parsed from a text, so `field` is there.
                let path = field.as_ref().map_or(rule.path, |f| &f.path);
                let problem = Problem::at(
                    Code::ThenMatchesNoProvider,
                    rule.doc,
                    path,
                    None,
                    format!(
                        "condition #{i}: the then-part matches none of the {n} providers; {effect}"
                    ),
                );
                out.push(if compiled.force {
                    problem.into_error()
                } else {
                    problem
                });
            }
            if matches!(cond.action, Action::Then(_)) {
                set = Some(keep);
            }
        }
        then_sets.push(set);
    }
    // Shadowing: an earlier condition whose when-part every request of this one also
    // matches, and which leaves only providers this then-part excludes.
    for (j, cj) in compiled.conditions.iter().enumerate() {
        let Some(Some(sj)) = then_sets.get(j) else {
            continue;
        };
        if sj.is_empty() {
            continue;
        }
        for (i, ci) in compiled.conditions.iter().enumerate().take(j) {
            let Some(Some(si)) = then_sets.get(i) else {
                continue;
            };
            let broader = ci.when.iter().all(|t| cj.when.contains(t));
            let effect = if compiled.force {
                "with `force: true` those requests get no provider"
            } else {
                "with `force: false` it is ignored for them"
            };
            if broader && !si.is_empty() && !si.iter().any(|p| sj.contains(p)) {
                let path = rule.path.key("conditions").index(j);
                out.push(Problem::at(
                    Code::Shadowed,
                    rule.doc,
                    &path,
                    None,
                    format!(
                        "condition #{j} is shadowed by condition #{i}: every request #{j} \
                         matches also matches #{i}, which keeps only providers #{j}'s \
                         then-part excludes; {effect}"
                    ),
                ));
                break;
            }
        }
    }
    out
}

/// RC203 for each exact `=` value of a then-part key that no provider carries.
fn value_lints(
    rule: RuleRef<'_>,
    field: &SourceText,
    term: &Term,
    providers: &Snapshot,
    consumer: Option<&Url>,
    out: &mut Vec<Problem>,
) {
    let Key::Provider(name) = &term.key else {
        return;
    };
    for p in &term.matches {
        let Pattern::Exact(value) = p else { continue };
        let carried = providers
            .providers()
            .iter()
            .any(|u| p.matches(u.get(name).unwrap_or(""), consumer) && u.get(name).is_some());
        if !carried {
            let offset = field
                .text
                .find(&**value)
                .map(|o| field.text[..o].chars().count());
            out.push(Problem::at(
                Code::ValueWithoutProvider,
                rule.doc,
                &field.path,
                offset,
                format!(
                    "no provider has {name} = {value} ({})",
                    seen_values(providers, name)
                ),
            ));
        }
    }
}

fn idc_weight(rule: RuleRef<'_>, providers: &Snapshot) -> Vec<Problem> {
    let mut out = Vec::new();
    let value = rule.value();
    let Some(map) = value.as_ref().and_then(Value::as_object) else {
        return out;
    };
    let param = |key: &str, default: &str| {
        map.get(key)
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_string()
    };
    let (region_param, idc_param) = (param("region_param", "region"), param("idc_param", "idc"));
    // region → idc → provider count (lower-cased, as the router compares them).
    let mut have: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for p in providers.providers() {
        if let (Some(r), Some(i)) = (p.get(&region_param), p.get(&idc_param)) {
            *have
                .entry(r.to_ascii_lowercase())
                .or_default()
                .entry(i.to_ascii_lowercase())
                .or_default() += 1;
        }
    }
    let Some(tables) = map.get("route_tables").and_then(Value::as_object) else {
        return out;
    };
    for (region, table) in tables {
        let Some(table) = table.as_object() else {
            continue;
        };
        let listed: BTreeSet<String> = table.keys().map(|k| k.to_ascii_lowercase()).collect();
        let table_path = rule.path.key("route_tables").key(region.clone());
        if let Some(idcs) = have.get(&region.to_ascii_lowercase()) {
            for (idc, count) in idcs {
                if !listed.contains(idc) {
                    out.push(Problem::at(
                        Code::IdcNotInRouteTable,
                        rule.doc,
                        &table_path,
                        None,
                        format!(
                            "IDC `{idc}` of region `{region}` has {count} provider(s) but is \
                             missing from the region's route table: it gets 0% of the \
                             region's calls"
                        ),
                    ));
                }
            }
        }
        for (idc, weight) in table {
            let count = have
                .get(&region.to_ascii_lowercase())
                .and_then(|m| m.get(&idc.to_ascii_lowercase()))
                .copied()
                .unwrap_or(0);
            let weight = weight.as_u64().unwrap_or(0);
            if count == 0 && weight > 0 {
                out.push(Problem::at(
                    Code::RouteTableIdcWithoutProvider,
                    rule.doc,
                    &table_path.key(idc.clone()),
                    None,
                    format!(
                        "IDC `{idc}` has weight {weight} in the route table of `{region}` but \
                         no provider: its {weight}% of the calls fall back"
                    ),
                ));
            }
        }
    }
    out
}

fn tags(rule: RuleRef<'_>, providers: &Snapshot) -> Vec<Problem> {
    let mut out = Vec::new();
    let Some(doc) = rule.rule_doc() else {
        return out;
    };
    let Ok(compiled) = TypedFactory::new("tag", TagRouter).compile(doc) else {
        return out;
    };
    let at: Vec<HostPort<'_>> = providers
        .providers()
        .iter()
        .map(|p| HostPort::new(p.host(), p.port()))
        .collect();
    // A later tag with addresses and the same name replaces an earlier one.
    for (i, t) in compiled.tags.iter().enumerate() {
        let later = compiled.tags[i + 1..]
            .iter()
            .position(|u| u.name == t.name && !u.addresses.is_empty());
        if let Some(k) = later
            && !t.addresses.is_empty()
        {
            out.push(Problem::at(
                Code::Shadowed,
                rule.doc,
                &rule.path.key("tags").index(i),
                None,
                format!(
                    "tag `{}` is shadowed by the later tag of the same name (tags[{}]), \
                     which replaces it: these addresses are never used",
                    t.name,
                    i + 1 + k
                ),
            ));
        }
    }
    for (i, t) in compiled.tags.iter().enumerate() {
        let path = rule.path.key("tags").index(i);
        // Read as written, from the document's tree (no value of the rule is built).
        let name = rule.doc.value_at(&path.key("name"));
        if name.as_ref().and_then(Value::as_str) != Some(t.name.as_str()) {
            continue; // not the same order as written: say nothing rather than misplace it
        }
        for (j, a) in t.addresses.iter().enumerate() {
            if !at.iter().any(|hp| a.matches(hp)) {
                let written = rule.doc.value_at(&path.key("addresses").index(j));
                let text = written.as_ref().and_then(Value::as_str).unwrap_or("");
                out.push(Problem::at(
                    Code::ValueWithoutProvider,
                    rule.doc,
                    &path.key("addresses").index(j),
                    None,
                    format!("tag `{}`: no provider has the address {text}", t.name),
                ));
            }
        }
        for (j, m) in t.matches.iter().flatten().enumerate() {
            if !providers
                .providers()
                .iter()
                .any(|p| m.is_match(p.param(&m.key)))
            {
                out.push(Problem::at(
                    Code::ValueWithoutProvider,
                    rule.doc,
                    &path.key("match").index(j),
                    None,
                    format!(
                        "tag `{}`: no provider matches `{}` ({})",
                        t.name,
                        m.key,
                        seen_values(providers, &m.key)
                    ),
                ));
            }
        }
        let static_tag = providers
            .providers()
            .iter()
            .any(|p| p.param("dubbo.tag") == Some(t.name.as_str()));
        if t.addresses.is_empty() && t.matches.is_none() && !static_tag {
            out.push(Problem::at(
                Code::ValueWithoutProvider,
                rule.doc,
                &path.key("name"),
                None,
                format!(
                    "tag `{}` has no addresses and no provider carries it as dubbo.tag ({})",
                    t.name,
                    seen_values(providers, "dubbo.tag")
                ),
            ));
        }
    }
    out
}

fn group(rule: RuleRef<'_>, providers: &Snapshot) -> Vec<Problem> {
    let mut out = Vec::new();
    let Some(doc) = rule.rule_doc() else {
        return out;
    };
    let Ok(g) = TypedFactory::new("group", GroupRouter).compile(doc) else {
        return out;
    };
    if let Some(default) = &g.default_group {
        let carried = providers.providers().iter().any(|p| {
            p.get(&g.provider_param)
                .is_some_and(|v| group_names(v).any(|n| n == &**default || n == "*"))
        });
        if !carried {
            out.push(Problem::at(
                Code::ValueWithoutProvider,
                rule.doc,
                &rule.path.key("default_group"),
                None,
                format!(
                    "no provider is in group `{default}` ({})",
                    seen_values(providers, &g.provider_param)
                ),
            ));
        }
    }
    out
}

fn affinity(rule: RuleRef<'_>, providers: &Snapshot) -> Vec<Problem> {
    let mut out = Vec::new();
    let value = rule.value();
    let key = value
        .as_ref()
        .and_then(|v| v.get("affinityAware"))
        .and_then(|a| a.get("key"))
        .and_then(Value::as_str);
    if let Some(key) = key
        && !providers.providers().iter().any(|p| p.get(key).is_some())
    {
        out.push(Problem::at(
            Code::ValueWithoutProvider,
            rule.doc,
            &rule.path.key("affinityAware").key("key"),
            None,
            format!("no provider has the parameter `{key}`: affinity keeps nothing apart"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use routechain::core::FieldPath;
    use routechain::rules::YamlDoc;

    /// `(code, line, column)` of the provider lints of the condition rule `yaml`.
    fn located(yaml: &str) -> Vec<(&'static str, usize, usize)> {
        let doc = YamlDoc::parse("r.yaml", yaml).unwrap();
        let root = FieldPath::root();
        let rule = RuleRef {
            type_name: "condition",
            doc: &doc,
            path: &root,
        };
        let providers = Snapshot::parse_lines(1, "dubbo://10.0.0.1:20880/svc?version=1\n").unwrap();
        lint(rule, &providers, None)
            .into_iter()
            .map(|p| {
                let l = p.error.location;
                (p.code.as_str(), l.line, l.column)
            })
            .collect()
    }

    #[test]
    fn each_then_part_is_located_in_its_own_text() {
        // A blocklist condition before (its text has no then-part) ...
        let v30 = "conditions:\n  - a = 1 => false\n  - b = 2 => version = 9\n";
        assert_eq!(
            located(v30),
            [("RC203", 3, 24), ("RC204", 3, 5)],
            "condition #1's then-part is in line 3"
        );
        // ... and a v3.1 destination without `match` before.
        let v31 = "configVersion: v3.1\nconditions:\n  - to:\n      - weight: 10\n      \
                   - match: version=9\n";
        assert_eq!(located(v31), [("RC203", 5, 24), ("RC204", 5, 16)]);
    }
}
