//! Benchmarks: `cargo bench --bench bench -- <name> [args]`. Each bench lives in its own file.

mod serve;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    match args.first().map(String::as_str) {
        Some("serve") => serve::main(&args[1..]),
        _ => kdd::cli::output::info(
            "usage: cargo bench --bench bench -- serve [SPECS] [REQUESTS] [SECONDS]",
        ),
    }
}
