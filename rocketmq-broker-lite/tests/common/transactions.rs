//! Half messages as a transactional producer sends them, their END_TRANSACTION and the
//! broker's checks of them: shared by the transaction tests (`transaction_checks.rs`,
//! `transaction_book.rs`), which declare `common` (broker.rs) beside this module.
#![allow(dead_code)]

use bytes::Bytes;
use rocketmq_remoting::protocol::headers::{
    CheckTransactionStateRequestHeader, EndTransactionRequestHeader, SendMessageResponseHeader,
};
use rocketmq_remoting::protocol::message::{decode_offset_msg_id, sys_flag, Message};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode};
use rocketmq_remoting::transport::RemotingClient;
use tokio::sync::mpsc;

use crate::common::T;

/// A half message stored: its commit-log and half-queue offsets, and its unique key.
#[derive(Debug, Clone)]
pub struct Half {
    pub phys: i64,
    pub queue_offset: i64,
    pub uniq: String,
}

/// A half message of producer group `group` (TRAN_MSG=true, sys flag 4, the PGROUP property
/// only when `pgroup` says so), born at `born`, with `extra` properties.
pub fn half_message(
    group: &str,
    topic: &str,
    uniq: &str,
    born: i64,
    pgroup: bool,
    extra: &[(&str, &str)],
) -> RemotingCommand {
    let mut m = Message::new(topic, Bytes::from(format!("body of {uniq}")))
        .with_tags("TagT")
        .with_property("UNIQ_KEY", uniq)
        .with_property("WAIT", "true")
        .with_property("TRAN_MSG", "true");
    if pgroup {
        m = m.with_property("PGROUP", group);
    }
    for (k, v) in extra {
        m = m.with_property(k, v);
    }
    crate::common::send_request_as(
        group,
        topic,
        0,
        sys_flag::TRANSACTION_PREPARED_TYPE,
        born,
        &m,
    )
}

/// Sends `half` (a [`half_message`] with unique key `uniq`) to broker `b`, asserting it is
/// stored.
pub async fn send_half_message(
    c: &RemotingClient,
    b: &str,
    half: RemotingCommand,
    uniq: &str,
) -> Half {
    let r = c.invoke(b, half, T).await.unwrap();
    assert_eq!(r.code, 0, "{}", r.remark_str());
    let h: SendMessageResponseHeader = r.decode_header().unwrap();
    let (_, phys) = decode_offset_msg_id(&h.msg_id).unwrap();
    Half {
        phys,
        queue_offset: h.queue_offset,
        uniq: uniq.into(),
    }
}

/// END_TRANSACTION of `half` for producer group `group`.
pub fn end_request(group: &str, half: &Half, kind: i32, from_check: bool) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::EndTransaction,
        &EndTransactionRequestHeader {
            producer_group: group.into(),
            tran_state_table_offset: half.queue_offset,
            commit_log_offset: half.phys,
            commit_or_rollback: kind,
            from_transaction_check: from_check,
            msg_id: half.uniq.clone(),
            transaction_id: Some(half.uniq.clone()),
            broker_name: None,
        },
    )
}

/// Commits (`commit`) or rolls back a half message, asserting SUCCESS.
pub async fn end(
    c: &RemotingClient,
    b: &str,
    group: &str,
    half: &Half,
    commit: bool,
    from_check: bool,
) {
    let kind = if commit {
        sys_flag::TRANSACTION_COMMIT_TYPE
    } else {
        sys_flag::TRANSACTION_ROLLBACK_TYPE
    };
    let r = c
        .invoke(b, end_request(group, half, kind, from_check), T)
        .await
        .unwrap();
    assert_eq!(r.code, 0, "{}", r.remark_str());
}

/// The next `n` checks the broker sent, as the half messages they ask about.
pub async fn checks_received(
    rx: &mut mpsc::UnboundedReceiver<RemotingCommand>,
    n: usize,
) -> Vec<Half> {
    let mut out = Vec::new();
    for _ in 0..n {
        let check = tokio::time::timeout(T, rx.recv())
            .await
            .expect("a check arrives")
            .unwrap();
        let h: CheckTransactionStateRequestHeader = check.decode_header().unwrap();
        out.push(Half {
            phys: h.commit_log_offset,
            queue_offset: h.tran_state_table_offset,
            uniq: h.msg_id.unwrap_or_default(),
        });
    }
    out
}
