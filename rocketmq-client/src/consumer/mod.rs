//! Consumers: [`DefaultMQPushConsumer`] (listener-driven), [`DefaultLitePullConsumer`]
//! (poll-driven) and [`DefaultMQPullConsumer`] (Java's pull consumer: the application pulls
//! queues from offsets), the listener traits and the queue allocation strategies.

mod lite_pull;
mod pull;
mod push;
mod selector;
mod stream;

pub use self::lite_pull::{DefaultLitePullConsumer, LitePullConsumerBuilder};
pub use self::pull::{DefaultMQPullConsumer, PullConsumerBuilder};
pub use self::push::{DefaultMQPushConsumer, PushConsumerBuilder};
pub use self::selector::MessageSelector;
pub use self::stream::{Delivery, LitePullStream, PushStream};
pub use crate::internal::allocate::{
    AllocateMachineRoomNearby, AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle, AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom, AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy, MachineRoomResolver,
};
pub use crate::internal::hooks::{ConsumeMessageContext, ConsumeMessageHook, ConsumeOutcome};
pub use crate::internal::listener::{
    concurrently_fn, orderly_fn, ConcurrentlyFn, ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus, ConsumeOrderlyContext, ConsumeOrderlyStatus,
    MessageListenerConcurrently, MessageListenerOrderly, OrderlyFn,
};
pub use crate::internal::lite_pull_config::{LitePullConsumerConfig, MIN_AUTO_COMMIT_INTERVAL};
pub use crate::internal::pull_config::PullConsumerConfig;
pub use crate::internal::pull_consumer::MessageQueueListener;
pub use crate::internal::push_config::PushConsumerConfig;
pub use crate::internal::stats::{ConsumeStatus, ConsumeTotals, StatsSnapshot};
pub use rocketmq_remoting::protocol::body::{ConsumeFromWhere, MessageModel};
