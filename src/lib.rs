//! The suite around the crates: the benchmark (`rocketmq-bench`), examples in `examples/` and
//! end-to-end tests in `tests/`.

pub mod bench;
pub mod dashboard;
pub mod mqadmin;
#[cfg(test)]
mod test_zones;
