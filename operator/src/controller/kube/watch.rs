//! The controller's watches, with the backoff of kube-runtime's default
//! (800 ms doubling to 30 s, as client-go) after errors, except one: a
//! watch that expired ("too old resource version", HTTP 410 Gone) is
//! listed again at once. After an API server restart the errors of the
//! outage had grown the backoff to seconds, and the watcher's re-list came
//! that late: a pod deleted meanwhile was noticed only by the periodic
//! requeue (seen: 5.7 s). kube-runtime's `Controller::new` applies one
//! backoff to every error; here each watch stream gets its own, told apart
//! by the error, and the controller adds none ([`Immediate`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{Stream, TryStreamExt};
use kube::runtime::utils::{Backoff, StreamBackoff};
use kube::runtime::watcher::{self, DefaultBackoff};

/// Whether `e` says the watch expired (its resource version is too old,
/// or was compacted away): HTTP 410, wherever it came from.
pub fn expired(e: &watcher::Error) -> bool {
    let api_gone = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 410);
    match e {
        watcher::Error::WatchError(s) => s.code == 410,
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => api_gone(e),
        watcher::Error::NoResourceVersion => false,
    }
}

/// The default backoff, skipped (zero) for an error [`expired`] flagged.
struct ExpiryAware {
    expired: Arc<AtomicBool>,
    inner: DefaultBackoff,
}

impl Iterator for ExpiryAware {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        if self.expired.swap(false, Ordering::SeqCst) {
            return Some(Duration::ZERO);
        }
        self.inner.next()
    }
}

impl Backoff for ExpiryAware {
    fn reset(&mut self) {
        self.inner.reset();
    }
}

/// No pause: what the controller adds on top of the watches' own backoff.
#[derive(Clone, Copy, Debug, Default)]
pub struct Immediate;

impl Iterator for Immediate {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(Duration::ZERO)
    }
}

impl Backoff for Immediate {
    fn reset(&mut self) {}
}

/// `stream` (a watcher's) paused after errors as kube-runtime's default
/// backoff would, but resumed at once, to list again, after an expiry.
pub fn with_backoff<S, T>(stream: S) -> impl Stream<Item = Result<T, watcher::Error>> + Send
where
    S: Stream<Item = Result<T, watcher::Error>> + Send,
    T: Send,
{
    let flag = Arc::new(AtomicBool::new(false));
    let seen = flag.clone();
    let flagged = stream.inspect_err(move |e| {
        let gone = expired(e);
        if gone {
            tracing::info!("a watch expired ({e}); listing again at once");
        }
        seen.store(gone, Ordering::SeqCst);
    });
    StreamBackoff::new(
        flagged,
        ExpiryAware {
            expired: flag,
            inner: DefaultBackoff::default(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use kube::core::Status;
    use tokio::time::Instant;

    fn gone() -> watcher::Error {
        let s = Status::failure("too old resource version: 1 (2)", "Expired").with_code(410);
        watcher::Error::WatchError(s.boxed())
    }

    fn refused() -> watcher::Error {
        let s = Status::failure("connection refused", "InternalError").with_code(500);
        watcher::Error::WatchFailed(kube::Error::Api(s.boxed()))
    }

    /// Virtual time from an error to the next item.
    async fn pause_after(error: watcher::Error) -> Duration {
        let items = futures::stream::iter(vec![Err(error), Ok(1)]);
        let mut s = Box::pin(with_backoff(items));
        assert!(s.next().await.is_some_and(|r| r.is_err()));
        let at = Instant::now();
        assert_eq!(s.next().await.map(Result::ok), Some(Some(1)));
        at.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_watch_is_listed_again_at_once_other_errors_back_off() {
        assert!(expired(&gone()) && !expired(&refused()));
        assert_eq!(pause_after(gone()).await, Duration::ZERO);
        assert!(pause_after(refused()).await >= Duration::from_millis(100));
    }
}
