//! Consumer offsets: on the broker for clustering consumers (Java `RemoteBrokerOffsetStore`), in
//! a local file for broadcasting ones (Java `LocalFileOffsetStore`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rocketmq_remoting::protocol::body::{self, ResetOffsetBody};
use rocketmq_remoting::protocol::message::MessageQueue;

use super::instance::{lock, ClientInstance};
use crate::error::{ClientError, Result};

/// Where `read` looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadOffsetType {
    /// Memory only.
    Memory,
    /// Memory, else the store (Java `MEMORY_FIRST_THEN_STORE`).
    MemoryFirstThenStore,
    /// The store (broker or file), refreshing memory.
    Store,
}

#[derive(Debug)]
enum Backend {
    Broker,
    File(PathBuf),
}

/// Offsets of one consumer group: "the next offset to consume" per queue.
#[derive(Debug)]
pub(crate) struct OffsetStore {
    group: String,
    backend: Backend,
    table: Mutex<HashMap<MessageQueue, i64>>,
}

/// The Java default directory of local offsets: `~/.rocketmq_offsets`.
pub(crate) fn default_local_dir() -> PathBuf {
    std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(".rocketmq_offsets")
}

impl OffsetStore {
    /// The store a consumer of `group` keeps its offsets in (Java's `start()` choice): the
    /// brokers when clustering; when broadcasting, a local file under `local_dir` (else
    /// [`default_local_dir`]), per client id and group.
    pub(crate) fn for_model(
        model: rocketmq_remoting::protocol::body::MessageModel,
        local_dir: Option<&Path>,
        client_id: &str,
        group: &str,
    ) -> Result<Self> {
        use rocketmq_remoting::protocol::body::MessageModel;
        match model {
            MessageModel::Broadcasting => match local_dir {
                Some(dir) => Self::local(dir, client_id, group),
                None => Self::local(&default_local_dir(), client_id, group),
            },
            MessageModel::Clustering => Ok(Self::remote(group)),
        }
    }

    /// Offsets kept by the brokers.
    pub(crate) fn remote(group: &str) -> Self {
        Self {
            group: group.to_string(),
            backend: Backend::Broker,
            table: Mutex::default(),
        }
    }

    /// Offsets kept in `<dir>/<client id>/<group>/offsets.json`, loaded now.
    pub(crate) fn local(dir: &Path, client_id: &str, group: &str) -> Result<Self> {
        let path = dir.join(client_id).join(group).join("offsets.json");
        let store = Self {
            group: group.to_string(),
            backend: Backend::File(path.clone()),
            table: Mutex::default(),
        };
        let loaded = read_offsets_with_backup(&path)?;
        lock(&store.table).extend(loaded);
        Ok(store)
    }

    pub(crate) fn is_local(&self) -> bool {
        matches!(self.backend, Backend::File(_))
    }

    /// Sets the offset of `mq`; with `increase_only`, never moves it back.
    pub(crate) fn update(&self, mq: &MessageQueue, offset: i64, increase_only: bool) {
        let mut t = lock(&self.table);
        let slot = t.entry(mq.clone()).or_insert(offset);
        if !increase_only || offset > *slot {
            *slot = offset;
        }
    }

    /// The offset of `mq`: -1 if there is none, -2 if the store could not be read (for the
    /// broker: no answer, or any answer but the offset or QUERY_NOT_FOUND; a rebalance then
    /// leaves the queue for the next one rather than guess where to start).
    pub(crate) async fn read(
        &self,
        inst: &ClientInstance,
        mq: &MessageQueue,
        t: ReadOffsetType,
    ) -> i64 {
        if t != ReadOffsetType::Store || self.is_local() {
            if let Some(o) = lock(&self.table).get(mq) {
                return *o;
            }
            if t == ReadOffsetType::Memory {
                return -1;
            }
            if let Backend::File(path) = &self.backend {
                return match read_offsets_with_backup(path) {
                    Ok(m) => match m.get(mq) {
                        Some(o) => {
                            self.update(mq, *o, false);
                            *o
                        }
                        None => -1,
                    },
                    Err(_) => -2,
                };
            }
        }
        match self.fetch_from_broker(inst, mq).await {
            Ok(Some(o)) => {
                self.update(mq, o, false);
                o
            }
            Ok(None) => -1,
            Err(e) => {
                tracing::warn!(group = %self.group, queue = %mq, error = %e, "cannot read the consumer offset");
                -2
            }
        }
    }

    async fn fetch_from_broker(
        &self,
        inst: &ClientInstance,
        mq: &MessageQueue,
    ) -> Result<Option<i64>> {
        let addr = inst.offset_addr(&mq.broker_name, &mq.topic).await?;
        inst.api
            .query_consumer_offset(&addr, &self.group, mq, inst.config.mq_client_api_timeout)
            .await
    }

    /// The in-memory offsets of `topic`'s queues.
    pub(crate) fn snapshot(&self) -> BTreeMap<MessageQueue, i64> {
        lock(&self.table)
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }

    /// The offsets held for the queues of `topic`.
    pub(crate) fn snapshot_of(&self, topic: &str) -> BTreeMap<MessageQueue, i64> {
        lock(&self.table)
            .iter()
            .filter(|(k, _)| k.topic == topic)
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }

    /// Forgets `mq` (after persisting it, if wanted).
    pub(crate) fn remove(&self, mq: &MessageQueue) {
        lock(&self.table).remove(mq);
    }

    /// Writes the offsets of `mqs` to the store (and forgets queues no longer owned, for the
    /// broker backend; the file keeps the offsets of other queues it holds, as Java's
    /// `LocalFileOffsetStore.persistAll`). The error names every queue whose offset was not
    /// stored.
    pub(crate) async fn persist_all(
        &self,
        inst: &ClientInstance,
        mqs: &BTreeSet<MessageQueue>,
    ) -> Result<()> {
        match &self.backend {
            Backend::File(path) => {
                if mqs.is_empty() {
                    return Ok(());
                }
                self.write_file(path, mqs)
            }
            Backend::Broker => {
                if mqs.is_empty() {
                    return Ok(());
                }
                let entries: Vec<(MessageQueue, i64)> = lock(&self.table)
                    .iter()
                    .filter(|(k, _)| mqs.contains(*k))
                    .map(|(k, v)| (k.clone(), *v))
                    .collect();
                let calls = entries.iter().map(|(mq, off)| async move {
                    self.push_to_broker(inst, mq, *off)
                        .await
                        .map_err(|e| (mq.clone(), e.to_string()))
                });
                let failed: Vec<(MessageQueue, String)> = futures::future::join_all(calls)
                    .await
                    .into_iter()
                    .filter_map(|r| r.err())
                    .collect();
                lock(&self.table).retain(|k, _| mqs.contains(k));
                if failed.is_empty() {
                    Ok(())
                } else {
                    for (mq, e) in &failed {
                        tracing::warn!(group = %self.group, queue = %mq, error = %e, "cannot persist the consumer offset");
                    }
                    Err(ClientError::OffsetsNotStored { failed })
                }
            }
        }
    }

    /// Writes one queue's offset to the store.
    pub(crate) async fn persist(&self, inst: &ClientInstance, mq: &MessageQueue) -> Result<()> {
        let Some(off) = lock(&self.table).get(mq).copied() else {
            return Ok(());
        };
        match &self.backend {
            Backend::File(path) => self.write_file(path, &BTreeSet::from([mq.clone()])),
            Backend::Broker => self
                .push_to_broker(inst, mq, off)
                .await
                .map_err(|e| {
                    tracing::warn!(group = %self.group, queue = %mq, error = %e, "cannot persist the consumer offset");
                    ClientError::OffsetsNotStored {
                        failed: vec![(mq.clone(), e.to_string())],
                    }
                }),
        }
    }

    /// Rewrites the local offsets file with the in-memory offsets of `mqs` over what it holds
    /// (Java's `LocalFileOffsetStore.persist`/`persistAll` read the file first): a queue this
    /// consumer forgot, such as one whose offset an admin reset just set and persisted before
    /// a rebalance takes it again, keeps its offset in the file. On failure every queue of
    /// `mqs` is reported.
    fn write_file(&self, path: &Path, mqs: &BTreeSet<MessageQueue>) -> Result<()> {
        let failed = |why: String| {
            tracing::warn!(path = %path.display(), error = %why, "cannot write the offsets file");
            ClientError::OffsetsNotStored {
                failed: mqs.iter().map(|mq| (mq.clone(), why.clone())).collect(),
            }
        };
        let mut offsets = read_offsets_with_backup(path).map_err(|e| failed(e.to_string()))?;
        offsets.extend(
            lock(&self.table)
                .iter()
                .filter(|(mq, _)| mqs.contains(*mq))
                .map(|(mq, o)| (mq.clone(), *o)),
        );
        write_offsets_file(path, offsets)
            .map_err(|e| failed(format!("cannot write {}: {e}", path.display())))
    }

    async fn push_to_broker(
        &self,
        inst: &ClientInstance,
        mq: &MessageQueue,
        offset: i64,
    ) -> Result<()> {
        let addr = inst.offset_addr(&mq.broker_name, &mq.topic).await?;
        inst.api
            .update_consumer_offset(
                &addr,
                &self.group,
                mq,
                offset,
                false,
                inst.config.mq_client_api_timeout,
            )
            .await
    }
}

/// An offsets file: `None` if it is missing or empty.
fn read_offsets_opt(path: &Path) -> Result<Option<BTreeMap<MessageQueue, i64>>> {
    match std::fs::read(path) {
        Ok(bytes) if bytes.is_empty() => Ok(None),
        Ok(bytes) => body::decode::<ResetOffsetBody>(&bytes)
            .map(|b| Some(b.offset_table))
            .map_err(|e| ClientError::Config(format!("bad offsets file {}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ClientError::Config(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
    }
}

/// An offsets file; missing or empty, no offsets.
#[cfg(test)]
fn read_offsets_file(path: &Path) -> Result<BTreeMap<MessageQueue, i64>> {
    read_offsets_opt(path).map(Option::unwrap_or_default)
}

/// The offsets of the main file, or of its `.bak` when the main file is missing, empty or
/// unreadable (Java `LocalFileOffsetStore.readLocalOffset`, at load and on every read from the
/// store). Neither holding any: no offsets; an unreadable `.bak` is the error.
fn read_offsets_with_backup(path: &Path) -> Result<BTreeMap<MessageQueue, i64>> {
    let bak = path.with_extension("json.bak");
    match read_offsets_opt(path) {
        Ok(Some(offsets)) => return Ok(offsets),
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "offsets file unreadable, trying the backup");
        }
    }
    read_offsets_opt(&bak).map(Option::unwrap_or_default)
}

/// Writes the file in Java's `OffsetSerializeWrapper` form, keeping the previous version as
/// `.bak` (only a readable one: a corrupt main file never replaces a good backup): write a
/// temporary file, sync it, rename it over.
fn write_offsets_file(path: &Path, offsets: BTreeMap<MessageQueue, i64>) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let json = body::encode_fastjson(&ResetOffsetBody {
        offset_table: offsets,
    });
    let tmp = path.with_extension("json.tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&json)?;
        f.sync_all()?;
    }
    if let Ok(previous) = std::fs::read(path) {
        if !previous.is_empty() && body::decode::<ResetOffsetBody>(&previous).is_ok() {
            let _ = std::fs::write(path.with_extension("json.bak"), &previous);
        }
    }
    std::fs::rename(&tmp, path)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_round_trip_in_java_form() {
        let dir = std::env::temp_dir().join(format!("rmq-offsets-{}", std::process::id()));
        let path = dir.join("offsets.json");
        let mq = MessageQueue::new("T", "b", 3);
        write_offsets_file(&path, BTreeMap::from([(mq.clone(), 42)])).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(r#"{"brokerName":"b","queueId":3,"topic":"T"}:42"#),
            "Java's object-keyed form: {text}"
        );
        assert_eq!(read_offsets_file(&path).unwrap().get(&mq), Some(&42));
        let _ = std::fs::remove_dir_all(dir);
    }

    fn test_instance(name: &str) -> std::sync::Arc<ClientInstance> {
        let config = crate::config::ClientConfig {
            namesrv_addr: vec!["127.0.0.1:9".into()],
            ..crate::config::ClientConfig::default()
        };
        ClientInstance::get_or_create(&config, name).unwrap()
    }

    fn write_raw(path: &Path, offsets: BTreeMap<MessageQueue, i64>) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let json = body::encode_fastjson(&ResetOffsetBody {
            offset_table: offsets,
        });
        std::fs::write(path, json).unwrap();
    }

    /// Java `LocalFileOffsetStore.readLocalOffset`: a main file that is corrupt, empty or
    /// missing is replaced by `.bak` on every read from the store, not only at load; and a
    /// corrupt main file is never copied over a good `.bak`.
    #[tokio::test]
    async fn the_backup_stands_in_for_a_bad_main_file_on_every_read() {
        let mq = MessageQueue::new("T", "b", 0);
        let inst = test_instance("offsets-backup-test");
        for (case, main) in [
            ("corrupt", Some(&b"{\"offsetTable\":"[..])),
            ("empty", Some(&b""[..])),
            ("missing", None),
        ] {
            let dir =
                std::env::temp_dir().join(format!("rmq-offsets-bak-{}-{case}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let path = dir.join("cid").join("g").join("offsets.json");
            let bak = path.with_extension("json.bak");
            write_raw(&bak, BTreeMap::from([(mq.clone(), 5)]));
            if let Some(main) = main {
                std::fs::write(&path, main).unwrap();
            }
            let store = OffsetStore::local(&dir, "cid", "g").unwrap();
            assert_eq!(store.snapshot().get(&mq), Some(&5), "{case}: loaded");
            // A rebalance forgets the memory offset of a queue it takes, then reads the store.
            store.remove(&mq);
            assert_eq!(
                store.read(&inst, &mq, ReadOffsetType::Store).await,
                5,
                "{case}: read from the store"
            );
            store
                .persist_all(&inst, &BTreeSet::from([mq.clone()]))
                .await
                .unwrap();
            assert_eq!(read_offsets_file(&path).unwrap().get(&mq), Some(&5));
            assert_eq!(
                read_offsets_file(&bak).unwrap().get(&mq),
                Some(&5),
                "{case}: the backup survives the write"
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
        inst.shutdown_now();
    }

    /// Java's `LocalFileOffsetStore.persistAll` writes the given queues over what the file
    /// holds: an admin reset persists a queue's new offset and forgets it until the next
    /// rebalance takes the queue again; a persist of the owned queues in between keeps it in
    /// the file, so the rebalance starts there.
    #[tokio::test]
    async fn a_forgotten_queue_keeps_its_offset_in_the_file() {
        let inst = test_instance("offsets-forgotten-test");
        let dir = std::env::temp_dir().join(format!("rmq-offsets-forgot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = OffsetStore::local(&dir, "cid", "g").unwrap();
        let (reset, other) = (
            MessageQueue::new("T", "b", 0),
            MessageQueue::new("T", "b", 1),
        );
        store.update(&reset, 10, false);
        store.update(&other, 7, false);
        let both = BTreeSet::from([reset.clone(), other.clone()]);
        store.persist_all(&inst, &both).await.unwrap();
        // The reset: the new offset, persisted, and the queue forgotten until a rebalance.
        store.update(&reset, 2, false);
        store.persist(&inst, &reset).await.unwrap();
        store.remove(&reset);
        // The periodic persist of the queues still owned.
        store.update(&other, 8, false);
        store
            .persist_all(&inst, &BTreeSet::from([other.clone()]))
            .await
            .unwrap();
        let path = dir.join("cid").join("g").join("offsets.json");
        let file = read_offsets_file(&path).unwrap();
        assert_eq!(file.get(&reset), Some(&2));
        assert_eq!(file.get(&other), Some(&8));
        // The rebalance reads the reset offset.
        assert_eq!(store.read(&inst, &reset, ReadOffsetType::Store).await, 2);
        let _ = std::fs::remove_dir_all(&dir);
        inst.shutdown_now();
    }

    #[test]
    fn increase_only() {
        let s = OffsetStore::remote("g");
        let mq = MessageQueue::new("T", "b", 0);
        s.update(&mq, 10, true);
        s.update(&mq, 5, true);
        assert_eq!(s.snapshot()[&mq], 10);
        s.update(&mq, 5, false);
        assert_eq!(s.snapshot()[&mq], 5);
    }
}
