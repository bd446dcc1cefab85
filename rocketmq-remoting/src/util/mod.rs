//! Small helpers shared by the crates of the workspace.

pub mod hash;
pub mod namesrv_lookup;
pub mod net;
pub mod spare;
pub mod thread_copies;
pub mod thread_sums;
pub mod time;
