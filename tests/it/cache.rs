//! The query cache updated incrementally answers exactly like a fresh rebuild of the same index:
//! a property test over random sequences of spec edits, additions and deletions on a small
//! linked corpus (real git repository, real `kdd index` with the deterministic test embedder,
//! real caches). After every step, full answers — hybrid, lexical and semantic, scores included
//! — to a fixed set of questions are compared between the long-lived incremental cache and a
//! cache built from scratch.

use crate::repo::{command, text, Repo};
use kdd::cache::{Cache, OpenOptions};
use kdd::query::{self, HybridRequest, QueryEmbedder, SearchMode, SearchRequest};
use proptest::prelude::*;
use std::path::Path;
use std::sync::Arc;

/// The test embedder, for queries.
struct Hashed;

impl QueryEmbedder for Hashed {
    fn embed_query(&self, text: &str) -> Result<Vec<f32>, kdd::embed::Error> {
        Ok(kdd::embed::hashed::HashedEmbedder::vector(text))
    }
    fn model(&self) -> &str {
        "kdd-test-hashed-64"
    }
}

/// Slots of the corpus: (path, kind, id).
const SLOTS: &[(&str, &str, &str)] = &[
    ("specs/01-domain/entities/Pedido.md", "entity", "Pedido"),
    ("specs/01-domain/entities/Cliente.md", "entity", "Cliente"),
    (
        "specs/01-domain/rules/BR-PRECIO-001.md",
        "business-rule",
        "BR-PRECIO-001",
    ),
    (
        "specs/01-domain/events/EVT-Pedido-Enviado.md",
        "event",
        "EVT-Pedido-Enviado",
    ),
    (
        "specs/02-behavior/use-cases/UC-001-CrearPedido.md",
        "use-case",
        "UC-001",
    ),
    (
        "specs/02-behavior/use-cases/UC-002-Cancelar.md",
        "use-case",
        "UC-002",
    ),
];

const PHRASES: &[&str] = &[
    "El precio final suma las líneas y resta el descuento.",
    "Un cliente registrado hace pedidos y recibe facturas.",
    "El envío se cancela cuando el pago falla.",
    "The order total is never negative and includes taxes.",
    "Se emite cuando el almacén despacha el paquete.",
    "El carrito se confirma y se reserva el stock.",
];

const QUESTIONS: &[&str] = &[
    "precio del pedido",
    "cliente factura",
    "cancelar envío",
    "order total taxes",
];

/// The text of slot `i` in variant `v` (links to other slots, which may or may not exist).
fn body(i: usize, v: u8) -> String {
    let (_, kind, id) = SLOTS[i];
    let v = v as usize;
    let title = if v.is_multiple_of(3) {
        id.to_string()
    } else {
        format!("{id} v{v}")
    };
    let a = SLOTS[(i + 1 + v) % SLOTS.len()].2;
    let b = SLOTS[(i + 3 + v) % SLOTS.len()].2;
    format!(
        "---\nid: {id}\nkind: {kind}\ntitle: {title}\nstatus: draft\n---\n\n# {title}\n\n## Descripción\n\n{} {}\n\n## Notas\n\n{}\n\n## Relaciones\n\n- [[{a}]]\n- [[{b}]]\n",
        PHRASES[(i + v) % PHRASES.len()],
        PHRASES[(i * 2 + v + 1) % PHRASES.len()],
        // Long enough (> 40 tokens) that tantivy quantises the field length.
        (0..v + 4)
            .map(|k| PHRASES[(i + k * v + k) % PHRASES.len()])
            .collect::<Vec<_>>()
            .join(" "),
    )
}

#[derive(Debug, Clone)]
enum Step {
    /// Write slot `i` with variant `v` (adds it when absent).
    Write(usize, u8),
    /// Delete slot `i` (no-op when absent).
    Delete(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..SLOTS.len(), 0u8..6).prop_map(|(i, v)| Step::Write(i, v)),
        1 => (0..SLOTS.len()).prop_map(Step::Delete),
    ]
}

fn index(r: &Repo) {
    let o = command(env!("CARGO_BIN_EXE_kdd"), &r.dir)
        .env_remove("KDD_NO_EMBED")
        .env("KDD_TEST_EMBEDDER", "1")
        .env("KDD_EMBED_WARM", "0")
        .arg("index")
        .output()
        .expect("run kdd index");
    let (out, err) = text(&o);
    assert!(o.status.success(), "kdd index failed:\n{out}\n{err}");
}

/// Every answer the cache gives to the fixed questions, as JSON.
fn answers(c: &mut Cache) -> serde_json::Value {
    c.set_embedder(Arc::new(Hashed));
    let mut out = Vec::new();
    for q in QUESTIONS {
        let h = query::hybrid(c, &HybridRequest::new(*q)).expect("hybrid");
        out.push(serde_json::to_value(&h).unwrap());
        for mode in [SearchMode::Lexical, SearchMode::Semantic] {
            let req = SearchRequest {
                query: q.to_string(),
                mode,
                kinds: Vec::new(),
                layers: Vec::new(),
                domain: None,
                limit: 10,
                min_score: 0.0,
                expansion: Default::default(),
            };
            let s = query::search(c, &req).expect("search");
            out.push(serde_json::to_value(&s).unwrap());
        }
    }
    serde_json::Value::Array(out)
}

fn open(r: &Repo, root: &Path, force_rebuild: bool) -> Cache {
    Cache::open_paths(
        &r.dir.join(".kdd-index"),
        &r.dir,
        root,
        &OpenOptions { force_rebuild },
    )
    .expect("open cache")
}

fn run(steps: &[Step]) {
    let r = Repo::new();
    let present: Vec<usize> = vec![0, 2, 4];
    for &i in &present {
        r.write(SLOTS[i].0, &body(i, 0));
    }
    index(&r);
    let incr_root = r.tmp.path().join("incremental");
    open(&r, &incr_root, false);
    for (n, s) in steps.iter().enumerate() {
        match s {
            Step::Write(i, v) => r.write(SLOTS[*i].0, &body(*i, *v)),
            Step::Delete(i) => {
                let _ = std::fs::remove_file(r.dir.join(SLOTS[*i].0));
            }
        }
        index(&r);
        let mut incr = open(&r, &incr_root, false);
        let fresh_root = r.tmp.path().join(format!("fresh-{n}"));
        let mut fresh = open(&r, &fresh_root, true);
        let (a, b) = (answers(&mut incr), answers(&mut fresh));
        assert!(
            a == b,
            "after step {n} ({s:?}) of {steps:?}, the incremental cache answers\n{a:#}\nbut a fresh rebuild answers\n{b:#}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 12,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn incremental_cache_answers_like_a_fresh_rebuild(
        steps in proptest::collection::vec(step(), 1..6)
    ) {
        run(&steps);
    }
}
