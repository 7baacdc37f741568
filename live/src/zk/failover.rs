//! The source's choice of server. The client library, left to itself, reconnects to its
//! servers in a shuffled order, so after leaving a server that froze (it still accepts
//! connections but answers nothing) it may try that one again first and wait a whole
//! connection timeout for it. Here each connection is opened on one server, so the source
//! knows which one it is on; when that server falls silent the connection is abandoned and
//! the same session reopened on the next server, the silent one moved last.
//!
//! A connection's session task runs on a runtime of its own (a thread), so that abandoning
//! it stops the task at once, with nothing more sent; its sessions are detached, so no
//! close request is ever queued to a server that may process it later.

use std::time::Duration;

use zookeeper_client::{Client, Error as ZkClientError, SessionInfo};

use super::{ZkAddress, ZkError};

/// A session's connection to one server.
pub(super) struct Pinned {
    pub client: Client,
    /// The server (`host:port`).
    pub server: String,
    /// Dropped to stop the runtime running the connection's task.
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Why no connection was opened.
pub(super) enum Failed {
    /// The session to reopen has expired: open a new one.
    Expired,
    /// No server could be reached.
    Unreachable(ZkError),
}

/// The servers, in the order they are tried.
pub(super) struct Servers {
    order: Vec<String>,
}

impl Servers {
    /// The address's servers, in an order of their own for each process (as the client
    /// library spreads its sessions).
    pub fn new(address: &ZkAddress) -> Self {
        let mut order = address.hosts().to_vec();
        // A rotation by a per-process value: no random-number crate for one shuffle.
        if !order.is_empty() {
            let n = std::process::id() as usize
                ^ std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos() as usize);
            let len = order.len();
            order.rotate_left(n % len);
        }
        Servers { order }
    }

    /// Moves `server` last: it is tried after every other one.
    pub fn demote(&mut self, server: &str) {
        if let Some(i) = self.order.iter().position(|s| s == server) {
            let s = self.order.remove(i);
            self.order.push(s);
        }
    }

    /// Opens a connection on the first server that answers, in order (a server that does
    /// not is moved last), resuming `session` if given.
    pub async fn connect(
        &mut self,
        address: &ZkAddress,
        session_timeout: Duration,
        session: Option<&SessionInfo>,
    ) -> Result<Pinned, Failed> {
        let mut last = None;
        for server in self.order.clone() {
            match open(address, &server, session_timeout, session).await {
                Ok(pinned) => return Ok(pinned),
                Err(ZkClientError::SessionExpired) if session.is_some() => {
                    return Err(Failed::Expired);
                }
                Err(e) => {
                    tracing::debug!(server, "ZooKeeper server not reached: {e}");
                    self.demote(&server);
                    last = Some(e);
                }
            }
        }
        Err(Failed::Unreachable(ZkError::Connect {
            servers: address.to_string(),
            reason: last.map_or_else(|| "no server".into(), |e| e.to_string()),
        }))
    }
}

/// Opens a connection to `server` alone, on a runtime of its own.
async fn open(
    address: &ZkAddress,
    server: &str,
    session_timeout: Duration,
    session: Option<&SessionInfo>,
) -> Result<Pinned, ZkClientError> {
    // The address's own `session=` is the one the connector uses: wait for that one.
    let session_timeout = address.session_timeout().unwrap_or(session_timeout);
    let connector = address
        .connector(session_timeout, true)
        .with_detached()
        .with_fail_eagerly();
    let connector = match session {
        Some(s) => connector.with_session(s.clone()),
        None => connector,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ZkClientError::UnexpectedError(e.to_string()))?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let target = format!("{server}{}", address.chroot());
    let attempt = runtime.spawn(async move { connector.connect(&target).await });
    std::thread::Builder::new()
        .name("routechain-zookeeper-connection".into())
        .spawn(move || {
            // Runs the connection's task until the sender is dropped; dropping the runtime
            // then drops the task and its socket.
            runtime.block_on(async {
                let _ = stopped.await;
            });
        })
        .map_err(|e| ZkClientError::UnexpectedError(e.to_string()))?;
    let client = match tokio::time::timeout(session_timeout + Duration::from_secs(1), attempt).await
    {
        Ok(Ok(result)) => result?,
        Ok(Err(join)) => return Err(ZkClientError::UnexpectedError(join.to_string())),
        Err(_) => return Err(ZkClientError::Timeout),
    };
    Ok(Pinned {
        client,
        server: server.to_string(),
        _stop: stop,
    })
}
