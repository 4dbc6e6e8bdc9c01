//! Embeddings (L2): content addressing through the real `kdd index`, L1 degradation when the
//! runtime/model is missing, vector-file robustness, doctor, and — when the real model is
//! installed (`./install.sh`) — real-model L2 on the shared corpus, cross-lingual ranking,
//! determinism, the per-user warm service and the daily workflow (a server running while
//! commits land, idle past the service's idle time, 8 concurrent clients). Tests that need the
//! real model or `../shared` are ignored with the reason when it is absent (cfgs from
//! `build.rs`); the workflow tests run both with the deterministic embedder and the model.

use crate::util::{copy_dir, git_repo, kdd_env, shared_dir, text, tree};
use kdd::embed::model::{discover, ModelChoice, ModelSpec, OrtEmbedder};
use kdd::embed::{chunk_spec, cosine, Embedder};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

const TEST: &[(&str, &str)] = &[("KDD_TEST_EMBEDDER", "1")];

fn manifest(dir: &Path) -> serde_json::Value {
    let bytes = std::fs::read(dir.join(".kdd-index/manifest.json")).expect("manifest");
    serde_json::from_slice(&bytes).expect("manifest json")
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `N embedded` from the index summary line.
fn embedded(o: &std::process::Output) -> usize {
    let s = stderr(o);
    let line = s
        .lines()
        .find(|l| l.contains("L2 embeddings"))
        .unwrap_or_else(|| panic!("no L2 summary:\n{}", text(o)));
    let before = line.split(" embedded").next().unwrap();
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

fn embeddings_files(dir: &Path) -> Vec<String> {
    tree(&dir.join(".kdd-index"))
        .into_keys()
        .filter(|k| k.starts_with("embeddings/"))
        .collect()
}

fn write_entity(dir: &Path, extra: &str) {
    let p = dir.join("specs/01-domain/entities/Pedido.md");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(
        &p,
        format!(
            "---\nkind: entity\n---\n# Pedido\n\n## Descripción\n\nRepresenta un pedido de compra realizado por un usuario registrado, con sus líneas, importes, impuestos y la dirección de entrega elegida al confirmar.\n\nEl pedido tiene un ciclo de vida que va desde borrador hasta entregado o cancelado, y cada transición emite un evento de dominio{extra}.\n\n## Atributos\n\n| nombre | tipo |\n|---|---|\n| total | Money |\n"
        ),
    )
    .unwrap();
    let r = dir.join("specs/01-domain/rules/BR-PEDIDO-001.md");
    std::fs::create_dir_all(r.parent().unwrap()).unwrap();
    std::fs::write(
        &r,
        "---\nid: BR-PEDIDO-001\nkind: business-rule\n---\n# BR-PEDIDO-001: Cancelación\n\n## Declaración\n\nUn [[Pedido]] solo puede cancelarse mientras no haya sido enviado; después de enviarlo el cliente debe solicitar una devolución siguiendo el proceso habitual.\n\n## Por qué existe\n\nPorque los envíos ya salieron del almacén y cancelarlos costaría dinero a la empresa y confundiría al transportista.\n",
    )
    .unwrap();
    let e = dir.join("specs/01-domain/events/EVT-Pedido-Cancelado.md");
    std::fs::create_dir_all(e.parent().unwrap()).unwrap();
    std::fs::write(
        &e,
        "---\nkind: event\n---\n# EVT-Pedido-Cancelado\n\n## Descripción\n\nSe emite cuando un pedido pasa a cancelado por petición del cliente antes del envío al transportista.\n",
    )
    .unwrap();
}

#[test]
fn l2_index_reuses_vectors_and_reembeds_only_edited_paragraphs() {
    let repo = git_repo();
    let dir = repo.path();
    write_entity(dir, "");
    let o = kdd_env(dir, &["index"], TEST);
    assert!(o.status.success(), "{}", text(&o));
    // 3 section chunks + the event's identity chunk (embed/identity.rs)
    assert_eq!(embedded(&o), 4, "{}", text(&o));
    let m = manifest(dir);
    assert_eq!(m["index_level"], "L2");
    assert_eq!(m["embedding"]["model"], "kdd-test-hashed-64");
    assert_eq!(m["embedding"]["dimensions"], 64);
    assert_eq!(m["embedding"]["quantization"], "int2-rms");
    // one vector file per spec, events included (their identity vector)
    assert_eq!(
        embeddings_files(dir),
        vec![
            "embeddings/business-rule/BR-PEDIDO-001.bin".to_string(),
            "embeddings/entity/Pedido.bin".to_string(),
            "embeddings/event/EVT-Pedido-Cancelado.bin".to_string(),
        ]
    );
    let before = tree(&dir.join(".kdd-index"));
    // second run: nothing embedded, byte-identical tree
    let o = kdd_env(dir, &["index"], TEST);
    assert_eq!(embedded(&o), 0, "{}", text(&o));
    assert_eq!(tree(&dir.join(".kdd-index")), before);
    // edit one paragraph: exactly that chunk is embedded
    write_entity(dir, " que otros contextos consumen");
    let o = kdd_env(dir, &["index"], TEST);
    assert_eq!(embedded(&o), 1, "{}", text(&o));
    let bytes = std::fs::read(dir.join(".kdd-index/embeddings/entity/Pedido.bin")).unwrap();
    let f = kdd::embed::decode("Pedido.bin", &bytes).unwrap();
    assert!(f.belongs_to("kdd-test-hashed-64"));
    assert_eq!((f.dims, f.records.len()), (64, 2));
}

#[test]
fn missing_runtime_or_model_indexes_at_l1_with_a_warning_and_back_to_l2() {
    let repo = git_repo();
    let dir = repo.path();
    write_entity(dir, "");
    let empty = tempfile::tempdir().unwrap();
    let data = empty.path().to_str().unwrap();
    let o = kdd_env(dir, &["index"], &[("KDD_DATA_DIR", data)]);
    assert!(o.status.success(), "{}", text(&o));
    let err = stderr(&o);
    assert!(
        err.contains("warning") && err.contains("not found"),
        "{err}"
    );
    assert!(err.contains("install.sh") && err.contains("L1"), "{err}");
    assert_eq!(manifest(dir)["index_level"], "L1");
    assert!(manifest(dir).get("embedding").is_none());
    assert!(embeddings_files(dir).is_empty());
    // a model dir that lacks files: the warning names the missing file
    let model_dir = empty.path().join("models/broken");
    std::fs::create_dir_all(&model_dir).unwrap();
    std::fs::write(model_dir.join("model.onnx"), b"not a model").unwrap();
    let o = kdd_env(
        dir,
        &["index"],
        &[
            ("KDD_MODEL_DIR", model_dir.to_str().unwrap()),
            ("KDD_DATA_DIR", data),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(stderr(&o).contains("tokenizer.json"), "{}", text(&o));
    // model back → L2
    let o = kdd_env(dir, &["index"], TEST);
    assert_eq!(manifest(dir)["index_level"], "L2", "{}", text(&o));
    assert_eq!(
        embedded(&o),
        4,
        "3 section chunks + the event's identity chunk"
    );
    // removed again → L1, the vector files are kept (nothing indexed is lost) …
    let o = kdd_env(dir, &["index"], &[("KDD_NO_EMBED", "1")]);
    assert!(o.status.success());
    assert_eq!(manifest(dir)["index_level"], "L1");
    assert_eq!(embeddings_files(dir).len(), 3);
    // … and restoring embeds nothing new
    let o = kdd_env(dir, &["index"], TEST);
    assert_eq!(embedded(&o), 0, "{}", text(&o));
}

/// The unreadable artifacts `kdd status --json` lists, as JSON text.
fn status_corrupt(dir: &Path) -> String {
    let o = kdd_env(dir, &["status", "--json"], TEST);
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", text(&o)));
    v["corrupt"].to_string()
}

#[test]
fn corrupt_vector_file_is_named_and_regenerated() {
    let repo = git_repo();
    let dir = repo.path();
    write_entity(dir, "");
    assert!(kdd_env(dir, &["index"], TEST).status.success());
    let p = dir.join(".kdd-index/embeddings/entity/Pedido.bin");
    let good = std::fs::read(&p).unwrap();
    std::fs::write(&p, b"KDDV garbage").unwrap();
    // `status` names it among the unreadable artifacts, with what to do.
    let corrupt = status_corrupt(dir);
    assert!(
        corrupt.contains("embeddings/entity/Pedido.bin") && corrupt.contains("kdd index"),
        "{corrupt}"
    );
    // Meanwhile the spec keeps its place in the graph and the text index: only its vectors
    // are missing.
    let g = kdd_env(dir, &["graph", "Entity:Pedido"], TEST);
    assert!(g.status.success(), "{}", text(&g));
    let q = kdd_env(dir, &["search", "--lexical", "Pedido", "--json"], TEST);
    assert!(stdout_has(&q, "Entity:Pedido"), "{}", text(&q));
    // Its identity record says it has no vectors (the hybrid ranking reads that flag, not
    // the full record), and says so again once the file is regenerated.
    assert!(!lite_vectors(dir, "Entity:Pedido"));
    let o = kdd_env(dir, &["index"], TEST);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        stderr(&o).contains("embeddings/entity/Pedido.bin"),
        "{}",
        text(&o)
    );
    assert_eq!(embedded(&o), 2);
    assert_eq!(std::fs::read(&p).unwrap(), good);
    assert!(lite_vectors(dir, "Entity:Pedido"));
    // A crafted file of centred codes whose centre this build does not ship (a teammate's newer
    // kdd, or a forgery) is refused by name, never decoded against the wrong centre.
    let mut crafted = b"KDDV\x02\x00\x05\x09\x80\x01".to_vec();
    crafted.extend_from_slice(&kdd::embed::store::fingerprint(
        kdd::embed::model::DEFAULT_MODEL,
    ));
    crafted.extend_from_slice(&[0u8; 8 + 4 + 48]);
    std::fs::write(&p, &crafted).unwrap();
    let corrupt = status_corrupt(dir);
    assert!(
        corrupt.contains("embeddings/entity/Pedido.bin") && corrupt.contains("centre"),
        "{corrupt}"
    );
    assert!(kdd_env(dir, &["index"], TEST).status.success());
    assert_eq!(std::fs::read(&p).unwrap(), good);
}

/// The `vectors` flag of a node's identity record in a query cache of `dir` kept across calls
/// (so a later call updates it incrementally).
fn lite_vectors(dir: &Path, id: &str) -> bool {
    let cache = kdd::cache::Cache::open_paths(
        &dir.join(".kdd-index"),
        dir,
        &dir.join(".git/kdd-cache-lite-test"),
        &kdd::cache::OpenOptions::default(),
    )
    .expect("cache opens");
    let snap = cache.snapshot().expect("snapshot");
    snap.lite(id).expect("lite").expect("node").vectors
}

#[test]
fn doctor_reports_checks_with_fixes() {
    let repo = git_repo();
    let dir = repo.path();
    let empty = tempfile::tempdir().unwrap();
    let o = kdd_env(
        dir,
        &["doctor", "--json", "--no-load"],
        &[("KDD_DATA_DIR", empty.path().to_str().unwrap())],
    );
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", text(&o)));
    let checks = v["checks"].as_array().unwrap();
    let by = |n: &str| {
        checks
            .iter()
            .find(|c| c["name"] == n)
            .unwrap_or_else(|| panic!("{n}: {v}"))
    };
    assert_eq!(by("runtime")["status"], "warn");
    assert!(by("runtime")["fix"]
        .as_str()
        .unwrap()
        .contains("install.sh"));
    assert_eq!(by("active-model")["status"], "warn");
    assert_eq!(by("translator")["status"], "info"); // KDD_TRANSLATE=off in tests
    assert!(by("index")["message"]
        .as_str()
        .unwrap()
        .contains("no index"));
    // The translator: a working program is ok, a missing one a warning with the install command.
    let glossary = crate::util::fixture("translate/glossary-translator");
    for (program, status) in [
        (glossary.to_str().unwrap(), "ok"),
        ("/nonexistent/tr", "warn"),
    ] {
        let c = crate::util::doctor_check(
            dir,
            &[("KDD_TRANSLATE", "on"), ("KDD_TRANSLATOR", program)],
            "translator",
        );
        assert_eq!(c["status"], status, "{c}");
        if status == "warn" {
            assert!(
                c["fix"].as_str().unwrap().contains("apertium-eng-spa"),
                "{c}"
            );
        }
    }
    write_entity(dir, "");
    assert!(kdd_env(dir, &["index"], TEST).status.success());
    let o = kdd_env(dir, &["doctor"], TEST);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("index level L2") && out.contains("kdd-test-hashed-64"),
        "{}",
        text(&o)
    );
}

// ---------------------------------------------------------------------------------------------
// Real model (installed by ./install.sh): ignored with the reason when absent.
// ---------------------------------------------------------------------------------------------

fn real_spec() -> Option<ModelSpec> {
    match discover() {
        ModelChoice::Model(spec) if spec.missing_file().is_none() && spec.runtime.exists() => {
            Some(spec)
        }
        _ => None,
    }
}

/// The real model, loaded once for all tests of this binary.
fn real_model() -> Option<&'static Mutex<OrtEmbedder>> {
    static MODEL: OnceLock<Option<Mutex<OrtEmbedder>>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let spec = real_spec()?;
            match OrtEmbedder::load(&spec) {
                Ok(m) => Some(Mutex::new(m)),
                Err(e) => panic!("the model looks installed but does not load: {e}"),
            }
        })
        .as_ref()
}

fn installed_model() -> &'static Mutex<OrtEmbedder> {
    real_model().expect("build.rs saw the model installed, but discovery does not find it")
}

fn corpus() -> PathBuf {
    shared_dir()
        .expect("build.rs saw ../shared")
        .join("corpus/kdd-engine/specs")
}

#[test]
#[cfg_attr(
    not(kdd_real_model),
    ignore = "embedding model not installed (run ./install.sh)"
)]
fn real_model_cross_lingual_self_written_pair() {
    let mut m = installed_model().lock().unwrap();
    let rules = [
        "Un pedido solo puede cancelarse mientras no haya sido enviado al cliente.",
        "La contraseña de un usuario debe tener al menos doce caracteres y renovarse cada año.",
        "Las facturas se emiten en euros y redondean los importes a dos decimales.",
    ];
    let texts: Vec<String> = rules.iter().map(|s| s.to_string()).collect();
    let v = m.embed_passages(&texts).unwrap();
    let q = m
        .embed_query("Can an order be cancelled after it was shipped?")
        .unwrap();
    let scores: Vec<f32> = v.iter().map(|x| cosine(&q, x)).collect();
    assert!(scores[0] > scores[1] && scores[0] > scores[2], "{scores:?}");
    let q = m.embed_query("password length policy").unwrap();
    let scores: Vec<f32> = v.iter().map(|x| cosine(&q, x)).collect();
    assert!(scores[1] > scores[0] && scores[1] > scores[2], "{scores:?}");
}

#[test]
#[cfg_attr(
    not(kdd_real_model),
    ignore = "embedding model not installed (run ./install.sh)"
)]
fn real_model_vectors_do_not_depend_on_batch_or_order() {
    let mut m = installed_model().lock().unwrap();
    let a: Vec<String> = vec![
        "Texto corto.".into(),
        "Un párrafo bastante más largo que habla de pedidos, envíos, devoluciones y de las reglas que los gobiernan en la tienda.".into(),
        "Third text in English about the indexing pipeline and its levels.".into(),
    ];
    let v1 = m.embed_passages(&a).unwrap();
    let mut rev = a.clone();
    rev.reverse();
    let mut v2 = m.embed_passages(&rev).unwrap();
    v2.reverse();
    assert_eq!(v1, v2, "vectors must be bit-identical whatever the batch");
    let single = m.embed_passages(&a[1..2]).unwrap();
    assert_eq!(single[0], v1[1]);
}

#[test]
#[cfg_attr(
    not(kdd_real_model),
    ignore = "embedding model not installed (run ./install.sh)"
)]
#[cfg_attr(not(kdd_shared), ignore = "../shared (the shared corpus) is absent")]
fn real_model_english_question_ranks_the_spanish_rule_first() {
    let dir = corpus();
    let mut m = installed_model().lock().unwrap();
    let rules_dir = dir.join("01-domain/rules");
    let mut rules = Vec::new();
    for e in std::fs::read_dir(&rules_dir).unwrap().flatten() {
        let path = format!("specs/01-domain/rules/{}", e.file_name().to_string_lossy());
        let bytes = std::fs::read(e.path()).unwrap();
        let ex = kdd::extract::extract(&path, &bytes, "specs").expect("extract");
        rules.push(ex);
    }
    rules.sort_by(|a, b| a.node.id.cmp(&b.node.id));
    assert!(rules.len() >= 4);
    let model_id = m.model_id().to_string();
    let mut best: Vec<(f32, String)> = Vec::new();
    let questions = [
        ("Which sections of each document kind get embeddings, and how are paragraphs chunked?", "BR:BR-EMBEDDING-001"),
        ("What happens when two developers change related specs and their indexes must be merged?", "BR:BR-MERGE-001"),
    ];
    for (q, want) in questions {
        let qv = m.embed_query(q).unwrap();
        best.clear();
        for r in &rules {
            let chunks = chunk_spec(r, &model_id);
            let texts: Vec<String> = chunks.iter().map(|c| c.context_text.clone()).collect();
            let vs = m.embed_passages(&texts).unwrap();
            let s = vs.iter().map(|v| cosine(&qv, v)).fold(f32::MIN, f32::max);
            best.push((s, r.node.id.clone()));
        }
        best.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
        println!("cross-lingual: {q:?} → {:?}", &best[..3]);
        assert_eq!(best[0].1, want, "{best:?}");
    }
}

#[test]
#[cfg_attr(
    not(kdd_real_model),
    ignore = "embedding model not installed (run ./install.sh)"
)]
#[cfg_attr(not(kdd_shared), ignore = "../shared (the shared corpus) is absent")]
fn real_model_corpus_l2_index_second_run_and_one_paragraph_edit() {
    let src = corpus();
    let repo = git_repo();
    let dir = repo.path();
    copy_dir(&src, &dir.join("specs"));
    let t = std::time::Instant::now();
    let o = kdd_env(dir, &["index"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let first = embedded(&o);
    println!(
        "corpus L2 index: {:.1}s; {}",
        t.elapsed().as_secs_f64(),
        stderr(&o)
            .lines()
            .find(|l| l.contains("L2 embeddings"))
            .unwrap()
    );
    assert!(first > 54, "{}", text(&o));
    assert_eq!(manifest(dir)["index_level"], "L2");
    assert_eq!(
        manifest(dir)["embedding"]["model"],
        "multilingual-e5-small-int8"
    );
    let spec_bytes: usize = tree(&dir.join("specs")).values().map(Vec::len).sum();
    let index = tree(&dir.join(".kdd-index"));
    let vec_bytes: usize = index
        .iter()
        .filter(|(k, _)| k.starts_with("embeddings/"))
        .map(|(_, v)| v.len())
        .sum();
    let all_bytes: usize = index.values().map(Vec::len).sum();
    println!(
        "size: specs {spec_bytes} B, vectors {vec_bytes} B ({:.1}%), whole index {all_bytes} B ({:.1}%)",
        100.0 * vec_bytes as f64 / spec_bytes as f64,
        100.0 * all_bytes as f64 / spec_bytes as f64
    );
    // second run: nothing embedded, nothing rewritten
    let o = kdd_env(dir, &["index"], &[]);
    assert_eq!(embedded(&o), 0, "{}", text(&o));
    assert_eq!(tree(&dir.join(".kdd-index")), index);
    // edit one paragraph of BR-EMBEDDING-001's Declaración
    let p = dir.join("specs/01-domain/rules/BR-EMBEDDING-001.md");
    let s = std::fs::read_to_string(&p).unwrap();
    let s2 = s.replacen("se embeben.", "se embeben siempre.", 1);
    assert_ne!(s, s2);
    std::fs::write(&p, s2).unwrap();
    let o = kdd_env(dir, &["index"], &[]);
    let n = embedded(&o);
    assert!((1..=2).contains(&n), "{}", text(&o));
}

#[test]
#[cfg_attr(
    not(kdd_real_model),
    ignore = "embedding model not installed (run ./install.sh)"
)]
fn real_model_warm_service_matches_in_process_vectors() {
    let spec = real_spec().expect("model installed");
    let m = installed_model();
    let run = tempfile::tempdir().unwrap();
    let socket = run.path().join("kdd/embed-test.sock");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kdd"))
        .args(["doctor", "--embed-server"])
        .arg(&socket)
        .env("KDD_MODEL_DIR", &spec.dir)
        .env("ORT_DYLIB_PATH", &spec.runtime)
        .env_remove("KDD_NO_EMBED")
        .env_remove("KDD_TEST_EMBEDDER")
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    let mut client = loop {
        match kdd::embed::warm::WarmClient::connect(&socket, &spec, Duration::from_secs(30)) {
            Ok(c) => break c,
            Err(_) if start.elapsed().as_secs() < 60 => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => panic!("warm service did not come up: {e}"),
        }
    };
    let texts = vec!["Un pedido se cancela antes del envío.".to_string()];
    let remote = client.embed_passages(&texts).unwrap();
    let local = m.lock().unwrap().embed_passages(&texts).unwrap();
    assert_eq!(remote, local);
    let t = std::time::Instant::now();
    let q = client.embed_query("cancel an order").unwrap();
    println!(
        "warm query latency: {:.1} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );
    assert_eq!(q.len(), client.dims());
    let st = client.status(&socket).unwrap();
    println!("warm service RSS: {} MB", st.rss_kb / 1024);
    assert!(st.rss_kb > 0);
    // removing the socket stops the service
    std::fs::remove_file(&socket).unwrap();
    let t = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(t.elapsed().as_secs() < 10, "service did not exit");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The daily workflow and the warm service (module file `tests/it/embed/flow.rs`).
pub mod flow;
mod golden;

fn stdout_has(o: &std::process::Output, what: &str) -> bool {
    String::from_utf8_lossy(&o.stdout).contains(what)
}

#[test]
#[cfg_attr(
    not(kdd_real_model),
    ignore = "embedding model not installed (run ./install.sh)"
)]
fn the_real_runtime_keeps_no_files_of_its_own() {
    // ONNX Runtime keeps a device id and a telemetry store under the user's cache folder when
    // a model loads: kdd writes nowhere but `.kdd-index/` and its own cache.
    let spec = real_spec().expect("the model is installed");
    let data = spec
        .runtime
        .parent()
        .and_then(Path::parent)
        .expect("data dir");
    let home = tempfile::tempdir().unwrap();
    let dir = git_repo();
    write_entity(dir.path(), "");
    let data = data.to_string_lossy();
    let home_s = home.path().to_string_lossy();
    let env = [
        ("HOME", home_s.as_ref()),
        ("KDD_DATA_DIR", data.as_ref()),
        ("KDD_EMBED_WARM", "0"),
    ];
    let o = kdd_env(dir.path(), &["index"], &env);
    assert!(o.status.success(), "{:?}", text(&o));
    assert_eq!(manifest(dir.path())["index_level"], "L2", "{:?}", text(&o));
    let o = kdd_env(dir.path(), &["query", "cancelar un pedido enviado"], &env);
    assert!(o.status.success(), "{:?}", text(&o));
    let left: Vec<String> = tree(home.path()).into_keys().collect();
    assert!(left.is_empty(), "written under HOME: {left:?}");
}
