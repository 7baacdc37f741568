//! [`ZkRegistration`]: ephemeral provider nodes kept registered across sessions, Dubbo's
//! recovery (`FailbackRegistry.recover` on a new session: each node created again, a
//! stale one still held by the expired session deleted first).

use std::time::Duration;

use zookeeper_client::SessionState;

use super::{ZkAddress, ZkAdmin, ZkError};

/// The first pause between attempts to open a new session and register again; doubled
/// after each failure up to Dubbo's `retry.period` (5 s).
const FIRST_RETRY: Duration = Duration::from_millis(200);
const LAST_RETRY: Duration = Duration::from_secs(5);

/// Ephemeral provider registrations held until [`ZkRegistration::close`]: when the session
/// expires (the ensemble restarted, a long freeze, this process paused), a new session is
/// opened and every node registered again, each step told to the `on_event` callback.
/// Needs a tokio runtime (its task runs on it).
#[derive(Debug)]
pub struct ZkRegistration {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Option<ZkAdmin>>,
}

impl ZkRegistration {
    /// Connects to `address` and registers each `(interface, provider URL)` as an
    /// ephemeral node (with the address's ACL: [`ZkAdmin::world_readable`] when
    /// `world_readable`). Fails if the first session or a first registration fails.
    pub async fn start(
        address: &ZkAddress,
        world_readable: bool,
        providers: Vec<(String, String)>,
        on_event: impl Fn(String) + Send + 'static,
    ) -> Result<Self, ZkError> {
        let admin = ZkAdmin::connect_to(address)
            .await?
            .world_readable(world_readable);
        register_all(&admin, &providers).await?;
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(keep(
            address.clone(),
            world_readable,
            providers,
            admin,
            stopped,
            on_event,
        ));
        Ok(ZkRegistration { stop, task })
    }

    /// Closes the session: its nodes are removed by the server at once.
    pub async fn close(self) {
        let _ = self.stop.send(());
        if let Ok(Some(admin)) = self.task.await {
            admin.close().await;
        }
    }
}

async fn register_all(admin: &ZkAdmin, providers: &[(String, String)]) -> Result<(), ZkError> {
    for (interface, url) in providers {
        admin.register(interface, url).await?;
    }
    Ok(())
}

/// Holds the registrations: waits for the session to end, then opens a new one and
/// registers again, until stopped (then hands back the live admin to close).
async fn keep(
    address: ZkAddress,
    world_readable: bool,
    providers: Vec<(String, String)>,
    mut admin: ZkAdmin,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
    on_event: impl Fn(String) + Send + 'static,
) -> Option<ZkAdmin> {
    let n = providers.len();
    loop {
        let mut states = admin.client().state_watcher();
        let ended = async {
            let mut state = admin.client().state();
            while !state.is_terminated() {
                state = states.changed().await;
            }
            state
        };
        let state = tokio::select! {
            _ = &mut stopped => return Some(admin),
            s = ended => s,
        };
        let why = match state {
            SessionState::Expired => "session expired".to_string(),
            other => format!("session {other}"),
        };
        tracing::warn!("ZooKeeper {why}: registering {n} provider(s) again on a new session");
        on_event(format!(
            "{why}; registering {n} provider(s) again on a new session"
        ));
        drop(admin);
        let mut pause = FIRST_RETRY;
        let mut told: Option<String> = None;
        admin = loop {
            let attempt = async {
                let a = ZkAdmin::connect_to(&address)
                    .await?
                    .world_readable(world_readable);
                register_all(&a, &providers).await.map(|()| a)
            };
            let result = tokio::select! {
                _ = &mut stopped => return None,
                r = attempt => r,
            };
            match result {
                Ok(a) => break a,
                Err(e) => {
                    let message = format!("{e}; retrying");
                    if told.as_deref() != Some(message.as_str()) {
                        on_event(message.clone());
                        told = Some(message);
                    }
                }
            }
            tokio::select! {
                _ = &mut stopped => return None,
                _ = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 2).min(LAST_RETRY);
        };
        on_event(format!(
            "new session {}: re-registered {n} provider(s)",
            admin.client().session_id()
        ));
    }
}
