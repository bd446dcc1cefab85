//! LOCK_BATCH_MQ / UNLOCK_BATCH_MQ bodies and the GET_CONSUMER_LIST_BY_GROUP response body.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::protocol::message::MessageQueue;

/// LOCK_BATCH_MQ request body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LockBatchRequestBody {
    /// Requesting client.
    pub client_id: String,
    /// Consumer group.
    pub consumer_group: String,
    /// Queues to lock.
    pub mq_set: BTreeSet<MessageQueue>,
}

/// LOCK_BATCH_MQ response body: the queues actually locked.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LockBatchResponseBody {
    /// Locked queues.
    #[serde(rename = "lockOKMQSet")]
    pub lock_ok_mq_set: BTreeSet<MessageQueue>,
}

/// UNLOCK_BATCH_MQ request body.
pub type UnlockBatchRequestBody = LockBatchRequestBody;

/// GET_CONSUMER_LIST_BY_GROUP response body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerListBody {
    /// Client ids of the group's members.
    pub consumer_id_list: Vec<String>,
}
