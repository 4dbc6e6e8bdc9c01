//! `cargo bench --bench bench -- index [N…]`: full L1 index of synthetic corpora (default 1k and
//! 10k specs). Prints, per size: full-index time (cold = empty index, warm = nothing changed),
//! graph load + resolution time, one-file incremental `apply` time, peak memory (VmHWM of this
//! process) and the storage ratio (`.kdd-index` bytes / spec bytes).
//!
//! The corpus comes from `bench/synth.rs` (deterministic, every kind, both heading languages,
//! realistic links, planted orphans and layer violations); the bench checks that the graph
//! finds exactly the planted orphans and violations.

use kdd::config::Settings;
use kdd::index::{self, SpecSource};
use std::path::Path;
use std::time::Instant;

fn dir_bytes(p: &Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                n += dir_bytes(&e.path());
            } else {
                n += e.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
    }
    n
}

fn vm_hwm_mb() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn say(s: &str) {
    let _ = kdd::cli::output::data(s);
}

/// Run the benchmark for the sizes in `args` (default 1000 and 10000).
pub fn run(args: &[String]) {
    let sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() {
        vec![1000, 10_000]
    } else {
        sizes
    };
    say(&format!(
        "index bench: {} threads (rayon), L1",
        rayon::current_num_threads()
    ));
    for n in sizes {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(root)
            .status()
            .unwrap();
        let t = Instant::now();
        let stats = crate::synth::generate(root, n, 42).unwrap();
        let spec_bytes = stats.bytes;
        let gen_s = t.elapsed().as_secs_f64();
        let settings = Settings::discover(root, None).unwrap();
        let t = Instant::now();
        let out = index::full(&settings, &index::Options::default()).unwrap();
        let cold = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let again = index::full(&settings, &index::Options::default()).unwrap();
        let warm = t.elapsed().as_secs_f64();
        assert!(again.written.is_empty(), "re-index rewrote files");
        let t = Instant::now();
        let (g, errs) = kdd::graph::Graph::load(&settings.index_dir).unwrap();
        let load = t.elapsed().as_secs_f64();
        assert!(errs.is_empty());
        // One-file incremental apply (what the pre-commit hook does).
        let victim = g
            .nodes
            .iter()
            .find(|n| n.kind == kdd::spec::Kind::UseCase)
            .unwrap()
            .source_file
            .clone();
        let mut bytes = std::fs::read(root.join(&victim)).unwrap();
        bytes.extend_from_slice(b"\nOne more line with [[Nada]].\n");
        let t = Instant::now();
        let inc = index::apply(
            &settings,
            vec![SpecSource {
                path: victim,
                bytes,
            }],
            vec![],
        )
        .unwrap();
        let apply_s = t.elapsed().as_secs_f64();
        let idx_bytes = dir_bytes(&settings.index_dir);
        let orphan_links = g
            .orphans
            .iter()
            .map(|o| (&o.from, &o.to, &o.domain))
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let violating_pairs = g
            .violations()
            .map(|e| (&e.from, &e.to))
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        say(&format!(
            "n={n}: generated {:.1} MB of specs in {gen_s:.2}s\n  full index (cold): {cold:.3}s  ({} nodes, {} failed, {} files written)\n  full index (warm, unchanged): {warm:.3}s  (0 files written)\n  graph load + resolve: {load:.3}s  ({} edges; orphan links {} (planted {}); violating node pairs {} (planted {}))\n  incremental apply (1 file): {apply_s:.3}s  ({} files written)\n  peak memory (VmHWM, process so far): {:.1} MB\n  storage: .kdd-index {} bytes / specs {} bytes = {:.1}%",
            spec_bytes as f64 / 1e6,
            out.indexed,
            out.failed,
            out.written.len(),
            g.edges.len(),
            orphan_links,
            stats.orphans,
            violating_pairs,
            stats.violations,
            inc.written.len(),
            vm_hwm_mb(),
            idx_bytes,
            spec_bytes,
            100.0 * idx_bytes as f64 / spec_bytes as f64
        ));
    }
}
