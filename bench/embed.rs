//! Embedding benchmarks: `cargo bench --bench bench -- embed <what>`.
//!
//! - `model`  : model load time (runtime / read / session+tokenizer), query latency, passage
//!   throughput (one text per run, as stored) vs one batched run, determinism checks.
//! - `corpus [SPECS_DIR]` : full L2 embedding of a specs tree (default: the shared 54-spec corpus)
//!   with chunks per kind, chunks/s, size ratio, then a second run (0 embedded) and a one-spec edit.
//! - `synth [N]` : the same on N synthetic specs (default 1000).

use kdd::cli::output;
use kdd::embed::model::{discover, ModelChoice, OrtEmbedder};
use kdd::embed::Embedder;
use std::time::Instant;

fn say(s: &str) {
    let _ = output::data(s);
}

pub fn run(args: &[String]) {
    match args.first().map(String::as_str) {
        Some("model") => model(),
        Some("corpus") => corpus(args.get(1)),
        Some("synth") => synth(args.get(1)),
        None | Some("all") => {
            model();
            corpus(None);
            synth(None);
        }
        Some(other) => output::error(&format!(
            "unknown embed bench {other:?}; try: model, corpus [DIR], synth [N], all"
        )),
    }
}

fn load() -> Option<OrtEmbedder> {
    let ModelChoice::Model(spec) = discover() else {
        say("SKIP: no real model selected (KDD_NO_EMBED / KDD_TEST_EMBEDDER set)");
        return None;
    };
    let t = Instant::now();
    match OrtEmbedder::load(&spec) {
        Ok(m) => {
            say(&format!(
                "model {} load: {:.2}s (runtime {:.3}s, read {:.3}s, session+tokenizer {:.2}s)",
                spec.id,
                t.elapsed().as_secs_f64(),
                m.timings.runtime.as_secs_f64(),
                m.timings.read.as_secs_f64(),
                m.timings.build.as_secs_f64()
            ));
            Some(m)
        }
        Err(e) => {
            say(&format!("SKIP: {e}"));
            None
        }
    }
}

/// 100 Spanish-ish paragraphs of ~60–80 words, deterministic.
pub fn paragraphs(n: usize) -> Vec<String> {
    const WORDS: &[&str] = &[
        "pedido",
        "usuario",
        "regla",
        "validación",
        "índice",
        "documento",
        "sección",
        "evento",
        "comando",
        "consulta",
        "modelo",
        "embedding",
        "grafo",
        "nodo",
        "relación",
        "capa",
        "dominio",
        "cancelar",
        "confirmar",
        "estado",
        "transición",
        "cliente",
        "precio",
        "total",
        "impuesto",
        "envío",
        "factura",
        "pago",
        "devolución",
        "agente",
        "contexto",
        "búsqueda",
        "the",
        "order",
        "rule",
        "when",
        "must",
        "never",
        "always",
        "specification",
    ];
    (0..n)
        .map(|i| {
            let len = 60 + (i * 7) % 21;
            (0..len)
                .map(|j| WORDS[(i * 31 + j * 17 + j * j) % WORDS.len()])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// Best, median and p95 time to embed the question `q` (50 runs after a warm-up).
fn query_latency(m: &mut OrtEmbedder, q: &str) -> String {
    m.embed_query(q).ok();
    let mut lat = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        m.embed_query(q).expect("query");
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    format!(
        "best {:.1} ms, median {:.1} ms, p95 {:.1} ms",
        lat[0],
        lat[lat.len() / 2],
        lat[lat.len() * 95 / 100]
    )
}

fn model() {
    let Some(mut m) = load() else { return };
    let q = "¿Cómo se configura la autenticación del servicio?";
    say(&format!("query latency: {}", query_latency(&mut m, q)));
    let paras = paragraphs(100);
    let t = Instant::now();
    let one_by_one = m.embed_passages(&paras).expect("passages");
    let dt = t.elapsed().as_secs_f64();
    say(&format!(
        "passages one per run: 100 in {dt:.2}s → {:.1} chunks/s",
        100.0 / dt
    ));
    let prefixed: Vec<String> = paras.iter().map(|p| format!("passage: {p}")).collect();
    let t = Instant::now();
    let mut batched = Vec::new();
    for b in prefixed.chunks(16) {
        batched.extend(m.embed_raw(b).expect("batch"));
    }
    let dt = t.elapsed().as_secs_f64();
    say(&format!(
        "passages batched 16 per run: 100 in {dt:.2}s → {:.1} chunks/s",
        100.0 / dt
    ));
    let min_cos = one_by_one
        .iter()
        .zip(&batched)
        .map(|(a, b)| kdd::embed::cosine(a, b))
        .fold(1f32, f32::min);
    let again = m.embed_passages(&paras[..10]).expect("again");
    let identical = again.iter().zip(&one_by_one).all(|(a, b)| a == b);
    say(&format!(
        "determinism: one-per-run repeat bit-identical = {identical}; batched vs alone min cosine = {min_cos:.5}"
    ));
    let spec = m.spec().clone();
    drop(m);
    if let Ok(mut m1) = OrtEmbedder::load_with(
        &spec,
        &kdd::embed::onnx::SessionMemory {
            intra_threads: 1,
            ..Default::default()
        },
    ) {
        say(&format!(
            "1 intra-op thread, query latency: {}",
            query_latency(&mut m1, q)
        ));
        let t = Instant::now();
        let v1 = m1.embed_passages(&paras[..20]).expect("1 thread");
        let dt = t.elapsed().as_secs_f64();
        let q1: Vec<_> = v1
            .iter()
            .map(|v| kdd::embed::store::Record::quantize([0; 8], v).q)
            .collect();
        let q2: Vec<_> = one_by_one[..20]
            .iter()
            .map(|v| kdd::embed::store::Record::quantize([0; 8], v).q)
            .collect();
        say(&format!(
            "1 intra-op thread: 20 in {dt:.2}s → {:.1} chunks/s; int8 bytes equal to 2-thread run: {}",
            20.0 / dt,
            q1 == q2
        ));
    }
}

fn git_init(dir: &std::path::Path) {
    let ok = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "git init failed");
}

fn copy_tree(src: &std::path::Path, dst: &std::path::Path) {
    std::fs::create_dir_all(dst).expect("mkdir");
    for e in std::fs::read_dir(src).expect("read dir").flatten() {
        let to = dst.join(e.file_name());
        if e.path().is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).expect("copy");
        }
    }
}

fn index_bench(label: &str, fill: &dyn Fn(&std::path::Path)) {
    use kdd::index::l2::L2Extras;
    let Some(model) = load() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path();
    git_init(repo);
    fill(&repo.join("specs"));
    let settings = kdd::config::Settings::discover(repo, None).expect("settings");
    let x = L2Extras::new(Box::new(model));
    let opts = kdd::index::Options {
        extras: Some(&x),
        progress: None,
    };
    let t = Instant::now();
    let out = kdd::index::full(&settings, &opts).expect("index");
    let full = t.elapsed().as_secs_f64();
    let s = x.stats();
    let kinds: Vec<String> = s.per_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
    say(&format!(
        "{label}: {} specs, full L2 index {full:.2}s; {} chunks embedded in {:.2}s → {:.1} chunks/s (model time), {:.1} chunks/s (whole run); per kind: {}",
        out.indexed,
        s.embedded,
        s.embed_time.as_secs_f64(),
        s.embedded as f64 / s.embed_time.as_secs_f64().max(1e-9),
        s.embedded as f64 / full,
        kinds.join(", ")
    ));
    let spec_bytes: u64 = walk_sizes(&repo.join("specs"));
    let vec_bytes: u64 = walk_sizes(&repo.join(".kdd-index/embeddings"));
    let all_bytes: u64 = walk_sizes(&repo.join(".kdd-index"));
    say(&format!(
        "{label}: size specs {spec_bytes} B, vectors {vec_bytes} B ({:.1}%), whole .kdd-index {all_bytes} B ({:.1}%)",
        100.0 * vec_bytes as f64 / spec_bytes as f64,
        100.0 * all_bytes as f64 / spec_bytes as f64
    ));
    let x = L2Extras::new(x.into_embedder());
    let opts = kdd::index::Options {
        extras: Some(&x),
        progress: None,
    };
    let t = Instant::now();
    let out2 = kdd::index::full(&settings, &opts).expect("index 2");
    say(&format!(
        "{label}: second full index {:.2}s, {} embedded, {} files written",
        t.elapsed().as_secs_f64(),
        x.stats().embedded,
        out2.written.len()
    ));
    // one-spec incremental: edit one paragraph of the first spec with embeddable text
    let mut files = Vec::new();
    list_md(&repo.join("specs"), &mut files);
    files.sort();
    let target = files
        .iter()
        .find(|p| p.to_string_lossy().contains("/rules/"))
        .unwrap_or(&files[0])
        .clone();
    let text = std::fs::read_to_string(&target).expect("read");
    let edited = text.replacen(". ", ", y además se revisa. ", 1);
    std::fs::write(&target, &edited).expect("write");
    let rel = target
        .strip_prefix(repo)
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/");
    let x = L2Extras::new(x.into_embedder());
    let opts = kdd::index::Options {
        extras: Some(&x),
        progress: None,
    };
    let t = Instant::now();
    let out3 = kdd::index::apply_with(
        &settings,
        vec![kdd::index::SpecSource {
            path: rel.clone(),
            bytes: edited.into_bytes(),
        }],
        vec![],
        &opts,
    )
    .expect("apply");
    say(&format!(
        "{label}: one-spec incremental ({rel}) {:.1} ms, {} chunk(s) embedded, {} files written (model already loaded)",
        t.elapsed().as_secs_f64() * 1000.0,
        x.stats().embedded,
        out3.written.len()
    ));
}

fn list_md(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            list_md(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

fn walk_sizes(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            total += walk_sizes(&p);
        } else {
            total += e.metadata().map(|m| m.len()).unwrap_or(0);
        }
    }
    total
}

fn corpus(arg: Option<&String>) {
    let dir = match arg {
        Some(d) => std::path::PathBuf::from(d),
        None => {
            let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
            [root.join("../shared"), root.join("../../shared")]
                .into_iter()
                .map(|s| s.join("corpus/kdd-engine/specs"))
                .find(|p| p.is_dir())
                .unwrap_or_else(|| root.join("../shared/corpus/kdd-engine/specs"))
        }
    };
    if !dir.is_dir() {
        say(&format!("SKIP corpus: {} not found", dir.display()));
        return;
    }
    index_bench("corpus", &|specs| copy_tree(&dir, specs));
}

fn synth(arg: Option<&String>) {
    let n = arg.and_then(|a| a.parse().ok()).unwrap_or(1000);
    // the shared generator (bench/synth.rs) writes `<dir>/specs/`
    index_bench(&format!("synth{n}"), &|specs| {
        super::synth::generate(specs.parent().expect("repo"), n, 42).expect("synth");
    });
}
