//! Integration tests: one binary, one module per area.

mod core;
mod demo;
mod embed;
mod git;
mod query;
mod repo;
mod util;
