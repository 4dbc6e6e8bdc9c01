//! Demo and scenario corpora: `fixtures/demo`, `fixtures/specs-multi`, `fixtures/specs-v2` are
//! indexed with the real `kdd` binary and checked against their `EXPECTED.md` answer keys
//! (node counts per kind, exact layer violations and orphans, key typed edges); the synthetic
//! corpus generator of `bench/synth.rs` is checked for determinism and shape.

use crate::util::{self, kdd, text};
use kdd::graph::Graph;
use kdd::spec::Kind;
use std::collections::BTreeMap;
use std::path::Path;

#[allow(dead_code)]
#[path = "../../bench/synth.rs"]
mod synth;

fn indexed(fixture: &str) -> (tempfile::TempDir, Graph) {
    let repo = util::repo_with_fixture(fixture);
    let o = kdd(repo.path(), &["index"]);
    assert!(o.status.success(), "kdd index on {fixture}: {}", text(&o));
    let (g, errors) = Graph::load(&repo.path().join(".kdd-index")).expect("index loads");
    assert!(errors.is_empty(), "{errors:?}");
    (repo, g)
}

fn kinds(g: &Graph) -> BTreeMap<&'static str, usize> {
    g.kind_counts()
        .into_iter()
        .map(|(k, n)| (k.as_str(), n))
        .collect()
}

fn expect_kinds(g: &Graph, want: &[(&'static str, usize)]) {
    let want: BTreeMap<&'static str, usize> = want.iter().copied().collect();
    assert_eq!(kinds(g), want);
}

fn has_edge(g: &Graph, from: &str, to: &str, t: &str) -> bool {
    g.edges
        .iter()
        .any(|e| e.from == from && e.to == to && e.edge_type == t)
}

#[track_caller]
fn edge(g: &Graph, from: &str, to: &str, t: &str) {
    if !has_edge(g, from, to, t) {
        let out: Vec<_> = g
            .edges
            .iter()
            .filter(|e| e.from == from)
            .map(|e| format!("{} -{}-> {}", e.from, e.edge_type, e.to))
            .collect();
        panic!("no {t} edge {from} -> {to}; edges from {from}: {out:#?}");
    }
}

fn linked(g: &Graph, from: &str, to: &str) -> bool {
    g.edges.iter().any(|e| e.from == from && e.to == to)
}

fn violations(g: &Graph) -> Vec<(String, String)> {
    let mut v: Vec<_> = g
        .violations()
        .map(|e| (e.from.clone(), e.to.clone()))
        .collect();
    v.sort();
    v.dedup();
    v
}

fn orphans(g: &Graph) -> Vec<(String, String)> {
    let mut v: Vec<_> = g
        .orphans
        .iter()
        .map(|o| (o.from.clone(), o.to.clone()))
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn demo_corpus_matches_expected_md() {
    let (_repo, g) = indexed("demo");
    expect_kinds(
        &g,
        &[
            ("entity", 5),
            ("role", 2),
            ("system", 1),
            ("glossary", 1),
            ("event", 7),
            ("business-rule", 4),
            ("business-policy", 1),
            ("cross-policy", 1),
            ("command", 4),
            ("query", 1),
            ("process", 1),
            ("use-case", 3),
            ("ui-view", 2),
            ("ui-component", 2),
            ("ui-flow", 1),
            ("requirement", 2),
            ("objective", 1),
            ("prd", 1),
            ("nfr", 1),
            ("value-unit", 1),
            ("release", 1),
            ("adr", 2),
            ("implementation-charter", 1),
            ("feature", 2),
        ],
    );
    assert_eq!(g.nodes.len(), 48);
    for id in [
        "Entity:Pedido",
        "Role:Cliente",
        "System:STRIPE",
        "BR:BR-PRECIO-001",
        "BR:BR-003-RefundToOriginalMethod",
        "CMD:CMD-003",
        "UC:UC-003",
        "UI:UI-Checkout",
        "UI:ResumenPedido",
        "ADR:ADR-0002",
        "ARCH:ARCH-CHARTER-Tienda",
    ] {
        assert!(g.node(id).is_some(), "missing node {id}");
    }

    // Exactly two upward layer violations and one orphan.
    assert_eq!(
        violations(&g),
        [
            ("BR:BR-DEVOLUCION-001".to_string(), "UC:UC-003".to_string()),
            ("Entity:Pedido".to_string(), "CMD:CMD-002".to_string()),
        ]
    );
    assert_eq!(
        orphans(&g),
        [("UC:UC-001".to_string(), "CMD-009-AplicarCupon".to_string())]
    );
    // Links in inline code and fences, and same-document anchors, are not links.
    assert!(!g.nodes.iter().any(|n| n.id.contains('#')));

    // Key typed edges.
    for ev in [
        "EVT:EVT-Pedido-Creado",
        "EVT:EVT-Pedido-Confirmado",
        "EVT:EVT-Pedido-Enviado",
        "EVT:EVT-Pedido-Cancelado",
    ] {
        edge(&g, "Entity:Pedido", ev, "EMITS");
    }
    edge(&g, "CMD:CMD-001", "EVT:EVT-Pedido-Creado", "EMITS");
    edge(&g, "CMD:CMD-003", "EVT:EVT-Devolucion-Solicitada", "EMITS");
    edge(&g, "BR:BR-PRECIO-001", "Entity:Pedido", "ENTITY_RULE");
    edge(
        &g,
        "BR:BR-DEVOLUCION-001",
        "Entity:Devolucion",
        "ENTITY_RULE",
    );
    edge(&g, "BP:BP-ENVIO-001", "Entity:Pedido", "ENTITY_POLICY");
    edge(&g, "UC:UC-003", "BR:BR-DEVOLUCION-001", "UC_APPLIES_RULE");
    edge(
        &g,
        "UC:UC-003",
        "BR:BR-003-RefundToOriginalMethod",
        "UC_APPLIES_RULE",
    );
    edge(&g, "UC:UC-002", "BR:BR-PEDIDO-001", "UC_APPLIES_RULE");
    edge(&g, "UC:UC-003", "CMD:CMD-003", "UC_EXECUTES_CMD");
    edge(&g, "UC:UC-003", "CMD:CMD-004", "UC_EXECUTES_CMD");
    edge(&g, "UC:UC-001", "CMD:CMD-001", "UC_EXECUTES_CMD");
    edge(&g, "UC:UC-001", "OBJ:OBJ-001", "UC_STORY");
    edge(&g, "UI:UI-Checkout", "UC:UC-001", "VIEW_TRIGGERS_UC");
    edge(
        &g,
        "UI:UI-DetallePedido",
        "UI:ResumenPedido",
        "VIEW_USES_COMPONENT",
    );
    edge(
        &g,
        "UI:ResumenPedido",
        "Entity:Pedido",
        "COMPONENT_USES_ENTITY",
    );
    edge(&g, "REQ:REQ-001", "UC:UC-001", "REQ_TRACES_TO");
    edge(&g, "REQ:REQ-002", "CMD:CMD-004", "REQ_TRACES_TO");
    edge(&g, "ADR:ADR-0001", "System:STRIPE", "DECIDES_FOR");
    // `[[Devolucion#Ciclo de Vida]]` resolves to the entity; `[[charter]]` to the charter.
    assert!(linked(&g, "UC:UC-003", "Entity:Devolucion"));
    assert!(linked(&g, "ADR:ADR-0002", "ARCH:ARCH-CHARTER-Tienda"));
    // STRIPE (01) → ADR-0001 (00) is not a violation.
    assert!(g
        .edges
        .iter()
        .any(|e| e.from == "System:STRIPE" && e.to == "ADR:ADR-0001" && !e.layer_violation));

    // SCN-RetrieveImpact-001: Pedido is reached from BR, CMD, EVT and UC nodes.
    let i = g.index_of("Entity:Pedido").unwrap();
    let mut from_kinds: Vec<Kind> = g
        .in_edges(i)
        .filter_map(|e| g.node(&e.from).map(|n| n.kind))
        .collect();
    from_kinds.sort();
    from_kinds.dedup();
    for k in [
        Kind::BusinessRule,
        Kind::Command,
        Kind::Event,
        Kind::UseCase,
    ] {
        assert!(from_kinds.contains(&k), "{k} missing in {from_kinds:?}");
    }
}

#[test]
fn specs_multi_corpus_matches_expected_md() {
    let (_repo, g) = indexed("specs-multi");
    expect_kinds(
        &g,
        &[
            ("entity", 5),
            ("event", 3),
            ("business-rule", 3),
            ("command", 3),
            ("use-case", 3),
            ("requirement", 1),
            ("ui-view", 1),
            ("cross-policy", 1),
            ("glossary", 1),
        ],
    );
    for id in [
        "core:CMD:CMD-001",
        "auth:CMD:CMD-001",
        "billing:CMD:CMD-001",
        "core:Entity:Customer",
        "billing:Entity:Customer",
        "auth:Entity:Token",
        "_shared:XP:XP-001-AuditTrail",
    ] {
        assert!(g.node(id).is_some(), "missing node {id}");
    }
    // Same-name entity: unqualified `[[Customer]]` resolves in the writer's domain, then core.
    assert!(linked(
        &g,
        "billing:Entity:Invoice",
        "billing:Entity:Customer"
    ));
    assert!(!linked(
        &g,
        "billing:Entity:Invoice",
        "core:Entity:Customer"
    ));
    assert!(linked(&g, "auth:UC:UC-001", "core:Entity:Customer"));
    // Qualified links are cross-domain references.
    edge(
        &g,
        "auth:Entity:Token",
        "core:Entity:Customer",
        "CROSS_DOMAIN_REF",
    );
    edge(
        &g,
        "billing:UC:UC-001",
        "auth:Entity:Token",
        "CROSS_DOMAIN_REF",
    );
    assert!(linked(
        &g,
        "billing:UC:UC-001",
        "_shared:XP:XP-001-AuditTrail"
    ));
    assert!(linked(&g, "core:UC:UC-001", "_shared:XP:XP-001-AuditTrail"));
    edge(
        &g,
        "billing:CMD:CMD-001",
        "billing:EVT:EVT-Invoice-Issued",
        "EMITS",
    );
    assert_eq!(violations(&g), Vec::<(String, String)>::new());
    assert_eq!(
        orphans(&g),
        [("billing:UC:UC-001".to_string(), "Lead".to_string())]
    );
}

#[test]
fn specs_v2_corpus_matches_expected_md() {
    let (_repo, g) = indexed("specs-v2");
    expect_kinds(
        &g,
        &[
            ("entity", 2),
            ("role", 1),
            ("event", 2),
            ("business-rule", 2),
            ("command", 2),
            ("query", 1),
            ("use-case", 2),
            ("ui-view", 1),
            ("requirement", 1),
            ("objective", 1),
            ("prd", 1),
            ("adr", 1),
        ],
    );
    let uc = g.node("UC:UC-001").expect("UC:UC-001");
    assert_eq!(uc.title, "UC-001: Book a meeting room");
    assert_eq!(g.node("Entity:Reservation").unwrap().title, "Reservation");
    assert_eq!(violations(&g), Vec::<(String, String)>::new());
    assert_eq!(orphans(&g), Vec::<(String, String)>::new());
    edge(
        &g,
        "Entity:Reservation",
        "EVT:EVT-Reservation-Confirmed",
        "EMITS",
    );
    edge(&g, "CMD:CMD-001", "EVT:EVT-Reservation-Confirmed", "EMITS");
    edge(&g, "BR:BR-001-NoOverlap", "Entity:Room", "ENTITY_RULE");
    edge(&g, "UC:UC-001", "BR:BR-001-NoOverlap", "UC_APPLIES_RULE");
    edge(&g, "UC:UC-001", "OBJ:OBJ-001", "UC_STORY");
    edge(&g, "REQ:REQ-001", "BR:BR-001-NoOverlap", "REQ_TRACES_TO");
    edge(&g, "UI:UI-RoomFinder", "UC:UC-001", "VIEW_TRIGGERS_UC");
}

fn tree_bytes(root: &Path) -> BTreeMap<String, Vec<u8>> {
    util::tree(root)
}

#[test]
fn synth_is_deterministic_and_shaped_like_a_corpus() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let sa = synth::generate(a.path(), 400, 7).unwrap();
    let sb = synth::generate(b.path(), 400, 7).unwrap();
    assert_eq!(tree_bytes(a.path()), tree_bytes(b.path()));
    assert_eq!(sa.files, 400);
    assert_eq!(sb.files, 400);
    // Every kind appears, sizes are realistic, links are plentiful.
    assert!(sa.per_kind.len() >= 24, "{:?}", sa.per_kind);
    let mean = sa.bytes / sa.files as u64;
    assert!((1500..=4200).contains(&mean), "mean {mean}");
    assert!(sa.links > 400 * 3, "{}", sa.links);
    assert!(sa.orphans >= 1 && sa.violations >= 1, "{sa:?}");
    // A different seed gives a different corpus; a re-run over its own output is allowed.
    let sc = synth::generate(a.path(), 400, 8).unwrap();
    assert_eq!(sc.files, 400);
    assert_ne!(tree_bytes(a.path()), tree_bytes(b.path()));
    // It refuses to write into a foreign non-empty specs folder.
    let c = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(c.path().join("specs")).unwrap();
    std::fs::write(c.path().join("specs/mine.md"), "x").unwrap();
    assert!(synth::generate(c.path(), 10, 1).is_err());
}

#[test]
fn synth_corpus_indexes_with_planted_problems_only() {
    for domains in [0, 3] {
        let repo = util::git_repo();
        let stats = synth::generate_with(
            repo.path(),
            &synth::Options {
                n: 300,
                seed: 11,
                domains,
            },
        )
        .unwrap();
        let o = kdd(repo.path(), &["index"]);
        assert!(o.status.success(), "{}", text(&o));
        let (g, errors) = Graph::load(&repo.path().join(".kdd-index")).expect("loads");
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(g.nodes.len(), stats.files, "domains={domains}");
        assert!(g.duplicates.is_empty(), "{:?}", g.duplicates);
        assert_eq!(orphans(&g).len(), stats.orphans, "{:?}", orphans(&g));
        assert_eq!(
            violations(&g).len(),
            stats.violations,
            "{:?}",
            violations(&g)
        );
    }
}
