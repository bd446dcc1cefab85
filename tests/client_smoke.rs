mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use rocketmq_client::consumer::{concurrently_fn, ConsumeConcurrentlyStatus, ConsumeFromWhere};
use rocketmq_client::Message;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_and_consume() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let p = producer(&ns, "smoke-p").await;
    for i in 0..10 {
        let r = p
            .send(Message::new("Smoke", format!("m{i}")).with_tags("A"))
            .await
            .unwrap();
        assert_eq!(r.status, rocketmq_client::producer::SendStatus::SendOk);
    }
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let consumer = push_builder(&ns, "smoke-c")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe("Smoke", "*")
        .build()
        .unwrap();
    consumer
        .register_message_listener_concurrently(concurrently_fn(move |msgs, _| {
            let g = g.clone();
            async move {
                for m in msgs {
                    g.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&m.body).to_string());
                }
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }
        }))
        .unwrap();
    consumer.start().await.unwrap();
    wait_until(Duration::from_secs(20), "10 messages", || {
        let n = got.lock().unwrap().len();
        async move { n >= 10 }
    })
    .await;
    consumer.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}
