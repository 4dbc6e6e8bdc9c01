//! Documents beyond KDD specs (`git config kdd.docs`, `kdd index --docs`) and `.kddignore`:
//! real git repositories and the real binaries over `fixtures/docs` (a spec linking a guide by
//! path and an ADR by title, a guide with Markdown links to the ADR and the spec, a README file
//! root, and one ignored spec and one ignored document).

use crate::repo::{text, Repo};
use crate::util::{copy_dir, fixture};

/// `fixtures/docs` in a fresh repository with kdd installed and `kdd.docs` configured.
fn docs_repo() -> Repo {
    let r = Repo::new();
    copy_dir(&fixture("docs"), &r.dir);
    let o = r.kdd(&["install"]);
    assert!(o.status.success(), "{:?}", text(&o));
    r.git(&["config", "kdd.docs", "docs, adr ,README.md"]);
    r
}

fn json(o: &std::process::Output) -> serde_json::Value {
    let (out, err) = text(o);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{out}\n{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"))
}

/// `(from, type, to)` of every edge around `node` at depth 1.
fn edges(r: &Repo, node: &str) -> Vec<(String, String, String)> {
    let g = json(&r.kdd(&["--json", "graph", node, "--depth", "1"]));
    let mut v: Vec<_> = g["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap().to_string();
            (s("from_node"), s("edge_type"), s("to_node"))
        })
        .collect();
    v.sort();
    v
}

fn has(v: &[(String, String, String)], from: &str, to: &str) -> bool {
    v.iter().any(|(f, _, t)| f == from && t == to)
}

#[test]
fn documents_are_indexed_linked_and_searchable() {
    let r = docs_repo();
    let o = r.kdd(&["index"]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    for node in [
        "nodes/document/docs.guides.setup.json",
        "nodes/document/adr.0001-storage.json",
        "nodes/document/README.json",
        "nodes/entity/Pedido.json",
    ] {
        assert!(r.exists(&format!(".kdd-index/{node}")), "{node}");
    }
    // `.kddignore` of the specs root and of a documents root.
    assert!(!r.exists(".kdd-index/nodes/entity/Borrador.json"));
    assert!(!r.exists(".kdd-index/nodes/document/docs.drafts.wip.json"));
    let m: serde_json::Value = serde_json::from_str(&r.read(".kdd-index/manifest.json")).unwrap();
    assert_eq!(m["docs"], serde_json::json!(["README.md", "adr", "docs"]));
    // Documents need no front-matter and get no "missing kind" warning.
    assert!(!err.contains("no `kind`"), "{err}");

    // Wiki links from a spec (by path, by title) and Markdown links from documents.
    let e = edges(&r, "Doc:docs.guides.setup");
    assert!(has(&e, "Entity:Pedido", "Doc:docs.guides.setup"), "{e:?}");
    assert!(
        has(&e, "Doc:docs.guides.setup", "Doc:adr.0001-storage"),
        "{e:?}"
    );
    assert!(has(&e, "Doc:docs.guides.setup", "Entity:Pedido"), "{e:?}");
    assert!(
        has(&e, "Doc:adr.0001-storage", "Doc:docs.guides.setup"),
        "{e:?}"
    );
    assert!(has(&e, "Doc:README", "Doc:docs.guides.setup"), "{e:?}");
    assert!(has(
        &edges(&r, "Entity:Pedido"),
        "Entity:Pedido",
        "Doc:adr.0001-storage"
    ));
    // The external link is no edge and no orphan.
    let orphans = r.kdd(&["--json", "orphans"]);
    assert!(
        !text(&orphans).0.contains("example.invalid"),
        "{:?}",
        text(&orphans)
    );

    // Search: hybrid and lexical hits of kind `document`; ignored files never answer.
    let q = json(&r.kdd(&["--json", "query", "install the warehouse connector"]));
    assert_eq!(q["results"][0]["node_id"], "Doc:docs.guides.setup", "{q}");
    assert_eq!(q["results"][0]["kind"], "document", "{q}");
    let s = json(&r.kdd(&[
        "--json",
        "search",
        "--lexical",
        "--kind",
        "document",
        "LMDB almacén",
    ]));
    assert_eq!(s["results"][0]["node_id"], "Doc:adr.0001-storage", "{s}");
    let z = json(&r.kdd(&["--json", "query", "zeppelin fleet plan"]));
    assert!(z["results"].as_array().unwrap().is_empty(), "{z}");

    // `kdd status` and `kdd verify` see documents as indexed, not stale or extra.
    let st = json(&r.kdd(&["--json", "status"]));
    assert_eq!(st["stale"], serde_json::json!([]), "{st}");
    assert_eq!(st["unindexed"], serde_json::json!([]), "{st}");
    assert_eq!(
        st["docs_roots"],
        serde_json::json!(["README.md", "adr", "docs"]),
        "{st}"
    );
    assert_eq!(st["spec_files"], 4, "{st}");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "specs and docs"]);
    let v = r.kdd(&["verify"]);
    assert!(v.status.success(), "{:?}", text(&v));
}

#[test]
fn hook_indexes_staged_documents_and_honours_kddignore() {
    let r = docs_repo();
    // No `kdd index`: the first commit's hook indexes specs and documents alike.
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "init"]);
    let show = |p: &str| r.git(&["show", &format!("HEAD:.kdd-index/{p}")]);
    assert!(show("nodes/document/docs.guides.setup.json").contains("Setup guide"));
    assert!(show("nodes/document/README.json").contains("Project readme"));
    let tree = r.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index"]);
    assert!(
        !tree.contains("Borrador") && !tree.contains("wip"),
        "{tree}"
    );

    // A staged change to a document is re-derived from the staged blob.
    r.write(
        "docs/guides/setup.md",
        "# Setup guide v2\n\nInstall the quantum flux capacitor.\n",
    );
    r.write("docs/drafts/more.md", "# Ignored too\n");
    r.write(
        "specs/01-domain/entities/Borrador.md",
        "# Borrador cambiado\n",
    );
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "guide v2"]);
    assert!(show("nodes/document/docs.guides.setup.json").contains("Setup guide v2"));
    let tree = r.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index"]);
    assert!(
        !tree.contains("Borrador") && !tree.contains("drafts"),
        "{tree}"
    );
    // The guide lost its Markdown links: its edges file went with them.
    assert!(!tree.contains("edges/document/docs.guides.setup"), "{tree}");
    let status = r.git(&["status", "--porcelain"]);
    assert!(status.trim().is_empty(), "{status}");
    assert!(r.kdd(&["verify"]).status.success());

    // A clone without `kdd.docs` keeps the documents the manifest records.
    let c = r.at(r.clone_to("clone"));
    assert!(c.kdd(&["install"]).status.success());
    c.write(
        "adr/0001-storage.md",
        "# Decisión de almacenamiento\n\nAhora SQLite.\n",
    );
    c.git(&["commit", "-qam", "adr"]);
    let node = c.git(&[
        "show",
        "HEAD:.kdd-index/nodes/document/adr.0001-storage.json",
    ]);
    let blob = c.git(&["rev-parse", "HEAD:adr/0001-storage.md"]);
    let hash = blake3_of(&c.dir.join("adr/0001-storage.md"));
    assert!(node.contains(&hash), "{node} (blob {blob})");
    let tree = c.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index"]);
    assert!(
        tree.contains("docs.guides.setup") && tree.contains("README"),
        "{tree}"
    );
    assert!(c.kdd(&["verify"]).status.success());
}

fn blake3_of(p: &std::path::Path) -> String {
    kdd::spec::content_hash(&std::fs::read(p).unwrap())
}

#[test]
fn docs_flag_bad_roots_and_bare_reads() {
    let r = Repo::new();
    copy_dir(&fixture("docs"), &r.dir);
    // `--docs` indexes the roots given and records them.
    let o = r.kdd(&["index", "--docs", "adr"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(r.exists(".kdd-index/nodes/document/adr.0001-storage.json"));
    assert!(!r.exists(".kdd-index/nodes/document/README.json"));
    // A root that leaves the repository is refused, naming it; a missing one is a warning.
    let o = r.kdd(&["index", "--docs", "../outside"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("../outside"), "{err}");
    let o = r.kdd(&["index", "--docs", "adr,nowhere"]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("nowhere") && err.contains("not found"),
        "{err}"
    );

    // Documents travel to a bare server and answer there.
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "adr"]);
    let bare = r.tmp.path().join("server.git");
    r.git(&[
        "clone",
        "-q",
        "--bare",
        r.dir.to_str().unwrap(),
        bare.to_str().unwrap(),
    ]);
    let q = json(&r.kdd(&[
        "-C",
        bare.to_str().unwrap(),
        "--json",
        "query",
        "LMDB almacén de consultas",
    ]));
    assert_eq!(q["results"][0]["node_id"], "Doc:adr.0001-storage", "{q}");
}

#[test]
fn documents_are_embedded_and_found_semantically() {
    let r = docs_repo();
    // L2 with the deterministic test embedder (the real model is covered by `embed`).
    let run = |args: &[&str]| {
        crate::repo::command(env!("CARGO_BIN_EXE_kdd"), &r.dir)
            .env_remove("KDD_NO_EMBED")
            .env("KDD_TEST_EMBEDDER", "1")
            .env("KDD_EMBED_WARM", "0")
            .args(args)
            .output()
            .expect("run kdd")
    };
    let o = run(&["index"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(r.exists(".kdd-index/embeddings/document/docs.guides.setup.bin"));
    let s = json(&run(&[
        "--json",
        "search",
        "--semantic",
        "install the warehouse connector",
    ]));
    assert_eq!(s["results"][0]["node_id"], "Doc:docs.guides.setup", "{s}");
    assert_eq!(s["results"][0]["match_source"], "semantic", "{s}");
}

#[test]
fn stale_documents_are_caught_by_verify_and_rederived_on_a_bare_server() {
    let r = docs_repo();
    assert!(r.kdd(&["index"]).status.success());
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "init"]);
    let bare = r.tmp.path().join("server.git");
    r.git(&[
        "clone",
        "-q",
        "--bare",
        r.dir.to_str().unwrap(),
        bare.to_str().unwrap(),
    ]);
    r.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    // A document changed behind the hook's back (KDD_HOOK=0): the index is stale.
    r.write(
        "adr/0001-storage.md",
        "# Decisión de almacenamiento\n\nAhora usamos un archivo Parquet columnar.\n",
    );
    let o = crate::repo::command("git", &r.dir)
        .env("KDD_HOOK", "0")
        .args(["commit", "-qam", "adr without hook"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    let v = r.kdd(&["verify"]);
    assert_eq!(v.status.code(), Some(1), "{:?}", text(&v));
    assert!(text(&v).1.contains("adr.0001-storage") || text(&v).0.contains("adr.0001-storage"));
    r.git(&["push", "-q", "origin", "HEAD:main"]);
    // The bare mirror re-derives the document from the pushed blob and answers with it.
    let q = json(&r.kdd(&[
        "-C",
        bare.to_str().unwrap(),
        "--json",
        "query",
        "archivo Parquet columnar",
    ]));
    assert_eq!(q["results"][0]["node_id"], "Doc:adr.0001-storage", "{q}");
    let serve = bare.join("kdd-cache/serve");
    let report: String = std::fs::read_dir(&serve)
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("last-sync.json")).ok())
        .collect();
    assert!(report.contains("adr/0001-storage.md"), "{report}");
}
