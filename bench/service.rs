//! The daily-workflow embedding bench (issue 12): `cargo bench --bench bench -- service [N]`.
//!
//! With the real model (as installed by `./install.sh`) and the release binaries, in a temp
//! repository of N specs (default 40) with the hooks installed and its own `XDG_RUNTIME_DIR`
//! (so its own warm service), prints: the server's first semantic query (in-process model
//! load) and its RSS; commit latency while the server runs (one commit that starts the warm
//! service, then five); the service's RSS; the first semantic query after the service's idle
//! exit; the throughput of 8 concurrent clients on the one service.
//!
//! Measured (2 shared cores, load average ~10, multilingual-e5-small-int8, 40 specs): server
//! first semantic query 4.6 s (model load in-process), server RSS 713 MB; commits with the
//! server running 0.22–0.30 s (before: 60.3 s); warm service RSS 708 MB, one per user (before:
//! 707 MB per repository); 8 concurrent clients 159 queries/s; first semantic query after the
//! service's idle exit 168 ms, semantic. Those RSS figures predate the memory work (own
//! session + compact Unigram vocabulary): measured since on the warm service (debug build,
//! VmRSS): 437 → 190 MB after load, 439 → 192 MB after 100 queries, 465–495 → 191–210 MB after
//! 20 long passages, load peak 851 → 280 MB; `kdd serve` 448–471 → 198 MB. Floor: ~112 MB int8
//! weights + ~15 MB session state + ~29 MB code + ~7 MB tokenizer (the README's memory paragraph).

use kdd::cli::output;
use kdd::embed::model::{discover, ModelChoice};
use kdd::embed::warm::{rss_kb_of, WarmClient};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const IDLE_S: u64 = 3;

fn say(s: &str) {
    let _ = output::data(s);
}

fn cmd(program: impl AsRef<std::ffi::OsStr>, dir: &Path, run: &Path) -> Command {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_kdd"));
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin.parent().unwrap().to_path_buf()];
    paths.extend(std::env::split_paths(&path));
    let mut c = Command::new(program);
    c.current_dir(dir)
        .env("PATH", std::env::join_paths(paths).unwrap())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@kdd.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@kdd.invalid")
        .env("XDG_RUNTIME_DIR", run)
        .env("KDD_EMBED_IDLE_S", IDLE_S.to_string())
        .env("KDD_TRANSLATE", "off")
        .env_remove("KDD_NO_EMBED")
        .env_remove("KDD_TEST_EMBEDDER")
        .env_remove("KDD_EMBED_WARM");
    c
}

fn ok(o: Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn write_specs(dir: &Path, n: usize, rev: usize) {
    for i in 0..n {
        let p = dir.join(format!("specs/01-domain/rules/BR-S{i:03}.md"));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let extra = if i == 0 {
            format!(" (revisión {rev})")
        } else {
            String::new()
        };
        std::fs::write(
            p,
            format!("---\nid: BR-S{i:03}\nkind: business-rule\n---\n# BR-S{i:03}: Regla {i}\n\n## Declaración\n\nUn pedido de la categoría {i} solo puede cancelarse antes del envío{extra}.\n"),
        )
        .unwrap();
    }
}

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn search(port: u16, q: &str) -> (Duration, String) {
    let body = format!("{{\"query\":\"{q}\",\"limit\":5}}");
    let t = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let req = format!("POST /v1/retrieve/search HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    let source = if raw.contains("NO_EMBEDDINGS") {
        "NO_EMBEDDINGS"
    } else if raw.contains("\"match_source\":\"fusion\"")
        || raw.contains("\"match_source\":\"semantic\"")
    {
        "semantic"
    } else {
        "lexical only"
    };
    (t.elapsed(), source.to_string())
}

fn service(run: &Path) -> Option<(PathBuf, u32, u64)> {
    let ModelChoice::Model(spec) = discover() else {
        return None;
    };
    let sock = std::fs::read_dir(run.join("kdd"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "sock"))?;
    let mut c = WarmClient::connect(&sock, &spec, Duration::from_secs(30)).ok()?;
    let st = c.status(&sock).ok()?;
    Some((sock, st.pid, st.rss_kb))
}

pub fn run(args: &[String]) {
    let ModelChoice::Model(spec) = discover() else {
        return say("service bench: needs the real model (unset KDD_NO_EMBED / KDD_TEST_EMBEDDER)");
    };
    if spec.missing_file().is_some() {
        return say("service bench: the embedding model is not installed (run ./install.sh)");
    }
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(40);
    let tmp = tempfile::tempdir().unwrap();
    let (dir, run) = (tmp.path().join("repo"), tmp.path().join("run"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&run).unwrap();
    let kdd = env!("CARGO_BIN_EXE_kdd");
    ok(
        cmd("git", &dir, &run)
            .args(["init", "-q", "-b", "main"])
            .output()
            .unwrap(),
        "init",
    );
    write_specs(&dir, n, 0);
    ok(
        cmd(kdd, &dir, &run).arg("install").output().unwrap(),
        "install",
    );
    ok(
        cmd("git", &dir, &run).args(["add", "-A"]).output().unwrap(),
        "add",
    );
    let t = Instant::now();
    ok(
        cmd("git", &dir, &run)
            .args(["commit", "-q", "-m", "specs"])
            .output()
            .unwrap(),
        "commit",
    );
    say(&format!(
        "first commit ({n} specs embedded, service started): {:.2}s",
        t.elapsed().as_secs_f64()
    ));
    let mut child = cmd(kdd, &dir, &run)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let port: u16 = loop {
        let line = lines.next().expect("serve exited").unwrap();
        if let Some(a) = line.split("listening on http://").nth(1) {
            break a.trim().rsplit(':').next().unwrap().parse().unwrap();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let serve = Serve(child);
    let (d, src) = search(port, "cancelar un pedido enviado");
    say(&format!(
        "server first semantic query (loads the model in-process): {:.0} ms ({src}); server RSS {} MB",
        d.as_secs_f64() * 1000.0,
        rss_kb_of(&serve.0.id().to_string()) / 1024
    ));
    let mut times = Vec::new();
    for rev in 1..=6 {
        write_specs(&dir, n, rev);
        let t = Instant::now();
        ok(
            cmd("git", &dir, &run)
                .args(["commit", "-q", "-am", "edit"])
                .output()
                .unwrap(),
            "commit",
        );
        times.push(t.elapsed().as_secs_f64());
    }
    say(&format!("commit latency with the server running (before: 60.3 s): first {:.2}s (service start), then {:.3?} s", times[0], &times[1..]));
    if let Some((sock, pid, rss)) = service(&run) {
        say(&format!(
            "warm service pid {pid}: RSS {} MB (before: 707 MB per repository) at {}",
            rss / 1024,
            sock.display()
        ));
    }
    // 8 concurrent clients on the one service.
    if let Some((sock, _, _)) = service(&run) {
        let per = 25;
        let t = Instant::now();
        std::thread::scope(|s| {
            for i in 0..8 {
                let (sock, spec) = (&sock, &spec);
                s.spawn(move || {
                    let mut c = WarmClient::connect(sock, spec, Duration::from_secs(30)).unwrap();
                    for j in 0..per {
                        kdd::embed::Embedder::embed_query(&mut c, &format!("consulta {i} {j}"))
                            .unwrap();
                    }
                });
            }
        });
        let secs = t.elapsed().as_secs_f64();
        say(&format!(
            "8 concurrent clients x {per} queries: {:.0} queries/s ({:.1} ms each)",
            (8 * per) as f64 / secs,
            secs * 1000.0 / per as f64 / 8.0
        ));
    }
    std::thread::sleep(Duration::from_secs(IDLE_S + 2));
    let gone = service(&run).is_none();
    let (d, src) = search(port, "cancelar un pedido enviado");
    say(&format!(
        "first semantic query after {}s idle (service exited: {gone}): {:.0} ms ({src})",
        IDLE_S + 2,
        d.as_secs_f64() * 1000.0
    ));
    write_specs(&dir, n, 99);
    let t = Instant::now();
    ok(
        cmd("git", &dir, &run)
            .args(["commit", "-q", "-am", "after idle"])
            .output()
            .unwrap(),
        "commit",
    );
    say(&format!(
        "commit after the idle exit (restarts the service): {:.2}s",
        t.elapsed().as_secs_f64()
    ));
    drop(serve);
}
