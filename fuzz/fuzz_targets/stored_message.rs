//! The stored-message decoder (pull bodies, commit-log records) and the batch-body decoder over
//! arbitrary bytes.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use rocketmq_remoting::protocol::message::{
    decode_batch, decode_stored, decode_stored_all, encode_stored, StoredDecodeOptions,
};

fuzz_target!(|data: &[u8]| {
    let opts = StoredDecodeOptions {
        check_crc: true,
        decompress: true,
        max_decompressed_len: 1 << 20,
        ..StoredDecodeOptions::default()
    };
    if let Ok((m, n)) = decode_stored(data, opts) {
        assert!(n <= data.len());
        let plain = StoredDecodeOptions::default();
        if m.sys_flag & 1 == 0 {
            let re = encode_stored(&m);
            let (again, _) = decode_stored(&re, plain).expect("re-encoded record decodes");
            assert_eq!(again.message, m.message);
        }
    }
    let _ = decode_stored_all(&Bytes::copy_from_slice(data), opts);
    let _ = decode_batch(data);
});
