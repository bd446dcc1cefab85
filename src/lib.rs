//! Examples and end-to-end tests of RocketMQ in Rust live in `examples/` and `tests/`.
