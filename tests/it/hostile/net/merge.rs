//! Hostile cases of the merge driver (through real `git merge`) and of what `kdd index`
//! writes: unknown node/edge keys kept, a valid vector file beats a broken one, a bounded
//! proptest-driven mutation fuzz of the driver's inputs (`KDD_FUZZ_CASES`), artifact modes
//! under the umask, file names that try to drive the terminal.

use crate::repo::{command, text, Repo};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::time::Instant;

// ───────────────────────────── merge driver ─────────────────────────────

/// A repository whose `.kdd-index/` is merged by the real `kdd-merge-driver`.
fn driver_repo() -> Repo {
    let r = Repo::new();
    r.git(&["config", "merge.kdd.name", "kdd index merge driver"]);
    r.git(&["config", "merge.kdd.driver", "kdd-merge-driver %O %A %B %P"]);
    r.write(".gitattributes", ".kdd-index/** merge=kdd\n");
    r
}

fn write_bytes(r: &Repo, rel: &str, bytes: &[u8]) {
    let p = r.dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

/// Commit `base`, then `theirs` on a branch and `ours` on main, and `git merge` the branch.
/// Returns whether the merge succeeded and the merged bytes of `rel`.
fn git_merge(rel: &str, base: &[u8], ours: &[u8], theirs: &[u8]) -> (bool, Vec<u8>) {
    let r = driver_repo();
    write_bytes(&r, rel, base);
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "base"]);
    r.git(&["checkout", "-qb", "theirs"]);
    write_bytes(&r, rel, theirs);
    r.git(&["commit", "-qam", "theirs"]);
    r.git(&["checkout", "-q", "main"]);
    write_bytes(&r, rel, ours);
    r.git(&["commit", "-qam", "ours"]);
    let o = r.git_out(&["merge", "-q", "--no-edit", "theirs"]);
    (o.status.success(), std::fs::read(r.dir.join(rel)).unwrap())
}

/// A node file as a newer kdd could write it: the known fields, then extra keys.
fn node_json(title: &str, hash: &str, extra: Value) -> Vec<u8> {
    let mut v = json!({"id": "Entity:Pedido", "kind": "entity",
        "source_file": "specs/01-domain/entities/Pedido.md", "source_hash": hash,
        "title": title, "layer": "01-domain"});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    let mut b = serde_json::to_vec(&v).unwrap();
    b.push(b'\n');
    b
}

fn vectors(seed: u8) -> Vec<u8> {
    let v: Vec<f32> = (0..8).map(|i| (i as f32 - seed as f32) / 10.0).collect();
    kdd::embed::encode(&kdd::embed::VectorFile::new(
        "test-model",
        8,
        vec![kdd::embed::store::Record::quantize([seed; 8], &v)],
    ))
}

#[test]
fn merge_driver_keeps_unknown_fields() {
    let node = ".kdd-index/nodes/entity/Pedido.json";
    let base = node_json("Pedido", "aa", json!({"x_future": {"since": 3}}));
    let ours = node_json(
        "Pedido A",
        "bb",
        json!({"x_future": {"since": 3}, "x_ours": 1}),
    );
    let theirs = node_json(
        "Pedido B",
        "cc",
        json!({"x_future": {"since": 4}, "x_theirs": [2]}),
    );
    let (ok, merged) = git_merge(node, &base, &ours, &theirs);
    assert!(ok, "{}", String::from_utf8_lossy(&merged));
    // Both changed: one whole side wins, its unknown keys included (the same either way round).
    assert_eq!(merged, ours.clone().min(theirs.clone()));
    let (ok, swapped) = git_merge(node, &base, &theirs, &ours);
    assert!(ok);
    assert_eq!(swapped, merged);

    let edges = ".kdd-index/edges/entity/Pedido.jsonl";
    let a = r#"{"type":"WIKI_LINK","to":"A","x_note":"kept"}"#;
    let b = r#"{"type":"WIKI_LINK","to":"B","x_weight":2}"#;
    let c = r#"{"type":"EMITS","to":"C","x_since":"v3"}"#;
    let (ok, merged) = git_merge(
        edges,
        format!("{a}\n").as_bytes(),
        format!("{a}\n{b}\n").as_bytes(),
        format!("{a}\n{c}\n").as_bytes(),
    );
    assert!(ok, "{}", String::from_utf8_lossy(&merged));
    // v1 lines in, v2 groups out (one per type and set of unknown keys), unknown keys kept; a
    // v1 typed line has no generic twin, so its v2 line says `bare`.
    let v2 =
        |l: &str, to: &str| l.replace(&format!("\"to\":\"{to}\""), &format!("\"to\":[\"{to}\"]"));
    let c2 = v2(c, "C").replace("[\"C\"],", "[\"C\"],\"bare\":true,");
    assert_eq!(
        String::from_utf8(merged).unwrap(),
        format!("{c2}\n{}\n{}\n", v2(a, "A"), v2(b, "B"))
    );
}

#[test]
fn merge_driver_prefers_a_valid_vector_file() {
    let rel = ".kdd-index/embeddings/entity/Pedido.bin";
    for bad in [b"".as_slice(), b"garbage\0\x01", &vectors(3)[..20]] {
        let (ok, merged) = git_merge(rel, &vectors(1), &vectors(2), bad);
        assert!(ok, "ours valid, theirs {bad:?}");
        assert_eq!(merged, vectors(2));
        let (ok, merged) = git_merge(rel, &vectors(1), bad, &vectors(4));
        assert!(ok, "theirs valid, ours {bad:?}");
        assert_eq!(merged, vectors(4));
    }
    // Two invalid sides: a conflict, ours kept (git's behaviour for binary files).
    let (ok, merged) = git_merge(rel, &vectors(1), b"garbage\0", b"");
    assert!(!ok);
    assert_eq!(merged, b"garbage\0");
}

#[test]
fn merge_index_keeps_unknown_fields() {
    let r = Repo::new();
    let manifest = kdd::artifact::render_manifest(&kdd::artifact::Manifest::new(
        "specs",
        kdd::artifact::Structure::SingleDomain,
        vec![],
    ));
    write_bytes(&r, ".kdd-index/manifest.json", &manifest);
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "base"]);
    let node = ".kdd-index/nodes/entity/Pedido.json";
    let edges = ".kdd-index/edges/entity/Pedido.jsonl";
    let line = r#"{"type":"WIKI_LINK","to":["A"],"x_weight":2}"#;
    r.git(&["checkout", "-qb", "a"]);
    write_bytes(
        &r,
        node,
        &node_json("Pedido", "aa", json!({"x_future": [1]})),
    );
    write_bytes(&r, edges, format!("{line}\n").as_bytes());
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "a"]);
    r.git(&["checkout", "-qb", "b", "main"]);
    r.git(&["commit", "-q", "--allow-empty", "-m", "b"]);
    let out = r.tmp.path().join("merged");
    let o = r.kdd(&["merge-index", "a", "b", "--output", out.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    let rel = |p: &str| out.join(p.trim_start_matches(".kdd-index/"));
    assert_eq!(
        std::fs::read(rel(node)).unwrap(),
        node_json("Pedido", "aa", json!({"x_future": [1]}))
    );
    assert_eq!(
        std::fs::read_to_string(rel(edges)).unwrap(),
        format!("{line}\n")
    );
}

/// One mutation of a driver input.
#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    DuplicateLine(usize),
    ConflictMarkers(usize),
    Empty,
    SpliceFromOther(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (
            any::<usize>(),
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 1..8),
                Just(b"\",\"x_new\":{\"a\":[1]},\"".to_vec()),
                Just(b"\n{\"type\":\"EMITS\",\"to\":\"Z\",\"extra\":null}\n".to_vec()),
                Just(vec![0xff, 0xfe, 0]),
            ]
        )
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        any::<usize>().prop_map(Mutation::ConflictMarkers),
        Just(Mutation::Empty),
        any::<usize>().prop_map(Mutation::SpliceFromOther),
    ]
}

fn mutate(mut b: Vec<u8>, other: &[u8], ms: &[Mutation]) -> Vec<u8> {
    for m in ms {
        let at = |i: usize, len: usize| if len == 0 { 0 } else { i % (len + 1) };
        match m {
            Mutation::Flip(i, x) if !b.is_empty() => {
                let n = b.len();
                b[i % n] ^= x | 1;
            }
            Mutation::Flip(..) => {}
            Mutation::Truncate(i) => b.truncate(at(*i, b.len())),
            Mutation::Insert(i, x) => {
                let i = at(*i, b.len());
                b.splice(i..i, x.iter().copied());
            }
            Mutation::DuplicateLine(i) => {
                let text = String::from_utf8_lossy(&b).into_owned();
                let lines: Vec<&str> = text.lines().collect();
                if !lines.is_empty() {
                    let l = lines[i % lines.len()];
                    b.extend_from_slice(format!("{l}\n").as_bytes());
                }
            }
            Mutation::ConflictMarkers(i) => {
                let i = at(*i, b.len());
                b.splice(
                    i..i,
                    b"<<<<<<< ours\n=======\n>>>>>>> theirs\n".iter().copied(),
                );
            }
            Mutation::Empty => b.clear(),
            Mutation::SpliceFromOther(i) => {
                let cut = at(*i, other.len());
                b = [&b[..b.len() / 2], &other[cut..]].concat();
            }
        }
    }
    b
}

fn enrichment(hash: &str, agent: &str) -> Vec<u8> {
    use kdd::artifact::enrichment::{render, Enrichment, Entry};
    let entry = Entry {
        spec_hash: hash.into(),
        agent: agent.into(),
        summary: "s".into(),
        relations: Vec::new(),
        impact: vec!["n".into()],
        vector: None,
    };
    render(&Enrichment::single("Entity:Pedido", entry))
}

/// Is `bytes` a readable artifact of `kind` (what a clean merge must produce)?
fn readable(kind: kdd::merge::FileKind, bytes: &[u8]) -> bool {
    use kdd::merge::FileKind;
    let obj = |b: &[u8]| serde_json::from_slice::<Value>(b).is_ok_and(|v| v.is_object());
    match kind {
        FileKind::Node => obj(bytes),
        FileKind::Edges => {
            std::str::from_utf8(bytes).is_ok_and(|t| t.lines().all(|l| obj(l.as_bytes())))
        }
        FileKind::Embedding => kdd::embed::decode("", bytes).is_ok(),
        FileKind::Manifest => obj(bytes),
        FileKind::Enrichment => kdd::artifact::enrichment::parse(bytes).is_ok(),
        FileKind::Other => true,
    }
}

/// The bounded fuzz of the merge driver's inputs: valid artifacts of every kind, mutated (bit
/// flips, truncation, insertions, duplicated lines, conflict markers, emptied, spliced), merged
/// in-process both ways round and, for a sample, by the real driver binary. `KDD_FUZZ_CASES`
/// sets the number of cases (default 300, about a second; CI may raise it).
#[test]
fn merge_driver_fuzz() {
    use kdd::merge::{merge_file, FileKind, Outcome};
    let cases: u32 = std::env::var("KDD_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let manifest = kdd::artifact::render_manifest(&kdd::artifact::Manifest::new(
        "specs",
        kdd::artifact::Structure::SingleDomain,
        vec![],
    ));
    let seeds: Vec<(FileKind, &str, Vec<u8>, Vec<u8>)> = vec![
        (
            FileKind::Node,
            ".kdd-index/nodes/entity/Pedido.json",
            node_json("Pedido", "aa", json!({"x_future": 1})),
            node_json("Orden", "bb", json!({})),
        ),
        (
            FileKind::Edges,
            ".kdd-index/edges/entity/Pedido.jsonl",
            b"{\"type\":\"EMITS\",\"to\":\"EVT-X\"}\n{\"type\":\"WIKI_LINK\",\"to\":\"B\",\"domain\":\"d\"}\n".to_vec(),
            b"{\"type\":\"WIKI_LINK\",\"to\":\"C\",\"x\":1}\n".to_vec(),
        ),
        (
            FileKind::Embedding,
            ".kdd-index/embeddings/entity/Pedido.bin",
            vectors(1),
            vectors(2),
        ),
        (FileKind::Manifest, ".kdd-index/manifest.json", manifest.clone(), manifest),
        (
            FileKind::Enrichment,
            ".kdd-index/enrichments/entity/Pedido.json",
            enrichment("h1", "a@1"),
            enrichment("h2", "b@2"),
        ),
    ];
    let muts = || proptest::collection::vec(mutation(), 0..3);
    let strategy = (0..seeds.len(), muts(), muts(), muts(), any::<bool>());
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let tmp = tempfile::tempdir().unwrap();
    let driver_runs = std::cell::Cell::new(0u32);
    let driver_budget = (cases / 10).clamp(4, 40);
    let t0 = Instant::now();
    runner
        .run(&strategy, |(s, mb, mo, mt, no_base)| {
            let (kind, path, a, b) = &seeds[s];
            let base = (!no_base).then(|| mutate(a.clone(), b, &mb));
            let ours = mutate(a.clone(), b, &mo);
            let theirs = mutate(b.clone(), a, &mt);
            let one = merge_file(*kind, base.as_deref(), &ours, &theirs);
            let two = merge_file(*kind, base.as_deref(), &theirs, &ours);
            match (&one, &two) {
                (Outcome::Merged(x), Outcome::Merged(y)) => {
                    prop_assert_eq!(x, y, "sides do not commute");
                    prop_assert!(readable(*kind, x), "unreadable merge result");
                    prop_assert_eq!(
                        merge_file(*kind, Some(x), x, x),
                        Outcome::Merged(x.clone()),
                        "merging the result with itself changes it"
                    );
                }
                (Outcome::Conflict(_), Outcome::Conflict(_))
                | (Outcome::Unsupported(_), Outcome::Unsupported(_)) => {}
                _ => prop_assert!(false, "{one:?} vs {two:?}"),
            }
            if driver_runs.get() < driver_budget {
                driver_runs.set(driver_runs.get() + 1);
                let f = |n: &str, b: &[u8]| {
                    let p = tmp.path().join(n);
                    std::fs::write(&p, b).unwrap();
                    p
                };
                let (pb, pa, pt) = (
                    f("O", base.as_deref().unwrap_or(b"")),
                    f("A", &ours),
                    f("B", &theirs),
                );
                let o = command(env!("CARGO_BIN_EXE_kdd-merge-driver"), tmp.path())
                    .args([&pb, &pa, &pt])
                    .arg(path)
                    .output()
                    .unwrap();
                let code = o.status.code();
                prop_assert!(
                    matches!(code, Some(0 | 1)),
                    "driver exit {code:?}: {}",
                    text(&o).1
                );
                if let (Some(0), Outcome::Merged(x)) = (code, &one) {
                    prop_assert_eq!(&std::fs::read(&pa).unwrap(), x);
                }
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "merge driver fuzz: {cases} cases ({} through the binary) in {:?}",
        driver_runs.get(),
        t0.elapsed()
    );
}

// ───────────────────────────── files and terminals ─────────────────────────────

#[cfg(unix)]
#[test]
fn artifacts_follow_the_umask_like_git() {
    use std::os::unix::fs::PermissionsExt;
    let r = Repo::new();
    r.write(
        "specs/01-domain/entities/Pedido.md",
        "---\nid: Pedido\nkind: entity\n---\n\n# Pedido\n\n## Descripción\n\nUn pedido.\n",
    );
    for (umask, want) in [("027", 0o640), ("002", 0o664), ("077", 0o600)] {
        let _ = std::fs::remove_dir_all(r.dir.join(".kdd-index"));
        let o = command("sh", &r.dir)
            .args(["-c", &format!("umask {umask} && exec \"$0\" index")])
            .arg(env!("CARGO_BIN_EXE_kdd"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{:?}", text(&o));
        for rel in [
            ".kdd-index/nodes/entity/Pedido.json",
            ".kdd-index/manifest.json",
        ] {
            let mode = std::fs::metadata(r.dir.join(rel))
                .unwrap()
                .permissions()
                .mode()
                & 0o777;
            assert_eq!(mode, want, "{rel} under umask {umask}: {mode:o}");
        }
    }
}

#[cfg(unix)]
#[test]
fn file_names_cannot_drive_the_terminal() {
    let r = Repo::new();
    let evil = "specs/01-domain/entities/Bad\u{1b}[2J\u{1b}]0;pwned\u{7}\nkdd: all good\r.md";
    r.write(evil, "---\nid: [unclosed\nkind: entity\n---\n\n# Bad\n");
    r.write(
        "specs/01-domain/entities/Ok.md",
        "---\nid: Ok\nkind: entity\n---\n\n# Ok\n",
    );
    r.git(&["add", "-A"]);
    for args in [&["index"][..], &["verify"], &["status"]] {
        let o = r.kdd(args);
        for (name, stream) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
            let s = String::from_utf8_lossy(stream);
            assert!(!s.contains('\u{1b}'), "{args:?} {name} has ESC: {s:?}");
            assert!(!s.contains('\r'), "{args:?} {name} has CR: {s:?}");
            assert!(!s.contains('\u{7}'), "{args:?} {name} has BEL: {s:?}");
            assert!(
                !s.lines().any(|l| l.starts_with("kdd: all good")),
                "{args:?} {name} has a forged line: {s}"
            );
        }
    }
    let o = r.kdd(&["index"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("Bad\\u001b[2J"),
        "the name is shown escaped: {err}"
    );
}
