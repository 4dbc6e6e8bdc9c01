//! Integration tests: one binary, one module per area.

mod core;
mod git;
mod repo;
mod util;
