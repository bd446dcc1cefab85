//! Consumers: [`DefaultMQPushConsumer`] (listener-driven) and [`DefaultLitePullConsumer`]
//! (poll-driven), the listener traits and the queue allocation strategies.

mod allocate;
mod listener;
mod lite_pull;
mod push;
mod stream;

pub use self::allocate::{
    AllocateMessageQueueAveragely, AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig, AllocateMessageQueueConsistentHash, AllocateMessageQueueStrategy,
};
pub use self::listener::{
    concurrently_fn, orderly_fn, ConcurrentlyFn, ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus, ConsumeOrderlyContext, ConsumeOrderlyStatus,
    MessageListenerConcurrently, MessageListenerOrderly, OrderlyFn,
};
pub use self::lite_pull::{
    DefaultLitePullConsumer, LitePullConsumerBuilder, LitePullConsumerConfig,
};
pub use self::push::{DefaultMQPushConsumer, PushConsumerBuilder, PushConsumerConfig};
pub use self::stream::{Delivery, LitePullStream, PushStream};
pub use rocketmq_remoting::protocol::body::{ConsumeFromWhere, MessageModel};
