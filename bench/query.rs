//! Query benchmark on the synthetic corpus (`bench/synth.rs`).
//!
//! `cargo bench --bench bench -- query [N]` (default 10 000 specs) builds a temporary repository
//! with N synthetic specs, runs `kdd index` (the `kdd` binary next to this bench, or `$KDD_BIN`),
//! then prints:
//! - cache build time from scratch (LMDB + tantivy (+ arroy at L2)), and after a one-spec change;
//! - the freshness check alone (fingerprint of `.kdd-index/`);
//! - cold `kdd query` process latency P50/P95 (fresh process per query, cache warm on disk),
//!   with query translation off and on;
//! - in-process `query::hybrid` latency P50/P95 (translation off; on, first time and memoised;
//!   with the query embedder at L2: `KDD_TEST_EMBEDDER=1` for the whole run gives an L2 corpus
//!   with hashed vectors, so 10 000 specs index in minutes) and `context` (an id hint; a
//!   code-path hint) / `impact` P95.
//!
//! `KDD_BENCH_KEEP=DIR` keeps the repository in DIR and reuses it on the next run;
//! `KDD_BENCH_HOT=ROUNDS` prints the in-process figures only (ROUNDS rounds of the questions), for
//! profiling the query path.

use super::util::{git, index_and_commit, kdd_bin};
use kdd::cache::{fingerprint, Cache, OpenOptions};
use kdd::query::{self, ContextRequest, HybridRequest, ImpactRequest};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const QUERIES: &[&str] = &[
    "cancelar pedido después del envío",
    "payment refund to the original card",
    "estados del pedido y transiciones",
    "who can approve a return",
    "límite de crédito del cliente",
    "inventory reservation when the order is confirmed",
    "notificación al cliente por correo",
    "discount rules for loyal customers",
    "auditoría de operaciones de dinero",
    "shipping cost calculation by weight",
    // The question-analysis rules (query/ident.rs, query/intent.rs) at work: an identifier the
    // corpus contains, a kind asked for.
    "what does UC-001 check before it starts",
    "which event is emitted when an order is cancelled",
];

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn say(s: &str) {
    kdd::cli::output::info(s);
}

pub fn run(args: &[String]) {
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let bin = kdd_bin();
    if !bin.is_file() {
        kdd::cli::output::error(&format!(
            "{} not found: build it first (cargo build --release) or set KDD_BIN",
            bin.display()
        ));
        return;
    }
    // `KDD_BENCH_KEEP=DIR`: the repository is made in DIR and kept, and a later run with the
    // same DIR reuses it (indexing 10k specs with the real model takes minutes).
    let tmp = tempfile::tempdir().expect("tempdir");
    let keep = std::env::var_os("KDD_BENCH_KEEP").map(PathBuf::from);
    let dir = keep.as_deref().unwrap_or(tmp.path());
    if dir.join(".kdd-index/manifest.json").is_file() {
        say(&format!("corpus: reusing {}", dir.display()));
    } else {
        std::fs::create_dir_all(dir).expect("bench directory");
        git(dir, &["init", "-q"]);
        super::synth::generate(dir, n, 42).expect("synthetic corpus");
        let took = index_and_commit(&bin, dir);
        say(&format!("corpus: {n} specs; kdd index {}", ms(took)));
    }

    // `KDD_BENCH_HOT=ROUNDS`: only the in-process figures, over ROUNDS rounds of the questions
    // (to profile the query path: `perf record` sees little else).
    let hot_only = std::env::var("KDD_BENCH_HOT")
        .ok()
        .and_then(|v| v.parse::<usize>().ok());
    if hot_only.is_none() {
        cache_figures(dir, &bin);
        cold_figures(dir, &bin);
    }
    in_process(open(dir, false), hot_only.unwrap_or(15));
}

/// The bench's cache over `dir`'s index (`force`: rebuilt from scratch).
fn open(dir: &Path, force: bool) -> Cache {
    Cache::open_paths(
        &dir.join(".kdd-index"),
        dir,
        &dir.join(".git/kdd-cache-bench"),
        &OpenOptions {
            force_rebuild: force,
        },
    )
    .expect("cache opens")
}

/// Cache build from scratch, the freshness check, the update after a one-spec change.
fn cache_figures(dir: &Path, bin: &Path) {
    let index_dir = dir.join(".kdd-index");
    let open = |force: bool| open(dir, force);
    // Build from scratch.
    let t = Instant::now();
    let c = open(true);
    let full = t.elapsed();
    let st = c.last_update().cloned().unwrap_or_default();
    say(&format!(
        "cache build from scratch: {} ({} nodes, {} edges, level {:?})",
        ms(full),
        st.nodes,
        st.edges,
        c.level()
    ));
    drop(c);
    // Freshness check alone.
    let mut fp = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        let _ = fingerprint(&index_dir).expect("fingerprint");
        fp.push(t.elapsed());
    }
    say(&format!(
        "freshness check (fingerprint): p50 {} p95 {}",
        ms(pct(&mut fp, 0.5)),
        ms(pct(&mut fp, 0.95))
    ));
    // One-spec change → re-index → incremental cache update.
    let spec = find_spec(&dir.join("specs")).expect("a spec");
    let mut s = std::fs::read_to_string(&spec).unwrap_or_default();
    s.push_str("\n\nUna nota nueva sobre el redondeo.\n");
    std::fs::write(&spec, s).expect("edit spec");
    let o = Command::new(bin)
        .arg("index")
        .current_dir(dir)
        .output()
        .expect("kdd index runs");
    assert!(o.status.success());
    let t = Instant::now();
    let c = open(false);
    let inc = t.elapsed();
    let st = c.last_update().cloned().unwrap_or_default();
    say(&format!(
        "cache update after a one-spec change: {} (updated {}, added {}, removed {}, full {})",
        ms(inc),
        st.updated,
        st.added,
        st.removed,
        st.full
    ));
    drop(c);
}

/// Cold `kdd query` processes.
fn cold_figures(dir: &Path, bin: &Path) {
    // Cold processes: the CLI uses the default cache dir; warm it once first. Measured with
    // query translation off (the engine alone) and on (cross-lingual questions pay the
    // translator process, see src/query/translate.rs).
    let run_q = |q: &str, translate: &str| {
        Command::new(bin)
            .args(["query", q, "--json", "--limit", "10"])
            .current_dir(dir)
            .env("KDD_TRANSLATE", translate)
            .output()
            .expect("kdd query runs")
    };
    let o = run_q(QUERIES[0], "off");
    assert!(
        o.status.success() || o.status.code() == Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for translate in ["off", "on"] {
        let mut cold = Vec::new();
        let mut translated = 0;
        for _ in 0..3 {
            for q in QUERIES {
                let t = Instant::now();
                let o = run_q(q, translate);
                cold.push(t.elapsed());
                translated +=
                    usize::from(String::from_utf8_lossy(&o.stdout).contains("QUERY_TRANSLATED"));
            }
        }
        say(&format!(
            "cold `kdd query` process, translation {translate} (n={}, {translated} translated): p50 {} p95 {}",
            cold.len(),
            ms(pct(&mut cold, 0.5)),
            ms(pct(&mut cold, 0.95))
        ));
    }
}

/// In-process figures, `rounds` rounds of the questions for the hybrid query without translation.
fn in_process(mut c: Cache, rounds: usize) {
    // In-process: the engine alone, then with translation (first time, then memoised). An L2
    // cache gets the query embedder the CLI would use (the hashed one under
    // KDD_TEST_EMBEDDER=1), so the semantic search is part of the figure.
    // This process answers many questions, like a server: a warm translator pipeline and
    // resident vectors (`KDD_BENCH_RESIDENT=0`: arroy's trees, as the CLI searches).
    query::translate::keep_warm();
    if std::env::var("KDD_BENCH_RESIDENT").map_or(true, |v| v != "0") {
        c.keep_vectors_resident();
    }
    // The model is loaded in this process, as `kdd serve` and `kdd mcp` load it (the CLI's
    // embedder asks the per-user warm service instead: a socket round trip per question, about
    // 0.6 ms more at the median and a longer tail, measured at 10k specs).
    if c.level() >= kdd::artifact::IndexLevel::L2 {
        let model = c.manifest().embedding.as_ref().map(|e| e.model.clone());
        let loaded = model
            .ok_or_else(|| "the index has no embeddings".to_string())
            .and_then(|m| kdd::embed::shared::for_index_model(&m, true).map_err(|e| e.to_string()))
            .and_then(|e| e.preload().map(|()| e).map_err(|e| e.to_string()));
        match loaded {
            Ok(e) => c.set_embedder(std::sync::Arc::new(e)),
            Err(why) => say(&format!("in-process queries without embeddings: {why}")),
        }
    }
    std::env::set_var("KDD_TRANSLATE", "off");
    // One untimed round loads the model and touches the cache's pages, as a server's first
    // questions do; then enough rounds that the p95 is not the third-slowest of a few dozen
    // (it moved 10.5–16 ms between identical runs at n = 60 on a loaded 2-core machine).
    for q in QUERIES {
        let _ = query::hybrid(&c, &HybridRequest::new(*q));
    }
    let mut hot = Vec::new();
    for _ in 0..rounds {
        for q in QUERIES {
            let t = Instant::now();
            let _ = query::hybrid(&c, &HybridRequest::new(*q));
            hot.push(t.elapsed());
        }
    }
    say(&format!(
        "in-process hybrid query, translation off (n={}): p50 {} p95 {}",
        hot.len(),
        ms(pct(&mut hot, 0.5)),
        ms(pct(&mut hot, 0.95))
    ));
    std::env::remove_var("KDD_TRANSLATE");
    for pass in ["first time", "memoised"] {
        let mut hot = Vec::new();
        let mut translated = 0;
        for q in QUERIES {
            let t = Instant::now();
            let r = query::hybrid(&c, &HybridRequest::new(*q));
            hot.push(t.elapsed());
            translated += usize::from(
                r.is_ok_and(|r| r.warnings.iter().any(|w| w.code == "QUERY_TRANSLATED")),
            );
        }
        say(&format!(
            "in-process hybrid query, translation on, {pass} (n={}, {translated} translated): p50 {} p95 {}",
            hot.len(),
            ms(pct(&mut hot, 0.5)),
            ms(pct(&mut hot, 0.95))
        ));
    }
    let snap_ids: Vec<String> = c
        .snapshot()
        .and_then(|s| s.node_ids())
        .unwrap_or_default()
        .into_iter()
        .filter(|id| id.starts_with("Entity:"))
        .take(20)
        .collect();
    let mut ctx = Vec::new();
    let mut ctx_path = Vec::new();
    let mut imp = Vec::new();
    for id in &snap_ids {
        let t = Instant::now();
        let _ = query::context(
            &c,
            &ContextRequest {
                hints: vec![id.clone()],
                depth: 1,
                max_tokens: 4000,
            },
        );
        ctx.push(t.elapsed());
        // The file an agent is editing, as its hint: a code path named after the entity.
        let stem = id.rsplit(':').next().unwrap_or(id).to_lowercase();
        let t = Instant::now();
        let _ = query::context(
            &c,
            &ContextRequest {
                hints: vec![format!("src/services/{stem}.rs")],
                depth: 1,
                max_tokens: 4000,
            },
        );
        ctx_path.push(t.elapsed());
        let t = Instant::now();
        let _ = query::impact(
            &c,
            &ImpactRequest {
                node: id.clone(),
                change_type: query::ChangeType::ModifyAttribute,
                depth: 3,
            },
        );
        imp.push(t.elapsed());
    }
    if !ctx.is_empty() {
        say(&format!(
            "in-process context p95 {} (a code path hint: {}); impact p95 {} (n={})",
            ms(pct(&mut ctx, 0.95)),
            ms(pct(&mut ctx_path, 0.95)),
            ms(pct(&mut imp, 0.95)),
            ctx.len()
        ));
    }
}

fn find_spec(dir: &Path) -> Option<PathBuf> {
    let mut stack = vec![dir.to_path_buf()];
    let mut found: Vec<PathBuf> = Vec::new();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).ok()?.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md")
                && p.to_string_lossy().contains("rules")
            {
                found.push(p);
            }
        }
    }
    found.sort();
    found.into_iter().next()
}
