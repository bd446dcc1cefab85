//! A small, fast RocketMQ 4.x broker and name server, wire-compatible with the official clients.
//!
//! [`store`] is the storage engine (no networking).

#![forbid(unsafe_code)]

pub mod store;
