//! The daily workflow of issue 12, through real git, the real hooks and the real binaries: a
//! `kdd serve` running while commits land, idle past the warm service's idle time, and 8
//! concurrent CLI clients against the one per-user warm service. Each test runs with the
//! deterministic embedder behind the service (`KDD_TEST_EMBEDDER=1`, `KDD_EMBED_WARM=1`) and,
//! when it is installed, with the real model. Every run gets its own `XDG_RUNTIME_DIR`, so its
//! service is its own.

use crate::repo::{command, Repo};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Idle lifetime given to the warm service in these tests (seconds).
pub const IDLE_S: u64 = 3;

/// The environment of one test run: its own runtime dir (so its own service).
pub struct Env {
    pub run: tempfile::TempDir,
    pub real: bool,
    /// `KDD_EMBED_IDLE_S` for this run.
    pub idle_s: u64,
}

impl Env {
    pub fn new(real: bool) -> Env {
        Env {
            run: tempfile::tempdir().expect("tempdir"),
            real,
            idle_s: IDLE_S,
        }
    }

    /// The service directory (`$XDG_RUNTIME_DIR/kdd`).
    pub fn service_dir(&self) -> PathBuf {
        self.run.path().join("kdd")
    }

    /// Socket files of running (or stale) services.
    pub fn sockets(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.service_dir())
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "sock"))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `program` in `dir` with this run's embedding environment.
    pub fn cmd(&self, program: impl AsRef<std::ffi::OsStr>, dir: &Path) -> Command {
        let mut c = command(program, dir);
        c.env_remove("KDD_NO_EMBED")
            .env_remove("KDD_EMBED_IDLE")
            .env("XDG_RUNTIME_DIR", self.run.path())
            .env("KDD_EMBED_IDLE_S", self.idle_s.to_string())
            .env("KDD_EMBED_WARM", "1");
        if self.real {
            c.env_remove("KDD_TEST_EMBEDDER");
        } else {
            c.env("KDD_TEST_EMBEDDER", "1");
        }
        c
    }

    pub fn kdd(&self, dir: &Path, args: &[&str]) -> Output {
        self.cmd(env!("CARGO_BIN_EXE_kdd"), dir)
            .args(args)
            .output()
            .expect("kdd runs")
    }

    pub fn git(&self, dir: &Path, args: &[&str]) -> Output {
        self.cmd("git", dir).args(args).output().expect("git runs")
    }
}

pub fn ok(o: &Output) -> String {
    let t = crate::util::text(o);
    assert!(o.status.success(), "{t}");
    t
}

/// A repository with kdd installed and a first L2 commit made by the hook.
pub fn committed_repo(env: &Env) -> Repo {
    let r = Repo::new();
    super::write_entity(&r.dir, "");
    ok(&env.kdd(&r.dir, &["install"]));
    ok(&env.git(&r.dir, &["add", "-A"]));
    ok(&env.git(&r.dir, &["commit", "-q", "-m", "specs"]));
    assert_eq!(super::manifest(&r.dir)["index_level"], "L2");
    r
}

/// A running `kdd serve` on an ephemeral loopback port.
pub struct Serve {
    child: Child,
    pub port: u16,
}

impl Serve {
    pub fn start(env: &Env, dir: &Path) -> Serve {
        let mut child = env
            .cmd(env!("CARGO_BIN_EXE_kdd"), dir)
            // The first semantic query loads the model in-process: seconds in a debug build on
            // a loaded machine, so a generous request deadline.
            .args(["serve", "--bind", "127.0.0.1:0", "--timeout-ms", "120000"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env_remove("KDD_TOKEN")
            .spawn()
            .expect("spawn kdd serve");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(a) = line.split("listening on http://").nth(1) {
                    if let Some(t) = tx.take() {
                        let _ = t.send(a.trim().to_string());
                    }
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("kdd serve started");
        Serve {
            child,
            port: addr.rsplit(':').next().unwrap().parse().unwrap(),
        }
    }

    /// `POST /v1/retrieve/search`: the response body.
    pub fn search(&self, query: &str) -> String {
        let body = serde_json::json!({ "query": query, "limit": 5 }).to_string();
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let req = format!(
            "POST /v1/retrieve/search HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.port,
            body.len()
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut raw = String::new();
        let _ = s.read_to_string(&mut raw);
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
        assert!(head.starts_with("HTTP/1.1 200"), "{raw}");
        body.to_string()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The answer is semantic: some hit matched by the model, no `NO_EMBEDDINGS`.
pub fn assert_semantic(body: &str) {
    assert!(!body.contains("NO_EMBEDDINGS"), "{body}");
    assert!(
        body.contains("\"match_source\":\"semantic\"")
            || body.contains("\"match_source\":\"fusion\""),
        "{body}"
    );
}

/// Wait (bounded) until no service socket is left: the service exited on idle.
fn wait_service_gone(env: &Env) -> Duration {
    let t = Instant::now();
    while !env.sockets().is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "service still there: {:?}",
            env.sockets()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    t.elapsed()
}

fn server_while_commits_land_and_after_idle(real: bool) {
    let env = Env::new(real);
    let r = committed_repo(&env);
    let serve = Serve::start(&env, &r.dir);
    let t = Instant::now();
    assert_semantic(&serve.search("pedido cancelado antes del envío"));
    println!(
        "server: first semantic query (model loads in-process) {:.0} ms, RSS {} MB",
        t.elapsed().as_secs_f64() * 1000.0,
        kdd::embed::warm::rss_kb_of(&serve.child.id().to_string()) / 1024
    );
    // The service may have exited on idle while the server loaded its model: the first commit
    // starts it again (a model load, measured apart), the next five find it warm.
    super::write_entity(&r.dir, " con una primera revisión");
    let t = Instant::now();
    ok(&env.git(&r.dir, &["commit", "-q", "-am", "warm-up"]));
    println!(
        "commit that (re)starts the service: {:.3}s",
        t.elapsed().as_secs_f64()
    );
    let mut times = Vec::new();
    for i in 0..5 {
        super::write_entity(&r.dir, &format!(" y la revisión {i} del importe"));
        let t = Instant::now();
        ok(&env.git(&r.dir, &["commit", "-q", "-am", &format!("edit {i}")]));
        times.push(t.elapsed().as_secs_f64());
    }
    println!("commit latency with a server running (real model: {real}): {times:.3?} s");
    // Before: 60.3 s each (the server held the one connection of the per-repo embedder).
    for t in &times {
        assert!(
            *t < 3.0,
            "a commit took {t:.2}s with a server running: {times:?}"
        );
    }
    assert_eq!(super::manifest(&r.dir)["index_level"], "L2");
    assert!(!r.dir.join(".git/kdd-cache/embed.sock").exists());
    // Idle past KDD_EMBED_IDLE_S: the hook's service exits, the server still answers by model.
    let gone = wait_service_gone(&env);
    std::thread::sleep(Duration::from_secs(IDLE_S + 1));
    let t = Instant::now();
    let body = serve.search("pedido cancelado antes del envío");
    println!(
        "first semantic query after idle: {:.1} ms (service gone after {:.1}s)",
        t.elapsed().as_secs_f64() * 1000.0,
        gone.as_secs_f64()
    );
    assert_semantic(&body);
    // And a commit after the idle exit starts the service again and still lands fast.
    super::write_entity(&r.dir, " tras la pausa");
    let t = Instant::now();
    ok(&env.git(&r.dir, &["commit", "-q", "-am", "after idle"]));
    println!("commit after idle: {:.3}s", t.elapsed().as_secs_f64());
    assert_eq!(super::manifest(&r.dir)["index_level"], "L2");
}

#[test]
fn server_running_while_five_commits_land_and_after_idle_test_embedder() {
    server_while_commits_land_and_after_idle(false);
}

#[test]
#[cfg_attr(
    not(kdd_real_model),
    ignore = "embedding model not installed (run ./install.sh)"
)]
fn server_running_while_five_commits_land_and_after_idle_real_model() {
    server_while_commits_land_and_after_idle(true);
}

fn eight_concurrent_clients(real: bool) {
    // Long enough for the slow debug `kdd doctor` below to find the service still up.
    let env = Env {
        idle_s: 30,
        ..Env::new(real)
    };
    let r = committed_repo(&env);
    let start = Instant::now();
    let outs: Vec<Output> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|i| {
                let (env, dir) = (&env, &r.dir);
                s.spawn(move || {
                    let q = format!("pedido cancelado {i}");
                    env.kdd(dir, &["search", &q, "--semantic", "--json"])
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let wall = start.elapsed().as_secs_f64();
    for o in &outs {
        let t = ok(o);
        assert!(!t.contains("NO_EMBEDDINGS"), "{t}");
    }
    let sockets = env.sockets();
    assert_eq!(
        sockets.len(),
        1,
        "one service per user and model: {sockets:?}"
    );
    println!("8 concurrent `kdd search --semantic` processes (real model: {real}): {wall:.2}s");
    if real {
        // `kdd doctor` shows the one shared service with its model and RSS.
        let o = env.kdd(&r.dir, &["doctor", "--json", "--no-load"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("doctor json");
        let c = v["checks"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == "embed-service"))
            .cloned()
            .unwrap_or_else(|| panic!("no embed-service check: {v}"));
        assert_eq!(c["status"], "ok", "{c}");
        let msg = c["message"].as_str().unwrap();
        assert!(
            msg.contains("one shared service") && msg.contains("MB RSS"),
            "{msg}"
        );
        println!("doctor: {msg}");
    }
    // Throughput of 8 concurrent connections on the one service.
    let spec = if real {
        match kdd::embed::model::discover() {
            kdd::embed::model::ModelChoice::Model(s) => s,
            _ => panic!("model"),
        }
    } else {
        kdd::embed::model::ModelSpec::test()
    };
    let socket = &sockets[0];
    let per = 20;
    let t = Instant::now();
    std::thread::scope(|s| {
        for i in 0..8 {
            let (spec, socket) = (&spec, socket);
            s.spawn(move || {
                let mut c =
                    kdd::embed::warm::WarmClient::connect(socket, spec, Duration::from_secs(30))
                        .expect("connect");
                for j in 0..per {
                    let v = kdd::embed::Embedder::embed_query(&mut c, &format!("consulta {i} {j}"))
                        .expect("query");
                    assert_eq!(v.len(), kdd::embed::Embedder::dims(&c));
                }
            });
        }
    });
    let secs = t.elapsed().as_secs_f64();
    println!(
        "8 clients x {per} queries on one service: {:.0} queries/s",
        (8 * per) as f64 / secs
    );
}

#[test]
fn eight_concurrent_clients_share_one_warm_service_test_embedder() {
    eight_concurrent_clients(false);
}

#[test]
#[cfg_attr(
    not(kdd_real_model),
    ignore = "embedding model not installed (run ./install.sh)"
)]
fn eight_concurrent_clients_share_one_warm_service_real_model() {
    eight_concurrent_clients(true);
}
