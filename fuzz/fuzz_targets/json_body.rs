//! The fastjson-tolerant body reader over arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketmq_remoting::protocol::body::{self, HeartbeatData, RegisterBrokerBody, TopicRouteData};
use rocketmq_remoting::protocol::JsonStyle;

fuzz_target!(|data: &[u8]| {
    if let Ok(route) = body::decode::<TopicRouteData>(data) {
        for style in [JsonStyle::Fastjson, JsonStyle::Standard] {
            let bytes = body::encode(&route, style).unwrap();
            assert_eq!(body::decode::<TopicRouteData>(&bytes).unwrap(), route);
        }
    }
    let _ = body::decode::<HeartbeatData>(data);
    let _ = body::decode::<RegisterBrokerBody>(data);
    let _ = body::decode_compressed_register_body(data, 1 << 20);
});
