//! Index sync (UC-007 / CMD-005, REQ-003) on real repositories with the real binaries: the git
//! transport into a bare team repository that never receives a spec (every object in it is
//! checked), pull and merge into another repository whose queries then answer with the team's
//! nodes, the API transport against a running `kdd serve --accept-push`, every error code, and
//! the local index left byte-for-byte untouched on every failure.
//!
//! Fixture `fixtures/sync`: every spec body holds the sentinel `PRIVATEPROSE`, which must never
//! reach the team side.

use crate::repo::{command, spawn_serve};
use crate::util::{copy_dir, fixture, tree};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

const SENTINEL: &str = "PRIVATEPROSE";
const TOKEN: &str = "sync-test-token-0123456789abcdef";

fn git(dir: &Path, args: &[&str]) -> String {
    let o = command("git", dir).args(args).output().expect("git");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn kdd_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = command(env!("CARGO_BIN_EXE_kdd"), dir);
    c.args(args)
        .env_remove("KDD_TOKEN")
        .env("KDD_EMBED_WARM", "0");
    for (k, v) in env {
        if v.is_empty() {
            c.env_remove(k);
        } else {
            c.env(k, v);
        }
    }
    c.output().expect("run kdd")
}

fn kdd(dir: &Path, args: &[&str]) -> Output {
    kdd_env(dir, args, &[])
}

fn show(o: &Output) -> String {
    format!(
        "status {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `--json` success output.
fn ok_json(o: &Output) -> Value {
    assert!(o.status.success(), "{}", show(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(o)))
}

/// The CMD-005 code of a failed `--json` sync (exit 1).
fn err_code(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(1), "{}", show(o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(o)));
    v["error"]["code"].as_str().unwrap_or("").to_string()
}

/// A repository `<tmp>/<name>` holding `fixtures/sync/<fixture>/specs` (or another fixture's
/// specs), indexed with `env` and committed.
fn indexed(tmp: &Path, name: &str, specs: &Path, env: &[(&str, &str)]) -> PathBuf {
    let dir = tmp.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    copy_dir(specs, &dir.join("specs"));
    let o = kdd_env(&dir, &["index"], env);
    assert!(o.status.success(), "{}", show(&o));
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-qm", "specs"]);
    dir
}

fn team_specs(which: &str) -> PathBuf {
    fixture(&format!("sync/{which}/specs"))
}

fn bare(tmp: &Path, name: &str) -> PathBuf {
    let dir = tmp.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "--bare", "-b", "main"]);
    dir
}

fn add_remote(dir: &Path, name: &str, url: &Path) {
    git(dir, &["remote", "add", name, url.to_str().unwrap()]);
}

fn index_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    tree(&dir.join(".kdd-index"))
}

/// Every object in a repository (reachable or not): (type, bytes).
fn all_objects(git_dir: &Path) -> Vec<(String, Vec<u8>)> {
    let list = git(
        git_dir,
        &[
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objectname) %(objecttype)",
        ],
    );
    list.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(id, t)| {
            let o = command("git", git_dir)
                .args(["cat-file", t, id])
                .output()
                .expect("cat-file");
            (t.to_string(), o.stdout)
        })
        .collect()
}

/// No spec byte reached `git_dir`: no blob equals a spec file of `specs`, and no object holds
/// the sentinel. Returns the number of blobs checked.
fn assert_no_spec_blob(git_dir: &Path, specs: &[&Path]) -> usize {
    let spec_bytes: Vec<Vec<u8>> = specs.iter().flat_map(|s| tree(s).into_values()).collect();
    let objects = all_objects(git_dir);
    let mut blobs = 0;
    for (t, bytes) in &objects {
        assert!(
            !String::from_utf8_lossy(bytes).contains(SENTINEL),
            "a {t} in {} holds spec prose:\n{}",
            git_dir.display(),
            String::from_utf8_lossy(bytes)
        );
        if t == "blob" {
            blobs += 1;
            assert!(
                !spec_bytes.contains(bytes),
                "a spec file reached the team repo"
            );
        }
    }
    blobs
}

/// Node files hold exactly identity fields (no section, no field text).
fn assert_identity_only(node_json: &[u8]) {
    let v: Value = serde_json::from_slice(node_json).expect("node json");
    let allowed = [
        "id",
        "kind",
        "source_file",
        "source_hash",
        "title",
        "status",
        "aliases",
        "domain",
        "layer",
    ];
    for k in v.as_object().expect("object").keys() {
        assert!(allowed.contains(&k.as_str()), "unexpected key `{k}` in {v}");
    }
}

#[test]
fn git_push_sends_only_derived_artifacts_to_a_team_repo_without_specs() {
    let tmp = tempfile::tempdir().unwrap();
    let team = bare(tmp.path(), "team.git");
    let a = indexed(tmp.path(), "a", &team_specs("team-a"), &[]);
    add_remote(&a, "team", &team);
    let before = index_files(&a);

    let r = ok_json(&kdd(&a, &["--json", "sync", "push", "--remote", "team"]));
    assert_eq!(r["remote_ref"], "refs/kdd/index/main");
    assert_eq!(r["nodes"], 3);
    assert_eq!(
        index_files(&a),
        before,
        "push never changes the local index"
    );

    // The team repo has exactly one ref, and its tree holds only `.kdd-index/`: the same bytes
    // as the local index.
    let refs = git(&team, &["for-each-ref", "--format=%(refname)"]);
    assert_eq!(refs.trim(), "refs/kdd/index/main");
    let paths = git(
        &team,
        &["ls-tree", "-r", "--name-only", "refs/kdd/index/main"],
    );
    let mut pushed = BTreeMap::new();
    for p in paths.lines() {
        let rel = p
            .strip_prefix(".kdd-index/")
            .unwrap_or_else(|| panic!("{p} outside the index"));
        let bytes = command("git", &team)
            .args(["show", &format!("refs/kdd/index/main:{p}")])
            .output()
            .unwrap()
            .stdout;
        if rel.starts_with("nodes/") {
            assert_identity_only(&bytes);
        }
        pushed.insert(rel.to_string(), bytes);
    }
    assert_eq!(pushed, before);
    // Every object reachable from the ref, and every other object in the repo: no spec blob.
    let reachable = git(&team, &["rev-list", "--objects", "refs/kdd/index/main"]);
    let blobs = assert_no_spec_blob(&team, &[&a.join("specs")]);
    assert_eq!(blobs, before.len(), "one blob per artifact, nothing else");
    assert_eq!(reachable.lines().count(), all_objects(&team).len());

    // A second push with nothing new is up to date.
    let r = ok_json(&kdd(&a, &["--json", "sync", "push", "--remote", "team"]));
    assert_eq!(r["up_to_date"], true);
}

#[test]
fn git_pull_merges_the_team_index_and_queries_answer_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let team = bare(tmp.path(), "team.git");
    let a = indexed(tmp.path(), "a", &team_specs("team-a"), &[]);
    let b = indexed(tmp.path(), "b", &team_specs("team-b"), &[]);
    add_remote(&a, "team", &team);
    add_remote(&b, "team", &team);
    ok_json(&kdd(&a, &["--json", "sync", "push", "--remote", "team"]));

    // b pulls: its own node plus a's three, merged per BR-MERGE-001.
    let r = ok_json(&kdd(&b, &["--json", "sync", "pull", "--remote", "team"]));
    assert_eq!(r["nodes"], 4, "{r}");
    let files = index_files(&b);
    assert!(files.contains_key("nodes/entity/Albaran.json"));
    assert!(files.contains_key("nodes/entity/Factura.json"));
    // Graph, impact, coverage and lexical answers in b now include a's specs (b has no spec
    // text for them: identity, links and titles come from the artifacts).
    let imp = ok_json(&kdd(&b, &["--json", "impact", "Entity:Factura"]));
    let affected: Vec<&str> = imp["directly_affected"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["id"].as_str())
        .collect();
    assert!(affected.contains(&"BR:BR-FACTURA-001"), "{imp}");
    assert!(affected.contains(&"Entity:Albaran"), "{imp}");
    // (coverage exits 1 when something is missing; its answer is what counts here)
    let o = kdd(&b, &["--json", "coverage", "UC-001"]);
    let cov: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(&o)));
    assert_eq!(cov["analyzed_node"]["id"], "UC:UC-001", "{cov}");
    assert!(cov.to_string().contains("BR:BR-FACTURA-001"), "{cov}");
    let g = ok_json(&kdd(&b, &["--json", "graph", "Entity:Factura"]));
    assert!(g.to_string().contains("UC:UC-001"), "{g}");
    let q = ok_json(&kdd(&b, &["--json", "query", "Invoice factura"]));
    assert!(q.to_string().contains("Entity:Factura"), "{q}");

    // b pushes the merge; the ref fast-forwards and a pulls b's node.
    let r = ok_json(&kdd(&b, &["--json", "sync", "push", "--remote", "team"]));
    assert_eq!(r["nodes"], 4, "{r}");
    let log = git(&team, &["rev-list", "refs/kdd/index/main"]);
    assert!(log.lines().count() >= 2, "history kept: {log}");
    let r = ok_json(&kdd(&a, &["--json", "sync", "pull", "--remote", "team"]));
    assert_eq!(r["nodes"], 4, "{r}");
    assert!(index_files(&a).contains_key("nodes/entity/Albaran.json"));
    assert_no_spec_blob(&team, &[&a.join("specs"), &b.join("specs")]);
}

#[test]
fn no_text_pushes_ids_instead_of_titles_and_aliases() {
    let tmp = tempfile::tempdir().unwrap();
    let team = bare(tmp.path(), "team.git");
    let a = indexed(tmp.path(), "a", &team_specs("team-a"), &[]);
    add_remote(&a, "team", &team);
    let r = ok_json(&kdd(
        &a,
        &["--json", "sync", "push", "--remote", "team", "--no-text"],
    ));
    assert_eq!(r["text"], false);
    let node = |rel: &str| -> Value {
        let o = command("git", &team)
            .args(["show", &format!("refs/kdd/index/main:.kdd-index/{rel}")])
            .output()
            .unwrap();
        serde_json::from_slice(&o.stdout).unwrap()
    };
    assert_eq!(
        node("nodes/business-rule/BR-FACTURA-001.json")["title"],
        "BR-FACTURA-001"
    );
    assert!(node("nodes/entity/Factura.json").get("aliases").is_none());
    for (_, bytes) in all_objects(&team) {
        let s = String::from_utf8_lossy(&bytes);
        assert!(!s.contains("Invoice") && !s.contains("Numeración"), "{s}");
    }
    // The same through git config.
    let team2 = bare(tmp.path(), "team2.git");
    add_remote(&a, "team2", &team2);
    git(&a, &["config", "kdd.syncText", "false"]);
    let r = ok_json(&kdd(&a, &["--json", "sync", "push", "--remote", "team2"]));
    assert_eq!(r["text"], false);
}

#[test]
fn git_errors_have_cmd005_codes_and_leave_the_local_index_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let team = bare(tmp.path(), "team.git");
    let a = indexed(tmp.path(), "a", &team_specs("team-a"), &[]);
    add_remote(&a, "team", &team);
    let before = index_files(&a);
    let run = |args: &[&str]| {
        let mut all = vec!["--json", "sync"];
        all.extend_from_slice(args);
        let code = err_code(&kdd(&a, &all));
        assert_eq!(index_files(&a), before, "{args:?} changed the local index");
        code
    };
    assert_eq!(run(&["pull", "--remote", "team"]), "NO_REMOTE_INDEX");
    assert_eq!(run(&["push", "--remote", "nope"]), "REMOTE_UNREACHABLE");
    assert_eq!(run(&["pull", "--remote", "nope"]), "REMOTE_UNREACHABLE");
    let gone = tmp.path().join("gone.git");
    let gone = gone.to_str().unwrap();
    assert_eq!(run(&["push", "--remote", gone]), "REMOTE_UNREACHABLE");
    assert_eq!(run(&["pull", "--remote", gone]), "REMOTE_UNREACHABLE");

    // A server-side hook that refuses the update.
    let locked = bare(tmp.path(), "locked.git");
    let hook = locked.join("hooks/pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\necho 'index pushes are closed' >&2\nexit 1\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    add_remote(&a, "locked", &locked);
    assert_eq!(run(&["push", "--remote", "locked"]), "PUSH_REJECTED");

    // An incompatible index (multi-domain against single-domain) is refused both ways.
    ok_json(&kdd(&a, &["--json", "sync", "push", "--remote", "team"]));
    let m = indexed(tmp.path(), "m", &fixture("specs-multi/specs"), &[]);
    add_remote(&m, "team", &team);
    let m_before = index_files(&m);
    let o = kdd(&m, &["--json", "sync", "push", "--remote", "team"]);
    assert_eq!(err_code(&o), "PUSH_REJECTED");
    let o = kdd(&m, &["--json", "sync", "pull", "--remote", "team"]);
    assert_eq!(err_code(&o), "INCOMPATIBLE_INDEX");
    assert_eq!(index_files(&m), m_before);

    // No local index.
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    git(&empty, &["init", "-q", "-b", "main"]);
    add_remote(&empty, "team", &team);
    let o = kdd(&empty, &["--json", "sync", "push", "--remote", "team"]);
    assert_eq!(err_code(&o), "NO_LOCAL_INDEX");
    // …but a pull into it installs the team's index.
    ok_json(&kdd(
        &empty,
        &["--json", "sync", "pull", "--remote", "team"],
    ));
    assert_eq!(index_files(&empty), before);
}

/// A commit on the team's index ref that adds `files` (path → bytes) to its tree, made with git
/// plumbing as a hostile server could (red team, nineteenth round).
fn craft_team_ref(team: &Path, files: &[(&str, &[u8])]) {
    use std::io::Write;
    let r = "refs/kdd/index/main";
    let tip = git(team, &["rev-parse", r]).trim().to_string();
    let idx = team.join("craft.index");
    let with_index = |args: &[&str], input: Option<&[u8]>| -> String {
        let mut c = command("git", team);
        c.args(args).env("GIT_INDEX_FILE", &idx);
        c.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.unwrap_or_default())
            .unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "git {args:?}");
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    with_index(&["read-tree", &tip], None);
    for (path, bytes) in files {
        let blob = with_index(&["hash-object", "-w", "--stdin"], Some(bytes));
        let info = format!("100644,{blob},{path}");
        with_index(&["update-index", "--add", "--cacheinfo", &info], None);
    }
    let tree = with_index(&["write-tree"], None);
    let commit = with_index(&["commit-tree", &tree, "-p", &tip, "-m", "crafted"], None);
    git(team, &["update-ref", r, &commit]);
    std::fs::remove_file(&idx).unwrap();
}

/// A hostile team ref never costs more than an artifact's bound nor replaces the local index
/// with one queries refuse, and a remote named like an option is never handed to git as one.
#[test]
fn git_pull_of_a_crafted_team_index_reads_only_bounded_artifacts_and_installs_nothing_bad() {
    let tmp = tempfile::tempdir().unwrap();
    let team = bare(tmp.path(), "team.git");
    let a = indexed(tmp.path(), "a", &team_specs("team-a"), &[]);
    add_remote(&a, "team", &team);
    ok_json(&kdd(&a, &["--json", "sync", "push", "--remote", "team"]));
    let before = index_files(&a);
    let pull = || kdd(&a, &["--json", "sync", "pull", "--remote", "team"]);
    // A blob that is no artifact is never read (a 1 GiB one was inflated whole).
    craft_team_ref(&team, &[(".kdd-index/junk/huge.dat", &[0u8; 4096])]);
    ok_json(&pull());
    assert_eq!(index_files(&a), before);
    // An artifact over the bound is refused before it is inflated.
    let big = vec![b' '; kdd::artifact::MAX_ARTIFACT_BYTES + 1];
    craft_team_ref(&team, &[(".kdd-index/nodes/entity/Huge.json", &big)]);
    let o = pull();
    assert_eq!(err_code(&o), "TRANSPORT_ERROR");
    assert!(show(&o).contains("larger than 64 MiB"), "{}", show(&o));
    assert_eq!(index_files(&a), before);
    // A manifest whose root leaves the repository is refused; queries still answer.
    let team2 = bare(tmp.path(), "team2.git");
    add_remote(&a, "team2", &team2);
    ok_json(&kdd(&a, &["--json", "sync", "push", "--remote", "team2"]));
    let m = String::from_utf8(before["manifest.json"].clone()).unwrap();
    let bad = m.replace("\"specs_root\": \"specs\"", "\"specs_root\": \"../../etc\"");
    assert_ne!(m, bad);
    craft_team_ref(&team2, &[(".kdd-index/manifest.json", bad.as_bytes())]);
    let o = kdd(&a, &["--json", "sync", "pull", "--remote", "team2"]);
    assert_eq!(err_code(&o), "TRANSPORT_ERROR", "{}", show(&o));
    assert!(show(&o).contains("is not a folder inside the repository"));
    assert_eq!(index_files(&a), before);
    let fresh = tmp.path().join("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    git(&fresh, &["init", "-q", "-b", "main"]);
    add_remote(&fresh, "team2", &team2);
    let o = kdd(&fresh, &["--json", "sync", "pull", "--remote", "team2"]);
    assert_eq!(err_code(&o), "TRANSPORT_ERROR", "{}", show(&o));
    assert!(!fresh.join(".kdd-index").exists());
    // `--upload-pack=…` as a remote ran a command through git fetch.
    let o = kdd(
        &a,
        &[
            "--json",
            "sync",
            "pull",
            "--remote=--upload-pack=touch pwned;",
        ],
    );
    assert_eq!(err_code(&o), "REMOTE_UNREACHABLE");
    assert!(!a.join("pwned").exists() && !tmp.path().join("pwned").exists());
}

/// A loopback HTTP server that answers every request (at most `n`, for at most 60 s) with 401
/// and a Basic challenge, as a git host does for a private repository.
fn http_401_server(n: usize) -> String {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        for s in l.incoming().take(n) {
            let Ok(mut s) = s else { continue };
            let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"team\"\r\n\
                  Content-Length: 0\r\nConnection: close\r\n\r\n",
            );
            if std::time::Instant::now() > deadline {
                break;
            }
        }
    });
    addr
}

#[test]
fn git_remote_that_wants_credentials_is_auth_failed_without_a_prompt() {
    let tmp = tempfile::tempdir().unwrap();
    let a = indexed(tmp.path(), "a", &team_specs("team-a"), &[]);
    let before = index_files(&a);
    let url = format!("http://{}/team.git", http_401_server(8));
    git(&a, &["remote", "add", "private", &url]);
    for dir in ["push", "pull"] {
        let o = kdd(&a, &["--json", "sync", dir, "--remote", "private"]);
        assert_eq!(err_code(&o), "AUTH_FAILED", "{dir}: {}", show(&o));
        assert_eq!(index_files(&a), before);
    }
}

// ---- API transport ----

fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, Value) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).unwrap_or("0").parse().unwrap_or(0);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

struct Server {
    child: std::process::Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &Path, token: Option<&str>, extra: &[&str]) -> Server {
    serve_env(dir, token, extra, &[])
}

fn serve_env(dir: &Path, token: Option<&str>, extra: &[&str], env: &[(&str, &str)]) -> Server {
    let mut c = command(env!("CARGO_BIN_EXE_kdd"), dir);
    c.envs(env.iter().copied());
    c.args([
        "serve",
        "--accept-push",
        "--bind",
        "127.0.0.1:0",
        "--check-interval-ms",
        "0",
    ])
    .args(extra)
    .env_remove("KDD_NO_EMBED")
    .env_remove("KDD_TOKEN")
    .env("KDD_EMBED_WARM", "0")
    .env("KDD_TEST_EMBEDDER", "1");
    if let Some(t) = token {
        c.env("KDD_TOKEN", t);
    }
    let (child, addr) = spawn_serve(c).unwrap_or_else(|log| panic!("kdd serve: {log}"));
    Server { child, addr }
}

const L2: &[(&str, &str)] = &[("KDD_TEST_EMBEDDER", "1"), ("KDD_NO_EMBED", "")];

#[test]
fn api_push_and_pull_through_kdd_serve_merge_and_answer_without_spec_text() {
    let tmp = tempfile::tempdir().unwrap();
    let server_repo = bare(tmp.path(), "server.git");
    let srv = serve(&server_repo, Some(TOKEN), &[]);
    let url = format!("http://{}", srv.addr);
    let with_token = [("KDD_TOKEN", TOKEN)];
    let a = indexed(tmp.path(), "a", &team_specs("team-a"), L2);
    let b = indexed(tmp.path(), "b", &team_specs("team-b"), L2);
    let before = index_files(&a);
    assert!(
        String::from_utf8_lossy(&before["manifest.json"]).contains("\"L2\""),
        "the fixture is indexed with vectors"
    );

    // Errors first: nothing pushed yet, no or wrong token, nobody listening.
    let api = ["--json", "sync", "pull", "--api", url.as_str()];
    assert_eq!(err_code(&kdd_env(&a, &api, &with_token)), "NO_REMOTE_INDEX");
    let push = ["--json", "sync", "push", "--api", url.as_str()];
    assert_eq!(err_code(&kdd(&a, &push)), "AUTH_FAILED");
    let wrong = [("KDD_TOKEN", "wrong-token-wrong-token-wrong-token")];
    assert_eq!(err_code(&kdd_env(&a, &push, &wrong)), "AUTH_FAILED");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let o = kdd_env(&a, &["--json", "sync", "push", "--api", &dead], &with_token);
    assert_eq!(err_code(&o), "REMOTE_UNREACHABLE");
    assert_eq!(index_files(&a), before);

    // Two repositories push; the server merges them and answers from artifacts only.
    let r = ok_json(&kdd_env(&a, &push, &with_token));
    assert_eq!(r["nodes"], 3, "{r}");
    ok_json(&kdd_env(&b, &push, &with_token));
    let (st, imp) = http(
        &srv.addr,
        "GET",
        "/v1/retrieve/impact?node=Entity:Factura",
        "",
    );
    assert_eq!(st, 200, "{imp}");
    let s = imp.to_string();
    assert!(
        s.contains("BR:BR-FACTURA-001") && s.contains("Entity:Albaran"),
        "{s}"
    );
    let (st, cov) = http(&srv.addr, "GET", "/v1/retrieve/coverage?node=UC-001", "");
    assert_eq!(st, 200, "{cov}");
    let (st, g) = http(
        &srv.addr,
        "GET",
        "/v1/retrieve/graph?node=Entity:Factura",
        "",
    );
    assert_eq!(st, 200, "{g}");
    assert!(g.to_string().contains("UC:UC-001"), "{g}");
    let body = r#"{"query": "emitir factura al cobrar", "strategy": "semantic"}"#;
    let (st, sem) = http(&srv.addr, "POST", "/v1/retrieve/context", body);
    assert_eq!(st, 200, "{sem}");
    assert!(
        sem.to_string().contains("UC:UC-001"),
        "semantic answer: {sem}"
    );
    // Lexical search sees the pushed titles and aliases (never the prose).
    let body = r#"{"query_text": "Invoice", "mode": "lexical"}"#;
    let (st, lex) = http(&srv.addr, "POST", "/v1/retrieve/search", body);
    assert_eq!(st, 200, "{lex}");
    assert!(
        lex.to_string().contains("Entity:Factura"),
        "lexical answer: {lex}"
    );
    let body = r#"{"query_text": "margen interno", "mode": "lexical"}"#;
    let (_, prose) = http(&srv.addr, "POST", "/v1/retrieve/search", body);
    assert!(
        !prose.to_string().contains("Entity:Factura"),
        "prose is not on the server: {prose}"
    );
    // Nothing the server stored holds spec prose.
    for (p, bytes) in tree(&server_repo) {
        assert!(
            !String::from_utf8_lossy(&bytes).contains(SENTINEL),
            "{p} on the server holds spec prose"
        );
    }

    // An incompatible index (another structure, another embedding model) is refused and
    // changes nothing on the server.
    let served = || {
        tree(&server_repo.join("kdd-cache"))
            .into_iter()
            .filter(|(p, _)| p.contains("/sync/merged/") || p.contains("/sync/sources/"))
    };
    let served_before: Vec<_> = served().collect();
    assert!(
        !served_before.is_empty(),
        "the store is under the cache dir"
    );
    let m = indexed(tmp.path(), "m", &fixture("specs-multi/specs"), &[]);
    let o = kdd_env(&m, &push, &with_token);
    assert_eq!(err_code(&o), "PUSH_REJECTED");
    let other = indexed(tmp.path(), "other", &team_specs("team-b"), L2);
    let mp = other.join(".kdd-index/manifest.json");
    let text = std::fs::read_to_string(&mp).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let model = v["embedding"]["model"]
        .as_str()
        .expect("L2 manifest")
        .to_string();
    std::fs::write(&mp, text.replace(&model, "another-model")).unwrap();
    let o = kdd_env(&other, &push, &with_token);
    assert_eq!(err_code(&o), "PUSH_REJECTED");
    assert!(
        show(&o).contains("Incompatible embedding models"),
        "{}",
        show(&o)
    );
    assert_eq!(served().collect::<Vec<_>>(), served_before);

    // Pull into a repository with no index: the merged index of both.
    let c = tmp.path().join("c");
    std::fs::create_dir_all(&c).unwrap();
    git(&c, &["init", "-q", "-b", "main"]);
    let r = ok_json(&kdd_env(&c, &api, &with_token));
    assert_eq!(r["nodes"], 4, "{r}");
    let files = index_files(&c);
    assert!(files.contains_key("nodes/entity/Albaran.json"));
    assert!(files.contains_key("embeddings/use-case/UC-001.bin"));
    // Pull into a: a's index gains b's node.
    ok_json(&kdd_env(&a, &api, &with_token));
    assert!(index_files(&a).contains_key("nodes/entity/Albaran.json"));

    // A server started without a token takes no push, even on loopback; a push over the
    // size cap is refused.
    let open = bare(tmp.path(), "open.git");
    let srv2 = serve(&open, None, &[]);
    let push2 = format!("http://{}", srv2.addr);
    let o = kdd_env(
        &b,
        &["--json", "sync", "push", "--api", &push2],
        &with_token,
    );
    assert_eq!(err_code(&o), "AUTH_FAILED");
    drop(srv2);
    let small = bare(tmp.path(), "small.git");
    let srv3 = serve(&small, Some(TOKEN), &["--max-push-bytes", "1024"]);
    let push3 = format!("http://{}", srv3.addr);
    let o = kdd_env(
        &a,
        &["--json", "sync", "push", "--api", &push3],
        &with_token,
    );
    assert_eq!(err_code(&o), "PUSH_REJECTED", "{}", show(&o));
}

#[test]
fn api_push_of_a_file_inside_another_never_blocks_the_pushes_after_it() {
    // A token holder pushes an index whose node lies inside another's node file
    // (`nodes/entity/Factura.json/x.json` beside `nodes/entity/Factura.json`): it is refused
    // before anything is stored, and a bad push stored by an older kdd is skipped.
    let tmp = tempfile::tempdir().unwrap();
    let server_repo = bare(tmp.path(), "server.git");
    let srv = serve(&server_repo, Some(TOKEN), &[]);
    let url = format!("http://{}", srv.addr);
    let with_token = [("KDD_TOKEN", TOKEN)];
    let push = ["--json", "sync", "push", "--api", url.as_str()];
    let a = indexed(tmp.path(), "a", &team_specs("team-a"), L2);
    let b = indexed(tmp.path(), "b", &team_specs("team-b"), L2);
    ok_json(&kdd_env(&a, &push, &with_token));
    let x = indexed(tmp.path(), "x", &team_specs("team-a"), L2);
    let idx = x.join(".kdd-index");
    let node = std::fs::read(idx.join("nodes/entity/Factura.json")).unwrap();
    for top in ["nodes", "edges", "embeddings"] {
        std::fs::remove_dir_all(idx.join(top)).unwrap();
    }
    let inner = idx.join("nodes/entity/Factura.json/x.json");
    std::fs::create_dir_all(inner.parent().unwrap()).unwrap();
    std::fs::write(&inner, node).unwrap();
    let stored = || {
        tree(&server_repo.join("kdd-cache"))
            .into_iter()
            .filter(|(p, _)| p.contains("/sync/"))
            .collect::<Vec<_>>()
    };
    let before = stored();
    let o = kdd_env(&x, &push, &with_token);
    assert_eq!(err_code(&o), "PUSH_REJECTED", "{}", show(&o));
    assert!(show(&o).contains("Factura.json/x.json"), "{}", show(&o));
    assert_eq!(stored(), before, "a refused push changed the store");
    // A bundle holding both paths, left in the store by an older kdd: skipped.
    let sources = before
        .iter()
        .find(|(p, _)| p.ends_with(".bundle"))
        .map(|(p, _)| server_repo.join("kdd-cache").join(p))
        .expect("a's push is stored")
        .parent()
        .unwrap()
        .to_path_buf();
    let mut bad = index_files(&a);
    bad.insert("nodes/entity/Factura.json/x.json".into(), b"{}".to_vec());
    let mut body = b"KDDSYNC1".to_vec();
    body.extend_from_slice(&(bad.len() as u32).to_le_bytes());
    for (p, d) in &bad {
        body.extend_from_slice(&(p.len() as u32).to_le_bytes());
        body.extend_from_slice(p.as_bytes());
        body.extend_from_slice(&(d.len() as u32).to_le_bytes());
        body.extend_from_slice(d);
    }
    std::fs::write(sources.join("old.bundle"), body).unwrap();
    ok_json(&kdd_env(&b, &push, &with_token));
    drop(srv);
    let srv = serve(&server_repo, Some(TOKEN), &[]);
    let url = format!("http://{}", srv.addr);
    ok_json(&kdd_env(
        &a,
        &["--json", "sync", "push", "--api", &url],
        &with_token,
    ));
    // The merged index is a's and b's.
    let r = pull_into_new_repo(tmp.path(), &url);
    assert_eq!(r["nodes"], 4, "{r}");
}

/// `kdd sync pull --api URL` into a new, empty repository `c` under `tmp`: its JSON answer.
fn pull_into_new_repo(tmp: &Path, url: &str) -> Value {
    let c = tmp.join("c");
    std::fs::create_dir_all(&c).unwrap();
    git(&c, &["init", "-q", "-b", "main"]);
    let pull = ["--json", "sync", "pull", "--api", url];
    ok_json(&kdd_env(&c, &pull, &[("KDD_TOKEN", TOKEN)]))
}

#[test]
fn api_push_whose_write_outlasts_the_deadline_is_answered_with_its_result() {
    // Red team, nineteenth round: a push whose write had begun when the request deadline fired
    // was answered 408 and applied all the same. Past its point of no return a push is now
    // answered with what happened (the test delay holds the write past a 0.3 s deadline).
    let tmp = tempfile::tempdir().unwrap();
    let server_repo = bare(tmp.path(), "server.git");
    let fast = ["--timeout-ms", "100", "--header-timeout-ms", "100"];
    let slow = [("KDD_SERVE_TEST_DELAY_MS", "1500")];
    let srv = serve_env(&server_repo, Some(TOKEN), &fast, &slow);
    let url = format!("http://{}", srv.addr);
    let with_token = [("KDD_TOKEN", TOKEN)];
    let a = indexed(tmp.path(), "a", &team_specs("team-a"), L2);
    let o = kdd_env(&a, &["--json", "sync", "push", "--api", &url], &with_token);
    let r = ok_json(&o);
    assert_eq!(r["nodes"], 3, "{r}");
    let r = pull_into_new_repo(tmp.path(), &url);
    assert_eq!(r["nodes"], 3, "the push answered 200 is served: {r}");
}
