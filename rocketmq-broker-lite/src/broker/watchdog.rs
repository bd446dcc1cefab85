//! Keeps the runtime's I/O and timer driver turning while a worker is blocked.
//!
//! A request handler writes small appends to the page cache inline, on the tokio worker that
//! read the request (the cheapest path by far). When the disk or the page cache stalls, that
//! write blocks its worker. The other workers keep serving only if one of them polls the
//! runtime's driver (sockets and timers); but tokio hands the driver to a worker only when it
//! parks, and the worker that took the blocked request may have been the one parked on the
//! driver, while the others sleep on their condition variables waiting for work that only the
//! driver would bring. Then nothing is read, nothing times out, and the broker's
//! `[PC_SYNCHRONIZED]` and `[TIMEOUT_CLEAN_QUEUE]` answers, written for exactly this case, are
//! never sent.
//!
//! The watchdog is a heartbeat task on the runtime and a small thread beside it. When the
//! heartbeat is late, the thread spawns an empty task from outside the runtime: that wakes a
//! sleeping worker, which runs it, parks again and takes the free driver. A busy runtime gets
//! one harmless empty task per check.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// How often the heartbeat task stamps the time.
const BEAT: Duration = Duration::from_millis(50);
/// How often the thread looks at the stamp.
const CHECK: Duration = Duration::from_millis(100);
/// A stamp older than this means the driver may have been left unpolled.
const LATE: Duration = Duration::from_millis(200);

/// The heartbeat's last stamp, in milliseconds since `born`.
struct Beat {
    born: Instant,
    last_ms: AtomicU64,
}

impl Beat {
    fn now_ms(&self) -> u64 {
        self.born.elapsed().as_millis() as u64
    }
}

/// Starts the watchdog on the current runtime; it stops with `shutdown` (or when the returned
/// heartbeat task is aborted).
pub(crate) fn spawn(shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
    let beat = Arc::new(Beat {
        born: Instant::now(),
        last_ms: AtomicU64::new(0),
    });
    let weak = Arc::downgrade(&beat);
    let handle = Handle::current();
    if let Err(e) = std::thread::Builder::new()
        .name("runtime-watchdog".into())
        .spawn(move || watch(weak, handle))
    {
        warn!(error = %e, "cannot start the runtime watchdog thread; continuing without it");
    }
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(BEAT);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = ticks.tick() => beat.last_ms.store(beat.now_ms(), Ordering::Relaxed),
            }
        }
    })
}

/// The thread: wakes a worker whenever the heartbeat is late; ends with the heartbeat.
fn watch(beat: Weak<Beat>, runtime: Handle) {
    loop {
        std::thread::sleep(CHECK);
        let Some(b) = beat.upgrade() else {
            return;
        };
        let late = b.now_ms().saturating_sub(b.last_ms.load(Ordering::Relaxed));
        if late > LATE.as_millis() as u64 {
            debug!(late_ms = late, "runtime heartbeat late; waking a worker");
            drop(runtime.spawn(async {}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A worker blocked inside a task, as in a stalled write: with the watchdog, a timer of
    /// another task still fires. (The waits here are blocking ones, bounded, so that a stuck
    /// runtime fails the test instead of hanging it.)
    #[test]
    fn timers_fire_while_a_worker_is_blocked() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let shutdown = CancellationToken::new();
        rt.block_on(async {
            let _dog = spawn(shutdown.clone());
            tokio::time::sleep(BEAT).await;
        });
        for round in 0..5 {
            let (release_tx, release_rx) = mpsc::channel::<()>();
            let (fired_tx, fired_rx) = mpsc::channel::<()>();
            // Both tasks wait on timers first, so that the one that blocks is woken by the
            // driver, on the worker that was polling it.
            let blocked = rt.spawn(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let _ = release_rx.recv_timeout(Duration::from_secs(10));
            });
            rt.spawn(async move {
                tokio::time::sleep(Duration::from_millis(60)).await;
                let _ = fired_tx.send(());
            });
            let got = fired_rx.recv_timeout(Duration::from_secs(3));
            let _ = release_tx.send(());
            rt.block_on(blocked).unwrap();
            assert!(
                got.is_ok(),
                "round {round}: a timer did not fire while a worker was blocked"
            );
        }
        shutdown.cancel();
    }
}
