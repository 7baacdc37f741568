//! # routechain-testkit
//!
//! The test kit (a dev-only crate): realistic, deterministic providers, requests and chains, plus the naive
//! reference chain the benchmarks compare against.
//!
//! Used by the benchmarks (`benches/`), by tests and by demos, so that they all route the
//! same data:
//!
//! - [`providers`] / [`provider_lines`] / [`snapshot`]: `n` generated provider URLs of one
//!   service, seeded (the same `(n, seed)` always gives the same list). Each has 15
//!   parameters: `anyhost`, `application`, `interface`, `methods`, `side`, `version`,
//!   `group`, `region`, `idc`, `env`, `weight`, `timeout`, `dubbo`, `release`, `timestamp`,
//!   plus `dubbo.tag` on about 10% (`gray` 8%, `canary` 2%) and `degraded=true` on about 1%.
//! - [`consumer`]: the caller (region `beijing`, IDC `mt`).
//! - [`requests`]: a seeded mix of calls (methods `search`/`get`/`update`, a `group`
//!   attribute, a `dubbo.tag` attachment on about 10%).
//! - [`full_chain_yaml`] and the single-router chains in [`CHAINS`]: chain files for the
//!   built-in routers, built with [`build_state`] through the default registry, exactly as a
//!   user's chain file is.
//! - [`naive`]: the same full chain written the obvious way (a `Vec` of provider structs with
//!   `HashMap` params, filtered router by router) — the "what a user would write instead"
//!   baseline.
//! - [`edits`]: the check that routers' incremental provider updates route exactly as a
//!   fresh preparation.
//! - [`hostile`]: the hostile-input shapes the preparation benchmarks time.
//! - [`zookeeper`]: a real ZooKeeper server for tests; [`nacos`]: rnacos servers and
//!   clusters, and the Python Nacos writer; [`failover`]: what the failover tests share;
//!   [`wait_for`] polls a condition.
//!
//! ```
//! let snapshot = routechain_testkit::snapshot(1_000, 7);
//! assert_eq!(snapshot.len(), 1_000);
//! let first = &snapshot.providers()[0];
//! assert!(first.get("region").is_some() && first.get("idc").is_some());
//! ```

use std::sync::Arc;

use routechain::core::{ChainState, Request, Snapshot, Url};
use routechain::rules::ChainFile;
use routechain::rules::load::LoadError;

pub mod churn;
pub mod edits;
pub mod failover;
pub mod hostile;
pub mod nacos;
pub mod zookeeper;

/// Polls `f` every 20 ms until it returns `Some`, or panics after `timeout` with `what`.
pub fn wait_for<T>(
    timeout: std::time::Duration,
    what: &str,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The service every generated provider offers.
pub const SERVICE: &str = "com.example.search.IndexService";

/// The regions of the generated providers with their IDCs and their share of providers (%).
pub const REGIONS: [(&str, &[&str], u64); 3] = [
    ("beijing", &["mt", "zf"], 50),
    ("shanghai", &["sh1", "sh2"], 30),
    ("guangzhou", &["gz"], 20),
];

/// The provider groups (an index service's `idx_*` groups), evenly spread.
pub const GROUPS: [&str; 8] = [
    "idx_user",
    "idx_order",
    "idx_shop",
    "idx_item",
    "idx_review",
    "idx_ad",
    "idx_geo",
    "idx_log",
];

/// The methods of the service.
pub const METHODS: [&str; 4] = ["get", "search", "update", "delete"];

/// A small deterministic generator (splitmix64), independent of the routing RNG.
#[derive(Debug, Clone)]
pub struct Seeded(u64);

impl Seeded {
    /// A generator with `seed`.
    pub fn new(seed: u64) -> Self {
        Seeded(seed)
    }
    /// The next word.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (`n > 0`; the tiny modulo bias does not matter here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// The URL text of provider `i` drawn from `rng`.
fn provider_line(i: usize, rng: &mut Seeded) -> String {
    let mut pick = rng.below(100);
    let (region, idcs, _) = REGIONS
        .iter()
        .find(|(_, _, share)| {
            if pick < *share {
                true
            } else {
                pick -= share;
                false
            }
        })
        .copied()
        .unwrap_or(REGIONS[0]);
    let idc = idcs[rng.below(idcs.len() as u64) as usize];
    let group = GROUPS[rng.below(GROUPS.len() as u64) as usize];
    let version = match rng.below(100) {
        0..70 => "1.0.0",
        70..95 => "1.1.0",
        _ => "2.0.0",
    };
    let env = if rng.below(10) == 0 {
        "staging"
    } else {
        "prod"
    };
    let weight = match rng.below(10) {
        0 => 50,
        1 => 200,
        _ => 100,
    };
    let tag = match rng.below(100) {
        0..8 => "&dubbo.tag=gray",
        8..10 => "&dubbo.tag=canary",
        _ => "",
    };
    let degraded = if rng.below(100) == 0 {
        "&degraded=true"
    } else {
        ""
    };
    let host = format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255);
    format!(
        "dubbo://{host}:20880/{SERVICE}?anyhost=true&application=index-provider&dubbo=2.0.2\
         &env={env}&group={group}&idc={idc}&interface={SERVICE}&methods=get,search,update,delete\
         &region={region}&release=3.3.0&side=provider&timeout=3000&timestamp={ts}\
         &version={version}&weight={weight}{tag}{degraded}",
        ts = 1_700_000_000_000u64 + i as u64,
    )
}

/// Runs `f` `runs` times; prints the median, minimum and maximum wall time in ms and this
/// process's CPU time over the runs ([`cpu_seconds`]), and returns the median: the timing of
/// the measuring examples (`update_cost`, `edit_cost`).
pub fn time_median<T>(name: &str, runs: usize, mut f: impl FnMut() -> T) -> f64 {
    let mut walls = Vec::with_capacity(runs);
    let cpu = cpu_seconds();
    for _ in 0..runs {
        let t = std::time::Instant::now();
        let out = f();
        walls.push(t.elapsed().as_secs_f64() * 1e3);
        drop(out);
    }
    walls.sort_by(f64::total_cmp);
    let median = walls[walls.len() / 2];
    println!(
        "{name}: median {median:.3} ms (min {:.3}, max {:.3}) over {runs}, cpu {:.2} s total",
        walls[0],
        walls[walls.len() - 1],
        cpu_seconds() - cpu
    );
    median
}

/// [`time_median`] for updates applied as a source applies them: each run after a pause of
/// `pause` (not timed), in which what the previous run handed to the live chain's drop
/// thread is freed (a source pushes when a provider comes or goes, not back to back; back
/// to back, the timed run shares the two cores with the previous run's freeing). Prints
/// the wall median, minimum and maximum and the median of the running thread's CPU time
/// ([`thread_cpu_ms`]; the drop thread's and any helper thread's not included).
pub fn time_median_settled<T>(
    name: &str,
    runs: usize,
    pause: std::time::Duration,
    mut f: impl FnMut() -> T,
) -> f64 {
    let mut walls = Vec::with_capacity(runs);
    let mut cpus = Vec::with_capacity(runs);
    for _ in 0..runs {
        std::thread::sleep(pause);
        let c = thread_cpu_ms();
        let t = std::time::Instant::now();
        let out = f();
        walls.push(t.elapsed().as_secs_f64() * 1e3);
        cpus.push(thread_cpu_ms() - c);
        drop(out);
    }
    walls.sort_by(f64::total_cmp);
    cpus.sort_by(f64::total_cmp);
    let median = walls[walls.len() / 2];
    println!(
        "{name}: median {median:.3} ms (min {:.3}, max {:.3}) over {runs}, each after a {} ms \
         pause, thread CPU median {:.3} ms",
        walls[0],
        walls[walls.len() - 1],
        pause.as_millis(),
        cpus[cpus.len() / 2]
    );
    median
}

/// This thread's CPU time so far, in ms (`/proc/thread-self/schedstat`, nanoseconds); 0
/// where it is not available.
pub fn thread_cpu_ms() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e6)
}

/// This process's CPU time so far (user + system), in seconds, from `/proc/self/stat`
/// (clock ticks of 10 ms): the measuring examples print it next to wall time, so a figure
/// taken on a shared machine can be compared. 0 where `/proc` is not available.
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which is in parentheses).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line: 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

/// `n` provider URLs, one per line, generated from `seed`.
pub fn provider_lines(n: usize, seed: u64) -> String {
    let mut rng = Seeded::new(seed);
    let mut text = String::with_capacity(n * 330);
    for i in 0..n {
        text.push_str(&provider_line(i, &mut rng));
        text.push('\n');
    }
    text
}

/// `n` parsed provider URLs generated from `seed`.
pub fn providers(n: usize, seed: u64) -> Vec<Url> {
    let mut rng = Seeded::new(seed);
    (0..n)
        .map(|i| {
            Url::parse(&provider_line(i, &mut rng)).unwrap_or_else(|e| {
                // The generator writes only valid URLs; a failure here is a bug in it.
                panic!("generated provider URL does not parse: {e}")
            })
        })
        .collect()
}

/// A snapshot (generation 1) of `n` providers generated from `seed`.
pub fn snapshot(n: usize, seed: u64) -> Snapshot {
    Snapshot::new(1, providers(n, seed))
}

/// The consumer URL text of the benchmarks: application `index-web` in beijing / mt.
pub const CONSUMER: &str = "consumer://10.200.0.1/com.example.search.IndexService?application=index-web&region=beijing&idc=mt";

/// The consumer of the benchmarks (see [`CONSUMER`]).
pub fn consumer() -> Url {
    Url::parse(CONSUMER).unwrap_or_else(|e| panic!("CONSUMER does not parse: {e}"))
}

/// `count` requests generated from `seed`: method `search` 40%, `get` 40%, `update` 20%;
/// attribute `group` one group 90%, a two-group list 5%, `*` 5%; attachment `dubbo.tag=gray`
/// on 10%.
pub fn requests(count: usize, seed: u64) -> Vec<Request> {
    let mut rng = Seeded::new(seed ^ 0x5eed_0f7e_5700);
    (0..count)
        .map(|_| {
            let method = match rng.below(10) {
                0..4 => "search",
                4..8 => "get",
                _ => "update",
            };
            let group = match rng.below(20) {
                0 => "*".to_string(),
                1 => format!(
                    "{},{}",
                    GROUPS[rng.below(8) as usize],
                    GROUPS[rng.below(8) as usize]
                ),
                _ => GROUPS[rng.below(8) as usize].to_string(),
            };
            let mut request = Request::new()
                .with_service(SERVICE)
                .with_method(method)
                .with_argument(serde_json::Value::from(rng.below(1000)))
                .with_attribute("group", group);
            if rng.below(10) == 0 {
                request = request.with_attachment("dubbo.tag", "gray");
            }
            request
        })
        .collect()
}

/// The tag router alone: static tags (no dynamic rule), as Dubbo does without a tag rule.
pub const TAG_CHAIN_YAML: &str = "service: com.example.search.IndexService
routers:
  - type: tag
    priority: 100
";

/// The condition rule of the full chain (a rule document as Dubbo Admin writes it):
/// `search` calls go to the shanghai index cluster.
pub const CONDITION_RULE_YAML: &str = "configVersion: v3.0
scope: service
key: com.example.search.IndexService
enabled: true
force: false
conditions:
  - method = search => region = shanghai
";

/// The IDC-weight rule of the full chain: beijing split 50/50 between mt and zf,
/// shanghai as the cross region.
pub const IDC_RULE_YAML: &str = "idcs:
  beijing: [mt, zf]
  shanghai: [sh1, sh2]
  guangzhou: [gz]
route_tables:
  beijing: {mt: 50, zf: 50}
cross_region: [shanghai]
";

/// The group router alone, with its defaults (attribute `group`, param `group`, force).
pub const GROUP_CHAIN_YAML: &str = "service: com.example.search.IndexService
routers:
  - type: group
    priority: 200
";

/// A chain entry of `type_name` at `priority` with `rule` inline (indented under `rule:`).
fn entry(type_name: &str, priority: i32, rule: Option<&str>) -> String {
    let mut text = format!("  - type: {type_name}\n    priority: {priority}\n");
    if let Some(rule) = rule {
        text.push_str("    rule:\n");
        for line in rule.lines() {
            text.push_str("      ");
            text.push_str(line);
            text.push('\n');
        }
    }
    text
}

/// A chain file of the benchmarks' service with `entries` (router type, priority, rule
/// text indented under `rule:`), in order.
pub fn chain_of(entries: &[(&str, i32, Option<&str>)]) -> String {
    let mut text = format!("service: {SERVICE}\nrouters:\n");
    for (type_name, priority, rule) in entries {
        text.push_str(&entry(type_name, *priority, *rule));
    }
    text
}

/// The mesh rule of the benchmarks (application `index-provider`, as a list of its two
/// documents): gray-tagged calls to the staging subset (falling back to 2.0.0), `update`
/// 90/10 between 1.0.0 and 1.1.0, everything else 80/15/5 over the three versions.
pub const MESH_RULE_YAML: &str = "- kind: DestinationRule
  metadata: {name: index-provider}
  spec:
    subsets:
      - {name: v1, labels: {version: '1.0.0'}}
      - {name: v11, labels: {version: '1.1.0'}}
      - {name: v2, labels: {version: '2.0.0'}}
      - {name: staging, labels: {env: staging}}
- kind: VirtualService
  metadata: {name: index-provider}
  spec:
    dubbo:
      - services: [{exact: com.example.search.IndexService}]
        routedetail:
          - name: gray
            match: [{attachments: {dubboContext: {dubbo.tag: {exact: gray}}}}]
            route: [{destination: {subset: staging, fallback: {destination: {subset: v2}}}}]
          - name: updates
            match: [{method: {name_match: {exact: update}}}]
            route: [{weight: 90, destination: {subset: v1}}, {weight: 10, destination: {subset: v11}}]
          - name: default
            route:
              - {weight: 80, destination: {subset: v1}}
              - {weight: 15, destination: {subset: v11}}
              - {weight: 5, destination: {subset: v2}}
";

/// The mesh router alone (the rule of [`MESH_RULE_YAML`]).
pub fn mesh_chain_yaml() -> String {
    format!(
        "service: {SERVICE}\nrouters:\n{}",
        entry("mesh", -50, Some(MESH_RULE_YAML))
    )
}

/// The condition router alone (the rule of [`CONDITION_RULE_YAML`]).
pub fn condition_chain_yaml() -> String {
    format!(
        "service: {SERVICE}\nrouters:\n{}",
        entry("condition", 140, Some(CONDITION_RULE_YAML))
    )
}

/// The IDC-weight router alone (the rule of [`IDC_RULE_YAML`]).
pub fn idc_chain_yaml() -> String {
    format!(
        "service: {SERVICE}\nrouters:\n{}",
        entry("idc-weight", 300, Some(IDC_RULE_YAML))
    )
}

/// The full chain: tag (100) → condition (140) → group (200) → IDC-weight (300).
pub fn full_chain_yaml() -> String {
    format!(
        "service: {SERVICE}\nrouters:\n{}{}{}{}",
        entry("tag", 100, None),
        entry("condition", 140, Some(CONDITION_RULE_YAML)),
        entry("group", 200, None),
        entry("idc-weight", 300, Some(IDC_RULE_YAML)),
    )
}

/// A function giving a chain file's text.
pub type ChainText = fn() -> String;

/// The router types the chains use, each with its single-router chain text.
pub const CHAINS: [(&str, ChainText); 4] = [
    ("tag", || TAG_CHAIN_YAML.to_string()),
    ("condition", condition_chain_yaml),
    ("group", || GROUP_CHAIN_YAML.to_string()),
    ("idc-weight", idc_chain_yaml),
];

/// A live chain of [`full_chain_yaml`] (named `name`) with [`consumer`] as its consumer,
/// serving `snapshot`: what the update-cost examples apply provider pushes to.
pub fn live_full_chain(name: &str, snapshot: Snapshot) -> routechain::live::LiveChain {
    let file = ChainFile::parse(name, &full_chain_yaml(), None).expect("the full chain parses");
    live_chain_of(file, snapshot)
}

/// A live chain of no router (`routers: []`) over `snapshot`, with the [`consumer`]: what
/// the live chain and the service cost by themselves (the provider list's edit, the
/// balancer and health tables, the swap).
pub fn live_bare_chain(snapshot: Snapshot) -> routechain::live::LiveChain {
    let file =
        ChainFile::parse("bare.chain.yaml", "routers: []\n", None).expect("an empty chain parses");
    live_chain_of(file, snapshot)
}

fn live_chain_of(file: ChainFile, snapshot: Snapshot) -> routechain::live::LiveChain {
    routechain::live::LiveChain::with_providers(
        file,
        routechain::registry(),
        routechain::live::LiveOptions {
            consumer: Some(consumer()),
            ..routechain::live::LiveOptions::default()
        },
        snapshot,
    )
    .expect("the chain builds")
}

/// Parses `chain_yaml` and prepares it over `snapshot` for [`consumer`], through the
/// default registry ([`routechain::registry`]) — what `routechain route` does.
pub fn build_state(chain_yaml: &str, snapshot: Arc<Snapshot>) -> Result<ChainState, LoadError> {
    let file = ChainFile::parse("testkit.chain.yaml", chain_yaml, None)?;
    routechain::rules::load::build_state(&file, &routechain::registry(), snapshot, Some(consumer()))
}

/// True when every router type `chain_yaml` names is registered in the default registry.
pub fn chain_available(chain_yaml: &str) -> bool {
    let registry = routechain::registry();
    ChainFile::parse("testkit.chain.yaml", chain_yaml, None)
        .map(|f| {
            f.entries
                .iter()
                .all(|e| registry.get(&e.type_name).is_some())
        })
        .unwrap_or(false)
}

pub mod naive {
    //! The full chain written the obvious way: providers as structs with a
    //! `HashMap<String, String>` of params, each router a filter over a `Vec` that returns a
    //! new `Vec`, comparing strings per provider per call. Same semantics as the
    //! routechain chain of [`super::full_chain_yaml`] (checked by the
    //! `naive_equivalence` test); kept deliberately straightforward — it holds references,
    //! not clones, so it is the cheapest obvious version.

    use std::collections::HashMap;

    use routechain::core::{Request, Snapshot, Url};

    /// A provider as a user would model it.
    #[derive(Debug, Clone)]
    pub struct Provider {
        /// Position in the snapshot (to compare results).
        pub index: usize,
        /// `host:port`.
        pub address: String,
        /// The URL parameters.
        pub params: HashMap<String, String>,
    }

    impl Provider {
        /// Copies a parsed URL into the naive struct.
        pub fn from_url(index: usize, url: &Url) -> Self {
            Provider {
                index,
                address: url.address().to_string(),
                params: url
                    .params()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            }
        }
        fn param(&self, key: &str) -> Option<&str> {
            self.params.get(key).map(String::as_str)
        }
    }

    /// The naive model of a snapshot.
    pub fn from_snapshot(snapshot: &Snapshot) -> Vec<Provider> {
        snapshot
            .providers()
            .iter()
            .enumerate()
            .map(|(i, u)| Provider::from_url(i, u))
            .collect()
    }

    /// The consumer's params as a map.
    pub fn consumer_params(consumer: &Url) -> HashMap<String, String> {
        consumer
            .params()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Static tag routing (no dynamic rule).
    pub fn tag<'p>(
        input: Vec<&'p Provider>,
        request: &Request,
        consumer: &HashMap<String, String>,
    ) -> Vec<&'p Provider> {
        let tag = request
            .attachments
            .get("dubbo.tag")
            .or_else(|| consumer.get("dubbo.tag").map(String::as_str))
            .unwrap_or("");
        let force = request
            .attachments
            .get("dubbo.force.tag")
            .or_else(|| consumer.get("dubbo.force.tag").map(String::as_str))
            .is_some_and(|f| f.eq_ignore_ascii_case("true"));
        let untagged = |p: &&Provider| p.param("dubbo.tag").unwrap_or("").is_empty();
        if tag.is_empty() {
            return input.into_iter().filter(untagged).collect();
        }
        let tagged: Vec<&Provider> = input
            .iter()
            .copied()
            .filter(|p| p.param("dubbo.tag") == Some(tag))
            .collect();
        if !tagged.is_empty() || force {
            return tagged;
        }
        input.into_iter().filter(untagged).collect()
    }

    /// `method = search => region = shanghai`, force false.
    pub fn condition<'p>(input: Vec<&'p Provider>, request: &Request) -> Vec<&'p Provider> {
        if request.method.as_deref() != Some("search") {
            return input;
        }
        let matched: Vec<&Provider> = input
            .iter()
            .copied()
            .filter(|p| p.param("region") == Some("shanghai"))
            .collect();
        if matched.is_empty() { input } else { matched }
    }

    /// Group assignment with the defaults: attribute (else attachment) `group`, force.
    pub fn group<'p>(input: Vec<&'p Provider>, request: &Request) -> Vec<&'p Provider> {
        let Some(value) = request
            .attributes
            .get("group")
            .or_else(|| request.attachments.get("group"))
        else {
            return input;
        };
        if value.trim() == "*" {
            return input;
        }
        let wanted: Vec<&str> = value.split(',').map(str::trim).collect();
        input
            .into_iter()
            .filter(|p| p.param("group").is_some_and(|g| wanted.contains(&g)))
            .collect()
    }

    /// IDC weight with the rule of [`super::IDC_RULE_YAML`] for the beijing/mt consumer;
    /// `draw` in `0..100` picks the beijing IDC (`< 50` → mt, else zf).
    pub fn idc_weight<'p>(
        input: Vec<&'p Provider>,
        consumer: &HashMap<String, String>,
        draw: u64,
    ) -> Vec<&'p Provider> {
        let healthy: Vec<&Provider> = input
            .iter()
            .copied()
            .filter(|p| p.param("degraded") != Some("true"))
            .collect();
        let local = consumer.get("region").map(String::as_str).unwrap_or("");
        let mut chosen: Option<(&str, Vec<&Provider>)> = None;
        for region in [local, "shanghai"] {
            let in_region: Vec<&Provider> = healthy
                .iter()
                .copied()
                .filter(|p| p.param("region") == Some(region))
                .collect();
            if !in_region.is_empty() {
                chosen = Some((region, in_region));
                break;
            }
        }
        let Some((region, in_region)) = chosen else {
            return if healthy.is_empty() { input } else { healthy };
        };
        let target = if region == "beijing" {
            Some(if draw < 50 { "mt" } else { "zf" })
        } else if region == local {
            consumer.get("idc").map(String::as_str)
        } else {
            None // a cross region without a route table: the whole region
        };
        let result: Vec<&Provider> = match target {
            Some(idc) => in_region
                .iter()
                .copied()
                .filter(|p| p.param("idc").is_some_and(|v| v.eq_ignore_ascii_case(idc)))
                .collect(),
            None => in_region.clone(),
        };
        if result.is_empty() { in_region } else { result }
    }

    /// The full chain: tag → condition → group → IDC weight. An empty stage ends the
    /// chain (empty result), as in routechain.
    pub fn full_chain<'p>(
        providers: &'p [Provider],
        request: &Request,
        consumer: &HashMap<String, String>,
        draw: u64,
    ) -> Vec<&'p Provider> {
        let all: Vec<&Provider> = providers.iter().collect();
        let out = tag(all, request, consumer);
        if out.is_empty() {
            return out;
        }
        let out = condition(out, request);
        if out.is_empty() {
            return out;
        }
        let out = group(out, request);
        if out.is_empty() {
            return out;
        }
        idc_weight(out, consumer, draw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_realistic() {
        assert_eq!(provider_lines(500, 3), provider_lines(500, 3));
        assert_ne!(provider_lines(500, 3), provider_lines(500, 4));
        let s = snapshot(10_000, 42);
        let share = |key: &str, value: &str| {
            s.providers()
                .iter()
                .filter(|p| p.get(key) == Some(value))
                .count() as f64
                / 100.0
        };
        assert!((45.0..55.0).contains(&share("region", "beijing")));
        assert!((6.5..9.5).contains(&share("dubbo.tag", "gray")));
        assert!((1.0..3.0).contains(&share("dubbo.tag", "canary")));
        assert!((0.5..1.6).contains(&share("degraded", "true")));
        for g in GROUPS {
            assert!((10.5..14.5).contains(&share("group", g)), "{g}");
        }
        let addresses: std::collections::HashSet<&str> =
            s.providers().iter().map(|p| p.address()).collect();
        assert_eq!(addresses.len(), 10_000, "addresses are distinct");
        assert!(s.providers().iter().all(|p| p.params().len() >= 15));
    }

    #[test]
    fn requests_are_a_seeded_mix() {
        let r = requests(1_000, 1);
        assert_eq!(r.len(), 1_000);
        let searches = r
            .iter()
            .filter(|q| q.method.as_deref() == Some("search"))
            .count();
        let tagged = r
            .iter()
            .filter(|q| q.attachments.get("dubbo.tag").is_some())
            .count();
        assert!((350..450).contains(&searches), "{searches}");
        assert!((70..130).contains(&tagged), "{tagged}");
        assert!(r.iter().all(|q| q.attributes.get("group").is_some()));
    }

    #[test]
    fn naive_chain_follows_the_rules_on_a_small_list() {
        let text = "\
dubbo://10.0.0.1:20880/s?region=beijing&idc=mt&group=a
dubbo://10.0.0.2:20880/s?region=beijing&idc=zf&group=a
dubbo://10.0.0.3:20880/s?region=beijing&idc=zf&group=a&dubbo.tag=gray
dubbo://10.0.0.4:20880/s?region=shanghai&idc=sh1&group=a
dubbo://10.0.0.5:20880/s?region=shanghai&idc=sh1&group=b&degraded=true
";
        let s = Snapshot::parse_lines(1, text).unwrap();
        let providers = naive::from_snapshot(&s);
        let consumer = naive::consumer_params(&consumer());
        let run = |r: &Request, draw| -> Vec<usize> {
            naive::full_chain(&providers, r, &consumer, draw)
                .iter()
                .map(|p| p.index)
                .collect()
        };
        let get_a = Request::new()
            .with_method("get")
            .with_attribute("group", "a");
        assert_eq!(run(&get_a, 0), [0]);
        assert_eq!(run(&get_a, 99), [1]);
        // search goes to shanghai; beijing then has nothing, so the cross region serves.
        let search_a = Request::new()
            .with_method("search")
            .with_attribute("group", "a");
        assert_eq!(run(&search_a, 0), [3]);
        // gray: only the gray provider, in zf; a draw of mt falls back to the region.
        let gray = get_a.clone().with_attachment("dubbo.tag", "gray");
        assert_eq!(run(&gray, 99), [2]);
        assert_eq!(run(&gray, 0), [2]);
        // group b has only a degraded provider: it still beats none.
        let b = Request::new()
            .with_method("update")
            .with_attribute("group", "b");
        assert_eq!(run(&b, 0), [4]);
        // an unknown group is forced empty.
        let none = Request::new()
            .with_method("get")
            .with_attribute("group", "zzz");
        assert!(run(&none, 0).is_empty());
    }
}
