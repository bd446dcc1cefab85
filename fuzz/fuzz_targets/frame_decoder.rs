//! The streaming frame decoder over arbitrary bytes: never panics, never loops, and whatever it
//! decodes re-encodes to a frame that decodes to the same command.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use rocketmq_remoting::protocol::frame;

fuzz_target!(|data: &[u8]| {
    let mut buf = BytesMut::from(data);
    while let Ok(Some(cmd)) = frame::decode(&mut buf, 1 << 20) {
        if let Ok(bytes) = frame::encode_to_vec(&cmd) {
            let again = frame::decode_one(&bytes, usize::MAX).expect("re-encoded frame decodes");
            assert_eq!(again.code, cmd.code);
            assert_eq!(again.opaque, cmd.opaque);
            assert_eq!(again.body, cmd.body);
        }
    }
});
