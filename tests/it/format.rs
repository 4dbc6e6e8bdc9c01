//! Artifact format v2 and its compatibility with v1 (issue 15), on the golden fixtures of
//! `fixtures/format/` (see its README): `v1/` was written by the last kdd of format v1, `v2/` and
//! `demo-v2/` by this one, all with the hashed test embedder (`KDD_TEST_EMBEDDER=1`) so the
//! vectors are deterministic without the model.
//!
//! - a v1 index answers like its v2 migration (same graph, same lexical/graph answers, semantic
//!   answers over the same specs);
//! - `kdd index` migrates v1 to exactly the v2 golden bytes, re-embedding nothing;
//! - the merge driver merges a branch still on v1 with one on v2 into v2, without conflicts;
//! - the demo corpus' v2 artifacts are byte-stable;
//! - crafted v2 files (other model, truncated vectors, bad edge lines) are named errors.

use crate::repo::Repo;
use crate::util::{copy_dir, fixture, git, git_repo, kdd_env, text, tree};
use std::path::Path;

const TEST: &[(&str, &str)] = &[("KDD_TEST_EMBEDDER", "1")];
const NO_EMBED: &[(&str, &str)] = &[("KDD_NO_EMBED", "1")];

/// A committed repository holding the format corpus and the golden index `version`.
fn repo_with_index(version: &str) -> tempfile::TempDir {
    let dir = git_repo();
    copy_dir(&fixture("format/specs"), &dir.path().join("specs"));
    copy_dir(
        &fixture(&format!("format/{version}")),
        &dir.path().join(".kdd-index"),
    );
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", version]);
    dir
}

fn stdout_of(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> String {
    let o = kdd_env(dir, args, envs);
    assert!(o.status.success(), "kdd {args:?}: {}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

fn result_ids(json: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let mut ids: Vec<String> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["node_id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

#[test]
fn v1_index_answers_like_v2() {
    let (v1, v2) = (repo_with_index("v1"), repo_with_index("v2"));
    // The v1 manifest is read as it is: nothing is stale (its 256-bit hashes still match).
    for args in [
        &["status", "--json"][..],
        &["impact", "Entity:Pedido", "--json"][..],
        &["query", "factura del pedido", "--json"][..],
    ] {
        assert_eq!(
            stdout_of(v1.path(), args, NO_EMBED),
            stdout_of(v2.path(), args, NO_EMBED),
            "kdd {args:?}"
        );
    }
    // Semantic answers read the v1 int8 vectors and the v2 binary ones: the same specs come
    // back (scores differ with the quantisation).
    let q = ["query", "factura del pedido", "--json"];
    let (a, b) = (
        stdout_of(v1.path(), &q, TEST),
        stdout_of(v2.path(), &q, TEST),
    );
    assert_eq!(result_ids(&a), result_ids(&b));
    assert!(result_ids(&a).len() >= 4, "{a}");
    let (g1, e1) = kdd::graph::Graph::load(&v1.path().join(".kdd-index")).unwrap();
    let (g2, e2) = kdd::graph::Graph::load(&v2.path().join(".kdd-index")).unwrap();
    assert!(e1.is_empty() && e2.is_empty(), "{e1:?} {e2:?}");
    let ids = |g: &kdd::graph::Graph| g.nodes.iter().map(|n| n.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&g1), ids(&g2));
    assert_eq!(format!("{:?}", g1.edges), format!("{:?}", g2.edges));
    assert_eq!(format!("{:?}", g1.orphans), format!("{:?}", g2.orphans));
}

#[test]
fn kdd_index_migrates_v1_to_the_v2_golden_reusing_every_vector() {
    let dir = repo_with_index("v1");
    let o = kdd_env(dir.path(), &["index"], TEST);
    assert!(o.status.success(), "{}", text(&o));
    // Every v1 vector is reused; only the event's identity vector (which v1 predates) is new.
    assert!(
        text(&o).contains("1 embedded, 7 reused"),
        "migration re-embedded: {}",
        text(&o)
    );
    assert_eq!(
        tree(&dir.path().join(".kdd-index")),
        tree(&fixture("format/v2"))
    );
    // And a second run writes nothing.
    let o = kdd_env(dir.path(), &["index"], TEST);
    assert!(
        text(&o).contains("0 artifact files written"),
        "{}",
        text(&o)
    );
}

#[test]
fn demo_v2_artifacts_are_byte_stable() {
    let dir = git_repo();
    copy_dir(&fixture("demo/specs"), &dir.path().join("specs"));
    let o = kdd_env(dir.path(), &["index"], TEST);
    assert!(o.status.success(), "{}", text(&o));
    let got = tree(&dir.path().join(".kdd-index"));
    let want = tree(&fixture("format/demo-v2"));
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    let differing: Vec<&String> = got.keys().filter(|k| got[*k] != want[*k]).collect();
    assert!(differing.is_empty(), "v2 artifacts differ: {differing:?}");
}

#[test]
fn merge_driver_merges_a_v1_branch_with_a_v2_branch_into_v2() {
    let r = Repo::new();
    r.git(&["config", "merge.kdd.name", "kdd index merge driver"]);
    r.git(&["config", "merge.kdd.driver", "kdd-merge-driver %O %A %B %P"]);
    r.write(".gitattributes", ".kdd-index/** merge=kdd\n");
    copy_dir(&fixture("format/specs"), &r.dir.join("specs"));
    copy_dir(&fixture("format/v1"), &r.dir.join(".kdd-index"));
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "v1 index"]);
    // Branch v2: a spec gains a link and `kdd index` migrates everything.
    r.git(&["checkout", "-qb", "v2"]);
    let pedido = "specs/01-domain/entities/Pedido.md";
    let text_v2 = r.read(pedido).replace(
        "placed by a [[Cliente]]",
        "placed by a [[Cliente]] for a [[Producto]]",
    );
    r.write(pedido, &text_v2);
    let o = kdd_env(&r.dir, &["index"], TEST);
    assert!(o.status.success(), "{}", text(&o));
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "v2 index"]);
    // main stays on v1: a v1 kdd added a link line to Cliente's edges.
    r.git(&["checkout", "-q", "main"]);
    let edges = ".kdd-index/edges/entity/Cliente.jsonl";
    let mut v1_edges = r.read(edges);
    v1_edges.push_str("{\"type\":\"WIKI_LINK\",\"to\":\"Tienda\"}\n");
    r.write(edges, &v1_edges);
    r.git(&["commit", "-qam", "v1 change"]);
    let o = r.git_out(&["merge", "-q", "--no-edit", "v2"]);
    assert!(o.status.success(), "{:?}", crate::repo::text(&o));
    let merged = tree(&r.dir.join(".kdd-index"));
    for (rel, bytes) in &merged {
        assert!(!bytes.starts_with(b"<<<<<<<"), "{rel}");
        assert!(!bytes.windows(8).any(|w| w == b"\n<<<<<<<"), "{rel}");
    }
    let manifest: serde_json::Value = serde_json::from_slice(&merged["manifest.json"]).unwrap();
    assert_eq!(manifest["format_version"], 2);
    let cliente = String::from_utf8(merged["edges/entity/Cliente.jsonl"].clone()).unwrap();
    assert!(cliente.contains("\"Tienda\""), "{cliente}");
    assert!(!cliente.contains("\"to\":\""), "v1 line left: {cliente}");
    let pedido_edges = String::from_utf8(merged["edges/entity/Pedido.jsonl"].clone()).unwrap();
    assert!(pedido_edges.contains("\"Producto\""), "{pedido_edges}");
    // Every merged file is v2: the same bytes a v2 index of the merged specs writes, except
    // the v1-only link the specs do not hold.
    for (rel, bytes) in &merged {
        if rel.starts_with("nodes/") {
            assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1, "{rel}");
        }
        if rel.starts_with("embeddings/") {
            assert_eq!(&bytes[4..6], &2u16.to_le_bytes(), "{rel}");
        }
    }
}

#[test]
fn crafted_v2_files_are_named_errors() {
    let dir = repo_with_index("v2");
    let idx = dir.path().join(".kdd-index");
    // Vectors of another model (fingerprint), truncated vectors, a bad v2 edge line.
    let other = kdd::embed::encode(&kdd::embed::VectorFile::new(
        "another-model",
        64,
        vec![kdd::embed::store::Record::quantize([1; 8], &[0.5; 64])],
    ));
    std::fs::write(idx.join("embeddings/entity/Cliente.bin"), other).unwrap();
    let pedido = std::fs::read(idx.join("embeddings/entity/Pedido.bin")).unwrap();
    std::fs::write(
        idx.join("embeddings/entity/Pedido.bin"),
        &pedido[..pedido.len() - 3],
    )
    .unwrap();
    std::fs::write(
        idx.join("edges/event/EVT-Cliente-Registrado.jsonl"),
        "{\"type\":\"WIKI_LINK\",\"to\":[1,2]}\n",
    )
    .unwrap();
    // A node naming a path outside the repository (no spec of it exists, nothing is read).
    std::fs::write(
        idx.join("nodes/entity/Crafted.json"),
        "{\"id\":\"Entity:Crafted\",\"kind\":\"entity\",\"source_file\":\"../../../../etc/passwd\",\"source_hash\":\"00000000000000000000000000000000\",\"title\":\"factura crafted\",\"layer\":\"01-domain\"}\n",
    )
    .unwrap();
    let o = kdd_env(dir.path(), &["query", "factura del pedido", "--json"], TEST);
    let all = text(&o);
    assert!(
        !all.contains("Entity:Crafted"),
        "a crafted node was listed: {all}"
    );
    for named in [
        "embeddings/entity/Cliente.bin",
        "embeddings/entity/Pedido.bin",
        "edges/event/EVT-Cliente-Registrado.jsonl",
        "nodes/entity/Crafted.json: node left out",
    ] {
        assert!(all.contains(named), "{named} not named: {all}");
    }
    // One bad file never aborts the run: the other specs still answer.
    assert!(o.status.success(), "{all}");
    assert!(result_ids(&String::from_utf8(o.stdout).unwrap())
        .contains(&"billing:UC:UC-001".to_string()));
}
