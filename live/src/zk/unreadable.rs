//! The nodes the source could not read (no auth, an ACL, a read refused by the server):
//! each reported once per reason, the previous state serving meanwhile, and every node
//! re-read with backoff until it reads (a changed ACL fires no watch, so only a retry
//! sees it opened).

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::Error as ZkClientError;

/// The first pause before a retry; doubled after each retry that still fails.
const FIRST_RETRY: Duration = Duration::from_millis(500);
/// The longest pause: Dubbo's registry retry period (`retry.period`, 5000 ms).
const LAST_RETRY: Duration = Duration::from_secs(5);

/// False for an error the server gave about the node alone (its ACL refuses this session,
/// the request is refused), true for any other: one of the session or the connection (the
/// session loop reconnects and re-reads everything).
pub(super) fn is_session_error(e: &ZkClientError) -> bool {
    !matches!(
        e,
        ZkClientError::NoAuth
            | ZkClientError::InvalidAcl
            | ZkClientError::BadArguments(_)
            | ZkClientError::Unimplemented
            | ZkClientError::MarshallingError
            | ZkClientError::UnexpectedErrorCode(_)
    )
}

/// `NoAuth (not authorized)`: the error's name, then its text.
pub(super) fn reason(e: &ZkClientError) -> String {
    let name = format!("{e:?}");
    let name = name.split(['(', ' ', '{']).next().unwrap_or_default();
    format!("{name} ({e})")
}

/// The unreadable nodes and when to retry them.
pub(super) struct Unreadable {
    /// Each unreadable node's path and why.
    now: BTreeMap<String, String>,
    /// During a full re-read, the nodes unreadable before it (each reported already).
    before: BTreeMap<String, String>,
    backoff: Duration,
    /// When to re-read everything; `None` while every node reads.
    pub(super) retry_at: Option<Instant>,
}

impl Default for Unreadable {
    fn default() -> Self {
        Unreadable {
            now: BTreeMap::new(),
            before: BTreeMap::new(),
            backoff: FIRST_RETRY,
            retry_at: None,
        }
    }
}

impl Unreadable {
    /// Records that `path` failed with `reason`; true when this is news to report.
    pub(super) fn failed(&mut self, path: &str, reason: &str) -> bool {
        let known = self.now.get(path).or_else(|| self.before.get(path));
        let news = known.map(String::as_str) != Some(reason);
        self.now.insert(path.to_string(), reason.to_string());
        news
    }

    /// Records that `path` read; true when it was unreadable until now.
    pub(super) fn read(&mut self, path: &str) -> bool {
        let a = self.now.remove(path).is_some();
        let b = self.before.remove(path).is_some();
        a || b
    }

    /// A full re-read starts: every node is read again and reported only if its failure
    /// is new.
    pub(super) fn start_round(&mut self) {
        self.before.append(&mut self.now);
    }

    /// A read ended: the next retry is scheduled while a node stays unreadable (the
    /// pause doubling up to [`LAST_RETRY`]), cleared once every node reads.
    pub(super) fn end_round(&mut self) {
        self.before.clear();
        if self.now.is_empty() {
            self.retry_at = None;
            self.backoff = FIRST_RETRY;
        } else if self.retry_at.is_none() {
            self.retry_at = Some(Instant::now() + self.backoff);
            self.backoff = (self.backoff * 2).min(LAST_RETRY);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failure_is_news_once_per_reason_and_retried_with_growing_pauses() {
        let mut u = Unreadable::default();
        u.start_round();
        assert!(u.failed("/a", "NoAuth"));
        u.end_round();
        let first = u.retry_at.take().unwrap();
        u.start_round();
        assert!(
            !u.failed("/a", "NoAuth"),
            "reported once while the reason stays"
        );
        u.end_round();
        let second = u.retry_at.take().unwrap();
        assert!(second - Instant::now() > first - Instant::now());
        u.start_round();
        assert!(u.failed("/a", "InvalidAcl"), "a new reason is news");
        assert!(u.read("/a"));
        assert!(!u.read("/a"));
        u.end_round();
        assert_eq!(u.retry_at, None);
    }

    #[test]
    fn reasons_name_the_error() {
        assert_eq!(reason(&ZkClientError::NoAuth), "NoAuth (not authorized)");
        assert!(is_session_error(&ZkClientError::ConnectionLoss));
        assert!(!is_session_error(&ZkClientError::NoAuth));
        assert!(is_session_error(&ZkClientError::Timeout));
    }
}
