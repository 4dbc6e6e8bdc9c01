//! Embedding benchmarks: `cargo bench --bench bench -- embed <what>`.
//!
//! - `model`  : model load time (runtime / read / session+tokenizer), query latency, passage
//!   throughput (one text per run, as stored) vs one batched run, determinism checks.
//! - `corpus [SPECS_DIR]` : full L2 embedding of a specs tree (default: the shared 54-spec corpus)
//!   with chunks per kind, chunks/s, size ratio, then a second run (0 embedded) and a one-spec edit.
//! - `synth [N]` : the same on N synthetic specs (default 1000).

use kdd::cli::output;
use kdd::embed::model::{discover, FastEmbedder, ModelChoice};
use kdd::embed::Embedder;
use std::time::Instant;

fn say(s: &str) {
    let _ = output::data(s);
}

pub fn run(args: &[String]) {
    match args.first().map(String::as_str) {
        Some("model") | None => model(),
        Some(other) => output::error(&format!("unknown embed bench {other:?}; try: model")),
    }
}

fn load() -> Option<FastEmbedder> {
    let ModelChoice::Model(spec) = discover() else {
        say("SKIP: no real model selected (KDD_NO_EMBED / KDD_TEST_EMBEDDER set)");
        return None;
    };
    let t = Instant::now();
    match FastEmbedder::load(&spec) {
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

fn model() {
    let Some(mut m) = load() else { return };
    let q = "¿Cómo se configura la autenticación del servicio?";
    m.embed_query(q).ok();
    let mut lat = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        m.embed_query(q).expect("query");
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    say(&format!(
        "query latency: best {:.1} ms, median {:.1} ms, p95 {:.1} ms",
        lat[0],
        lat[lat.len() / 2],
        lat[lat.len() * 95 / 100]
    ));
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
    if let Ok(mut m1) = FastEmbedder::load_with_threads(&spec, Some(1)) {
        let t = Instant::now();
        let v1 = m1.embed_passages(&paras[..20]).expect("1 thread");
        let dt = t.elapsed().as_secs_f64();
        let q1: Vec<_> = v1
            .iter()
            .map(|v| kdd::embed::store::Record::quantize([0; 16], v).q)
            .collect();
        let q2: Vec<_> = one_by_one[..20]
            .iter()
            .map(|v| kdd::embed::store::Record::quantize([0; 16], v).q)
            .collect();
        say(&format!(
            "1 intra-op thread: 20 in {dt:.2}s → {:.1} chunks/s; int8 bytes equal to 2-thread run: {}",
            20.0 / dt,
            q1 == q2
        ));
    }
}
