//! `cargo bench --bench bench -- storage [N…]`: the size of `.kdd-index/` against the spec
//! bytes (REQ-002: ≤ 10% at L1, issue 15: ≤ 25% at L2), per artifact kind.
//!
//! - The real corpus (`../shared/corpus/kdd-engine/specs` beside the crate, `../../shared` for a
//!   git worktree, or `KDD_BENCH_CORPUS`), indexed at L2 with the installed model; skipped, with the reason, when
//!   the corpus or the model is absent.
//! - Synthetic corpora from `bench/synth.rs` (default 1k and 10k specs), indexed at L2 with the
//!   hashed TEST embedder (only sizes matter here). Its vectors have 64 dimensions, so the L2
//!   line is also projected to the real model's 384: every record counted at its v2 size for 384
//!   dimensions (8-byte key + the record of the quantisation written for the shipped model,
//!   `write_quant(DEFAULT_MODEL, 384)`).
//!
//! L1 = manifest + nodes + edges; L2 = L1 + embeddings (file content bytes, no directory
//! entries).

use kdd::config::Settings;
use kdd::index::{self, Options};
use std::path::Path;

/// Bytes per top folder of an index (`nodes`, `edges`, `embeddings`, `manifest.json`…).
fn sizes(index_dir: &Path) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![index_dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
                continue;
            }
            let rel = p.strip_prefix(index_dir).unwrap_or(&p);
            let top = rel
                .components()
                .next()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .unwrap_or_default();
            *out.entry(top).or_default() += e.metadata().map(|m| m.len()).unwrap_or(0);
        }
    }
    out
}

/// Chunk records and files under `embeddings/` (to project the L2 size to other dimensions).
fn vector_counts(index_dir: &Path) -> (u64, u64) {
    let (mut records, mut files) = (0, 0);
    let mut stack = vec![index_dir.join("embeddings")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            } else if let Ok(f) = kdd::embed::decode("", &std::fs::read(&p).unwrap_or_default()) {
                records += f.records.len() as u64;
                files += 1;
            }
        }
    }
    (records, files)
}

fn say(s: &str) {
    let _ = kdd::cli::output::data(s);
}

fn report(name: &str, index_dir: &Path, spec_bytes: u64, project_dims: Option<usize>) {
    let s = sizes(index_dir);
    let get = |k: &str| s.get(k).copied().unwrap_or(0);
    let l1 = get("manifest.json") + get("nodes") + get("edges");
    let l2 = l1 + get("embeddings");
    let pct = |b: u64| 100.0 * b as f64 / spec_bytes.max(1) as f64;
    say(&format!(
        "{name}: specs {spec_bytes} B; nodes {} B, edges {} B, embeddings {} B, manifest {} B\n  \
         L1 {l1} B = {:.1}%   L2 {l2} B = {:.1}%",
        get("nodes"),
        get("edges"),
        get("embeddings"),
        get("manifest.json"),
        pct(l1),
        pct(l2),
    ));
    if let Some(dims) = project_dims {
        let (records, files) = vector_counts(index_dir);
        let quant = kdd::embed::store::write_quant(kdd::embed::model::DEFAULT_MODEL, dims);
        let emb = records * quant.record_len(dims) as u64 + files * 14;
        say(&format!(
            "  L2 projected to {dims} dims ({records} chunks in {files} files): embeddings {emb} B, \
             L2 {} B = {:.1}%",
            l1 + emb,
            pct(l1 + emb)
        ));
    }
}

fn git_init(root: &Path) {
    std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(root)
        .status()
        .unwrap();
}

fn real_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let corpus = std::env::var_os("KDD_BENCH_CORPUS")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            // `../shared` beside the crate, or one level further up for a git worktree.
            ["../shared", "../../shared"]
                .iter()
                .map(|s| root.join(s).join("corpus/kdd-engine/specs"))
                .find(|p| p.is_dir())
        })
        .unwrap_or_else(|| root.join("../shared/corpus/kdd-engine/specs"));
    if !corpus.is_dir() {
        say(&format!(
            "real corpus: skipped ({} is absent)",
            corpus.display()
        ));
        return;
    }
    let embedder = match kdd::embed::open() {
        Ok(e) => e,
        Err(e) => {
            say(&format!("real corpus: skipped (no embedding model: {e})"));
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    git_init(dir.path());
    let specs = dir.path().join("specs");
    let mut spec_bytes = 0;
    let mut stack = vec![(corpus.clone(), specs.clone())];
    while let Some((src, dst)) = stack.pop() {
        std::fs::create_dir_all(&dst).unwrap();
        for e in std::fs::read_dir(&src).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push((e.path(), dst.join(e.file_name())));
            } else {
                spec_bytes += std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
            }
        }
    }
    let settings = Settings::discover(dir.path(), None).unwrap();
    let l2 = kdd::index::l2::L2Extras::new(embedder);
    let opts = Options {
        extras: Some(&l2),
        progress: None,
    };
    index::full(&settings, &opts).unwrap();
    report(
        &format!(
            "real corpus ({}, L2 with {})",
            corpus.display(),
            l2.model_id()
        ),
        &settings.index_dir,
        spec_bytes,
        None,
    );
}

/// Run the benchmark: the real corpus, then synthetic corpora of the sizes in `args` (default
/// 1000 and 10000).
pub fn run(args: &[String]) {
    let sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() {
        vec![1000, 10_000]
    } else {
        sizes
    };
    say(&format!(
        "storage bench: artifact format v{}, vectors {} (shipped model)",
        kdd::artifact::FORMAT_VERSION,
        kdd::embed::quantization(kdd::embed::model::DEFAULT_MODEL, 384)
    ));
    real_corpus();
    for n in sizes {
        let dir = tempfile::tempdir().unwrap();
        git_init(dir.path());
        let stats = crate::synth::generate(dir.path(), n, 42).unwrap();
        let settings = Settings::discover(dir.path(), None).unwrap();
        let l2 = kdd::index::l2::L2Extras::new(Box::new(kdd::embed::HashedEmbedder::new()));
        let opts = Options {
            extras: Some(&l2),
            progress: None,
        };
        index::full(&settings, &opts).unwrap();
        report(
            &format!("synthetic n={n} (L2 with the hashed TEST embedder, 64 dims)"),
            &settings.index_dir,
            stats.bytes,
            Some(384),
        );
    }
}
