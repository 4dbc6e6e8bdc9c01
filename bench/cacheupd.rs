//! `cargo bench --bench bench -- cache-update [N…] [l2]` (default 1k and 10k specs; `l2`: with
//! vectors from the deterministic test embedder): the cost of an
//! incremental cache update after a one-spec change, on the synthetic corpus (`bench/synth.rs`).
//!
//! Per size it prints the cache build from scratch, then for each kind of one-spec change (text
//! only, a new link, new aliases, a new spec, a renamed spec, a removed spec) the update itself
//! (`BuildStats::millis`, measured inside the write transaction) and the whole `Cache::open`
//! that performs it (fingerprint + lock + update + seal). Finally, end to end through the CLI (the
//! `kdd` binary next to this bench, or `$KDD_BIN`): a cold `kdd query` on an unchanged cache and
//! the first `kdd query` after a one-spec change (median of 3 each). Artifacts are written
//! in-process with `index::apply`, which is what the pre-commit hook does.
//!
//! Measured (release, 2 shared cores, 10k specs): before the incremental link step, an update
//! took 430-743 ms and the first `kdd query` after a change 728 ms (10 ms unchanged); after,
//! updates take 4-33 ms (whole open 10-40 ms; one update in eight also merges the small text
//! segments, ~80 ms) and the first query after a change 46 ms (15 ms unchanged). With `l2`
//! (64-dim test vectors, ~8 per spec) arroy's rebuild of its trees dominates: 80-670 ms per
//! update (not yet proportional to the change), first query after a change 366 ms.
//! With the pending vector set (`src/cache/vectors.rs`: no tree build until max(1,000, 10%)
//! items changed) the `vectors` step is 0.0 ms at 1k and 10k; measured on a loaded machine
//! (load ~10 on 2 cores) where tantivy's commit (`text`) alone took 10-260 ms at L1 and L2 alike,
//! the L2 updates took 13-93 ms at 1k and 20-256 ms at 10k (L1 in the same hour: 18-276 ms),
//! the first `kdd query` after a change 94 ms (1k) and 238 ms (10k; L1 155 ms). In-process
//! `nearest(20)` at 10k: 2.0 ms with the pending set after 12 updates, 1.2 ms after a full build.

use super::util::{git, kdd_bin};
use kdd::cache::{Cache, OpenOptions};
use kdd::config::Settings;
use kdd::index::{self, SpecSource};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn say(s: &str) {
    let _ = kdd::cli::output::data(s);
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn steps(st: &kdd::cache::BuildStats) -> String {
    let v: Vec<String> = st
        .steps_us
        .iter()
        .map(|(k, v)| format!("{k} {:.1}", *v as f64 / 1000.0))
        .collect();
    v.join(", ")
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Repo-relative paths of the spec files under `specs/` whose path contains `part`, sorted.
fn specs_with(root: &Path, part: &str) -> Vec<String> {
    let mut stack = vec![root.join("specs")];
    let mut found = Vec::new();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                if rel.contains(part) {
                    found.push(rel);
                }
            }
        }
    }
    found.sort();
    found
}

/// One change: files to write (path, new text) and files to delete.
struct Change {
    name: &'static str,
    write: Vec<(String, String)>,
    delete: Vec<String>,
}

fn stem(rel: &str) -> &str {
    let f = rel.rsplit('/').next().unwrap_or(rel);
    f.strip_suffix(".md").unwrap_or(f)
}

/// The changes measured, built from the corpus (round `r` picks different specs).
fn changes(root: &Path, r: usize) -> Vec<Change> {
    let rules = specs_with(root, "/rules/");
    let ents = specs_with(root, "/entities/");
    let read = |p: &str| std::fs::read_to_string(root.join(p)).expect("spec reads");
    let rule = rules[r % rules.len()].clone();
    let linker = rules[(r + 5) % rules.len()].clone();
    let ent = ents[(r * 3 + 1) % ents.len()].clone();
    let renamed = ents[(r * 3 + 2) % ents.len()].clone();
    let removed = ents[(r * 3 + 3) % ents.len()].clone();
    let target = stem(&ents[(r * 3 + 4) % ents.len()]).to_string();
    let new_path = format!("specs/01-domain/entities/Zeta{r}Nuevo.md");
    let new_text = format!(
        "---\nkind: entity\naliases: [Zeta{r}s, {}]\n---\n\n# Zeta{r}Nuevo\n\n## Descripción\n\nUn concepto nuevo que se relaciona con [[{target}]] y con [[Nadie{r}]].\n",
        stem(&removed)
    );
    let ren_to = format!("{}Renombrado.md", renamed.strip_suffix(".md").unwrap());
    vec![
        Change {
            name: "text only",
            write: vec![(
                rule.clone(),
                read(&rule) + "\n\nUna nota nueva sobre el redondeo.\n",
            )],
            delete: vec![],
        },
        Change {
            name: "one more link",
            write: vec![(
                linker.clone(),
                read(&linker) + &format!("\n\nVer [[{target}]].\n"),
            )],
            delete: vec![],
        },
        Change {
            name: "new aliases",
            write: vec![(
                ent.clone(),
                read(&ent).replacen(
                    "aliases: [",
                    &format!("aliases: [Alias{r}Nuevo, {target}x, "),
                    1,
                ),
            )],
            delete: vec![],
        },
        Change {
            name: "new spec",
            write: vec![(new_path, new_text)],
            delete: vec![],
        },
        Change {
            name: "renamed spec",
            write: vec![(ren_to, read(&renamed))],
            delete: vec![renamed],
        },
        Change {
            name: "removed spec",
            write: vec![],
            delete: vec![removed],
        },
    ]
}

/// `kdd index` through the CLI with the deterministic test embedder (L2 vectors).
fn cli_index(root: &Path) {
    let o = Command::new(kdd_bin())
        .arg("index")
        .current_dir(root)
        .env_remove("KDD_NO_EMBED")
        .env("KDD_TEST_EMBEDDER", "1")
        .env("KDD_EMBED_WARM", "0")
        .output()
        .expect("kdd index runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn apply(root: &Path, settings: &Settings, c: &Change, l2: bool) {
    let mut changed = Vec::new();
    for (p, text) in &c.write {
        std::fs::write(root.join(p), text).expect("spec written");
        changed.push(SpecSource {
            path: p.clone(),
            bytes: text.clone().into_bytes(),
        });
    }
    for p in &c.delete {
        std::fs::remove_file(root.join(p)).expect("spec removed");
    }
    if l2 {
        cli_index(root);
    } else {
        index::apply(settings, changed, c.delete.clone()).expect("index apply");
    }
}

/// Run the benchmark for the sizes in `args` (default 1000 and 10000); `l2` indexes through the
/// CLI with the deterministic test embedder, so arroy holds a vector per chunk.
pub fn run(args: &[String]) {
    let l2 = args.iter().any(|a| a == "l2");
    let sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() {
        vec![1000, 10_000]
    } else {
        sizes
    };
    for n in sizes {
        one_size(n, l2);
    }
}

fn one_size(n: usize, l2: bool) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    git(root, &["init", "-q"]);
    crate::synth::generate(root, n, 42).expect("synthetic corpus");
    let settings = Settings::discover(root, None).expect("settings");
    if l2 {
        cli_index(root);
    } else {
        index::full(&settings, &index::Options::default()).expect("kdd index");
    }
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "synthetic"]);
    let cache_root = root.join(".git/kdd-cache-bench");
    let open = |force: bool| {
        let t = Instant::now();
        let c = Cache::open_paths(
            &settings.index_dir,
            root,
            &cache_root,
            &OpenOptions {
                force_rebuild: force,
            },
        )
        .expect("cache opens");
        let level = c.level();
        (
            t.elapsed(),
            c.last_update().cloned().unwrap_or_default(),
            level,
        )
    };
    let (full, st, level) = open(true);
    say(&format!(
        "n={n}: cache build from scratch {} ({level:?}; {} nodes, {} edges; ms per step: {})",
        ms(full),
        st.nodes,
        st.edges,
        steps(&st)
    ));
    for r in 0..2 {
        for c in changes(root, r) {
            apply(root, &settings, &c, l2);
            let (open_t, st, _) = open(false);
            assert!(!st.full, "an incremental update rebuilt the cache");
            say(&format!(
                "  round {r}, {:<13}: update {:>4} ms, whole open {} (added {}, updated {}, removed {}; {} nodes, {} edges; ms per step: {})",
                c.name, st.millis, ms(open_t), st.added, st.updated, st.removed, st.nodes, st.edges, steps(&st)
            ));
        }
    }
    if l2 {
        let c = Cache::open_paths(
            &settings.index_dir,
            root,
            &cache_root,
            &OpenOptions::default(),
        )
        .expect("cache opens");
        let snap = c.snapshot().expect("snapshot");
        let pending = snap
            .stats()
            .expect("stats")
            .map_or(0, |s| s.pending_vectors);
        drop(snap);
        say(&format!(
            "  in-process nearest(20), {pending} pending vectors: {} (median of 50)",
            nearest_latency(&c)
        ));
        let c = Cache::open_paths(
            &settings.index_dir,
            root,
            &cache_root,
            &OpenOptions {
                force_rebuild: true,
            },
        )
        .expect("cache opens");
        say(&format!(
            "  in-process nearest(20) after a full build (0 pending): {} (median of 50)",
            nearest_latency(&c)
        ));
    }
    cli_first_query(root, &settings, l2);
}

/// Median time of `Snapshot::nearest` for test-embedder query vectors.
fn nearest_latency(c: &Cache) -> String {
    let words = ["pedido", "cliente", "precio", "factura", "envío"];
    let times = (0..50)
        .map(|i| {
            let v = kdd::embed::hashed::HashedEmbedder::vector(&format!(
                "reglas del {} y {}",
                words[i % 5],
                words[(i / 5) % 5]
            ));
            let t = Instant::now();
            let s = c.snapshot().expect("snapshot");
            let hits = s.nearest(&v, 20).expect("nearest");
            assert!(!hits.is_empty());
            t.elapsed()
        })
        .collect();
    ms(median(times))
}

/// End to end: `kdd query` cold on an unchanged cache, then right after a one-spec change.
fn cli_first_query(root: &Path, settings: &Settings, l2: bool) {
    let bin = kdd_bin();
    if !bin.is_file() {
        say(&format!(
            "  (CLI figures skipped: {} not found; set KDD_BIN)",
            bin.display()
        ));
        return;
    }
    let q = || {
        let t = Instant::now();
        let o = Command::new(&bin)
            .args(["query", "reglas del pedido", "--json", "--limit", "10"])
            .current_dir(root)
            .env("KDD_TRANSLATE", "off")
            .output()
            .expect("kdd query runs");
        assert!(
            o.status.success() || o.status.code() == Some(1),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        t.elapsed()
    };
    q();
    let unchanged = median((0..3).map(|_| q()).collect());
    let mut after = Vec::new();
    for r in 10..13 {
        let c = changes(root, r).into_iter().nth(1).expect("a link change");
        apply(root, settings, &c, l2);
        after.push(q());
    }
    say(&format!(
        "  CLI `kdd query`: unchanged cache {}, first query after a one-spec change {} (median of 3)",
        ms(unchanged),
        ms(median(after))
    ));
}
