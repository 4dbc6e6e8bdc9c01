//! Integration tests: one binary, one module per area.

// Tests print figures on stdout (captured by the harness); tests that need the real model or
// ../shared are ignored with the reason when it is absent (cfgs set by build.rs).
#![allow(clippy::print_stdout)]

mod bare_cli;
mod cache;
mod cache_graph;
mod cache_vectors;
mod cli_errors;
mod core;
mod demo;
mod docs;
mod embed;
mod enrich;
mod format;
mod fuzz_parse;
mod git;
mod hostile;
mod latency;
mod layers;
mod query;
mod ranking;
mod repo;
mod serve;
mod snapshots;
mod sync;
mod util;
mod wiring;
