//! Benchmarks that print figures (no timed assertions): `cargo bench --bench bench -- <name> [args]`.
//!
//! - `index [N…]`: full/incremental L1 index of synthetic corpora (default 1k and 10k specs).

mod index;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let (name, rest) = match args.split_first() {
        Some((n, r)) => (n.as_str(), r),
        None => ("index", &[][..]),
    };
    match name {
        "index" => index::run(rest),
        other => {
            kdd::cli::output::error(&format!("unknown bench `{other}`; available: index"));
            std::process::exit(2);
        }
    }
}
