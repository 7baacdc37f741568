//! The Nacos source's loop: connect to one server, subscribe, read everything, then apply
//! what the naming listener pushes and the rule configs read every poll, probing the server.
//!
//! The source chooses its server itself. `nacos-sdk`, given every server, stays on one that
//! froze (its ports open, nothing answered) until its own health check gives up: a check
//! after 5 s idle, three tries of 3 s each. Here the clients are built on one server at a
//! time; the server is probed every [`PROBE_EVERY`], also while a read is in flight, and
//! one silent for [`PROBE_TIMEOUT`] (or refusing) is left: its clients dropped, new ones
//! built on the next server, the silent one moved last, and everything read again. Until
//! a server answers nothing is pushed: the last good state keeps serving.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::{Clients, Ctx, Event, Listener, NacosAddress, NacosConfig, NacosError, View, connect};
use crate::{RuleKey, Update};

/// How often the server is probed. With [`PROBE_TIMEOUT`], a frozen server is left 1 to
/// 1.5 s after it froze, within the 2 s a ZooKeeper session's ping window allows (the
/// failover test prints it: `cargo test -p routechain-tests --test nacos_failover --
/// --nocapture`).
const PROBE_EVERY: Duration = Duration::from_millis(500);
/// How long a probe (a one-entry service list) may take before the server counts as
/// silent: a server that answers at all answers it in milliseconds.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long building the clients on one server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The servers, in the order they are tried: the address's, rotated by a per-process value
/// (so that processes spread over the servers), a server left moved last.
struct Servers(Vec<String>);

impl Servers {
    fn new(address: &NacosAddress) -> Self {
        let mut order = address.hosts().to_vec();
        let n = std::process::id() as usize;
        let len = order.len().max(1);
        order.rotate_left(n % len);
        Servers(order)
    }

    /// The server to try next.
    fn first(&self) -> &str {
        &self.0[0]
    }

    /// Moves the first server last.
    fn demote(&mut self) {
        self.0.rotate_left(1);
    }
}

/// One connection: its clients and the naming pushes made to its listener (a listener
/// of its own, so that a server left pushes nothing more).
struct Connection {
    clients: Clients,
    listener: Arc<Listener>,
    events: UnboundedReceiver<Event>,
    subscribed: BTreeSet<String>,
}

/// The source's loop: connect to a server and follow it until it fails, then the next.
pub(super) async fn run(
    config: NacosConfig,
    address: NacosAddress,
    tx: UnboundedSender<Update>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut cx = Ctx {
        config: &config,
        address: &address,
        tx: &tx,
        view: View::default(),
    };
    let mut servers = Servers::new(&address);
    // Whether an outage was said (once, until a server answers), and the servers failed
    // since.
    let (mut said, mut failures) = (false, 0);
    loop {
        let server = servers.first().to_string();
        let attempt = tokio::select! {
            _ = stop.changed() => return,
            r = open(&mut cx, &address, &server) => r,
        };
        let failure = match attempt {
            Ok(connection) => {
                (said, failures) = (false, 0);
                config.following.connection.set(true);
                cx.status(format!("connected to {server} of {address}"));
                match follow(&mut cx, connection, &mut stop).await {
                    None => return,
                    Some(e) => e,
                }
            }
            Err(e) => e,
        };
        config.following.connection.set(false);
        servers.demote();
        let message = format!("{failure}; the last good state keeps serving, retrying");
        if said {
            tracing::debug!("{message}");
        } else {
            tracing::warn!("{message}");
            cx.status(message);
            said = true;
        }
        // Every server tried in turn: a pause before the next round.
        failures += 1;
        if failures % address.hosts().len() == 0 {
            tokio::select! {
                _ = stop.changed() => return,
                _ = tokio::time::sleep(config.following.retry_delay) => {}
            }
        }
    }
}

/// Builds the clients on `server` and reads everything (pushing what changed); an error
/// names the server.
async fn open(
    cx: &mut Ctx<'_>,
    address: &NacosAddress,
    server: &str,
) -> Result<Connection, NacosError> {
    let clients = match tokio::time::timeout(CONNECT_TIMEOUT, connect(address, server)).await {
        Ok(r) => r?,
        Err(_) => {
            return Err(NacosError::Connect {
                address: format!("{server} of {address}"),
                reason: format!("no answer in {} s", CONNECT_TIMEOUT.as_secs()),
            });
        }
    };
    let (events_tx, events) = tokio::sync::mpsc::unbounded_channel();
    let mut connection = Connection {
        clients,
        listener: Arc::new(Listener(events_tx)),
        events,
        subscribed: BTreeSet::new(),
    };
    let Connection {
        clients,
        listener,
        subscribed,
        ..
    } = &mut connection;
    let mut probe = tokio::time::interval(PROBE_EVERY);
    probe.tick().await;
    let read = resync(cx, &*clients, &*listener, subscribed);
    guarded(&*clients, &mut probe, read).await?;
    Ok(connection)
}

/// Follows one connection until it fails (the error) or the source stops (`None`).
async fn follow(
    cx: &mut Ctx<'_>,
    connection: Connection,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> Option<NacosError> {
    let Connection {
        clients,
        listener,
        mut events,
        mut subscribed,
    } = connection;
    let mut probe = tokio::time::interval(PROBE_EVERY);
    let mut rules = tokio::time::interval(cx.config.rule_poll);
    let mut lookup = tokio::time::interval(cx.config.lookup_interval);
    // The first ticks are now: everything was just read.
    rules.tick().await;
    lookup.tick().await;
    loop {
        let result = tokio::select! {
            _ = stop.changed() => return None,
            _ = probe.tick() => probe_server(&clients).await,
            _ = lookup.tick() => {
                let read = async {
                    follow_services(cx, &clients, &listener, &mut subscribed).await?;
                    cx.providers(&clients).await
                };
                match guarded(&clients, &mut probe, read).await {
                    Ok(updates) => {
                        cx.send(updates);
                        Ok(())
                    }
                    Err(e @ NacosError::Connect { .. }) => Err(e),
                    Err(e) => {
                        cx.status(format!("{e}; retrying at the next look-up"));
                        Ok(())
                    }
                }
            }
            _ = rules.tick() => guarded(&clients, &mut probe, poll_rules(cx, &clients)).await,
            Some(event) = events.recv() => {
                let mut batch = vec![event];
                while let Ok(e) = events.try_recv() {
                    batch.push(e);
                }
                guarded(&clients, &mut probe, apply(cx, &clients, batch)).await
            }
        };
        if let Err(e) = result {
            return Some(e);
        }
    }
}

/// Runs `op` while probing the server at `probe`'s ticks (the same ones as between reads,
/// so that a probe is never more than [`PROBE_EVERY`] away): a server that falls silent
/// ends it with the probe's error (a read sent to a frozen server never returns).
async fn guarded<T>(
    clients: &Clients,
    probe: &mut tokio::time::Interval,
    op: impl Future<Output = Result<T, NacosError>>,
) -> Result<T, NacosError> {
    let watch = async {
        loop {
            probe.tick().await;
            if let Err(e) = probe_server(clients).await {
                return e;
            }
        }
    };
    tokio::select! {
        r = op => r,
        e = watch => Err(e),
    }
}

/// Asks the server something cheap: it answers, or the connection is lost.
async fn probe_server(clients: &Clients) -> Result<(), NacosError> {
    let ask = clients
        .naming
        .get_service_list(1, 1, Some(clients.group.clone()));
    let lost = |reason: String| NacosError::Connect {
        address: clients.server.clone(),
        reason,
    };
    match tokio::time::timeout(PROBE_TIMEOUT, ask).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(lost(e.to_string())),
        Err(_) => Err(lost(format!(
            "the server did not answer in {} s",
            PROBE_TIMEOUT.as_secs()
        ))),
    }
}

/// Subscribes to the services to follow now (unsubscribing from those no longer
/// matching) and reads the instances of the new ones.
async fn follow_services(
    cx: &mut Ctx<'_>,
    clients: &Clients,
    listener: &Arc<Listener>,
    subscribed: &mut BTreeSet<String>,
) -> Result<(), NacosError> {
    let names: BTreeSet<String> = cx
        .service_names(&clients.naming)
        .await?
        .into_iter()
        .collect();
    let group = Some(cx.address.group().to_string());
    for gone in subscribed.difference(&names) {
        let _ = clients
            .naming
            .unsubscribe(gone.clone(), group.clone(), Vec::new(), listener.clone())
            .await;
        cx.view.instances.remove(gone);
    }
    for name in names.difference(subscribed) {
        let op = |e: nacos_sdk::api::error::Error| NacosError::Op {
            op: "subscribe",
            what: name.clone(),
            reason: e.to_string(),
        };
        clients
            .naming
            .subscribe(name.clone(), group.clone(), Vec::new(), listener.clone())
            .await
            .map_err(op)?;
        let instances = clients
            .naming
            .get_all_instances(name.clone(), group.clone(), Vec::new(), false)
            .await
            .map_err(op)?;
        cx.view.instances.insert(name.clone(), instances);
    }
    *subscribed = names;
    Ok(())
}

/// Reads everything again (on every new connection) and pushes what changed as one
/// batch; a read that fails half-way pushes nothing.
async fn resync(
    cx: &mut Ctx<'_>,
    clients: &Clients,
    listener: &Arc<Listener>,
    subscribed: &mut BTreeSet<String>,
) -> Result<(), NacosError> {
    let rules = cx.view.rules.clone();
    let result = async {
        follow_services(cx, clients, listener, subscribed).await?;
        let group = Some(cx.address.group().to_string());
        for name in subscribed.iter() {
            let instances = clients
                .naming
                .get_all_instances(name.clone(), group.clone(), Vec::new(), false)
                .await
                .map_err(|e| NacosError::Op {
                    op: "list instances of",
                    what: name.clone(),
                    reason: e.to_string(),
                })?;
            cx.view.instances.insert(name.clone(), instances);
        }
        let mut updates = cx.providers(clients).await?;
        for key in cx.keys() {
            updates.extend(cx.read_rule(clients, &key).await?);
        }
        // A full read is sent even when it found nothing, so that a merge of several
        // registries knows this one was read (an empty batch applies nothing).
        if updates.is_empty() {
            updates.push(Update::Batch(Vec::new()));
        }
        Ok::<_, NacosError>(updates)
    }
    .await;
    finish(cx, rules, result)
}

/// Applies the instances the naming listener pushed.
async fn apply(cx: &mut Ctx<'_>, clients: &Clients, events: Vec<Event>) -> Result<(), NacosError> {
    let rules = cx.view.rules.clone();
    let result = async {
        let mut updates = Vec::new();
        let mut instances_changed = false;
        for Event(name, instances) in events {
            // A push of a service no longer followed is dropped.
            if let Some(held) = cx.view.instances.get_mut(&name) {
                *held = instances;
                instances_changed = true;
            }
        }
        if instances_changed {
            updates.extend(cx.providers(clients).await?);
        }
        Ok::<_, NacosError>(updates)
    }
    .await;
    finish(cx, rules, result)
}

/// Reads every rule config followed now and pushes what changed.
async fn poll_rules(cx: &mut Ctx<'_>, clients: &Clients) -> Result<(), NacosError> {
    let rules = cx.view.rules.clone();
    let result = async {
        let mut updates = Vec::new();
        for key in cx.keys() {
            updates.extend(cx.read_rule(clients, &key).await?);
        }
        Ok::<_, NacosError>(updates)
    }
    .await;
    finish(cx, rules, result)
}

/// Sends what a read found; a read that failed half-way sends nothing and puts the rules'
/// last pushed contents back (the next read pushes whatever it finds).
fn finish(
    cx: &mut Ctx<'_>,
    rules: HashMap<RuleKey, Option<String>>,
    result: Result<Vec<Update>, NacosError>,
) -> Result<(), NacosError> {
    match result {
        Ok(updates) => {
            cx.send(updates);
            Ok(())
        }
        Err(e) => {
            cx.view.rules = rules;
            cx.view.pushed = None;
            Err(e)
        }
    }
}
