//! Child processes of the tests (brokers, name servers, `rocketmq-lite`): killed when dropped,
//! started with a bounded wait for their first line, and started again when a port chosen in
//! advance was taken meanwhile.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a child may take to print its first line (a broker waiting for a DLedger election
/// included) before the test gives up on it.
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a child that cannot bind a port chosen in advance is started again.
pub const PORT_RETRY: Duration = Duration::from_secs(30);

/// A child process killed when dropped (a failing test leaves no broker behind).
pub struct ChildGuard(pub Child);

impl std::ops::Deref for ChildGuard {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for ChildGuard {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A child that printed its first line.
pub struct Started {
    pub child: ChildGuard,
    /// Its first line, without the line end.
    pub line: String,
    /// Where its standard error begins in the log file (earlier attempts wrote before).
    pub stderr_from: u64,
}

/// Why a child did not print its first line.
#[derive(Debug)]
pub struct BootFailure {
    /// What it wrote to standard error meanwhile.
    pub stderr: String,
    /// It exited (rather than staying silent for [`BOOT_TIMEOUT`]).
    pub exited: bool,
}

/// Spawns `cmd` with standard output piped and standard error appended to `stderr_log`, and
/// waits at most `timeout` for its first line (returned without its line end). The rest of
/// standard output is read and dropped, so the child never blocks on it. On failure the child
/// is killed.
pub fn try_spawn_first_line(
    cmd: &mut Command,
    stderr_log: &Path,
    timeout: Duration,
) -> Result<Started, BootFailure> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(stderr_log)
        .unwrap_or_else(|e| panic!("{}: {e}", stderr_log.display()));
    let from = log.metadata().map(|m| m.len()).unwrap_or(0);
    let mut child = ChildGuard(
        cmd.stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}")),
    );
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let _ = tx.send(lines.next().and_then(Result::ok));
        for _ in lines.map_while(Result::ok) {}
    });
    let exited = match rx.recv_timeout(timeout) {
        Ok(Some(line)) => {
            return Ok(Started {
                child,
                line,
                stderr_from: from,
            })
        }
        // Its standard output closed: it is exiting.
        Ok(None) => {
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            true
        }
        Err(_) => false,
    };
    let _ = child.kill();
    let _ = child.wait();
    Err(BootFailure {
        stderr: read_from(stderr_log, from),
        exited,
    })
}

/// [`try_spawn_first_line`] with [`BOOT_TIMEOUT`], started again (for up to [`PORT_RETRY`])
/// while the child fails because an address it binds is in use: the tests choose ports in
/// advance (from the ephemeral range), or restart a process on its old ports, and meanwhile
/// any connection may take such a port as its local end. Panics on any other failure, with
/// the child's standard error.
pub fn spawn_first_line(cmd: &mut Command, stderr_log: &Path) -> Started {
    let deadline = Instant::now() + PORT_RETRY;
    loop {
        match try_spawn_first_line(cmd, stderr_log, BOOT_TIMEOUT) {
            Ok(started) => return started,
            Err(f)
                if f.exited
                    && f.stderr.contains("Address already in use")
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(f) if f.exited => panic!("{cmd:?} exited without its first line:\n{}", f.stderr),
            Err(f) => panic!(
                "{cmd:?} printed no first line within {BOOT_TIMEOUT:?}:\n{}",
                f.stderr
            ),
        }
    }
}

/// A file's text from byte `from` on (empty if it cannot be read).
pub fn read_from(path: &Path, from: u64) -> String {
    let mut text = Vec::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.seek(SeekFrom::Start(from));
        let _ = f.read_to_end(&mut text);
    }
    String::from_utf8_lossy(&text).into_owned()
}
