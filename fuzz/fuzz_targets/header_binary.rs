//! The ROCKETMQ binary header decoder over arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketmq_remoting::protocol::header_binary;

fuzz_target!(|data: &[u8]| {
    if let Ok(cmd) = header_binary::decode(data) {
        let mut out = Vec::new();
        header_binary::encode(&cmd, &mut out);
        let again = header_binary::decode(&out).expect("our own binary header decodes");
        assert_eq!(again.opaque, cmd.opaque);
        assert_eq!(again.flag, cmd.flag);
    }
});
