//! An in-memory file system that can simulate a power cut, for durability tests.
//!
//! Every file keeps what a real disk would keep: the bytes as of its last `sync_data`/`sync_all`
//! (the *durable* image) plus the writes made since (the *volatile* log). Directory entries
//! (creations, renames, removals) become durable only when their directory is synced.
//! [`SimFs::power_cut`] then throws away everything volatile — optionally keeping a random prefix
//! of each file's volatile writes, the last one possibly torn, as a disk that wrote some pages
//! before losing power would — and invalidates every open handle, so a store that was running
//! cannot write any more (as if its process died with the machine).
//!
//! For fault tests it can also run out of space (a capacity in bytes, counted in 4 KiB blocks
//! as a real file system allocates them: `set_len` leaves holes, `allocate` and writes fill
//! them), fail chosen operations with `ENOSPC` or `EIO` ([`SimFs::inject`]), and slow syncs
//! down ([`SimFs::delay_syncs`]). A failed sync behaves as Linux does after a write-back error
//! (the "fsyncgate" semantics): the writes it covered stay readable but are forgotten by the
//! disk — they are not durable, and a later sync that succeeds does not make them so.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::vfs::{Vfs, VfsFile};

#[derive(Debug, Clone)]
enum Op {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

/// Block size of the space accounting.
const BLOCK: u64 = 4096;

#[derive(Debug, Default)]
struct Inode {
    data: Vec<u8>,
    durable: Vec<u8>,
    volatile: Vec<Op>,
    /// Allocated blocks (running view) and as of the last sync.
    blocks: BTreeSet<u64>,
    durable_blocks: BTreeSet<u64>,
}

impl Inode {
    /// Blocks of `[off, off + len)` not allocated yet.
    fn missing_blocks(&self, off: u64, len: u64) -> Vec<u64> {
        if len == 0 {
            return Vec::new();
        }
        (off / BLOCK..(off + len).div_ceil(BLOCK))
            .filter(|b| !self.blocks.contains(b))
            .collect()
    }
}

/// An operation of the file layer a fault can be injected into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOp {
    /// `write_all_at`.
    Write,
    /// `set_len`.
    SetLen,
    /// `allocate` (fallocate).
    Allocate,
    /// `sync_data` / `sync_all` of a file.
    Sync,
    /// `sync_dir`.
    SyncDir,
    /// `open` with `create` of a file that does not exist yet.
    Create,
    /// `rename`.
    Rename,
    /// `read_at`.
    Read,
}

/// The error an injected fault returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// `ENOSPC`: no space left on device.
    NoSpace,
    /// `EIO`: an I/O error.
    Io,
}

impl FaultKind {
    fn error(self, op: FaultOp, path: &Path) -> io::Error {
        let errno = match self {
            FaultKind::NoSpace => rustix::io::Errno::NOSPC,
            FaultKind::Io => rustix::io::Errno::IO,
        };
        let e = io::Error::from_raw_os_error(errno.raw_os_error());
        io::Error::new(
            e.kind(),
            format!("simulated {op:?} fault on {}: {e}", path.display()),
        )
    }
}

#[derive(Debug, Clone)]
struct Fault {
    op: FaultOp,
    under: PathBuf,
    kind: FaultKind,
    /// Matching operations let through before the fault fires.
    skip: u64,
    /// Times it fires (`None`: until cleared).
    times: Option<u64>,
}

#[derive(Debug, Default)]
struct Faults {
    rules: Vec<Fault>,
    /// Faults fired so far.
    fired: u64,
    sync_delay: Option<(PathBuf, Duration)>,
}

fn apply(data: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Write(off, bytes) => {
            let end = *off as usize + bytes.len();
            if data.len() < end {
                data.resize(end, 0);
            }
            data[*off as usize..end].copy_from_slice(bytes);
        }
        Op::SetLen(len) => data.resize(*len as usize, 0),
    }
}

#[derive(Debug, Default)]
struct State {
    /// The namespace as the running system sees it.
    files: BTreeMap<PathBuf, Arc<Mutex<Inode>>>,
    /// The namespace as it would be found after a power cut.
    durable_files: BTreeMap<PathBuf, Arc<Mutex<Inode>>>,
    dirs: BTreeSet<PathBuf>,
    rng: u64,
    syncs: u64,
    /// Capacity in bytes (`None`: unlimited).
    capacity: Option<u64>,
}

impl State {
    /// Blocks allocated by the files of the running namespace.
    fn used_blocks(&self) -> u64 {
        self.files
            .values()
            .map(|i| lock(i).blocks.len() as u64)
            .sum()
    }
}

impl State {
    fn next_rand(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.rng.max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Syncs of files under `held` wait until it is cleared ([`SimFs::hold_syncs`]).
#[derive(Debug, Default)]
struct SyncGate {
    held: Option<PathBuf>,
    /// Syncs waiting at the gate now.
    waiting: usize,
    /// Writes of files under it wait until it is cleared ([`SimFs::hold_writes`]).
    writes_held: Option<PathBuf>,
    /// Writes waiting at the gate now.
    writes_waiting: usize,
    /// Reads of files under it wait until it is cleared ([`SimFs::hold_reads`]).
    reads_held: Option<PathBuf>,
    /// Reads waiting at the gate now.
    reads_waiting: usize,
}

/// The simulated file system. Cloning shares the same state.
#[derive(Debug, Clone)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
    generation: Arc<AtomicU64>,
    gate: Arc<(Mutex<SyncGate>, Condvar)>,
    faults: Arc<Mutex<Faults>>,
    /// Blocks allocated by the running namespace (kept up to date for the capacity check,
    /// without taking the namespace lock on every write).
    used: Arc<AtomicU64>,
}

impl Default for SimFs {
    fn default() -> Self {
        Self::new(0x5EED)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found", path.display()),
    )
}

impl SimFs {
    /// An empty file system; `seed` drives the choice of torn writes.
    pub fn new(seed: u64) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                rng: seed,
                ..State::default()
            })),
            generation: Arc::new(AtomicU64::new(0)),
            gate: Arc::default(),
            faults: Arc::default(),
            used: Arc::default(),
        }
    }

    /// Limits the space of the file system to `bytes` (`None`: unlimited). Files already
    /// bigger stay; further allocations fail with `ENOSPC`.
    pub fn set_capacity(&self, bytes: Option<u64>) {
        lock(&self.state).capacity = bytes;
    }

    /// Bytes allocated by the files (in 4 KiB blocks).
    pub fn used_bytes(&self) -> u64 {
        self.used.load(Ordering::SeqCst) * BLOCK
    }

    /// Bytes still free (`None` without a capacity).
    pub fn free_bytes(&self) -> Option<u64> {
        let cap = lock(&self.state).capacity?;
        Some(cap.saturating_sub(self.used_bytes()))
    }

    /// Makes `op` on paths under `under` fail with `kind`: after `skip` matching operations
    /// succeed, the next `times` fail (`None`: every one, until [`SimFs::clear_faults`]).
    pub fn inject(
        &self,
        op: FaultOp,
        under: impl Into<PathBuf>,
        kind: FaultKind,
        skip: u64,
        times: Option<u64>,
    ) {
        lock(&self.faults).rules.push(Fault {
            op,
            under: under.into(),
            kind,
            skip,
            times,
        });
    }

    /// Removes every injected fault and sync delay.
    pub fn clear_faults(&self) {
        let mut f = lock(&self.faults);
        f.rules.clear();
        f.sync_delay = None;
    }

    /// Injected faults that fired so far.
    pub fn faults_fired(&self) -> u64 {
        lock(&self.faults).fired
    }

    /// Makes every sync of a file under `under` take `delay` (a stalling disk); `None` stops it.
    pub fn delay_syncs(&self, under: impl Into<PathBuf>, delay: Option<Duration>) {
        lock(&self.faults).sync_delay = delay.map(|d| (under.into(), d));
    }

    /// The injected error for `op` on `path`, if a rule fires.
    fn fault(&self, op: FaultOp, path: &Path) -> io::Result<()> {
        let mut f = lock(&self.faults);
        let mut fired = None;
        for rule in f.rules.iter_mut() {
            if rule.op != op || !path.starts_with(&rule.under) || rule.times == Some(0) {
                continue;
            }
            if rule.skip > 0 {
                rule.skip -= 1;
                continue;
            }
            if let Some(t) = rule.times.as_mut() {
                *t -= 1;
            }
            fired = Some(rule.kind);
            break;
        }
        f.rules.retain(|r| r.times != Some(0));
        match fired {
            Some(kind) => {
                f.fired += 1;
                Err(kind.error(op, path))
            }
            None => Ok(()),
        }
    }

    /// Allocates the blocks of `[off, off + len)` of `inode`, all or nothing.
    fn allocate_blocks(
        &self,
        inode: &mut Inode,
        off: u64,
        len: u64,
        path: &Path,
    ) -> io::Result<()> {
        let missing = inode.missing_blocks(off, len);
        if missing.is_empty() {
            return Ok(());
        }
        let capacity = lock(&self.state).capacity;
        let n = missing.len() as u64;
        loop {
            let used = self.used.load(Ordering::SeqCst);
            if capacity.is_some_and(|cap| (used + n) * BLOCK > cap) {
                return Err(FaultKind::NoSpace.error(FaultOp::Write, path));
            }
            if self
                .used
                .compare_exchange(used, used + n, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                break;
            }
        }
        inode.blocks.extend(missing);
        Ok(())
    }

    /// Frees the blocks of `inode` at or past byte `len`.
    fn free_blocks_from(&self, inode: &mut Inode, len: u64) {
        let first = len.div_ceil(BLOCK);
        let before = inode.blocks.len();
        inode.blocks.retain(|b| *b < first);
        let freed = (before - inode.blocks.len()) as u64;
        if freed > 0 {
            self.used.fetch_sub(freed, Ordering::SeqCst);
        }
    }

    /// Frees every block of a file leaving the running namespace.
    fn release(&self, inode: &Arc<Mutex<Inode>>) {
        let mut i = lock(inode);
        let n = i.blocks.len() as u64;
        i.blocks.clear();
        self.used.fetch_sub(n, Ordering::SeqCst);
    }

    /// Makes every `sync_data`/`sync_all` of a file under `dir` wait until
    /// [`SimFs::release_syncs`]: a disk that takes its time, to show what waits for a sync.
    pub fn hold_syncs(&self, dir: impl Into<PathBuf>) {
        lock(&self.gate.0).held = Some(dir.into());
    }

    /// Lets held syncs (and later ones) through.
    pub fn release_syncs(&self) {
        lock(&self.gate.0).held = None;
        self.gate.1.notify_all();
    }

    /// Waits up to `timeout` until at least one sync waits at the gate.
    pub fn wait_for_held_sync(&self, timeout: Duration) -> bool {
        let g = lock(&self.gate.0);
        let (g, _) = self
            .gate
            .1
            .wait_timeout_while(g, timeout, |g| g.waiting == 0)
            .unwrap_or_else(|p| p.into_inner());
        g.waiting > 0
    }

    /// Makes every write of a file under `dir` wait until [`SimFs::release_writes`]: a stalled
    /// disk or page cache (the writing thread is blocked, as in a write that waits for memory).
    pub fn hold_writes(&self, dir: impl Into<PathBuf>) {
        lock(&self.gate.0).writes_held = Some(dir.into());
    }

    /// Lets held writes (and later ones) through.
    pub fn release_writes(&self) {
        lock(&self.gate.0).writes_held = None;
        self.gate.1.notify_all();
    }

    /// Waits up to `timeout` until at least one write waits at the gate.
    pub fn wait_for_held_write(&self, timeout: Duration) -> bool {
        let g = lock(&self.gate.0);
        let (g, _) = self
            .gate
            .1
            .wait_timeout_while(g, timeout, |g| g.writes_waiting == 0)
            .unwrap_or_else(|p| p.into_inner());
        g.writes_waiting > 0
    }

    /// Makes every read of a file under `dir` wait until [`SimFs::release_reads`]: a slow disk
    /// under a read, to show what waits for it.
    pub fn hold_reads(&self, dir: impl Into<PathBuf>) {
        lock(&self.gate.0).reads_held = Some(dir.into());
    }

    /// Lets held reads (and later ones) through.
    pub fn release_reads(&self) {
        lock(&self.gate.0).reads_held = None;
        self.gate.1.notify_all();
    }

    /// Waits up to `timeout` until at least one read waits at the gate.
    pub fn wait_for_held_read(&self, timeout: Duration) -> bool {
        let g = lock(&self.gate.0);
        let (g, _) = self
            .gate
            .1
            .wait_timeout_while(g, timeout, |g| g.reads_waiting == 0)
            .unwrap_or_else(|p| p.into_inner());
        g.reads_waiting > 0
    }

    fn pass_read_gate(&self, path: &Path) {
        let mut g = lock(&self.gate.0);
        if !g.reads_held.as_ref().is_some_and(|d| path.starts_with(d)) {
            return;
        }
        g.reads_waiting += 1;
        self.gate.1.notify_all();
        while g.reads_held.as_ref().is_some_and(|d| path.starts_with(d)) {
            g = self.gate.1.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        g.reads_waiting -= 1;
    }

    fn pass_write_gate(&self, path: &Path) {
        let mut g = lock(&self.gate.0);
        if !g.writes_held.as_ref().is_some_and(|d| path.starts_with(d)) {
            return;
        }
        g.writes_waiting += 1;
        self.gate.1.notify_all();
        while g.writes_held.as_ref().is_some_and(|d| path.starts_with(d)) {
            g = self.gate.1.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        g.writes_waiting -= 1;
    }

    fn pass_gate(&self, path: &Path) {
        let mut g = lock(&self.gate.0);
        if !g.held.as_ref().is_some_and(|d| path.starts_with(d)) {
            return;
        }
        g.waiting += 1;
        self.gate.1.notify_all();
        while g.held.as_ref().is_some_and(|d| path.starts_with(d)) {
            g = self.gate.1.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        g.waiting -= 1;
    }

    /// Loses power: volatile writes and unsynced directory changes vanish. With `torn`, each
    /// file keeps a random prefix of its volatile writes, the last kept one cut at a random byte.
    /// Every handle opened before fails from now on.
    pub fn power_cut(&self, torn: bool) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        let mut st = lock(&self.state);
        st.files = st.durable_files.clone();
        let inodes: Vec<Arc<Mutex<Inode>>> = st.files.values().cloned().collect();
        for inode in inodes {
            let keep = {
                let i = lock(&inode);
                if torn && !i.volatile.is_empty() {
                    (st.next_rand() % (i.volatile.len() as u64 + 1)) as usize
                } else {
                    0
                }
            };
            let cut = st.next_rand();
            let mut i = lock(&inode);
            let mut data = i.durable.clone();
            let ops: Vec<Op> = i.volatile.drain(..).collect();
            for (n, op) in ops.iter().take(keep).enumerate() {
                match op {
                    Op::Write(off, bytes) if n + 1 == keep && !bytes.is_empty() => {
                        let len = (cut % bytes.len() as u64) as usize;
                        apply(&mut data, &Op::Write(*off, bytes[..len].to_vec()));
                    }
                    other => apply(&mut data, other),
                }
            }
            i.data = data.clone();
            i.durable = data;
            i.blocks = i.durable_blocks.clone();
        }
        let used = st.used_blocks();
        self.used.store(used, Ordering::SeqCst);
    }

    /// Simulates a process crash without power loss (`kill -9`): written data stays (it is in
    /// the page cache), but handles opened before become invalid.
    pub fn kill_process(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Number of data syncs performed so far.
    pub fn sync_count(&self) -> u64 {
        lock(&self.state).syncs
    }

    /// Overwrites bytes of a file directly and durably (to inject corruption).
    pub fn corrupt(&self, path: &Path, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let st = lock(&self.state);
        let inode = st.files.get(path).ok_or_else(|| not_found(path))?;
        let mut i = lock(inode);
        apply(&mut i.data, &Op::Write(offset, bytes.to_vec()));
        apply(&mut i.durable, &Op::Write(offset, bytes.to_vec()));
        Ok(())
    }

    /// The current size of a file.
    pub fn file_len(&self, path: &Path) -> Option<u64> {
        let st = lock(&self.state);
        st.files.get(path).map(|i| lock(i).data.len() as u64)
    }
}

/// The simulated disk's usage, as `statvfs` would report it (0 % without a capacity).
impl super::clock::DiskUsage for SimFs {
    fn used_percent(&self, _path: &Path) -> u32 {
        let Some(cap) = lock(&self.state).capacity.filter(|c| *c > 0) else {
            return 0;
        };
        (self.used_bytes().saturating_mul(100))
            .div_ceil(cap)
            .min(100) as u32
    }

    fn available_bytes(&self, _path: &Path) -> Option<u64> {
        self.free_bytes()
    }
}

#[derive(Debug)]
struct SimFile {
    fs: SimFs,
    path: PathBuf,
    inode: Arc<Mutex<Inode>>,
    generation: u64,
}

impl SimFile {
    fn check(&self) -> io::Result<()> {
        if self.fs.generation.load(Ordering::SeqCst) != self.generation {
            return Err(io::Error::other("simulated crash: handle is dead"));
        }
        Ok(())
    }
}

impl VfsFile for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.check()?;
        self.fs.fault(FaultOp::Read, &self.path)?;
        self.fs.pass_read_gate(&self.path);
        let i = lock(&self.inode);
        let off = offset as usize;
        if off >= i.data.len() {
            return Ok(0);
        }
        let n = buf.len().min(i.data.len() - off);
        buf[..n].copy_from_slice(&i.data[off..off + n]);
        Ok(n)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check()?;
        self.fs.pass_write_gate(&self.path);
        self.fs.fault(FaultOp::Write, &self.path)?;
        let mut i = lock(&self.inode);
        self.fs
            .allocate_blocks(&mut i, offset, buf.len() as u64, &self.path)?;
        let op = Op::Write(offset, buf.to_vec());
        apply(&mut i.data, &op);
        i.volatile.push(op);
        Ok(())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.check()?;
        self.fs.fault(FaultOp::SetLen, &self.path)?;
        let mut i = lock(&self.inode);
        self.fs.free_blocks_from(&mut i, len);
        let op = Op::SetLen(len);
        apply(&mut i.data, &op);
        i.volatile.push(op);
        Ok(())
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        self.check()?;
        self.fs.fault(FaultOp::Allocate, &self.path)?;
        let mut i = lock(&self.inode);
        self.fs.allocate_blocks(&mut i, 0, len, &self.path)?;
        if (i.data.len() as u64) < len {
            let op = Op::SetLen(len);
            apply(&mut i.data, &op);
            i.volatile.push(op);
        }
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        self.check()?;
        Ok(lock(&self.inode).data.len() as u64)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.check()?;
        self.fs.pass_gate(&self.path);
        let delay = lock(&self.fs.faults)
            .sync_delay
            .as_ref()
            .filter(|(under, _)| self.path.starts_with(under))
            .map(|(_, d)| *d);
        if let Some(d) = delay {
            std::thread::sleep(d);
        }
        self.check()?;
        if let Err(e) = self.fs.fault(FaultOp::Sync, &self.path) {
            // Write-back failed: the pages are marked clean and their contents forgotten by
            // the disk; they stay readable, but no later sync makes them durable.
            lock(&self.inode).volatile.clear();
            return Err(e);
        }
        {
            let mut i = lock(&self.inode);
            let ops = std::mem::take(&mut i.volatile);
            let mut durable = std::mem::take(&mut i.durable);
            for op in &ops {
                apply(&mut durable, op);
            }
            i.durable = durable;
            i.durable_blocks = i.blocks.clone();
        }
        lock(&self.fs.state).syncs += 1;
        Ok(())
    }
    fn sync_all(&self) -> io::Result<()> {
        self.sync_data()
    }
}

impl Vfs for SimFs {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn VfsFile>> {
        let mut st = lock(&self.state);
        let parent = path.parent().map(Path::to_path_buf).unwrap_or_default();
        if !st.dirs.contains(&parent) {
            return Err(not_found(&parent));
        }
        let inode = match st.files.get(path) {
            Some(i) => i.clone(),
            None if create => {
                self.fault(FaultOp::Create, path)?;
                let i = Arc::new(Mutex::new(Inode::default()));
                st.files.insert(path.to_path_buf(), i.clone());
                i
            }
            None => return Err(not_found(path)),
        };
        Ok(Arc::new(SimFile {
            fs: self.clone(),
            path: path.to_path_buf(),
            inode,
            generation: self.generation.load(Ordering::SeqCst),
        }))
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut st = lock(&self.state);
        for a in path.ancestors() {
            st.dirs.insert(a.to_path_buf());
        }
        Ok(())
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let st = lock(&self.state);
        if !st.dirs.contains(path) {
            return Err(not_found(path));
        }
        let mut names: BTreeSet<String> = BTreeSet::new();
        for p in st.files.keys().chain(st.dirs.iter()) {
            if p.parent() == Some(path) {
                if let Some(n) = p.file_name() {
                    names.insert(n.to_string_lossy().into_owned());
                }
            }
        }
        Ok(names.into_iter().collect())
    }
    fn exists(&self, path: &Path) -> bool {
        let st = lock(&self.state);
        st.files.contains_key(path) || st.dirs.contains(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        lock(&self.state).dirs.contains(path)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let inode = lock(&self.state)
            .files
            .remove(path)
            .ok_or_else(|| not_found(path))?;
        self.release(&inode);
        Ok(())
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut st = lock(&self.state);
        if !st.dirs.contains(path) {
            return Err(not_found(path));
        }
        let removed: Vec<Arc<Mutex<Inode>>> = st
            .files
            .iter()
            .filter(|(p, _)| p.starts_with(path))
            .map(|(_, i)| i.clone())
            .collect();
        st.files.retain(|p, _| !p.starts_with(path));
        st.durable_files.retain(|p, _| !p.starts_with(path));
        st.dirs.retain(|p| !p.starts_with(path));
        drop(st);
        for i in &removed {
            self.release(i);
        }
        Ok(())
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.fault(FaultOp::Rename, from)?;
        let mut st = lock(&self.state);
        let inode = st.files.remove(from).ok_or_else(|| not_found(from))?;
        let replaced = st.files.insert(to.to_path_buf(), inode);
        drop(st);
        if let Some(old) = replaced {
            self.release(&old);
        }
        Ok(())
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.fault(FaultOp::SyncDir, path)?;
        let mut st = lock(&self.state);
        let current: Vec<(PathBuf, Arc<Mutex<Inode>>)> = st
            .files
            .iter()
            .filter(|(p, _)| p.parent() == Some(path))
            .map(|(p, i)| (p.clone(), i.clone()))
            .collect();
        st.durable_files.retain(|p, _| p.parent() != Some(path));
        st.durable_files.extend(current);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_cut_forgets_unsynced_writes_and_entries() {
        let fs = SimFs::default();
        let dir = Path::new("/d");
        fs.create_dir_all(dir).unwrap();
        let a = fs.open(&dir.join("a"), true).unwrap();
        a.write_all_at(b"hello", 0).unwrap();
        a.sync_data().unwrap();
        fs.sync_dir(dir).unwrap();
        a.write_all_at(b"HELLO world", 0).unwrap();
        let b = fs.open(&dir.join("b"), true).unwrap();
        b.write_all_at(b"x", 0).unwrap();
        b.sync_data().unwrap(); // data synced, but the entry is not
        fs.power_cut(false);
        assert!(a.len().is_err(), "old handles are dead");
        assert_eq!(fs.read_file(&dir.join("a")).unwrap(), b"hello");
        assert!(!fs.exists(&dir.join("b")));
    }

    #[test]
    fn atomic_replace_survives_a_power_cut() {
        let fs = SimFs::default();
        let p = Path::new("/cfg/x.json");
        fs.write_file_atomic(p, b"v1").unwrap();
        fs.write_file_atomic(p, b"v2").unwrap();
        fs.power_cut(true);
        assert_eq!(fs.read_file(p).unwrap(), b"v2");
    }

    #[test]
    fn torn_power_cut_keeps_a_prefix_of_volatile_writes() {
        for seed in 1..50 {
            let fs = SimFs::new(seed);
            let dir = Path::new("/d");
            fs.create_dir_all(dir).unwrap();
            let f = fs.open(&dir.join("f"), true).unwrap();
            f.set_len(8).unwrap();
            f.sync_all().unwrap();
            fs.sync_dir(dir).unwrap();
            f.write_all_at(b"ab", 0).unwrap();
            f.write_all_at(b"cd", 2).unwrap();
            f.write_all_at(b"ef", 4).unwrap();
            fs.power_cut(true);
            let data = fs.read_file(&dir.join("f")).unwrap();
            assert_eq!(data.len(), 8);
            // A prefix: once a zero byte appears, everything after it is zero.
            let first_zero = data.iter().position(|b| *b == 0).unwrap_or(8);
            assert!(data[first_zero..].iter().all(|b| *b == 0), "{data:?}");
            assert_eq!(&b"abcdef"[..first_zero.min(6)], &data[..first_zero.min(6)]);
        }
    }

    #[test]
    fn capacity_counts_allocated_blocks_and_frees_them() {
        use crate::store::clock::DiskUsage;
        let fs = SimFs::default();
        let dir = Path::new("/d");
        fs.create_dir_all(dir).unwrap();
        fs.set_capacity(Some(16 * BLOCK));
        let a = fs.open(&dir.join("a"), true).unwrap();
        a.set_len(100 * BLOCK).unwrap(); // a hole takes no space
        assert_eq!(fs.used_bytes(), 0);
        a.allocate(8 * BLOCK).unwrap();
        assert_eq!(fs.used_bytes(), 8 * BLOCK);
        assert_eq!(fs.used_percent(dir), 50);
        a.write_all_at(&[1; 10], 50 * BLOCK).unwrap(); // fills one more block
        assert_eq!(fs.used_bytes(), 9 * BLOCK);
        let b = fs.open(&dir.join("b"), true).unwrap();
        let e = b.allocate(8 * BLOCK).unwrap_err();
        assert!(crate::store::vfs::is_no_space(&e), "{e}");
        assert_eq!(
            fs.used_bytes(),
            9 * BLOCK,
            "a failed allocation takes nothing"
        );
        let e = b.write_all_at(&vec![0; 8 * BLOCK as usize], 0).unwrap_err();
        assert!(crate::store::vfs::is_no_space(&e));
        fs.remove_file(&dir.join("a")).unwrap();
        assert_eq!(fs.used_bytes(), 0);
        b.allocate(8 * BLOCK).unwrap();
        assert_eq!(fs.available_bytes(dir), Some(8 * BLOCK));
    }

    #[test]
    fn injected_faults_fire_as_told() {
        let fs = SimFs::default();
        let dir = Path::new("/d");
        fs.create_dir_all(dir).unwrap();
        let f = fs.open(&dir.join("f"), true).unwrap();
        fs.inject(FaultOp::Write, "/d", FaultKind::NoSpace, 1, Some(2));
        f.write_all_at(b"a", 0).unwrap(); // skipped
        assert!(crate::store::vfs::is_no_space(
            &f.write_all_at(b"b", 0).unwrap_err()
        ));
        assert!(f.write_all_at(b"c", 0).is_err());
        f.write_all_at(b"d", 0).unwrap(); // used up
        assert_eq!(fs.faults_fired(), 2);
        fs.inject(FaultOp::Create, "/d", FaultKind::Io, 0, None);
        assert!(fs.open(&dir.join("g"), true).is_err());
        assert!(
            fs.open(&dir.join("f"), true).is_ok(),
            "opening an existing file"
        );
        fs.clear_faults();
        assert!(fs.open(&dir.join("g"), true).is_ok());
    }

    #[test]
    fn a_failed_sync_forgets_what_it_covered() {
        let fs = SimFs::default();
        let dir = Path::new("/d");
        fs.create_dir_all(dir).unwrap();
        let f = fs.open(&dir.join("f"), true).unwrap();
        f.write_all_at(b"one", 0).unwrap();
        f.sync_data().unwrap();
        fs.sync_dir(dir).unwrap();
        f.write_all_at(b"two", 3).unwrap();
        fs.inject(FaultOp::Sync, "/d", FaultKind::Io, 0, Some(1));
        assert!(f.sync_data().is_err());
        // Still readable, and a later sync succeeds...
        assert_eq!(fs.read_file(&dir.join("f")).unwrap(), b"onetwo");
        f.write_all_at(b"six", 6).unwrap();
        f.sync_data().unwrap();
        // ...but what the failed one covered never reaches the disk.
        fs.power_cut(false);
        assert_eq!(fs.read_file(&dir.join("f")).unwrap(), b"one\0\0\0six");
    }

    #[test]
    fn atomic_replace_keeps_the_old_file_when_the_new_one_cannot_be_written() {
        let p = Path::new("/cfg/x.json");
        for (op, kind) in [
            (FaultOp::Create, FaultKind::NoSpace),
            (FaultOp::Write, FaultKind::NoSpace),
            (FaultOp::Sync, FaultKind::Io),
            (FaultOp::Rename, FaultKind::Io),
        ] {
            let fs = SimFs::default();
            fs.write_file_atomic(p, b"old").unwrap();
            fs.inject(op, "/cfg", kind, 0, Some(1));
            assert!(fs.write_file_atomic(p, b"new").is_err(), "{op:?}");
            assert_eq!(fs.read_file(p).unwrap(), b"old", "{op:?}");
            assert!(
                !fs.exists(Path::new("/cfg/x.json.tmp")),
                "{op:?}: no temporary left"
            );
            fs.power_cut(true);
            assert_eq!(fs.read_file(p).unwrap(), b"old", "{op:?}");
            // The next attempt works.
            fs.write_file_atomic(p, b"new").unwrap();
            fs.power_cut(true);
            assert_eq!(fs.read_file(p).unwrap(), b"new", "{op:?}");
        }
    }
}
