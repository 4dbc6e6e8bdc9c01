//! Core: parse → extract → `.kdd-index/` artifacts → graph, through the real `kdd` binary and
//! the library API, on the `fixtures/core-*` corpora (Spanish PRD-era, English v2,
//! multi-domain), hostile input, and the real corpora in `../shared` when present.

use crate::util::{self, kdd, text};
use kdd::config::Settings;
use kdd::graph::Graph;
use kdd::index::{self, SpecSource};
use std::path::Path;

fn index_ok(dir: &Path) {
    let o = kdd(dir, &["index"]);
    assert!(o.status.success(), "{}", text(&o));
}

fn graph(dir: &Path) -> Graph {
    let (g, errors) = Graph::load(&dir.join(".kdd-index")).expect("index loads");
    assert!(errors.is_empty(), "{errors:?}");
    g
}

fn has_edge(g: &Graph, from: &str, to: &str, t: &str) -> bool {
    g.edges
        .iter()
        .any(|e| e.from == from && e.to == to && e.edge_type == t)
}

fn edge<'a>(g: &'a Graph, from: &str, to: &str, t: &str) -> &'a kdd::graph::Edge {
    g.edges
        .iter()
        .find(|e| e.from == from && e.to == to && e.edge_type == t)
        .unwrap_or_else(|| {
            let out: Vec<_> = g
                .edges
                .iter()
                .filter(|e| e.from == from)
                .map(|e| format!("{} -{}-> {}", e.from, e.edge_type, e.to))
                .collect();
            panic!("no {t} edge {from} -> {to}; edges from {from}: {out:#?}")
        })
}

#[test]
fn scn_index_entity_001_entity_with_lifecycle_gives_node_and_edges() {
    let repo = util::repo_with_fixture("core-es");
    index_ok(repo.path());
    let g = graph(repo.path());
    let n = g.node("Entity:Pedido").expect("Entity:Pedido");
    assert_eq!(n.kind, kdd::spec::Kind::Entity);
    assert_eq!(n.aliases, ["Orden", "Order"]);
    assert_eq!(n.status.as_deref(), Some("approved"));
    assert!(repo
        .path()
        .join(".kdd-index/nodes/entity/Pedido.json")
        .is_file());
    for t in ["WIKI_LINK", "DOMAIN_RELATION", "pertenece_a"] {
        edge(&g, "Entity:Pedido", "Entity:Usuario", t);
    }
    edge(&g, "Entity:Pedido", "Entity:LineaPedido", "contiene");
    edge(&g, "Entity:Pedido", "EVT:EVT-Pedido-Creado", "EMITS");
    edge(&g, "Entity:Pedido", "EVT:EVT-Pedido-Confirmado", "EMITS");
    edge(&g, "Entity:Pedido", "EVT:EVT-Pago-Completado", "CONSUMES");
    // `[[NoEsEnlace]]` is in a code span: no edge, no orphan.
    assert!(
        !g.orphans.iter().any(|o| o.to == "NoEsEnlace"),
        "{:?}",
        g.orphans
    );
    // `[[#Descripción]]` is a same-document anchor: no edge and no `Entity:#…` node.
    assert!(!g.nodes.iter().any(|n| n.id.contains('#')));
    // Indexed fields are re-derived from the spec (they are not committed).
    let path = "specs/01-domain/entities/Pedido.md";
    let bytes = std::fs::read(repo.path().join(path)).unwrap();
    let ex = kdd::extract::extract(path, &bytes, "specs").unwrap();
    let desc = ex.fields["description"].as_str().unwrap();
    assert!(desc.contains("pedido de compra"), "{desc}");
    let rel = &ex.fields["relations"][0];
    assert_eq!(rel["relation"], "pertenece_a");
    assert_eq!(rel["cardinality"], "N:1");
    assert_eq!(rel["target"], "Usuario");
    let sm = &ex.fields["state_machine"];
    assert_eq!(sm["transitions"][0]["to"], "confirmado");
    assert_eq!(ex.fields["invariants"].as_array().unwrap().len(), 2);
    assert_eq!(ex.fields["attributes"][2]["Tipo"], "Usuario");
    assert_eq!(ex.fields["emits"][0], "EVT-Pedido-Creado");
    assert_eq!(ex.fields["consumes"][0], "EVT-Pago-Completado");
}

#[test]
fn scn_layer_validation_001_upward_links_are_flagged_from_real_layers() {
    let repo = util::repo_with_fixture("core-es");
    index_ok(repo.path());
    let g = graph(repo.path());
    // 02 → 01: valid.
    assert!(!edge(&g, "UC:UC-001", "Entity:Pedido", "WIKI_LINK").layer_violation);
    // 01 → 02: violation (the file-stem link resolves to the real node UC:UC-001).
    assert!(edge(&g, "Entity:Pedido", "UC:UC-001", "WIKI_LINK").layer_violation);
    assert!(edge(&g, "BR:BR-PEDIDO-001", "CMD:CMD-001", "WIKI_LINK").layer_violation);
    // 00 and 05 are outside the flow.
    assert!(!edge(&g, "PRD:PRD-Tienda", "UC:UC-001", "WIKI_LINK").layer_violation);
    assert!(!edge(&g, "ADR:ADR-0001", "CMD:CMD-001", "DECIDES_FOR").layer_violation);
    assert!(!edge(&g, "ARCH:ARCH-CHARTER-Tienda", "UC:UC-001", "WIKI_LINK").layer_violation);
    // 04 → 02 and 03 → 02: valid; typed edges are checked too.
    assert!(!edge(&g, "REQ:REQ-001", "UC:UC-001", "REQ_TRACES_TO").layer_violation);
    assert!(!edge(&g, "UI:UI-Checkout", "UC:UC-001", "VIEW_TRIGGERS_UC").layer_violation);
    let v: Vec<_> = g
        .violations()
        .map(|e| (e.from.as_str(), e.to.as_str()))
        .collect();
    assert!(v.iter().all(|(f, _)| {
        let n = g.node(f).unwrap();
        n.layer.rank().is_some()
    }));
    // `kdd status` lists them.
    let o = kdd(repo.path(), &["status", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["layer_violations"].as_array().unwrap().len(), v.len());
    assert_eq!(r["nodes"], g.nodes.len());
}

#[test]
fn scn_multi_domain_001_cross_domain_edges_and_qualified_ids() {
    let repo = util::repo_with_fixture("core-multi");
    index_ok(repo.path());
    let g = graph(repo.path());
    edge(
        &g,
        "auth:Entity:Token",
        "core:Entity:Usuario",
        "CROSS_DOMAIN_REF",
    );
    edge(
        &g,
        "auth:Entity:Token",
        "core:Entity:Usuario",
        "pertenece_a",
    );
    edge(
        &g,
        "auth:Entity:Token",
        "_shared:XP:XP-001-Audit",
        "CROSS_DOMAIN_REF",
    );
    // Unqualified: own domain first, then core, then _shared.
    edge(&g, "auth:CMD:CMD-001", "auth:Entity:Usuario", "WIKI_LINK");
    edge(
        &g,
        "sessions:Entity:Sesion",
        "core:Entity:Usuario",
        "WIKI_LINK",
    );
    edge(
        &g,
        "sessions:Entity:Sesion",
        "auth:Entity:Token",
        "CROSS_DOMAIN_REF",
    );
    edge(
        &g,
        "sessions:CMD:CMD-001",
        "auth:CMD:CMD-001",
        "CROSS_DOMAIN_REF",
    );
    edge(
        &g,
        "_shared:XP:XP-001-Audit",
        "core:Entity:Usuario",
        "ENTITY_POLICY",
    );
    // Another domain's node is not reachable unqualified: an orphan, not a guess.
    assert!(g
        .orphans
        .iter()
        .any(|o| o.from == "sessions:Entity:Sesion" && o.to == "Token"));
    assert!(repo
        .path()
        .join(".kdd-index/nodes/command/auth/CMD-001.json")
        .is_file());
    assert!(repo
        .path()
        .join(".kdd-index/nodes/command/sessions/CMD-001.json")
        .is_file());
    let m: serde_json::Value = serde_json::from_slice(
        &std::fs::read(repo.path().join(".kdd-index/manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["structure"], "multi-domain");
    assert_eq!(
        m["domains"],
        serde_json::json!(["_shared", "auth", "core", "sessions"])
    );
}

#[test]
fn every_kind_in_both_heading_languages() {
    use kdd::spec::Kind::*;
    let es = util::repo_with_fixture("core-es");
    let en = util::repo_with_fixture("core-en");
    index_ok(es.path());
    index_ok(en.path());
    let ges = graph(es.path());
    let gen = graph(en.path());
    let kinds = |g: &Graph| g.kind_counts().into_keys().collect::<Vec<_>>();
    for k in [
        Entity,
        Event,
        BusinessRule,
        BusinessPolicy,
        CrossPolicy,
        Command,
        Query,
        Process,
        UseCase,
        UiView,
        UiComponent,
        Requirement,
        Objective,
        Prd,
        Adr,
        ImplementationCharter,
        Feature,
    ] {
        assert!(kinds(&ges).contains(&k), "es fixture lacks {k}");
        assert!(kinds(&gen).contains(&k), "en fixture lacks {k}");
    }
    for k in [Role, System, Nfr, ValueUnit, Release, UiFlow, Glossary] {
        assert!(kinds(&gen).contains(&k), "en fixture lacks {k}");
    }
    assert!(ges.orphans.iter().all(|o| o.to == "SCN-Checkout-001") || ges.orphans.is_empty());
    assert!(gen.orphans.is_empty(), "{:?}", gen.orphans);
    // v2 English headings give typed edges the upstream engine misses.
    edge(
        &gen,
        "BR:BR-001-MinOrderAmount",
        "Entity:Order",
        "ENTITY_RULE",
    );
    edge(
        &gen,
        "UC:UC-001",
        "BR:BR-001-MinOrderAmount",
        "UC_APPLIES_RULE",
    );
    edge(
        &gen,
        "UC:UC-001",
        "BP:BP-001-VolumeDiscount",
        "UC_APPLIES_RULE",
    );
    edge(&gen, "UC:UC-001", "CMD:CMD-001", "UC_EXECUTES_CMD");
    edge(&gen, "UC:UC-001", "OBJ:OBJ-001", "UC_STORY");
    edge(&gen, "CMD:CMD-001", "EVT:EVT-Order-Placed", "EMITS");
    edge(&gen, "Entity:Order", "EVT:EVT-Order-Placed", "EMITS");
    edge(&gen, "Entity:Order", "Role:Customer", "DOMAIN_RELATION");
    edge(&gen, "UI:UI-Cart", "UI:CartSummary", "VIEW_USES_COMPONENT");
    edge(&gen, "UI:UI-Cart", "UC:UC-001", "VIEW_TRIGGERS_UC");
    edge(
        &gen,
        "UI:CartSummary",
        "Entity:Order",
        "COMPONENT_USES_ENTITY",
    );
    edge(
        &gen,
        "UI:CheckoutFlow",
        "UI:CartSummary",
        "VIEW_USES_COMPONENT",
    );
    edge(&gen, "REQ:REQ-001", "UC:UC-001", "REQ_TRACES_TO");
    edge(
        &gen,
        "REQ:REQ-001",
        "BR:BR-001-MinOrderAmount",
        "REQ_TRACES_TO",
    );
    edge(&gen, "Feature:place-order", "UC:UC-001", "VALIDATES");
    edge(
        &gen,
        "Feature:place-order",
        "BR:BR-001-MinOrderAmount",
        "VALIDATES",
    );
    edge(&gen, "Feature:place-order", "CMD:CMD-001", "VALIDATES");
    edge(&gen, "ADR:ADR-0001", "Entity:Order", "DECIDES_FOR");
    // Spanish PRD-era equivalents.
    edge(&ges, "BR:BR-PEDIDO-001", "Entity:Pedido", "ENTITY_RULE");
    edge(
        &ges,
        "BP:BP-DESCUENTO-001",
        "Entity:Usuario",
        "ENTITY_POLICY",
    );
    edge(&ges, "XP:XP-AUDIT-001", "Entity:Pedido", "ENTITY_POLICY");
    edge(&ges, "UC:UC-001", "BR:BR-PEDIDO-001", "UC_APPLIES_RULE");
    edge(&ges, "UC:UC-001", "XP:XP-AUDIT-001", "UC_APPLIES_RULE");
    edge(&ges, "UC:UC-001", "CMD:CMD-001", "UC_EXECUTES_CMD");
    edge(&ges, "UC:UC-001", "OBJ:OBJ-001", "UC_STORY");
    edge(&ges, "PROC:PROC-001", "EVT:EVT-Pago-Completado", "CONSUMES");
    edge(
        &ges,
        "UI:UI-Checkout",
        "UI:CarritoResumen",
        "VIEW_USES_COMPONENT",
    );
    edge(
        &ges,
        "UI:CarritoResumen",
        "Entity:LineaPedido",
        "COMPONENT_USES_ENTITY",
    );
    edge(&ges, "Feature:checkout", "UC:UC-001", "VALIDATES");
    edge(&ges, "Feature:checkout", "BR:BR-PEDIDO-001", "VALIDATES");
    edge(
        &ges,
        "Feature:checkout",
        "EVT:EVT-Pedido-Creado",
        "VALIDATES",
    );
    // Doc strings in features are examples, never references.
    assert!(!ges.orphans.iter().any(|o| o.to.contains("INEXISTENTE")));
    // Section keys in both languages.
    let keys = |dir: &Path, path: &str| {
        let bytes = std::fs::read(dir.join(path)).unwrap();
        let ex = kdd::extract::extract(path, &bytes, "specs").unwrap();
        ex.fields
    };
    let f = keys(
        en.path(),
        "specs/02-behavior/use-cases/UC-001-PlaceOrder.md",
    );
    assert!(f["main_flow"].to_string().contains("confirms"));
    assert!(f["alternatives"].to_string().contains("Retry"));
    let f = keys(
        es.path(),
        "specs/02-behavior/use-cases/UC-001-RealizarPedido.md",
    );
    assert!(f["main_flow"].to_string().contains("confirma"));
    assert!(f["alternatives"].to_string().contains("Carrito"));
    let f = keys(en.path(), "specs/01-domain/rules/BR-001-MinOrderAmount.md");
    assert!(f["declaration"].as_str().unwrap().contains("must total"));
    let f = keys(es.path(), "specs/01-domain/rules/BR-PEDIDO-001.md");
    assert!(f["declaration"].as_str().unwrap().contains("al menos"));
    assert!(
        f.contains_key("rationale")
            && f.contains_key("violation")
            && f.contains_key("when_applies")
    );
    let f = keys(
        en.path(),
        "specs/04-verification/criteria/REQ-001-PlaceOrder.md",
    );
    assert!(f["requirements"].to_string().contains("SHALL reject"));
    let f = keys(en.path(), "specs/01-domain/entities/Order.md");
    assert_eq!(
        f["invariants"][0]["Constraint"],
        "Total equals the sum of its lines"
    );
    assert_eq!(f["state_machine"]["states"][1], "placed");
    let f = keys(
        en.path(),
        "specs/04-verification/examples/place-order.feature",
    );
    assert_eq!(f["scenarios"][0]["name"], "SCN-PlaceOrder-001 happy path");
}

#[test]
fn bad_input_is_reported_per_file_and_confined_to_the_index() {
    let repo = util::repo_with_fixture("core-en");
    let d = repo.path();
    let ent = d.join("specs/01-domain/entities");
    std::fs::write(
        ent.join("Malformed.md"),
        "---\nkind: entity\naliases: [a\n---\n# Malformed\n\nSee [[Order]].\n",
    )
    .unwrap();
    std::fs::write(
        ent.join("NoFrontMatter.md"),
        "# NoFrontMatter\n\nPlain [[Order]].\n",
    )
    .unwrap();
    std::fs::write(ent.join("Latin1.md"), b"# Caf\xe9\n\nSee [[Order]].\n").unwrap();
    std::fs::write(ent.join("Binary.md"), b"\x89PNG\r\n\x1a\n\0\0\0IHDR").unwrap();
    std::fs::write(ent.join("Empty.md"), b"").unwrap();
    let huge = vec![b'a'; 20 * 1024 * 1024];
    std::fs::write(ent.join("Huge.md"), &huge).unwrap();
    std::fs::write(
        ent.join("CycleA.md"),
        "---\nkind: entity\n---\n# CycleA\n\n[[CycleB]]\n",
    )
    .unwrap();
    std::fs::write(
        ent.join("CycleB.md"),
        "---\nkind: entity\n---\n# CycleB\n\n[[CycleA]]\n",
    )
    .unwrap();
    let rules = d.join("specs/01-domain/rules");
    std::fs::write(
        rules.join("BR-900-A.md"),
        "---\nid: BR-900\nkind: business-rule\n---\n# A\n",
    )
    .unwrap();
    std::fs::write(
        rules.join("BR-900-B.md"),
        "---\nid: BR-900\nkind: business-rule\n---\n# B\n",
    )
    .unwrap();
    let hostile = d.join("specs/01-domain/hostile");
    std::fs::create_dir_all(&hostile).unwrap();
    let long = "x".repeat(10_000);
    for (name, fm) in [
        (
            "Traversal.md",
            "id: ../../.git/hooks/pre-commit\nkind: entity".to_string(),
        ),
        ("Absolute.md", "id: /etc/passwd\nkind: entity".to_string()),
        ("Nul.md", "id: \"a\\0b\"\nkind: entity".to_string()),
        ("Long.md", format!("id: {long}\nkind: entity")),
        ("BadKind.md", "kind: ../../.git/x\nid: Fine".to_string()),
    ] {
        std::fs::write(hostile.join(name), format!("---\n{fm}\n---\n# {name}\n")).unwrap();
    }
    let outside_before: Vec<String> = util::tree(d)
        .into_keys()
        .filter(|p| !p.starts_with(".kdd-index/") && !p.starts_with(".git/objects/"))
        .collect();
    let o = kdd(d, &["index"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    for needle in [
        "Malformed.md:",
        "malformed YAML",
        "Latin1.md:1",
        "UTF-8",
        "Binary.md",
        "binary",
        "Huge.md",
        "over the 5 MB limit",
        "Empty.md",
        "BR-900-B.md",
        "duplicate id `BR:BR-900`",
        "specs/01-domain/rules/BR-900-A.md",
        "Traversal.md",
        "not a usable id",
        "unknown kind",
        "could not be indexed",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
    let outside_after: Vec<String> = util::tree(d)
        .into_keys()
        .filter(|p| !p.starts_with(".kdd-index/") && !p.starts_with(".git/objects/"))
        .collect();
    assert_eq!(
        outside_before, outside_after,
        "a write landed outside .kdd-index/"
    );
    let g = graph(d);
    for id in [
        "Entity:Malformed",
        "Entity:NoFrontMatter",
        "Entity:Latin1",
        "Entity:Empty",
        "Entity:CycleA",
        "Entity:CycleB",
        "Entity:Traversal",
        "Entity:Absolute",
        "Entity:Nul",
        "Entity:Long",
        "Entity:Order",
    ] {
        assert!(g.node(id).is_some(), "{id} not indexed\n{out}");
    }
    assert!(g.node("Entity:Binary").is_none() && g.node("Entity:Huge").is_none());
    assert_eq!(
        g.node("BR:BR-900").unwrap().source_file,
        "specs/01-domain/rules/BR-900-A.md"
    );
    edge(&g, "Entity:CycleA", "Entity:CycleB", "WIKI_LINK");
    edge(&g, "Entity:CycleB", "Entity:CycleA", "WIKI_LINK");
    edge(&g, "Entity:Malformed", "Entity:Order", "WIKI_LINK");
    // Every artifact path is made of sanitised components.
    for p in util::tree(&d.join(".kdd-index")).into_keys() {
        assert!(!p.contains("..") && p.len() < 200, "{p}");
    }
    // The rest of the repo is indexed.
    assert!(g.node("UC:UC-001").is_some());
    let doc = g
        .nodes
        .iter()
        .find(|n| n.source_file.ends_with("hostile/BadKind.md"))
        .unwrap();
    assert_eq!(doc.kind, kdd::spec::Kind::Document);
    assert_eq!(g.nodes.len(), 40 - 3);
}

#[test]
fn determinism_index_twice_and_on_two_clones_is_byte_identical() {
    let repo = util::repo_with_fixture("core-es");
    let d = repo.path();
    index_ok(d);
    let first = util::tree(&d.join(".kdd-index"));
    assert!(first.contains_key("manifest.json"));
    let o = kdd(d, &["--json", "index"]);
    assert!(o.status.success(), "{}", text(&o));
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        out["written"],
        serde_json::json!([]),
        "re-index rewrote files"
    );
    assert_eq!(out["removed"], serde_json::json!([]));
    assert_eq!(first, util::tree(&d.join(".kdd-index")));
    // No timestamps or machine-specific paths anywhere.
    for (p, bytes) in &first {
        let s = String::from_utf8_lossy(bytes);
        assert!(
            !s.contains(d.to_string_lossy().as_ref()),
            "{p} holds an absolute path"
        );
        assert!(!s.contains("indexed_at") && !s.contains("2026-"), "{p}");
    }
    util::git(d, &["add", "specs"]);
    util::git(d, &["commit", "-qm", "specs"]);
    for _ in 0..2 {
        let clone = tempfile::tempdir().unwrap();
        let target = clone.path().join("c");
        util::git(
            clone.path(),
            &["clone", "-q", d.to_str().unwrap(), target.to_str().unwrap()],
        );
        index_ok(&target);
        assert_eq!(first, util::tree(&target.join(".kdd-index")));
    }
}

#[test]
fn incremental_apply_lists_exact_paths_and_matches_a_full_index() {
    let repo = util::repo_with_fixture("core-es");
    let d = repo.path();
    let settings = Settings::discover(d, None).unwrap();
    index::full(&settings, &index::Options::default()).unwrap();
    // Change one spec, delete one, rename one (delete + add), add a duplicate id.
    let pedido = "specs/01-domain/entities/Pedido.md";
    let new_pedido = std::fs::read_to_string(d.join(pedido))
        .unwrap()
        .replace("Lo crea [[UC-001-RealizarPedido]].", "");
    std::fs::write(d.join(pedido), &new_pedido).unwrap();
    let qry = "specs/02-behavior/queries/QRY-001-ListarPedidos.md";
    std::fs::remove_file(d.join(qry)).unwrap();
    let old_cmd = "specs/02-behavior/commands/CMD-001-CrearPedido.md";
    let new_cmd = "specs/02-behavior/commands/CMD-002-CrearPedido.md";
    let cmd = std::fs::read_to_string(d.join(old_cmd))
        .unwrap()
        .replace("id: CMD-001", "id: CMD-002");
    std::fs::remove_file(d.join(old_cmd)).unwrap();
    std::fs::write(d.join(new_cmd), &cmd).unwrap();
    let out = index::apply(
        &settings,
        vec![
            SpecSource {
                path: pedido.into(),
                bytes: new_pedido.into_bytes(),
            },
            SpecSource {
                path: new_cmd.into(),
                bytes: cmd.into_bytes(),
            },
            SpecSource {
                path: "README.md".into(),
                bytes: b"not a spec".to_vec(),
            },
        ],
        vec![qry.into(), old_cmd.into()],
    )
    .unwrap();
    assert_eq!(
        out.written,
        [
            ".kdd-index/edges/command/CMD-002.jsonl",
            ".kdd-index/edges/entity/Pedido.jsonl",
            ".kdd-index/nodes/command/CMD-002.json",
            ".kdd-index/nodes/entity/Pedido.json",
        ]
    );
    assert_eq!(
        out.removed,
        [
            ".kdd-index/edges/command/CMD-001.jsonl",
            ".kdd-index/edges/query/QRY-001.jsonl",
            ".kdd-index/nodes/command/CMD-001.json",
            ".kdd-index/nodes/query/QRY-001.json",
        ]
    );
    assert_eq!((out.indexed, out.failed), (2, 0));
    let incremental = util::tree(&d.join(".kdd-index"));
    // A full index of the same work tree gives exactly the same bytes.
    std::fs::remove_dir_all(d.join(".kdd-index")).unwrap();
    index::full(&settings, &index::Options::default()).unwrap();
    assert_eq!(incremental, util::tree(&d.join(".kdd-index")));
    // Applying the same content again writes nothing.
    let again = index::apply(
        &settings,
        vec![SpecSource {
            path: pedido.into(),
            bytes: std::fs::read(d.join(pedido)).unwrap(),
        }],
        vec![],
    )
    .unwrap();
    assert!(
        again.written.is_empty() && again.removed.is_empty(),
        "{again:?}"
    );
    // A new file claiming an existing id with a later path loses, with an error naming both.
    let dup = "specs/01-domain/rules/zz-copy.md";
    let out = index::apply(
        &settings,
        vec![SpecSource {
            path: dup.into(),
            bytes: b"---\nid: BR-PEDIDO-001\nkind: business-rule\n---\n# Copy\n".to_vec(),
        }],
        vec![],
    )
    .unwrap();
    assert_eq!(out.failed, 1);
    assert!(out.written.is_empty());
    let msg = &out
        .diagnostics
        .iter()
        .find(|d| d.file == dup)
        .unwrap()
        .message;
    assert!(
        msg.contains("specs/01-domain/rules/BR-PEDIDO-001.md"),
        "{msg}"
    );
}

#[test]
fn status_reports_stale_nodes_unindexed_files_and_errors() {
    let repo = util::repo_with_fixture("core-en");
    let d = repo.path();
    let o = kdd(d, &["status"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("run `kdd index` first"));
    index_ok(d);
    std::fs::write(
        d.join("specs/01-domain/entities/Order.md"),
        "---\nkind: entity\n---\n# Order\n\nchanged\n",
    )
    .unwrap();
    std::fs::write(d.join("specs/01-domain/entities/Blob.md"), b"\0\0\0").unwrap();
    std::fs::remove_file(d.join("specs/01-domain/entities/STRIPE.md")).unwrap();
    let o = kdd(d, &["status", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let stale: Vec<(String, String)> = r["stale"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().into(),
                s["reason"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        stale,
        [
            ("Entity:Order".to_string(), "changed".to_string()),
            ("System:STRIPE".to_string(), "missing".to_string())
        ]
    );
    assert_eq!(
        r["unindexed"],
        serde_json::json!(["specs/01-domain/entities/Blob.md"])
    );
    assert!(r["files_with_errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("NUL"));
    assert_eq!(r["kinds"]["entity"], 2);
    let o = kdd(d, &["status"]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("stale nodes: 2") && t.contains("run `kdd index`"),
        "{t}"
    );
}

/// The real PRD-era corpus (54 files, Spanish): every file is a node, links to existing specs
/// all resolve, and the upward links upstream misses are flagged.
#[test]
#[cfg_attr(not(kdd_shared), ignore = "../shared (the shared corpus) is absent")]
fn real_corpus_kdd_engine_specs() {
    let shared = util::shared_dir().expect("build.rs saw ../shared");
    let src = shared.join("corpus/kdd-engine/specs");
    let repo = util::git_repo();
    let d = repo.path();
    util::copy_dir(&src, &d.join("specs"));
    index_ok(d);
    let g = graph(d);
    let files: Vec<String> = util::tree(&d.join("specs"))
        .into_keys()
        .filter(|p| p.ends_with(".md") || p.ends_with(".feature"))
        .collect();
    assert_eq!(files.len(), 54);
    assert_eq!(g.nodes.len(), files.len());
    for f in &files {
        let path = format!("specs/{f}");
        assert!(
            g.nodes.iter().any(|n| n.source_file == path),
            "{path} has no node"
        );
    }
    // Orphans only for specs that genuinely do not exist.
    let stems: Vec<String> = files
        .iter()
        .map(|f| {
            let file = f.rsplit('/').next().unwrap();
            file.rsplit_once('.').unwrap().0.to_lowercase()
        })
        .collect();
    for o in &g.orphans {
        let t = o.to.to_lowercase();
        assert!(
            !stems
                .iter()
                .any(|s| *s == t || s.starts_with(&format!("{t}-"))),
            "orphan {o:?} but a file for it exists"
        );
    }
    let v: Vec<String> = g
        .violations()
        .map(|e| format!("{} -> {}", e.from, e.to))
        .collect();
    assert!(
        (20..=30).contains(&v.len()),
        "{} violations: {v:#?}",
        v.len()
    );
    assert!(v.contains(&"Entity:RetrievalQuery -> QRY:QRY-001".to_string()));
    assert!(v.contains(&"BR:BR-INDEX-001 -> CMD:CMD-001".to_string()));
    assert!(v.contains(&"UC:UC-001 -> REQ:REQ-001".to_string()));
    edge(&g, "UC:UC-001", "CMD:CMD-001", "UC_EXECUTES_CMD");
    edge(&g, "UC:UC-001", "BR:BR-LAYER-001", "UC_APPLIES_RULE");
    edge(&g, "BR:BR-LAYER-001", "Entity:GraphEdge", "ENTITY_RULE");
    edge(&g, "Feature:layer-validation", "UC:UC-001", "VALIDATES");
    edge(&g, "Entity:GraphEdge", "Entity:GraphNode", "desde");
    // GraphEdge links to itself: self-loops are dropped.
    assert!(!has_edge(
        &g,
        "Entity:GraphEdge",
        "Entity:GraphEdge",
        "WIKI_LINK"
    ));
    assert!(!edge(&g, "PRD:PRD-KDDEngine", "UC:UC-001", "WIKI_LINK").layer_violation);
    // No code-span or placeholder links leaked.
    for bad in ["...", "Target", "domain::Entity", "Entity"] {
        assert!(!g.orphans.iter().any(|o| o.to == bad), "{bad} leaked");
    }
}

#[test]
#[cfg_attr(not(kdd_shared), ignore = "../shared (the shared corpus) is absent")]
fn real_corpus_kdd_standard_templates_index_without_crash() {
    let shared = util::shared_dir().expect("build.rs saw ../shared");
    let repo = util::git_repo();
    let d = repo.path();
    util::copy_dir(
        &shared.join("corpus/kdd-standard/templates"),
        &d.join("specs"),
    );
    let o = kdd(d, &["index"]);
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", text(&o));
    let g = graph(d);
    assert!(g.nodes.len() >= 17, "{}", g.nodes.len());
    let o = kdd(d, &["status"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// The bundled demo corpus against its answer key (`fixtures/demo/EXPECTED.md`).
#[test]
fn demo_corpus_matches_its_answer_key() {
    let repo = util::git_repo();
    let d = repo.path();
    util::copy_dir(&util::fixture("demo/specs"), &d.join("specs"));
    let settings = Settings::discover(d, None).unwrap();
    let out = index::full(&settings, &index::Options::default()).unwrap();
    assert_eq!((out.indexed, out.failed), (48, 0), "{:?}", out.diagnostics);
    let g = graph(d);
    let layers = |l: &str| g.nodes.iter().filter(|n| n.layer.as_str() == l).count();
    assert_eq!(
        [
            layers("00-requirements"),
            layers("01-domain"),
            layers("02-behavior"),
            layers("03-experience"),
            layers("04-verification"),
            layers("05-architecture")
        ],
        [6, 20, 11, 5, 4, 2]
    );
    let mut v: Vec<(&str, &str)> = g
        .violations()
        .map(|e| (e.from.as_str(), e.to.as_str()))
        .collect();
    v.dedup();
    assert_eq!(
        v,
        [
            ("BR:BR-DEVOLUCION-001", "UC:UC-003"),
            ("Entity:Pedido", "CMD:CMD-002")
        ]
    );
    let orphans: std::collections::BTreeSet<(&str, &str)> = g
        .orphans
        .iter()
        .map(|o| (o.from.as_str(), o.to.as_str()))
        .collect();
    assert_eq!(
        orphans.into_iter().collect::<Vec<_>>(),
        [("UC:UC-001", "CMD-009-AplicarCupon")]
    );
    let expect: &[(&str, &str, &[&str])] = &[
        (
            "Entity:Pedido",
            "EMITS",
            &[
                "EVT:EVT-Pedido-Creado",
                "EVT:EVT-Pedido-Confirmado",
                "EVT:EVT-Pedido-Enviado",
                "EVT:EVT-Pedido-Cancelado",
            ],
        ),
        (
            "Entity:Devolucion",
            "EMITS",
            &[
                "EVT:EVT-Devolucion-Solicitada",
                "EVT:EVT-Devolucion-Aprobada",
            ],
        ),
        ("Entity:Pago", "EMITS", &["EVT:EVT-Pago-Completado"]),
        ("CMD:CMD-001", "EMITS", &["EVT:EVT-Pedido-Creado"]),
        ("CMD:CMD-002", "EMITS", &["EVT:EVT-Pedido-Cancelado"]),
        (
            "CMD:CMD-003",
            "EMITS",
            &[
                "EVT:EVT-Devolucion-Solicitada",
                "EVT:EVT-Devolucion-Aprobada",
            ],
        ),
        (
            "BR:BR-PRECIO-001",
            "ENTITY_RULE",
            &["Entity:Pedido", "Entity:LineaPedido", "Entity:Producto"],
        ),
        (
            "BR:BR-PEDIDO-001",
            "ENTITY_RULE",
            &["Entity:Pedido", "Entity:Devolucion"],
        ),
        (
            "BR:BR-DEVOLUCION-001",
            "ENTITY_RULE",
            &["Entity:Devolucion", "Entity:Pedido", "Entity:Producto"],
        ),
        (
            "BR:BR-003-RefundToOriginalMethod",
            "ENTITY_RULE",
            &["Entity:Devolucion", "Entity:Pago", "Entity:Pedido"],
        ),
        ("BP:BP-ENVIO-001", "ENTITY_POLICY", &["Entity:Pedido"]),
        (
            "UC:UC-001",
            "UC_APPLIES_RULE",
            &["BR:BR-PRECIO-001", "BP:BP-ENVIO-001", "XP:XP-AUDITORIA-001"],
        ),
        (
            "UC:UC-002",
            "UC_APPLIES_RULE",
            &["BR:BR-PEDIDO-001", "BR:BR-003-RefundToOriginalMethod"],
        ),
        (
            "UC:UC-003",
            "UC_APPLIES_RULE",
            &[
                "BR:BR-DEVOLUCION-001",
                "BR:BR-003-RefundToOriginalMethod",
                "XP:XP-AUDITORIA-001",
            ],
        ),
        ("UC:UC-001", "UC_EXECUTES_CMD", &["CMD:CMD-001"]),
        (
            "UC:UC-002",
            "UC_EXECUTES_CMD",
            &["CMD:CMD-002", "CMD:CMD-004"],
        ),
        (
            "UC:UC-003",
            "UC_EXECUTES_CMD",
            &["CMD:CMD-003", "CMD:CMD-004"],
        ),
        ("UC:UC-001", "UC_STORY", &["OBJ:OBJ-001"]),
        ("UC:UC-003", "UC_STORY", &["OBJ:OBJ-001"]),
        ("UI:UI-Checkout", "VIEW_TRIGGERS_UC", &["UC:UC-001"]),
        (
            "UI:UI-DetallePedido",
            "VIEW_TRIGGERS_UC",
            &["UC:UC-002", "UC:UC-003"],
        ),
        (
            "UI:UI-Checkout",
            "VIEW_USES_COMPONENT",
            &["UI:ResumenPedido"],
        ),
        (
            "UI:UI-DetallePedido",
            "VIEW_USES_COMPONENT",
            &["UI:ResumenPedido", "UI:FormularioDevolucion"],
        ),
        (
            "UI:ResumenPedido",
            "COMPONENT_USES_ENTITY",
            &["Entity:Pedido", "Entity:LineaPedido"],
        ),
        (
            "UI:FormularioDevolucion",
            "COMPONENT_USES_ENTITY",
            &["Entity:Pedido"],
        ),
        (
            "REQ:REQ-001",
            "REQ_TRACES_TO",
            &["UC:UC-001", "BR:BR-PRECIO-001", "CMD:CMD-001"],
        ),
        (
            "REQ:REQ-002",
            "REQ_TRACES_TO",
            &[
                "UC:UC-003",
                "BR:BR-DEVOLUCION-001",
                "CMD:CMD-003",
                "CMD:CMD-004",
                "BR:BR-003-RefundToOriginalMethod",
            ],
        ),
        (
            "Feature:devolucion",
            "VALIDATES",
            &[
                "UC:UC-003",
                "BR:BR-DEVOLUCION-001",
                "CMD:CMD-003",
                "CMD:CMD-004",
                "BR:BR-003-RefundToOriginalMethod",
            ],
        ),
        (
            "Feature:realizar-pedido",
            "VALIDATES",
            &[
                "UC:UC-001",
                "BR:BR-PRECIO-001",
                "CMD:CMD-001",
                "BP:BP-ENVIO-001",
            ],
        ),
        (
            "ADR:ADR-0001",
            "DECIDES_FOR",
            &[
                "System:STRIPE",
                "Entity:Pago",
                "CMD:CMD-004",
                "BR:BR-003-RefundToOriginalMethod",
            ],
        ),
        (
            "ADR:ADR-0002",
            "DECIDES_FOR",
            &[
                "EVT:EVT-Pedido-Confirmado",
                "EVT:EVT-Devolucion-Aprobada",
                "Entity:Pedido",
                "CMD:CMD-004",
                "ARCH:ARCH-CHARTER-Tienda",
            ],
        ),
        (
            "Entity:Pedido",
            "DOMAIN_RELATION",
            &[
                "Role:Cliente",
                "Entity:LineaPedido",
                "Entity:Pago",
                "Entity:Devolucion",
            ],
        ),
        (
            "Entity:Devolucion",
            "DOMAIN_RELATION",
            &["Entity:Pedido", "Role:Cliente", "Entity:Pago"],
        ),
    ];
    for (from, t, tos) in expect {
        for to in *tos {
            edge(&g, from, to, t);
        }
    }
    edge(&g, "UC:UC-003", "Entity:Devolucion", "WIKI_LINK");
    assert!(!g
        .orphans
        .iter()
        .any(|o| o.to.contains("Factura") || o.to.contains("Archivado")));
    // Scenario ids resolve to their feature.
    assert_eq!(
        g.resolve_hint("SCN-SolicitarDevolucion-002")[0].id,
        "Feature:devolucion"
    );
    assert_eq!(g.resolve_hint("src/pedido.ts")[0].id, "Entity:Pedido");
    assert_eq!(g.resolve_hint("UC-003")[0].id, "UC:UC-003");
}
