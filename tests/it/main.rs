//! Integration tests: one binary, one module per area.

mod core;
mod embed;
mod git;
mod query;
mod repo;
mod util;
