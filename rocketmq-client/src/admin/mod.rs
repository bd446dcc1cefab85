//! Administration.
