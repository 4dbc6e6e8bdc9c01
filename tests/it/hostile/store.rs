//! Hostile cases: the derived query cache. A truncated LMDB file (the SIGBUS of issue 11), garbage
//! pages, a damaged tantivy segment and a generation left without its `complete` marker (a crash
//! mid-build) are each planted in a real cache of a real repository; the real binaries must
//! answer exactly as before (rebuilding into a fresh generation, saying so), `doctor` must tell
//! the truth and `--fix` rebuild, and `kdd mcp` / `kdd serve` must recover by themselves.

use crate::repo::{command, text, Mcp, Repo};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::Duration;

fn spec(kind: &str, id: &str, title: &str, body: &str) -> String {
    format!(
        "---\nid: {id}\nkind: {kind}\ntitle: {title}\nstatus: draft\n---\n\n# {title}\n\n{body}\n"
    )
}

/// `kdd` with the deterministic test embedder (an L2 cache with an arroy index).
fn kdd(r: &Repo, args: &[&str]) -> Output {
    command(env!("CARGO_BIN_EXE_kdd"), &r.dir)
        .env_remove("KDD_NO_EMBED")
        .env("KDD_TEST_EMBEDDER", "1")
        .env("KDD_EMBED_WARM", "0")
        .env_remove("KDD_CACHE_DIR")
        .args(args)
        .output()
        .expect("run kdd")
}

fn ok(o: &Output) -> (String, String) {
    let (out, err) = text(o);
    assert_eq!(o.status.signal(), None, "killed by a signal:\n{out}\n{err}");
    assert!(o.status.success(), "kdd failed:\n{out}\n{err}");
    (out, err)
}

/// A committed L2 repository with a few linked specs.
fn indexed() -> Repo {
    let r = Repo::new();
    r.write(
        "specs/01-domain/entities/Pedido.md",
        &spec("entity", "Pedido", "Pedido", "## Descripción\n\nUn pedido de compra con líneas y precio total.\n\n## Reglas\n\n- [[BR-PRECIO-001]]\n"),
    );
    r.write(
        "specs/01-domain/rules/BR-PRECIO-001.md",
        &spec("business-rule", "BR-PRECIO-001", "Precio final", "## Declaración\n\nEl precio final de un [[Pedido]] suma las líneas y resta descuentos.\n"),
    );
    r.write(
        "specs/02-behavior/use-cases/UC-001-CrearPedido.md",
        &spec("use-case", "UC-001", "Crear pedido", "## Flujo Principal\n\n1. El cliente confirma el carrito.\n2. Se aplica [[BR-PRECIO-001]] y se crea el [[Pedido]].\n"),
    );
    ok(&kdd(&r, &["index"]));
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "specs"]);
    r
}

/// The cache root of the repository (one `wt-*` folder under the git dir).
fn cache_root(r: &Repo) -> PathBuf {
    let base = r.dir.join(".git/kdd-cache");
    std::fs::read_dir(&base)
        .expect("cache dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("wt-"))
        })
        .expect("a wt-* cache root")
}

fn current_gen(r: &Repo) -> PathBuf {
    let root = cache_root(r);
    let name = std::fs::read_to_string(root.join("current")).expect("current");
    root.join(name.trim())
}

/// The ranked answer of a hybrid query (ids and scores), as JSON.
fn answer(r: &Repo) -> (Value, String) {
    answer_to(r, "precio del pedido")
}

/// The top hits (id, score) of `question`, and stderr.
fn answer_to(r: &Repo, question: &str) -> (Value, String) {
    let o = kdd(r, &["--json", "query", question, "-n", "5"]);
    let (out, err) = ok(&o);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let hits: Vec<Value> = v["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|h| json!([h["node_id"], h["score"]]))
        .collect();
    assert!(!hits.is_empty(), "{out}");
    (Value::Array(hits), err)
}

/// Deterministic garbage (xorshift), so a failure reproduces.
fn garbage(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Overwrite `len` bytes at `at` in place (the file keeps its length).
fn scribble(path: &Path, at: u64, len: usize) {
    use std::io::{Seek, SeekFrom};
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(&garbage(len)).unwrap();
    f.sync_all().unwrap();
}

fn truncate(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn data_mdb(r: &Repo) -> PathBuf {
    current_gen(r).join("lmdb/data.mdb")
}

#[test]
fn truncated_lmdb_never_sigbus_and_heals() {
    let r = indexed();
    let (before, _) = answer(&r);
    let old = current_gen(&r);
    truncate(&data_mdb(&r), 40_000);
    let (after, err) = answer(&r);
    assert_eq!(after, before, "same answer after healing");
    assert!(
        err.contains("damaged") && err.contains("truncated"),
        "{err}"
    );
    assert!(
        err.contains("rebuilt"),
        "the message says what happened: {err}"
    );
    assert_ne!(current_gen(&r), old, "a fresh generation");
    let (again, err) = answer(&r);
    assert_eq!(again, before);
    assert!(!err.contains("damaged"), "healed once, quiet after: {err}");
    // Every retrieval command survives it too.
    truncate(&data_mdb(&r), 5_000);
    for args in [
        &["graph", "Pedido"][..],
        &["impact", "Pedido"],
        &["orphans"],
        &["search", "--lexical", "precio"],
        &["search", "--semantic", "precio"],
    ] {
        let o = kdd(&r, args);
        assert_eq!(o.status.signal(), None, "{args:?}: {:?}", text(&o));
        assert!(o.status.success(), "{args:?}: {:?}", text(&o));
    }
}

#[test]
fn garbage_lmdb_pages_heal_in_the_same_run() {
    let r = indexed();
    let (before, _) = answer(&r);
    let p = data_mdb(&r);
    let len = std::fs::metadata(&p).unwrap().len();
    // Every page but the two meta pages.
    scribble(&p, 8192, (len - 8192) as usize);
    let (after, err) = answer(&r);
    assert_eq!(after, before, "same answer after healing");
    assert!(err.contains("damaged"), "{err}");
    let (again, err) = answer(&r);
    assert_eq!(again, before);
    assert!(!err.contains("damaged"), "{err}");
    // Semantic search alone (arroy reads its trees from the same LMDB file).
    let sem = |r: &Repo| {
        let o = kdd(r, &["--json", "search", "--semantic", "precio del pedido"]);
        let (out, err) = ok(&o);
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        (v["results"].clone(), err)
    };
    let (sem_before, _) = sem(&r);
    assert!(sem_before.as_array().is_some_and(|a| !a.is_empty()));
    let p = data_mdb(&r);
    let len = std::fs::metadata(&p).unwrap().len();
    scribble(&p, 8192, (len - 8192) as usize);
    let (sem_after, err) = sem(&r);
    assert_eq!(sem_after, sem_before, "{err}");
    assert!(err.contains("damaged"), "{err}");
    // Garbage in the meta pages themselves: caught before mapping.
    scribble(&data_mdb(&r), 0, 8192);
    let (after, err) = answer(&r);
    assert_eq!(after, before);
    assert!(err.contains("meta page"), "{err}");
}

#[test]
fn damaged_text_index_is_rebuilt() {
    let r = indexed();
    let (before, _) = answer(&r);
    let text_dir = current_gen(&r).join("text");
    let seg = |ext: &str| {
        std::fs::read_dir(&text_dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == ext))
            .unwrap_or_else(|| panic!("a .{ext} segment file"))
    };
    // A truncated segment file: caught before opening.
    let idx = seg("idx");
    truncate(&idx, std::fs::metadata(&idx).unwrap().len() / 2);
    let (after, err) = answer(&r);
    assert_eq!(after, before);
    assert!(err.contains("damaged"), "{err}");
    // Same-length garbage: tantivy's checksums catch it in `doctor`, which condemns the
    // generation; `--fix` rebuilds it now.
    let text_dir = current_gen(&r).join("text");
    let term = std::fs::read_dir(&text_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "term"))
        .unwrap();
    scribble(&term, 16, 64);
    let c = doctor_cache(&r, false);
    assert_eq!(c["status"], "warn", "{c}");
    let msg = c["message"].as_str().unwrap();
    assert!(
        msg.contains("checksum") && msg.contains("next query rebuilds"),
        "{c}"
    );
    assert!(c["fix"].as_str().unwrap().contains("--fix"), "{c}");
    let c = doctor_cache(&r, true);
    assert_eq!(c["status"], "ok", "{c}");
    assert!(c["message"].as_str().unwrap().contains("rebuilt"), "{c}");
    assert_eq!(doctor_cache(&r, false)["status"], "ok");
    assert_eq!(answer(&r).0, before);
}

fn doctor_cache(r: &Repo, fix: bool) -> Value {
    let mut args = vec!["--json", "doctor", "--no-load"];
    if fix {
        args.push("--fix");
    }
    let o = kdd(r, &args);
    let (out, _) = text(&o);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    v["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "cache"))
        .cloned()
        .unwrap_or_else(|| panic!("no cache check: {v}"))
}

#[test]
fn doctor_tells_the_truth_about_the_cache() {
    let r = indexed();
    let (before, _) = answer(&r);
    assert_eq!(doctor_cache(&r, false)["status"], "ok");
    let p = data_mdb(&r);
    let len = std::fs::metadata(&p).unwrap().len();
    scribble(&p, 8192, (len - 8192) as usize);
    let c = doctor_cache(&r, false);
    assert_eq!(c["status"], "warn", "doctor no longer says ok: {c}");
    assert!(c["message"].as_str().unwrap().contains("damaged"), "{c}");
    // What doctor said happens: the next query rebuilds, and answers as before.
    let (after, err) = answer(&r);
    assert_eq!(after, before);
    assert!(err.contains("rebuilt"), "{err}");
    assert_eq!(doctor_cache(&r, false)["status"], "ok");
    truncate(&data_mdb(&r), 10_000);
    let c = doctor_cache(&r, true);
    assert_eq!(c["status"], "ok", "{c}");
    let msg = c["message"].as_str().unwrap();
    assert!(msg.contains("truncated") && msg.contains("rebuilt"), "{c}");
}

#[test]
fn a_generation_without_its_marker_is_rebuilt() {
    let r = indexed();
    let (before, _) = answer(&r);
    let old = current_gen(&r);
    // A crash mid-build or mid-update leaves the generation without its `complete` marker.
    std::fs::remove_file(old.join("complete")).unwrap();
    let (after, err) = answer(&r);
    assert_eq!(after, before);
    assert!(err.contains("marker"), "{err}");
    assert_ne!(current_gen(&r), old);
    assert!(current_gen(&r).join("complete").is_file());
    // An incremental update re-seals the generation it updates.
    r.write(
        "specs/01-domain/entities/Cliente.md",
        &spec(
            "entity",
            "Cliente",
            "Cliente",
            "## Descripción\n\nQuien hace un [[Pedido]].\n",
        ),
    );
    ok(&kdd(&r, &["index"]));
    let gen = current_gen(&r);
    let (_, err) = answer(&r);
    assert!(!err.contains("damaged"), "{err}");
    assert_eq!(current_gen(&r), gen, "updated in place");
    assert!(gen.join("complete").is_file());
}

/// `kdd mcp` on a repository with the deterministic test embedder, initialised.
fn mcp(r: &Repo) -> Mcp {
    let mut c = command(env!("CARGO_BIN_EXE_kdd"), &r.dir);
    c.env_remove("KDD_NO_EMBED")
        .env("KDD_TEST_EMBEDDER", "1")
        .env("KDD_EMBED_WARM", "0")
        .arg("mcp");
    let mut m = Mcp::spawn(c);
    m.initialize();
    m
}

/// Ids of a `kdd_query` answer over MCP (panics on a tool error).
fn query_ids(m: &mut Mcp) -> Vec<String> {
    let (err, v) = m.call(
        "kdd_query",
        json!({"query": "precio del pedido", "limit": 5}),
    );
    assert!(!err, "{v}");
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["node_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn mcp_recovers_by_itself() {
    let r = indexed();
    answer(&r);
    truncate(&data_mdb(&r), 40_000);
    let mut m = mcp(&r);
    let before = query_ids(&mut m);
    assert!(!before.is_empty());
    // Damaged under a running server (pages scribbled in place, the file keeps its length).
    let gen = current_gen(&r);
    let p = data_mdb(&r);
    let len = std::fs::metadata(&p).unwrap().len();
    scribble(&p, 8192, (len - 8192) as usize);
    assert_eq!(query_ids(&mut m), before, "answered again after rebuilding");
    assert_ne!(current_gen(&r), gen, "rebuilt into a fresh generation");
    assert_eq!(query_ids(&mut m), before);
}

/// A child process killed and reaped on drop.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `kdd serve` on loopback; the port it listens on.
fn serve(r: &Repo) -> (Reaped, u16) {
    let child = command(env!("CARGO_BIN_EXE_kdd"), &r.dir)
        .env_remove("KDD_NO_EMBED")
        .env("KDD_TEST_EMBEDDER", "1")
        .env("KDD_EMBED_WARM", "0")
        .env_remove("KDD_TOKEN")
        .args(["serve", "--bind", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kdd serve");
    let mut child = Reaped(child);
    let mut err = BufReader::new(child.0.stderr.take().unwrap());
    let mut log = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            panic!("kdd serve did not start:\n{log}");
        }
        log.push_str(&line);
        if let Some(a) = line.split("listening on http://").nth(1) {
            let port = a.trim().rsplit(':').next().unwrap().parse().unwrap();
            // Keep draining the log so the server never blocks on a full pipe.
            std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
            return (child, port);
        }
    }
}

fn http_get(port: u16, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    let status = raw
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, raw)
}

#[test]
fn http_server_recovers_by_itself() {
    let r = indexed();
    answer(&r);
    truncate(&data_mdb(&r), 40_000);
    let (mut child, port) = serve(&r);
    let path = "/v1/retrieve/graph?node=Entity:Pedido&depth=1";
    let (status, body) = http_get(port, path);
    assert_eq!(status, 200, "{body}");
    let gen = current_gen(&r);
    let p = data_mdb(&r);
    let len = std::fs::metadata(&p).unwrap().len();
    scribble(&p, 8192, (len - 8192) as usize);
    let (status, body) = http_get(port, path);
    assert_ne!(current_gen(&r), gen, "rebuilt into a fresh generation");
    assert_eq!(status, 200, "no 503 \"run kdd index\": {body}");
    assert!(body.contains("BR-PRECIO-001"), "{body}");
    assert_eq!(child.0.try_wait().unwrap(), None, "the server is still up");
}

#[test]
fn garbage_text_segments_never_crash_a_query() {
    let r = indexed();
    // A question, and keywords without function words: their language is told by the text
    // index's vocabulary (`cache/vocab.rs`), read before the search.
    let questions = ["precio del pedido", "precio pedido"];
    let before: Vec<Value> = questions.iter().map(|q| answer_to(&r, q).0).collect();
    // Same-length garbage in the postings and the doc store: tantivy trusts its files (such
    // garbage panicked or failed forever); the query heals and answers as before.
    for ext in ["idx", "store", "term", "pos"] {
        for (q, before) in questions.iter().zip(&before) {
            let text_dir = current_gen(&r).join("text");
            let f = std::fs::read_dir(&text_dir)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == ext))
                .unwrap_or_else(|| panic!("a .{ext} segment file"));
            let len = std::fs::metadata(&f).unwrap().len();
            scribble(&f, 8, (len.saturating_sub(16)).clamp(1, 2000) as usize);
            let (after, err) = answer_to(&r, q);
            assert_eq!(&after, before, ".{ext}, {q}: {err}");
        }
    }
}

#[test]
fn a_cache_built_under_a_crafted_manifest_heals_when_the_manifest_comes_back() {
    let r = indexed();
    let (before, _) = answer(&r);
    // A branch whose manifest moves the specs root outside the repository: every node's
    // source_file is then no spec path, and the cache built there leaves them all out.
    let good = r.read(".kdd-index/manifest.json");
    let mut m: Value = serde_json::from_str(&good).expect("manifest");
    m["specs_root"] = json!("../../../../etc");
    r.write(".kdd-index/manifest.json", &m.to_string());
    let o = kdd(&r, &["--json", "query", "precio del pedido", "-n", "5"]);
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("Pedido"),
        "{:?}",
        text(&o)
    );
    // Back on the real manifest (the artifacts never changed): the same answer as before, the
    // node found by every command, without deleting the cache by hand.
    r.git(&["checkout", "--", ".kdd-index/manifest.json"]);
    let (after, _) = answer(&r);
    assert_eq!(before, after);
    let (out, _) = ok(&kdd(&r, &["impact", "Entity:Pedido"]));
    assert!(out.contains("BR-PRECIO-001"), "{out}");
}

#[test]
fn a_second_spec_claiming_an_id_is_named_and_verify_still_passes() {
    let r = indexed();
    // A teammate's file declares an id another spec holds: named as a duplicate, not indexed,
    // and the L2 index still verifies (its chunks were counted against the spec that kept the
    // id, so verify failed with "no-vectors" that no command could clear).
    r.write(
        "specs/01-domain/entities/SameB.md",
        &spec(
            "entity",
            "Pedido",
            "Otro pedido",
            "## Descripción\n\nOtra cosa.\n",
        ),
    );
    let o = kdd(&r, &["index"]);
    assert!(text(&o).1.contains("duplicate id"), "{:?}", text(&o));
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "dup"]);
    let o = kdd(&r, &["verify"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(
        text(&o).1.contains("SameB.md: duplicate id"),
        "{:?}",
        text(&o)
    );
}

#[test]
fn a_new_file_never_takes_over_an_indexed_id() {
    // Red team: a teammate's new file declaring an id another spec holds, under a path that
    // sorts first (`AAA.md`), took the node over at the next commit (named as a duplicate, but
    // the node, its edges and its answers changed). The spec the index gives the id keeps it,
    // in the hook, in `kdd index`, in `kdd verify` and in `kdd status`.
    let r = Repo::new();
    let pedido = "specs/01-domain/entities/Pedido.md";
    let entity = |id: &str, title: &str, text: &str| {
        spec("entity", id, title, &format!("## Descripción\n\n{text}\n"))
    };
    r.write(pedido, &entity("Pedido", "Pedido", "Un pedido de compra."));
    assert!(r.kdd(&["install"]).status.success());
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "specs"]);
    let node = || r.git(&["show", "HEAD:.kdd-index/nodes/entity/Pedido.json"]);
    assert!(node().contains(pedido), "{}", node());
    r.write(
        "specs/01-domain/entities/AAA.md",
        &entity("Pedido", "Impostor", "Otra cosa."),
    );
    // With a node file crafted to name the newcomer staged beside it: HEAD's decides.
    r.write(
        ".kdd-index/nodes/entity/Pedido.json",
        &node().replace(pedido, "specs/01-domain/entities/AAA.md"),
    );
    r.git(&["add", "-A"]);
    let o = r.git_out(&["commit", "-qm", "impostor"]);
    assert!(
        text(&o).1.contains("AAA.md: duplicate id"),
        "{:?}",
        text(&o)
    );
    assert!(
        node().contains(pedido) && !node().contains("Impostor"),
        "{}",
        node()
    );
    // The holder edited (still declaring the id) keeps it too.
    r.write(
        pedido,
        &entity("Pedido", "Pedido", "Un pedido de compra, editado."),
    );
    r.git(&["commit", "-qam", "edit"]);
    assert!(node().contains(pedido), "{}", node());
    let before = crate::util::tree(&r.dir.join(".kdd-index"));
    let o = r.kdd(&["index"]);
    assert!(
        text(&o).1.contains("AAA.md: duplicate id"),
        "{:?}",
        text(&o)
    );
    assert_eq!(before, crate::util::tree(&r.dir.join(".kdd-index")));
    let o = r.kdd(&["verify"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let (out, _) = text(&r.kdd(&["status"]));
    assert!(
        out.contains(&format!(
            "Entity:Pedido: kept {pedido}, dropped specs/01-domain/entities/AAA.md"
        )),
        "{out}"
    );
    // The holder gives the id up: the other file takes it.
    r.write(pedido, &entity("Pedido2", "Pedido", "Renombrado."));
    r.git(&["commit", "-qam", "give up"]);
    assert!(node().contains("AAA.md"), "{}", node());
    assert!(r.kdd(&["verify"]).status.success());
}

#[test]
fn one_claim_per_node_file_in_the_hook_index_and_verify() {
    // Red team: (1) ui-view, ui-component and ui-flow share the id prefix `UI:`, so one id in two
    // UI kinds is one node id but two node files: the hook indexed both while `kdd index` and
    // `kdd verify` kept one, so verify failed after every normal commit and the index flip-flopped.
    // (2) Two different ids whose file names collide once made safe (a 32-bit hash, a crafted
    // pair) wrote one node file: the newcomer overwrote the holder in `kdd index`. Both are one
    // claim now, settled by the duplicate-id rule everywhere.
    let r = Repo::new();
    let write = |path: &str, id: &str, kind: &str| {
        let fm = format!("---\nid: \"{id}\"\nkind: {kind}\ntitle: T\nstatus: draft\n---\n\n");
        r.write(
            path,
            &format!("{fm}# T\n\n## Descripción\n\nTexto de {path}.\n"),
        );
    };
    write(
        "specs/03-experience/views/Pantalla.md",
        "Pantalla",
        "ui-view",
    );
    write("specs/01-domain/entities/A.md", "Pedido #@'X", "entity");
    assert!(r.kdd(&["install"]).status.success());
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "holders"]);
    let nodes = || r.git(&["ls-files", ".kdd-index/nodes"]);
    let before = nodes();
    write(
        "specs/03-experience/components/Pantalla.md",
        "Pantalla",
        "ui-component",
    );
    write("specs/01-domain/entities/B.md", "Pedido(+'?X", "entity");
    r.git(&["add", "-A"]);
    let o = r.git_out(&["commit", "-qm", "newcomers"]);
    let err = text(&o).1;
    assert!(
        err.contains("components/Pantalla.md: duplicate id"),
        "{err}"
    );
    assert!(
        err.contains("B.md: id `Entity:Pedido(+'?X` is stored under the same index file"),
        "{err}"
    );
    assert_eq!(nodes(), before);
    let o = r.kdd(&["verify"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let index = crate::util::tree(&r.dir.join(".kdd-index"));
    let o = r.kdd(&["index"]);
    assert!(text(&o).1.contains("B.md: id"), "{:?}", text(&o));
    assert_eq!(index, crate::util::tree(&r.dir.join(".kdd-index")));
    let node = r.git(&[
        "show",
        &format!(
            "HEAD:{}",
            before.lines().find(|l| l.contains("entity/")).unwrap()
        ),
    ]);
    assert!(node.contains("entities/A.md"), "{node}");
}

#[test]
fn an_unreadable_edges_file_costs_its_spec_the_links_not_the_node() {
    let r = indexed();
    // Committed past the hook: an edges file over the link cap (no spec yields so many), then
    // one that is not edges at all. The spec stays found by every reader, without those links,
    // and the problem is named with its file.
    let targets: Vec<String> = (0..21_001).map(|i| format!("\"X{i}\"")).collect();
    let over = format!(
        "{{\"type\":\"WIKI_LINK\",\"to\":[{}]}}\n",
        targets.join(",")
    );
    let edges = r.dir.join(".kdd-index/edges/entity/Pedido.jsonl");
    for crafted in [over.as_str(), "not an edge line\n"] {
        // Replaced as git replaces a file (unlink, create): the cache's freshness check reads
        // directory mtimes (see `cache/mod.rs`).
        std::fs::remove_file(&edges).unwrap();
        std::fs::write(&edges, crafted).unwrap();
        r.git(&["add", "-A"]);
        let o = command("git", &r.dir)
            .args(["commit", "-qm", "crafted edges"])
            .env("KDD_HOOK", "0")
            .output()
            .unwrap();
        assert!(o.status.success(), "{:?}", text(&o));
        // The command that brings the cache up to date names the file.
        let (out, err) = ok(&kdd(&r, &["graph", "Entity:Pedido"]));
        assert!(out.contains("Entity:Pedido"), "{out}\n{err}");
        assert!(
            err.contains("edges/entity/Pedido.jsonl") && err.contains("without its links"),
            "{err}"
        );
        let (out, err) = ok(&kdd(
            &r,
            &["--json", "query", "pedido de compra", "-n", "3"],
        ));
        assert!(out.contains("Entity:Pedido"), "{out}\n{err}");
        // The links other specs make to it are still there.
        let (out, _) = ok(&kdd(&r, &["impact", "Entity:Pedido"]));
        assert!(out.contains("BR-PRECIO-001"), "{out}");
    }
}

/// A tmpfs of `size` mounted at `dir` (unmounted on drop).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let o = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "mount: {:?}", text(&o));
        Tmpfs(dir.to_path_buf())
    }

    fn resize(&self, size: &str) {
        let o = std::process::Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .output()
            .unwrap();
        assert!(o.status.success(), "remount: {:?}", text(&o));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).output();
    }
}

#[test]
#[cfg_attr(
    not(kdd_root),
    ignore = "needs root to mount a small tmpfs (a full disk)"
)]
fn a_full_cache_disk_is_a_clean_error_and_heals_once_there_is_room() {
    let r = indexed();
    let fs = Tmpfs::mount(&r.tmp.path().join("small"), "96k");
    let cache = fs.0.join("cache");
    let q = |args: &[&str]| {
        command(env!("CARGO_BIN_EXE_kdd"), &r.dir)
            .env_remove("KDD_NO_EMBED")
            .env("KDD_TEST_EMBEDDER", "1")
            .env("KDD_EMBED_WARM", "0")
            .env("KDD_CACHE_DIR", &cache)
            .args(args)
            .output()
            .unwrap()
    };
    // Every query, not only the first: a clean error saying what to do, never a signal.
    for _ in 0..3 {
        let o = q(&["query", "precio final del pedido"]);
        let (out, err) = text(&o);
        assert_eq!(o.status.signal(), None, "killed by a signal:\n{out}\n{err}");
        assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
        assert!(err.contains("file system full"), "{err}");
    }
    // Room again: the next query builds the cache and answers.
    fs.resize("64m");
    let o = q(&["--json", "query", "precio final del pedido"]);
    let (out, err) = ok(&o);
    assert!(out.contains("BR:BR-PRECIO-001"), "{out}\n{err}");
}

#[test]
fn a_manifest_root_outside_the_repository_is_one_error_until_kdd_index() {
    let r = indexed();
    let m = r.dir.join(".kdd-index/manifest.json");
    let before = std::fs::read_to_string(&m).unwrap();
    let crafted = before.replace(
        "\"specs_root\": \"specs\"",
        "\"specs_root\": \"../outside/specs\"",
    );
    assert_ne!(before, crafted);
    std::fs::write(&m, crafted).unwrap();
    let o = kdd(&r, &["query", "precio final del pedido"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(err.contains("manifest.json"), "{err}");
    assert!(
        err.contains("is not a folder inside the repository"),
        "{err}"
    );
    assert_eq!(
        err.lines().count(),
        1,
        "one error, not one per node:\n{err}"
    );
    ok(&kdd(&r, &["index"]));
    let (out, _) = ok(&kdd(&r, &["--json", "query", "precio final del pedido"]));
    assert!(out.contains("BR:BR-PRECIO-001"), "{out}");
}
