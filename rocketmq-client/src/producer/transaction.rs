//! Transactional messages: a half message the consumers do not see, a local transaction, then a
//! commit or a rollback; the broker asks again (check-back) while the outcome is unknown.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rocketmq_client::ClientError> {
//! use rocketmq_client::producer::{
//!     DefaultMQProducer, LocalTransactionState, TransactionListener, TransactionMQProducer,
//! };
//! use rocketmq_client::{Message, MessageExt};
//!
//! struct Orders;
//!
//! #[async_trait::async_trait]
//! impl TransactionListener for Orders {
//!     type Arg = u64;
//!     async fn execute_local_transaction(&self, _msg: &Message, order_id: &u64) -> LocalTransactionState {
//!         // write the order to the database ...
//!         let _ = order_id;
//!         LocalTransactionState::CommitMessage
//!     }
//!     async fn check_local_transaction(&self, _msg: &MessageExt) -> LocalTransactionState {
//!         // look the order up ...
//!         LocalTransactionState::CommitMessage
//!     }
//! }
//!
//! let producer = DefaultMQProducer::builder().group("order-tx").namesrv_addr("127.0.0.1:9876").build()?;
//! let tx = TransactionMQProducer::new(producer, Orders);
//! tx.start().await?;
//! let r = tx.send_message_in_transaction(Message::new("Orders", "created"), &42).await?;
//! println!("{:?} {:?}", r.send_result.status, r.local_transaction_state);
//! # Ok(()) }
//! ```

use std::borrow::Cow;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use rocketmq_remoting::protocol::headers::{
    CheckTransactionStateRequestHeader, EndTransactionRequestHeader,
};
use rocketmq_remoting::protocol::message::{
    decode_offset_msg_id, property, sys_flag, Message, MessageExt,
};
use tokio::sync::Semaphore;

use super::{DefaultMQProducer, SendResult, SendStatus};
use crate::error::{ClientError, Result};
use crate::internal::hooks::{call_hook, EndTransactionContext, EndTransactionHook, Hooks};
use crate::internal::instance::{lock, ClientInstance};
use crate::internal::namespace::Namespace;
use crate::internal::send::TransactionChecker;

pub use crate::internal::hooks::LocalTransactionState;

impl LocalTransactionState {
    /// The END_TRANSACTION `commitOrRollback` value.
    fn wire(self) -> i32 {
        match self {
            LocalTransactionState::CommitMessage => sys_flag::TRANSACTION_COMMIT_TYPE,
            LocalTransactionState::RollbackMessage => sys_flag::TRANSACTION_ROLLBACK_TYPE,
            LocalTransactionState::Unknown => sys_flag::TRANSACTION_NOT_TYPE,
        }
    }
}

/// The application's side of a transaction (Java `TransactionListener`). A panic counts as
/// `Unknown`, and the broker is told why in the END_TRANSACTION remark, as Java tells it of an
/// exception.
#[async_trait]
pub trait TransactionListener: Send + Sync + 'static {
    /// What `send_message_in_transaction` passes along to the local transaction.
    type Arg: Send + Sync + ?Sized;

    /// Runs the local transaction once the half message is stored.
    async fn execute_local_transaction(
        &self,
        msg: &Message,
        arg: &Self::Arg,
    ) -> LocalTransactionState;

    /// Tells the broker how a transaction whose outcome it does not know ended.
    async fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState;
}

/// The result of a transactional send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionSendResult {
    /// The half message's send result.
    pub send_result: SendResult,
    /// What the local transaction decided (sent to the broker, unless
    /// `end_transaction_error` says otherwise).
    pub local_transaction_state: LocalTransactionState,
    /// Why the decision could not be sent to the broker (END_TRANSACTION failed), when it could
    /// not: the half message is stored and the local transaction has run, so the broker will
    /// ask the group's [`TransactionListener::check_local_transaction`] for the outcome later.
    /// `None` when the decision was sent.
    pub end_transaction_error: Option<String>,
}

/// A producer of transactional messages: a [`DefaultMQProducer`] plus a
/// [`TransactionListener`]. Give it a producer group of its own: the broker asks a producer of
/// the group about unfinished transactions.
pub struct TransactionMQProducer<L: TransactionListener> {
    producer: DefaultMQProducer,
    listener: Arc<L>,
}

impl<L: TransactionListener> Clone for TransactionMQProducer<L> {
    fn clone(&self) -> Self {
        Self {
            producer: self.producer.clone(),
            listener: self.listener.clone(),
        }
    }
}

impl<L: TransactionListener> std::fmt::Debug for TransactionMQProducer<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionMQProducer")
            .field("group", &self.producer.group())
            .finish()
    }
}

/// Transaction checks that may wait for the listener at once (Java's `checkRequestHoldMax`,
/// the bound of its check executor's queue).
pub const CHECK_REQUEST_HOLD_MAX: usize = 2000;

/// Counts a transaction check as held until it is finished (or dropped unrun).
struct HeldCheck(Arc<AtomicUsize>);

impl HeldCheck {
    /// Counts one more check in `held`, unless [`CHECK_REQUEST_HOLD_MAX`] are held already.
    fn take(held: &Arc<AtomicUsize>) -> Option<Self> {
        held.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < CHECK_REQUEST_HOLD_MAX).then_some(n + 1)
        })
        .ok()?;
        Some(Self(held.clone()))
    }
}

impl Drop for HeldCheck {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

struct Checker<L: TransactionListener> {
    listener: Arc<L>,
    group: String,
    /// Java checks with one thread by default (`checkThreadPoolMinSize` = 1).
    permits: Arc<Semaphore>,
    /// Checks received and not finished (running or waiting for the permit): at
    /// [`CHECK_REQUEST_HOLD_MAX`] more are dropped.
    held: Arc<AtomicUsize>,
    /// The producer's end-transaction hooks, and its namespace (hooks see plain names).
    end_hooks: Arc<Hooks<dyn EndTransactionHook>>,
    ns: Namespace,
}

/// The text of a caught panic (its message when it has one), for the END_TRANSACTION remark
/// where Java puts the exception's description.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "the listener panicked".to_string()
    }
}

/// Runs the end-transaction hooks (Java `doExecuteEndTransactionHook`); the message's topic
/// and the group are shown without the namespace.
#[allow(clippy::too_many_arguments)]
fn run_end_hooks(
    hooks: &Hooks<dyn EndTransactionHook>,
    ns: &Namespace,
    group: &str,
    broker_addr: &str,
    msg: &Message,
    msg_id: &str,
    state: LocalTransactionState,
    from_transaction_check: bool,
) {
    let Some(hooks) = hooks.get() else {
        return;
    };
    let group = ns.unwrap(group);
    let message: Cow<'_, Message> = match ns.unwrap_cow(&msg.topic) {
        Cow::Borrowed(_) => Cow::Borrowed(msg),
        Cow::Owned(topic) => Cow::Owned(Message {
            topic,
            ..msg.clone()
        }),
    };
    let ctx = EndTransactionContext {
        producer_group: &group,
        broker_addr,
        message: &message,
        msg_id,
        transaction_id: message.transaction_id.as_deref(),
        state,
        from_transaction_check,
    };
    for h in hooks.iter() {
        call_hook(h.hook_name(), || h.end_transaction(&ctx));
    }
}

impl<L: TransactionListener> TransactionChecker for Checker<L> {
    fn check(
        &self,
        inst: &ClientInstance,
        broker_addr: String,
        mut msg: MessageExt,
        header: CheckTransactionStateRequestHeader,
    ) {
        // Java `ClientRemotingProcessor.checkTransactionState`: a non-empty UNIQ_KEY is the
        // transaction id.
        if let Some(id) = msg.uniq_key().filter(|k| !k.is_empty()).map(str::to_string) {
            msg.message.transaction_id = Some(id);
        }
        let (listener, group, permits, api) = (
            self.listener.clone(),
            self.group.clone(),
            self.permits.clone(),
            inst.api.clone(),
        );
        let (end_hooks, ns) = (self.end_hooks.clone(), self.ns.clone());
        // Each waiting check holds its message: a slow listener and a broker checking a large
        // backlog would otherwise pile them up without bound. Dropped checks are asked again
        // at the broker's next check round.
        let Some(held) = HeldCheck::take(&self.held) else {
            tracing::warn!(
                addr = %broker_addr,
                held = CHECK_REQUEST_HOLD_MAX,
                "too many transaction checks waiting for the listener: this one is dropped (the broker asks again)"
            );
            return;
        };
        tokio::spawn(async move {
            let _held = held;
            let Ok(_permit) = permits.acquire_owned().await else {
                return;
            };
            let (state, remark) = match AssertUnwindSafe(listener.check_local_transaction(&msg))
                .catch_unwind()
                .await
            {
                Ok(s) => (s, None),
                Err(panic) => {
                    let text = panic_text(&*panic);
                    tracing::error!(panic = %text, "the transaction check panicked; answering unknown");
                    (
                        LocalTransactionState::Unknown,
                        Some(format!("checkLocalTransactionState Exception: {text}")),
                    )
                }
            };
            // Java `checkTransactionState`: the message's UNIQ_KEY, else its message id as
            // `MessageDecoder.decode` sets it (the offset message id).
            let msg_id = match msg.uniq_key() {
                Some(k) => k.to_string(),
                None => msg.offset_msg_id.clone(),
            };
            let end = EndTransactionRequestHeader {
                producer_group: group,
                tran_state_table_offset: header.tran_state_table_offset,
                commit_log_offset: header.commit_log_offset,
                commit_or_rollback: state.wire(),
                from_transaction_check: true,
                msg_id,
                transaction_id: header.transaction_id.clone(),
                broker_name: header.broker_name.clone(),
            };
            run_end_hooks(
                &end_hooks,
                &ns,
                &end.producer_group,
                &broker_addr,
                &msg.message,
                &end.msg_id,
                state,
                true,
            );
            if let Err(e) = api
                .end_transaction(&broker_addr, &end, remark, Duration::from_secs(3))
                .await
            {
                tracing::warn!(addr = %broker_addr, error = %e, "cannot answer a transaction check");
            }
        });
    }
}

impl<L: TransactionListener> TransactionMQProducer<L> {
    /// Wraps a built (not started) producer.
    pub fn new(producer: DefaultMQProducer, listener: L) -> Self {
        Self {
            producer,
            listener: Arc::new(listener),
        }
    }

    /// The underlying producer (for plain sends).
    pub fn producer(&self) -> &DefaultMQProducer {
        &self.producer
    }

    /// Registers the check-back handler and starts the producer. A failed start can be
    /// retried; cancel-safe as [`DefaultMQProducer::start`].
    pub async fn start(&self) -> Result<()> {
        let checker = Checker {
            listener: self.listener.clone(),
            group: self.producer.core().settings.group.clone(),
            permits: Arc::new(Semaphore::new(1)),
            held: Arc::new(AtomicUsize::new(0)),
            end_hooks: self.producer.core().end_transaction_hooks.clone(),
            ns: self.producer.core().ns.clone(),
        };
        // The producer's own start refuses a second start; until it succeeds, the handler set
        // here is only reachable through a running producer.
        *lock(&self.producer.core().transaction) = Some(Arc::new(checker));
        self.producer.start().await
    }

    /// Sends `msg` as a half message, runs the local transaction with `arg`, and commits or
    /// rolls back according to its answer (`Unknown` leaves the decision to a later check-back).
    ///
    /// An error means the half message was not stored and the local transaction did not run.
    /// Once it ran, the result is returned even if its decision could not be sent
    /// ([`TransactionSendResult::end_transaction_error`]).
    pub async fn send_message_in_transaction(
        &self,
        mut msg: Message,
        arg: &L::Arg,
    ) -> Result<TransactionSendResult> {
        if msg.delay_level() != 0 {
            msg.clear_property(property::DELAY_TIME_LEVEL);
        }
        msg.put_property(property::TRANSACTION_PREPARED, "true");
        // The group as the broker knows it (with the namespace): it asks a producer of it.
        msg.put_property(
            property::PRODUCER_GROUP,
            self.producer.core().settings.group.clone(),
        );
        let result = self.producer.send(msg.clone()).await?;
        let mut local_panic = None;
        let state = match result.status {
            SendStatus::SendOk => {
                // Java's send stamps the caller's message with the UNIQ_KEY it sent
                // (`sendKernelImpl`: `MessageClientIDSetter.setUniqID(msg)`, only when absent):
                // the local transaction sees the key its check-back will see. The send here
                // stamped a copy, whose key is the result's message id.
                if msg.uniq_key().is_none() && !result.msg_id.is_empty() {
                    msg.put_property(
                        property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
                        result.msg_id.clone(),
                    );
                }
                if let Some(t) = &result.transaction_id {
                    msg.put_property("__transactionId__", t.clone());
                }
                // A non-empty UNIQ_KEY is the transaction id; otherwise the message keeps its
                // own (Java `sendMessageInTransaction`).
                if let Some(id) = msg.uniq_key().filter(|k| !k.is_empty()) {
                    msg.transaction_id = Some(id.to_string());
                }
                match AssertUnwindSafe(self.listener.execute_local_transaction(&msg, arg))
                    .catch_unwind()
                    .await
                {
                    Ok(s) => s,
                    Err(panic) => {
                        // Java catches the listener's exception, ends the transaction UNKNOW
                        // and tells the broker why.
                        let text = panic_text(&*panic);
                        tracing::warn!(panic = %text, "the local transaction panicked; its state is unknown");
                        local_panic = Some(text);
                        LocalTransactionState::Unknown
                    }
                }
            }
            _ => LocalTransactionState::RollbackMessage,
        };
        let remark = local_panic.map(|t| format!("executeLocalTransactionBranch exception: {t}"));
        // The half message is stored and the local transaction has run: the result says so
        // even when the decision cannot be sent (an error here would invite running the
        // local transaction again). The broker checks the transaction back later (Java logs
        // the failure and returns the result too).
        let end_transaction_error = match self.end_transaction(&msg, &result, state, remark).await {
            Ok(()) => None,
            Err(e) => {
                tracing::warn!(
                    msg_id = %result.msg_id,
                    state = ?state,
                    error = %e,
                    "the local transaction ended, but telling the broker failed: it will check back"
                );
                Some(e.to_string())
            }
        };
        Ok(TransactionSendResult {
            send_result: result,
            local_transaction_state: state,
            end_transaction_error,
        })
    }

    async fn end_transaction(
        &self,
        msg: &Message,
        result: &SendResult,
        state: LocalTransactionState,
        remark: Option<String>,
    ) -> Result<()> {
        let inst = self.producer.instance()?;
        let (store_host, commit_log_offset) = decode_offset_msg_id(&result.offset_msg_id)
            .ok_or_else(|| ClientError::Protocol {
                addr: result.message_queue.broker_name.to_string(),
                reason: format!("bad offset message id {:?}", result.offset_msg_id),
            })?;
        // Java ends the transaction on the broker's master address as the client knows it; when
        // the route does not name it (yet), the broker that stored the half message, whose
        // address the offset message id carries, is the one to end it on.
        let addr = inst
            .master_addr(&result.message_queue.broker_name)
            .map_or_else(|| store_host.to_string(), |a| a.to_string());
        let header = EndTransactionRequestHeader {
            producer_group: self.producer.core().settings.group.clone(),
            tran_state_table_offset: result.queue_offset,
            commit_log_offset,
            commit_or_rollback: state.wire(),
            from_transaction_check: false,
            msg_id: result.msg_id.clone(),
            transaction_id: result.transaction_id.clone(),
            broker_name: Some(result.message_queue.broker_name.to_string()),
        };
        let core = self.producer.core();
        run_end_hooks(
            &core.end_transaction_hooks,
            &core.ns,
            &header.producer_group,
            &addr,
            msg,
            &result.msg_id,
            state,
            false,
        );
        inst.api
            .end_transaction(
                &addr,
                &header,
                remark,
                self.producer.config().send_msg_timeout,
            )
            .await
    }

    /// Shuts the producer down.
    pub async fn shutdown(&self) {
        self.producer.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::internal::push::test_support::{Answer, Fake};
    use rocketmq_remoting::protocol::headers::SendMessageResponseHeader;
    use rocketmq_remoting::protocol::message::StoredDecodeOptions;
    use rocketmq_remoting::protocol::message::{
        decode_stored, encode_offset_msg_id, encode_stored,
    };
    use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
    use rocketmq_remoting::transport::ProcessResult;
    use std::net::SocketAddr;
    use std::sync::Mutex;

    const STORE_HOST: &str = "127.0.0.1:10911";
    const HALF_OFFSET: i64 = 4242;

    /// Panics where told to; records what the check-back saw.
    struct Panicky {
        panic_execute: bool,
        panic_check: bool,
        checked: Mutex<Vec<MessageExt>>,
    }

    #[async_trait]
    impl TransactionListener for Panicky {
        type Arg = ();
        async fn execute_local_transaction(
            &self,
            _msg: &Message,
            _arg: &(),
        ) -> LocalTransactionState {
            if self.panic_execute {
                panic!("boom in execute");
            }
            LocalTransactionState::CommitMessage
        }
        async fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
            lock(&self.checked).push(msg.clone());
            if self.panic_check {
                panic!("boom in check");
            }
            LocalTransactionState::RollbackMessage
        }
    }

    /// A fake broker that stores every send as a half message at [`HALF_OFFSET`] and records
    /// the END_TRANSACTION requests.
    async fn fake_broker() -> (Fake, Arc<Mutex<Vec<RemotingCommand>>>) {
        let ends = Arc::new(Mutex::new(Vec::new()));
        let answer: Answer = {
            let ends = ends.clone();
            Box::new(move |req: &RemotingCommand| match req.request_code() {
                RequestCode::SendMessage | RequestCode::SendMessageV2 => {
                    let mut r = RemotingCommand::response(ResponseCode::Success, None);
                    r.set_header(&SendMessageResponseHeader {
                        queue_id: 0,
                        trace_on: None,
                        msg_region: None,
                        msg_id: encode_offset_msg_id(STORE_HOST.parse().unwrap(), HALF_OFFSET),
                        queue_offset: 3,
                        transaction_id: None,
                    });
                    ProcessResult::Response(r)
                }
                RequestCode::EndTransaction => {
                    lock(&ends).push(req.clone());
                    ProcessResult::NoResponse
                }
                _ => {
                    ProcessResult::Response(RemotingCommand::response(ResponseCode::Success, None))
                }
            })
        };
        (Fake::start(&[0], answer).await, ends)
    }

    async fn started(fake: &Fake, name: &str, listener: Panicky) -> TransactionMQProducer<Panicky> {
        let producer = DefaultMQProducer::builder()
            .group(format!("tx-{name}"))
            .namesrv_addr(&fake.addr)
            .instance_name(format!("tx-test-{name}"))
            .build()
            .unwrap();
        let tx = TransactionMQProducer::new(producer, listener);
        tx.start().await.unwrap();
        tx
    }

    /// The stored half message as a CHECK_TRANSACTION_STATE body decodes (Java
    /// `MessageDecoder.decode`), with `UNIQ_KEY` as given.
    fn half_message(group: &str, uniq_key: Option<&str>) -> MessageExt {
        let store_host: SocketAddr = STORE_HOST.parse().unwrap();
        let mut m = MessageExt {
            commit_log_offset: HALF_OFFSET,
            store_host,
            born_host: store_host,
            ..MessageExt::default()
        };
        m.message.topic = "T".into();
        m.message.body = bytes::Bytes::from_static(b"half");
        m.message.put_property(property::PRODUCER_GROUP, group);
        m.message
            .put_property(property::TRANSACTION_PREPARED, "true");
        if let Some(k) = uniq_key {
            m.message
                .put_property(property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX, k);
        }
        let options = StoredDecodeOptions {
            decompress: true,
            ..StoredDecodeOptions::default()
        };
        decode_stored(&encode_stored(&m), options).unwrap().0
    }

    /// Asks `tx` about the half message as the broker at `fake` would, and returns the
    /// END_TRANSACTION that answers it.
    async fn check_back(
        tx: &TransactionMQProducer<Panicky>,
        fake: &Fake,
        ends: &Mutex<Vec<RemotingCommand>>,
        msg: MessageExt,
    ) -> RemotingCommand {
        let n = lock(ends).len();
        let header = CheckTransactionStateRequestHeader {
            tran_state_table_offset: 3,
            commit_log_offset: HALF_OFFSET,
            msg_id: msg.uniq_key().map(str::to_string),
            transaction_id: msg.uniq_key().map(str::to_string),
            offset_msg_id: Some(msg.offset_msg_id.clone()),
            broker_name: Some("b".into()),
        };
        let inst = tx.producer().instance().unwrap();
        tx.producer()
            .core()
            .check_transaction(&inst, fake.addr.clone(), msg, header);
        fake.wait_for(RequestCode::EndTransaction, n + 1).await;
        lock(ends)[n].clone()
    }

    /// Java `checkTransactionState`: the END_TRANSACTION msgId is the message's `UNIQ_KEY`,
    /// else its (offset) message id; the listener's transaction id is a non-empty `UNIQ_KEY`.
    #[tokio::test]
    async fn a_check_back_without_uniq_key_answers_with_the_offset_message_id() {
        let (fake, ends) = fake_broker().await;
        let listener = Panicky {
            panic_execute: false,
            panic_check: false,
            checked: Mutex::new(Vec::new()),
        };
        let tx = started(&fake, "no-uniq", listener).await;
        let group = tx.producer().core().settings.group.clone();

        let msg = half_message(&group, None);
        let offset_id = msg.offset_msg_id.clone();
        assert!(!offset_id.is_empty());
        let end = check_back(&tx, &fake, &ends, msg).await;
        let h: EndTransactionRequestHeader = end.decode_header().unwrap();
        assert_eq!(
            h.msg_id, offset_id,
            "the offset message id stands in for UNIQ_KEY"
        );
        assert!(h.from_transaction_check);
        assert_eq!(h.commit_or_rollback, sys_flag::TRANSACTION_ROLLBACK_TYPE);
        assert_eq!(
            h.broker_name.as_deref(),
            Some("b"),
            "bname as the broker sent it"
        );
        assert_eq!(lock(&tx.listener.checked)[0].transaction_id, None);

        let end = check_back(&tx, &fake, &ends, half_message(&group, Some("UNIQ-1"))).await;
        let h: EndTransactionRequestHeader = end.decode_header().unwrap();
        assert_eq!(h.msg_id, "UNIQ-1");
        assert_eq!(
            lock(&tx.listener.checked)[1].transaction_id.as_deref(),
            Some("UNIQ-1")
        );

        // An empty UNIQ_KEY does not survive the decoding (nor does it in Java's
        // `string2messageProperties`): the offset message id again, and no transaction id.
        let msg = half_message(&group, Some(""));
        let offset_id = msg.offset_msg_id.clone();
        let end = check_back(&tx, &fake, &ends, msg).await;
        let h: EndTransactionRequestHeader = end.decode_header().unwrap();
        assert_eq!(h.msg_id, offset_id);
        assert_eq!(lock(&tx.listener.checked)[2].transaction_id, None);
        tx.shutdown().await;
    }

    /// Java `sendMessageInTransaction`: a local transaction that throws ends the transaction
    /// UNKNOW with the remark `executeLocalTransactionBranch exception: ...`.
    #[tokio::test]
    async fn a_panicking_local_transaction_ends_unknown_with_a_remark() {
        let (fake, ends) = fake_broker().await;
        let listener = Panicky {
            panic_execute: true,
            panic_check: false,
            checked: Mutex::new(Vec::new()),
        };
        let tx = started(&fake, "panic-exec", listener).await;
        let r = tx
            .send_message_in_transaction(Message::new("T", "x"), &())
            .await
            .unwrap();
        assert_eq!(r.local_transaction_state, LocalTransactionState::Unknown);
        fake.wait_for(RequestCode::EndTransaction, 1).await;
        let end = lock(&ends)[0].clone();
        let h: EndTransactionRequestHeader = end.decode_header().unwrap();
        assert_eq!(h.commit_or_rollback, sys_flag::TRANSACTION_NOT_TYPE);
        assert!(!h.from_transaction_check);
        assert_eq!(h.commit_log_offset, HALF_OFFSET);
        assert_eq!(
            end.remark.as_deref(),
            Some("executeLocalTransactionBranch exception: boom in execute")
        );
        assert_eq!(h.broker_name.as_deref(), Some("b"));
        tx.shutdown().await;
    }

    /// Java `checkTransactionState`: a check that throws answers UNKNOW with the remark
    /// `checkLocalTransactionState Exception: ...`.
    #[tokio::test]
    async fn a_panicking_check_answers_unknown_with_a_remark() {
        let (fake, ends) = fake_broker().await;
        let listener = Panicky {
            panic_execute: false,
            panic_check: true,
            checked: Mutex::new(Vec::new()),
        };
        let tx = started(&fake, "panic-check", listener).await;
        let group = tx.producer().core().settings.group.clone();
        let end = check_back(&tx, &fake, &ends, half_message(&group, Some("UNIQ-2"))).await;
        let h: EndTransactionRequestHeader = end.decode_header().unwrap();
        assert_eq!(h.commit_or_rollback, sys_flag::TRANSACTION_NOT_TYPE);
        assert_eq!(
            end.remark.as_deref(),
            Some("checkLocalTransactionState Exception: boom in check")
        );
        tx.shutdown().await;
    }

    #[test]
    fn checks_held_at_once_are_bounded() {
        let held = Arc::new(AtomicUsize::new(0));
        let mut taken: Vec<HeldCheck> = (0..CHECK_REQUEST_HOLD_MAX)
            .map(|_| HeldCheck::take(&held).expect("under the bound"))
            .collect();
        assert!(HeldCheck::take(&held).is_none(), "one past the bound");
        assert_eq!(held.load(Ordering::Acquire), CHECK_REQUEST_HOLD_MAX);
        // A finished check makes room for one more.
        taken.pop();
        assert!(HeldCheck::take(&held).is_some());
        drop(taken);
        assert_eq!(held.load(Ordering::Acquire), 0);
    }
}
