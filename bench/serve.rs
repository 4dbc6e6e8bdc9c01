//! `cargo bench --bench bench -- serve [SPECS] [REQUESTS] [SECONDS]`: loopback load on
//! `kdd serve` over a synthetic corpus (default 10 000 specs), 16 concurrent keep-alive
//! clients on `POST /v1/retrieve/context`, bounded by a request count and a time limit.
//! Prints throughput, P50/P95/P99 and errors (target P95 < 20 ms, 0 errors). Then measures
//! index freshness after a one-spec push into a bare repository of the same size with the
//! post-receive hook installed (target < 5 s).

use kdd::cli::output;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WORDS: &[&str] = &[
    "pedido",
    "cliente",
    "factura",
    "pago",
    "envío",
    "stock",
    "almacén",
    "descuento",
    "precio",
    "devolución",
    "cancelación",
    "reembolso",
    "carrito",
    "producto",
    "catálogo",
    "proveedor",
    "tarifa",
    "impuesto",
    "moneda",
    "cupón",
    "suscripción",
    "usuario",
    "sesión",
    "permiso",
    "auditoría",
    "notificación",
    "reserva",
    "entrega",
    "ruta",
    "transportista",
];

fn w(i: usize) -> &'static str {
    WORDS[i % WORDS.len()]
}

fn spec(kind: &str, id: &str, title: &str, body: &str) -> String {
    format!(
        "---\nid: {id}\nkind: {kind}\ntitle: {title}\nstatus: draft\n---\n\n# {title}\n\n{body}\n"
    )
}

/// Write `n` specs: entities, rules, events, commands and use cases linking each other.
fn write_corpus(root: &Path, n: usize) {
    let ents = (n / 5).max(1);
    for i in 0..n {
        let e = i / 5;
        let (dir, kind, id, title, body) = match i % 5 {
            0 => (
                "01-domain/entities",
                "entity",
                format!("Ent{e:05}"),
                format!("Entidad {} {}", w(e), w(e / 7)),
                format!(
                    "## Descripción\n\nRepresenta un {} de {} con {}.\n\n## Invariantes\n\n- El {} nunca es negativo.\n\n## Relaciones\n\n- [[Ent{:05}]]\n",
                    w(e), w(e + 3), w(e + 5), w(e + 1), (e + 1) % ents
                ),
            ),
            1 => (
                "01-domain/rules",
                "business-rule",
                format!("BR-{e:05}"),
                format!("Regla de {} para {}", w(e + 2), w(e)),
                format!(
                    "## Declaración\n\nEl {} de un [[Ent{e:05}]] debe validarse antes de {}.\n",
                    w(e + 2), w(e + 4)
                ),
            ),
            2 => (
                "01-domain/events",
                "event",
                format!("EVT-{e:05}"),
                format!("{} {} registrado", w(e), w(e + 6)),
                format!("## Descripción\n\nSe emite cuando cambia un [[Ent{e:05}]].\n"),
            ),
            3 => (
                "02-behavior/commands",
                "command",
                format!("CMD-{e:05}"),
                format!("Registrar {} de {}", w(e + 6), w(e)),
                format!(
                    "## Purpose\n\nRegistra el {} de un [[Ent{e:05}]] aplicando [[BR-{e:05}]] y emite [[EVT-{e:05}]].\n",
                    w(e + 6)
                ),
            ),
            _ => (
                "02-behavior/use-cases",
                "use-case",
                format!("UC-{e:05}"),
                format!("Gestionar {} del {}", w(e + 8), w(e)),
                format!(
                    "## Descripción\n\nEl usuario gestiona la {} del {}.\n\n## Flujo Principal\n\n1. Ejecuta [[CMD-{e:05}]].\n2. Aplica [[BR-{e:05}]].\n",
                    w(e + 8), w(e)
                ),
            ),
        };
        let p = root.join("specs").join(dir).join(format!("{id}.md"));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, spec(kind, &id, &title, &body)).unwrap();
    }
}

fn bin(name: &str) -> PathBuf {
    let kdd = PathBuf::from(env!("CARGO_BIN_EXE_kdd"));
    kdd.with_file_name(name)
}

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@kdd.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@kdd.invalid")
        .env("KDD_HOOK_BIN", bin("kdd-hook"))
        .env("KDD_NO_EMBED", "1")
        .output()
        .expect("run git");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

fn kdd(dir: &Path, args: &[&str]) {
    let o = Command::new(bin("kdd"))
        .current_dir(dir)
        .args(args)
        .env("KDD_NO_EMBED", "1")
        .output()
        .expect("run kdd");
    assert!(
        o.status.success(),
        "kdd {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

struct Server(Child, u16);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server(dir: &Path) -> Server {
    let mut child = Command::new(bin("kdd"))
        .current_dir(dir)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("KDD_NO_EMBED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kdd serve");
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let port = loop {
        let line = lines.next().expect("serve exited").expect("stderr");
        if let Some(a) = line.split("listening on http://").nth(1) {
            break a.trim().rsplit(':').next().unwrap().parse().unwrap();
        }
    };
    for line in lines.by_ref() {
        if line.expect("stderr").contains("kdd serve: ready") {
            break;
        }
    }
    // Keep draining the access log.
    std::thread::spawn(move || for _ in lines {});
    Server(child, port)
}

/// One keep-alive POST; returns the status.
fn post(s: &mut BufReader<TcpStream>, port: u16, path: &str, body: &str) -> std::io::Result<u16> {
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.get_mut().write_all(req.as_bytes())?;
    let mut line = String::new();
    s.read_line(&mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    let mut len = 0usize;
    loop {
        line.clear();
        s.read_line(&mut line)?;
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut buf = vec![0u8; len];
    s.read_exact(&mut buf)?;
    Ok(status)
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// Entry point.
pub fn run(args: &[String]) {
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let total: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(8_000);
    let secs: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(60);
    let clients = 16;
    let tmp = tempfile::tempdir().expect("tempdir");
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    let t = Instant::now();
    write_corpus(&work, n);
    kdd(&work, &["index"]);
    output::info(&format!(
        "serve bench: {n} specs generated and indexed in {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-qm", "corpus"]);

    // ── HTTP load ──
    let t = Instant::now();
    let srv = start_server(&work);
    output::info(&format!(
        "serve bench: server up (cache built) in {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    let port = srv.1;
    // Service time: one client, sequential requests.
    let mut conn = BufReader::new(TcpStream::connect(("127.0.0.1", port)).unwrap());
    let mut seq = Vec::new();
    for i in 0..300 {
        let body = format!(
            r#"{{"query":"{} del {} con {}","limit":10,"depth":2}}"#,
            w(i),
            w(i / 3 + 1),
            w(i / 7 + 2)
        );
        let t = Instant::now();
        if let Ok(200) = post(&mut conn, port, "/v1/retrieve/context", &body) {
            seq.push(t.elapsed());
        }
    }
    seq.sort();
    output::info(&format!(
        "serve bench: POST /v1/retrieve/context, 1 client sequential: {} ok; P50 {:.2} ms, P95 {:.2} ms, P99 {:.2} ms",
        seq.len(),
        pct(&seq, 0.50),
        pct(&seq, 0.95),
        pct(&seq, 0.99)
    ));
    let lat = Arc::new(Mutex::new(Vec::with_capacity(total)));
    let errors = Arc::new(Mutex::new(0usize));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let t0 = Instant::now();
    let mut hs = Vec::new();
    for _ in 0..clients {
        let (lat, errors, next) = (lat.clone(), errors.clone(), next.clone());
        hs.push(std::thread::spawn(move || {
            let mut conn = BufReader::new(TcpStream::connect(("127.0.0.1", port)).unwrap());
            let mut mine = Vec::new();
            let mut errs = 0;
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= total || Instant::now() >= deadline {
                    break;
                }
                let body = format!(
                    r#"{{"query":"{} del {} con {}","limit":10,"depth":2}}"#,
                    w(i),
                    w(i / 3 + 1),
                    w(i / 7 + 2)
                );
                let t = Instant::now();
                match post(&mut conn, port, "/v1/retrieve/context", &body) {
                    Ok(200) => mine.push(t.elapsed()),
                    _ => {
                        errs += 1;
                        conn = BufReader::new(TcpStream::connect(("127.0.0.1", port)).unwrap());
                    }
                }
            }
            lat.lock().unwrap().extend(mine);
            *errors.lock().unwrap() += errs;
        }));
    }
    for h in hs {
        h.join().unwrap();
    }
    let wall = t0.elapsed();
    let mut l = lat.lock().unwrap().clone();
    l.sort();
    let errs = *errors.lock().unwrap();
    output::info(&format!(
        "serve bench: POST /v1/retrieve/context, {n} specs, {clients} clients: {} ok, {errs} errors in {:.1} s → {:.0} req/s; P50 {:.2} ms, P95 {:.2} ms, P99 {:.2} ms (target P95 < 20 ms)",
        l.len(),
        wall.as_secs_f64(),
        l.len() as f64 / wall.as_secs_f64(),
        pct(&l, 0.50),
        pct(&l, 0.95),
        pct(&l, 0.99)
    ));
    drop(srv);

    // ── post-receive freshness ──
    let bare = tmp.path().join("server.git");
    git(
        tmp.path(),
        &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
    );
    let hook = bare.join("hooks/post-receive");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("hooks/post-receive"),
        &hook,
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    git(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
    let t = Instant::now();
    let log = git(&work, &["push", "-q", "origin", "main"]);
    output::info(&format!(
        "serve bench: first push ({n} specs, full mirror + cache build) {:.1} s: {}",
        t.elapsed().as_secs_f64(),
        log.lines()
            .find(|l| l.contains("kdd:"))
            .unwrap_or("")
            .trim()
    ));
    let p = work.join("specs/01-domain/rules/BR-00001.md");
    let mut s = std::fs::read_to_string(&p).unwrap();
    s.push_str("\nCambio de prueba: el reembolso se calcula en la moneda original.\n");
    std::fs::write(&p, s).unwrap();
    kdd(&work, &["index"]);
    git(&work, &["commit", "-qam", "one spec"]);
    let t = Instant::now();
    let log = git(&work, &["push", "-q", "origin", "main"]);
    output::info(&format!(
        "serve bench: one-spec push into {n}-spec bare repo: push + hook {:.2} s (target < 5 s): {}",
        t.elapsed().as_secs_f64(),
        log.lines().find(|l| l.contains("kdd:")).unwrap_or("").trim()
    ));
    // And one pushed without re-indexing (server-side re-derivation).
    let p = work.join("specs/01-domain/rules/BR-00002.md");
    let mut s = std::fs::read_to_string(&p).unwrap();
    s.push_str("\nEditado sin reindexar.\n");
    std::fs::write(&p, s).unwrap();
    git(&work, &["commit", "-qam", "stale"]);
    let t = Instant::now();
    let log = git(&work, &["push", "-q", "origin", "main"]);
    output::info(&format!(
        "serve bench: stale one-spec push (re-derived on the server): {:.2} s: {}",
        t.elapsed().as_secs_f64(),
        log.lines()
            .find(|l| l.contains("kdd:"))
            .unwrap_or("")
            .trim()
    ));
}
