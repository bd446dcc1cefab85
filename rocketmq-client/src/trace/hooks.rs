//! The hooks that turn sends, listener calls and transaction ends into trace contexts (Java
//! `SendMessageTraceHookImpl`, `ConsumeMessageTraceHookImpl`, `EndTransactionTraceHookImpl`).
//! They only build a context and queue it: nothing waits, nothing fails the traced operation.

use std::cell::Cell;
use std::time::Duration;

use rocketmq_remoting::protocol::message::{property, MessageExt};

use super::dispatcher::TraceAppender;
use super::{
    ConsumeReturnType, MessageType, TraceBean, TraceContext, TraceType, DEFAULT_TRACE_REGION_ID,
};
use crate::error::ClientError;
use crate::internal::hooks::{
    ConsumeMessageContext, ConsumeMessageHook, ConsumeOutcome, EndTransactionContext,
    EndTransactionHook, SendMessageContext, SendMessageHook,
};
use crate::internal::producer_config::{SendResult, SendStatus};
use crate::internal::send::now_ms;

/// Java's timer-message property: such a message is traced as a delayed one.
const START_DELIVER_TIME: &str = "__STARTDELIVERTIME";

fn millis(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}

/// Traces each send the broker answered (`Pub`).
pub(crate) struct SendMessageTraceHook(pub(crate) TraceAppender);

impl SendMessageHook for SendMessageTraceHook {
    fn hook_name(&self) -> &str {
        "SendMessageTraceHook"
    }

    fn send_message_after(
        &self,
        ctx: &SendMessageContext<'_>,
        result: Result<Option<&SendResult>, &ClientError>,
        latency: Duration,
    ) {
        // Java traces answered sends only (not oneway ones, not failures), and not those to the
        // trace topic, nor when the broker turned tracing off.
        let Ok(Some(r)) = result else {
            return;
        };
        if ctx.topic.starts_with(self.0.trace_topic()) || !r.trace_on {
            return;
        }
        let msg = ctx.message;
        let mut msg_type = MessageType::NormalMsg;
        if let Some(m) = msg {
            if m.property(property::TRANSACTION_PREPARED) == Some("true") {
                msg_type = MessageType::TransMsgHalf;
            }
            if m.property(START_DELIVER_TIME).is_some()
                || m.property(property::DELAY_TIME_LEVEL).is_some()
            {
                msg_type = MessageType::DelayMsg;
            }
        }
        let cost = millis(latency);
        let bean = TraceBean {
            topic: ctx.topic.to_string(),
            msg_id: r.msg_id.clone(),
            offset_msg_id: r.offset_msg_id.clone(),
            tags: msg.and_then(|m| m.tags()).map(str::to_string),
            keys: msg.and_then(|m| m.keys_str()).map(str::to_string),
            store_host: ctx.broker_addr.to_string(),
            body_length: ctx.body_length.min(i32::MAX as usize) as i32,
            msg_type,
            ..TraceBean::default()
        };
        let timestamp = now_ms() - i64::from(cost);
        self.0.append(TraceContext {
            timestamp,
            region_id: Some(r.region_id.to_string()),
            group_name: ctx.producer_group.to_string(),
            cost_time: cost,
            success: r.status == SendStatus::SendOk,
            beans: vec![TraceBean {
                store_time: timestamp + i64::from(cost / 2),
                ..bean
            }],
            ..TraceContext::new(TraceType::Pub)
        });
    }
}

thread_local! {
    /// The Java return type of the listener call whose `consume_message_after` hooks run on
    /// this thread now (set by the push consumer, see [`with_return_type`]).
    static RETURN_TYPE: Cell<Option<ConsumeReturnType>> = const { Cell::new(None) };
}

/// Java's `ConsumeReturnType` of a listener call (`ConsumeMessageConcurrentlyService` and
/// `ConsumeMessageOrderlyService`): `Exception` when the listener panicked (Java: threw),
/// else `TimeOut` when the call lasted `consume_timeout` or longer (or was given up on), else
/// `Success` or `Failed` as its status says.
pub(crate) fn return_type(
    outcome: ConsumeOutcome,
    panicked: bool,
    timed_out: bool,
) -> ConsumeReturnType {
    if panicked {
        ConsumeReturnType::Exception
    } else if timed_out || outcome == ConsumeOutcome::TimedOut {
        ConsumeReturnType::TimeOut
    } else if outcome.is_success() {
        ConsumeReturnType::Success
    } else {
        ConsumeReturnType::Failed
    }
}

/// Runs `f`, a listener call's `consume_message_after` hooks, with the call's return type
/// known to the trace hook (Java passes it in the context's `ConsumeContextType` property;
/// without it, the trace hook derives it from the outcome alone).
pub(crate) fn with_return_type<R>(rt: ConsumeReturnType, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<ConsumeReturnType>);
    impl Drop for Restore {
        fn drop(&mut self) {
            RETURN_TYPE.set(self.0);
        }
    }
    let _restore = Restore(RETURN_TYPE.replace(Some(rt)));
    f()
}

/// Traces each listener call (`SubBefore`, then `SubAfter`).
pub(crate) struct ConsumeMessageTraceHook(pub(crate) TraceAppender);

/// The traced messages of a call (those the broker did not mark `TRACE_ON=false`) and the
/// region of the last of them, as Java's hook reads them.
fn beans(messages: &[MessageExt]) -> (Vec<TraceBean>, Option<String>) {
    let mut region = None;
    let beans = messages
        .iter()
        .filter(|m| m.property(property::TRACE_SWITCH) != Some("false"))
        .map(|m| {
            region = m.property(property::MSG_REGION).map(str::to_string);
            TraceBean {
                topic: m.topic.clone(),
                msg_id: m.uniq_key().unwrap_or(&m.msg_id).to_string(),
                tags: m.tags().map(str::to_string),
                keys: m.keys_str().map(str::to_string),
                store_time: m.store_timestamp,
                body_length: m.store_size,
                retry_times: m.reconsume_times,
                ..TraceBean::default()
            }
        })
        .collect();
    (beans, region)
}

impl ConsumeMessageHook for ConsumeMessageTraceHook {
    fn hook_name(&self) -> &str {
        "ConsumeMessageTraceHook"
    }

    fn consume_message_before(&self, ctx: &ConsumeMessageContext<'_>) {
        let (beans, region_id) = beans(ctx.messages);
        if beans.is_empty() {
            return;
        }
        self.0.append(TraceContext {
            timestamp: now_ms(),
            region_id,
            group_name: ctx.consumer_group.to_string(),
            request_id: ctx.call_id.to_string(),
            beans,
            ..TraceContext::new(TraceType::SubBefore)
        });
    }

    fn consume_message_after(
        &self,
        ctx: &ConsumeMessageContext<'_>,
        outcome: ConsumeOutcome,
        elapsed: Duration,
    ) {
        let (beans, region_id) = beans(ctx.messages);
        if beans.is_empty() {
            return;
        }
        let code = RETURN_TYPE
            .get()
            .unwrap_or_else(|| return_type(outcome, false, false));
        let per_message = millis(elapsed) / ctx.messages.len().max(1) as i32;
        self.0.append(TraceContext {
            timestamp: now_ms(),
            region_id,
            group_name: ctx.consumer_group.to_string(),
            cost_time: per_message,
            success: outcome.is_success(),
            request_id: ctx.call_id.to_string(),
            context_code: code.ordinal(),
            beans,
            ..TraceContext::new(TraceType::SubAfter)
        });
    }
}

/// Traces each transaction end (`EndTransaction`).
pub(crate) struct EndTransactionTraceHook(pub(crate) TraceAppender);

impl EndTransactionHook for EndTransactionTraceHook {
    fn hook_name(&self) -> &str {
        "EndTransactionTraceHook"
    }

    fn end_transaction(&self, ctx: &EndTransactionContext<'_>) {
        let msg = ctx.message;
        if msg.topic.starts_with(self.0.trace_topic()) {
            return;
        }
        let region = msg
            .property(property::MSG_REGION)
            .filter(|r| !r.is_empty())
            .unwrap_or(DEFAULT_TRACE_REGION_ID);
        self.0.append(TraceContext {
            timestamp: now_ms(),
            region_id: Some(region.to_string()),
            group_name: ctx.producer_group.to_string(),
            beans: vec![TraceBean {
                topic: msg.topic.clone(),
                msg_id: ctx.msg_id.to_string(),
                tags: msg.tags().map(str::to_string),
                keys: msg.keys_str().map(str::to_string),
                store_host: ctx.broker_addr.to_string(),
                msg_type: MessageType::TransMsgCommit,
                transaction_id: ctx.transaction_id.map(str::to_string),
                transaction_state: Some(ctx.state),
                from_transaction_check: ctx.from_transaction_check,
                ..TraceBean::default()
            }],
            ..TraceContext::new(TraceType::EndTransaction)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_types_follow_java() {
        use ConsumeOutcome::*;
        use ConsumeReturnType as R;
        // A panic wins over everything (Java: a null status after a throw).
        for o in [
            ConsumeSuccess,
            ReconsumeLater,
            Success,
            SuspendCurrentQueueAMoment,
        ] {
            assert_eq!(return_type(o, true, true), R::Exception);
            assert_eq!(return_type(o, true, false), R::Exception);
            // Then the time: at least consume_timeout.
            assert_eq!(return_type(o, false, true), R::TimeOut);
        }
        assert_eq!(return_type(TimedOut, false, false), R::TimeOut);
        assert_eq!(return_type(ConsumeSuccess, false, false), R::Success);
        assert_eq!(return_type(Success, false, false), R::Success);
        assert_eq!(return_type(ReconsumeLater, false, false), R::Failed);
        assert_eq!(
            return_type(SuspendCurrentQueueAMoment, false, false),
            R::Failed
        );
    }

    #[test]
    fn the_return_type_is_told_to_the_hooks_of_one_call_only() {
        assert_eq!(RETURN_TYPE.get(), None);
        let seen = with_return_type(ConsumeReturnType::Exception, || {
            let inner = with_return_type(ConsumeReturnType::TimeOut, || RETURN_TYPE.get());
            (inner, RETURN_TYPE.get())
        });
        assert_eq!(
            seen,
            (
                Some(ConsumeReturnType::TimeOut),
                Some(ConsumeReturnType::Exception)
            )
        );
        assert_eq!(RETURN_TYPE.get(), None);
        // Reset even when a hook panics.
        let _ = std::panic::catch_unwind(|| {
            with_return_type(ConsumeReturnType::Exception, || panic!("a hook fails"))
        });
        assert_eq!(RETURN_TYPE.get(), None);
    }
}
