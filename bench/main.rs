//! Benchmarks: `cargo bench --bench bench -- <name> [args]`; each prints its figures.

mod cacheupd;
mod embed;
mod hook;
mod index;
mod latency;
mod memory;
mod query;
mod serve;
mod service;
mod storage;
mod synth;
mod util;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    match args.first().map(String::as_str) {
        Some("cache-update") => cacheupd::run(&args[1..]),
        Some("embed") => embed::run(&args[1..]),
        Some("hook") => hook::run(&args[1..]),
        Some("index") => index::run(&args[1..]),
        Some("latency") => latency::run(&args[1..]),
        Some("memory") => memory::run(&args[1..]),
        Some("query") => query::run(&args[1..]),
        Some("serve") => serve::run(&args[1..]),
        Some("service") => service::run(&args[1..]),
        Some("storage") => storage::run(&args[1..]),
        Some("synth") => synth::run(&args[1..]),
        other => kdd::cli::output::error(&format!(
            "unknown benchmark {other:?}; try: cache-update, embed, hook, index, latency, memory, query, serve, service, storage, synth"
        )),
    }
}
