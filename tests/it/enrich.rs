//! `kdd enrich` (L3, UC-003 / CMD-003) on real repositories with the real binaries, hooks and
//! merge driver, driven by the deterministic fixture agent `fixtures/agents/agent.sh`.

use crate::repo::{text, Repo};
use serde_json::Value;
use std::time::{Duration, Instant};

const PEDIDO: &str = ".kdd-index/enrichments/entity/Pedido.json";

fn agent(mode: &str, target: &str, only: &str) -> String {
    format!(
        "sh {}/fixtures/agents/agent.sh {mode} {target} {only}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn entity(id: &str, extra: &str) -> String {
    format!(
        "---\nid: {id}\nkind: entity\ntitle: {id}\n---\n\n# {id}\n\n## Descripción\n\nEl {id} del sistema.\n{extra}"
    )
}

/// kdd installed (hooks, merge driver), three entities (Pedido links Usuario), committed.
fn repo() -> Repo {
    let r = Repo::new();
    let o = r.kdd(&["install"]);
    assert!(o.status.success(), "{:?}", text(&o));
    for (id, extra) in [
        ("Pedido", "\n- [[Usuario]]\n"),
        ("Usuario", ""),
        ("Factura", ""),
    ] {
        r.write(
            &format!("specs/01-domain/entities/{id}.md"),
            &entity(id, extra),
        );
    }
    r.git(&["add", "."]);
    r.git(&["commit", "-q", "-m", "init"]);
    r
}

fn json(r: &Repo, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let o = r.kdd(&all);
    let (out, err) = text(&o);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("kdd {args:?}: {e}\n{out}\n{err}"))
}

fn enrich(r: &Repo, args: &[&str]) -> (Value, i32) {
    let mut all = vec!["--json", "enrich"];
    all.extend_from_slice(args);
    let o = r.kdd(&all);
    let (out, err) = text(&o);
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}\n{err}"));
    (v, o.status.code().unwrap_or(-1))
}

fn commit(r: &Repo, msg: &str) {
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", msg]);
    assert_eq!(r.git(&["status", "--porcelain"]), "", "status after {msg}");
    let o = r.kdd(&["verify", "--ref", "HEAD"]);
    assert!(o.status.success(), "verify after {msg}: {:?}", text(&o));
}

/// Ids of the hits of `kdd query <q>` with their `source`.
fn hits(r: &Repo, q: &str) -> Vec<(String, Option<String>)> {
    let v = json(r, &["query", q]);
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["node_id"].as_str().unwrap().to_string(),
                h["source"].as_str().map(str::to_string),
            )
        })
        .collect()
}

fn agent_edge(v: &Value, list: &str, from: &str, to: &str) -> Option<Value> {
    v[list]
        .as_array()?
        .iter()
        .find(|e| e["from_node"] == from && e["to_node"] == to)
        .cloned()
}

#[test]
fn enrichment_is_committed_searched_and_marked_as_the_agents() {
    let r = repo();
    r.git(&["config", "kdd.agent", &agent("ok", "Entity:Factura", "")]);
    let (v, code) = enrich(&r, &["Pedido"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["enriched"], 1);
    let res = &v["results"][0];
    assert_eq!(res["status"], "enriched");
    assert!(
        res["warnings"][0]
            .as_str()
            .unwrap()
            .contains("unknown target id \"Entity:Nowhere\""),
        "{res}"
    );
    // The committed artifact: spec hash + agent id, the unknown relation dropped, no command.
    let file: Value = serde_json::from_str(&r.read(PEDIDO)).unwrap();
    let entry = &file["entries"][0];
    assert_eq!(entry["relations"].as_array().unwrap().len(), 1);
    assert!(entry["agent"].as_str().unwrap().starts_with("sh@"));
    assert!(!r.read(PEDIDO).contains("agent.sh"));
    commit(&r, "enrich");
    assert!(r
        .git(&["ls-files", ".kdd-index/enrichments"])
        .contains("Pedido.json"));

    // A word only the summary holds finds the spec, marked as the agent's.
    let h = hits(&r, "quokka");
    assert_eq!(
        h[0],
        ("Entity:Pedido".into(), Some("agent".into())),
        "{h:?}"
    );
    // Reached through the agent edge: marked too; through a written link: not.
    assert!(
        h.contains(&("Entity:Factura".into(), Some("agent".into()))),
        "{h:?}"
    );
    assert!(h.contains(&("Entity:Usuario".into(), None)), "{h:?}");

    // The implicit relation is a typed edge in graph and impact, marked, and excludable.
    let g = json(&r, &["graph", "Pedido"]);
    let e = agent_edge(&g, "edges", "Entity:Pedido", "Entity:Factura").expect("agent edge");
    assert_eq!(
        (e["edge_type"].as_str(), e["source"].as_str()),
        (Some("AFFECTS"), Some("agent"))
    );
    let spec_edge = agent_edge(&g, "edges", "Entity:Pedido", "Entity:Usuario").unwrap();
    assert!(spec_edge.get("source").is_none());
    let g = json(&r, &["graph", "Pedido", "--no-agent-edges"]);
    assert!(agent_edge(&g, "edges", "Entity:Pedido", "Entity:Factura").is_none());
    let i = json(&r, &["impact", "Factura"]);
    assert_eq!(i["directly_affected"][0]["id"], "Entity:Pedido", "{i}");
    assert_eq!(i["directly_affected"][0]["source"], "agent");
    let i = json(&r, &["impact", "Factura", "--no-agent-edges"]);
    assert_eq!(i["total_directly_affected"], 0, "{i}");
    let i = json(&r, &["impact", "Pedido"]);
    assert_eq!(i["agent_notes"][0]["source"], "agent", "{i}");
    let q = json(&r, &["query", "quokka", "--no-agent-edges"]);
    assert!(agent_edge(&q, "graph_expansion", "Entity:Pedido", "Entity:Factura").is_none());

    // Re-running skips the unchanged spec and enriches only the others.
    let (v, code) = enrich(&r, &[]);
    assert_eq!(
        (v["skipped"].as_u64(), v["enriched"].as_u64(), code),
        (Some(1), Some(2), 0)
    );
    let before = r.read(PEDIDO);
    let (v, _) = enrich(&r, &["Pedido"]);
    assert_eq!(v["results"][0]["status"], "skipped");
    assert_eq!(r.read(PEDIDO), before);
    commit(&r, "enrich all");

    // The spec changes: its enrichment stays committed but stale (never answered from), and
    // the next run enriches it again.
    r.write(
        "specs/01-domain/entities/Pedido.md",
        &entity("Pedido", "\nAhora con descuentos.\n"),
    );
    commit(&r, "edit Pedido");
    assert!(r.exists(PEDIDO));
    assert!(!hits(&r, "quokka").iter().any(|h| h.0 == "Entity:Pedido"));
    let (v, _) = enrich(&r, &[]);
    assert_eq!(
        (v["enriched"].as_u64(), v["skipped"].as_u64()),
        (Some(1), Some(2)),
        "{v}"
    );
    assert_eq!(hits(&r, "quokka")[0].0, "Entity:Pedido");

    // The spec goes: the hook removes its enrichment with its node.
    r.git(&["rm", "-q", "specs/01-domain/entities/Pedido.md"]);
    commit(&r, "drop Pedido");
    assert!(!r.exists(PEDIDO));
}

#[test]
fn enrichments_from_two_branches_merge_cleanly() {
    let r = repo();
    // feature: edits Pedido, then enriches it (summary word "wombat").
    r.git(&["checkout", "-q", "-b", "feature"]);
    r.write(
        "specs/01-domain/entities/Pedido.md",
        &entity("Pedido", "\n- [[Usuario]]\n\nCon descuentos.\n"),
    );
    commit(&r, "feature edit");
    let (v, _) = enrich(
        &r,
        &["--agent", &agent("alt", "Entity:Factura", ""), "Pedido"],
    );
    assert_eq!(v["enriched"], 1, "{v}");
    commit(&r, "feature enrich");
    // main: enriches the old text (summary word "quokka") and Usuario.
    r.git(&["checkout", "-q", "main"]);
    let (v, _) = enrich(
        &r,
        &[
            "--agent",
            &agent("ok", "Entity:Factura", ""),
            "Pedido",
            "Usuario",
        ],
    );
    assert_eq!(v["enriched"], 2, "{v}");
    commit(&r, "main enrich");

    let o = r.git_out(&["merge", "-q", "--no-edit", "feature"]);
    assert!(o.status.success(), "merge: {:?}", text(&o));
    assert_eq!(r.git(&["status", "--porcelain"]), "");
    let o = r.kdd(&["verify", "--ref", "HEAD"]);
    assert!(o.status.success(), "{:?}", text(&o));
    // Both entries are kept; the one for the merged spec text (feature's) is the one used.
    let file: Value = serde_json::from_str(&r.read(PEDIDO)).unwrap();
    assert_eq!(file["entries"].as_array().unwrap().len(), 2, "{file}");
    assert_eq!(hits(&r, "wombat")[0].0, "Entity:Pedido");
    // (Pedido may still be reached through the graph from Usuario, never by main's summary.)
    let q = hits(&r, "quokka");
    assert_eq!(
        q[0],
        ("Entity:Usuario".into(), Some("agent".into())),
        "{q:?}"
    );
    assert!(
        !q.contains(&("Entity:Pedido".into(), Some("agent".into()))),
        "{q:?}"
    );
    // The next run re-enriches nothing and keeps the file as merged.
    let (v, _) = enrich(
        &r,
        &["--agent", &agent("alt", "Entity:Factura", ""), "Pedido"],
    );
    assert_eq!(v["skipped"], 1, "{v}");
}

#[test]
fn agent_errors_are_per_spec_and_never_block_a_commit() {
    let r = repo();
    // Not configured: one clear error, nothing written.
    let o = r.kdd(&["enrich"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("AGENT_NOT_CONFIGURED") && err.contains("git config kdd.agent"),
        "{err}"
    );
    assert!(!r.exists(".kdd-index/enrichments"));

    // Timeout on one spec: its whole process group is killed (the agent's own child too),
    // the other specs are enriched.
    let pidfile = r.tmp.path().join("agent.pid");
    let t0 = Instant::now();
    let o = crate::repo::command(env!("CARGO_BIN_EXE_kdd"), &r.dir)
        .args(["--json", "enrich", "--timeout", "1", "--agent"])
        .arg(agent("sleep", "Entity:Factura", "Entity:Pedido"))
        .env("FIXTURE_PIDFILE", &pidfile)
        .output()
        .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    let code = o.status.code().unwrap_or(-1);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let pid = std::fs::read_to_string(&pidfile).expect("the agent saw FIXTURE_PIDFILE");
    let gone = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
            .map_or(true, |st| st.contains(") Z "))
    };
    let t1 = Instant::now();
    while !gone(&pid) && t1.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        gone(&pid),
        "the agent's child {} outlived the timeout",
        pid.trim()
    );
    assert_eq!(code, 1);
    assert_eq!(
        (v["failed"].as_u64(), v["enriched"].as_u64()),
        (Some(1), Some(2)),
        "{v}"
    );
    let failed = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["status"] == "failed")
        .unwrap();
    assert_eq!(failed["id"], "Entity:Pedido");
    assert_eq!(failed["code"], "AGENT_TIMEOUT");
    assert!(!r.exists(PEDIDO));

    // Invalid JSON and a non-zero exit are AGENT_ERROR with the reason.
    for (mode, needle) in [("garbage", "invalid answer"), ("fail", "quota exceeded")] {
        let (v, code) = enrich(
            &r,
            &["--agent", &agent(mode, "Entity:Factura", ""), "Pedido"],
        );
        assert_eq!(code, 1);
        let x = &v["results"][0];
        assert_eq!(x["code"], "AGENT_ERROR", "{x}");
        assert!(x["message"].as_str().unwrap().contains(needle), "{x}");
    }
    // An unknown spec is NODE_NOT_FOUND; the known one still runs.
    let (v, _) = enrich(
        &r,
        &[
            "--agent",
            &agent("ok", "Entity:Factura", ""),
            "Nope",
            "Pedido",
        ],
    );
    assert_eq!(v["results"][0]["code"], "NODE_NOT_FOUND", "{v}");
    assert_eq!(v["results"][1]["status"], "enriched");
    // Whatever failed, committing works (the hook never runs an agent).
    commit(&r, "after errors");
}

/// `kdd` with the deterministic test embedder (L2 without a real model).
fn kdd_l2(r: &Repo, args: &[&str]) -> std::process::Output {
    crate::repo::command(env!("CARGO_BIN_EXE_kdd"), &r.dir)
        .args(args)
        .env_remove("KDD_NO_EMBED")
        .env("KDD_TEST_EMBEDDER", "1")
        .env("KDD_EMBED_WARM", "0")
        .output()
        .unwrap()
}

#[test]
fn at_l2_the_summary_is_embedded_and_found_by_semantic_search() {
    let r = repo();
    let o = kdd_l2(&r, &["index"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let o = kdd_l2(
        &r,
        &[
            "enrich",
            "--agent",
            &agent("ok", "Entity:Factura", ""),
            "Pedido",
        ],
    );
    assert!(o.status.success(), "{:?}", text(&o));
    let file: Value = serde_json::from_str(&r.read(PEDIDO)).unwrap();
    let v = &file["entries"][0]["vector"];
    assert_eq!(v["model"], "kdd-test-hashed-64", "{file}");
    assert_eq!(v["q"].as_array().unwrap().len(), 64);
    let o = kdd_l2(
        &r,
        &[
            "--json",
            "search",
            "--semantic",
            "quokka ledger reconciliation",
        ],
    );
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    let top = &s["results"][0];
    assert_eq!(top["node_id"], "Entity:Pedido", "{s}");
    assert_eq!(top["source"], "agent", "{s}");
    // Without a model the summary is still written, lexical only, and the run says so.
    let (v, code) = enrich(
        &r,
        &[
            "--force",
            "--agent",
            &agent("ok", "Entity:Factura", ""),
            "Pedido",
        ],
    );
    assert_eq!(code, 0, "{v}");
    let w = v["results"][0]["warnings"].to_string();
    assert!(w.contains("summary not embedded (lexical only)"), "{w}");
    let file: Value = serde_json::from_str(&r.read(PEDIDO)).unwrap();
    assert!(file["entries"][0].get("vector").is_none());
    assert_eq!(hits(&r, "quokka")[0].0, "Entity:Pedido");
}

#[test]
fn enrichments_travel_with_sync_unless_no_text() {
    let r = repo();
    r.git(&["config", "kdd.agent", &agent("ok", "Entity:Factura", "")]);
    let (v, code) = enrich(&r, &["Pedido"]);
    assert_eq!(code, 0, "{v}");
    commit(&r, "enrich");
    let team = r.tmp.path().join("team.git");
    r.git(&["init", "-q", "--bare", team.to_str().unwrap()]);
    r.git(&["remote", "add", "team", team.to_str().unwrap()]);
    // --no-text: the agent's summary (derived prose) stays home.
    let o = r.kdd(&["sync", "push", "--remote", "team", "--no-text"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let pushed = r.git(&[
        "--git-dir",
        team.to_str().unwrap(),
        "ls-tree",
        "-r",
        "--name-only",
        "refs/kdd/index/main",
    ]);
    assert!(!pushed.contains("enrichments/"), "{pushed}");
    // With text: the enrichment travels and a pull into another repository merges it.
    let o = r.kdd(&["sync", "push", "--remote", "team"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let other = Repo::new();
    other.git(&["remote", "add", "team", team.to_str().unwrap()]);
    let o = other.kdd(&["sync", "pull", "--remote", "team", "--branch", "main"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert_eq!(other.read(PEDIDO), r.read(PEDIDO));
}
