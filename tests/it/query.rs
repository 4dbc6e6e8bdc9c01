//! Retrieval: the cache (freshness, incremental update, corruption, concurrent readers) and
//! every query command over the demo corpus, through the real binary and the library API.

use crate::util::{copy_dir, fixture, git_repo, ids, kdd, kdd_env, text};
use kdd::cache::{Cache, OpenOptions};
use serde_json::Value;
use std::path::Path;

/// A temp repo holding the demo specs, indexed (L1) and committed.
fn demo_repo() -> tempfile::TempDir {
    crate::util::indexed_fixture_repo("demo")
}

fn json(dir: &Path, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    let o = kdd(dir, &a);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)))
}

#[test]
fn scn_retrieve_impact_001_entity_impact_lists_rules_commands_events_use_cases() {
    let dir = demo_repo();
    let v = json(dir.path(), &["impact", "Entity:Pedido"]);
    let direct = ids(&v, "directly_affected", "id");
    for want in [
        "BR:BR-PRECIO-001",
        "BR:BR-PEDIDO-001",
        "CMD:CMD-001",
        "CMD:CMD-002",
        "CMD:CMD-003",
        "CMD:CMD-004",
        "EVT:EVT-Pedido-Creado",
        "EVT:EVT-Pedido-Cancelado",
        "UC:UC-001",
        "UC:UC-002",
        "UC:UC-003",
    ] {
        assert!(
            direct.contains(&want.to_string()),
            "{want} missing from {direct:?}"
        );
    }
    // No duplicates, no self-loop, nothing both direct and transitive.
    let trans = ids(&v, "transitively_affected", "id");
    let mut all = direct.clone();
    all.extend(trans.clone());
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(n, all.len(), "duplicates in {direct:?} + {trans:?}");
    assert!(!all.contains(&"Entity:Pedido".to_string()));
    for t in v["transitively_affected"].as_array().unwrap() {
        let path = t["path"].as_array().unwrap();
        assert_eq!(path[0], "Entity:Pedido");
        assert_eq!(path.len(), t["edge_types"].as_array().unwrap().len() + 1);
    }
    // Features validating affected nodes give scenarios to re-run.
    assert!(v["total_scenarios"].as_u64().unwrap() > 0, "{v}");
    // Short id, stem and path forms name the same node: the spec's path, an ending of it, a
    // longer path ending with it (absolute, or prefixed by the repository's folder).
    let abs = dir.path().join("specs/01-domain/entities/Pedido.md");
    let abs = abs.to_string_lossy();
    for arg in [
        "Pedido",
        "specs/01-domain/entities/Pedido.md",
        "entities/Pedido.md",
        "shop/specs/01-domain/entities/Pedido.md",
        &abs,
    ] {
        let w = json(dir.path(), &["impact", arg]);
        assert_eq!(w["analyzed_node"]["id"], "Entity:Pedido", "{arg}");
    }
    // Paths that name nothing (`./` is an empty one): not found, and the cache is not taken for
    // damaged (an empty LMDB key is refused with an error).
    for arg in ["./", "././", "/", "//"] {
        let o = kdd(dir.path(), &["impact", arg]);
        let err = text(&o);
        assert!(err.contains("NODE_NOT_FOUND"), "{arg}: {err}");
        assert!(!err.contains("damaged"), "{arg}: {err}");
    }
    let w = json(dir.path(), &["impact", "UC-003"]);
    assert_eq!(w["analyzed_node"]["id"], "UC:UC-003");
}

/// A path hint finds its spec through the cache's path table, also when the path is longer than
/// an LMDB key holds (stored under its hash, checked against the spec's own path).
#[test]
fn a_long_spec_path_resolves_as_a_hint() {
    let dir = crate::util::git_repo();
    let deep = format!(
        "specs/01-domain/entities/{}",
        "subcarpeta-muy-larga/".repeat(14)
    );
    std::fs::create_dir_all(dir.path().join(&deep)).unwrap();
    let rel = format!("{deep}Almacen.md");
    assert!(rel.len() > 300, "{}", rel.len());
    std::fs::write(
        dir.path().join(&rel),
        "---\nkind: entity\n---\n# Almacen\n\nDonde se guarda el stock.\n",
    )
    .unwrap();
    let o = kdd(dir.path(), &["index"]);
    assert!(o.status.success(), "{}", text(&o));
    let abs = dir.path().join(&rel).to_string_lossy().to_string();
    for arg in [rel.as_str(), abs.as_str()] {
        let w = json(dir.path(), &["impact", arg]);
        assert_eq!(w["analyzed_node"]["id"], "Entity:Almacen", "{arg}");
    }
    let v = json(dir.path(), &["context", "--hint", &rel]);
    assert!(v.to_string().contains("Entity:Almacen"), "{v}");
}

#[test]
fn scn_hybrid_search_001_devolucion_flow_with_graph_expansion() {
    let dir = demo_repo();
    let v = json(dir.path(), &["query", "flujo de devolución"]);
    let got = ids(&v, "results", "node_id");
    for want in ["UC:UC-003", "BR:BR-DEVOLUCION-001", "CMD:CMD-003"] {
        assert!(
            got.contains(&want.to_string()),
            "{want} missing from {got:?}"
        );
    }
    assert_eq!(got[0], "UC:UC-003", "{got:?}");
    // Exact JSON shape, normalised and strictly ordered scores.
    let r0 = &v["results"][0];
    for k in [
        "node_id",
        "kind",
        "score",
        "source_file",
        "match_source",
        "snippet",
        "title",
        "layer",
        "domain",
        "indexed_fields",
        "reached_via",
    ] {
        assert!(r0.get(k).is_some(), "result lacks {k}: {r0}");
    }
    for k in [
        "results",
        "graph_expansion",
        "warnings",
        "total_results",
        "total_tokens",
    ] {
        assert!(v.get(k).is_some(), "answer lacks {k}");
    }
    assert!(r0["source_file"].as_str().unwrap().starts_with("specs/"));
    let scores = crate::util::scores(&v);
    assert!(scores.iter().all(|s| (0.0..=1.0).contains(s)), "{scores:?}");
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    // Expanded nodes explain their path.
    for r in v["results"].as_array().unwrap() {
        if r["match_source"] == "graph" {
            assert!(r["reached_via"].as_str().unwrap().contains(" -> "), "{r}");
        }
    }
}

#[test]
fn l1_degradation_warns_and_still_answers() {
    let dir = demo_repo();
    let v = json(
        dir.path(),
        &["query", "plazo máximo para devolver un artículo"],
    );
    let codes: Vec<String> = ids(&v, "warnings", "code");
    assert!(codes.contains(&"NO_EMBEDDINGS".to_string()), "{v}");
    let got = ids(&v, "results", "node_id");
    // Lexical evidence alone: the return rule is among the return specs at the top (its four
    // leading scores lie within 0.03 of each other, so their order is not the point here).
    assert!(
        got.iter().take(5).any(|x| x == "BR:BR-DEVOLUCION-001"),
        "{got:?}"
    );
    // Semantic-only search is an error at L1, lexical works.
    let o = kdd(
        dir.path(),
        &["search", "devolución", "--semantic", "--json"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let v = json(dir.path(), &["search", "devolución", "--lexical"]);
    assert!(!ids(&v, "results", "node_id").is_empty());
}

#[test]
fn errors_have_codes_and_exit_statuses() {
    let dir = demo_repo();
    // Too short, or punctuation only (nothing to match; semantic search would return noise).
    for q in ["ab", "¿¿¿???", "... ¡!"] {
        for cmd in [
            &["query", q, "--json"][..],
            &["search", q, "--lexical", "--json"][..],
        ] {
            let o = kdd(dir.path(), cmd);
            assert_eq!(o.status.code(), Some(2), "{cmd:?}: {}", text(&o));
            assert!(String::from_utf8_lossy(&o.stdout).contains("QUERY_TOO_SHORT"));
        }
    }
    let o = kdd(dir.path(), &["impact", "Entity:NoExiste", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("NODE_NOT_FOUND"));
    let o = kdd(dir.path(), &["context", "--json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stdout).contains("EMPTY_HINTS"));
    let o = kdd(dir.path(), &["query", "xyzzy plugh frobnicate", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // No index at all.
    let empty = git_repo();
    let o = kdd(empty.path(), &["query", "pedido", "--json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stdout).contains("INDEX_UNAVAILABLE"));
}

#[test]
fn graph_violations_orphans_coverage_on_demo() {
    let dir = demo_repo();
    let v = json(dir.path(), &["violations"]);
    assert_eq!(v["total_violations"], 2, "{v}");
    let pairs: Vec<(String, String)> = v["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["from_node"].as_str().unwrap().to_string(),
                x["to_node"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(pairs.contains(&("Entity:Pedido".into(), "CMD:CMD-002".into())));
    assert!(pairs.contains(&("BR:BR-DEVOLUCION-001".into(), "UC:UC-003".into())));
    let v = json(dir.path(), &["orphans"]);
    assert_eq!(v["total_orphans"], 1, "{v}");
    assert_eq!(v["orphans"][0]["to"], "CMD-009-AplicarCupon");
    let v = json(dir.path(), &["graph", "UC-003", "--depth", "1"]);
    assert_eq!(v["center_node"]["id"], "UC:UC-003");
    let rel = ids(&v, "related_nodes", "id");
    assert!(rel.contains(&"BR:BR-DEVOLUCION-001".to_string()), "{rel:?}");
    let o = kdd(dir.path(), &["graph", "UC-003", "--format", "mermaid"]);
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("graph LR"));
    let o = kdd(dir.path(), &["graph", "UC-003", "--format", "dot"]);
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("digraph kdd"));
    let v = json(dir.path(), &["coverage", "Entity:Pedido"]);
    assert_eq!(v["analyzed_node"]["id"], "Entity:Pedido");
    let cats = ids(&v, "required", "category");
    assert!(cats.contains(&"events".to_string()));
    let ev = &v["required"][0];
    assert_eq!(ev["status"], "covered", "{v}");
}

#[test]
fn context_resolves_hints_and_orders_constraints_first() {
    let dir = demo_repo();
    let v = json(
        dir.path(),
        &[
            "context",
            "--hint",
            "src/orders/pedido.ts",
            "--hint",
            "foo-bar-nada",
        ],
    );
    let res = &v["resolved_entities"][0];
    assert_eq!(res["node_id"], "Entity:Pedido", "{v}");
    assert_eq!(res["match_method"], "basename");
    let cons = ids(&v, "constraints", "node_id");
    assert!(cons.contains(&"BR:BR-PRECIO-001".to_string()), "{cons:?}");
    assert!(cons.contains(&"BP:BP-ENVIO-001".to_string()), "{cons:?}");
    let beh = ids(&v, "behavior", "node_id");
    assert!(beh.iter().any(|x| x.starts_with("UC:")), "{beh:?}");
    assert!(v["warnings"][0]
        .as_str()
        .unwrap()
        .contains("No match found for hint: 'foo-bar-nada'"));
    for c in v["constraints"].as_array().unwrap() {
        assert!(!c["content"].as_str().unwrap().is_empty(), "{c}");
        assert!(c["reached_via"]
            .as_str()
            .unwrap()
            .starts_with("Entity:Pedido"));
    }
    // A tiny budget is honoured.
    let v = json(
        dir.path(),
        &["context", "--hint", "Pedido", "--max-tokens", "200"],
    );
    assert!(v["total_tokens"].as_u64().unwrap() <= 200, "{v}");
    // YAML and markdown renderings.
    let o = kdd(
        dir.path(),
        &["context", "--hint", "Pedido", "--format", "yaml"],
    );
    let y = String::from_utf8_lossy(&o.stdout);
    assert!(y.starts_with("constraints:\n  - node_id:"), "{y}");
    let o = kdd(dir.path(), &["context", "--hint", "Pedido"]);
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("# Context pack"));
}

fn open(dir: &Path, cache: &Path) -> Cache {
    Cache::open_paths(&dir.join(".kdd-index"), dir, cache, &OpenOptions::default())
        .expect("cache opens")
}

#[test]
fn cache_is_fresh_incremental_and_self_healing() {
    let dir = demo_repo();
    let cache_dir = tempfile::tempdir().unwrap();
    let c = open(dir.path(), cache_dir.path());
    let first = c.last_update().expect("built").clone();
    assert!(first.full);
    assert_eq!(first.nodes, 48);
    drop(c);
    // Fresh: nothing to do.
    let c = open(dir.path(), cache_dir.path());
    assert!(c.last_update().is_none());
    drop(c);
    // One spec changes and is re-indexed: only that spec is re-read.
    let p = dir.path().join("specs/01-domain/rules/BR-PRECIO-001.md");
    let mut s = std::fs::read_to_string(&p).unwrap();
    s.push_str("\n\nNota: el redondeo usa la regla zanahoria.\n");
    std::fs::write(&p, s).unwrap();
    let o = kdd(dir.path(), &["index"]);
    assert!(o.status.success(), "{}", text(&o));
    let c = open(dir.path(), cache_dir.path());
    let upd = c.last_update().expect("updated").clone();
    assert!(!upd.full);
    assert_eq!(upd.updated, 1, "{upd:?}");
    assert_eq!(upd.added + upd.removed, 0);
    let r = kdd::query::search(
        &c,
        &kdd::query::SearchRequest {
            query: "zanahoria".into(),
            mode: kdd::query::SearchMode::Lexical,
            kinds: vec![],
            layers: vec![],
            domain: None,
            limit: 5,
            min_score: 0.0,
            expansion: Default::default(),
        },
    )
    .unwrap();
    assert_eq!(r.results[0].node_id, "BR:BR-PRECIO-001");
    let gen = c.generation().to_path_buf();
    drop(c);
    // A corrupt cache is rebuilt, not trusted.
    std::fs::write(gen.join("text/meta.json"), b"{ not json").unwrap();
    let o = kdd(dir.path(), &["query", "zanahoria", "--json"]);
    // (the binary uses its own cache dir; check the library path too)
    assert!(o.status.success(), "{}", text(&o));
    let c = open(dir.path(), cache_dir.path());
    assert!(c.last_update().expect("rebuilt").full);
    assert_eq!(c.healed().len(), 1, "the damage is reported once");
    assert_ne!(c.generation(), gen.as_path());
    // A generation another kdd version built is rebuilt without a word about damage.
    let gen = c.generation().to_path_buf();
    drop(c);
    let marker = gen.join("complete");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&marker).unwrap()).unwrap();
    m["cache_version"] = (kdd::cache::CACHE_VERSION - 1).into();
    std::fs::write(&marker, serde_json::to_vec(&m).unwrap()).unwrap();
    let c = open(dir.path(), cache_dir.path());
    assert!(c.last_update().expect("rebuilt").full);
    assert!(c.healed().is_empty(), "{:?}", c.healed());
    assert_ne!(c.generation(), gen.as_path());
}

#[test]
fn concurrent_readers_during_rebuild() {
    let dir = demo_repo();
    // Warm the cache once.
    let o = kdd(dir.path(), &["query", "pedido", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let root = dir.path().to_path_buf();
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let root = root.clone();
            std::thread::spawn(move || {
                for _ in 0..5 {
                    let o = kdd(&root, &["query", "devolución del pedido", "--json"]);
                    assert!(o.status.success(), "{}", text(&o));
                    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
                    assert!(!v["results"].as_array().unwrap().is_empty());
                }
            })
        })
        .collect();
    // Meanwhile the index changes (new spec) and the cache updates.
    for i in 0..3 {
        let p = root.join(format!("specs/01-domain/rules/BR-TEST-00{i}.md"));
        std::fs::write(
            &p,
            format!("---\nid: BR-TEST-00{i}\nkind: business-rule\n---\n# BR-TEST-00{i}\n\n## Declaración\n\nUn [[Pedido]] de prueba {i}.\n"),
        )
        .unwrap();
        let o = kdd(&root, &["index"]);
        assert!(o.status.success(), "{}", text(&o));
        let o = kdd(&root, &["impact", "Entity:Pedido", "--json"]);
        assert!(o.status.success(), "{}", text(&o));
    }
    for r in readers {
        r.join().unwrap();
    }
    let v = json(&root, &["impact", "Entity:Pedido"]);
    let direct = ids(&v, "directly_affected", "id");
    assert!(direct.contains(&"BR:BR-TEST-002".to_string()), "{direct:?}");
}

/// Neighbourhood support (fixtures/cluster/README.md): linked hits support each other, an
/// isolated word match does not, and a spec with no words in common is reached through the
/// graph with its path.
#[test]
fn linked_specs_support_each_other_and_graph_only_hits_explain_their_path() {
    let dir = git_repo();
    copy_dir(&fixture("cluster/specs"), &dir.path().join("specs"));
    let o = kdd(dir.path(), &["index"]);
    assert!(o.status.success(), "{}", text(&o));
    let score = |v: &Value, id: &str| -> f64 {
        v["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["node_id"] == id)
            .map(|r| r["score"].as_f64().unwrap())
            .unwrap_or_else(|| panic!("{id} missing from {v}"))
    };
    let flat = json(dir.path(), &["query", "garantía", "--no-expand"]);
    let linked = json(dir.path(), &["query", "garantía"]);
    // Reported scores are calibrated (`query::evidence`): conf × (BASE + (1 − BASE) × rel);
    // the support is a property of the fused ranking, so compare the relative parts.
    let rel = |v: &Value, id: &str| {
        let top = v["results"][0]["score"].as_f64().unwrap();
        let base = kdd::query::evidence::BASE as f64;
        (score(v, id) / top - base) / (1.0 - base)
    };
    let ratio = |v: &Value| rel(v, "CMD:CMD-001") / rel(v, "Entity:Nota");
    assert!(
        ratio(&linked) > ratio(&flat) * 1.2,
        "support from linked specs should widen the gap: {linked}"
    );
    assert_eq!(linked["results"][0]["node_id"], "BR:BR-GARANTIA-001");

    let v = json(dir.path(), &["query", "reclamar cobertura de reparación"]);
    let ev = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["node_id"] == "EVT:EVT-Expediente-Abierto")
        .unwrap_or_else(|| panic!("event missing: {v}"));
    assert_eq!(ev["match_source"], "graph");
    let via = ev["reached_via"].as_str().unwrap();
    assert!(via.contains("CMD:CMD-001 -> EMITS ->"), "{via}");
    assert!(
        v["graph_expansion"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["from_node"] == "CMD:CMD-001"
                && e["to_node"] == "EVT:EVT-Expediente-Abierto"
                && e["edge_type"] == "EMITS"),
        "{v}"
    );
    let none = json(
        dir.path(),
        &["query", "reclamar cobertura de reparación", "--no-expand"],
    );
    assert!(
        !ids(&none, "results", "node_id").contains(&"EVT:EVT-Expediente-Abierto".to_string()),
        "{none}"
    );
}

/// A tight token budget drops verbose indexed fields from the bottom before it drops ranked
/// hits; the first hit always stays; the warning says the answer was cut.
#[test]
fn token_budget_keeps_the_ranking_and_sheds_fields_first() {
    let dir = demo_repo();
    let full = json(dir.path(), &["query", "pedido", "--limit", "8"]);
    assert_eq!(full["results"].as_array().unwrap().len(), 8, "{full}");
    let need: u64 = full["total_tokens"].as_u64().unwrap();
    let tight = json(
        dir.path(),
        &[
            "query",
            "pedido",
            "--limit",
            "8",
            "--max-tokens",
            &(need / 2).to_string(),
        ],
    );
    let hits = tight["results"].as_array().unwrap();
    assert_eq!(
        ids(&tight, "results", "node_id"),
        ids(&full, "results", "node_id"),
        "the same ranking, only lighter"
    );
    assert!(
        tight["total_tokens"].as_u64().unwrap() <= need / 2,
        "{tight}"
    );
    assert!(hits.iter().any(|h| h["indexed_fields"]
        .as_object()
        .is_some_and(|f| f.is_empty())));
    assert!(
        ids(&tight, "warnings", "code").contains(&"TOKEN_LIMIT_EXCEEDED".to_string()),
        "{tight}"
    );
    // A budget below one hit still answers with the best hit.
    let one = json(dir.path(), &["query", "pedido", "--max-tokens", "1"]);
    assert_eq!(one["results"].as_array().unwrap().len(), 1, "{one}");
    assert_eq!(one["results"][0]["node_id"], full["results"][0]["node_id"]);
}

/// A temp repo holding one fixture's specs, indexed (L1).
fn indexed_repo(name: &str) -> tempfile::TempDir {
    let dir = git_repo();
    copy_dir(
        &fixture(&format!("{name}/specs")),
        &dir.path().join("specs"),
    );
    let o = kdd(dir.path(), &["index"]);
    assert!(o.status.success(), "{}", text(&o));
    dir
}

/// `kdd query … --json` with translation on and the given translator program.
fn query_translated(dir: &Path, q: &str, translator: &str) -> Value {
    let o = kdd_env(
        dir,
        &["query", q, "--json"],
        &[
            ("KDD_NO_EMBED", "1"),
            ("KDD_TRANSLATE", "on"),
            ("KDD_TRANSLATOR", translator),
        ],
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)))
}

fn warning<'a>(v: &'a Value, code: &str) -> Option<&'a str> {
    v["warnings"]
        .as_array()?
        .iter()
        .find(|w| w["code"] == code)
        .and_then(|w| w["message"].as_str())
}

#[test]
fn a_question_in_the_other_language_is_translated_into_the_corpus_language() {
    let dir = indexed_repo("core-es");
    let glossary = fixture("translate/glossary-translator");
    let q = "why is there a smallest amount for shipping?";
    // Without translation no Spanish word matches: the rule is not found.
    let off = json(dir.path(), &["query", q]);
    assert!(
        !ids(&off, "results", "node_id").contains(&"BR:BR-PEDIDO-001".to_string()),
        "{off}"
    );
    // With it, the rule about the minimum amount and shipping costs comes first, and the
    // answer says what it searched for.
    let on = query_translated(dir.path(), q, glossary.to_str().unwrap());
    assert_eq!(
        ids(&on, "results", "node_id").first().map(String::as_str),
        Some("BR:BR-PEDIDO-001"),
        "{on}"
    );
    let msg = warning(&on, "QUERY_TRANSLATED").unwrap_or_else(|| panic!("{on}"));
    assert!(
        msg.contains("English") && msg.contains("mínimo importe para envío"),
        "{msg}"
    );
    // A Spanish question over Spanish specs is left alone (the glossary is never called).
    let es = query_translated(
        dir.path(),
        "¿por qué hay un importe mínimo?",
        "/nonexistent/translator",
    );
    assert!(
        warning(&es, "QUERY_TRANSLATED").is_none() && warning(&es, "NO_TRANSLATION").is_none(),
        "{es}"
    );
    // Keyword queries without function words are not guessed at either.
    let kw = query_translated(dir.path(), "BR-PEDIDO-001", "/nonexistent/translator");
    assert!(warning(&kw, "NO_TRANSLATION").is_none(), "{kw}");
}

#[test]
fn a_missing_or_failing_translator_is_a_warning_not_an_error() {
    let dir = indexed_repo("core-es");
    let v = query_translated(
        dir.path(),
        "what is the minimum amount of a Pedido?",
        "/nonexistent/translator",
    );
    let msg = warning(&v, "NO_TRANSLATION").unwrap_or_else(|| panic!("{v}"));
    assert!(
        msg.contains("/nonexistent/translator")
            && msg.contains("named by KDD_TRANSLATOR, was not found"),
        "{msg}"
    );
    assert!(!ids(&v, "results", "node_id").is_empty(), "{v}");
    // A Spanish question over English specs asks for spa-eng, which the glossary refuses.
    let en = indexed_repo("core-en");
    let glossary = fixture("translate/glossary-translator");
    let v = query_translated(
        en.path(),
        "¿qué pasa con el pedido cuando se paga?",
        glossary.to_str().unwrap(),
    );
    let msg = warning(&v, "NO_TRANSLATION").unwrap_or_else(|| panic!("{v}"));
    assert!(
        msg.contains("spa-eng") && msg.contains("unsupported pair"),
        "{msg}"
    );
}

#[test]
#[cfg_attr(not(kdd_apertium), ignore = "Apertium with eng-spa is not installed")]
fn apertium_translates_when_installed() {
    let dir = indexed_repo("core-es");
    let v = query_translated(
        dir.path(),
        "why is there a minimum amount for shipping costs?",
        "",
    );
    // L1: the lemma pipeline (analysis → bilingual lookup → lexical selection).
    assert!(warning(&v, "QUERY_TRANSLATED").is_some(), "{v}");
    let got = ids(&v, "results", "node_id");
    assert!(
        got.iter().take(3).any(|x| x == "BR:BR-PEDIDO-001"),
        "{got:?}"
    );
    // The full pipeline (fluent text, for the embedding model), as `kdd doctor` shows it.
    let t = crate::util::doctor_check(dir.path(), &[("KDD_TRANSLATE", "on")], "translator");
    assert_eq!(t["status"], "ok", "{t}");
    assert!(t["message"].as_str().unwrap().contains("regla"), "{t}");
}

#[test]
fn a_one_shot_answer_says_when_its_specs_changed_after_indexing() {
    // A spec is edited after `kdd index`: `kdd query`, `kdd search` and `kdd context` still
    // answer from the indexed version, and say so for the specs they answer with.
    let dir = indexed_repo("core-es");
    let rule = "specs/01-domain/rules/BR-PEDIDO-001.md";
    let fresh = json(dir.path(), &["query", "importe mínimo del pedido"]);
    assert!(warning(&fresh, "STALE_SPECS").is_none(), "{fresh}");
    let path = dir.path().join(rule);
    let edited = std::fs::read_to_string(&path).unwrap() + "\nUna frase añadida.\n";
    std::fs::write(&path, edited).unwrap();
    for args in [
        &["query", "importe mínimo del pedido"][..],
        &["search", "--lexical", "importe mínimo"][..],
    ] {
        let v = json(dir.path(), args);
        let msg = warning(&v, "STALE_SPECS").unwrap_or_else(|| panic!("{args:?}: {v}"));
        assert!(msg.contains(rule) && msg.contains("kdd index"), "{msg}");
    }
    let c = json(dir.path(), &["context", "BR-PEDIDO-001"]);
    assert!(c["warnings"].to_string().contains(rule), "{c}");
    // A spec removed from disk counts as changed too; `kdd index` clears both.
    std::fs::remove_file(&path).unwrap();
    let v = json(dir.path(), &["query", "importe mínimo del pedido"]);
    assert!(warning(&v, "STALE_SPECS").is_some(), "{v}");
    let o = kdd(dir.path(), &["index"]);
    assert!(o.status.success(), "{}", text(&o));
    let v = json(dir.path(), &["query", "importe mínimo del pedido"]);
    assert!(warning(&v, "STALE_SPECS").is_none(), "{v}");
}
