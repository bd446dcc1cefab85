//! The SQL92 filter compiler and evaluator over arbitrary text and properties.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketmq_broker_lite::filter::SqlFilter;

fuzz_target!(|data: &[u8]| {
    // The first line is the expression; the rest are `name=value` properties.
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let expr = lines.next().unwrap_or_default();
    let props: Vec<(&str, &str)> = lines.filter_map(|l| l.split_once('=')).collect();
    if let Ok(f) = SqlFilter::compile(expr) {
        let r = f.evaluate(props.as_slice());
        assert_eq!(f.matches(props.as_slice()), matches!(r, Ok(Some(true))));
        let _ = f.to_string();
    }
});
