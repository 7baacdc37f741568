//! [`Cluster::call`]: the failover loop around the caller's attempt closure.
//!
//! Per call, Dubbo's failover cluster: select a provider (route + balance, excluding the
//! providers this call already tried), count it in flight while the attempt runs (a guard:
//! a cancelled call leaves nothing counted), feed the outcome to health, and on a
//! retryable failure try another provider, up to `retries` more times.

use std::future::Future;
use std::time::Duration;

use routechain_core::Request;

use super::pool::{Buffers, Pooled};
use super::{Cluster, SelectError, Selected};

/// How an attempt failed: the attempt closure's error, classified. The classification
/// decides whether the call fails over and what health learns.
///
/// | variant | retried on another provider | health |
/// |---|---|---|
/// | `Retryable` | yes, up to `retries` | a failure of the provider |
/// | `Timeout` | yes, up to `retries` | a failure of the provider |
/// | `Final` | no: the call ends with it | a success (the provider answered) |
///
/// `Retryable` is for errors another provider may not have: connection refused or reset,
/// the provider overloaded or shutting down, a transport timeout. `Final` is for answers
/// every provider would give: an application error, an invalid request — Dubbo's
/// "biz exception", which its failover cluster returns without retrying.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError<E> {
    /// The provider failed; another provider may succeed.
    #[error("{0}")]
    Retryable(E),
    /// The provider answered with an error that ends the call.
    #[error("{0}")]
    Final(E),
    /// The attempt did not finish within the timeout (set by [`Cluster::call`]).
    #[error("the attempt timed out after {0:?}")]
    Timeout(Duration),
}

impl<E> CallError<E> {
    /// True for the errors the call fails over on (`Retryable`, `Timeout`).
    pub fn is_retryable(&self) -> bool {
        !matches!(self, CallError::Final(_))
    }

    /// The closure's error, `None` for a timeout.
    pub fn into_inner(self) -> Option<E> {
        match self {
            CallError::Retryable(e) | CallError::Final(e) => Some(e),
            CallError::Timeout(_) => None,
        }
    }
}

/// The outcome of a call that succeeded.
#[derive(Debug)]
pub struct Invoked<T> {
    /// What the successful attempt returned.
    pub value: T,
    /// The provider that answered.
    pub provider: Selected,
    /// Attempts made (1 = no failover).
    pub attempts: u32,
}

/// Why a call gave up.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError<E> {
    /// No provider could be selected for the first attempt: routing left none, or the
    /// breaker is open.
    #[error(transparent)]
    Select(SelectError),
    /// The last attempt failed: with a [`CallError::Final`] error, or with a retryable one
    /// when no retry was left (or no provider left to retry on: `stopped`).
    #[error("the call failed after {attempts} attempt(s): {last}")]
    Failed {
        /// The last attempt's error.
        last: CallError<E>,
        /// Attempts made.
        attempts: u32,
        /// Why no further attempt was made, when that was not the retry limit or a final
        /// error.
        stopped: Option<SelectError>,
    },
}

impl<E> InvokeError<E> {
    /// The last attempt's error, `None` when no attempt was made.
    pub fn last(&self) -> Option<&CallError<E>> {
        match self {
            InvokeError::Select(_) => None,
            InvokeError::Failed { last, .. } => Some(last),
        }
    }
}

/// True inside a tokio runtime (whose timers `call` uses). Outside one, attempts are not
/// timed (said once in the log) rather than panicking.
fn timer_available() -> bool {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let inside = tokio::runtime::Handle::try_current().is_ok();
    if !inside && !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::warn!("Cluster::call outside a tokio runtime: attempts are not timed out");
    }
    inside
}

impl Cluster {
    /// Calls `attempt` on a provider chosen for `request`, with Dubbo's failover: on a
    /// retryable error or a timeout it tries another provider of the same routed set, up
    /// to `retries` more times (the method's `retries`, else the service's; default 2).
    ///
    /// - Each attempt gets the configured timeout (the method's `timeout`, else the
    ///   service's; default 1 s, Dubbo's); a timed-out attempt is dropped and counts as a
    ///   [`CallError::Timeout`]. Timeouts use tokio's timers: inside a tokio runtime it
    ///   needs the time driver (`enable_time`, on in `#[tokio::main]`); outside any tokio
    ///   runtime attempts are not timed.
    /// - The provider is counted in flight (`leastactive`, `p2c`) while its attempt runs,
    ///   by a guard: dropping the call's future mid-attempt leaves nothing counted.
    /// - Outcomes feed health (see [`CallError`]); a cancelled attempt reports nothing.
    /// - Providers already tried by this call are never selected again.
    /// - The call's buffers come from a per-thread cache and go back to it: no
    ///   [`super::Caller`] to keep, and nothing allocated per call once warm.
    /// - Outside an async context, poll it to completion (its attempts' futures are all
    ///   the loop waits for when no timer is armed), or drive [`Cluster::select`] yourself.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use routechain_balance::{CallError, Cluster, ServiceConfig};
    /// # use routechain_core::{ChainState, Request, Snapshot, Url};
    /// async fn send(address: &str) -> Result<String, std::io::Error> {
    ///     Ok(format!("pong from {address}")) // a real client connects here
    /// }
    ///
    /// async fn ping(service: &Cluster) -> Result<String, Box<dyn std::error::Error>> {
    ///     let request = Request::new().with_method("ping");
    ///     let reply = service
    ///         .call(&request, |target| async move {
    ///             send(target.address()).await.map_err(CallError::Retryable)
    ///         })
    ///         .await?;
    ///     Ok(reply.value)
    /// }
    /// # let providers = "dubbo://10.0.0.1:20880/svc\n";
    /// # let snapshot = Arc::new(Snapshot::parse_lines(1, providers).unwrap());
    /// # let state = ChainState::new(None, snapshot, Url::empty(), vec![]).unwrap();
    /// # let service = Cluster::new(state, ServiceConfig::default());
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// assert_eq!(rt.block_on(ping(&service)).unwrap(), "pong from 10.0.0.1:20880");
    /// ```
    pub async fn call<T, E, F, Fut>(
        &self,
        request: &Request,
        attempt: F,
    ) -> Result<Invoked<T>, InvokeError<E>>
    where
        F: FnMut(Selected) -> Fut,
        Fut: Future<Output = Result<T, CallError<E>>>,
    {
        self.call_limited(request, u32::MAX, attempt).await
    }

    /// [`Cluster::call`] with at most `max_attempts` attempts in all (the configured
    /// `retries` still apply: the smaller limit wins). `1` makes exactly one attempt, for a
    /// request that cannot be sent twice (a streamed body): its provider's outcome is
    /// reported as usual, and no second provider is selected, counted or reported. For
    /// transport layers (`routechain-tower`).
    #[doc(hidden)]
    pub async fn call_limited<T, E, F, Fut>(
        &self,
        request: &Request,
        max_attempts: u32,
        mut attempt: F,
    ) -> Result<Invoked<T>, InvokeError<E>>
    where
        F: FnMut(Selected) -> Fut,
        Fut: Future<Output = Result<T, CallError<E>>>,
    {
        let mut pooled = Pooled::<Buffers>::take();
        let Buffers { call, tried } = pooled.get();
        tried.clear();
        let (max, timeout) = {
            // The settings of the configuration the call starts under.
            let published = self.published.load();
            let method = request.method.as_deref();
            let timeout = published
                .config
                .timeout_for(method)
                .filter(|_| timer_available());
            let max = published.config.retries_for(method).saturating_add(1);
            (max.min(max_attempts.max(1)), timeout)
        };
        let result = async {
            let mut last = None;
            for n in 1..=max {
                let selected = match self.select(request, tried, call) {
                    Ok(s) => s,
                    Err(e) => {
                        return Err(match last {
                            None => InvokeError::Select(e),
                            Some(last) => InvokeError::Failed {
                                last,
                                attempts: n - 1,
                                stopped: Some(e),
                            },
                        });
                    }
                };
                let result = {
                    let _in_flight = selected.begin();
                    let fut = attempt(selected.clone());
                    match timeout {
                        Some(d) => tokio::time::timeout(d, fut)
                            .await
                            .unwrap_or(Err(CallError::Timeout(d))),
                        None => fut.await,
                    }
                };
                match result {
                    Ok(value) => {
                        self.report_success(&selected);
                        return Ok(Invoked {
                            value,
                            provider: selected,
                            attempts: n,
                        });
                    }
                    Err(CallError::Final(e)) => {
                        self.report_success(&selected);
                        return Err(InvokeError::Failed {
                            last: CallError::Final(e),
                            attempts: n,
                            stopped: None,
                        });
                    }
                    Err(e) => {
                        tracing::debug!(
                            provider = selected.address(),
                            attempt = n,
                            "attempt failed"
                        );
                        self.report_failure(&selected);
                        last = Some(e);
                        tried.push(selected);
                    }
                }
            }
            Err(match last {
                Some(last) => InvokeError::Failed {
                    last,
                    attempts: max,
                    stopped: None,
                },
                None => InvokeError::Select(SelectError::Exhausted { tried: 0 }),
            })
        }
        .await;
        tried.clear();
        call.release(self);
        result
    }
}
