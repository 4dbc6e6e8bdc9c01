//! Benchmark dispatcher: `cargo bench --bench bench -- <name> [args…]`.
//!
//! Each benchmark lives in its own `bench/<name>.rs` with a `pub fn main(args: &[String]) ->
//! Result<(), String>`; add one `mod` line and one match arm per entry.

mod synth;

fn main() {
    // `cargo bench` appends `--bench` to the arguments of harness-less benches; drop it.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let (name, rest) = match args.split_first() {
        Some((n, r)) => (n.as_str(), r),
        None => ("", &[][..]),
    };
    let result = match name {
        "synth" => synth::main(rest),
        _ => Err("usage: cargo bench --bench bench -- <synth> [args…]\n  \
                  synth <dir> <n> [--seed S] [--domains D]   write a synthetic KDD corpus to <dir>/specs"
            .to_string()),
    };
    if let Err(e) = result {
        kdd::cli::output::error(&e);
        std::process::exit(2);
    }
}
