//! Integration tests: one binary, one module per area.

// Tests print figures on stdout (captured by the harness); tests that need the real model or
// ../shared are ignored with the reason when it is absent (cfgs set by build.rs).
#![allow(clippy::print_stdout)]

mod cache;
mod core;
mod demo;
mod embed;
mod enrich;
mod fuzz_parse;
mod git;
mod hostile;
mod query;
mod ranking;
mod repo;
mod serve;
mod util;
