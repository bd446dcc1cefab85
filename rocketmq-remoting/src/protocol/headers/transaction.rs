//! END_TRANSACTION (37) and CHECK_TRANSACTION_STATE (39).

use super::header;

header! {
    /// Request header of END_TRANSACTION.
    pub struct EndTransactionRequestHeader {
        /// Producer group.
        pub producer_group: String => "producerGroup",
        /// Half message's queue offset (from the send response).
        pub tran_state_table_offset: i64 => "tranStateTableOffset",
        /// Half message's commit-log offset (from the send response's offset msgId).
        pub commit_log_offset: i64 => "commitLogOffset",
        /// 0 unknown, 8 commit, 12 rollback (`MessageSysFlag` transaction values).
        pub commit_or_rollback: i32 => "commitOrRollback",
        /// Whether this answers a CHECK_TRANSACTION_STATE.
        pub from_transaction_check: bool => "fromTransactionCheck" = false,
        /// UNIQ_KEY of the message.
        pub msg_id: String => "msgId",
        /// Transaction id.
        pub transaction_id: Option<String> => "transactionId",
        /// Broker name (4.9.5+).
        pub broker_name: Option<String> => "bname",
    }
}

header! {
    /// Request header of CHECK_TRANSACTION_STATE (broker → producer).
    pub struct CheckTransactionStateRequestHeader {
        /// Half message's queue offset.
        pub tran_state_table_offset: i64 => "tranStateTableOffset",
        /// Half message's commit-log offset.
        pub commit_log_offset: i64 => "commitLogOffset",
        /// UNIQ_KEY.
        pub msg_id: Option<String> => "msgId",
        /// Transaction id (= UNIQ_KEY).
        pub transaction_id: Option<String> => "transactionId",
        /// Offset id of the half message.
        pub offset_msg_id: Option<String> => "offsetMsgId",
        /// Broker name (4.9.5+).
        pub broker_name: Option<String> => "bname",
    }
}
