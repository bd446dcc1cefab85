//! An in-memory file system that can simulate a power cut, for durability tests.
//!
//! Every file keeps what a real disk would keep: the bytes as of its last `sync_data`/`sync_all`
//! (the *durable* image) plus the writes made since (the *volatile* log). Directory entries
//! (creations, renames, removals) become durable only when their directory is synced.
//! [`SimFs::power_cut`] then throws away everything volatile — optionally keeping a random prefix
//! of each file's volatile writes, the last one possibly torn, as a disk that wrote some pages
//! before losing power would — and invalidates every open handle, so a store that was running
//! cannot write any more (as if its process died with the machine).

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

#[derive(Debug, Default)]
struct Inode {
    data: Vec<u8>,
    durable: Vec<u8>,
    volatile: Vec<Op>,
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
}

/// The simulated file system. Cloning shares the same state.
#[derive(Debug, Clone)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
    generation: Arc<AtomicU64>,
    gate: Arc<(Mutex<SyncGate>, Condvar)>,
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
        }
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
        }
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
        let mut i = lock(&self.inode);
        let op = Op::Write(offset, buf.to_vec());
        apply(&mut i.data, &op);
        i.volatile.push(op);
        Ok(())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.check()?;
        let mut i = lock(&self.inode);
        let op = Op::SetLen(len);
        apply(&mut i.data, &op);
        i.volatile.push(op);
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        self.check()?;
        Ok(lock(&self.inode).data.len() as u64)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.check()?;
        self.fs.pass_gate(&self.path);
        {
            let mut i = lock(&self.inode);
            i.durable = i.data.clone();
            i.volatile.clear();
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
        lock(&self.state)
            .files
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut st = lock(&self.state);
        if !st.dirs.contains(path) {
            return Err(not_found(path));
        }
        st.files.retain(|p, _| !p.starts_with(path));
        st.durable_files.retain(|p, _| !p.starts_with(path));
        st.dirs.retain(|p| !p.starts_with(path));
        Ok(())
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = lock(&self.state);
        let inode = st.files.remove(from).ok_or_else(|| not_found(from))?;
        st.files.insert(to.to_path_buf(), inode);
        Ok(())
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
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
}
