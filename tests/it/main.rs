//! Integration tests: one binary, one module per area.

// Tests print SKIP lines and figures on stdout (captured by the harness).
#![allow(clippy::print_stdout)]

mod core;
mod demo;
mod embed;
mod git;
mod hostile;
mod query;
mod ranking;
mod repo;
mod serve;
mod util;
