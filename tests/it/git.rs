//! Git integration in real temporary repositories: the pre-commit hook from the staged tree,
//! the merge driver, healing hooks, `kdd resolve`, `kdd verify`, `kdd merge-index`.

use crate::repo::{text, Repo};

fn spec(id: &str, kind: &str, a: &str, b: &str, links: &[&str]) -> String {
    let mut s = format!(
        "---\nid: {id}\nkind: {kind}\ntitle: {id} title\nstatus: draft\n---\n\n# {id}\n\n## Descripción\n\n{a}\n\n\
         line 1\nline 2\nline 3\nline 4\nline 5\n\n## Atributos\n\n{b}\n\n## Relaciones\n\n"
    );
    for l in links {
        s.push_str(&format!("- [[{l}]]\n"));
    }
    s
}

fn entity(id: &str, a: &str) -> String {
    spec(id, "entity", a, "b0", &[])
}

/// A repo with kdd installed (driver, attributes, hooks) and an initial commit.
fn installed() -> Repo {
    let r = Repo::new();
    let o = r.kdd(&["install"]);
    assert!(o.status.success(), "{:?}", text(&o));
    r.write("README.md", "demo\n");
    r.write(
        "specs/01-domain/entities/Pedido.md",
        &spec("Pedido", "entity", "a0", "b0", &["Usuario"]),
    );
    r.write(
        "specs/01-domain/entities/Usuario.md",
        &entity("Usuario", "a0"),
    );
    r.git(&["add", "."]);
    r.git(&["commit", "-q", "-m", "init"]);
    r
}

fn verify(r: &Repo, rev: &str) {
    let o = r.kdd(&["verify", "--ref", rev]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "verify {rev} failed:\n{out}\n{err}");
    let clean = r
        .git(&["status", "--porcelain", "--untracked-files=no"])
        .is_empty();
    if rev == "HEAD" && clean {
        fresh_index_equal(r, rev);
    }
}

fn changed_in(r: &Repo, rev: &str) -> Vec<String> {
    let out = r.git(&["show", "--name-only", "--format=", rev]);
    out.lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}

fn node_hash(r: &Repo, rev: &str, rel: &str) -> String {
    let s = r.git(&["show", &format!("{rev}:.kdd-index/{rel}")]);
    let v: serde_json::Value = serde_json::from_str(&s).unwrap();
    v["source_hash"].as_str().unwrap().to_string()
}

fn blake(r: &Repo, rev_path: &str) -> String {
    let o = r.git_out(&["show", rev_path]);
    kdd::spec::content_hash(&o.stdout)
}

#[test]
fn gitattributes_example_matches_command() {
    let r = Repo::new();
    let o = r.kdd(&["gitattributes"]);
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/.gitattributes.example"
    ))
    .unwrap();
    assert_eq!(text(&o).0, example);
}

#[test]
fn install_is_idempotent_and_chains_existing_hook() {
    let r = Repo::new();
    let hooks = r.dir.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::write(
        hooks.join("pre-commit"),
        "#!/bin/sh\necho ran > \"$(git rev-parse --show-toplevel)/.prev-ran\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        hooks.join("pre-commit"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    assert!(r.kdd(&["install"]).status.success());
    assert!(r.kdd(&["install"]).status.success());
    let attrs = r.read(".gitattributes");
    assert_eq!(attrs.matches(".kdd-index/** merge=kdd").count(), 1);
    assert_eq!(attrs.matches(".kdd-index/** -text").count(), 1);
    assert!(r
        .git(&["config", "merge.kdd.driver"])
        .contains("%O %A %B %P"));
    assert!(hooks.join("pre-commit.pre-kdd").exists());
    r.write("specs/a.md", &entity("A", "x"));
    r.git(&["add", "."]);
    r.git(&["commit", "-q", "-m", "c"]);
    assert!(r.exists(".prev-ran"), "the previous hook was not chained");
    assert!(changed_in(&r, "HEAD").contains(&".kdd-index/nodes/entity/A.json".to_string()));
}

#[test]
fn scn_incremental_index_001_only_changed_spec_artifacts_in_commit() {
    let r = installed();
    verify(&r, "HEAD");
    assert!(changed_in(&r, "HEAD").contains(&".kdd-index/nodes/entity/Pedido.json".to_string()));
    r.write(
        "specs/01-domain/entities/Pedido.md",
        &spec("Pedido", "entity", "a1", "b0", &["Usuario"]),
    );
    r.git(&["add", "specs"]);
    r.git(&["commit", "-q", "-m", "edit Pedido"]);
    assert_eq!(
        changed_in(&r, "HEAD"),
        vec![
            ".kdd-index/nodes/entity/Pedido.json",
            "specs/01-domain/entities/Pedido.md"
        ]
    );
    verify(&r, "HEAD");
    assert_eq!(r.git(&["status", "--porcelain"]), "");
}

#[test]
fn scn_incremental_index_004_commit_without_specs_touches_nothing() {
    let r = installed();
    r.write("src.txt", "code\n");
    r.git(&["add", "src.txt"]);
    r.git(&["commit", "-q", "-m", "code only"]);
    assert_eq!(changed_in(&r, "HEAD"), vec!["src.txt"]);
}

#[test]
fn scn_incremental_index_003_delete_and_rename() {
    let r = installed();
    r.git(&[
        "mv",
        "specs/01-domain/entities/Usuario.md",
        "specs/01-domain/Usuario.md",
    ]);
    r.git(&["commit", "-q", "-m", "move"]);
    let s = r.git(&["show", "HEAD:.kdd-index/nodes/entity/Usuario.json"]);
    assert!(s.contains("specs/01-domain/Usuario.md"), "{s}");
    verify(&r, "HEAD");
    r.git(&["rm", "-q", "specs/01-domain/Usuario.md"]);
    r.git(&["commit", "-q", "-m", "delete"]);
    let names = changed_in(&r, "HEAD");
    assert!(
        names.contains(&".kdd-index/nodes/entity/Usuario.json".to_string()),
        "{names:?}"
    );
    assert!(!r.exists(".kdd-index/nodes/entity/Usuario.json"));
    verify(&r, "HEAD");
}

#[test]
fn partial_staging_indexes_exactly_the_staged_blob() {
    let r = installed();
    let path = "specs/01-domain/entities/Pedido.md";
    r.write(
        path,
        &spec("Pedido", "entity", "STAGED", "UNSTAGED", &["Usuario"]),
    );
    // Stage only the first hunk, like `git add -p`.
    let diff = r.git(&["diff", "-U0", path]);
    let first_hunk_end = diff[diff.find("@@").unwrap() + 2..]
        .find("\n@@")
        .map(|i| i + diff.find("@@").unwrap() + 3);
    let patch = match first_hunk_end {
        Some(end) => format!("{}\n", &diff[..end - 1]),
        None => diff.clone(),
    };
    let mut c = crate::repo::command("git", &r.dir);
    c.args(["apply", "--cached", "--unidiff-zero", "-"])
        .stdin(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(patch.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    r.git(&["commit", "-q", "-m", "partial"]);
    let committed = r.git(&["show", &format!("HEAD:{path}")]);
    assert!(committed.contains("STAGED") && !committed.contains("UNSTAGED"));
    assert_eq!(
        node_hash(&r, "HEAD", "nodes/entity/Pedido.json"),
        blake(&r, &format!("HEAD:{path}"))
    );
    assert!(r.read(path).contains("UNSTAGED"), "unstaged edit lost");
    // `git add -N` (intent to add) stages no content: nothing is indexed for it yet.
    r.write("specs/01-domain/entities/Later.md", &entity("Later", "x"));
    r.git(&["add", "-N", "specs/01-domain/entities/Later.md"]);
    r.write("notes.txt", "n\n");
    r.git(&["add", "notes.txt"]);
    r.git(&["commit", "-q", "-m", "notes"]);
    assert_eq!(changed_in(&r, "HEAD"), vec!["notes.txt"]);
    r.git(&["reset", "-q", "--", "specs/01-domain/entities/Later.md"]);
    std::fs::remove_file(r.dir.join("specs/01-domain/entities/Later.md")).unwrap();
    assert_eq!(r.git(&["diff", "--name-only"]).trim(), path);
    verify(&r, "HEAD");
}

#[test]
fn commit_all_uses_the_locked_index() {
    let r = installed();
    r.write(
        "specs/01-domain/entities/Usuario.md",
        &entity("Usuario", "changed"),
    );
    r.git(&["commit", "-q", "-a", "-m", "all"]);
    assert!(changed_in(&r, "HEAD").contains(&".kdd-index/nodes/entity/Usuario.json".to_string()));
    verify(&r, "HEAD");
    assert_eq!(r.git(&["status", "--porcelain"]), "");
}

#[test]
fn commit_only_pathspec_keeps_other_staged_changes() {
    let r = installed();
    r.write("other.txt", "staged but not committed\n");
    r.git(&["add", "other.txt"]);
    r.write(
        "specs/01-domain/entities/Usuario.md",
        &entity("Usuario", "only"),
    );
    r.git(&[
        "commit",
        "-q",
        "-m",
        "only",
        "--only",
        "specs/01-domain/entities/Usuario.md",
    ]);
    let names = changed_in(&r, "HEAD");
    assert!(
        names.contains(&".kdd-index/nodes/entity/Usuario.json".to_string()),
        "{names:?}"
    );
    assert!(!names.contains(&"other.txt".to_string()));
    verify(&r, "HEAD");
    assert_eq!(r.git(&["status", "--porcelain"]), "A  other.txt\n");
}

#[test]
fn amend_reindexes() {
    let r = installed();
    r.write(
        "specs/01-domain/entities/Usuario.md",
        &entity("Usuario", "amended"),
    );
    r.git(&["commit", "-q", "-a", "--amend", "--no-edit"]);
    verify(&r, "HEAD");
}

#[test]
fn kdd_hook_0_disables_and_next_commit_heals() {
    let r = installed();
    r.write(
        "specs/01-domain/entities/Usuario.md",
        &entity("Usuario", "skipped"),
    );
    let o = crate::repo::command("git", &r.dir)
        .env("KDD_HOOK", "0")
        .args(["commit", "-q", "-a", "-m", "skip"])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(
        !r.kdd(&["verify"]).status.success(),
        "verify must flag the stale index"
    );
    r.write("x.txt", "x");
    r.git(&["add", "x.txt"]);
    r.git(&["commit", "-q", "-m", "next"]);
    verify(&r, "HEAD");
}

#[test]
fn unparseable_spec_is_reported_and_commit_allowed() {
    let r = installed();
    r.write(
        "specs/01-domain/entities/Bad.md",
        "---\nid: Bad\nkind: entity\nthis is not yaml\n---\n# Bad\n",
    );
    r.git(&["add", "."]);
    let o = r.git_out(&["commit", "-m", "bad"]);
    let (_, err) = text(&o);
    assert!(o.status.success());
    assert!(err.contains("specs/01-domain/entities/Bad.md:"), "{err}");
}

#[test]
fn configurable_specs_root() {
    let r = Repo::new();
    r.git(&["config", "kdd.specs", "docs/kdd"]);
    assert!(r.kdd(&["install"]).status.success());
    r.write("docs/kdd/e/Pedido.md", &entity("Pedido", "x"));
    r.write("specs/ignored.md", &entity("Ignored", "x"));
    r.git(&["add", "."]);
    r.git(&["commit", "-q", "-m", "c"]);
    let names = changed_in(&r, "HEAD");
    assert!(names.contains(&".kdd-index/nodes/entity/Pedido.json".to_string()));
    assert!(!names.iter().any(|n| n.contains("Ignored")));
    verify(&r, "HEAD");
}

#[test]
fn linked_worktree_commits_index() {
    let r = installed();
    let wt = r.tmp.path().join("wt");
    r.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "feature",
        wt.to_str().unwrap(),
    ]);
    let w = r.at(wt);
    w.write(
        "specs/01-domain/entities/Cliente.md",
        &entity("Cliente", "x"),
    );
    w.git(&["add", "specs"]);
    w.git(&["commit", "-q", "-m", "in worktree"]);
    assert!(changed_in(&w, "HEAD").contains(&".kdd-index/nodes/entity/Cliente.json".to_string()));
    verify(&w, "HEAD");
}

#[test]
fn scn_offline_first_001_l1_without_model() {
    let r = installed();
    let m: serde_json::Value =
        serde_json::from_str(&r.git(&["show", "HEAD:.kdd-index/manifest.json"])).unwrap();
    assert_eq!(m["index_level"], "L1");
    assert!(!r.exists(".kdd-index/embeddings"));
    assert!(r.exists(".kdd-index/nodes/entity/Pedido.json"));
    assert!(r
        .read(".kdd-index/edges/entity/Pedido.jsonl")
        .contains("Usuario"));
}

fn merge_ok(r: &Repo, branch: &str) {
    let o = r.git_out(&["merge", "--no-edit", "-q", branch]);
    assert!(o.status.success(), "merge {branch}: {:?}", text(&o));
}

#[test]
fn scn_merge_index_001_two_branches_union_without_duplicates() {
    let r = installed();
    r.git(&["checkout", "-q", "-b", "dev-a"]);
    r.write("specs/01-domain/entities/Reto.md", &entity("Reto", "a"));
    r.write(
        "specs/01-domain/rules/BR-DOCUMENT-001.md",
        &spec("BR-DOCUMENT-001", "business-rule", "a", "b", &["Reto"]),
    );
    r.git(&["add", "specs"]);
    r.git(&["commit", "-q", "-m", "a"]);
    r.git(&["checkout", "-q", "main"]);
    r.git(&["checkout", "-q", "-b", "dev-b"]);
    r.write(
        "specs/02-behavior/CMD-001.md",
        &spec("CMD-001", "command", "a", "b", &["Pedido"]),
    );
    r.write(
        "specs/01-domain/entities/Cliente.md",
        &entity("Cliente", "b"),
    );
    r.git(&["add", "specs"]);
    r.git(&["commit", "-q", "-m", "b"]);
    merge_ok(&r, "dev-a");
    verify(&r, "HEAD");
    let nodes = r.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index/nodes"]);
    assert_eq!(nodes.lines().count(), 6, "{nodes}");
}

#[test]
fn both_sides_edit_same_spec_driver_then_heal() {
    let r = installed();
    let p = "specs/01-domain/entities/Pedido.md";
    r.git(&["checkout", "-q", "-b", "other"]);
    r.write(
        p,
        &spec(
            "Pedido",
            "entity",
            "a-theirs",
            "b0",
            &["Usuario", "Cliente"],
        ),
    );
    r.git(&["commit", "-q", "-a", "-m", "theirs"]);
    r.git(&["checkout", "-q", "main"]);
    r.write(p, &spec("Pedido", "entity", "a0", "b-ours", &["Usuario"]));
    r.git(&["commit", "-q", "-a", "-m", "ours"]);
    merge_ok(&r, "other");
    verify(&r, "HEAD");
    assert_eq!(r.git(&["status", "--porcelain"]), "");
    // Default settings: the merge commit itself carries the healed node (no extra commit).
    let parents = r.git(&["rev-list", "--parents", "-n1", "HEAD"]);
    assert_eq!(parents.split_whitespace().count(), 3, "{parents}");
    assert!(r
        .git(&["log", "-1", "--format=%s"])
        .starts_with("Merge branch"));
    let merged = r.read(p);
    assert!(merged.contains("a-theirs") && merged.contains("b-ours"));
    assert!(!r
        .read(".kdd-index/nodes/entity/Pedido.json")
        .contains("<<<<<<<"));
}

#[test]
fn rebase_cherry_pick_revert_stay_consistent() {
    let r = installed();
    let p = "specs/01-domain/entities/Pedido.md";
    r.git(&["checkout", "-q", "-b", "topic"]);
    r.write(p, &spec("Pedido", "entity", "topic-a", "b0", &["Usuario"]));
    r.git(&["commit", "-q", "-a", "-m", "topic edit"]);
    r.write("specs/01-domain/entities/Nuevo.md", &entity("Nuevo", "x"));
    r.git(&["add", "specs"]);
    r.git(&["commit", "-q", "-m", "topic add"]);
    r.git(&["checkout", "-q", "main"]);
    r.write(p, &spec("Pedido", "entity", "a0", "main-b", &["Usuario"]));
    r.git(&["commit", "-q", "-a", "-m", "main edit"]);
    // Rebase: the driver sees main as "ours" and the topic commit as "theirs".
    r.git(&["checkout", "-q", "topic"]);
    let o = r.git_out(&["rebase", "-q", "main"]);
    assert!(o.status.success(), "{:?}", text(&o));
    verify(&r, "HEAD");
    assert_eq!(r.git(&["status", "--porcelain"]), "");
    // The rebased tip was amended, not followed by a kdd commit.
    assert_eq!(r.git(&["log", "-1", "--format=%s"]).trim(), "topic add");
    assert_eq!(r.git(&["rev-list", "--count", "main..HEAD"]).trim(), "2");
    // Cherry-pick a spec edit onto main.
    r.git(&["checkout", "-q", "main"]);
    r.git(&["checkout", "-q", "-b", "pick"]);
    r.write(
        p,
        &spec("Pedido", "entity", "a0", "main-b", &["Usuario", "Nuevo"]),
    );
    r.git(&["commit", "-q", "-a", "-m", "link"]);
    let pick = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    r.git(&["checkout", "-q", "topic"]);
    let o = r.git_out(&["cherry-pick", &pick]);
    assert!(o.status.success(), "{:?}", text(&o));
    verify(&r, "HEAD");
    let o = r.git_out(&["revert", "--no-edit", "HEAD"]);
    assert!(o.status.success(), "{:?}", text(&o));
    verify(&r, "HEAD");
    assert_eq!(r.git(&["status", "--porcelain"]), "");
}

/// A cherry-pick (or revert) of several commits, the first of which auto-merges a spec: the
/// post-commit heal waits for the sequence's last commit (moving `HEAD` mid-sequence stopped
/// git with "your local changes would be overwritten", and `--continue` then dropped the rest:
/// red team, sixteenth round). Every commit is applied and the tip verifies.
#[test]
fn a_sequence_of_picks_or_reverts_applies_every_commit_and_heals_the_last() {
    let r = installed();
    let (a, b) = (
        "specs/01-domain/entities/Pedido.md",
        "specs/01-domain/entities/Cliente.md",
    );
    r.write(b, &entity("Cliente", "b0"));
    r.git(&["add", "specs"]);
    r.git(&["commit", "-q", "-m", "cliente"]);
    r.git(&["checkout", "-q", "-b", "feat"]);
    r.write(a, &spec("Pedido", "entity", "feat-a", "b0", &["Usuario"]));
    r.git(&["commit", "-q", "-a", "-m", "f1"]);
    r.write(b, &entity("Cliente", "feat-b"));
    r.git(&["commit", "-q", "-a", "-m", "f2"]);
    r.git(&["checkout", "-q", "main"]);
    r.write(a, &spec("Pedido", "entity", "a0", "main-b", &["Usuario"]));
    r.git(&["commit", "-q", "-a", "-m", "m1"]);
    let o = r.git_out(&["cherry-pick", "feat~1", "feat"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(r.read(a).contains("feat-a") && r.read(a).contains("main-b"));
    assert!(r.read(b).contains("feat-b"), "the second pick was lost");
    verify(&r, "HEAD");
    assert_eq!(r.git(&["status", "--porcelain"]), "");
    let o = r.git_out(&["revert", "--no-edit", "HEAD~1", "HEAD"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(!r.read(a).contains("feat-a") && !r.read(b).contains("feat-b"));
    verify(&r, "HEAD");
    assert_eq!(r.git(&["status", "--porcelain"]), "");
}

/// A sequence whose first pick conflicts: after the resolution, `git cherry-pick --continue`
/// applies the rest (its child commit's pre-commit staged healed artifacts behind the
/// sequencer, which then stopped with exit 128: red team, sixteenth round), and the last pick
/// is healed.
#[test]
fn a_sequence_continues_after_a_resolved_conflict() {
    let r = installed();
    let (a, b) = (
        "specs/01-domain/entities/Pedido.md",
        "specs/01-domain/entities/Usuario.md",
    );
    r.git(&["checkout", "-q", "-b", "feat"]);
    r.write(b, &entity("Usuario", "feat-b"));
    r.git(&["commit", "-q", "-a", "-m", "f1"]);
    r.write(a, &spec("Pedido", "entity", "feat-a", "b0", &["Usuario"]));
    r.git(&["commit", "-q", "-a", "-m", "f2"]);
    r.git(&["checkout", "-q", "main"]);
    r.write(b, &entity("Usuario", "main-b"));
    r.git(&["commit", "-q", "-a", "-m", "m1"]);
    let o = r.git_out(&["cherry-pick", "feat~1", "feat"]);
    assert!(!o.status.success(), "expected a conflict");
    r.write(b, &entity("Usuario", "resolved-b"));
    r.git(&["add", b]);
    let o = r.git_out(&["cherry-pick", "--continue", "--no-edit"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(
        r.read(a).contains("feat-a"),
        "the second pick was not applied"
    );
    verify(&r, "HEAD");
    assert_eq!(r.git(&["status", "--porcelain"]), "");
}

#[test]
fn heal_commit_modes_follow_up_and_stage() {
    let p = "specs/01-domain/entities/Pedido.md";
    for mode in ["commit", "stage"] {
        let r = installed();
        r.git(&["config", "kdd.healCommit", mode]);
        r.git(&["checkout", "-q", "-b", "other"]);
        r.write(p, &spec("Pedido", "entity", "a-theirs", "b0", &["Usuario"]));
        r.git(&["commit", "-q", "-a", "-m", "theirs"]);
        r.git(&["checkout", "-q", "main"]);
        r.write(p, &spec("Pedido", "entity", "a0", "b-ours", &["Usuario"]));
        r.git(&["commit", "-q", "-a", "-m", "ours"]);
        merge_ok(&r, "other");
        let status = r.git(&["status", "--porcelain"]);
        if mode == "commit" {
            assert_eq!(status, "", "{mode}");
            assert!(r
                .git(&["log", "-1", "--format=%s"])
                .starts_with("kdd: re-derive"));
            verify(&r, "HEAD");
        } else {
            assert!(
                status.contains(".kdd-index/nodes/entity/Pedido.json"),
                "{status}"
            );
        }
    }
}

/// A specs root set with `git config kdd.specs` is not cloned: a clone's commands and hooks take
/// the committed manifest's root (the hook once found no spec under `specs/` and removed every
/// artifact: red team, sixteenth round); a specs folder moved away without the setting is
/// refused, never emptied.
#[test]
fn a_clone_without_the_specs_setting_keeps_the_committed_root() {
    let r = Repo::new();
    r.git(&["config", "kdd.specs", "product/specs"]);
    assert!(r.kdd(&["install"]).status.success());
    r.write(
        "product/specs/01-domain/entities/Pedido.md",
        &spec("Pedido", "entity", "a0", "b0", &["Usuario"]),
    );
    let usuario = "product/specs/01-domain/entities/Usuario.md";
    r.write(usuario, &entity("Usuario", "a0"));
    r.git(&["add", "."]);
    r.git(&["commit", "-q", "-m", "init"]);
    let nodes = |r: &Repo| {
        r.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index/nodes"])
            .lines()
            .count()
    };
    assert_eq!(nodes(&r), 2);
    let c = r.at(r.clone_to("clone"));
    c.git(&["config", "user.name", "kdd test"]);
    c.git(&["config", "user.email", "test@kdd.invalid"]);
    assert!(c.kdd(&["install"]).status.success());
    verify(&c, "HEAD");
    c.write(usuario, &entity("Usuario", "edited in the clone"));
    c.git(&["commit", "-q", "-a", "-m", "edit"]);
    assert_eq!(nodes(&c), 2);
    verify(&c, "HEAD");
    let manifest = c.git(&["show", "HEAD:.kdd-index/manifest.json"]);
    assert!(
        manifest.contains("\"specs_root\": \"product/specs\""),
        "{manifest}"
    );
    c.git(&["mv", "product/specs", "product/moved"]);
    let o = c.git_out(&["commit", "-q", "-m", "move"]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("no staged spec under"), "{err}");
    assert_eq!(nodes(&c), 2, "the index was emptied");
}

/// `git rm -r specs` deletes the specs on purpose: the commit removes their artifacts (the
/// hook refused it, twice, and advised `kdd resolve`, which refused too: red team, sixteenth
/// round), while a moved folder is still refused above.
#[test]
fn deleting_every_spec_removes_their_artifacts() {
    let r = installed();
    r.git(&["rm", "-r", "-q", "specs"]);
    let o = r.git_out(&["commit", "-q", "-m", "delete"]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("no staged spec under"), "{err}");
    let left = r.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index/nodes"]);
    assert_eq!(left, "", "artifacts of deleted specs were kept");
    let o = r.kdd(&["verify"]);
    assert!(o.status.success(), "{:?}", text(&o));
    // A folder moved, every file renamed and edited, is still a move, and the refusal is said once,
    // by pre-commit, also on an amend (post-rewrite said it again).
    let r = Repo::new();
    assert!(r.kdd(&["install"]).status.success());
    for n in ["Pedido", "Usuario"] {
        r.write(
            &format!("specs/01-domain/entities/{n}.md"),
            &entity(n, "a0"),
        );
    }
    r.write("specs/_kdd.yaml", "kdd_version: \"2.0\"\n");
    r.git(&["add", "."]);
    r.git(&["commit", "-q", "-m", "init"]);
    r.git(&["mv", "specs/01-domain", "docs"]);
    r.git(&["mv", "docs/entities", "docs/e"]);
    for n in ["Pedido", "Usuario"] {
        let (from, to) = (
            format!("docs/e/{n}.md"),
            format!("docs/e/{}-x.md", n.to_lowercase()),
        );
        r.git(&["mv", &from, &to]);
        r.write(&to, &entity(n, "edited"));
    }
    r.git(&["add", "-A"]);
    let (_, err) = text(&r.git_out(&["commit", "-q", "-m", "move"]));
    assert_eq!(err.matches("no staged spec under").count(), 1, "{err}");
    let (_, err) = text(&r.git_out(&["commit", "-q", "--amend", "--no-edit"]));
    assert_eq!(err.matches("no staged spec under").count(), 1, "{err}");
    let left = r.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index/nodes"]);
    assert_eq!(left.lines().count(), 2, "a moved folder emptied the index");
    // Deleting every spec but the folder's settings file is a deletion.
    r.git(&["reset", "-q", "--hard", "HEAD~1"]);
    r.git(&["rm", "-r", "-q", "specs/01-domain"]);
    let (_, err) = text(&r.git_out(&["commit", "-q", "-m", "delete"]));
    assert!(!err.contains("no staged spec under"), "{err}");
    let left = r.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index/nodes"]);
    assert_eq!(left, "", "{err}");
}

/// A checkout that writes specs with CRLF (`eol=crlf`, like `core.autocrlf`) over LF blobs:
/// the hook hashes the blob and `kdd index` / `status` / `query` the work tree, and they agree
/// (every spec was reported stale, and `kdd index` rewrote every node: red team, sixteenth
/// round).
#[test]
fn a_crlf_checkout_of_lf_blobs_is_fresh_everywhere() {
    let r = Repo::new();
    r.write(".gitattributes", "*.md text eol=crlf\n");
    let p = "specs/01-domain/entities/Pedido.md";
    r.write(p, &spec("Pedido", "entity", "a0", "b0", &["Usuario"]));
    r.write(
        "specs/01-domain/entities/Usuario.md",
        &entity("Usuario", "a0"),
    );
    r.git(&["add", "."]);
    r.git(&["commit", "-q", "-m", "specs"]);
    std::fs::remove_dir_all(r.dir.join("specs")).unwrap();
    r.git(&["checkout", "-q", "--", "specs"]);
    assert!(r.read(p).contains("\r\n"), "the checkout is not CRLF");
    assert!(r.kdd(&["install"]).status.success());
    assert!(r.kdd(&["index"]).status.success());
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "index"]);
    verify(&r, "HEAD");
    assert!(r.kdd(&["index"]).status.success());
    assert_eq!(
        r.git(&["status", "--porcelain"]),
        "",
        "kdd index disagreed with the hook"
    );
    let o = r.kdd(&["status"]);
    let (out, _) = text(&o);
    assert!(!out.contains("Pedido.md"), "{out}");
    let o = r.kdd(&["query", "Pedido a0"]);
    let (_, err) = text(&o);
    assert!(!err.contains("STALE_SPECS"), "{err}");
}

/// [`installed`] plus a committed command outside `01-domain` (for the sparse checkouts).
fn with_a_command() -> Repo {
    let r = installed();
    r.write(
        "specs/02-behavior/commands/CMD-001-Crear.md",
        &spec("CMD-001", "command", "a0", "b0", &["Pedido"]),
    );
    r.git(&["add", "."]);
    r.git(&["commit", "-q", "-m", "command"]);
    r
}

/// A sparse checkout that leaves specs out of the work tree: `kdd index` refuses (it took them
/// for removed and deleted their artifacts: red team, sixteenth round), and a commit through
/// the hook keeps every node.
#[test]
fn a_sparse_checkout_never_drops_the_specs_it_leaves_out() {
    let r = with_a_command();
    let nodes = |r: &Repo| {
        r.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index/nodes"])
            .lines()
            .count()
    };
    assert_eq!(nodes(&r), 3);
    r.git(&[
        "sparse-checkout",
        "set",
        "--no-cone",
        "/*",
        "!specs/02-behavior/",
    ]);
    assert!(!r.exists("specs/02-behavior/commands/CMD-001-Crear.md"));
    let o = r.kdd(&["index"]);
    let (_, err) = text(&o);
    assert!(
        !o.status.success() && err.contains("sparse checkout"),
        "{err}"
    );
    assert_eq!(r.git(&["status", "--porcelain"]), "");
    // Left out is not stale: no advice to run `kdd index`, no STALE_SPECS.
    let (out, _) = text(&r.kdd(&["status"]));
    assert!(out.contains("not checked out (sparse checkout"), "{out}");
    assert!(!out.contains("run `kdd index`"), "{out}");
    let (_, err) = text(&r.kdd(&["query", "CMD-001 a0"]));
    assert!(!err.contains("STALE_SPECS"), "{err}");
    r.write(
        "specs/01-domain/entities/Usuario.md",
        &entity("Usuario", "edited"),
    );
    r.git(&["commit", "-q", "-a", "-m", "edit"]);
    assert_eq!(nodes(&r), 3);
    let o = r.kdd(&["verify"]);
    assert!(o.status.success(), "{:?}", text(&o));
    // The whole specs folder left out: named as a sparse checkout, not as a missing folder.
    r.git(&["sparse-checkout", "set", ".kdd-index"]);
    let (_, err) = text(&r.kdd(&["index"]));
    assert!(err.contains("sparse checkout"), "{err}");
    assert!(!err.contains("not found"), "{err}");
    // `.kdd-index/` itself left out: status names the sparse checkout, not `kdd index`.
    r.git(&["sparse-checkout", "set", "specs"]);
    let (_, err) = text(&r.kdd(&["status"]));
    assert!(err.contains("left out of this sparse checkout"), "{err}");
    let (_, err) = text(&r.kdd(&["query", "Pedido"]));
    assert!(err.contains("sparse checkout"), "{err}");
    // A commit there stages the new artifacts and leaves them out of the work tree: the hook
    // wrote them through the work tree, and git then brought the whole folder back.
    r.write(
        "specs/01-domain/entities/Usuario.md",
        &entity("Usuario", "edited while left out"),
    );
    r.git(&["commit", "-q", "-a", "-m", "edit left out"]);
    assert!(!r.exists(".kdd-index"));
    let bits = r.git(&["ls-files", "-t", ".kdd-index"]);
    assert!(bits.lines().all(|l| l.starts_with("S ")), "{bits}");
    assert_eq!(r.git(&["status", "--porcelain"]), "");
    let changed = r.git(&["diff", "--name-only", "HEAD~1", "HEAD", "--", ".kdd-index"]);
    assert!(changed.contains("nodes/entity/Usuario.json"), "{changed}");
    verify(&r, "HEAD");
    // Part of it left out (red team, eighteenth round): that part stays out too.
    r.git(&[
        "sparse-checkout",
        "set",
        "--no-cone",
        "/*",
        "!/.kdd-index/edges/",
    ]);
    assert!(r.exists(".kdd-index/manifest.json") && !r.exists(".kdd-index/edges"));
    r.write(
        "specs/02-behavior/commands/CMD-001-Crear.md",
        &spec("CMD-001", "command", "edges left out", "b0", &["Pedido"]),
    );
    r.git(&["commit", "-q", "-a", "-m", "edit edges left out"]);
    assert!(!r.exists(".kdd-index/edges"));
    let edges = r.git(&["ls-files", ".kdd-index/edges"]);
    assert!(edges.contains("CMD-001"), "{edges}");
    let bits = r.git(&["ls-files", "-t", ".kdd-index/edges"]);
    assert!(bits.lines().all(|l| l.starts_with("S ")), "{bits}");
    assert_eq!(r.git(&["status", "--porcelain"]), "");
    verify(&r, "HEAD");
}

/// A cone sparse checkout with a sparse index folds the folders it leaves out into one entry:
/// the hook leaves `.kdd-index/` as it is and says how to list every spec (a commit removed the
/// artifacts of every spec outside the cone: red team, sixteenth round).
#[test]
fn a_sparse_index_never_drops_the_specs_it_folds() {
    let r = with_a_command();
    r.git(&["sparse-checkout", "init", "--cone", "--sparse-index"]);
    r.git(&["sparse-checkout", "set", "specs/02-behavior", ".kdd-index"]);
    r.write(
        "specs/02-behavior/commands/CMD-001-Crear.md",
        &spec("CMD-001", "command", "edited", "b0", &["Pedido"]),
    );
    let o = r.git_out(&["commit", "-q", "-a", "-m", "edit"]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("--no-sparse-index"), "{err}");
    let nodes = r.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index/nodes"]);
    assert_eq!(nodes.lines().count(), 3, "{nodes}");
    // verify names the same way out, not `kdd resolve` alone, which refuses here.
    let (_, err) = text(&r.kdd(&["verify"]));
    assert!(err.contains("--no-sparse-index"), "{err}");
}

/// A clone with `core.autocrlf=true`: the artifacts are `-text`, so the checkout writes them as
/// committed and a commit leaves `git status` clean (every artifact showed modified and `git
/// pull` refused: red team, sixteenth round); attributes written before get the line from
/// `kdd install`.
#[test]
fn an_autocrlf_clone_stays_clean_after_a_commit() {
    let r = installed();
    r.write(".gitattributes", ".kdd-index/** merge=kdd\n");
    assert!(r.kdd(&["install"]).status.success());
    assert!(r.read(".gitattributes").contains(".kdd-index/** -text"));
    r.git(&["commit", "-q", "-a", "-m", "attributes"]);
    let dir = r.dir.join("../crlf");
    let out = dir.to_string_lossy().to_string();
    let src = r.dir.to_string_lossy().to_string();
    r.git(&["-c", "core.autocrlf=true", "clone", "-q", &src, &out]);
    let c = r.at(dir);
    c.git(&["config", "core.autocrlf", "true"]);
    c.git(&["config", "user.name", "kdd test"]);
    c.git(&["config", "user.email", "test@kdd.invalid"]);
    assert!(c.kdd(&["install"]).status.success());
    assert!(c
        .read("specs/01-domain/entities/Pedido.md")
        .contains("\r\n"));
    c.write(
        "specs/01-domain/entities/Usuario.md",
        &entity("Usuario", "crlf clone").replace('\n', "\r\n"),
    );
    c.git(&["commit", "-q", "-a", "-m", "edit"]);
    assert_eq!(c.git(&["status", "--porcelain"]), "");
    verify(&c, "HEAD");
}

#[test]
fn fresh_clone_without_driver_then_resolve() {
    let r = installed();
    let clone_dir = r.clone_to("clone");
    let c = r.at(clone_dir);
    c.git(&["config", "user.name", "kdd test"]);
    c.git(&["config", "user.email", "test@kdd.invalid"]);
    // No driver, no hooks in the clone: index edits are done by hand with `kdd resolve`.
    let p = "specs/01-domain/entities/Pedido.md";
    c.git(&["checkout", "-q", "-b", "x"]);
    c.write(p, &spec("Pedido", "entity", "X", "b0", &["Usuario"]));
    c.git(&["add", p]);
    assert!(c.kdd(&["resolve"]).status.success());
    c.git(&["commit", "-q", "-m", "x"]);
    c.git(&["checkout", "-q", "main"]);
    c.write(p, &spec("Pedido", "entity", "Y", "b0", &["Usuario"]));
    c.git(&["add", p]);
    assert!(c.kdd(&["resolve"]).status.success());
    c.git(&["commit", "-q", "-m", "y"]);
    let o = c.git_out(&["merge", "-q", "x"]);
    assert!(!o.status.success(), "expected a conflict");
    c.git(&["checkout", "--theirs", "--", p]);
    c.git(&["add", p]);
    let o = c.kdd(&["resolve"]);
    assert!(o.status.success(), "{:?}", text(&o));
    c.git(&["commit", "-q", "--no-edit"]);
    verify(&c, "HEAD");
    assert!(kdd_markers(&c).is_empty());
}

fn kdd_markers(r: &Repo) -> Vec<String> {
    kdd::hook::conflict_marker_files(&r.dir.join(".kdd-index"))
}

#[test]
fn merge_driver_incompatible_models_is_a_real_conflict() {
    let r = Repo::new();
    let m = |model: &str| {
        format!("{{\n  \"format_version\": 1,\n  \"kdd_version\": \"2.0\",\n  \"structure\": \"single-domain\",\n  \"specs_root\": \"specs\",\n  \"domains\": [],\n  \"index_level\": \"L2\",\n  \"embedding\": {{\"model\": \"{model}\", \"dimensions\": 384, \"quantization\": \"int8\"}}\n}}\n")
    };
    r.write("o", &m("nomic-embed-text-v1.5"));
    r.write("a", &m("nomic-embed-text-v1.5"));
    r.write("b", &m("bge-small-en-v1.5"));
    let o = crate::repo::command(
        std::path::PathBuf::from(env!("CARGO_BIN_EXE_kdd-merge-driver")),
        &r.dir,
    )
    .args(["o", "a", "b", ".kdd-index/manifest.json"])
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o)
        .1
        .contains("Incompatible embedding models, cannot merge"));
    assert_eq!(r.read("a"), m("nomic-embed-text-v1.5"));
    // Unreadable node: git's text merge and a non-zero exit.
    r.write("a", "garbage\n");
    r.write("b", "other\n");
    let o = r.kdd(&[
        "merge-driver",
        "o",
        "a",
        "b",
        ".kdd-index/nodes/entity/X.json",
    ]);
    assert_eq!(o.status.code(), Some(1));
}

// ---------- merge-index (ref level, CMD-004) ----------

fn commit_at(r: &Repo, msg: &str, time: &str) {
    let o = crate::repo::command("git", &r.dir)
        .env("GIT_COMMITTER_DATE", time)
        .env("GIT_AUTHOR_DATE", time)
        .args(["commit", "-q", "-m", msg])
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
}

fn merge_index_json(r: &Repo, refs: &[&str]) -> (bool, serde_json::Value) {
    let mut args = vec!["--json", "merge-index", "--dry-run"];
    args.extend(refs);
    let o = r.kdd(&args);
    let (out, _) = text(&o);
    (
        o.status.success(),
        serde_json::from_str(&out).unwrap_or(serde_json::Value::Null),
    )
}

#[test]
fn scn_merge_index_001_002_003_lww_and_delete_wins() {
    let r = installed();
    // 001: no conflicts.
    r.git(&["checkout", "-q", "-b", "dev-a"]);
    r.write(
        "specs/01-domain/rules/BR-DOCUMENT-001.md",
        &spec("BR-DOCUMENT-001", "business-rule", "a", "b", &[]),
    );
    r.git(&["add", "specs"]);
    commit_at(&r, "a", "2026-01-01T10:00:00Z");
    r.git(&["checkout", "-q", "-b", "dev-b", "main"]);
    r.write(
        "specs/02-behavior/CMD-001.md",
        &spec("CMD-001", "command", "a", "b", &[]),
    );
    r.git(&["add", "specs"]);
    commit_at(&r, "b", "2026-01-01T10:05:00Z");
    let (ok, v) = merge_index_json(&r, &["dev-a", "dev-b"]);
    assert!(ok);
    assert_eq!(v["nodes"], 4);
    assert_eq!(v["conflicts_resolved"].as_array().unwrap().len(), 0);
    // 002: both change Pedido; dev-b's change is later → dev-b wins.
    let p = "specs/01-domain/entities/Pedido.md";
    r.git(&["checkout", "-q", "dev-a"]);
    r.write(p, &spec("Pedido", "entity", "abc123", "b0", &["Usuario"]));
    commit_at_all(&r, "a edits", "2026-01-01T10:00:00Z");
    r.git(&["checkout", "-q", "dev-b"]);
    r.write(p, &spec("Pedido", "entity", "xyz999", "b0", &["Usuario"]));
    commit_at_all(&r, "b edits", "2026-01-01T10:15:00Z");
    let (ok, v) = merge_index_json(&r, &["dev-a", "dev-b"]);
    assert!(ok);
    let c = v["conflicts_resolved"].as_array().unwrap();
    assert_eq!(c.len(), 1, "{v}");
    assert_eq!(c[0]["node"], "Entity:Pedido");
    assert_eq!(c[0]["winner"], "dev-b");
    let o = r.kdd(&[
        "merge-index",
        "dev-a",
        "dev-b",
        "--dry-run",
        "--fail-on-conflict",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("Merge aborted: 1 conflicts detected"));
    // Order of refs does not matter.
    let (_, v2) = merge_index_json(&r, &["dev-b", "dev-a"]);
    assert_eq!(v2["conflicts_resolved"][0]["winner"], "dev-b");
    // Write it and check the winner's hash.
    let o = r.kdd(&[
        "merge-index",
        "dev-a",
        "dev-b",
        "--output",
        r.tmp.path().join("out").to_str().unwrap(),
    ]);
    assert!(o.status.success());
    // Embeddings follow the winner: give each side opaque vectors (hooks off, as an L2 machine
    // would have committed them).
    for (branch, bytes) in [("dev-a", "A-vectors"), ("dev-b", "B-vectors")] {
        r.git(&["checkout", "-q", branch]);
        r.write(".kdd-index/embeddings/entity/Pedido.bin", bytes);
        r.git(&["add", ".kdd-index/embeddings/entity/Pedido.bin"]);
        let o = crate::repo::command("git", &r.dir)
            .env("KDD_HOOK", "0")
            .args(["commit", "-q", "-m", "vectors"])
            .output()
            .unwrap();
        assert!(o.status.success());
    }
    let o = r.kdd(&[
        "merge-index",
        "dev-a",
        "dev-b",
        "--output",
        r.tmp.path().join("out").to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let emb =
        std::fs::read_to_string(r.tmp.path().join("out/embeddings/entity/Pedido.bin")).unwrap();
    assert_eq!(emb, "B-vectors");
    let n = std::fs::read_to_string(r.tmp.path().join("out/nodes/entity/Pedido.json")).unwrap();
    assert!(n.contains(&blake(&r, &format!("dev-b:{p}"))));
    // 003: dev-a deletes Usuario, dev-b keeps it → deleted, edges cascade.
    r.git(&["checkout", "-q", "dev-a"]);
    r.git(&["rm", "-q", "specs/01-domain/entities/Usuario.md"]);
    commit_at(&r, "a deletes", "2026-01-01T11:00:00Z");
    let (ok, v) = merge_index_json(&r, &["dev-a", "dev-b"]);
    assert!(ok);
    assert!(
        v["deleted"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == "Entity:Usuario"),
        "{v}"
    );
    let out = r.tmp.path().join("out2");
    assert!(r
        .kdd(&["merge-index", "dev-a", "dev-b", "-o", out.to_str().unwrap()])
        .status
        .success());
    assert!(!out.join("nodes/entity/Usuario.json").exists());
    assert!(!out.join("edges/entity/Usuario.jsonl").exists());
}

fn commit_at_all(r: &Repo, msg: &str, time: &str) {
    r.git(&["add", "-A", "specs"]);
    commit_at(r, msg, time);
}

#[test]
fn scn_merge_index_004_incompatible_models_rejected() {
    let r = installed();
    let m = |model: &str| {
        format!("{{\n  \"format_version\": 1,\n  \"kdd_version\": \"2.0\",\n  \"structure\": \"single-domain\",\n  \"specs_root\": \"specs\",\n  \"domains\": [],\n  \"index_level\": \"L2\",\n  \"embedding\": {{\"model\": \"{model}\", \"dimensions\": 384, \"quantization\": \"int8\"}}\n}}\n")
    };
    let commit_manifest = |branch: &str, model: &str| {
        r.git(&["checkout", "-q", "-b", branch, "main"]);
        r.write(".kdd-index/manifest.json", &m(model));
        r.git(&["add", ".kdd-index/manifest.json"]);
        let o = crate::repo::command("git", &r.dir)
            .env("KDD_HOOK", "0")
            .args(["commit", "-q", "-m", model])
            .output()
            .unwrap();
        assert!(o.status.success());
    };
    commit_manifest("dev-a", "nomic-embed-text-v1.5");
    commit_manifest("dev-b", "bge-small-en-v1.5");
    let o = r.kdd(&["merge-index", "dev-a", "dev-b", "--dry-run"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).1.contains("Incompatible embedding models"),
        "{:?}",
        text(&o)
    );
    // The merge driver refuses too (real conflict, no markers in the JSON).
    r.git(&["checkout", "-q", "dev-a"]);
    let o = r.git_out(&["merge", "-q", "dev-b"]);
    assert!(!o.status.success());
    assert!(!r.read(".kdd-index/manifest.json").contains("<<<<<<<"));
    let _ = r.git_out(&["merge", "--abort"]);
}

#[test]
fn scn_multi_domain_003_merge_keeps_all_domains() {
    let r = Repo::new();
    assert!(r.kdd(&["install"]).status.success());
    r.git(&["config", "kdd.healCommit", "true"]);
    r.write(
        "specs/domains/core/entities/Pedido.md",
        &entity("Pedido", "x"),
    );
    r.git(&["add", "."]);
    r.git(&["commit", "-q", "-m", "core"]);
    r.git(&["checkout", "-q", "-b", "dev-a"]);
    r.write(
        "specs/domains/auth/entities/Token.md",
        &spec("Token", "entity", "a", "b", &["core::Pedido"]),
    );
    r.git(&["add", "specs"]);
    commit_at(&r, "auth", "2026-01-01T10:00:00Z");
    r.git(&["checkout", "-q", "-b", "dev-b", "main"]);
    r.write(
        "specs/domains/sessions/entities/Sesion.md",
        &spec("Sesion", "entity", "a", "b", &["auth::Token"]),
    );
    r.git(&["add", "specs"]);
    commit_at(&r, "sessions", "2026-01-01T10:01:00Z");
    let (ok, v) = merge_index_json(&r, &["dev-a", "dev-b"]);
    assert!(ok, "{v}");
    assert_eq!(v["nodes"], 3);
    // git merge with the driver: manifest domains are unioned, cross-domain edges kept.
    merge_ok(&r, "dev-a");
    verify(&r, "HEAD");
    let m: serde_json::Value = serde_json::from_str(&r.read(".kdd-index/manifest.json")).unwrap();
    assert_eq!(
        m["domains"],
        serde_json::json!(["auth", "core", "sessions"])
    );
    assert!(r
        .read(".kdd-index/edges/entity/auth/Token.jsonl")
        .contains("\"domain\":\"core\""));
    assert!(r
        .read(".kdd-index/edges/entity/sessions/Sesion.jsonl")
        .contains("\"domain\":\"auth\""));
}

// ---------- randomized merges ----------

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn spec_files(r: &Repo) -> Vec<String> {
    r.git(&["ls-files", "specs"])
        .lines()
        .map(str::to_string)
        .collect()
}

fn random_ops(r: &Repo, rng: &mut Rng, branch: usize, ops: usize) {
    for op in 0..ops {
        let files = spec_files(r);
        match rng.below(6) {
            0 => {
                let id = if rng.below(3) == 0 {
                    format!("Shared{}", rng.below(2))
                } else {
                    format!("N{branch}x{op}")
                };
                let p = format!("specs/01-domain/entities/{id}.md");
                if !files.contains(&p) {
                    r.write(
                        &p,
                        &spec(
                            &id,
                            "entity",
                            &format!("v{}", rng.next() % 100),
                            "b0",
                            &["Pedido"],
                        ),
                    );
                }
            }
            1 | 2 if !files.is_empty() => {
                let p = &files[rng.below(files.len())];
                let text = r.read(p);
                let id = text
                    .lines()
                    .find_map(|l| l.strip_prefix("id: "))
                    .unwrap_or("X")
                    .to_string();
                let links: Vec<String> = (0..rng.below(3))
                    .map(|_| format!("L{}", rng.below(5)))
                    .collect();
                let links: Vec<&str> = links.iter().map(String::as_str).collect();
                let a = if rng.below(2) == 0 {
                    format!("a{}", rng.next() % 1000)
                } else {
                    "a0".into()
                };
                let b = if rng.below(2) == 0 {
                    format!("b{}", rng.next() % 1000)
                } else {
                    "b0".into()
                };
                r.write(p, &spec(&id, "entity", &a, &b, &links));
            }
            3 if files.len() > 2 => {
                let p = files[rng.below(files.len())].clone();
                let name = p.rsplit('/').next().unwrap();
                let dir =
                    ["specs/01-domain", "specs/01-domain/entities", "specs/moved"][rng.below(3)];
                let to = format!("{dir}/{name}");
                if to != p {
                    std::fs::create_dir_all(r.dir.join(dir)).unwrap();
                    r.git(&["mv", &p, &to]);
                }
            }
            4 if files.len() > 2 => {
                let p = files[rng.below(files.len())].clone();
                r.git(&["rm", "-q", &p]);
            }
            _ => {
                r.write(&format!("notes/{branch}-{op}.txt"), "n\n");
            }
        }
        r.git(&["add", "-A", "--", "specs", "notes"]);
        let o = r.git_out(&["commit", "-q", "-m", &format!("b{branch} op{op}")]);
        let (out, err) = text(&o);
        assert!(
            o.status.success() || out.contains("nothing to commit"),
            "{out}{err}"
        );
    }
}

/// Resolve spec conflicts like a user would (ours or theirs, keep or delete), then `kdd resolve`.
fn resolve_specs(r: &Repo, rng: &mut Rng) {
    let unmerged = r.git(&["diff", "--name-only", "--diff-filter=U"]);
    for p in unmerged.lines().filter(|p| p.starts_with("specs/")) {
        // Take one side's version from the index stages (ours = 2, theirs = 3); a path neither
        // side has any more is deleted. Never leaves markers in a spec.
        let order = if rng.below(2) == 0 { [2, 3] } else { [3, 2] };
        let content = order.iter().find_map(|stage| {
            let o = r.git_out(&["show", &format!(":{stage}:{p}")]);
            o.status.success().then_some(o.stdout)
        });
        match content {
            Some(bytes) if !String::from_utf8_lossy(&bytes).contains("<<<<<<<") => {
                std::fs::write(r.dir.join(p), bytes).unwrap();
                r.git(&["add", p]);
            }
            _ => {
                let _ = std::fs::remove_file(r.dir.join(p));
                r.git(&["rm", "-q", "--cached", "--ignore-unmatch", p]);
            }
        }
    }
    // Rename detection can put markers into a path that is not unmerged any more.
    for p in spec_files(r) {
        if r.exists(&p) && r.read(&p).contains("<<<<<<<") {
            r.git(&["rm", "-q", "-f", &p]);
        }
    }
    // Renames on both sides may leave one id in two files: keep the first.
    let mut seen = std::collections::BTreeSet::new();
    for p in spec_files(r) {
        let id = r
            .read(&p)
            .lines()
            .find_map(|l| l.strip_prefix("id: ").map(str::to_string))
            .unwrap_or_default();
        if !seen.insert(id) {
            r.git(&["rm", "-q", "-f", &p]);
        }
    }
}

fn check_consistent(r: &Repo, ctx: &str) {
    let markers = kdd_markers(r);
    assert!(markers.is_empty(), "{ctx}: conflict markers in {markers:?}");
    let o = r.kdd(&["verify", "--ref", "HEAD"]);
    assert!(
        o.status.success(),
        "{ctx}: index differs from a fresh index:\n{:?}",
        text(&o)
    );
    for p in spec_files(r) {
        let id = r
            .read(&p)
            .lines()
            .find_map(|l| l.strip_prefix("id: ").map(str::to_string))
            .unwrap();
        assert!(
            r.exists(&format!(".kdd-index/nodes/entity/{id}.json")),
            "{ctx}: lost node for {p}"
        );
    }
    assert_eq!(
        r.git(&["status", "--porcelain", "--untracked-files=no"]),
        "",
        "{ctx}: leftovers"
    );
    fresh_index_equal(r, ctx);
}

/// A fresh `kdd index` of the checked-out specs rewrites nothing.
fn fresh_index_equal(r: &Repo, ctx: &str) {
    let o = r.kdd(&["index"]);
    assert!(
        o.status.code() != Some(2),
        "{ctx}: kdd index failed {:?}",
        text(&o)
    );
    let st = r.git(&[
        "status",
        "--porcelain",
        "--untracked-files=all",
        ".kdd-index",
    ]);
    assert_eq!(st, "", "{ctx}: kdd index differs from the committed index");
}

#[test]
fn randomized_merges_keep_index_equal_to_fresh_index() {
    let seeds: u64 = std::env::var("KDD_RANDOM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let (mut merges, mut rebases, mut conflicted, mut index_conflicts) = (0, 0, 0, 0);
    let first: u64 = std::env::var("KDD_RANDOM_FIRST")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    for seed in first..first + seeds {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed.wrapping_mul(0x1000_0001));
        // Kept on disk when a check fails (dropped explicitly at the end of the seed).
        let r = std::mem::ManuallyDrop::new(Repo::new());
        if std::env::var_os("KDD_RANDOM_KEEP").is_some() {
            eprintln!("seed {seed}: {}", r.dir.display());
        }
        assert!(r.kdd(&["install"]).status.success());
        r.git(&["config", "kdd.healCommit", "true"]);
        for i in 0..6 {
            let id = if i == 0 {
                "Pedido".to_string()
            } else {
                format!("S{i}")
            };
            r.write(
                &format!("specs/01-domain/entities/{id}.md"),
                &spec(&id, "entity", "a0", "b0", &["Pedido"]),
            );
        }
        r.write("notes/keep.txt", "keep\n");
        r.git(&["add", "."]);
        r.git(&["commit", "-q", "-m", "base"]);
        let branches = 3;
        for b in 0..branches {
            r.git(&["checkout", "-q", "-b", &format!("b{b}"), "main"]);
            random_ops(&r, &mut rng, b, 3);
        }
        r.git(&["checkout", "-q", "main"]);
        let mut order: Vec<usize> = (0..branches).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        for b in order {
            let branch = format!("b{b}");
            // A third of the integrations rebase the branch onto main (the driver then sees the
            // sides swapped) and fast-forward; the rest merge.
            let rebase = rng.below(3) == 0;
            let ctx = format!(
                "seed {seed} {} {branch}",
                if rebase { "rebase" } else { "merge" }
            );
            if rebase {
                rebases += 1;
                r.git(&["checkout", "-q", &branch]);
                let mut o = r.git_out(&["rebase", "-q", "main"]);
                let mut rounds = 0;
                while !o.status.success() {
                    rounds += 1;
                    assert!(rounds < 20, "{ctx}: rebase does not finish {:?}", text(&o));
                    conflicted += 1;
                    let u = r.git(&["diff", "--name-only", "--diff-filter=U"]);
                    index_conflicts += u.lines().filter(|l| l.starts_with(".kdd-index/")).count();
                    resolve_specs(&r, &mut rng);
                    let res = r.kdd(&["resolve"]);
                    assert!(res.status.success(), "{ctx}: resolve {:?}", text(&res));
                    o = r.git_out(&["-c", "core.editor=true", "rebase", "--continue"]);
                    let (out, err) = text(&o);
                    if !o.status.success()
                        && (out.contains("nothing to commit")
                            || err.contains("nothing to commit")
                            || err.contains("No changes"))
                    {
                        o = r.git_out(&["rebase", "--skip"]);
                    }
                }
                r.git(&["checkout", "-q", "main"]);
                r.git(&["merge", "-q", "--ff-only", &branch]);
            } else {
                let o = r.git_out(&["merge", "--no-edit", "-q", &branch]);
                if !o.status.success() {
                    conflicted += 1;
                    let u = r.git(&["diff", "--name-only", "--diff-filter=U"]);
                    index_conflicts += u.lines().filter(|l| l.starts_with(".kdd-index/")).count();
                    resolve_specs(&r, &mut rng);
                    let o = r.kdd(&["resolve"]);
                    assert!(o.status.success(), "{ctx}: resolve {:?}", text(&o));
                    let o = r.git_out(&["commit", "-q", "--no-edit"]);
                    assert!(o.status.success(), "{ctx}: commit {:?}", text(&o));
                }
            }
            check_consistent(&r, &ctx);
            merges += 1;
        }
        drop(std::mem::ManuallyDrop::into_inner(r));
    }
    eprintln!(
        "randomized merge scenarios: {merges} integrations ({rebases} by rebase) over {seeds} \
         seeds; {conflicted} stopped on conflicts ({index_conflicts} unmerged .kdd-index/ paths \
         fixed by `kdd resolve`)"
    );
}

#[test]
fn doctor_checks_and_verify_in_bare_repo() {
    let r = installed();
    let settings = kdd::config::Settings::discover(&r.dir, None).unwrap();
    let checks = kdd::cli::commands::wiring::checks(&settings);
    assert!(checks.iter().all(|c| c.ok), "{checks:?}");
    let bare = r.tmp.path().join("bare.git");
    r.git(&[
        "clone",
        "-q",
        "--bare",
        r.dir.to_str().unwrap(),
        bare.to_str().unwrap(),
    ]);
    let o = r.kdd(&["-C", bare.to_str().unwrap(), "verify"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let files =
        kdd::git::read_tree_files(&kdd::git::open(&bare).unwrap(), "HEAD", ".kdd-index").unwrap();
    assert!(files
        .iter()
        .any(|(p, _)| p == ".kdd-index/nodes/entity/Pedido.json"));
    // A clone has no driver configured: doctor says so.
    let clone = r.clone_to("clone");
    let settings = kdd::config::Settings::discover(&clone, None).unwrap();
    let checks = kdd::cli::commands::wiring::checks(&settings);
    assert!(
        checks.iter().any(|c| c.name == "merge-driver" && !c.ok),
        "{checks:?}"
    );
    // `kdd doctor` reports it, and `kdd doctor --fix` installs driver + hooks.
    let c = r.at(clone.clone());
    let o = c.kdd(&["doctor", "--no-load", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("doctor --json");
    let warned = |v: &serde_json::Value, name: &str| {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == name && c["status"] == "warn")
    };
    assert!(warned(&v, "merge-driver"), "{v}");
    let o = c.kdd(&["doctor", "--no-load", "--fix", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("doctor --fix --json");
    for name in ["merge-driver", "gitattributes", "pre-commit-hook"] {
        assert!(!warned(&v, name), "{name} still broken after --fix: {v}");
    }
    let checks = kdd::cli::commands::wiring::checks(&settings);
    assert!(checks.iter().all(|c| c.ok), "{checks:?}");
}

#[test]
fn post_checkout_heals_a_stale_branch() {
    let r = installed();
    r.git(&["checkout", "-q", "-b", "stale"]);
    r.write(
        "specs/01-domain/entities/Usuario.md",
        &entity("Usuario", "no-verify"),
    );
    let o = crate::repo::command("git", &r.dir)
        .env("KDD_HOOK", "0")
        .args(["commit", "-q", "-a", "-m", "stale"])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(!r.kdd(&["verify"]).status.success());
    r.git(&["checkout", "-q", "main"]);
    r.git(&["checkout", "-q", "stale"]);
    let staged = r.git(&["diff", "--cached", "--name-only"]);
    assert_eq!(staged.trim(), ".kdd-index/nodes/entity/Usuario.json");
    r.git(&["commit", "-q", "-m", "heal"]);
    verify(&r, "HEAD");
}

#[test]
fn post_commit_amends_a_commit_made_without_the_pre_commit_hook() {
    let r = installed();
    r.write(
        "specs/01-domain/entities/Usuario.md",
        &entity("Usuario", "no-verify"),
    );
    let o = crate::repo::command("git", &r.dir)
        .args(["commit", "-q", "-a", "--no-verify", "-m", "skip pre-commit"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    // The message names the commit once ("the commit", not "the commit commit").
    assert!(
        err.contains("kdd: the commit now carries the healed index"),
        "{err}"
    );
    assert!(!err.contains("commit commit"), "{err}");
    assert_eq!(
        r.git(&["log", "-1", "--format=%s"]).trim(),
        "skip pre-commit"
    );
    verify(&r, "HEAD");
}

#[test]
fn kdd_merge_0_falls_back_to_text_merge_and_resolve_repairs() {
    let r = installed();
    let p = "specs/01-domain/entities/Pedido.md";
    r.git(&["checkout", "-q", "-b", "other"]);
    r.write(p, &spec("Pedido", "entity", "theirs", "b0", &["Usuario"]));
    r.git(&["commit", "-q", "-a", "-m", "theirs"]);
    r.git(&["checkout", "-q", "main"]);
    r.write(p, &spec("Pedido", "entity", "a0", "ours", &["Usuario"]));
    r.git(&["commit", "-q", "-a", "-m", "ours"]);
    let o = crate::repo::command("git", &r.dir)
        .env("KDD_MERGE", "0")
        .args(["merge", "-q", "--no-edit", "other"])
        .output()
        .unwrap();
    assert!(
        !o.status.success(),
        "the text merge of the node must conflict"
    );
    assert!(!kdd_markers(&r).is_empty());
    // Specs merged cleanly; only the index is conflicted.
    let o = r.kdd(&["resolve"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(kdd_markers(&r).is_empty());
    r.git(&["commit", "-q", "--no-edit"]);
    verify(&r, "HEAD");
}

#[test]
fn resolve_refuses_while_specs_are_conflicted() {
    let r = installed();
    let p = "specs/01-domain/entities/Pedido.md";
    r.git(&["checkout", "-q", "-b", "other"]);
    r.write(p, &spec("Pedido", "entity", "X", "b0", &["Usuario"]));
    r.git(&["commit", "-q", "-a", "-m", "x"]);
    r.git(&["checkout", "-q", "main"]);
    r.write(p, &spec("Pedido", "entity", "Y", "b0", &["Usuario"]));
    r.git(&["commit", "-q", "-a", "-m", "y"]);
    assert!(!r.git_out(&["merge", "-q", "other"]).status.success());
    let o = r.kdd(&["resolve"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains(p), "{:?}", text(&o));
    assert!(
        kdd_markers(&r).is_empty(),
        "the driver must not leave markers"
    );
}

#[test]
fn markers_committed_by_a_user_are_healed_by_pre_commit() {
    let r = installed();
    let p = "specs/01-domain/entities/Pedido.md";
    r.git(&["checkout", "-q", "-b", "other"]);
    r.write(
        p,
        &spec("Pedido", "entity", "theirs", "b0", &["Usuario", "Cliente"]),
    );
    r.git(&["commit", "-q", "-a", "-m", "theirs"]);
    r.git(&["checkout", "-q", "main"]);
    r.write(
        p,
        &spec("Pedido", "entity", "a0", "ours", &["Usuario", "Reto"]),
    );
    r.git(&["commit", "-q", "-a", "-m", "ours"]);
    // Like a clone without the driver: git's text merge writes markers into the index files.
    let o = crate::repo::command("git", &r.dir)
        .env("KDD_MERGE", "0")
        .args(["merge", "-q", "--no-edit", "other"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(!kdd_markers(&r).is_empty());
    // The user "resolves" by adding everything as is; pre-commit heals it.
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "--no-edit"]);
    assert!(kdd_markers(&r).is_empty());
    verify(&r, "HEAD");
}

fn l2(r: &Repo, program: &str, args: &[&str]) -> std::process::Output {
    let program = if program == "kdd" {
        env!("CARGO_BIN_EXE_kdd").to_string()
    } else {
        program.to_string()
    };
    crate::repo::command(program, &r.dir)
        .env("KDD_NO_EMBED", "0")
        .env("KDD_TEST_EMBEDDER", "1")
        .env("KDD_CACHE_DIR", r.tmp.path().join("cache"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn l2_hook_embeds_changed_specs_and_l1_keeps_vectors() {
    let r = Repo::new();
    assert!(r.kdd(&["install"]).status.success());
    r.write(
        "specs/01-domain/entities/Pedido.md",
        &spec("Pedido", "entity", "a0", "b0", &["Usuario"]),
    );
    r.write(
        "specs/01-domain/entities/Usuario.md",
        &entity("Usuario", "a0"),
    );
    r.git(&["add", "."]);
    let o = l2(&r, "git", &["commit", "-q", "-m", "l2"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let names = changed_in(&r, "HEAD");
    assert!(
        names.contains(&".kdd-index/embeddings/entity/Pedido.bin".to_string()),
        "{names:?}"
    );
    let m: serde_json::Value =
        serde_json::from_str(&r.git(&["show", "HEAD:.kdd-index/manifest.json"])).unwrap();
    assert_eq!(m["index_level"], "L2");
    // One spec changes at L2: its vectors (and only its artifacts) change.
    r.write(
        "specs/01-domain/entities/Pedido.md",
        &spec("Pedido", "entity", "a1 more text", "b0", &["Usuario"]),
    );
    let o = l2(&r, "git", &["commit", "-q", "-a", "-m", "edit"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let names = changed_in(&r, "HEAD");
    assert!(
        names.contains(&".kdd-index/embeddings/entity/Pedido.bin".to_string()),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains("Usuario")), "{names:?}");
    // A fresh L2 `kdd index` agrees byte for byte.
    let o = l2(&r, "kdd", &["index"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert_eq!(r.git(&["status", "--porcelain", ".kdd-index"]), "");
    // A machine without the model (L1) keeps the vector files of live nodes.
    r.write(
        "specs/01-domain/entities/Usuario.md",
        &entity("Usuario", "l1 edit"),
    );
    r.git(&["commit", "-q", "-a", "-m", "l1"]);
    assert!(r.exists(".kdd-index/embeddings/entity/Usuario.bin"));
    verify(&r, "HEAD");
}

/// `kdd --json query Q`'s results as (id, snippet) and its warning codes.
fn answer(r: &Repo, q: &str) -> (Vec<(String, String)>, Vec<String>) {
    let o = r.kdd(&["--json", "query", q, "--limit", "3"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    let res = v["results"].as_array().cloned().unwrap_or_default();
    let codes = v["warnings"].as_array().cloned().unwrap_or_default();
    (
        res.iter()
            .map(|x| (x["node_id"].to_string(), x["snippet"].to_string()))
            .collect(),
        codes.iter().map(|w| w["code"].to_string()).collect(),
    )
}

#[test]
fn the_cache_reads_the_indexed_version_not_uncommitted_edits_or_conflicts() {
    // Red team, twentieth round: the cache took a spec's text from the work tree when the
    // spec's artifacts changed; an uncommitted edit present then (or a merge's conflict
    // markers) stayed in every answer after `git stash` / `git merge --abort` put the file back.
    let r = installed();
    let f = "specs/01-domain/entities/Usuario.md";
    r.write(f, &entity("Usuario", "committedword"));
    r.git(&["commit", "-q", "-am", "edit"]);
    r.write(f, &entity("Usuario", "discardedword"));
    let quoted = |q: &str| answer(&r, q).0.iter().any(|(_, s)| s.contains(q));
    // While the edit is uncommitted: the indexed text answers, with the stale warning.
    let (hits, codes) = answer(&r, "committedword");
    assert!(
        hits.iter().any(|(id, _)| id.contains("Usuario")),
        "{hits:?}"
    );
    assert!(codes.iter().any(|c| c.contains("STALE_SPECS")), "{codes:?}");
    assert!(!quoted("discardedword"), "uncommitted text answered");
    r.git(&["stash", "-q"]);
    assert!(!quoted("discardedword"), "stashed text answered");
    let (_, codes) = answer(&r, "committedword");
    assert!(
        !codes.iter().any(|c| c.contains("STALE_SPECS")),
        "{codes:?}"
    );

    // A merge stopped on a conflict in a spec, queried, then aborted.
    r.git(&["checkout", "-q", "-b", "other"]);
    r.write(f, &entity("Usuario", "othersideword"));
    r.git(&["commit", "-q", "-am", "other side"]);
    r.git(&["checkout", "-q", "main"]);
    r.write(f, &entity("Usuario", "mainsideword"));
    r.git(&["commit", "-q", "-am", "main side"]);
    let o = r.git_out(&["merge", "-q", "other"]);
    assert!(!o.status.success(), "the merge conflicts");
    assert!(
        r.read(f).contains("<<<<<<<"),
        "conflict markers in the tree"
    );
    // The index says which side's node it holds; the answer quotes that side alone.
    let (hits, _) = answer(&r, "othersideword mainsideword");
    assert!(!hits.is_empty());
    for (_, s) in &hits {
        assert!(
            !(s.contains("othersideword") && s.contains("mainsideword")),
            "{s}"
        );
        assert!(!s.contains("<<<<") && !s.contains(">>>>"), "{s}");
    }
    r.git(&["merge", "--abort"]);
    assert!(!quoted("othersideword"), "aborted merge's text answered");
    assert!(quoted("mainsideword"));
}

#[test]
fn checking_out_a_branch_from_before_kdd_never_blocks_switching_back() {
    // Red team, twentieth round: post-checkout re-derived and staged a whole index on a branch
    // with none committed, and `git switch -` then refused to overwrite those staged files.
    let r = Repo::new();
    r.write("README.md", "demo\n");
    r.write(
        "specs/01-domain/entities/Usuario.md",
        &entity("Usuario", "a0"),
    );
    r.git(&["add", "."]);
    r.git(&["commit", "-q", "-m", "specs before kdd"]);
    r.git(&["branch", "old-feature"]);
    let o = r.kdd(&["install"]);
    assert!(o.status.success(), "{:?}", text(&o));
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "adopt kdd"]);
    r.write(
        "specs/01-domain/entities/Usuario.md",
        &entity("Usuario", "main moves on"),
    );
    r.git(&["commit", "-q", "-am", "main moves on"]);
    let o = r.git_out(&["checkout", "-q", "old-feature"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(
        text(&o).1.contains("no committed .kdd-index/"),
        "{:?}",
        text(&o)
    );
    assert_eq!(
        r.git(&["status", "--porcelain"]),
        "",
        "nothing staged or left"
    );
    let o = r.git_out(&["switch", "-q", "-"]);
    assert!(o.status.success(), "switching back: {:?}", text(&o));
    verify(&r, "HEAD");
}

#[test]
fn a_stale_record_is_read_again_once_its_spec_is_put_back() {
    // A spec committed past the hook (KDD_HOOK=0): git holds no copy of its indexed version, so
    // the cache takes the work tree's text and marks it stale. Putting the indexed version back
    // changes no artifact; the cache watches such specs and reads them again.
    let r = installed();
    let f = "specs/01-domain/entities/Usuario.md";
    r.write(f, &entity("Usuario", "oldword"));
    r.git(&["commit", "-q", "-am", "indexed"]);
    r.write(f, &entity("Usuario", "newword"));
    let o = crate::repo::command("git", &r.dir)
        .env("KDD_HOOK", "0")
        .args(["commit", "-q", "-am", "past the hook"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    let (hits, codes) = answer(&r, "newword");
    assert!(hits.iter().any(|(_, s)| s.contains("newword")), "{hits:?}");
    assert!(codes.iter().any(|c| c.contains("STALE_SPECS")), "{codes:?}");
    r.git(&["checkout", "HEAD~1", "--", f]);
    std::thread::sleep(std::time::Duration::from_millis(150));
    let (hits, codes) = answer(&r, "oldword");
    assert!(hits.iter().any(|(_, s)| s.contains("oldword")), "{hits:?}");
    assert!(
        !codes.iter().any(|c| c.contains("STALE_SPECS")),
        "{codes:?}"
    );
    assert!(answer(&r, "newword")
        .0
        .iter()
        .all(|(_, s)| !s.contains("newword")));
}

/// Run `program args` in `r` at L2 (the hashed test embedder instead of `KDD_NO_EMBED`).
fn at_l2(r: &Repo, program: &str, args: &[&str]) -> std::process::Output {
    let o = crate::repo::command(program, &r.dir)
        .args(args)
        .env_remove("KDD_NO_EMBED")
        .env("KDD_TEST_EMBEDDER", "1")
        .output()
        .expect("run");
    assert!(o.status.success(), "{program} {args:?}: {:?}", text(&o));
    o
}

fn vector_files(r: &Repo, rev: &str) -> usize {
    let out = r.git(&["ls-tree", "-r", "--name-only", rev, ".kdd-index/embeddings"]);
    out.lines().filter(|l| l.ends_with(".bin")).count()
}

#[test]
fn vectors_indexed_after_the_hook_record_are_committed_and_pulled_not_removed() {
    // Red team, twenty-first round: a repository committed at L1 through the hook, then
    // `kdd index` with a model and `git add -A && git commit`: the hook removed every vector
    // file `kdd index` had just written (its record, made at L1, named none). A teammate whose
    // record was made at L1 lost a pulled L2 index the same way, in an automatic heal commit.
    let r = installed();
    at_l2(&r, env!("CARGO_BIN_EXE_kdd"), &["index"]);
    let written = tree_count(&r.dir.join(".kdd-index/embeddings"));
    assert!(written >= 2, "{written}");
    r.git(&["add", "-A"]);
    at_l2(&r, "git", &["commit", "-q", "-m", "index at L2"]);
    assert_eq!(vector_files(&r, "HEAD"), written);
    at_l2(&r, env!("CARGO_BIN_EXE_kdd"), &["verify", "--ref", "HEAD"]);
    // A teammate at L1 (no model) pulls it.
    let a = installed();
    let b = a.clone_of(&a.dir, "b");
    assert!(b.kdd(&["install"]).status.success());
    at_l2(&b, env!("CARGO_BIN_EXE_kdd"), &["index"]);
    b.git(&["add", "-A"]);
    at_l2(&b, "git", &["commit", "-q", "-m", "B: index at L2"]);
    let committed = vector_files(&b, "HEAD");
    assert!(committed >= 2, "{committed}");
    a.git(&["pull", "-q", "--no-rebase", b.dir.to_str().unwrap(), "main"]);
    assert_eq!(vector_files(&a, "HEAD"), committed);
    assert_eq!(a.git(&["status", "--porcelain"]), "");
    at_l2(&a, env!("CARGO_BIN_EXE_kdd"), &["verify", "--ref", "HEAD"]);
}

fn tree_count(dir: &std::path::Path) -> usize {
    crate::util::tree(dir).len()
}

#[test]
fn a_spec_that_breaks_keeps_its_indexed_node_in_the_hook_and_kdd_index_alike() {
    // Red team, twenty-first round: the hook kept a broken spec's previous artifacts ("nothing
    // indexed is lost") while `kdd index` deleted them, so the index flipped with whichever ran
    // last and the next commit lost the node.
    let r = installed();
    let p = "specs/01-domain/entities/Pedido.md";
    r.write(p, &r.read(p).replacen("# Pedido", "# Pedido\u{0}", 1));
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "broken"]);
    assert!(r.exists(".kdd-index/nodes/entity/Pedido.json"));
    let o = r.kdd(&["index"]);
    assert!(!o.status.success(), "the error is reported: {:?}", text(&o));
    assert!(text(&o).1.contains("Pedido.md"), "{:?}", text(&o));
    assert!(r.exists(".kdd-index/nodes/entity/Pedido.json"));
    assert_eq!(r.git(&["status", "--porcelain", "--", ".kdd-index"]), "");
    // Fixed, it is indexed again.
    r.write(p, &r.read(p).replacen('\u{0}', "", 1));
    assert!(r.kdd(&["index"]).status.success());
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "fixed"]);
    verify(&r, "HEAD");
}
