//! Small helpers shared by the crates of the workspace.

pub mod time;
