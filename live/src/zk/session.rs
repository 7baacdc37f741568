//! The source's connection loop: a session, its watches and reads, a new session after
//! the old one expired; and [`ZkConnection`], the connection's state for metrics.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;
use zookeeper_client::{
    AddWatchMode, Client, Error as ZkClientError, EventType, SessionInfo, SessionState,
};

use super::failover::{Failed, Servers};
use super::{Ctx, End, View, ZkAddress, ZkConfig};
use crate::Update;
use crate::dubbo::rule_path;

/// Whether the source has a session with the registry now: shared by the source and
/// whoever shows it (`watch --metrics` exports it as `routechain_registry_connected`).
pub type ZkConnection = crate::connection::RegistryConnection;

pub(super) async fn run(
    config: ZkConfig,
    address: ZkAddress,
    tx: UnboundedSender<Update>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut cx = Ctx {
        config: &config,
        tx: &tx,
        view: View::default(),
        new_app_keys: false,
        unreadable: Default::default(),
        unreadable_news: Vec::new(),
    };
    let mut servers = Servers::new(&address);
    // The session to reopen after leaving a server, and since when it has had no server.
    let mut resume: Option<(SessionInfo, Instant, Duration)> = None;
    let mut outage: Option<String> = None;
    loop {
        if *stop.borrow() {
            return;
        }
        // A session without a server for longer than the client library allows (7/5 of
        // its timeout, as the library's own reconnection does) has expired.
        if let Some((_, since, timeout)) = &resume
            && since.elapsed() > *timeout * 7 / 5
        {
            resume = None;
            cx.status("session expired; opening a new session (the last good state keeps serving)");
        }
        let attempt = tokio::select! {
            _ = stop.changed() => return,
            r = servers.connect(&address, config.session_timeout, resume.as_ref().map(|r| &r.0)) => r,
        };
        let pinned = match attempt {
            Ok(p) => p,
            Err(Failed::Expired) => {
                resume = None;
                cx.status(
                    "session expired; opening a new session (the last good state keeps serving)",
                );
                continue;
            }
            Err(Failed::Unreachable(e)) => {
                let message = format!("{e}; the last good state keeps serving, retrying");
                if outage.as_deref() != Some(message.as_str()) {
                    tracing::warn!("{message}");
                    cx.status(message.clone());
                    outage = Some(message);
                }
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = tokio::time::sleep(config.following.retry_delay) => continue,
                }
            }
        };
        outage = None;
        config.following.connection.set(true);
        let client = &pinned.client;
        let resumed = resume
            .take()
            .is_some_and(|(s, ..)| s.id() == client.session_id());
        if resumed {
            cx.status(format!(
                "reconnected to {}; re-watching and re-reading rules and providers (session {})",
                pinned.server,
                client.session_id()
            ));
        } else {
            cx.status(format!(
                "connected to {} of {address} (session {})",
                pinned.server,
                client.session_id()
            ));
        }
        // A server that had the session before may be behind the one it moved from: bring
        // this one up to date before reading.
        if resumed && let Err(e) = client.sync("/").await {
            tracing::warn!("ZooKeeper sync after reconnecting failed (reading anyway): {e}");
        }
        let end = session(client, &mut cx, &mut stop).await;
        config.following.connection.set(false);
        match end {
            End::Stop => return,
            End::Left(why) => {
                // The same session is reopened on another server; this one is tried last.
                tracing::warn!(server = pinned.server, "ZooKeeper {why}; reconnecting");
                cx.status(format!(
                    "disconnected from {}: {why}; the last good state keeps serving",
                    pinned.server
                ));
                servers.demote(&pinned.server);
                resume = Some((
                    client.session().clone(),
                    Instant::now(),
                    client.session_timeout(),
                ));
            }
            End::Reconnect(why) => {
                tracing::warn!("ZooKeeper {why}; reconnecting (the last good state keeps serving)");
                cx.status(format!(
                    "{why}; reconnecting (the last good state keeps serving)"
                ));
            }
        }
        // Abandoned: its task stops with nothing more sent.
        drop(pinned);
    }
}

/// Adds a persistent watch on every path; each watcher forwards its node events (as the
/// path) to `events`.
async fn install_watches(
    client: &Client,
    cx: &mut Ctx<'_>,
    paths: &[String],
    events: &tokio::sync::mpsc::UnboundedSender<Arc<str>>,
) -> Result<tokio::task::JoinSet<()>, String> {
    let mut forwarders = tokio::task::JoinSet::new();
    for path in paths {
        let mut watcher = match client.watch(path, AddWatchMode::Persistent).await {
            Ok(w) => w,
            // A node this session may not watch (its ACL) is reported as unreadable, and
            // the rest watched.
            Err(e) => match cx.unreadable(path, e) {
                Ok(()) => continue,
                Err(e) => return Err(format!("cannot watch {path}: {e}")),
            },
        };
        let events = events.clone();
        let path: Arc<str> = Arc::from(path.as_str());
        forwarders.spawn(async move {
            loop {
                let event = watcher.changed().await;
                if event.event_type == EventType::Session {
                    if event.session_state.is_terminated() {
                        break; // the watcher must not be polled after a terminal state
                    }
                    continue;
                }
                if events.send(path.clone()).is_err() {
                    break;
                }
            }
        });
    }
    Ok(forwarders)
}

async fn session(
    client: &Client,
    cx: &mut Ctx<'_>,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> End {
    let (ev_tx, mut ev_rx) = tokio::sync::mpsc::unbounded_channel::<Arc<str>>();
    let mut states = client.state_watcher();
    let mut forwarders: Option<tokio::task::JoinSet<()>> = None;
    let mut need_resync = true;
    loop {
        if need_resync {
            // (Re-)watch first, then read: a change between the two is seen by both at
            // worst, never by neither. After a reconnection the old watches are dropped
            // first (a server that restarted may have lost them, and events sent while
            // disconnected are lost either way).
            if let Some(mut old) = forwarders.take() {
                old.shutdown().await;
            }
            let mut paths = cx.config.watched_paths();
            paths.extend(cx.view.app_keys.iter().map(rule_path));
            paths.extend(cx.view.each_keys.iter().map(rule_path));
            paths.sort();
            paths.dedup();
            cx.new_app_keys = false;
            match install_watches(client, cx, &paths, &ev_tx).await {
                Ok(f) => forwarders = Some(f),
                Err(e) => {
                    tracing::debug!("ZooKeeper watches not set ({e}); retrying after reconnection");
                }
            }
            if forwarders.is_some() {
                match cx.resync(client).await {
                    // Keys under a newly learnt providers' application: watch and re-read
                    // them now.
                    Ok(()) if cx.new_app_keys => continue,
                    Ok(()) => need_resync = false,
                    Err(ZkClientError::SessionExpired) => {
                        return End::Reconnect("session expired".into());
                    }
                    Err(e) => {
                        tracing::debug!(
                            "ZooKeeper re-read failed ({e}); retrying after reconnection"
                        );
                    }
                }
            }
        }
        let retry_at = cx.unreadable.retry_at;
        tokio::select! {
            _ = stop.changed() => return End::Stop,
            // An unreadable node: everything is watched and read again.
            _ = tokio::time::sleep_until(retry_at.unwrap_or_else(tokio::time::Instant::now)),
                if retry_at.is_some() => {
                cx.unreadable.retry_at = None;
                need_resync = true;
            }
            state = states.changed() => match state {
                // The server stopped answering or closed the connection: the session
                // moves to another server (`run`).
                SessionState::Disconnected => return End::Left("connection lost".into()),
                SessionState::SyncConnected | SessionState::ConnectedReadOnly => {}
                SessionState::Expired => return End::Reconnect("session expired".into()),
                other => return End::Reconnect(format!("session {other}")),
            },
            Some(path) = ev_rx.recv() => {
                // Every event already queued is taken now, and each node changed is read
                // once: a burst of registrations (one event each) makes one read of the
                // provider list, not one per event (at 50,000 providers a read is the
                // whole list).
                let mut paths = vec![path];
                while let Ok(p) = ev_rx.try_recv() {
                    if !paths.contains(&p) {
                        paths.push(p);
                    }
                }
                let mut resync = false;
                for path in paths {
                    match cx.changed(client, &path).await {
                        Ok(()) => resync |= cx.new_app_keys,
                        Err(ZkClientError::SessionExpired) => {
                            return End::Reconnect("session expired".into());
                        }
                        Err(e) => {
                            tracing::debug!("ZooKeeper read of {path} failed ({e}); will re-read");
                            resync = true;
                        }
                    }
                }
                need_resync = resync;
            }
        }
    }
}
