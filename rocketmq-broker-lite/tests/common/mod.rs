//! Helpers shared by the store tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rocketmq_broker_lite::store::simfs::SimFs;
use rocketmq_broker_lite::store::{
    AcceptAll, ManualClock, ManualDiskUsage, MessageStore, PutMessage, StoreConfig, StoreEnv,
};
use rocketmq_remoting::protocol::message::{
    decode_stored, encode_properties, tags_hash_code, Message, StoredDecodeOptions,
};

pub fn msg(topic: &str, queue: i32, body: impl Into<Bytes>) -> PutMessage {
    msg_with(topic, queue, body, None, None)
}

pub fn msg_with(
    topic: &str,
    queue: i32,
    body: impl Into<Bytes>,
    tags: Option<&str>,
    keys: Option<&str>,
) -> PutMessage {
    let mut m = Message::new(topic, body.into());
    if let Some(t) = tags {
        m.set_tags(t);
    }
    if let Some(k) = keys {
        m.put_property("KEYS", k);
    }
    PutMessage {
        topic: topic.into(),
        queue_id: queue,
        flag: 0,
        body: m.body.clone(),
        properties: encode_properties(&m.properties),
        tags_code: tags_hash_code(tags),
        sys_flag: 0,
        born_timestamp: 1,
        born_host: "127.0.0.1:5000".parse().unwrap(),
        store_host: "127.0.0.1:10911".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
    }
}

/// Bodies of every message of a queue, in order.
pub fn read_queue(store: &MessageStore, topic: &str, queue: i32) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut offset = store.min_offset(topic, queue);
    loop {
        let r = store.get_messages(topic, queue, offset, 32, &AcceptAll);
        for raw in &r.messages {
            let (m, _) = decode_stored(
                raw,
                StoredDecodeOptions {
                    check_crc: true,
                    ..Default::default()
                },
            )
            .expect("stored record decodes with a valid CRC");
            assert_eq!(m.topic, topic);
            assert_eq!(m.queue_id, queue);
            out.push(m.body.clone());
        }
        if r.messages.is_empty() && r.next_begin_offset == offset {
            break;
        }
        offset = r.next_begin_offset;
        if offset >= store.max_offset(topic, queue) {
            break;
        }
    }
    out
}

pub struct SimEnv {
    pub fs: SimFs,
    pub clock: Arc<ManualClock>,
    pub disk: Arc<ManualDiskUsage>,
}

impl SimEnv {
    pub fn new(seed: u64) -> Self {
        Self {
            fs: SimFs::new(seed),
            clock: ManualClock::new(1_700_000_000_000),
            disk: ManualDiskUsage::new(10),
        }
    }

    pub fn env(&self) -> StoreEnv {
        StoreEnv {
            vfs: Arc::new(self.fs.clone()),
            clock: self.clock.clone(),
            disk: self.disk.clone(),
        }
    }
}

pub fn small_config(segment: u64) -> StoreConfig {
    let mut c = StoreConfig::small("/store", segment, 64);
    c.checkpoint_interval = Duration::from_secs(3600);
    c.clean_resource_interval = Duration::from_secs(3600);
    c.flush_interval = Duration::from_millis(20);
    c.max_message_size = 2048;
    c
}
