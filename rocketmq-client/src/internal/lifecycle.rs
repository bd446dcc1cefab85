//! Lifecycle plumbing shared by every handle: a stop that runs to its end in the background
//! whatever happens to the future that asked for it, and the stop of a handle dropped while
//! running.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt, Shared};

use super::instance::lock;

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

/// A consumer engine as its handle's lifecycle drives it.
pub(crate) trait Engine: Send + Sync + 'static {
    /// For logs: what stopped late.
    const KIND: &'static str;
    /// Stops pulling and consuming at once (synchronous).
    fn cancel(&self);
    /// Finishes the stop: offsets, locks, leaving the group, the client instance.
    fn finish(self: Arc<Self>) -> BoxFuture<'static, ()>;
    /// Leaves the client instance without a word to the brokers (no runtime left).
    fn forget(&self);
}

/// Stops `engine` at once and finishes the stop in the background.
pub(crate) fn stop_engine<E: Engine>(engine: &Arc<E>) -> Stopping {
    engine.cancel();
    let (a, b) = (engine.clone(), engine.clone());
    spawn_stop(a.finish(), move || b.forget())
}

/// Where a handle is: built (with what `start` needs), running, or stopping/stopped.
pub(crate) enum Phase<C, E> {
    /// Built, not started: what the start will use.
    Created(C),
    /// Started.
    Running(Arc<E>),
    /// Shut down (the stop may still be finishing).
    Stopping(Stopping),
}

/// The lifecycle of a consumer handle: cancel-safe `start` and `shutdown`, a stop on drop.
pub(crate) struct Lifecycle<C, E: Engine> {
    phase: Mutex<Phase<C, E>>,
    /// Serialises `start` and `shutdown`.
    op: tokio::sync::Mutex<()>,
    /// The stop of an engine whose start was cancelled or failed: the next start waits for it.
    aborted: Mutex<Option<Stopping>>,
}

/// Stops the engine of a start that did not finish (cancelled, or failed).
struct AbortOnDrop<'a, E: Engine> {
    aborted: &'a Mutex<Option<Stopping>>,
    engine: Option<Arc<E>>,
}

impl<E: Engine> Drop for AbortOnDrop<'_, E> {
    fn drop(&mut self) {
        if let Some(engine) = self.engine.take() {
            *lock(self.aborted) = Some(stop_engine(&engine));
        }
    }
}

impl<C, E: Engine> Lifecycle<C, E> {
    pub(crate) fn new(created: C) -> Self {
        Self {
            phase: Mutex::new(Phase::Created(created)),
            op: tokio::sync::Mutex::new(()),
            aborted: Mutex::new(None),
        }
    }

    /// The phase, locked (briefly: never across an await).
    pub(crate) fn phase(&self) -> std::sync::MutexGuard<'_, Phase<C, E>> {
        lock(&self.phase)
    }

    /// The running engine.
    pub(crate) fn engine(&self) -> crate::error::Result<Arc<E>> {
        match &*self.phase() {
            Phase::Running(e) => Ok(e.clone()),
            _ => Err(crate::error::ClientError::NotRunning),
        }
    }

    /// Starts: `make` builds the engine from the built state (synchronously) with what `run`
    /// needs, `run` starts it. A failed or dropped start stops what it had begun and leaves the
    /// handle as built.
    pub(crate) async fn start<T, M, R, Fut>(&self, make: M, run: R) -> crate::error::Result<()>
    where
        M: FnOnce(&C) -> crate::error::Result<(Arc<E>, T)>,
        R: FnOnce(Arc<E>, T) -> Fut,
        Fut: Future<Output = crate::error::Result<()>>,
    {
        let _op = self.op.lock().await;
        let previous = lock(&self.aborted).clone();
        if let Some(stop) = previous {
            stop.await;
            *lock(&self.aborted) = None;
        }
        let (engine, with) = match &*self.phase() {
            Phase::Created(c) => make(c)?,
            Phase::Running(_) => {
                return Err(crate::error::ClientError::Config(
                    "the consumer was already started".into(),
                ))
            }
            Phase::Stopping(_) => {
                return Err(crate::error::ClientError::Config(
                    "the consumer was shut down; build a new one".into(),
                ))
            }
        };
        let mut guard = AbortOnDrop {
            aborted: &self.aborted,
            engine: Some(engine.clone()),
        };
        run(engine.clone(), with).await?;
        guard.engine = None;
        let built = std::mem::replace(&mut *self.phase(), Phase::Running(engine));
        // Dropped after the lock (see `replace_phase`).
        drop(built);
        Ok(())
    }

    /// Puts `next` in place of the phase and returns the old one, for its caller to drop
    /// after the lock: the engine or built state it may hold can own the application's
    /// objects (a listener, a callback), whose drop must be free to call this handle again
    /// (`engine`, `shutdown`) without finding the phase locked.
    fn replace_phase(
        &self,
        next: impl FnOnce(&Phase<C, E>) -> Option<Phase<C, E>>,
    ) -> Option<Phase<C, E>> {
        let mut phase = self.phase();
        let next = next(&phase)?;
        Some(std::mem::replace(&mut *phase, next))
    }

    /// Shuts down (idempotent): the stop runs to its end in the background once begun, and
    /// this waits for it.
    pub(crate) async fn shutdown(&self) {
        let _op = self.op.lock().await;
        let mut stop = None;
        let old = self.replace_phase(|phase| match phase {
            Phase::Running(engine) => {
                let s = stop_engine(engine);
                stop = Some(s.clone());
                Some(Phase::Stopping(s))
            }
            Phase::Stopping(s) => {
                stop = Some(s.clone());
                None
            }
            Phase::Created(_) => None,
        });
        drop(old);
        if let Some(stop) = stop {
            stop.await;
        }
    }

    /// Begins the stop now, without waiting for it (a dropped stream).
    pub(crate) fn stop_in_background(&self) {
        let old = self.replace_phase(|phase| match phase {
            Phase::Running(engine) => Some(Phase::Stopping(stop_engine(engine))),
            _ => None,
        });
        drop(old);
    }
}

impl<C, E: Engine> Drop for Lifecycle<C, E> {
    /// The last handle is gone: a running engine stops in the background, bounded.
    fn drop(&mut self) {
        if let Phase::Running(engine) = self.phase.get_mut().unwrap_or_else(|p| p.into_inner()) {
            engine.cancel();
            let (a, b) = (engine.clone(), engine.clone());
            stop_on_drop(E::KIND, a.finish(), move || b.forget());
        }
    }
}
