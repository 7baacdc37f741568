//! `routechain check --registry`: audits a live registry. Every rule its config center
//! holds is checked as `check --type TYPE --providers …` checks a file, against the
//! providers the registry holds now, and located at its node (or dataId) in place of a
//! file name; the report and the exit code are `check`'s.
//!
//! Which providers a rule is checked against: a service rule (`<interface>:<version>:
//! <group>.…`) those of its service with that version and group; an application rule
//! (`<app>.tag-router`, `<app>.MESHAPPRULE`, …) those of every service whose providers
//! belong to that application, or none (a consumer application's rule) when no provider
//! does. Of several registries, the rules come from the config center and the providers
//! from all of them, each address once.

use std::collections::{BTreeMap, HashSet};
use std::process::ExitCode;

use routechain::core::{Snapshot, Url};
use routechain::live::registry::{RegistryStore, RuleStore, StoredRule};
use routechain::live::{ProviderText, RegistryAddress, ServiceKey, parse_providers};

use super::check::{FileReport, Format, check_rule, count, exit, json, plural, text};
use super::{EXIT_INVALID, EXIT_UNAVAILABLE};

/// What to audit and how to report it.
pub struct Audit<'a> {
    /// The registry address (`--registry`).
    pub registry: &'a str,
    /// The reference whose rules to audit (`--service`); `None`: every rule.
    pub service: Option<&'a str>,
    /// The output format.
    pub format: Format,
    /// Exit 1 on warnings.
    pub deny_warnings: bool,
}

/// Runs the audit on a single-threaded runtime.
pub fn run(audit: &Audit<'_>) -> ExitCode {
    let address = match RegistryAddress::parse(audit.registry) {
        Ok(a) => a,
        Err(e) => {
            errln!(
                "{}",
                crate::out::paint_errors(&format!("routechain check: {e}"))
            );
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            errln!("routechain check: cannot start a runtime: {e}");
            return ExitCode::from(EXIT_UNAVAILABLE);
        }
    };
    runtime.block_on(async {
        let mut stores = Vec::new();
        for entry in address.entries() {
            match RegistryStore::connect(entry).await {
                Ok(admin) => stores.push(admin),
                Err(e) => {
                    errln!("routechain check: {e}");
                    return ExitCode::from(EXIT_UNAVAILABLE);
                }
            }
        }
        match reports(&stores, address.config_center(), audit.service).await {
            Ok(reports) => {
                let (errors, warnings) = count(reports.iter().flat_map(|r| &r.problems));
                match audit.format {
                    Format::Text => out!("{}", text(&reports)),
                    Format::Json => outln!("{}", json(&reports)),
                }
                exit(errors, warnings, audit.deny_warnings)
            }
            Err(e) => {
                errln!("routechain check: {e}");
                ExitCode::from(EXIT_UNAVAILABLE)
            }
        }
    })
}

/// The providers of `interface` in every registry, each address once, as URLs (a URL
/// that does not parse is left to `registry providers` to show).
async fn providers<S: RuleStore + Sync>(
    stores: &[S],
    interface: &str,
) -> Result<Vec<Url>, S::Error> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for store in stores {
        let texts = store.providers(interface).await?;
        let (urls, _) = parse_providers(interface, ProviderText::Urls(texts));
        for u in urls {
            if seen.insert(u.address().to_string()) {
                out.push(u);
            }
        }
    }
    Ok(out)
}

/// One report per rule of the config center `stores[center]` (those of `service` and its
/// providers' application with `service`), each checked against its providers.
pub async fn reports<S: RuleStore + Sync>(
    stores: &[S],
    center: usize,
    service: Option<&str>,
) -> Result<Vec<FileReport>, S::Error> {
    let mut rules: Vec<StoredRule> = stores[center].rules().await?;
    // Application name → the providers of that application, across services (read once,
    // when an application rule needs them).
    let mut by_app: Option<BTreeMap<String, Vec<Url>>> = None;
    if let Some(service) = service {
        let reference = ServiceKey::parse(service);
        let taken: Vec<Url> = providers(stores, &reference.interface)
            .await?
            .into_iter()
            .filter(|u| reference.matches(u))
            .collect();
        let apps: HashSet<String> = taken
            .iter()
            .filter_map(|u| u.param("application"))
            .map(str::to_string)
            .collect();
        let key = reference.rule_key();
        rules.retain(|r| r.key.key == key || apps.contains(&r.key.key));
        let mut map: BTreeMap<String, Vec<Url>> = BTreeMap::new();
        for u in taken {
            if let Some(app) = u.param("application") {
                map.entry(app.to_string()).or_default().push(u.clone());
            }
        }
        by_app = Some(map);
    }
    let registry = routechain::registry();
    let mut reports = Vec::with_capacity(rules.len());
    for rule in rules {
        let is_service = rule.key.key.contains(':');
        let (urls, whose) = if is_service {
            let reference = ServiceKey::parse(&rule.key.key);
            let urls: Vec<Url> = providers(stores, &reference.interface)
                .await?
                .into_iter()
                .filter(|u| reference.matches(u))
                .collect();
            (Some(urls), format!("service {}", rule.key.key))
        } else {
            if by_app.is_none() {
                let mut map: BTreeMap<String, Vec<Url>> = BTreeMap::new();
                for interface in stores[center].services().await? {
                    for u in providers(stores, &interface).await? {
                        if let Some(app) = u.param("application") {
                            map.entry(app.to_string()).or_default().push(u.clone());
                        }
                    }
                }
                by_app = Some(map);
            }
            let urls = by_app.as_ref().and_then(|m| m.get(&rule.key.key)).cloned();
            (urls, format!("application {}", rule.key.key))
        };
        let snapshot = urls.map(|u| Snapshot::from_shared(1, u));
        let mut report = check_rule(
            &rule.location,
            &rule.text,
            Some(&rule.key.router_type),
            snapshot.as_ref(),
            &registry,
        );
        if !report.what.is_empty() {
            report.what = match &snapshot {
                Some(s) => format!(
                    "{}, against the {} of {whose}",
                    report.what,
                    plural(s.len(), "provider")
                ),
                None => format!("{}; no provider of {whose}", report.what),
            };
        }
        report.problems.sort_by(|a, b| {
            (&a.error.origin, a.error.location, a.code).cmp(&(
                &b.error.origin,
                b.error.location,
                b.code,
            ))
        });
        reports.push(report);
    }
    Ok(reports)
}
