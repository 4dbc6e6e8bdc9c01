//! `kdd -C server.git <read command>`: read commands answer from the tree of a ref of a bare
//! repository (default: the served ref, else HEAD's branch; `--ref` to pick another), the mirror
//! is refreshed lazily when the ref moves, and `kdd index` there says what to do.

use crate::repo::{text, Repo};

fn entity(id: &str, body: &str) -> String {
    format!("---\nid: {id}\nkind: entity\n---\n# {id}\n\n{body}\n")
}

/// A bare `server.git` and a clone `a` that pushed one indexed spec to `main`.
fn pushed() -> (Repo, std::path::PathBuf, Repo) {
    let origin = Repo::new();
    let bare = origin.tmp.path().join("server.git");
    origin.git(&["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()]);
    let a = origin.clone_of(&bare, "a");
    a.write(
        "specs/01-domain/entities/Pedido.md",
        &entity(
            "Pedido",
            "Un pedido agrupa las lineas de compra de un cliente.",
        ),
    );
    commit_indexed(&a, "pedido");
    a.git(&["push", "-q", "origin", "HEAD:main"]);
    (origin, bare, a)
}

fn commit_indexed(r: &Repo, msg: &str) {
    let o = r.kdd(&["index", "-q"]);
    assert!(o.status.success(), "{:?}", text(&o));
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", msg]);
}

fn ids(o: &std::process::Output) -> Vec<String> {
    let (out, err) = text(o);
    // 1: nothing matched (still a JSON answer).
    assert!(matches!(o.status.code(), Some(0 | 1)), "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    v["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|h| h["node_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn read_commands_answer_from_a_bare_repository() {
    let (origin, bare, a) = pushed();
    let b = bare.to_str().unwrap();
    // Default ref: HEAD's branch (main). No post-receive hook is installed: the first read
    // mirrors the tree itself.
    let o = origin.kdd(&["-C", b, "--json", "query", "lineas de compra del cliente"]);
    assert_eq!(ids(&o), vec!["Entity:Pedido"]);
    // A relative path given inside a clone's work tree names the bare repository, as `git -C`.
    let q = [
        "-C",
        "../server.git",
        "--json",
        "query",
        "lineas de compra del cliente",
    ];
    assert_eq!(ids(&a.kdd(&q)), vec!["Entity:Pedido"]);
    for args in [
        vec!["status", "--json"],
        vec!["graph", "Entity:Pedido"],
        vec!["impact", "Entity:Pedido"],
        vec!["search", "--lexical", "pedido"],
        vec!["context", "--hint", "Pedido"],
    ] {
        let mut full = vec!["-C", b];
        full.extend(&args);
        let o = origin.kdd(&full);
        let (out, err) = text(&o);
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{args:?}: {out}\n{err}"
        );
        assert!(
            out.contains("Pedido") || out.contains("\"nodes\": 1"),
            "{args:?}: {out}"
        );
    }

    // A branch pushed later: `--ref` reads it; the default still reads main.
    a.git(&["checkout", "-q", "-b", "feature"]);
    a.write(
        "specs/01-domain/entities/Factura.md",
        &entity(
            "Factura",
            "La factura resume el importe cobrado de un pedido.",
        ),
    );
    commit_indexed(&a, "factura");
    a.git(&["push", "-q", "origin", "feature"]);
    let q = ["-C", b, "--json", "query", "importe cobrado de la factura"];
    assert!(!ids(&origin.kdd(&q)).contains(&"Entity:Factura".to_string()));
    for r in ["feature", "refs/heads/feature"] {
        let mut args = q.to_vec();
        args.extend(["--ref", r]);
        assert_eq!(ids(&origin.kdd(&args))[0], "Entity:Factura", "--ref {r}");
    }
    // The served ref (kdd.serveRef) becomes the default.
    origin.git(&["-C", b, "config", "kdd.serveRef", "feature"]);
    assert_eq!(ids(&origin.kdd(&q))[0], "Entity:Factura");
    origin.git(&["-C", b, "config", "--unset", "kdd.serveRef"]);

    // main moves: the next read refreshes the mirror lazily.
    a.git(&["checkout", "-q", "main"]);
    a.git(&["merge", "-q", "--ff-only", "feature"]);
    a.git(&["push", "-q", "origin", "main"]);
    assert_eq!(ids(&origin.kdd(&q))[0], "Entity:Factura");

    // An unknown ref and `kdd index` are clear errors; nothing is written into the repository
    // but the cache directory.
    let o = origin.kdd(&["-C", b, "query", "pedido", "--ref", "nope"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("`nope`") && err.contains("--ref"), "{err}");
    let o = origin.kdd(&["-C", b, "index"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bare repository") && err.contains("clone") && err.contains("query"),
        "{err}"
    );
    let mut entries: Vec<String> = std::fs::read_dir(&bare)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert!(
        !entries.iter().any(|e| e == ".kdd-index" || e == "specs"),
        "{entries:?}"
    );
}

#[test]
fn read_commands_take_ref_in_a_work_tree() {
    let (_origin, _bare, a) = pushed();
    a.git(&["checkout", "-q", "-b", "next"]);
    a.write(
        "specs/01-domain/entities/Factura.md",
        &entity(
            "Factura",
            "La factura resume el importe cobrado de un pedido.",
        ),
    );
    commit_indexed(&a, "factura");
    a.git(&["checkout", "-q", "main"]);
    let q = ["--json", "query", "importe cobrado de la factura"];
    assert!(!ids(&a.kdd(&q)).contains(&"Entity:Factura".to_string()));
    let mut args = q.to_vec();
    args.extend(["--ref", "next"]);
    assert_eq!(ids(&a.kdd(&args))[0], "Entity:Factura");
}

/// Write a tree object from `(mode, name, id)` entries as given (no sorting, no checks: the
/// hand-made trees `git hash-object --literally` accepts and git's fsck refuses).
fn literal_tree(r: &Repo, entries: &[(String, String, String)]) -> String {
    use std::io::Write;
    let mut data = Vec::new();
    for (mode, name, id) in entries {
        data.extend_from_slice(format!("{mode} {name}\0").as_bytes());
        let raw: Vec<u8> = (0..id.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&id[i..i + 2], 16).unwrap())
            .collect();
        data.extend_from_slice(&raw);
    }
    let mut c = crate::repo::command("git", &r.dir)
        .args(["hash-object", "-t", "tree", "-w", "--literally", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(&data).unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(o.status.success());
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

/// The entries of `tree` with `name`'s id replaced by `id` (and `extra` appended after it).
fn retree(r: &Repo, tree: &str, name: &str, id: &str, extra: Option<(&str, &str)>) -> String {
    let mut entries = Vec::new();
    for line in r.git(&["ls-tree", tree]).lines() {
        let (meta, n) = line.split_once('\t').unwrap();
        let f: Vec<&str> = meta.split(' ').collect();
        let mode = f[0].trim_start_matches('0').to_string();
        let own = if n == name { id } else { f[2] };
        entries.push((mode, n.to_string(), own.to_string()));
        if let (true, Some((mode, extra))) = (n == name, extra) {
            entries.push((mode.to_string(), n.to_string(), extra.to_string()));
        }
    }
    literal_tree(r, &entries)
}

#[test]
fn a_pushed_tree_holding_a_path_as_file_and_folder_keeps_the_server_answering() {
    let (origin, bare, a) = pushed();
    let b = bare.to_str().unwrap();
    let blob = a.git(&["rev-parse", "HEAD:specs/01-domain/entities/Pedido.md"]);
    let blob = blob.trim();
    let inner = literal_tree(&a, &[("100644".into(), "b.md".into(), blob.to_string())]);
    let at = |p: &str| {
        a.git(&["rev-parse", &format!("HEAD:{p}")])
            .trim()
            .to_string()
    };
    let e = retree(
        &a,
        &at("specs/01-domain/entities"),
        "Pedido.md",
        blob,
        Some(("40000", &inner)),
    );
    let d = retree(&a, &at("specs/01-domain"), "entities", &e, None);
    let s = retree(&a, &at("specs"), "01-domain", &d, None);
    let root = retree(&a, &at(""), "specs", &s, None);
    let c = a.git(&["commit-tree", &root, "-p", "HEAD", "-m", "hand-made tree"]);
    a.git(&[
        "push",
        "-q",
        "origin",
        &format!("{}:refs/heads/main", c.trim()),
    ]);
    let o = origin.kdd(&["-C", b, "--json", "query", "lineas de compra del cliente"]);
    assert_eq!(ids(&o), vec!["Entity:Pedido"]);
    let o = origin.kdd(&["-C", b, "status"]);
    assert!(o.status.success(), "{:?}", text(&o));
}
