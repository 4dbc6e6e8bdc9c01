//! Integration tests: one binary, one module per area.

mod core;
mod git;
mod query;
mod repo;
mod util;
