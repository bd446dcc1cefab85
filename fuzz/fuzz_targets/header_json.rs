//! The JSON header decoder over arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketmq_remoting::protocol::{header_json, CommandHeader};
use rocketmq_remoting::protocol::headers::{PullMessageRequestHeader, SendMessageRequestHeader};

fuzz_target!(|data: &[u8]| {
    if let Ok(cmd) = header_json::decode(data) {
        let ext = cmd.ext_fields.clone().unwrap_or_default();
        let _ = SendMessageRequestHeader::read_v2(&ext);
        let _ = PullMessageRequestHeader::read_from(&ext);
        let mut out = Vec::new();
        header_json::encode(&cmd, &mut out);
        let again = header_json::decode(&out).expect("our own JSON header decodes");
        assert_eq!(again.ext_fields, cmd.ext_fields);
        assert_eq!(again.remark, cmd.remark);
    }
});
