//! The Nacos source's loop: connect, subscribe, read everything, then apply what the
//! naming listener pushes and the rule configs read every second, probing the server.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

use super::{Clients, Ctx, Event, Listener, NacosAddress, NacosConfig, NacosError, View, connect};
use crate::{RuleKey, Update};

/// The source's loop: connect, subscribe, read everything, then apply what the listeners
/// report, probing the server every second.
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
    let mut outage: Option<String> = None;
    let clients = loop {
        let attempt = tokio::select! {
            _ = stop.changed() => return,
            r = connect(&address) => r,
        };
        match attempt {
            Ok(c) => break c,
            Err(e) => {
                let message = format!("{e}; the last good state keeps serving, retrying");
                if outage.as_deref() != Some(message.as_str()) {
                    tracing::warn!("{message}");
                    cx.status(message.clone());
                    outage = Some(message);
                }
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = tokio::time::sleep(config.retry_delay) => {}
                }
            }
        }
    };
    let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let listener = Arc::new(Listener(events_tx));
    let mut subscribed: BTreeSet<String> = BTreeSet::new();
    // `Some(reason)` while the server does not answer.
    let mut down: Option<String> = Some("not read yet".into());
    let mut probe = tokio::time::interval(Duration::from_secs(1));
    let mut rules = tokio::time::interval(config.rule_poll);
    let mut lookup = tokio::time::interval(config.lookup_interval);
    loop {
        if down.is_some() {
            match resync(&mut cx, &clients, &listener, &mut subscribed).await {
                Ok(()) => {
                    down = None;
                    config.connection.set(true);
                    cx.status(format!("connected to {address}"));
                }
                Err(e) => {
                    config.connection.set(false);
                    let message = format!("{e}; the last good state keeps serving, retrying");
                    if down.as_deref() != Some(message.as_str()) {
                        tracing::warn!("{message}");
                        cx.status(message.clone());
                    }
                    down = Some(message);
                }
            }
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = probe.tick() => {
                if down.is_none()
                    && let Err(e) = probe_server(&clients, &address).await
                {
                    config.connection.set(false);
                    let message = format!("{e}; the last good state keeps serving, retrying");
                    tracing::warn!("{message}");
                    cx.status(message.clone());
                    down = Some(message);
                }
            }
            _ = lookup.tick(), if down.is_none() => {
                if let Err(e) = follow_services(&mut cx, &clients, &listener, &mut subscribed).await {
                    cx.status(format!("{e}; retrying at the next look-up"));
                } else {
                    match cx.providers(&clients.config).await {
                        Ok(updates) => cx.send(updates),
                        Err(e) => down = Some(e.to_string()),
                    }
                }
            }
            _ = rules.tick(), if down.is_none() => {
                if let Err(e) = poll_rules(&mut cx, &clients).await {
                    tracing::warn!("{e}");
                    down = Some(e.to_string());
                }
            }
            Some(event) = events.recv(), if down.is_none() => {
                let mut batch = vec![event];
                while let Ok(e) = events.try_recv() {
                    batch.push(e);
                }
                if let Err(e) = apply(&mut cx, &clients, batch).await {
                    tracing::warn!("{e}");
                    down = Some(e.to_string());
                }
            }
        }
    }
}

/// Asks the server something cheap: it answers, or the source is disconnected.
async fn probe_server(clients: &Clients, address: &NacosAddress) -> Result<(), NacosError> {
    let ask = clients
        .naming
        .get_service_list(1, 1, Some(address.group().to_string()));
    match tokio::time::timeout(Duration::from_secs(3), ask).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(NacosError::Connect {
            address: address.to_string(),
            reason: e.to_string(),
        }),
        Err(_) => Err(NacosError::Connect {
            address: address.to_string(),
            reason: "the server did not answer in 3 s".into(),
        }),
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

/// Reads everything again (at start and after the server was unreachable) and pushes what
/// changed as one batch; a read that fails half-way pushes nothing.
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
        let mut updates = cx.providers(&clients.config).await?;
        for key in cx.keys() {
            updates.extend(cx.read_rule(&clients.config, &key).await?);
        }
        Ok::<_, NacosError>(updates)
    }
    .await;
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

/// Applies the instances the naming listener pushed, and re-reads every rule config.
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
            updates.extend(cx.providers(&clients.config).await?);
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
            updates.extend(cx.read_rule(&clients.config, &key).await?);
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
