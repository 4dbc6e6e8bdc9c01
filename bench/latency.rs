//! Where a cold `kdd query` spends its time, per phase.
//!
//! `cargo bench --bench bench -- latency [SPECS_DIR] [ROUNDS]` copies `SPECS_DIR` (default the
//! Spanish `fixtures/demo/specs`) into a temporary repository, runs `kdd index` (the `kdd` next
//! to this bench, or `$KDD_BIN`; the real model when installed), warms the cache and the
//! embedding service with one query, then runs every question of [`QUERIES`] (half of them in
//! the other language, so they are translated) `ROUNDS` times (default 3), each in a fresh
//! process with `KDD_TRACE=1`, and prints p50 / p95 of the wall time and of every traced phase
//! (`process` is the wall time outside the command: start, dynamic linking, exit), twice: with
//! the cold translator process (`KDD_TRANSLATE_WARM=0`, as before the warm pipeline) and with
//! the warm one. A binary without traces (an older `kdd` as `$KDD_BIN`) reports wall times only.

use super::util::{git, kdd_bin};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Questions over the demo shop (orders, returns, payments), English and Spanish.
const QUERIES: &[&str] = &[
    "can a customer cancel an order after it was shipped?",
    "who approves a refund for a returned parcel",
    "what happens to the stock when the order is confirmed",
    "how is the final price of an order computed",
    "which events are emitted when a return is requested",
    "when does the customer get the money back",
    "¿cuándo se puede cancelar un pedido?",
    "reembolso de una devolución aprobada",
    "estados del pedido y sus transiciones",
    "precio final con descuentos",
    "quién aprueba la devolución",
    "notificar al cliente cuando se envía el paquete",
];

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).expect("mkdir");
    for e in std::fs::read_dir(src).expect("read specs dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &dst.join(e.file_name()));
        } else {
            std::fs::copy(&p, dst.join(e.file_name())).expect("copy");
        }
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

/// Phase → durations (ms) over the runs; `wall` and `process` included.
type Phases = BTreeMap<String, Vec<f64>>;

fn run_all(bin: &Path, dir: &Path, rounds: usize, warm: &str) -> Phases {
    let mut phases = Phases::new();
    for _ in 0..rounds {
        for q in QUERIES {
            let t = Instant::now();
            let o = Command::new(bin)
                .args(["query", q, "--json", "--limit", "10"])
                .current_dir(dir)
                .env("KDD_TRACE", "1")
                .env("KDD_TRANSLATE", "on")
                .env("KDD_TRANSLATE_WARM", warm)
                .output()
                .expect("kdd query runs");
            let wall = t.elapsed().as_secs_f64() * 1000.0;
            let mut command = None;
            for line in String::from_utf8_lossy(&o.stderr).lines() {
                let Some(rest) = line.strip_prefix("kdd-trace: ") else {
                    continue;
                };
                let mut it = rest.split_whitespace();
                let (Some(name), Some(ms)) = (it.next(), it.next()) else {
                    continue;
                };
                let Ok(ms) = ms.parse::<f64>() else { continue };
                if name == "command" {
                    command = Some(ms);
                }
                phases.entry(name.to_string()).or_default().push(ms);
            }
            phases.entry("wall".into()).or_default().push(wall);
            if let Some(c) = command {
                phases.entry("process".into()).or_default().push(wall - c);
            }
        }
    }
    phases
}

fn print(label: &str, mut phases: Phases) {
    let say = kdd::cli::output::info;
    say(label);
    say(&format!(
        "  {:<16} {:>5} {:>9} {:>9}",
        "phase", "n", "p50 ms", "p95 ms"
    ));
    for (name, v) in phases.iter_mut() {
        say(&format!(
            "  {:<16} {:>5} {:>9.1} {:>9.1}",
            name,
            v.len(),
            pct(v, 0.5),
            pct(v, 0.95)
        ));
    }
}

pub fn run(args: &[String]) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let specs = args
        .first()
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("fixtures/demo/specs"));
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let bin = kdd_bin();
    if !bin.is_file() {
        kdd::cli::output::error(&format!(
            "{} not found: build it first (cargo build --release) or set KDD_BIN",
            bin.display()
        ));
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    git(dir, &["init", "-q"]);
    copy_dir(&specs, &dir.join("specs"));
    let took = super::util::index_and_commit(&bin, dir);
    kdd::cli::output::info(&format!(
        "corpus {}: kdd index {:.0} ms; {} questions x {rounds} rounds, one process each",
        specs.display(),
        took.as_secs_f64() * 1000.0,
        QUERIES.len()
    ));
    // Warm the cache and the embedding service (and its translator) once.
    for q in [QUERIES[0], QUERIES[6]] {
        let _ = Command::new(&bin)
            .args(["query", q, "--json"])
            .current_dir(dir)
            .env("KDD_TRANSLATE", "on")
            .output();
    }
    print(
        "cold translator process (KDD_TRANSLATE_WARM=0)",
        run_all(&bin, dir, rounds, "0"),
    );
    print(
        "warm translator (the embedding service's pipeline)",
        run_all(&bin, dir, rounds, "1"),
    );
}
