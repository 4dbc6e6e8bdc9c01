//! Integration tests: one binary, one module per area.

mod git;
mod serve;
mod util;
