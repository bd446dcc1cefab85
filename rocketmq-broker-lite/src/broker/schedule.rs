//! Delayed messages (Java `ScheduleMessageService`): messages with a `DELAY` level wait in
//! `SCHEDULE_TOPIC_XXXX` (queue = level − 1, tag code = delivery time) and are put back into
//! their real topic once due. Progress per level is kept in `config/delayOffset.json`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rocketmq_remoting::protocol::body::DelayOffsetTable;
use rocketmq_remoting::protocol::message::{
    decode_stored, encode_properties, property, tags_hash_code, StoredDecodeOptions,
};
use rocketmq_remoting::protocol::topic;
use tracing::{debug, error, warn};

use super::BrokerInner;
use crate::store::consume_queue::CqEntry;
use crate::store::persist::{load_json, save_json};
use crate::store::vfs::Vfs;
use crate::store::{MessageStore, PutMessage, StoreError};

/// Messages one delivery round handles per level at most: a backlog (after downtime) is
/// delivered over several rounds, so that a round neither holds its thread for long nor keeps
/// the broker from shutting down, and progress is recorded as it goes.
pub const DELIVERY_ROUND_LIMIT: usize = 10_000;

/// What a delivery round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Round {
    /// Messages delivered.
    pub(crate) delivered: usize,
    /// A level stopped at [`DELIVERY_ROUND_LIMIT`]: more may be due now.
    pub(crate) more: bool,
}

/// Why a scheduled message was not delivered.
enum Redeliver {
    /// Its record is not stored (any more) or does not decode: skipped.
    Unreadable(String),
    /// Reading its record failed (an I/O error): tried again.
    ReadFailed(std::io::Error),
    /// The store refused it for good (too large, properties too long, a bad topic: it will
    /// never fit): skipped.
    Refused(StoreError),
    /// Putting it into its real topic failed for now (a full disk, a busy store, ...): tried
    /// again.
    PutFailed(StoreError),
}

/// Delivery progress per level.
#[derive(Debug)]
pub struct ScheduleService {
    offsets: Mutex<BTreeMap<i32, i64>>,
    /// Serialises delivery rounds.
    delivering: Mutex<()>,
    /// [`DELIVERY_ROUND_LIMIT`] (smaller in tests).
    round_limit: usize,
    dirty: AtomicBool,
    path: PathBuf,
    /// Serialises saves of the file (they share its temporary file).
    save_lock: Mutex<()>,
    vfs: Arc<dyn Vfs>,
    levels: Vec<i64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ScheduleService {
    /// Loads the saved progress (see [`ScheduleService::correct_offsets`], which the broker
    /// runs next).
    pub fn load(
        config_dir: &std::path::Path,
        levels: Vec<i64>,
        vfs: Arc<dyn Vfs>,
    ) -> Result<Self, StoreError> {
        let path = config_dir.join("delayOffset.json");
        let offsets = load_json::<DelayOffsetTable>(&*vfs, &path)?
            .map(|t| t.offset_table)
            .unwrap_or_default();
        Ok(Self {
            offsets: Mutex::new(offsets),
            delivering: Mutex::new(()),
            round_limit: DELIVERY_ROUND_LIMIT,
            dirty: AtomicBool::new(false),
            save_lock: Mutex::new(()),
            path,
            vfs,
            levels,
        })
    }

    /// Progress table (GET_ALL_DELAY_OFFSET).
    pub fn table(&self) -> DelayOffsetTable {
        DelayOffsetTable {
            offset_table: lock(&self.offsets).clone(),
        }
    }

    /// A slave's copy of its master's delay progress (Java `SlaveSynchronize.syncDelayOffset`
    /// writes the master's `delayOffset.json` text over its own, which the schedule service
    /// loads when the broker becomes master): the table is replaced by the master's. Returns
    /// whether it changed; it is then marked for [`ScheduleService::persist_if_dirty`].
    pub fn replace_from_master(&self, master: DelayOffsetTable) -> bool {
        let mut offsets = lock(&self.offsets);
        if *offsets == master.offset_table {
            return false;
        }
        *offsets = master.offset_table;
        drop(offsets);
        self.dirty.store(true, Ordering::Release);
        true
    }

    /// Persists progress if it moved.
    pub fn persist_if_dirty(&self) -> Result<(), StoreError> {
        // One save at a time (the periodic persist, a slave's copy from its master, shutdown).
        let _one_at_a_time = lock(&self.save_lock);
        if self.dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = save_json(&*self.vfs, &self.path, &self.table()) {
                // Tried again next time.
                self.dirty.store(true, Ordering::Release);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Moves each level's saved offset into its queue's `[min, max]` (Java
    /// `ScheduleMessageService.correctDelayOffset`, run when the service loads): an offset past
    /// the end of its queue (the queue was cleared, or restored from an older backup than
    /// `delayOffset.json`) would otherwise skip that many new delayed messages. Each correction
    /// is logged at error level, as Java logs it, and saved at the next persist.
    pub fn correct_offsets(&self, store: &MessageStore) {
        for level in 1..=self.levels.len() as i32 {
            let Some(saved) = lock(&self.offsets).get(&level).copied() else {
                continue;
            };
            self.corrected(store, level, saved);
        }
    }

    /// `saved` moved into `[min, max]` of the queue of `level`; a change is logged and stored.
    fn corrected(&self, store: &MessageStore, level: i32, saved: i64) -> i64 {
        let queue = level - 1;
        let min = store.min_offset(topic::SCHEDULE_TOPIC, queue);
        let max = store.max_offset(topic::SCHEDULE_TOPIC, queue).max(min);
        let offset = saved.max(min).min(max);
        if offset != saved {
            error!(
                level,
                offset = saved,
                cq_min_offset = min,
                cq_max_offset = max,
                queue,
                "schedule CQ offset invalid; correcting the delay offset to {offset}"
            );
            let mut offsets = lock(&self.offsets);
            // Unless a delivery round or a master's copy moved it meanwhile.
            if offsets.get(&level).copied().unwrap_or(0) == saved {
                offsets.insert(level, offset);
                drop(offsets);
                self.dirty.store(true, Ordering::Release);
            }
        }
        offset
    }

    /// Delivers the due messages (at most [`DELIVERY_ROUND_LIMIT`] per level); returns how many
    /// were delivered.
    pub fn deliver_due(&self, b: &BrokerInner) -> usize {
        self.deliver_round(b).delivered
    }

    /// One delivery round: for each level, the due messages from its saved offset on, at most
    /// [`DELIVERY_ROUND_LIMIT`] of them, stopping at the first not yet due, at a failed put or
    /// read (tried again next round, as Java does for a put) or when the broker shuts down. A
    /// scheduled record that is gone or corrupt is skipped with an error,
    /// as Java's `executeOnTimeup` skips a message it cannot look up; so is one the store
    /// refuses for good (too large, properties too long, a bad topic), which Java would try
    /// again forever, holding back every later message of its level.
    pub(crate) fn deliver_round(&self, b: &BrokerInner) -> Round {
        // One round at a time (the periodic task, `deliver_due_now`): two rounds would deliver
        // the same messages twice.
        let _one_at_a_time = lock(&self.delivering);
        let now = b.clock.now_ms();
        let mut round = Round::default();
        for level in 1..=self.levels.len() as i32 {
            if b.shutdown.is_cancelled() {
                break;
            }
            let queue = level - 1;
            let saved = lock(&self.offsets).get(&level).copied().unwrap_or(0);
            // Java resets an offset outside the queue at every run (`bufferCQ == null`).
            let start = self.corrected(&b.store, level, saved);
            let max = b.store.max_offset(topic::SCHEDULE_TOPIC, queue);
            let mut offset = start;
            let mut handled = 0usize;
            while offset < max {
                if handled >= self.round_limit {
                    round.more = true;
                    break;
                }
                if b.shutdown.is_cancelled() {
                    break;
                }
                handled += 1;
                let Some(e) = b.store.queue_entry(topic::SCHEDULE_TOPIC, queue, offset) else {
                    break;
                };
                if !e.is_real() {
                    offset += 1;
                    continue;
                }
                // A delivery time further away than the level's delay is corrected to now.
                let limit = now.saturating_add(self.levels[(level - 1) as usize]);
                let due = if e.tags_code > limit {
                    now
                } else {
                    e.tags_code
                };
                if due > now {
                    break;
                }
                match self.redeliver(b, &e) {
                    Ok(()) => round.delivered += 1,
                    Err(Redeliver::Unreadable(err)) => {
                        error!(level, offset, phys = e.phys, error = %err, "cannot read a delayed message; skipping it");
                    }
                    Err(Redeliver::ReadFailed(err)) => {
                        // Logged by the commit log; the message is not lost to a read that
                        // may succeed next time.
                        warn!(level, offset, phys = e.phys, error = %err, "cannot read a delayed message for now; will retry");
                        break;
                    }
                    Err(Redeliver::Refused(err)) => {
                        error!(level, offset, phys = e.phys, error = %err, "the store refuses a delayed message for good; skipping it");
                    }
                    Err(Redeliver::PutFailed(err)) => {
                        // On a full disk the store has logged why (once).
                        if b.store.is_disk_full() {
                            debug!(level, offset, error = %err, "delayed message waits for disk space");
                        } else {
                            warn!(level, offset, error = %err, "delayed message could not be delivered; will retry");
                        }
                        break;
                    }
                }
                offset += 1;
            }
            if offset != start {
                lock(&self.offsets).insert(level, offset);
                self.dirty.store(true, Ordering::Release);
            }
        }
        round
    }

    fn redeliver(&self, b: &BrokerInner, e: &CqEntry) -> Result<(), Redeliver> {
        let phys = e.phys;
        let raw = b
            .store
            .read_record_checked(phys as u64, usize::try_from(e.size).unwrap_or(0))
            .map_err(Redeliver::ReadFailed)?
            .ok_or_else(|| Redeliver::Unreadable(format!("no record at {phys}")))?;
        let (msg, _) = decode_stored(&raw, StoredDecodeOptions::default())
            .map_err(|e| Redeliver::Unreadable(e.to_string()))?;
        let Some(real_topic) = msg.property(property::REAL_TOPIC).map(str::to_string) else {
            // Nothing to deliver to: skip it.
            return Ok(());
        };
        let real_qid: i32 = msg
            .property(property::REAL_QUEUE_ID)
            .and_then(|q| q.parse().ok())
            .unwrap_or(0);
        // Java `ScheduleMessageService.messageTimeup` snapshots the properties string before it
        // clears DELAY and sets WAIT=false in the map, so the delivered record keeps the
        // scheduled record's properties as they were: DELAY, REAL_TOPIC, REAL_QID and WAIT
        // included.
        let props = &msg.properties;
        let m = PutMessage {
            topic: real_topic.as_str().into(),
            queue_id: real_qid,
            flag: msg.flag,
            body: msg.body.clone(),
            tags_code: tags_hash_code(props.get(property::TAGS)),
            properties: encode_properties(props),
            sys_flag: msg.sys_flag,
            born_timestamp: msg.born_timestamp,
            born_host: msg.born_host,
            store_host: msg.store_host,
            reconsume_times: msg.reconsume_times,
            prepared_transaction_offset: 0,
        };
        match b.put_internal(&m, MessageStore::put_message) {
            Ok(r) => {
                // Java's `PutResultProcess.onSuccess` (`enableScheduleMessageStats`, true by
                // default): a put of the real topic, and a get of the schedule topic by
                // SCHEDULE_CONSUMER.
                let bytes = r.end_offset - r.wrote_offset;
                b.stats.record_put(&real_topic, 1, bytes);
                b.stats.record_schedule_get(bytes);
                Ok(())
            }
            Err(
                e @ (StoreError::MessageTooLarge { .. }
                | StoreError::PropertiesTooLarge(_)
                | StoreError::BadTopic(_)
                | StoreError::BadBatch(_)),
            ) => Err(Redeliver::Refused(e)),
            Err(e) => Err(Redeliver::PutFailed(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::{Broker, BrokerConfig, BrokerHandle};
    use crate::embedded::TempDir;
    use crate::namesrv::{NameServer, NameServerHandle};
    use crate::store::simfs::SimFs;
    use crate::store::{ManualClock, StoreConfig, StoreEnv};
    use rocketmq_remoting::protocol::message::Message;

    const T0: i64 = 1_700_000_000_000;

    /// A broker over `dir` (levels 1 s, 2 s, 3 s) whose `config/delayOffset.json` holds
    /// `delay_offsets` before it starts.
    async fn broker(
        dir: &TempDir,
        clock: Arc<ManualClock>,
        delay_offsets: Option<&str>,
    ) -> (NameServerHandle, BrokerHandle) {
        broker_on(dir, clock, delay_offsets, None).await
    }

    /// [`broker`] over the file system `vfs` (the real one if `None`).
    async fn broker_on(
        dir: &TempDir,
        clock: Arc<ManualClock>,
        delay_offsets: Option<&str>,
        vfs: Option<Arc<dyn Vfs>>,
    ) -> (NameServerHandle, BrokerHandle) {
        let namesrv = NameServer::builder()
            .listen("127.0.0.1:0")
            .start()
            .await
            .unwrap();
        let mut cfg = BrokerConfig {
            listen_ip: "127.0.0.1".into(),
            listen_port: 0,
            broker_ip1: Some("127.0.0.1".into()),
            namesrv_addr: vec![namesrv.local_addr().to_string()],
            store: StoreConfig {
                mapped_file_size_commit_log: 8 * 1024 * 1024,
                message_delay_level: "1s 2s 3s".into(),
                ..StoreConfig::new(dir.path().join("store"))
            },
            ..BrokerConfig::default()
        };
        cfg.store.use_scratch_disk_ratios();
        if let Some(text) = delay_offsets {
            let config = cfg.store.config_dir();
            std::fs::create_dir_all(&config).unwrap();
            std::fs::write(config.join("delayOffset.json"), text).unwrap();
        }
        let mut env = StoreEnv {
            clock,
            ..StoreEnv::default()
        };
        if let Some(vfs) = vfs {
            env.vfs = vfs;
        }
        let broker = Broker::builder(cfg).env(env).start().await.unwrap();
        (namesrv, broker)
    }

    /// Sends `body` to `topic` with delay `level` as the send path does (redirected to
    /// SCHEDULE_TOPIC_XXXX); returns its commit-log offset.
    fn schedule(b: &BrokerInner, topic: &str, level: i32, body: &'static str) -> u64 {
        let m =
            Message::new(topic, bytes::Bytes::from_static(body.as_bytes())).with_delay_level(level);
        let mut props = m.properties.clone();
        let mut pm = PutMessage {
            topic: topic.into(),
            queue_id: 0,
            flag: 0,
            body: m.body.clone(),
            properties: String::new(),
            tags_code: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: "127.0.0.1:5000".parse().unwrap(),
            store_host: "127.0.0.1:10911".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        };
        assert!(b.apply_delay(&mut pm, &mut props));
        pm.properties = encode_properties(&props);
        b.store.put_message_blocking(&pm).unwrap().wrote_offset
    }

    /// Runs delivery rounds (the broker's own task runs them too) until `done`, for at most
    /// 15 s.
    async fn deliver_until(b: &BrokerInner, what: &str, done: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            b.schedule.deliver_due(b);
            if done() {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {what}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// `delayOffset.json` ahead of its (here empty) schedule queue, as after the commit log
    /// and consume queues were cleared or restored from an older backup: corrected when the
    /// service loads (Java's `correctDelayOffset`), so that new delayed messages of that level
    /// are delivered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn delay_offsets_past_their_queue_are_corrected_at_load() {
        let dir = TempDir::new("schedule-load").unwrap();
        let clock = ManualClock::new(T0);
        let (namesrv, broker) = broker(
            &dir,
            clock.clone(),
            Some(r#"{"offsetTable":{"1":100,"2":7}}"#),
        )
        .await;
        let b = broker.inner().clone();
        assert_eq!(
            b.schedule.table().offset_table,
            BTreeMap::from([(1, 0), (2, 0)])
        );
        schedule(&b, "Later", 1, "one second");
        clock.advance(1_000);
        deliver_until(&b, "the delayed message", || {
            b.store.max_offset("Later", 0) == 1
        })
        .await;
        assert_eq!(b.schedule.table().offset_table[&1], 1);
        broker.shutdown().await.unwrap();
        namesrv.shutdown().await;
    }

    /// An offset past its queue found by a delivery round (a master's copy taken while this
    /// broker was a slave, say) is moved back to the queue's end, as Java's `executeOnTimeup`
    /// does, and saved.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_delivery_round_corrects_an_offset_past_its_queue() {
        let dir = TempDir::new("schedule-round").unwrap();
        let clock = ManualClock::new(T0);
        let (namesrv, broker) = broker(&dir, clock.clone(), None).await;
        let b = broker.inner().clone();
        schedule(&b, "Later", 1, "first");
        clock.advance(1_000);
        deliver_until(&b, "the first message", || {
            b.store.max_offset("Later", 0) == 1
        })
        .await;
        b.schedule.replace_from_master(DelayOffsetTable {
            offset_table: BTreeMap::from([(1, 50)]),
        });
        b.schedule.deliver_due(&b);
        assert_eq!(b.schedule.table().offset_table[&1], 1);
        // The correction is saved.
        b.schedule.persist_if_dirty().unwrap();
        let saved = ScheduleService::load(
            &b.cfg.store.config_dir(),
            vec![1_000, 2_000, 3_000],
            Arc::new(crate::store::StdFs),
        )
        .unwrap();
        assert_eq!(saved.table().offset_table[&1], 1);
        schedule(&b, "Later", 1, "second");
        clock.advance(1_000);
        deliver_until(&b, "the second message", || {
            b.store.max_offset("Later", 0) == 2
        })
        .await;
        broker.shutdown().await.unwrap();
        namesrv.shutdown().await;
    }

    /// A scheduled record that cannot be read is skipped with an error (Java: `msgExt == null`
    /// → `continue`) rather than holding up every later message of its level.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unreadable_scheduled_record_is_skipped() {
        use std::os::unix::fs::FileExt;

        let dir = TempDir::new("schedule-corrupt").unwrap();
        let clock = ManualClock::new(T0);
        let (namesrv, broker) = broker(&dir, clock.clone(), None).await;
        let b = broker.inner().clone();
        let bad = schedule(&b, "Later", 1, "corrupt");
        schedule(&b, "Later", 1, "fine");
        b.store.flush().unwrap();
        // Its magic code.
        let seg = b.store.commit_log_segment_size();
        let path = b
            .cfg
            .store
            .commit_log_dir()
            .join(format!("{:020}", bad - bad % seg));
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.write_all_at(&[0xde, 0xad, 0xbe, 0xef], bad % seg + 4)
            .unwrap();
        assert!(b.store.read_record(bad).is_none());
        clock.advance(1_000);
        deliver_until(&b, "the message after the unreadable one", || {
            b.store.max_offset("Later", 0) == 1
        })
        .await;
        assert_eq!(b.schedule.table().offset_table[&1], 2);
        let got = b.store.read_record(
            b.store
                .queue_entry("Later", 0, 0)
                .expect("the second message delivered")
                .phys as u64,
        );
        let (m, _) = decode_stored(&got.unwrap(), StoredDecodeOptions::default()).unwrap();
        assert_eq!(&m.body[..], b"fine");
        broker.shutdown().await.unwrap();
        namesrv.shutdown().await;
    }

    /// A round delivers at most its limit per level and says more is due; a round stops when
    /// the broker shuts down.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_round_is_bounded_and_stops_at_shutdown() {
        let dir = TempDir::new("schedule-bounded").unwrap();
        let clock = ManualClock::new(T0);
        let (namesrv, broker) = broker(&dir, clock.clone(), None).await;
        let inner = broker.inner().clone();
        // Delivered by the service below only: the broker's own rounds wait.
        let held = lock(&inner.schedule.delivering);
        for _ in 0..5 {
            schedule(&inner, "Later", 1, "x");
        }
        clock.advance(1_000);
        // The same service with a limit of 3 (the broker's own task uses 10,000).
        let s = ScheduleService {
            round_limit: 3,
            ..ScheduleService::load(
                &inner.cfg.store.config_dir(),
                vec![1_000, 2_000, 3_000],
                Arc::new(crate::store::StdFs),
            )
            .unwrap()
        };
        assert_eq!(
            s.deliver_round(&inner),
            Round {
                delivered: 3,
                more: true
            }
        );
        inner.shutdown.cancel();
        assert_eq!(s.deliver_round(&inner), Round::default());
        assert!(inner
            .store
            .wait_dispatched(std::time::Duration::from_secs(10)));
        assert_eq!(inner.store.max_offset("Later", 0), 3);
        drop(held);
        broker.shutdown().await.unwrap();
        namesrv.shutdown().await;
    }

    /// A read error on a due scheduled record (EIO from a flaky device, say) does not skip the
    /// message: its level waits, and the next round delivers it. (Only a record that is gone
    /// or does not decode is skipped, as Java skips a message it cannot look up.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_error_on_a_due_record_is_tried_again() {
        use crate::store::simfs::{FaultKind, FaultOp};

        let dir = TempDir::new("schedule-eio").unwrap();
        let clock = ManualClock::new(T0);
        let fs = SimFs::default();
        let (namesrv, broker) =
            broker_on(&dir, clock.clone(), None, Some(Arc::new(fs.clone()))).await;
        let inner = broker.inner().clone();
        // Delivered by the service below only: the broker's own rounds wait.
        let held = lock(&inner.schedule.delivering);
        schedule(&inner, "Later", 1, "flaky");
        assert!(inner
            .store
            .wait_dispatched(std::time::Duration::from_secs(10)));
        clock.advance(1_000);
        let s = ScheduleService::load(
            &inner.cfg.store.config_dir(),
            vec![1_000, 2_000, 3_000],
            Arc::new(fs.clone()),
        )
        .unwrap();
        // The next two reads of the commit log fail.
        fs.inject(
            FaultOp::Read,
            inner.cfg.store.commit_log_dir(),
            FaultKind::Io,
            0,
            Some(2),
        );
        assert_eq!(s.deliver_round(&inner), Round::default());
        assert!(fs.faults_fired() > 0);
        assert_eq!(
            s.table().offset_table.get(&1).copied().unwrap_or(0),
            0,
            "the message was skipped"
        );
        fs.clear_faults();
        assert_eq!(s.deliver_round(&inner).delivered, 1);
        assert_eq!(s.table().offset_table[&1], 1);
        assert!(inner
            .store
            .wait_dispatched(std::time::Duration::from_secs(10)));
        assert_eq!(inner.store.max_offset("Later", 0), 1);
        drop(held);
        broker.shutdown().await.unwrap();
        namesrv.shutdown().await;
    }

    /// The store-level put totals (`msgPutTotalTodayNow`, `putTps`, ...) count every record the
    /// store appends, whoever appends it (here a scheduled message put by the broker itself
    /// and its delivery), as Java's `CommitLog.asyncPutMessage` counts; the records start-up
    /// recovery dispatches again are not counted again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_record_the_store_appends_is_counted_once() {
        let dir = TempDir::new("schedule-count").unwrap();
        let clock = ManualClock::new(T0);
        let (namesrv, handle) = broker(&dir, clock.clone(), None).await;
        let b = handle.inner().clone();
        schedule(&b, "Later", 1, "counted");
        assert!(b.store.wait_dispatched(std::time::Duration::from_secs(10)));
        let size = b
            .store
            .queue_entry(topic::SCHEDULE_TOPIC, 0, 0)
            .unwrap()
            .size as u64;
        assert_eq!((b.stats.put_messages(), b.stats.put_bytes()), (1, size));
        clock.advance(1_000);
        deliver_until(&b, "the delivery", || b.store.max_offset("Later", 0) == 1).await;
        assert_eq!(b.stats.put_messages(), 2);
        // A crash, and consume queues rebuilt from the commit log at the next start.
        handle.halt().await;
        std::fs::remove_dir_all(b.cfg.store.consume_queue_dir()).unwrap();
        drop(b);
        namesrv.shutdown().await;
        let (namesrv, handle) = broker(&dir, clock.clone(), None).await;
        let b = handle.inner().clone();
        assert!(b.store.wait_dispatched(std::time::Duration::from_secs(10)));
        assert!(b.store.recovery().records_redispatched >= 2);
        assert_eq!(b.store.max_offset("Later", 0), 1);
        assert_eq!((b.stats.put_messages(), b.stats.put_bytes()), (0, 0));
        handle.shutdown().await.unwrap();
        namesrv.shutdown().await;
    }

    #[test]
    fn masters_delay_offsets_replace_ours() {
        let fs = Arc::new(SimFs::default());
        let dir = std::path::Path::new("/store/config");
        let s = ScheduleService::load(dir, vec![1_000, 5_000, 10_000], fs.clone()).unwrap();
        lock(&s.offsets).extend([(1, 4), (3, 9)]);
        let master = DelayOffsetTable {
            offset_table: BTreeMap::from([(1, 7), (2, 8)]),
        };
        assert!(s.replace_from_master(master.clone()));
        assert_eq!(s.table(), master);
        s.persist_if_dirty().unwrap();
        let back = ScheduleService::load(dir, vec![1_000, 5_000, 10_000], fs.clone()).unwrap();
        assert_eq!(back.table(), master);
        assert!(!s.replace_from_master(master));
    }
}
