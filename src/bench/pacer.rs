//! The fixed-rate schedule of a benchmark run, driven by a `timerfd` on the runtime.
//!
//! tokio's own timer has a 1 ms grain, which would count as latency at 100 µs intervals. A
//! pacing thread would cost a second wake-up per send (the thread, then the worker it hands the
//! send to). A `timerfd` has nanosecond resolution and wakes the runtime's worker directly
//! through the I/O driver, so a send starts on the worker that the expiry woke.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::mpsc::UnboundedSender;

fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as _,
        tv_nsec: d.subsec_nanos() as _,
    }
}

/// Sends the scheduled start time of every slot (one per `interval`) to `tx` until `stop` is
/// set or the receiver is gone.
pub async fn pace(interval: Duration, tx: UnboundedSender<Instant>, stop: Arc<AtomicBool>) {
    if let Err(e) = run(interval, &tx, &stop).await {
        eprintln!("pacer failed: {e}");
    }
}

async fn run(
    interval: Duration,
    tx: &UnboundedSender<Instant>,
    stop: &AtomicBool,
) -> io::Result<()> {
    let interval = interval.max(Duration::from_micros(1));
    let fd: OwnedFd = timerfd_create(
        TimerfdClockId::Monotonic,
        TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
    )?;
    let start = Instant::now();
    timerfd_settime(
        &fd,
        TimerfdTimerFlags::empty(),
        &Itimerspec {
            it_interval: timespec(interval),
            it_value: timespec(interval),
        },
    )?;
    // `new` is deprecated because an arbitrary `AsRawFd` may close or swap its descriptor; an
    // `OwnedFd` cannot, and the safe constructor keeps the crate free of `unsafe`.
    #[allow(deprecated)]
    let fd = AsyncFd::with_interest(fd, Interest::READABLE)?;
    // Slot n starts at start + (n + 1) × interval.
    let mut slot: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let mut guard = fd.readable().await?;
        let mut buf = [0u8; 8];
        let expirations = match guard.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), &mut buf)?)) {
            Ok(Ok(8)) => u64::from_ne_bytes(buf),
            Ok(Ok(_)) => 0,
            Ok(Err(e)) => return Err(e),
            Err(_would_block) => continue,
        };
        for _ in 0..expirations {
            slot += 1;
            let nanos = interval.as_nanos() as u64 * slot;
            if tx.send(start + Duration::from_nanos(nanos)).is_err() {
                return Ok(());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_come_one_interval_apart_and_never_early() {
        let interval = Duration::from_micros(500);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let stop = Arc::new(AtomicBool::new(false));
        let pacer = tokio::spawn(pace(interval, tx, stop.clone()));
        let mut prev: Option<Instant> = None;
        for _ in 0..200 {
            let at = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .expect("a slot within 10 s")
                .expect("the pacer runs");
            assert!(
                Instant::now() >= at,
                "a slot was handed out before its time"
            );
            if let Some(p) = prev {
                assert_eq!(at - p, interval);
            }
            prev = Some(at);
        }
        stop.store(true, Ordering::Relaxed);
        drop(rx);
        tokio::time::timeout(Duration::from_secs(10), pacer)
            .await
            .expect("the pacer stops")
            .unwrap();
    }
}
