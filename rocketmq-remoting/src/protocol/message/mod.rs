//! The message model and its encodings: properties string, stored-message records, batch
//! bodies, compression, message ids and tag hash codes.

mod batch;
mod compression;
mod id;
mod model;
mod properties;
mod shared_str;
mod stored;
mod tag;

pub use self::batch::{
    batch_records, decode_batch, decode_batch_shared, encode_batch, encode_batch_with_ids,
    BatchElement, BatchRecord,
};
pub use self::compression::{compress_zlib, decompress_body, CompressionError};
pub use self::id::{
    decode_offset_msg_id, encode_offset_msg_id, offset_msg_id_in, push_offset_msg_id,
    UniqIdGenerator, UniqIdInfo,
};
pub use self::model::{Message, MessageExt, MessageQueue, PropertyError};
pub use self::properties::{
    decode_properties, encode_properties, plain_properties, property_items, push_properties,
    PlainProperties, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR,
};
pub use self::shared_str::SharedStr;
pub use self::stored::{
    body_crc, decode_stored, decode_stored_all, decode_stored_each, decode_stored_shared,
    encode_stored, stored_len, StoredDecodeError, StoredDecodeOptions, UndecodableRecord,
    BLANK_MAGIC, MAGIC_V1, MAGIC_V2,
};
pub use self::tag::{java_string_hash, tags_hash_code};

/// Well-known property names (`MessageConst`).
pub mod property {
    /// Business keys, space separated.
    pub const KEYS: &str = "KEYS";
    /// The message tag.
    pub const TAGS: &str = "TAGS";
    /// `"true"`/`"false"`: wait for flush/replication before acknowledging.
    pub const WAIT_STORE_MSG_OK: &str = "WAIT";
    /// Delay level 1..18.
    pub const DELAY_TIME_LEVEL: &str = "DELAY";
    /// Original topic of a retried message.
    pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
    /// Real topic of a delayed or half message.
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    /// Real queue id of a delayed or half message.
    pub const REAL_QUEUE_ID: &str = "REAL_QID";
    /// `"true"` on transactional half messages.
    pub const TRANSACTION_PREPARED: &str = "TRAN_MSG";
    /// Producer group of a transactional message.
    pub const PRODUCER_GROUP: &str = "PGROUP";
    /// Queue min offset, set by the client after a pull.
    pub const MIN_OFFSET: &str = "MIN_OFFSET";
    /// Queue max offset, set by the client after a pull.
    pub const MAX_OFFSET: &str = "MAX_OFFSET";
    /// Client-generated unique id.
    pub const UNIQ_CLIENT_MESSAGE_ID_KEYIDX: &str = "UNIQ_KEY";
    /// Message id of the first delivery.
    pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
    /// Reconsume count carried by a client-side send-back.
    pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
    /// Maximum reconsume count carried by a client-side send-back.
    pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
    /// Local bookkeeping of the consumer.
    pub const CONSUME_START_TIMESTAMP: &str = "CONSUME_START_TIME";
    /// How many times a half message was checked.
    pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
    /// Delay before the first transaction check.
    pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
    /// Original half-queue offset of a re-put half message.
    pub const TRANSACTION_PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
    /// Broker cluster name added to every stored message.
    pub const CLUSTER: &str = "CLUSTER";
    /// Broker region (send-response extField too).
    pub const MSG_REGION: &str = "MSG_REGION";
    /// Trace switch (send-response extField too).
    pub const TRACE_SWITCH: &str = "TRACE_ON";
    /// Namespace.
    pub const INSTANCE_ID: &str = "INSTANCE_ID";
    /// Request/reply correlation id.
    pub const CORRELATION_ID: &str = "CORRELATION_ID";
    /// Request/reply client.
    pub const MESSAGE_REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";
    /// Request/reply time to live.
    pub const MESSAGE_TTL: &str = "TTL";
    /// Request/reply arrival time.
    pub const REPLY_MESSAGE_ARRIVE_TIME: &str = "ARRIVE_TIME";
    /// Request/reply push time.
    pub const PUSH_REPLY_TIME: &str = "PUSH_REPLY_TIME";
    /// `reply` marks a reply message.
    pub const MESSAGE_TYPE: &str = "MSG_TYPE";
    /// Buyer id (legacy).
    pub const BUYER_ID: &str = "BUYER_ID";
    /// LMQ (light message queue) names a message is also dispatched to, comma separated (a
    /// Java broker with `enableLmq` and `enableMultiDispatch`).
    pub const INNER_MULTI_DISPATCH: &str = "INNER_MULTI_DISPATCH";
    /// The message's queue offsets in those LMQs, comma separated (set by such a broker).
    pub const INNER_MULTI_QUEUE_OFFSET: &str = "INNER_MULTI_QUEUE_OFFSET";

    /// Separator of `KEYS` entries.
    pub const KEY_SEPARATOR: &str = " ";

    /// Names a user may not set through `put_user_property`: Java 4.9.8's
    /// `MessageConst.STRING_HASH_SET`, exactly (so `CHECK_IMMUNITY_TIME_IN_SECONDS` and the
    /// other transaction-check names are not in it, and `INNER_MULTI_DISPATCH` is not either).
    pub const RESERVED: &[&str] = &[
        TRACE_SWITCH,
        MSG_REGION,
        KEYS,
        TAGS,
        WAIT_STORE_MSG_OK,
        DELAY_TIME_LEVEL,
        RETRY_TOPIC,
        REAL_TOPIC,
        REAL_QUEUE_ID,
        TRANSACTION_PREPARED,
        PRODUCER_GROUP,
        MIN_OFFSET,
        MAX_OFFSET,
        BUYER_ID,
        ORIGIN_MESSAGE_ID,
        "TRANSFER_FLAG",
        "CORRECTION_FLAG",
        "MQ2_FLAG",
        RECONSUME_TIME,
        UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        MAX_RECONSUME_TIMES,
        CONSUME_START_TIMESTAMP,
        INSTANCE_ID,
        CORRELATION_ID,
        MESSAGE_REPLY_TO_CLIENT,
        MESSAGE_TTL,
        REPLY_MESSAGE_ARRIVE_TIME,
        PUSH_REPLY_TIME,
        CLUSTER,
        MESSAGE_TYPE,
        INNER_MULTI_QUEUE_OFFSET,
    ];
}

/// `MessageSysFlag` bits.
pub mod sys_flag {
    /// Body compressed.
    pub const COMPRESSED: i32 = 0x1;
    /// Set by the broker when the topic filter type is MULTI_TAG.
    pub const MULTI_TAGS: i32 = 0x2;
    /// Transaction type: none.
    pub const TRANSACTION_NOT_TYPE: i32 = 0;
    /// Transaction type: half message (client side).
    pub const TRANSACTION_PREPARED_TYPE: i32 = 0x4;
    /// Transaction type: committed.
    pub const TRANSACTION_COMMIT_TYPE: i32 = 0x8;
    /// Transaction type: rolled back.
    pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0xC;
    /// Born host is IPv6.
    pub const BORNHOST_V6: i32 = 0x10;
    /// Store host is IPv6.
    pub const STOREHOST_V6: i32 = 0x20;
    /// 5.x inner batch: body needs unwrapping.
    pub const NEED_UNWRAP: i32 = 0x40;
    /// 5.x inner batch.
    pub const INNER_BATCH: i32 = 0x80;
    /// Compression type mask.
    pub const COMPRESSION_TYPE_MASK: i32 = 0x700;
    /// LZ4 compression type.
    pub const COMPRESSION_LZ4: i32 = 0x100;
    /// ZSTD compression type.
    pub const COMPRESSION_ZSTD: i32 = 0x200;
    /// ZLIB compression type (0 also means zlib).
    pub const COMPRESSION_ZLIB: i32 = 0x300;

    /// The transaction type bits.
    pub const fn transaction_value(flag: i32) -> i32 {
        flag & TRANSACTION_ROLLBACK_TYPE
    }

    /// Replaces the transaction type bits.
    pub const fn reset_transaction_value(flag: i32, ty: i32) -> i32 {
        (flag & !TRANSACTION_ROLLBACK_TYPE) | ty
    }
}
