//! Opening the store: recovery of the commit log, consume queues and index.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tracing::{info, warn};

use super::checkpoint::{CheckpointFile, Saved};
use super::commitlog::{CommitLog, MAX_QUEUE_ID};
use super::config::StoreConfig;
use super::consume_queue::ConsumeQueue;
use super::error::{StoreError, StoreResult};
use super::index::IndexService;
use super::vfs::{Vfs, VfsFile};
use super::{physical_memory, Inner, RecoveryReport, StoreEnv};

/// The lock on `<storeRoot>/lock` (Java's `DefaultMessageStore.start` takes the same: an
/// exclusive `FileChannel.tryLock(0, 1, false)`, a POSIX record lock on Linux), held while the
/// store runs. A second open of the store, by this process or another (a Java broker too),
/// fails. On a simulated file system (no real descriptor) there is nothing to lock.
pub(crate) struct StoreLock {
    held: Option<(Arc<dyn VfsFile>, (u64, u64))>,
}

impl std::fmt::Debug for StoreLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreLock")
            .field("held", &self.held.is_some())
            .finish()
    }
}

/// Lock files this process holds, by (device, inode). A POSIX lock does not exclude its own
/// process, and closing any descriptor of the file drops it: a second open in this process is
/// refused here, and the descriptor it opened is kept until the lock is released.
type HeldLocks = HashMap<(u64, u64), Vec<Arc<dyn VfsFile>>>;

fn held_locks() -> std::sync::MutexGuard<'static, HeldLocks> {
    static HELD: std::sync::OnceLock<Mutex<HeldLocks>> = std::sync::OnceLock::new();
    HELD.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

impl StoreLock {
    /// Locks `<root>/lock`, creating it.
    pub(crate) fn acquire(vfs: &dyn Vfs, root: &std::path::Path) -> StoreResult<Self> {
        let path = root.join("lock");
        let file = vfs
            .open(&path, true)
            .map_err(|e| StoreError::io("opening the store's lock file", e))?;
        let Some(fd) = file.clone().send_source() else {
            return Ok(Self { held: None });
        };
        let st = rustix::fs::fstat(&*fd)
            .map_err(|e| StoreError::io("reading the store's lock file", e.into()))?;
        #[allow(clippy::unnecessary_cast)]
        let key = (st.st_dev as u64, st.st_ino as u64);
        let mut held = held_locks();
        let in_use = || {
            StoreError::Locked(format!(
                "the store at {} is in use by another broker (its lock file {} is locked)",
                root.display(),
                path.display()
            ))
        };
        if let Some(extra) = held.get_mut(&key) {
            extra.push(file);
            return Err(in_use());
        }
        match rustix::fs::fcntl_lock(&*fd, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(e) if e == rustix::io::Errno::AGAIN || e == rustix::io::Errno::ACCESS => {
                return Err(in_use());
            }
            Err(e) => return Err(StoreError::io("locking the store's lock file", e.into())),
        }
        // As Java writes it.
        let _ = file.write_all_at(b"lock", 0);
        held.insert(key, Vec::new());
        Ok(Self {
            held: Some((file, key)),
        })
    }
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        if let Some((file, key)) = self.held.take() {
            let mut held = held_locks();
            held.remove(&key);
            // Closing the descriptor releases the lock.
            drop(file);
        }
    }
}

/// Refuses to recover past an invalid record that non-empty segments follow, when no checkpoint
/// says where the log may end: cutting there would delete them (one bad record in an old
/// segment would take every later segment with it).
fn refuse_cut_before_data(log: &CommitLog, end: u64) -> StoreResult<()> {
    let after = log.non_empty_after(end)?;
    if after.is_empty() {
        return Ok(());
    }
    let seg = log.segment_size();
    let names: Vec<&str> = after.iter().map(|(_, n)| n.as_str()).collect();
    Err(StoreError::Corrupt(format!(
        "the commit log has an invalid record at offset {end} (commit-log file {}), followed by \
         {} non-empty segment(s) ({}); no checkpoint says the log may end there, so nothing \
         was cut: check the file at that offset (restore it, or move the later segments away \
         if they are to be dropped)",
        super::segment::file_name(end - end % seg),
        after.len(),
        names.join(", ")
    )))
}

/// Topic → queue id → (min offset, offset below which the entries are durable) as of the
/// last checkpoint round (`queues.json`).
type Registry = BTreeMap<String, BTreeMap<i32, (u64, u64)>>;

fn load_queues(
    cfg: &StoreConfig,
    env: &StoreEnv,
) -> StoreResult<HashMap<(String, i32), Arc<ConsumeQueue>>> {
    let root = cfg.consume_queue_dir();
    let vfs = &env.vfs;
    vfs.create_dir_all(&root)
        .map_err(|e| StoreError::io("creating the consume-queue directory", e))?;
    let mut out = HashMap::new();
    for topic in vfs
        .list_dir(&root)
        .map_err(|e| StoreError::io("listing consume queues", e))?
    {
        let tdir = root.join(&topic);
        if !vfs.is_dir(&tdir) {
            continue;
        }
        for qid in vfs
            .list_dir(&tdir)
            .map_err(|e| StoreError::io("listing consume queues", e))?
        {
            let Ok(q) = qid.parse::<i32>() else {
                warn!(dir = %tdir.display(), entry = %qid, "ignoring a stray entry in a consume-queue directory");
                continue;
            };
            let cq = ConsumeQueue::open(
                &root,
                &topic,
                q,
                cfg.consume_queue_entries_per_file,
                vfs.clone(),
            )?;
            out.insert((topic.clone(), q), Arc::new(cq));
        }
    }
    Ok(out)
}

/// Recovers the data directory and builds the store's state (threads not started).
pub(super) fn open_inner(cfg: Arc<StoreConfig>, env: StoreEnv) -> StoreResult<Inner> {
    let vfs = env.vfs.clone();
    let root = cfg.store_path_root_dir.clone();
    vfs.create_dir_all(&root)
        .map_err(|e| StoreError::io("creating the store directory", e))?;
    let store_lock = StoreLock::acquire(&*vfs, &root)?;
    let abort_path = cfg.abort_path();
    let crashed = vfs.exists(&abort_path);
    let fresh = !vfs.is_dir(&cfg.commit_log_dir())
        || vfs
            .list_dir(&cfg.commit_log_dir())
            .map(|names| {
                names
                    .iter()
                    .all(|n| super::segment::parse_file_name(n).is_none())
            })
            .unwrap_or(true);
    let (checkpoint, saved) = CheckpointFile::open(&*vfs, &cfg.checkpoint_path())?;
    let (log, _segments) = CommitLog::open(
        cfg.clone(),
        vfs.clone(),
        env.clock.clone(),
        env.disk.clone(),
    )?;
    log.hold_store_lock(store_lock);
    let cl_min = log.min_offset();
    let check_crc = cfg.check_crc_on_recover;
    let ours = saved.ours();
    let mut queues = load_queues(&cfg, &env)?;
    // A clean stop with a checkpoint that is not ours (Java's, or ours rewritten by Java):
    // recovered as Java's `recoverNormally` does, the consume queues trusted.
    let mut queues_trusted = false;

    // 1. Where does the commit log end, and how far are consume queues and index durable?
    let trusted = ours.filter(|cp| {
        !crashed && cp.commit_log_flushed >= cl_min && cp.dispatched == cp.commit_log_flushed
    });
    let (end, durable_dispatch) = match trusted {
        None if fresh => {
            info!(dir = %cfg.store_path_root_dir.display(), "new store: nothing to recover");
            (cl_min, cl_min)
        }
        Some(cp) => {
            info!(
                end = cp.commit_log_flushed,
                "clean shutdown: trusting the checkpoint"
            );
            (cp.commit_log_flushed, cp.dispatched)
        }
        None if !crashed && ours.is_none() => {
            // Java's `recoverNormally`: the last three segments are read (everything was
            // flushed at the clean stop), the consume queues kept, and the records after the
            // last one they hold dispatched again (`maxPhysicalPosInLogicQueue`).
            let scan_from = log.last_three_start().max(cl_min);
            info!(
                checkpoint = ?saved,
                scan_from,
                "clean shutdown without a checkpoint of ours (a Java broker's store): scanning \
                 the last segments"
            );
            let end = log.scan(scan_from, check_crc, |_| {})?;
            refuse_cut_before_data(&log, end)?;
            info!(end, "commit log recovered");
            log.wipe_tail(end)?;
            log.sync_recovered(scan_from, end)?;
            let mut dispatched = cl_min;
            for q in queues.values() {
                // Java's `truncateDirtyLogicFiles`: entries past the log's end go.
                q.truncate_from_phys(end)?;
                if let Some(e) = q.last_phys_end() {
                    dispatched = dispatched.max(e);
                }
            }
            queues_trusted = true;
            (end, dispatched.clamp(cl_min, end))
        }
        None => {
            let seg = cfg.mapped_file_size_commit_log;
            // Where the scan starts, and whether a checkpoint says so (the log may then end
            // wherever the scan finds it ends, as after any crash).
            let (scan_from, vouched) = match saved {
                Saved::Ours(cp) => {
                    let from = cp.commit_log_flushed.min(cp.dispatched).max(cl_min);
                    ((from - from % seg).max(cl_min), true)
                }
                // Java's `recoverAbnormally`: the newest segment whose first record is older
                // than the checkpoint's minimum time (Java's own, or the one Java wrote over
                // ours).
                Saved::Java(t) | Saved::Overwritten(t) => {
                    match log.recover_start_by_timestamp(t.min_timestamp()) {
                        Some(base) => (base.max(cl_min), true),
                        None => (cl_min, false),
                    }
                }
                Saved::Missing => (cl_min, false),
            };
            warn!(
                crashed,
                checkpoint = ?saved,
                scan_from,
                "abnormal shutdown: scanning the commit log"
            );
            let mut end = log.scan(scan_from, check_crc, |_| {})?;
            if !vouched {
                refuse_cut_before_data(&log, end)?;
            }
            info!(end, "commit log recovered");
            // Only our own checkpoint says what is durable (a foreign one would make it the
            // log's start, and throw the whole log away).
            if let (true, Some(cp)) = (cfg.recover_to_durable, ours) {
                let durable = cp.commit_log_flushed.clamp(cl_min, end);
                if durable < end {
                    warn!(
                        from = end,
                        to = durable,
                        "keeping only the durable commit log; the rest comes from the master again"
                    );
                    end = durable;
                }
            }
            log.wipe_tail(end)?;
            // What the scan found may have been only in the page cache: make it durable before
            // anything (consumers, the checkpoint) relies on it. Past what the checkpoint proves
            // durable it is written again first: after a failed sync the page cache may hold
            // pages the kernel will never write back by itself.
            let proven = ours
                .map_or(scan_from, |cp| cp.commit_log_flushed)
                .clamp(scan_from, end);
            log.rewrite_range(proven, end)?;
            log.sync_recovered(scan_from, end)?;
            // Without our checkpoint, everything from where the scan started is dispatched
            // again (as Java's `recoverAbnormally` does).
            let dispatched = ours
                .map_or(scan_from, |cp| cp.dispatched)
                .clamp(cl_min, end);
            (end, dispatched)
        }
    };

    // 1b. A replica told to keep less (DLedger: the end of its last applied entry).
    let (end, durable_dispatch, cut) = match cfg.recover_limit {
        Some(limit) if limit < end && limit >= cl_min => {
            warn!(
                from = end,
                to = limit,
                "cutting the commit log back to the last applied replicated write"
            );
            log.wipe_tail(limit)?;
            (limit, durable_dispatch.min(limit), true)
        }
        _ => (end, durable_dispatch, false),
    };

    // 2. Consume queues: cut what is not durable-and-valid, find what must be rebuilt.
    let registry: Registry =
        super::persist::load_json(&*vfs, &cfg.consume_queue_dir().join("queues.json"))
            .unwrap_or_else(|e| {
                warn!(error = %e, "ignoring an unreadable queue registry");
                None
            })
            .unwrap_or_default();
    let mut rebuild: HashSet<(String, i32)> = HashSet::new();
    // The registry is as of our last checkpoint: after a Java broker ran on the store (the
    // checkpoint is Java's), its queues may have changed in ways it does not record.
    let registry_current = !matches!(saved, Saved::Java(_) | Saved::Overwritten(_));
    // Entries the registry saw durable must still be there, whatever the crash (it records how
    // far each queue was synced, so a crash that takes only what was not synced is no loss).
    // Checked before the queues are cut back to the checkpoint below: durable entries may point
    // past what the commit log kept (an ASYNC_FLUSH log loses more than its queues), and the
    // cut, not a rebuild, drops them.
    for (topic, qs) in registry.iter().filter(|_| registry_current) {
        for (qid, (_, synced)) in qs {
            let key = (topic.clone(), *qid);
            let present = queues.get(&key).map_or(0, |q| q.max_offset());
            if present < *synced {
                warn!(
                    topic,
                    queue = qid,
                    present,
                    expected = synced,
                    "consume queue lost entries; rebuilding it"
                );
                rebuild.insert(key);
            }
        }
    }
    let abnormal = (trusted.is_none() && !fresh && !queues_trusted) || cut;
    for ((topic, qid), q) in &queues {
        if abnormal && !rebuild.contains(&(topic.clone(), *qid)) {
            // Only what the checkpoint proves durable stays (the rest is dispatched again),
            // and nothing past it: pages written since the last sync can survive a power cut
            // past a hole.
            q.truncate_from_phys(durable_dispatch)?;
            q.clear_past_end()?;
            if !q.validate(cl_min, durable_dispatch) {
                warn!(
                    topic,
                    queue = qid,
                    "consume queue is inconsistent; rebuilding it"
                );
                rebuild.insert((topic.clone(), *qid));
            }
        }
    }
    for (topic, qs) in registry.iter().filter(|_| registry_current) {
        for (qid, (min, synced)) in qs {
            let key = (topic.clone(), *qid);
            if let Some(q) = queues.get(&key) {
                // The first file's start, before the minimum moves past entries below the
                // commit log's start: a minimum that only moved that way is no loss (retention
                // deleted segments just before a crash, ahead of the next checkpoint).
                let found = q.min_offset();
                q.correct_min(cl_min);
                if found > *min && found < *synced && !rebuild.contains(&key) {
                    // Files at the head vanished (retention records the minimum before it
                    // deletes a queue's files, and never deletes past the commit log's start).
                    warn!(
                        topic,
                        queue = qid,
                        found,
                        expected = min,
                        "consume queue lost its first files; rebuilding it"
                    );
                    rebuild.insert(key.clone());
                }
            }
        }
    }
    for key in &rebuild {
        if let Some(q) = queues.get(key) {
            q.destroy();
        }
        queues.insert(
            key.clone(),
            Arc::new(ConsumeQueue::open(
                &cfg.consume_queue_dir(),
                &key.0,
                key.1,
                cfg.consume_queue_entries_per_file,
                vfs.clone(),
            )?),
        );
    }

    let index = if cfg.message_index_enable {
        let index = IndexService::open(
            &cfg.index_dir(),
            vfs.clone(),
            cfg.max_hash_slot_num,
            cfg.max_index_num,
        )?;
        if abnormal {
            // Entries for records the commit log lost (the checkpoint made them durable first).
            index.truncate_from_phys(end);
        }
        Some(index)
    } else {
        None
    };

    let mut inner = Inner {
        cfg: cfg.clone(),
        env: env.clone(),
        log,
        queues: RwLock::new({
            let mut t = super::QueueTable::default();
            for q in queues.into_values() {
                t.insert(q);
            }
            t
        }),
        index,
        checkpoint,
        dispatched: AtomicU64::new(end),
        last_store_ts: AtomicI64::new(saved.physic_msg_timestamp()),
        listener: RwLock::new(None),
        registry_dirty: AtomicBool::new(true),
        stop: AtomicBool::new(false),
        stop_cv: (Mutex::new(()), std::sync::Condvar::new()),
        last_clean_run: Mutex::new(None),
        memory_bytes: AtomicU64::new(physical_memory()),
        checkpoint_lock: Mutex::new(()),
        dispatch_cache: Mutex::new(Default::default()),
        durable_dispatched: AtomicU64::new(end),
        keep_numbering: AtomicBool::new(false),
        recovery: RecoveryReport::default(),
        checkpoint_rounds: AtomicU64::new(0),
        registry_lock: Mutex::new(()),
        retention_lock: Mutex::new(()),
        manual_passes: AtomicU32::new(0),
        retention: Arc::new(super::config::LiveRetention::new(
            super::config::RetentionSettings::of(&cfg),
        )),
        put_totals: Default::default(),
    };

    // 3. Re-dispatch: everything from the durable dispatch point for all queues and the index,
    //    and from the start of the log for queues being rebuilt.
    let redispatch_from = if rebuild.is_empty() {
        durable_dispatch
    } else {
        cl_min
    };
    let mut n = 0u64;
    if redispatch_from < end {
        let stop_at = inner.log.scan(redispatch_from, false, |d| {
            let key_rebuilt =
                !rebuild.is_empty() && rebuild.contains(&(d.topic.to_string(), d.queue_id));
            let after = d.commit_log_offset >= durable_dispatch;
            inner.dispatch_one(&d, after || key_rebuilt, after && cfg.message_index_enable);
            inner
                .last_store_ts
                .fetch_max(d.store_timestamp, Ordering::AcqRel);
            n += 1;
        })?;
        info!(
            from = redispatch_from,
            to = stop_at,
            records = n,
            "re-dispatched the commit log"
        );
    }

    let mut queues_rebuilt: Vec<(String, i32)> = rebuild.iter().cloned().collect();
    queues_rebuilt.sort();
    inner.recovery = RecoveryReport {
        redispatched_from: redispatch_from.min(end),
        records_redispatched: n,
        queues_rebuilt,
    };

    // 4. Position the log and the queue-offset table. The table is a vector per topic indexed
    //    by queue id: a queue beyond the store's bound (from a store written before the bound
    //    was checked) keeps its data for reading but gets no next offset, so new messages for
    //    it are refused.
    let mut offsets: HashMap<String, Vec<i64>> = HashMap::new();
    for q in inner.queues.read().unwrap_or_else(|p| p.into_inner()).all() {
        q.correct_min(cl_min);
        if q.queue_id > MAX_QUEUE_ID {
            warn!(
                topic = %q.topic,
                queue = q.queue_id,
                max = MAX_QUEUE_ID,
                "a consume queue's id is beyond the store's bound; no message will be added to it"
            );
            continue;
        }
        let t = offsets.entry(q.topic.clone()).or_default();
        let i = q.queue_id.max(0) as usize;
        if t.len() <= i {
            t.resize(i + 1, 0);
        }
        t[i] = q.max_offset() as i64;
    }
    for (topic, qs) in &registry {
        for (qid, (_, synced)) in qs {
            if *qid > MAX_QUEUE_ID {
                continue;
            }
            let t = offsets.entry(topic.clone()).or_default();
            let i = (*qid).max(0) as usize;
            if t.len() <= i {
                t.resize(i + 1, 0);
            }
            // A queue whose files all expired keeps counting from where it was.
            if inner
                .queues
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(topic, *qid)
                .is_none()
            {
                t[i] = t[i].max(*synced as i64);
            }
        }
    }
    inner.log.set_end(end, offsets)?;
    inner.dispatched.store(end, Ordering::Release);

    // 5. Make the recovered state durable, then mark the store as running. On a full disk the
    //    store still opens (refusing writes until a checkpoint succeeds): until then the
    //    previous checkpoint stands, and a crash recovers from it again.
    match inner.checkpoint_now() {
        Ok(()) => {}
        Err(e) if e.is_no_space() => {
            warn!(error = %e, "cannot write the checkpoint: the disk is full");
        }
        Err(e) => return Err(e),
    }
    let marker = vfs
        .open(&abort_path, true)
        .map_err(|e| StoreError::io("creating the abort file", e))?;
    marker
        .sync_all()
        .map_err(|e| StoreError::io("syncing the abort file", e))?;
    vfs.sync_dir(&root)
        .map_err(|e| StoreError::io("syncing the store directory", e))?;
    Ok(inner)
}
