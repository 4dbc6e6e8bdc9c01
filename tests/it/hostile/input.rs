//! Hostile cases: input (see the module doc in `mod.rs`). Each attack is committed through real
//! git (the real pre-commit hook, a fresh clone, a bare repository with the real post-receive
//! shim) and every reader is asserted: `kdd index`, the hook, `verify`, `status`,
//! `search --lexical`, `query`, MCP `kdd_read`. The foreign file holds a unique marker that must
//! never appear in any output. Memory is bounded by running the binary under `ulimit -d` (heap
//! only: LMDB's 8 GB map is file-backed and does not count) and measured with `/usr/bin/time`.

mod support;

use crate::repo::{bin_dir, command, text, Mcp, Repo};
use std::path::Path;
use support::{bounded, bounded_env, kdd_bin, Bounded};

/// Unique text of the foreign file (outside the repository).
const MARKER: &str = "zqxforeignmarker";

fn spec(id: &str, kind: &str, body: &str) -> String {
    format!(
        "---\nid: {id}\nkind: {kind}\nstatus: draft\n---\n\n# {id}\n\n## Descripción\n\n{body}\n"
    )
}

/// A repository with `kdd install` (hooks, merge driver) and two specs committed by the hook.
fn installed() -> Repo {
    let r = Repo::new();
    let o = r.kdd(&["install"]);
    assert!(o.status.success(), "{:?}", text(&o));
    r.write(
        "specs/01-domain/entities/Pedido.md",
        &spec("Pedido", "entity", "Un pedido de compra con [[Usuario]]."),
    );
    r.write(
        "specs/01-domain/entities/Usuario.md",
        &spec("Usuario", "entity", "Una persona que compra."),
    );
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "init"]);
    r
}

/// Stage everything and commit it past the hook (`KDD_HOOK=0`), as a teammate without kdd would.
fn commit_past_the_hook(r: &Repo, msg: &str) {
    r.git(&["add", "-A"]);
    let o = command("git", &r.dir)
        .args(["commit", "-qm", msg])
        .env("KDD_HOOK", "0")
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
}

/// Write the foreign file next to (outside) the repository; returns its absolute path.
fn foreign(r: &Repo) -> std::path::PathBuf {
    let p = r.tmp.path().join("foreign.md");
    std::fs::write(
        &p,
        format!("# Foreign\n\nroot daemon nologin {MARKER} secret\n"),
    )
    .unwrap();
    p
}

/// Assert the run exited by itself (no signal) and shows no foreign byte.
fn clean(what: &str, b: &Bounded) {
    let all = b.all();
    assert!(
        b.out.status.code().is_some(),
        "{what}: killed by a signal\n{all}"
    );
    assert!(!all.contains(MARKER), "{what}: foreign bytes leaked\n{all}");
    assert!(
        !all.contains("nologin"),
        "{what}: foreign bytes leaked\n{all}"
    );
}

/// Every reader of a work tree: none may show the marker.
fn readers_stay_clean(dir: &Path) {
    for args in [
        vec![
            "search",
            "--lexical",
            "root daemon nologin zqxforeignmarker",
        ],
        vec!["query", "root daemon nologin zqxforeignmarker"],
        vec!["status"],
        vec!["verify"],
    ] {
        let b = bounded(dir, &kdd_bin(), &args);
        clean(&args.join(" "), &b);
    }
}

#[test]
fn committed_symlinks_are_never_followed() {
    let r = installed();
    let f = foreign(&r);
    std::os::unix::fs::symlink(&f, r.dir.join("specs/01-domain/entities/Notes.md")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", r.dir.join("specs/01-domain/entities/Pw.md"))
        .unwrap();
    std::os::unix::fs::symlink("/dev/zero", r.dir.join("specs/01-domain/entities/Zero.md"))
        .unwrap();
    std::os::unix::fs::symlink(r.tmp.path(), r.dir.join("specs/outside")).unwrap();
    r.git(&["add", "-A"]);
    // The hook: one per-file error per linked spec, named once (the post-commit that follows
    // the pre-commit says nothing more), and the commit goes ahead.
    let c = bounded(&r.dir, "git", &["commit", "-qm", "links"]);
    clean("pre-commit", &c);
    assert!(c.out.status.success(), "{}", c.all());
    for name in ["Notes.md", "Pw.md", "Zero.md"] {
        let line = format!("entities/{name}: is a symbolic link");
        assert_eq!(
            c.all().matches(&line).count(),
            1,
            "hook: {line}\n{}",
            c.all()
        );
    }
    let committed = r.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index"]);
    assert!(
        !committed.contains("Notes") && !committed.contains("Zero"),
        "{committed}"
    );
    // `kdd index` gives the same diagnostics (no flip-flop) and writes nothing new.
    let i = bounded(&r.dir, &kdd_bin(), &["index"]);
    clean("index", &i);
    for name in ["Notes.md", "Pw.md", "Zero.md"] {
        let line = format!("entities/{name}: is a symbolic link");
        assert!(i.all().contains(&line), "index: {line}\n{}", i.all());
    }
    assert!(
        r.git(&["status", "--porcelain", ".kdd-index"]).is_empty(),
        "kdd index and the hook disagree"
    );
    // `kdd verify` agrees, and names each problem once with its own severity.
    let v = bounded(&r.dir, &kdd_bin(), &["verify"]);
    assert!(v.out.status.success(), "{}", v.all());
    let line = "kdd: error: specs/01-domain/entities/Pw.md: is a symbolic link";
    assert!(v.all().contains(line), "verify: {line}\n{}", v.all());
    assert!(!v.all().contains("warning: error"), "{}", v.all());
    readers_stay_clean(&r.dir);
    // A fresh clone checks the links out again: still never read.
    let clone = r.clone_to("clone");
    readers_stay_clean(&clone);
    // MCP kdd_read of the linked path is refused, never read.
    let mut m = Mcp::start(&r.dir);
    m.initialize();
    let read =
        m.call_raw(r#"{"name":"kdd_read","arguments":{"path":"01-domain/entities/Notes.md"}}"#);
    assert!(!read.contains(MARKER), "{read}");
    let read = m.call_raw(r#"{"name":"kdd_read","arguments":{"node":"Notes"}}"#);
    assert!(!read.contains(MARKER), "{read}");
}

/// A node artifact naming `source_file` (written by hand, committed without the hook).
fn plant_node(r: &Repo, id: &str, source_file: &str) {
    let node = serde_json::json!({
        "id": id, "kind": "entity", "source_file": source_file,
        "source_hash": "0".repeat(64), "title": id, "status": "draft",
        "aliases": [], "domain": null, "layer": "01-domain"
    });
    r.write(
        &format!(".kdd-index/nodes/entity/{id}.json"),
        &serde_json::to_string_pretty(&node).unwrap(),
    );
}

#[test]
fn crafted_artifact_paths_are_never_read() {
    let r = installed();
    let f = foreign(&r);
    plant_node(&r, "Abs", f.to_str().unwrap());
    plant_node(&r, "Up", "../foreign.md");
    plant_node(&r, "Pw", "/etc/passwd");
    plant_node(&r, "Dots", "specs/../../foreign.md");
    commit_past_the_hook(&r, "crafted");
    readers_stay_clean(&r.dir);
    let s = bounded(&r.dir, &kdd_bin(), &["status"]);
    assert!(s.all().contains("invalid source_file"), "{}", s.all());
    let clone = r.clone_to("clone");
    readers_stay_clean(&clone);
    // A bare server repository after post-receive (the mirror is built from the tree).
    let bare = r.tmp.path().join("server.git");
    let (b, log) = push_to_bare(&r, &bare);
    clean("post-receive", &b);
    assert!(log.contains("kdd: refs/heads/main"), "{log}");
    // The bare repository is queried through the server engine (MCP here).
    let mut m = Mcp::start(&bare);
    m.initialize();
    let q = m.call_raw(
        r#"{"name":"kdd_query","arguments":{"query":"root daemon nologin zqxforeignmarker"}}"#,
    );
    assert!(q.contains("\"result\""), "{q}");
    assert!(!q.contains(MARKER) && !q.contains("nologin:"), "{q}");
    for id in ["Abs", "Up", "Pw", "Dots", "Pedido"] {
        let call = format!(r#"{{"name":"kdd_read","arguments":{{"node":"{id}"}}}}"#);
        let read = m.call_raw(&call);
        assert!(
            !read.contains(MARKER) && !read.contains("nologin"),
            "{read}"
        );
        if id == "Pedido" {
            assert!(read.contains("Un pedido de compra"), "{read}");
        }
    }
}

#[test]
fn committed_artifact_symlinks_are_never_followed() {
    let r = installed();
    let f = foreign(&r);
    let idx = r.dir.join(".kdd-index");
    let link = |target: &Path, rel: &str| {
        let p = idx.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&p);
        std::os::unix::fs::symlink(target, &p).unwrap();
    };
    link(Path::new("/dev/zero"), "embeddings/entity/Pedido.bin");
    link(Path::new("/dev/zero"), "edges/entity/Pedido.jsonl");
    link(&f, "nodes/entity/Usuario.json");
    link(&f, "nodes/entity/Foreign.json");
    commit_past_the_hook(&r, "artifact links");
    readers_stay_clean(&r.dir);
    let clone = r.clone_to("clone");
    readers_stay_clean(&clone);
    // The next commit through the hook replaces the links with real artifacts.
    r.write(
        "specs/01-domain/entities/Otro.md",
        &spec("Otro", "entity", "Otro más."),
    );
    r.git(&["add", "-A"]);
    let c = bounded(&r.dir, "git", &["commit", "-qm", "heal"]);
    clean("pre-commit", &c);
    assert!(c.out.status.success(), "{}", c.all());
    let i = bounded(&r.dir, &kdd_bin(), &["index"]);
    clean("index", &i);
    let md = std::fs::symlink_metadata(idx.join("nodes/entity/Usuario.json")).unwrap();
    assert!(md.file_type().is_file(), "the link was not replaced");
    let v = r.kdd(&["verify"]);
    let log = std::fs::read_to_string(&f).unwrap();
    assert!(log.contains(MARKER), "the foreign file was overwritten");
    assert!(v.status.success(), "{:?}", text(&v));
}

#[test]
fn kddignore_excludes_the_same_specs_in_index_hook_and_verify() {
    let r = installed();
    r.write("specs/.kddignore", "# work in progress\ndrafts/\n");
    r.write(
        "specs/drafts/Draft.md",
        &spec("Draft", "entity", "Borrador zqxignoredmark."),
    );
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "ignored draft"]);
    // MCP kdd_read does not read it either.
    let mut m = Mcp::start(&r.dir);
    m.initialize();
    let read = m.call_raw(r#"{"name":"kdd_read","arguments":{"path":"drafts/Draft.md"}}"#);
    assert!(!read.contains("zqxignoredmark"), "{read}");
    assert!(read.contains(".kddignore"), "{read}");
    let committed = r.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index"]);
    assert!(!committed.contains("Draft"), "{committed}");
    let i = r.kdd(&["index"]);
    assert!(i.status.success(), "{:?}", text(&i));
    assert!(
        r.git(&["status", "--porcelain", ".kdd-index"]).is_empty(),
        "kdd index and the hook disagree on .kddignore"
    );
    let v = r.kdd(&["verify"]);
    assert!(v.status.success(), "{:?}", text(&v));
    // Un-ignoring indexes it at the next commit.
    r.git(&["rm", "-q", "specs/.kddignore"]);
    r.git(&["commit", "-qm", "no ignore"]);
    let committed = r.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index"]);
    assert!(committed.contains("nodes/entity/Draft.json"), "{committed}");
    let v = r.kdd(&["verify"]);
    assert!(v.status.success(), "{:?}", text(&v));
}

#[test]
fn committed_index_folder_links_never_redirect_writes() {
    for (link, rel) in [
        ("nodes/entity", ".kdd-index/nodes/entity"),
        ("", ".kdd-index"),
    ] {
        let r = installed();
        let outside = r.tmp.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let p = r.dir.join(rel);
        std::fs::remove_dir_all(&p).unwrap();
        std::os::unix::fs::symlink(&outside, &p).unwrap();
        commit_past_the_hook(&r, "folder link");
        r.write(
            "specs/01-domain/entities/Otro.md",
            &spec("Otro", "entity", "Otro más."),
        );
        r.git(&["add", "-A"]);
        let c = bounded(&r.dir, "git", &["commit", "-qm", "next"]);
        assert!(c.out.status.success(), "{link}: {}", c.all());
        let i = bounded(&r.dir, &kdd_bin(), &["index"]);
        assert!(i.out.status.success(), "{link}: {}", i.all());
        let written: Vec<_> = std::fs::read_dir(&outside).unwrap().flatten().collect();
        assert!(written.is_empty(), "{link}: wrote outside: {written:?}");
        assert!(std::fs::symlink_metadata(&p).unwrap().is_dir(), "{link}");
        let v = r.kdd(&["verify"]);
        assert!(v.status.success(), "{link}: {:?}", text(&v));
    }
}

#[test]
fn committed_folders_at_artifact_paths_are_replaced() {
    // A teammate commits folders where kdd's files belong (bypassing the hook): every writer
    // replaces them with the artifact, and the clone heals with the advice kdd gives.
    let r = installed();
    let idx = r.dir.join(".kdd-index");
    for rel in ["manifest.json", "nodes/entity/Pedido.json"] {
        std::fs::remove_file(idx.join(rel)).unwrap();
        r.write(&format!(".kdd-index/{rel}/x.json"), "{}\n");
    }
    commit_past_the_hook(&r, "folders at artifact paths");
    // A fresh clone: `kdd index` rewrites them.
    let a = r.clone_to("a");
    let i = bounded(&a, &kdd_bin(), &["index"]);
    clean("index", &i);
    assert!(i.out.status.success(), "{}", i.all());
    assert!(a.join(".kdd-index/manifest.json").is_file());
    let q = bounded(&a, &kdd_bin(), &["search", "--lexical", "pedido"]);
    assert!(q.all().contains("Entity:Pedido"), "{}", q.all());
    // Another clone: `kdd resolve` then a commit, as `kdd verify` advises.
    let b = r.clone_to("b");
    let v = bounded(&b, &kdd_bin(), &["verify"]);
    assert!(!v.out.status.success(), "{}", v.all());
    let s = bounded(&b, &kdd_bin(), &["resolve"]);
    assert!(s.out.status.success(), "{}", s.all());
    let c = bounded(&b, "git", &["commit", "-qm", "resolved"]);
    assert!(c.out.status.success(), "{}", c.all());
    let v = bounded(&b, &kdd_bin(), &["verify"]);
    assert!(v.out.status.success(), "{}", v.all());
    // The repository itself: the next commit through the hook heals it.
    r.write(
        "specs/01-domain/entities/Otro.md",
        &spec("Otro", "entity", "Otro más."),
    );
    r.git(&["add", "-A"]);
    let c = bounded(&r.dir, "git", &["commit", "-qm", "next"]);
    assert!(c.out.status.success(), "{}", c.all());
    let v = r.kdd(&["verify"]);
    assert!(v.status.success(), "{:?}", text(&v));
    assert!(idx.join("nodes/entity/Pedido.json").is_file());
}

#[test]
fn a_fifo_or_oversized_artifact_gets_the_artifact_remedy_and_it_works() {
    // Things kdd never writes at an artifact path of the work tree: the warning names the file
    // once and gives the artifact's remedy (not a spec's), and that remedy heals it.
    let r = installed();
    let node = r.dir.join(".kdd-index/nodes/entity/Pedido.json");
    std::fs::remove_file(&node).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&node)
        .status()
        .unwrap();
    assert!(made.success());
    let q = bounded(&r.dir, &kdd_bin(), &["search", "--lexical", "pedido"]);
    let shown = node.display().to_string();
    assert_eq!(q.all().matches(&shown).count(), 1, "{}", q.all());
    assert!(q.all().contains("a device, FIFO or socket"), "{}", q.all());
    assert!(q.all().contains("`kdd index`"), "{}", q.all());
    assert!(!q.all().contains("specs root"), "{}", q.all());
    let i = bounded(&r.dir, &kdd_bin(), &["index"]);
    assert!(i.out.status.success(), "{}", i.all());
    assert!(node.is_file());
    // A sparse 3 GB vector file: refused unread, then rewritten.
    let vectors = r.dir.join(".kdd-index/embeddings/entity/Pedido.bin");
    if vectors.is_file() {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&vectors)
            .unwrap();
        f.set_len(3 << 30).unwrap();
        let q = bounded(&r.dir, &kdd_bin(), &["search", "--lexical", "pedido"]);
        assert!(
            q.all().contains("over the 64 MB limit for an artifact"),
            "{}",
            q.all()
        );
        let i = bounded(&r.dir, &kdd_bin(), &["index"]);
        assert!(i.out.status.success(), "{}", i.all());
        assert!(std::fs::metadata(&vectors).unwrap().len() < 1 << 20);
    }
    assert!(r.git(&["status", "--porcelain", ".kdd-index"]).is_empty());
}

#[test]
fn a_linked_specs_root_is_refused_by_index_and_hook_alike() {
    let r = installed();
    let outside = r.tmp.path().join("elsewhere");
    std::fs::create_dir_all(outside.join("01-domain")).unwrap();
    std::fs::rename(r.dir.join("specs"), outside.join("real")).unwrap();
    std::fs::write(
        outside.join("01-domain/Leak.md"),
        format!("# Leak\n\n{MARKER}\n"),
    )
    .unwrap();
    std::os::unix::fs::symlink(&outside, r.dir.join("specs")).unwrap();
    r.git(&["add", "-A"]);
    let c = bounded(&r.dir, "git", &["commit", "-qm", "linked root"]);
    clean("pre-commit", &c);
    assert!(c.out.status.success(), "{}", c.all());
    assert!(c.all().contains("specs: is a symbolic link"), "{}", c.all());
    let committed = r.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index"]);
    assert!(
        committed.contains("nodes/entity/Pedido.json"),
        "{committed}"
    );
    assert!(!committed.contains("Leak"), "{committed}");
    let i = bounded(&r.dir, &kdd_bin(), &["index"]);
    clean("index", &i);
    assert!(!i.out.status.success());
    assert!(i.all().contains("specs: is a symbolic link"), "{}", i.all());
    readers_stay_clean(&r.dir);
}

/// Create `bare`, install the post-receive shim, push `r`'s main to it (bounded).
fn push_to_bare(r: &Repo, bare: &Path) -> (Bounded, String) {
    r.git(&["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()]);
    let hook = bare.join("hooks/post-receive");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("hooks/post-receive"),
        &hook,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    push_bounded(r, bare)
}

/// Push `r`'s main to `bare` (bounded), with the post-receive hook's report.
fn push_bounded(r: &Repo, bare: &Path) -> (Bounded, String) {
    let hook_bin = bin_dir().join("kdd-hook");
    let b = bounded_env(
        &r.dir,
        "git",
        &["push", "-q", bare.to_str().unwrap(), "HEAD:main"],
        &[("KDD_HOOK_BIN", hook_bin.to_str().unwrap())],
    );
    assert!(b.out.status.success(), "push: {}", b.all());
    let log = text(&b.out).1;
    (b, log)
}

/// The "billion laughs" front-matter: 9 levels of 9 aliases (9^9 nodes when expanded).
fn bomb() -> String {
    let mut s = String::from(
        "---\nid: Bomb\nkind: entity\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for i in 1..9 {
        let refs = vec![format!("*a{}", i - 1); 9].join(", ");
        s.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    s.push_str("---\n\n# Bomb\n");
    s
}

#[test]
fn yaml_bomb_is_a_bounded_per_file_error_everywhere() {
    let r = installed();
    let text_of_bomb = bomb();
    assert!(text_of_bomb.len() < 700, "{}", text_of_bomb.len());
    r.write("specs/01-domain/entities/Bomb.md", &text_of_bomb);
    r.git(&["add", "-A"]);
    let mut figures = Vec::new();
    let mut check = |what: &str, b: &Bounded| {
        clean(what, b);
        assert!(
            b.all().contains("entities/Bomb.md"),
            "{what}: no per-file error\n{}",
            b.all()
        );
        assert!(b.rss_kib < 200 * 1024, "{what}: {} KiB RSS", b.rss_kib);
        assert!(b.secs < 10.0, "{what}: {:.2}s", b.secs);
        figures.push(format!("{what}: {:.2}s {} KiB", b.secs, b.rss_kib));
    };
    let c = bounded(&r.dir, "git", &["commit", "-qm", "bomb"]);
    assert!(c.out.status.success(), "{}", c.all());
    check("pre-commit", &c);
    check("index", &bounded(&r.dir, &kdd_bin(), &["index"]));
    check("verify", &bounded(&r.dir, &kdd_bin(), &["verify"]));
    check("status", &bounded(&r.dir, &kdd_bin(), &["status"]));
    let bare = r.tmp.path().join("server.git");
    let (b, log) = push_to_bare(&r, &bare);
    assert!(log.contains("kdd: refs/heads/main"), "{log}");
    clean("post-receive", &b);
    assert!(
        b.rss_kib < 200 * 1024,
        "post-receive: {} KiB RSS",
        b.rss_kib
    );
    figures.push(format!("post-receive: {:.2}s {} KiB", b.secs, b.rss_kib));
    println!(
        "yaml bomb ({} bytes): {}",
        text_of_bomb.len(),
        figures.join("; ")
    );
}

#[test]
fn oversized_structures_are_bounded_per_file_errors() {
    let r = installed();
    let dir = "specs/01-domain/entities";
    let files = [
        (
            "Links.md",
            format!("# Links\n\n{}\n", "[[Pedido]] ".repeat(10_001)),
        ),
        ("Heads.md", format!("# H\n\n{}", "## h\n".repeat(5_001))),
        ("Quote.md", format!("# Q\n\n{} deep\n", ">".repeat(100_000))),
        ("Nest.md", format!("# N\n\n{}- x\n", " ".repeat(10_000))),
        ("Lists.md", format!("# L\n\n{}x\n", "- ".repeat(1_000_000))),
        ("Cells.md", format!("# C\n\n{}\n", "|x".repeat(200_001))),
        (
            "Long.feature",
            format!("Feature: F\n{}", "  Given x\n".repeat(50_001)),
        ),
    ];
    for (name, body) in &files {
        r.write(&format!("{dir}/{name}"), body);
    }
    r.git(&["add", "-A"]);
    let c = bounded(&r.dir, "git", &["commit", "-qm", "big"]);
    let i = bounded(&r.dir, &kdd_bin(), &["index"]);
    for (what, b) in [("pre-commit", &c), ("index", &i)] {
        clean(what, b);
        assert!(b.rss_kib < 200 * 1024, "{what}: {} KiB", b.rss_kib);
        for (name, _) in &files {
            let line = format!("{dir}/{name}:");
            assert!(
                b.all().contains(&line),
                "{what}: no error for {name}\n{}",
                b.all()
            );
        }
        println!(
            "oversized structures, {what}: {:.2}s {} KiB",
            b.secs, b.rss_kib
        );
    }
    assert!(r.git(&["status", "--porcelain", ".kdd-index"]).is_empty());
}

#[test]
fn verify_reports_extra_and_stale_artifacts_whatever_the_diagnostics() {
    let r = installed();
    // A spec with a warning (malformed YAML) and one that cannot be indexed at all.
    r.write(
        "specs/01-domain/entities/Warn.md",
        "---\nid: Warn\nkind: [entity\n---\n# Warn\n",
    );
    r.write("specs/01-domain/entities/Bomb.md", &bomb());
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "diagnostics"]);
    let v = r.kdd(&["verify"]);
    assert!(v.status.success(), "{:?}", text(&v));
    assert!(text(&v).1.contains("Bomb.md"), "{:?}", text(&v));
    assert!(text(&v).1.contains("--strict"), "{:?}", text(&v));
    // CI that wants every spec indexed asks for it.
    let v = r.kdd(&["verify", "--strict"]);
    assert_eq!(v.status.code(), Some(1), "{:?}", text(&v));
    assert!(
        text(&v).1.contains("are in no index; fix them"),
        "{:?}",
        text(&v)
    );
    // Now an extra artifact and a stale one, committed without the hook.
    plant_node(&r, "Ghost", "specs/01-domain/entities/Ghost.md");
    let node = ".kdd-index/nodes/entity/Pedido.json";
    let stale = r.read(node).replace("\"Pedido\"", "\"Pedido2\"");
    r.write(node, &stale);
    commit_past_the_hook(&r, "tamper");
    let v = r.kdd(&["verify", "--json"]);
    assert_eq!(v.status.code(), Some(1), "{:?}", text(&v));
    let m: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(
        m["extra"],
        serde_json::json!(["nodes/entity/Ghost.json"]),
        "{m}"
    );
    assert_eq!(m["different"], serde_json::json!([node[11..]]), "{m}");
    assert!(m["unreadable_specs"].to_string().contains("Bomb.md"), "{m}");
}

/// A spec nobody can index (a YAML bomb), committed through the hook and pushed with a later
/// commit: the server finds no artifact for it, as in the pusher's index, and names it as a
/// problem in the pushed specs, not as an index that disagrees with them.
#[test]
fn an_unindexable_spec_pushed_is_a_spec_problem_not_an_index_mismatch() {
    let r = installed();
    let bare = r.tmp.path().join("server.git");
    let (_, first) = push_to_bare(&r, &bare);
    assert!(!first.contains("did not match"), "{first}");
    r.write("specs/01-domain/entities/Bomb.md", &bomb());
    r.git(&["add", "-A"]);
    let c = bounded(&r.dir, "git", &["commit", "-qm", "bomb"]);
    assert!(c.out.status.success(), "{}", c.all());
    let (_, log) = push_bounded(&r, &bare);
    assert!(!log.contains("did not match"), "{log}");
    assert!(
        log.contains("1 problem(s) in the pushed specs, first: specs/01-domain/entities/Bomb.md"),
        "{log}"
    );
}

#[test]
fn without_an_absolute_home_nothing_is_loaded_from_the_repository() {
    let r = installed();
    // What a relative data directory (`.local/share/kdd` under the repository a hook runs in)
    // would hold, committed by a teammate: a "runtime library" and a model directory.
    r.write(
        ".local/share/kdd/lib/libonnxruntime.so.1.31.1",
        "not a library\n",
    );
    for f in [
        "model.onnx",
        "tokenizer.json",
        "config.json",
        "special_tokens_map.json",
        "tokenizer_config.json",
    ] {
        r.write(
            &format!(".local/share/kdd/models/multilingual-e5-small-int8/{f}"),
            "{}\n",
        );
    }
    r.git(&["add", "-A"]);
    let unset = [
        "-u",
        "HOME",
        "-u",
        "XDG_DATA_HOME",
        "-u",
        "KDD_DATA_DIR",
        "-u",
        "ORT_DYLIB_PATH",
        "-u",
        "KDD_MODEL_DIR",
        "-u",
        "KDD_NO_EMBED",
        "-u",
        "KDD_TEST_EMBEDDER",
    ];
    let kdd = kdd_bin();
    for home in [
        None,
        Some("HOME="),
        Some("HOME=."),
        Some("XDG_DATA_HOME=.local/share"),
    ] {
        for cmd in [&["doctor"][..], &["index"][..]] {
            let mut args: Vec<&str> = unset.to_vec();
            args.extend(home);
            args.push(&kdd);
            args.extend(cmd);
            let o = bounded(&r.dir, "env", &args);
            clean("no data dir", &o);
            let all = o.all();
            assert!(
                !all.contains(".local/share/kdd") && !all.contains("OrtGetApiBase"),
                "{home:?} {cmd:?}: the repository's files were looked at\n{all}"
            );
        }
    }
    let o = bounded(
        &r.dir,
        "env",
        &[&unset[..], &[kdd.as_str(), "doctor"]].concat(),
    );
    assert!(o.all().contains("data-dir"), "{}", o.all());
    assert!(
        o.all().contains("set KDD_DATA_DIR to an absolute path"),
        "{}",
        o.all()
    );
}

#[test]
fn verify_never_inflates_a_committed_artifact_over_the_read_cap() {
    let r = installed();
    // 100 MB in a node file, committed past the hooks: never read whole (it read as 220 MB).
    let big = format!("{{\"id\":\"{}\"}}", "x".repeat(100 << 20));
    std::fs::write(r.dir.join(".kdd-index/nodes/entity/Pedido.json"), big).unwrap();
    r.git(&["add", "-A"]);
    r.git(&[
        "-c",
        "core.hooksPath=/dev/null",
        "commit",
        "-qm",
        "big",
        "--no-verify",
    ]);
    for args in [&["verify"][..], &["verify", "--staged"][..]] {
        let v = bounded(&r.dir, &kdd_bin(), args);
        clean("verify", &v);
        assert!(!v.out.status.success(), "{args:?}: {}", v.all());
        assert!(v.all().contains("nodes/entity/Pedido.json"), "{}", v.all());
        assert!(v.rss_kib < 64 * 1024, "{args:?}: {} KiB", v.rss_kib);
    }
}

#[test]
fn the_hook_and_kdd_index_refuse_the_same_file_names() {
    let r = installed();
    // A control character in a spec's name: `kdd index` never reads it; the hook wrote
    // artifacts for it, which `kdd index` removed and the next commit wrote again.
    for name in ["New\nLine", "Tab\tName"] {
        r.write(
            &format!("specs/01-domain/entities/{name}.md"),
            &spec("Raro", "entity", "Un nombre raro."),
        );
    }
    r.git(&["add", "-A"]);
    let c = bounded(&r.dir, "git", &["commit", "-qm", "names"]);
    clean("pre-commit", &c);
    assert!(c.out.status.success(), "{}", c.all());
    assert_eq!(
        c.all().matches("backslash or control character").count(),
        2,
        "{}",
        c.all()
    );
    let committed = r.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index"]);
    assert!(
        !committed.contains("New") && !committed.contains("Tab"),
        "{committed}"
    );
    let i = bounded(&r.dir, &kdd_bin(), &["index"]);
    clean("index", &i);
    assert!(
        r.git(&["status", "--porcelain", ".kdd-index"]).is_empty(),
        "kdd index and the hook disagree:\n{}",
        i.all()
    );
}

#[test]
fn a_spec_name_that_is_not_utf8_is_refused_alike_by_every_reader() {
    use std::os::unix::ffi::OsStrExt;
    let r = installed();
    let name = std::ffi::OsStr::from_bytes(b"lat\xe9n.md");
    let p = r.dir.join("specs/01-domain/entities").join(name);
    std::fs::write(&p, spec("Latin", "entity", "Latinmarca única.")).unwrap();
    let i = bounded(&r.dir, &kdd_bin(), &["index"]);
    assert!(i.all().contains("not valid UTF-8"), "{}", i.all());
    assert!(
        r.git(&["status", "--porcelain", ".kdd-index"]).is_empty(),
        "kdd index wrote artifacts for it"
    );
    r.git(&["add", "-A"]);
    let c = bounded(&r.dir, "git", &["commit", "-qm", "latin"]);
    assert!(c.out.status.success(), "{}", c.all());
    assert!(c.all().contains("not valid UTF-8"), "{}", c.all());
    let committed = r.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index"]);
    assert!(
        !committed.contains("Latin") && !committed.contains("lat"),
        "{committed}"
    );
    // Every reader agrees: nothing to rewrite, nothing to verify, the file named in status.
    let i = bounded(&r.dir, &kdd_bin(), &["index"]);
    assert!(
        i.all().contains("0 artifact files written, 0 removed"),
        "{}",
        i.all()
    );
    let v = r.kdd(&["verify"]);
    assert!(v.status.success(), "{:?}", text(&v));
    let s = bounded(&r.dir, &kdd_bin(), &["status"]);
    assert!(s.all().contains("files with errors: 1"), "{}", s.all());
}

#[test]
fn a_committed_link_at_an_index_folder_is_never_swept() {
    // `kdd merge-index` (and `kdd sync pull`) remove what the merged index does not name: a
    // committed `.kdd-index/embeddings -> outside` is removed, never walked.
    let r = installed();
    let outside = r.tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("precious.txt"), "precious\n").unwrap();
    let emb = r.dir.join(".kdd-index/embeddings");
    let _ = std::fs::remove_dir_all(&emb);
    std::os::unix::fs::symlink(&outside, &emb).unwrap();
    commit_past_the_hook(&r, "embeddings link");
    r.git(&["branch", "other"]);
    let m = bounded(&r.dir, &kdd_bin(), &["merge-index", "main", "other"]);
    assert!(m.out.status.success(), "{}", m.all());
    assert!(
        outside.join("precious.txt").is_file(),
        "a file outside was removed"
    );
    assert!(
        !std::fs::symlink_metadata(&emb).is_ok_and(|m| m.file_type().is_symlink()),
        "the link is still there"
    );
}

#[test]
fn a_title_or_alias_over_the_store_key_size_keeps_every_reader_working() {
    // Red team, twenty-first round: one spec with a 600-byte alias or a 700-byte heading made
    // every read command fail with `MDB_BAD_VALSIZE` ("is its file system full?"): the `names`
    // table stored such a name as a key, over LMDB's 511 bytes. Now it is stored as its hash,
    // and the long name still resolves.
    let r = installed();
    let alias = format!("alias {}", "muy largo ".repeat(60));
    r.write(
        "specs/01-domain/entities/Largo.md",
        &format!(
            "---\nid: Largo\nkind: entity\naliases: [\"{alias}\"]\n---\n\n# {}\n\n## Descripción\n\nUna entidad con nombres larguísimos.\n",
            "Título larguísimo ".repeat(40)
        ),
    );
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "long names"]);
    for args in [
        vec!["query", "entidad con nombres larguísimos"],
        vec!["graph", "Pedido"],
        vec!["impact", "Usuario"],
        vec!["coverage", "Pedido"],
        vec!["orphans"],
        vec!["violations"],
        vec!["context", "Pedido"],
    ] {
        // Exit 1 is an answer (coverage incomplete); 2 is the failure.
        let o = r.kdd(&args);
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{args:?}: {:?}",
            text(&o)
        );
        assert!(!text(&o).1.contains("MDB_"), "{args:?}: {:?}", text(&o));
    }
    let o = r.kdd(&["--json", "graph", alias.trim()]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(text(&o).0.contains("Entity:Largo"), "{:?}", text(&o));
}
