//! [`Cluster::call`]: the failover loop around the caller's attempt closure.
//!
//! Per call, Dubbo's cluster invokers: select a provider (route + balance, excluding the
//! providers this call already tried), count it in flight while the attempt runs (a guard:
//! a cancelled call leaves nothing counted), feed the outcome to health, and then as the
//! method's `cluster` says: `failover` tries another provider on a retryable failure, up
//! to `retries` more times; `failfast` and `failsafe` make one attempt (`failsafe`
//! swallows its failure); `forking` calls `forks` providers at once; `broadcast` calls
//! every routed provider.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::Duration;

use routechain_core::Request;

use super::config::ClusterMode;
use super::pool::{Buffers, Pooled};
use super::{Caller, Cluster, SelectError, Selected};

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
    /// What the successful attempt returned (`failsafe`: the default value when the
    /// attempt failed).
    pub value: T,
    /// The provider that answered (or failed, when `swallowed`).
    pub provider: Selected,
    /// Attempts made (1 = no failover).
    pub attempts: u32,
    /// True when the `failsafe` cluster swallowed the attempt's error and `value` is the
    /// default.
    pub swallowed: bool,
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
    /// A retry was due but the service's retry budget is spent: the call ends with the
    /// last attempt's error (counted in [`ClusterStats::retries_refused`](super::ClusterStats)).
    #[error("the retry budget is spent: no retry after {attempts} attempt(s); the last: {last}")]
    RetryBudgetExhausted {
        /// The last attempt's error.
        last: CallError<E>,
        /// Attempts made.
        attempts: u32,
    },
    /// The `failsafe` cluster swallowed the attempt's error: the caller answers with its
    /// default value ([`Cluster::call`] does, with `T::default()`; only
    /// `Cluster::call_limited`, for transports, returns this).
    #[error("failsafe: swallowed {last}")]
    Swallowed {
        /// The attempt's error.
        last: CallError<E>,
        /// The provider that failed.
        provider: Selected,
    },
}

impl<E> InvokeError<E> {
    /// The last attempt's error, `None` when no attempt was made.
    pub fn last(&self) -> Option<&CallError<E>> {
        match self {
            InvokeError::Select(_) => None,
            InvokeError::Failed { last, .. }
            | InvokeError::RetryBudgetExhausted { last, .. }
            | InvokeError::Swallowed { last, .. } => Some(last),
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

/// The settings of one call, resolved when its first provider is selected.
#[derive(Debug, Clone, Copy)]
struct Plan {
    mode: ClusterMode,
    /// Attempts in all (failover), or parallel calls (forking).
    attempts: u32,
    /// The `timeout` attachment, when the call has one (milliseconds; Dubbo's first layer).
    timeout: Option<Duration>,
    timed: bool,
}

impl Plan {
    /// The timeout of an attempt of `request` on `selected`: the attachment's, else the
    /// provider's effective one (in the state it was selected from: a retry may be on a
    /// newer one, whose method ids are its own).
    fn timeout(&self, request: &Request, selected: &Selected) -> Option<Duration> {
        if !self.timed {
            return None;
        }
        self.timeout
            .or_else(|| selected.timeout(request.method.as_deref()))
    }
}

/// A positive number of milliseconds in the call's attachment `key`.
fn attached(request: &Request, key: &str) -> Option<i64> {
    request
        .attachments
        .get(key)
        .and_then(|v| v.trim().parse::<i64>().ok())
}

/// Runs `fut` under `timeout` (none: as it is).
async fn timed<T, E>(
    timeout: Option<Duration>,
    fut: impl Future<Output = Result<T, CallError<E>>>,
) -> Result<T, CallError<E>> {
    match timeout {
        Some(d) => tokio::time::timeout(d, fut)
            .await
            .unwrap_or(Err(CallError::Timeout(d))),
        None => fut.await,
    }
}

impl Cluster {
    /// Calls `attempt` on a provider chosen for `request`, as the method's cluster mode
    /// says (Dubbo's `cluster`, default `failover`: on a retryable error or a timeout it
    /// tries another provider of the same routed set, up to `retries` more times).
    ///
    /// - The call parameters (`timeout`, `retries`, `cluster`, `forks`) are the method's
    ///   as resolved from the consumer's settings, the providers' URLs and the override
    ///   rules ([`super::params`]); a `timeout` or `retries` attachment of the request
    ///   comes first, as in Dubbo.
    /// - `failfast`: one attempt. `failsafe`: one attempt, whose failure is logged and
    ///   swallowed: the call returns `T::default()` ([`Invoked::swallowed`]). `forking`:
    ///   `forks` attempts on distinct providers at once, the first success wins and the
    ///   others are dropped. `broadcast`: every routed provider in turn; any failure fails
    ///   the call (the last one's error), else the last answer is returned.
    /// - Each attempt gets its provider's timeout (default 1 s, Dubbo's); a timed-out
    ///   attempt is dropped and counts as a [`CallError::Timeout`]. Timeouts use tokio's
    ///   timers: inside a tokio runtime it needs the time driver (`enable_time`, on in
    ///   `#[tokio::main]`); outside any tokio runtime attempts are not timed.
    /// - The provider is counted in flight (`leastactive`, `p2c`) while its attempt runs,
    ///   by a guard: dropping the call's future mid-attempt leaves nothing counted.
    /// - Outcomes feed health (see [`CallError`]); a cancelled attempt reports nothing.
    /// - Providers already tried by this call are never selected again.
    /// - The call's buffers come from a per-thread cache and go back to it: no
    ///   [`super::Caller`] to keep, and nothing allocated per call once warm (`forking`
    ///   allocates its parallel attempts).
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
        T: Default,
        F: FnMut(Selected) -> Fut,
        Fut: Future<Output = Result<T, CallError<E>>>,
    {
        match self.call_limited(request, u32::MAX, attempt).await {
            Err(InvokeError::Swallowed { provider, .. }) => Ok(Invoked {
                value: T::default(),
                provider,
                attempts: 1,
                swallowed: true,
            }),
            other => other,
        }
    }

    /// [`Cluster::call`] with at most `max_attempts` attempts in all (the configured
    /// `retries` still apply: the smaller limit wins). `1` makes exactly one attempt, for a
    /// request that cannot be sent twice (a streamed body): its provider's outcome is
    /// reported as usual, and no second provider is selected, counted or reported. A
    /// `failsafe` failure is [`InvokeError::Swallowed`]: the transport answers with its
    /// default. For transport layers (`routechain-tower`).
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
        let max_attempts = max_attempts.max(1);
        let result = async {
            let first = self
                .select(request, tried, call)
                .map_err(InvokeError::Select)?;
            if let Some(budget) = &first.published().config.retry_budget {
                self.budget.call(self.clock.now(), budget);
            }
            let plan = {
                let params = &first.published().params;
                let method = params.method(request.method.as_deref());
                let (mode, _) = params.cluster(method);
                let attempts = match mode {
                    ClusterMode::Failover => attached(request, "retries")
                        .map_or_else(
                            || params.retries(method, Some(first.index())).0,
                            |r| u32::try_from(r.max(0)).unwrap_or(u32::MAX),
                        )
                        .saturating_add(1),
                    ClusterMode::Forking => params.forks(method, Some(first.index())).0,
                    ClusterMode::Broadcast => u32::MAX,
                    ClusterMode::Failfast | ClusterMode::Failsafe => 1,
                };
                Plan {
                    mode,
                    attempts: attempts.min(max_attempts),
                    timeout: attached(request, "timeout")
                        .filter(|&t| t > 0)
                        .map(|t| Duration::from_millis(t as u64)),
                    timed: timer_available(),
                }
            };
            match plan.mode {
                ClusterMode::Forking if plan.attempts != 1 => {
                    self.forking(request, plan, first, tried, call, &mut attempt)
                        .await
                }
                ClusterMode::Broadcast => {
                    self.broadcast(request, plan, first, tried, call, &mut attempt)
                        .await
                }
                _ => {
                    self.failover(request, plan, first, tried, call, &mut attempt)
                        .await
                }
            }
        }
        .await;
        tried.clear();
        call.release(self);
        result
    }

    /// When an attempt on `selected` starts, read only when a balancer of its state reads
    /// response times or health counts slow calls.
    fn started(&self, selected: &Selected) -> Option<Duration> {
        let published = selected.published();
        (published.balance.timed() || published.config.health.slow_call.is_some())
            .then(|| self.clock.now())
    }

    /// Feeds an attempt's time and outcome to the balancers that read them.
    fn record<T, E>(
        &self,
        selected: &Selected,
        started: Option<Duration>,
        result: &Result<T, CallError<E>>,
    ) {
        if let Some(started) = started {
            let elapsed = self.clock.now().saturating_sub(started);
            let answered = matches!(result, Ok(_) | Err(CallError::Final(_)));
            self.report_response(selected, elapsed, answered);
        }
    }

    /// Failover (and failfast, failsafe: one attempt): attempt, and on a retryable
    /// failure select another provider, up to `plan.attempts` in all.
    async fn failover<T, E, F, Fut>(
        &self,
        request: &Request,
        plan: Plan,
        first: Selected,
        tried: &mut Vec<Selected>,
        call: &mut Caller,
        attempt: &mut F,
    ) -> Result<Invoked<T>, InvokeError<E>>
    where
        F: FnMut(Selected) -> Fut,
        Fut: Future<Output = Result<T, CallError<E>>>,
    {
        let mut selected = first;
        let mut n = 1;
        loop {
            let result = {
                let _in_flight = selected.begin();
                let started = self.started(&selected);
                let result =
                    timed(plan.timeout(request, &selected), attempt(selected.clone())).await;
                self.record(&selected, started, &result);
                result
            };
            let last = match result {
                Ok(value) => {
                    self.report_success(&selected);
                    return Ok(Invoked {
                        value,
                        provider: selected,
                        attempts: n,
                        swallowed: false,
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
                    tracing::debug!(provider = selected.address(), attempt = n, "attempt failed");
                    self.report_failure(&selected);
                    e
                }
            };
            if plan.mode == ClusterMode::Failsafe {
                tracing::warn!(
                    provider = selected.address(),
                    "failsafe: the call's failure is swallowed: {}",
                    match &last {
                        CallError::Timeout(d) => format!("timed out after {d:?}"),
                        _ => "the attempt failed".to_string(),
                    }
                );
                return Err(InvokeError::Swallowed {
                    last,
                    provider: selected,
                });
            }
            tried.push(selected);
            if n >= plan.attempts {
                return Err(InvokeError::Failed {
                    last,
                    attempts: n,
                    stopped: None,
                });
            }
            if let Some(budget) = &self.load().config.retry_budget
                && !self.budget.retry(self.clock.now(), budget)
            {
                self.counters
                    .retries_refused
                    .fetch_add(1, Ordering::Relaxed);
                tracing::debug!(attempts = n, "retry refused: the retry budget is spent");
                return Err(InvokeError::RetryBudgetExhausted { last, attempts: n });
            }
            selected = match self.select(request, tried, call) {
                Ok(s) => s,
                Err(e) => {
                    return Err(InvokeError::Failed {
                        last,
                        attempts: n,
                        stopped: Some(e),
                    });
                }
            };
            n += 1;
        }
    }

    /// Broadcast: every provider of the routed set in turn (each selected once); the call
    /// fails with the last failure if any attempt failed, else returns the last answer.
    async fn broadcast<T, E, F, Fut>(
        &self,
        request: &Request,
        plan: Plan,
        first: Selected,
        tried: &mut Vec<Selected>,
        call: &mut Caller,
        attempt: &mut F,
    ) -> Result<Invoked<T>, InvokeError<E>>
    where
        F: FnMut(Selected) -> Fut,
        Fut: Future<Output = Result<T, CallError<E>>>,
    {
        let mut selected = first;
        let mut n = 1;
        let mut failed = None;
        loop {
            let result = {
                let _in_flight = selected.begin();
                let started = self.started(&selected);
                let result =
                    timed(plan.timeout(request, &selected), attempt(selected.clone())).await;
                self.record(&selected, started, &result);
                result
            };
            let mut answer = None;
            match result {
                Ok(value) => {
                    self.report_success(&selected);
                    answer = Some(value);
                }
                Err(e) => {
                    if e.is_retryable() {
                        self.report_failure(&selected);
                    } else {
                        self.report_success(&selected);
                    }
                    failed = Some(e);
                }
            }
            let next = if n < plan.attempts {
                tried.push(selected.clone());
                self.select_as(request, tried, call, false).ok()
            } else {
                None
            };
            match next {
                Some(s) => {
                    selected = s;
                    n += 1;
                }
                None => {
                    return match (failed, answer) {
                        (Some(last), _) => Err(InvokeError::Failed {
                            last,
                            attempts: n,
                            stopped: None,
                        }),
                        (None, Some(value)) => Ok(Invoked {
                            value,
                            provider: selected,
                            attempts: n,
                            swallowed: false,
                        }),
                        (None, None) => unreachable!("an attempt either answered or failed"),
                    };
                }
            }
        }
    }

    /// Forking: `plan.attempts` providers (all of the routed set when it has no more, or
    /// `forks` is 0), called at once; the first answer wins and the other attempts are
    /// dropped; when every attempt fails, the last failure is the call's. A final error
    /// counts as a failure here, as in Dubbo's forking cluster (health still counts it
    /// as an answer).
    async fn forking<T, E, F, Fut>(
        &self,
        request: &Request,
        plan: Plan,
        first: Selected,
        tried: &mut Vec<Selected>,
        call: &mut Caller,
        attempt: &mut F,
    ) -> Result<Invoked<T>, InvokeError<E>>
    where
        F: FnMut(Selected) -> Fut,
        Fut: Future<Output = Result<T, CallError<E>>>,
    {
        let mut chosen = vec![first];
        while plan.attempts == 0 || (chosen.len() as u32) < plan.attempts {
            tried.clone_from(&chosen);
            match self.select_as(request, tried, call, false) {
                Ok(s) => chosen.push(s),
                Err(_) => break,
            }
        }
        tried.clear();
        let n = chosen.len() as u32;
        let mut running: Vec<_> = chosen
            .into_iter()
            .map(|selected| {
                let timeout = plan.timeout(request, &selected);
                let in_flight = selected.begin();
                let started = self.started(&selected);
                let fut = attempt(selected.clone());
                Some(Box::pin(async move {
                    let result = timed(timeout, fut).await;
                    drop(in_flight);
                    (selected, started, result)
                }))
            })
            .collect();
        let mut last = None;
        let mut left = running.len();
        std::future::poll_fn(|cx| {
            for slot in running.iter_mut() {
                let Some(fut) = slot else { continue };
                let std::task::Poll::Ready((selected, started, result)) = fut.as_mut().poll(cx)
                else {
                    continue;
                };
                self.record(&selected, started, &result);
                *slot = None;
                left -= 1;
                match result {
                    Ok(value) => {
                        self.report_success(&selected);
                        return std::task::Poll::Ready(Ok(Invoked {
                            value,
                            provider: selected,
                            attempts: n,
                            swallowed: false,
                        }));
                    }
                    Err(e) => {
                        if e.is_retryable() {
                            self.report_failure(&selected);
                        } else {
                            self.report_success(&selected);
                        }
                        last = Some(e);
                    }
                }
            }
            if left == 0 {
                let last = last.take().expect("every attempt failed");
                return std::task::Poll::Ready(Err(InvokeError::Failed {
                    last,
                    attempts: n,
                    stopped: None,
                }));
            }
            std::task::Poll::Pending
        })
        .await
    }
}
