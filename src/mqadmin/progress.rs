//! Progress bars on long operations (reading many queues, statistics of every topic): drawn on
//! standard error, only when it is a terminal (indicatif hides a bar otherwise, so redirected
//! output and scripts see none) and never with `--json`.

use std::sync::atomic::{AtomicBool, Ordering};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

static QUIET: AtomicBool = AtomicBool::new(false);

/// No bars at all from now on (`--json`).
pub(crate) fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// A progress bar, erased when dropped.
pub(crate) struct Progress(ProgressBar);

impl Progress {
    /// `n` more steps done.
    pub(crate) fn inc(&self, n: u64) {
        self.0.inc(n);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// A bar of `len` steps labelled `what` (hidden when quiet or off a terminal).
pub(crate) fn bar(len: usize, what: &str) -> Progress {
    if QUIET.load(Ordering::Relaxed) {
        return Progress(ProgressBar::hidden());
    }
    let b = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}") {
        b.set_style(style.progress_chars("=> "));
    }
    b.set_message(what.to_string());
    Progress(b)
}
