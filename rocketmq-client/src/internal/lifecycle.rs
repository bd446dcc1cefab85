//! Lifecycle plumbing shared by every handle: a stop that runs to its end in the background
//! whatever happens to the future that asked for it, and the stop of a handle dropped while
//! running.

use std::future::Future;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt, Shared};

/// A stop in progress or done: every clone resolves when the stop has finished, and dropping a
/// clone does not cancel it.
pub(crate) type Stopping = Shared<BoxFuture<'static, ()>>;

/// The longest a stop started by a drop may take before it is abandoned (its connections are
/// closed all the same when the client instance goes away).
pub(crate) const DROP_STOP_LIMIT: Duration = Duration::from_secs(30);

/// Runs `stop` as a task of the current runtime and returns a handle on its end. Without a
/// runtime (a handle dropped after its runtime), runs `fallback` at once instead and returns a
/// finished stop.
pub(crate) fn spawn_stop<F, G>(stop: F, fallback: G) -> Stopping
where
    F: Future<Output = ()> + Send + 'static,
    G: FnOnce(),
{
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            let task = rt.spawn(stop);
            async move {
                // A task ends by completing or by its runtime shutting down: either is the end.
                let _ = task.await;
            }
            .boxed()
            .shared()
        }
        Err(_) => {
            fallback();
            finished()
        }
    }
}

/// [`spawn_stop`] for a handle being dropped: bounded by [`DROP_STOP_LIMIT`], and nobody waits.
pub(crate) fn stop_on_drop<F, G>(what: &'static str, stop: F, fallback: G)
where
    F: Future<Output = ()> + Send + 'static,
    G: FnOnce(),
{
    let bounded = async move {
        if tokio::time::timeout(DROP_STOP_LIMIT, stop).await.is_err() {
            tracing::warn!(what, "the stop of a dropped client did not finish in time");
        }
    };
    drop(spawn_stop(bounded, fallback));
}

/// A stop that has already finished.
pub(crate) fn finished() -> Stopping {
    futures::future::ready(()).boxed().shared()
}
