//! The file layer under the store: positional reads and writes, explicit syncs.
//!
//! Everything the store does to disk goes through [`Vfs`], so that tests can swap the real file
//! system ([`StdFs`]) for [`crate::store::simfs::SimFs`], which forgets every write that was
//! not synced when it simulates a power cut.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An open file.
pub trait VfsFile: Send + Sync + std::fmt::Debug {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (0 at the end).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes all of `buf` at `offset` (into the page cache: not durable until a sync).
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Sets the file length.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Reserves disk blocks for the first `len` bytes (`fallocate`), so that later writes need
    /// no block allocation. Best effort: a file system without it leaves the file as it is.
    fn allocate(&self, _len: u64) -> io::Result<()> {
        Ok(())
    }
    /// The file length.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// The file as something `sendfile` can read from (`None` where there is no real file).
    fn send_source(self: Arc<Self>) -> Option<Arc<dyn std::os::fd::AsFd + Send + Sync>> {
        None
    }
    /// Makes written data (and the size) durable: `fdatasync`.
    fn sync_data(&self) -> io::Result<()>;
    /// Makes data and all metadata durable: `fsync`.
    fn sync_all(&self) -> io::Result<()>;

    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset)? {
                0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "read past the end of the file",
                    ))
                }
                n => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }
}

/// A file system.
pub trait Vfs: Send + Sync + std::fmt::Debug {
    /// Opens `path` for reading and writing, creating it if `create`.
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn VfsFile>>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Names of the entries of a directory (not paths), sorted.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> bool;
    /// Whether `path` is a directory.
    fn is_dir(&self, path: &Path) -> bool;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes a directory and everything in it.
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Renames a file (atomically replacing `to`).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;

    /// Reads a whole file.
    fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        let f = self.open(path, false)?;
        let len = f.len()? as usize;
        let mut buf = vec![0u8; len];
        f.read_exact_at(&mut buf, 0)?;
        Ok(buf)
    }

    /// Replaces `path` atomically and durably: write a temporary file, sync it, rename it over
    /// `path`, sync the directory.
    ///
    /// When the new contents cannot be written or synced (a full disk, an I/O error), `path`
    /// keeps its old contents and the temporary file is removed, so nothing is left that takes
    /// space or gets in the way of the next attempt (which writes everything again: nothing
    /// relies on the page cache of a failed attempt).
    fn write_file_atomic(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let dir = path
            .parent()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no parent"))?;
        self.create_dir_all(dir)?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let written = self.open(&tmp, true).and_then(|f| {
            f.set_len(0)?;
            f.write_all_at(data, 0)?;
            f.sync_all()
        });
        if let Err(e) = written.and_then(|()| self.rename(&tmp, path)) {
            if self.exists(&tmp) {
                let _ = self.remove_file(&tmp);
            }
            return Err(e);
        }
        self.sync_dir(dir)
    }
}

/// Whether `e` says the file system is out of space (`ENOSPC`, or `EDQUOT`: over a quota).
pub fn is_no_space(e: &io::Error) -> bool {
    let raw = e.raw_os_error();
    raw == Some(rustix::io::Errno::NOSPC.raw_os_error())
        || raw == Some(rustix::io::Errno::DQUOT.raw_os_error())
        || matches!(
            e.kind(),
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
        )
}

/// The real file system (`pread`/`pwrite`, `fdatasync`, `fsync`).
#[derive(Debug, Default, Clone, Copy)]
pub struct StdFs;

#[derive(Debug)]
struct StdFile(std::fs::File);

impl std::os::fd::AsFd for StdFile {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl VfsFile for StdFile {
    fn send_source(self: Arc<Self>) -> Option<Arc<dyn std::os::fd::AsFd + Send + Sync>> {
        Some(self)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(&self.0, buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(&self.0, buf, offset)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        match rustix::fs::fallocate(&self.0, rustix::fs::FallocateFlags::empty(), 0, len) {
            Ok(()) => Ok(()),
            // Not every file system can (tmpfs on old kernels, some network file systems).
            Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::NOSYS) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.0.sync_all()
    }
}

impl Vfs for StdFs {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn VfsFile>> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)?;
        Ok(Arc::new(StdFile(f)))
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names: Vec<String> = std::fs::read_dir(path)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::File::open(path)?.sync_all()
    }
}
