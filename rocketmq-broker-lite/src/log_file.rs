//! The programs' log: text or JSON lines, colours only on a terminal, and optionally a file in a
//! log directory that rolls over by size (`<name>.log`, then `<name>.log.1` the newest of the
//! old ones, up to a count, the oldest deleted).

use std::fs::{File, OpenOptions};
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::MakeWriter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line (for log shippers).
    Json,
}

/// The programs' logging options.
#[derive(Debug, Clone, clap::Args)]
pub struct LogOptions {
    /// `text` or `json` lines.
    #[arg(long = "log-format", value_enum, default_value = "text")]
    pub format: LogFormat,
    /// Write the log to `<dir>/<program>.log` (rolled over by size) instead of standard error.
    #[arg(long = "log-dir")]
    pub dir: Option<PathBuf>,
    /// Roll the log file over at this many MiB.
    #[arg(long = "log-max-mib", default_value_t = 100)]
    pub max_mib: u64,
    /// Old log files kept.
    #[arg(long = "log-max-files", default_value_t = 10)]
    pub max_files: usize,
}

impl Default for LogOptions {
    fn default() -> Self {
        Self {
            format: LogFormat::Text,
            dir: None,
            max_mib: 100,
            max_files: 10,
        }
    }
}

/// A log file that rolls over once it would grow past `max_bytes`.
#[derive(Debug, Clone)]
pub struct RollingFile {
    inner: Arc<Mutex<Rolling>>,
}

#[derive(Debug)]
struct Rolling {
    path: PathBuf,
    file: File,
    written: u64,
    max_bytes: u64,
    max_files: usize,
}

impl RollingFile {
    /// Opens (appends to) `<dir>/<name>.log`, creating the directory.
    pub fn open(dir: &Path, name: &str, max_bytes: u64, max_files: usize) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("{name}.log"));
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        let written = file.metadata()?.len();
        Ok(Self {
            inner: Arc::new(Mutex::new(Rolling {
                path,
                file,
                written,
                max_bytes: max_bytes.max(1),
                max_files,
            })),
        })
    }
}

impl Rolling {
    fn numbered(&self, n: usize) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(format!(".{n}"));
        PathBuf::from(p)
    }

    /// `name.log.(k)` → `name.log.(k+1)`, the last one dropped, `name.log` → `name.log.1`, and a
    /// new `name.log`.
    fn roll(&mut self) -> io::Result<()> {
        self.file.flush()?;
        if self.max_files == 0 {
            let _ = std::fs::remove_file(&self.path);
        } else {
            let _ = std::fs::remove_file(self.numbered(self.max_files));
            for n in (1..self.max_files).rev() {
                let from = self.numbered(n);
                if from.exists() {
                    std::fs::rename(&from, self.numbered(n + 1))?;
                }
            }
            std::fs::rename(&self.path, self.numbered(1))?;
        }
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        self.written = 0;
        Ok(())
    }

    fn write_line(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.written > 0 && self.written + buf.len() as u64 > self.max_bytes {
            // A failed roll-over keeps writing to the current file rather than lose lines.
            if let Err(e) = self.roll() {
                let _ = writeln!(io::stderr(), "cannot roll the log file over: {e}");
            }
        }
        self.file.write_all(buf)?;
        self.written += buf.len() as u64;
        Ok(buf.len())
    }
}

/// One event's writer: the event's line is written whole under the lock.
pub struct RollingWriter {
    inner: Arc<Mutex<Rolling>>,
    buf: Vec<u8>,
}

impl Write for RollingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        r.write_line(&self.buf)?;
        self.buf.clear();
        Ok(())
    }
}

impl Drop for RollingWriter {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

impl<'a> MakeWriter<'a> for RollingFile {
    type Writer = RollingWriter;

    fn make_writer(&'a self) -> Self::Writer {
        RollingWriter {
            inner: self.inner.clone(),
            buf: Vec::with_capacity(256),
        }
    }
}

/// Sets up the global log of program `name`: `RUST_LOG` filters (default `info`); colours only
/// when standard error is a terminal and no log directory is given.
pub fn init(name: &str, opts: &LogOptions) -> Result<(), String> {
    use tracing_subscriber::fmt;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let file = match &opts.dir {
        Some(dir) => Some(
            RollingFile::open(
                dir,
                name,
                opts.max_mib.saturating_mul(1024 * 1024),
                opts.max_files,
            )
            .map_err(|e| format!("cannot open the log in {}: {e}", dir.display()))?,
        ),
        None => None,
    };
    let ansi = file.is_none() && io::stderr().is_terminal();
    let builder = fmt().with_env_filter(filter).with_ansi(ansi);
    let result = match (opts.format, file) {
        (LogFormat::Text, None) => builder.with_writer(io::stderr).try_init(),
        (LogFormat::Text, Some(f)) => builder.with_writer(f).try_init(),
        (LogFormat::Json, None) => builder.json().with_writer(io::stderr).try_init(),
        (LogFormat::Json, Some(f)) => builder.json().with_writer(f).try_init(),
    };
    result.map_err(|e| format!("cannot set up logging: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_rolls_over_by_size_and_keeps_so_many_files() {
        let dir = crate::embedded::TempDir::new("log-roll").unwrap();
        let log = RollingFile::open(dir.path(), "broker", 100, 2).unwrap();
        for i in 0..10 {
            let mut w = log.make_writer();
            writeln!(w, "line {i:02} {}", "x".repeat(30)).unwrap();
        }
        let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap();
        // 40-byte lines, 100 bytes a file: two lines a file, the newest in broker.log.
        assert_eq!(read("broker.log").lines().count(), 2);
        assert!(read("broker.log").starts_with("line 08"));
        assert!(read("broker.log.1").starts_with("line 06"));
        assert!(read("broker.log.2").starts_with("line 04"));
        assert!(!dir.path().join("broker.log.3").exists());
        // Reopened, it appends and keeps counting the bytes already there.
        let log = RollingFile::open(dir.path(), "broker", 100, 2).unwrap();
        let mut w = log.make_writer();
        writeln!(w, "line 10 {}", "x".repeat(30)).unwrap();
        drop(w);
        assert!(read("broker.log").starts_with("line 10"));
        assert!(read("broker.log.1").starts_with("line 08"));
    }

    #[test]
    fn a_line_is_never_split_between_files() {
        let dir = crate::embedded::TempDir::new("log-whole").unwrap();
        let log = RollingFile::open(dir.path(), "n", 40, 3).unwrap();
        let mut w = log.make_writer();
        // Written in pieces, as the formatter does: one line, one file.
        w.write_all(b"first half, ").unwrap();
        w.write_all(b"second half of a long line\n").unwrap();
        drop(w);
        let mut w = log.make_writer();
        w.write_all(b"next\n").unwrap();
        drop(w);
        let main = std::fs::read_to_string(dir.path().join("n.log")).unwrap();
        let old = std::fs::read_to_string(dir.path().join("n.log.1")).unwrap();
        assert_eq!(old, "first half, second half of a long line\n");
        assert_eq!(main, "next\n");
    }
}
