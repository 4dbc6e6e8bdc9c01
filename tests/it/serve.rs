//! `kdd mcp` (a JSON-RPC session over stdio against the real binary), `kdd serve` (HTTP on
//! loopback: validation, limits, auth, timeouts) and a bare repository receiving pushes from two
//! clones through the post-receive hook, all on real temp git repositories.

use crate::repo::{bin_dir, command, text, Mcp, Repo};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Child;
use std::time::Duration;

fn spec(kind: &str, id: &str, title: &str, body: &str) -> String {
    format!(
        "---\nid: {id}\nkind: {kind}\ntitle: {title}\nstatus: draft\n---\n\n# {title}\n\n{body}\n"
    )
}

/// A small Spanish PRD-era corpus with typed links.
fn write_corpus(r: &Repo) {
    r.write(
        "specs/01-domain/entities/Pedido.md",
        &spec(
            "entity",
            "Pedido",
            "Pedido",
            "## Descripción\n\nUn pedido de compra con líneas y precio total.\n\n## Invariantes\n\n- El total nunca es negativo.\n\n## Reglas\n\n- [[BR-PRECIO-001]]\n\n## Eventos\n\n- [[EVT-Pedido-Creado]]\n",
        ),
    );
    r.write(
        "specs/01-domain/rules/BR-PRECIO-001.md",
        &spec(
            "business-rule",
            "BR-PRECIO-001",
            "Precio final",
            "## Declaración\n\nEl precio final de un [[Pedido]] se calcula sumando las líneas y restando descuentos.\n",
        ),
    );
    r.write(
        "specs/01-domain/events/EVT-Pedido-Creado.md",
        &spec(
            "event",
            "EVT-Pedido-Creado",
            "Pedido creado",
            "## Descripción\n\nSe emite cuando se crea un [[Pedido]].\n",
        ),
    );
    r.write(
        "specs/02-behavior/use-cases/UC-001-CrearPedido.md",
        &spec(
            "use-case",
            "UC-001",
            "Crear pedido",
            "## Descripción\n\nEl cliente crea un pedido desde el carrito.\n\n## Flujo Principal\n\n1. El cliente confirma el carrito.\n2. El sistema calcula el precio según [[BR-PRECIO-001]].\n3. Se crea el [[Pedido]] y se emite [[EVT-Pedido-Creado]].\n",
        ),
    );
}

fn index(r: &Repo) {
    let o = r.kdd(&["index"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "kdd index failed:\n{out}\n{err}");
}

fn indexed_repo() -> Repo {
    let r = Repo::new();
    write_corpus(&r);
    index(&r);
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "specs"]);
    r
}

// ───────────────────────────── MCP ─────────────────────────────

#[test]
fn mcp_session_over_stdio() {
    let r = indexed_repo();
    std::fs::write(r.tmp.path().join("secret.md"), "top secret").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(r.tmp.path().join("secret.md"), r.dir.join("specs/link.md"))
        .unwrap();
    let mut m = Mcp::start(&r.dir);
    let init = m.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "kdd-test", "version": "1"}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "kdd", "{init}");
    assert!(init["result"]["capabilities"]["tools"].is_object());
    m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let list = m.request("tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for want in [
        "kdd_query",
        "kdd_context",
        "kdd_graph",
        "kdd_impact",
        "kdd_coverage",
        "kdd_violations",
        "kdd_read",
        "kdd_list",
        "kdd_status",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for t in tools {
        assert_eq!(t["annotations"]["readOnlyHint"], true, "{t}");
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert!(t["description"].as_str().unwrap().len() > 40);
    }

    let (err, q) = m.call(
        "kdd_query",
        json!({"query": "precio del pedido", "limit": 5}),
    );
    assert!(!err, "{q}");
    let ids: Vec<&str> = q["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["node_id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"BR:BR-PRECIO-001"), "{ids:?}");
    assert_eq!(q["index"]["fresh"], true, "{q}");
    assert_eq!(q["index"]["level"], "L1");
    // Each hit cites its evidence; kdd_read returns just that span.
    let h0 = &q["results"][0];
    let line = h0["lines"][0].as_u64().expect("cited lines");
    let (err, span) = m.call("kdd_read", json!({"node": h0["node_id"], "line": line}));
    assert!(!err, "{span}");
    let secs = span["sections"].as_array().unwrap();
    assert_eq!(secs.len(), 1, "{span}");
    assert_eq!(secs[0]["line"].as_u64(), Some(line), "{span}");
    let (err, x) = m.call(
        "kdd_query",
        json!({"query": "precio del pedido", "keywords": ["BR-PRECIO-001"], "translation": "order price"}),
    );
    assert!(!err, "{x}");
    assert_eq!(
        x["expanded_with"],
        json!(["translation", "keywords"]),
        "{x}"
    );

    let (err, short) = m.call("kdd_query", json!({"query": "ab"}));
    assert!(err);
    assert_eq!(short["error"]["code"], "QUERY_TOO_SHORT");
    let (err, unk) = m.call("kdd_query", json!({"query": "pedido", "bogus": 1}));
    assert!(err);
    assert_eq!(unk["error"]["code"], "UNKNOWN_PARAMETER");

    let (err, c) = m.call("kdd_context", json!({"hints": ["src/orders/pedido.ts"]}));
    assert!(!err, "{c}");
    assert!(
        !c["resolved_entities"].as_array().unwrap().is_empty(),
        "{c}"
    );

    let (err, g) = m.call("kdd_graph", json!({"node": "Entity:Pedido", "depth": 1}));
    assert!(!err, "{g}");
    assert_eq!(g["center_node"]["id"], "Entity:Pedido");
    assert!(g["page"]["total"].as_u64().unwrap() > 0, "{g}");

    let (err, i) = m.call("kdd_impact", json!({"node": "Pedido"}));
    assert!(!err, "{i}");
    assert!(
        !i["directly_affected"].as_array().unwrap().is_empty(),
        "{i}"
    );

    let (err, cov) = m.call("kdd_coverage", json!({"node": "UC-001"}));
    assert!(!err, "{cov}");
    assert!(cov["coverage_percent"].is_number());

    let (err, v) = m.call("kdd_violations", json!({}));
    assert!(!err, "{v}");
    assert!(v["violations"].is_array());

    let (err, rd) = m.call(
        "kdd_read",
        json!({"node": "UC-001", "section": "Flujo Principal"}),
    );
    assert!(!err, "{rd}");
    let secs = rd["sections"].as_array().unwrap();
    assert_eq!(secs.len(), 1, "{rd}");
    assert!(secs[0]["text"].as_str().unwrap().contains("confirma"));
    let (err, rd) = m.call(
        "kdd_read",
        json!({"path": "01-domain/rules/BR-PRECIO-001.md"}),
    );
    assert!(!err, "{rd}");
    assert_eq!(rd["node_id"], "BR:BR-PRECIO-001");
    // The `source_file` a query hit gives names the same spec.
    let (err, rd) = m.call("kdd_read", json!({"path": h0["source_file"]}));
    assert!(!err, "{rd}");
    assert_eq!(rd["node_id"], h0["node_id"], "{rd}");

    // Path escapes are refused, whatever their spelling.
    for p in [
        "../secret.md",
        "../../secret.md",
        "/etc/passwd",
        "01-domain/../../secret.md",
        "..\\secret.md",
        "link.md",
    ] {
        let (err, e) = m.call("kdd_read", json!({"path": p}));
        assert!(err, "{p}: {e}");
        assert_eq!(e["error"]["code"], "PATH_OUTSIDE_SPECS", "{p}: {e}");
        assert!(!e.to_string().contains("top secret"));
    }

    let (err, l) = m.call(
        "kdd_list",
        json!({"kinds": ["entity", "event"], "page_size": 1}),
    );
    assert!(!err, "{l}");
    assert_eq!(l["nodes"].as_array().unwrap().len(), 1);
    assert_eq!(l["page"]["total"], 2);
    assert_eq!(l["page"]["next_offset"], 1);
    let (_, l2) = m.call(
        "kdd_list",
        json!({"kinds": ["entity", "event"], "offset": 1}),
    );
    assert_eq!(l2["nodes"].as_array().unwrap().len(), 1);
    assert!(l2["page"]["next_offset"].is_null());

    let (err, s) = m.call("kdd_status", json!({}));
    assert!(!err, "{s}");
    assert_eq!(s["counts"]["nodes"], 4, "{s}");
    assert_eq!(s["index"]["fresh"], true);

    // A spec edited but not re-indexed shows as stale; re-indexing is picked up live.
    r.write(
        "specs/01-domain/rules/BR-DESCUENTO-001.md",
        &spec(
            "business-rule",
            "BR-DESCUENTO-001",
            "Descuento máximo",
            "## Declaración\n\nNingún descuento supera el treinta por ciento del [[Pedido]].\n",
        ),
    );
    let (_, s) = m.call("kdd_status", json!({}));
    assert_eq!(s["index"]["fresh"], false, "{s}");
    assert!(s["index"]["unindexed_specs"]
        .to_string()
        .contains("BR-DESCUENTO-001"));
    // The symlinked spec is a per-file error (never read); every other spec is indexed.
    let o = r.kdd(&["index"]);
    let (_, err) = text(&o);
    assert!(err.contains("specs/link.md: is a symbolic link"), "{err}");
    let (err, q) = m.call("kdd_query", json!({"query": "descuento máximo treinta"}));
    assert!(!err, "{q}");
    assert_eq!(q["index"]["reloaded"], true, "{q}");
    assert_eq!(q["results"][0]["node_id"], "BR:BR-DESCUENTO-001", "{q}");
    let (_, s) = m.call("kdd_status", json!({}));
    assert_eq!(s["counts"]["nodes"], 5);
    // Edited again after indexing: the answers with warnings say STALE_SPECS, as HTTP's do,
    // and `kdd_read` calls the spec stale (it said false until the cache was rebuilt).
    let p = "specs/01-domain/rules/BR-DESCUENTO-001.md";
    r.write(p, &(r.read(p) + "\nUna línea nueva.\n"));
    let (_, q) = m.call("kdd_query", json!({"query": "descuento máximo treinta"}));
    let w = q["warnings"].to_string();
    assert!(
        w.contains("STALE_SPECS") && w.contains("BR-DESCUENTO-001"),
        "{q}"
    );
    let (_, c) = m.call("kdd_context", json!({"hints": ["BR-DESCUENTO-001"]}));
    assert!(
        c["warnings"].to_string().contains("BR-DESCUENTO-001"),
        "{c}"
    );
    let (_, rd) = m.call("kdd_read", json!({"node": "BR-DESCUENTO-001"}));
    assert_eq!(rd["stale"], true, "{rd}");
}

#[test]
fn mcp_follows_a_branch_whose_index_has_another_specs_root() {
    // Red team, twentieth round: a running server kept the specs root it started with; after
    // checking out a branch whose committed manifest moved the specs (`specs/` → `kb/`) every
    // spec was reported stale and `kdd_read` by path failed.
    let r = indexed_repo();
    r.git(&["switch", "-q", "-c", "moved"]);
    r.git(&["mv", "specs", "kb"]);
    let o = r.kdd(&["index", "--specs", "kb"]);
    assert!(o.status.success(), "{:?}", text(&o));
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "specs moved"]);
    r.git(&["switch", "-q", "main"]);
    let mut m = Mcp::start(&r.dir);
    m.initialize();
    let (err, st) = m.call("kdd_status", json!({}));
    assert!(!err && st["stale_total"] == 0, "{st}");
    r.git(&["switch", "-q", "moved"]);
    let (err, st) = m.call("kdd_status", json!({}));
    assert!(!err, "{st}");
    assert_eq!(st["manifest"]["specs_root"], "kb", "{st}");
    assert_eq!(st["stale_total"], 0, "{st}");
    assert_eq!(st["unindexed_total"], 0, "{st}");
    let (err, rd) = m.call(
        "kdd_read",
        json!({"path": "01-domain/rules/BR-PRECIO-001.md"}),
    );
    assert!(!err, "{rd}");
    assert_eq!(rd["node_id"], "BR:BR-PRECIO-001");
    assert_eq!(rd["stale"], false, "{rd}");
}

#[test]
fn mcp_answers_stay_within_budget() {
    let r = Repo::new();
    for i in 0..120 {
        r.write(
            &format!("specs/01-domain/entities/E{i:03}.md"),
            &spec(
                "entity",
                &format!("E{i:03}"),
                &format!("Entidad {i}"),
                &format!("## Descripción\n\n{}\n", "texto de relleno ".repeat(40)),
            ),
        );
    }
    index(&r);
    let mut m = Mcp::start(&r.dir);
    m.initialize();
    let mut seen = 0;
    let mut offset = json!(0);
    let mut pages = 0;
    while !offset.is_null() {
        let (err, l) = m.call(
            "kdd_list",
            json!({"page_size": 200, "max_tokens": 1000, "offset": offset}),
        );
        assert!(!err, "{l}");
        assert!(l.to_string().len() / 4 <= 1100, "page over budget");
        seen += l["nodes"].as_array().unwrap().len();
        offset = l["page"]["next_offset"].clone();
        pages += 1;
        assert!(pages < 100);
    }
    assert_eq!(seen, 120);
    assert!(pages > 1);
}

// ───────────────────────────── HTTP ─────────────────────────────

struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<Server, String> {
        let mut c = command(env!("CARGO_BIN_EXE_kdd"), dir);
        c.arg("serve").args(args).env_remove("KDD_TOKEN");
        for (k, v) in env {
            c.env(k, v);
        }
        let (child, addr) = crate::repo::spawn_serve(c)?;
        Ok(Server { child, addr })
    }

    fn port(&self) -> u16 {
        self.addr.rsplit(':').next().unwrap().parse().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Resp {
    status: u16,
    headers: String,
    body: String,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// A minimal HTTP/1.1 client (one request per connection).
fn http(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    headers: &[(&str, &str)],
) -> Resp {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    if let Some(b) = body {
        let _ = s.write_all(b);
    }
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Resp {
        status,
        headers: head.to_ascii_lowercase(),
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((len, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn post(port: u16, path: &str, body: &str) -> Resp {
    http(port, "POST", path, Some(body.as_bytes()), &[])
}

fn get(port: u16, path: &str) -> Resp {
    http(port, "GET", path, None, &[])
}

#[test]
fn http_api_on_loopback() {
    let r = indexed_repo();
    let srv = Server::start(&r.dir, &["--bind", "127.0.0.1:0"], &[]).expect("serve");
    let p = srv.port();
    let secret_path = r.tmp.path().to_string_lossy().into_owned();

    let h = get(p, "/health");
    assert_eq!(h.status, 200);
    assert_eq!(h.json()["status"], "ok");
    assert!(h.headers.contains("x-request-id: "), "{}", h.headers);

    let c = post(
        p,
        "/v1/retrieve/context",
        r#"{"query_text":"implementar precio del pedido","strategy":"hybrid","expand_graph":true,"depth":2,"include_kinds":["use-case","business-rule","entity"],"respect_layers":true,"max_tokens":8000}"#,
    );
    assert_eq!(c.status, 200, "{}", c.body);
    let v = c.json();
    assert!(v["results"].as_array().unwrap().len() >= 2, "{v}");
    assert!(v["total_tokens"].is_number());
    let own = http(
        p,
        "POST",
        "/v1/retrieve/context",
        Some(br#"{"query":"precio"}"#),
        &[("X-Request-Id", "my-req-42")],
    );
    assert!(own.headers.contains("x-request-id: my-req-42"));

    let s = post(
        p,
        "/v1/retrieve/search",
        r#"{"query":"precio final","limit":3}"#,
    );
    assert_eq!(s.status, 200, "{}", s.body);
    assert!(
        s.body.contains("NO_EMBEDDINGS"),
        "L1 falls back to lexical: {}",
        s.body
    );

    let hints = post(
        p,
        "/v1/retrieve/context-hints",
        r#"{"hints":["pedido.ts","checkout"]}"#,
    );
    assert_eq!(hints.status, 200, "{}", hints.body);
    assert!(hints.json()["constraints"].is_array());

    for (path, key) in [
        (
            "/v1/retrieve/graph?node=Entity:Pedido&depth=2&edge_types=",
            "center_node",
        ),
        (
            "/v1/retrieve/impact?node=Entity:Pedido&change_type=modify_attribute",
            "directly_affected",
        ),
        ("/v1/retrieve/coverage?node=UC-001", "coverage_percent"),
        ("/v1/retrieve/layer-violations", "violations"),
    ] {
        let g = get(p, path);
        assert_eq!(g.status, 200, "{path}: {}", g.body);
        assert!(!g.json()[key].is_null(), "{path}: {}", g.body);
    }

    // Bad parameters: 4xx with a code, never a path or a stack trace.
    let cases: Vec<(Resp, u16, &str)> = vec![
        (
            post(p, "/v1/retrieve/context", r#"{"query":"ab"}"#),
            400,
            "QUERY_TOO_SHORT",
        ),
        (
            post(p, "/v1/retrieve/context", r#"{"query_text":"ab"}"#),
            400,
            "QUERY_TOO_SHORT",
        ),
        (
            post(p, "/v1/retrieve/context", r#"{"query":"pedido","depth":6}"#),
            400,
            "INVALID_DEPTH",
        ),
        (
            post(
                p,
                "/v1/retrieve/context",
                r#"{"query":"pedido","limit":101}"#,
            ),
            400,
            "INVALID_LIMIT",
        ),
        (
            post(
                p,
                "/v1/retrieve/context",
                r#"{"query":"pedido","min_score":-1}"#,
            ),
            400,
            "INVALID_MIN_SCORE",
        ),
        (
            post(
                p,
                "/v1/retrieve/context",
                r#"{"query":"pedido","include_kinds":["martian"]}"#,
            ),
            400,
            "INVALID_KIND",
        ),
        (
            post(
                p,
                "/v1/retrieve/context",
                r#"{"query":"pedido","strategy":"magic"}"#,
            ),
            400,
            "INVALID_STRATEGY",
        ),
        (
            post(
                p,
                "/v1/retrieve/context",
                r#"{"query":"pedido","nope":true}"#,
            ),
            400,
            "UNKNOWN_PARAMETER",
        ),
        (
            post(
                p,
                "/v1/retrieve/context",
                r#"{"query":"pedido","depth":"two"}"#,
            ),
            400,
            "INVALID_PARAMETER",
        ),
        (
            post(p, "/v1/retrieve/context", "{not json"),
            400,
            "INVALID_JSON",
        ),
        (
            post(p, "/v1/retrieve/context-hints", r#"{"hints":[]}"#),
            400,
            "EMPTY_HINTS",
        ),
        (get(p, "/v1/retrieve/graph"), 400, "MISSING_NODE"),
        // Typos in an edge type or a domain never pass as "nothing matched".
        (
            get(
                p,
                "/v1/retrieve/graph?node=Entity:Pedido&edge_types=ENTITY_RUL",
            ),
            400,
            "INVALID_EDGE_TYPE",
        ),
        (
            post(
                p,
                "/v1/retrieve/context",
                r#"{"query":"pedido","domain":"typo"}"#,
            ),
            400,
            "INVALID_DOMAIN",
        ),
        (
            post(
                p,
                "/v1/retrieve/search",
                r#"{"query":"pedido","domain":"typo"}"#,
            ),
            400,
            "INVALID_DOMAIN",
        ),
        (
            get(p, "/v1/retrieve/graph?node=Entity:Pedido&depth=0"),
            400,
            "INVALID_DEPTH",
        ),
        (
            get(p, "/v1/retrieve/graph?node=Entity:Pedido&depth=x"),
            400,
            "INVALID_PARAMETER",
        ),
        (
            get(p, "/v1/retrieve/graph?node=../../etc/passwd"),
            404,
            "NODE_NOT_FOUND",
        ),
        (
            get(p, "/v1/retrieve/impact?node=Pedido&change_type=explode"),
            400,
            "INVALID_CHANGE_TYPE",
        ),
        (
            get(p, "/v1/retrieve/coverage?node=Pedido&evil=1"),
            400,
            "UNKNOWN_PARAMETER",
        ),
        (get(p, "/v1/retrieve/nothing"), 404, "NOT_FOUND"),
        (get(p, "/"), 404, "NOT_FOUND"),
        (get(p, "/v1/retrieve/context"), 405, "METHOD_NOT_ALLOWED"),
        (
            http(p, "DELETE", "/health", None, &[]),
            405,
            "METHOD_NOT_ALLOWED",
        ),
        (
            http(p, "GET", "/health", None, &[("Host", "evil.example")]),
            403,
            "FORBIDDEN_HOST",
        ),
    ];
    for (resp, status, code) in &cases {
        assert_eq!(resp.status, *status, "{code}: {}", resp.body);
        let v = resp.json();
        assert_eq!(v["error"]["code"], *code, "{}", resp.body);
        assert!(v["request_id"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(
            !resp.body.contains(&secret_path),
            "server path leaked: {}",
            resp.body
        );
        assert!(!resp.body.contains("panicked"), "{}", resp.body);
    }

    // A huge out-of-range number is echoed short, in exponent form.
    let tiny = post(
        p,
        "/v1/retrieve/context",
        r#"{"query":"pedido","min_score":-1e308}"#,
    );
    let msg = tiny.json()["error"]["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(msg.contains("got -1e308") && msg.len() < 80, "{msg}");

    // Huge bodies are refused before parsing.
    let huge = format!(r#"{{"query":"{}"}}"#, "x".repeat(2 * 1024 * 1024));
    let big = post(p, "/v1/retrieve/context", &huge);
    assert_eq!(big.status, 413, "{}", big.body);
    assert_eq!(big.json()["error"]["code"], "PAYLOAD_TOO_LARGE");

    // Still serving after all that.
    assert_eq!(get(p, "/health").status, 200);
}

#[test]
fn http_answers_from_the_previous_index_say_so() {
    // Red team, twentieth round: while one request loaded a changed index (a branch switch),
    // others were answered from the previous one without a word (`/context` said nothing);
    // with the index gone, answers from the last one said `fresh: true`.
    let r = indexed_repo();
    let slow = [("KDD_SERVE_TEST_LOAD_DELAY_MS", "2000")];
    let args = ["--bind", "127.0.0.1:0", "--check-interval-ms", "0"];
    let srv = Server::start(&r.dir, &args, &slow).expect("serve");
    let port = srv.port();
    let q = r#"{"query":"pedido","mode":"lexical"}"#;
    let first = post(port, "/v1/retrieve/search", q);
    assert_eq!(first.status, 200, "{}", first.body);
    assert!(!first.body.contains("INDEX_REFRESHING"), "{}", first.body);
    r.write(
        "specs/01-domain/rules/BR-NUEVO-001.md",
        &spec(
            "business-rule",
            "BR-NUEVO-001",
            "Regla nueva",
            "## Declaración\n\nUn pedido nuevo.\n",
        ),
    );
    index(&r);
    let loader = std::thread::spawn(move || post(port, "/v1/retrieve/search", q));
    std::thread::sleep(Duration::from_millis(700));
    for (path, body) in [
        ("/v1/retrieve/search", q),
        ("/v1/retrieve/context", r#"{"query":"pedido"}"#),
    ] {
        let a = post(port, path, body);
        assert_eq!(a.status, 200, "{}", a.body);
        assert!(a.body.contains("INDEX_REFRESHING"), "{path}: {}", a.body);
        assert!(!a.body.contains("BR-NUEVO-001"), "{}", a.body);
    }
    // The GET routes say it too (red team, twenty-first round: they had no warnings at all).
    let g = get(port, "/v1/retrieve/layer-violations");
    assert_eq!(g.status, 200, "{}", g.body);
    assert!(g.body.contains("INDEX_REFRESHING"), "{}", g.body);
    let loaded = loader.join().unwrap();
    assert_eq!(loaded.status, 200, "{}", loaded.body);
    assert!(loaded.body.contains("BR-NUEVO-001"), "{}", loaded.body);
    assert!(!loaded.body.contains("INDEX_REFRESHING"), "{}", loaded.body);
    assert_eq!(loaded.json()["freshness"]["fresh"], true, "{}", loaded.body);
    // The index gone (a branch from before kdd): the last one answers, and says why.
    std::fs::remove_dir_all(r.dir.join(".kdd-index")).unwrap();
    let gone = post(port, "/v1/retrieve/search", q);
    assert_eq!(gone.status, 200, "{}", gone.body);
    assert!(gone.body.contains("INDEX_RELOAD_FAILED"), "{}", gone.body);
    assert_eq!(gone.json()["freshness"]["fresh"], false, "{}", gone.body);
    let gets = [
        "/v1/retrieve/graph?node=Entity:Pedido",
        "/v1/retrieve/impact?node=Entity:Pedido",
        "/v1/retrieve/coverage?node=Entity:Pedido",
        "/v1/retrieve/layer-violations",
    ];
    for path in gets {
        let g = get(port, path);
        assert_eq!(g.status, 200, "{path}: {}", g.body);
        assert!(g.body.contains("INDEX_RELOAD_FAILED"), "{path}: {}", g.body);
        assert_eq!(g.json()["freshness"]["fresh"], false, "{path}: {}", g.body);
    }
    index(&r);
    let back = post(port, "/v1/retrieve/search", q);
    assert!(!back.body.contains("INDEX_RELOAD_FAILED"), "{}", back.body);
    assert_eq!(back.json()["freshness"]["fresh"], true, "{}", back.body);
    for path in gets {
        let g = get(port, path);
        assert_eq!(g.status, 200, "{path}: {}", g.body);
        assert!(g.json().get("warnings").is_none(), "{path}: {}", g.body);
        assert_eq!(g.json()["freshness"]["fresh"], true, "{path}: {}", g.body);
    }
}

#[test]
fn http_answers_say_when_a_spec_changed_after_the_cache_was_built() {
    // The cache is built, then a spec is edited without `kdd index`: every HTTP read path says
    // so, as MCP does (the cache's own figure dates from its build and did not).
    let r = indexed_repo();
    let o = r.kdd(&["query", "pedido"]);
    assert!(o.status.success(), "{:?}", text(&o));
    std::thread::sleep(Duration::from_millis(20));
    let p = "specs/01-domain/entities/Pedido.md";
    let edited = r
        .read(p)
        .replace("Un pedido de compra", "Un pedido editado de compra");
    r.write(p, &edited);
    let srv = Server::start(&r.dir, &["--bind", "127.0.0.1:0"], &[]).expect("serve");
    let port = srv.port();
    let s = post(
        port,
        "/v1/retrieve/search",
        r#"{"query":"pedido","mode":"lexical"}"#,
    );
    assert_eq!(s.status, 200, "{}", s.body);
    let v = s.json();
    assert_eq!(v["freshness"]["fresh"], false, "{}", s.body);
    assert!(
        v["freshness"]["stale_specs"]
            .to_string()
            .contains("Pedido.md"),
        "{}",
        s.body
    );
    assert!(
        v["warnings"].to_string().contains("STALE_SPECS"),
        "{}",
        s.body
    );
    let c = post(port, "/v1/retrieve/context", r#"{"query":"pedido"}"#);
    assert_eq!(c.status, 200, "{}", c.body);
    let cv = c.json();
    let stale: Vec<&Value> = cv["warnings"]
        .as_array()
        .map(|w| w.iter().filter(|w| w["code"] == "STALE_SPECS").collect())
        .unwrap_or_default();
    assert_eq!(stale.len(), 1, "{}", c.body);
    // The hint route answers QRY-007's shape, whose warnings are messages.
    let h = post(
        port,
        "/v1/retrieve/context-hints",
        r#"{"hints":["Pedido"]}"#,
    );
    assert_eq!(h.status, 200, "{}", h.body);
    assert!(
        h.json()["warnings"].to_string().contains("Pedido.md"),
        "{}",
        h.body
    );
}

#[test]
fn http_timeout_answers_partial_results() {
    let r = indexed_repo();
    let srv = Server::start(
        &r.dir,
        &["--bind", "127.0.0.1:0", "--timeout-ms", "200"],
        &[("KDD_SERVE_TEST_DELAY_MS", "400")],
    )
    .expect("serve");
    let p = srv.port();
    let c = post(
        p,
        "/v1/retrieve/context",
        r#"{"query":"precio del pedido"}"#,
    );
    assert_eq!(c.status, 200, "{}", c.body);
    assert!(c.body.contains("\"TIMEOUT\""), "{}", c.body);
    let g = get(p, "/v1/retrieve/graph?node=Pedido");
    assert_eq!(g.status, 504, "{}", g.body);
    assert_eq!(g.json()["error"]["code"], "TIMEOUT");
    // Health never waits on queries.
    assert_eq!(get(p, "/health").status, 200);
}

#[test]
fn http_requires_a_token_off_loopback() {
    let r = indexed_repo();
    let refused = Server::start(&r.dir, &["--bind", "0.0.0.0:0"], &[]);
    let log = refused
        .err()
        .expect("binding 0.0.0.0 without KDD_TOKEN must fail");
    assert!(log.contains("KDD_TOKEN"), "{log}");

    let srv = Server::start(
        &r.dir,
        &["--bind", "0.0.0.0:0"],
        &[("KDD_TOKEN", "s3cret-token-0123456789")],
    )
    .expect("serve with token");
    let p = srv.port();
    assert_eq!(get(p, "/health").status, 200, "health needs no auth");
    let body = Some(br#"{"query":"precio del pedido"}"#.as_slice());
    let no = http(p, "POST", "/v1/retrieve/context", body, &[]);
    assert_eq!(no.status, 401, "{}", no.body);
    assert_eq!(no.json()["error"]["code"], "UNAUTHORIZED");
    assert!(no.headers.contains("www-authenticate: bearer"));
    let wrong = http(
        p,
        "POST",
        "/v1/retrieve/context",
        body,
        &[("Authorization", "Bearer s3cret-token-0123456788")],
    );
    assert_eq!(wrong.status, 401);
    let ok = http(
        p,
        "POST",
        "/v1/retrieve/context",
        body,
        &[("Authorization", "Bearer s3cret-token-0123456789")],
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
}

// ───────────────────────────── bare repo + post-receive ─────────────────────────────

fn install_post_receive(bare: &Path) {
    let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("hooks/post-receive");
    let dst = bare.join("hooks/post-receive");
    std::fs::copy(&shim, &dst).expect("copy hook shim");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn push(r: &Repo) -> String {
    let o = command("git", &r.dir)
        .args(["push", "-q", "origin", "HEAD:main"])
        .env("KDD_HOOK_BIN", bin_dir().join("kdd-hook"))
        .output()
        .expect("git push");
    let (out, err) = text(&o);
    assert!(o.status.success(), "push failed:\n{out}\n{err}");
    err
}

fn has_node(port: u16, id: &str) -> bool {
    let g = get(port, &format!("/v1/retrieve/graph?node={id}&depth=1"));
    g.status == 200 && g.json()["center_node"]["id"] == id
}

/// A bare `server.git` beside `origin`'s work tree, with the post-receive hook.
fn bare_server(origin: &Repo) -> std::path::PathBuf {
    let bare = origin.tmp.path().join("server.git");
    origin.git(&["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()]);
    install_post_receive(&bare);
    bare
}

/// Write, index, commit and push the corpus; the push's report.
fn publish_corpus(r: &Repo) -> String {
    write_corpus(r);
    index(r);
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "specs"]);
    push(r)
}

/// A spec deleted in a push without its artifacts is re-derived away on the server; restored
/// as it was, the next push matches its index again: no mismatch is reported and the node is
/// served from the pushed index (red team, eighteenth round: the mirror kept the server's own
/// derivation and re-derived the restored spec at L1, losing its vectors, with a warning about
/// a push that matched). A spec pushed as a link is named in the push report (it named none)
/// and by `kdd status` in the bare repository.
#[test]
fn a_spec_restored_after_a_stale_push_is_served_from_its_pushed_index() {
    let origin = Repo::new();
    let bare = bare_server(&origin);
    let a = origin.clone_of(&bare, "a");
    let spec = "specs/01-domain/entities/Pedido.md";
    a.write(
        spec,
        "---\nid: Pedido\nkind: entity\n---\n# Pedido\n\nLineas de compra de un cliente.\n",
    );
    index(&a);
    a.git(&["add", "-A"]);
    a.git(&["commit", "-qm", "pedido"]);
    assert!(!push(&a).contains("did not match"));
    a.git(&["rm", "-q", spec]);
    a.git(&["commit", "-q", "--no-verify", "-m", "stale delete"]);
    assert!(push(&a).contains("did not match"));
    a.git(&["revert", "--no-edit", "HEAD"]);
    let report = push(&a);
    assert!(!report.contains("did not match"), "{report}");
    let b = bare.to_str().unwrap();
    let o = origin.kdd(&["-C", b, "--json", "query", "lineas de compra"]);
    let (out, _) = text(&o);
    assert!(out.contains("Entity:Pedido"), "{out}");
    // A spec pushed as a link is never mirrored, and the push report names it.
    std::os::unix::fs::symlink("/etc/hostname", a.dir.join("specs/01-domain/Leak.md")).unwrap();
    a.git(&["add", "-A"]);
    a.git(&["commit", "-q", "--no-verify", "-m", "link"]);
    let report = push(&a);
    assert!(
        report.contains("specs/01-domain/Leak.md: is a symbolic link"),
        "{report}"
    );
    // … and so does `kdd status` in the bare repository (it said "files with errors: 0").
    let (status, _) = text(&origin.kdd(&["-C", b, "status"]));
    assert!(
        status.contains("files with errors: 1")
            && status.contains("specs/01-domain/Leak.md: is a symbolic link"),
        "{status}"
    );
    // A spec edited without its index, then a push that changes no spec: the server's
    // derivation is still what it serves (the commit's stale artifact came back).
    a.write(
        spec,
        "---\nid: Pedido\nkind: entity\n---\n# Pedido\n\nAlbaranes firmados.\n",
    );
    a.git(&["commit", "-q", "--no-verify", "-am", "stale edit"]);
    assert!(push(&a).contains("did not match"));
    a.write("README.md", "readme\n");
    a.git(&["add", "README.md"]);
    a.git(&["commit", "-q", "--no-verify", "-m", "readme"]);
    assert!(push(&a).contains("did not match"));
    let o = origin.kdd(&["-C", b, "--json", "query", "albaranes firmados"]);
    let (out, _) = text(&o);
    assert!(out.contains("Entity:Pedido"), "{out}");
}

/// A node artifact crafted to point outside the specs root, pushed past every hook, is left out
/// of the bare server's answers, and the push's report names it to the pusher.
#[test]
fn a_crafted_node_pushed_past_the_hooks_is_named_in_the_push_report() {
    let origin = Repo::new();
    let bare = bare_server(&origin);
    let a = origin.clone_of(&bare, "a");
    publish_corpus(&a);
    a.write(
        ".kdd-index/nodes/use-case/UC-777.json",
        "{\"id\":\"UC:UC-777\",\"kind\":\"use-case\",\"source_file\":\"../../../../etc/passwd\",\"source_hash\":\"00000000000000000000000000000000\",\"title\":\"root daemon\",\"layer\":\"02-behavior\"}\n",
    );
    a.git(&["add", "-A"]);
    a.git(&["commit", "-qm", "crafted"]);
    let log = push(&a);
    assert!(
        log.contains(".kdd-index/nodes/use-case/UC-777.json: node left out"),
        "{log}"
    );
    let o = origin.kdd(&[
        "-C",
        bare.to_str().unwrap(),
        "--json",
        "query",
        "root daemon",
    ]);
    let (out, err) = text(&o);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{out}\n{err}");
    assert!(!out.contains("UC-777"), "{out}");
}

#[test]
fn bare_repo_serves_pushes_from_two_clones() {
    let origin = Repo::new();
    let bare = bare_server(&origin);

    // Clone A publishes the first specs.
    let a = origin.clone_of(&bare, "a");
    let log = publish_corpus(&a);
    assert!(log.contains("kdd: refs/heads/main"), "hook report: {log}");

    let srv = Server::start(&bare, &["--bind", "127.0.0.1:0"], &[]).expect("serve bare");
    let p = srv.port();
    assert!(has_node(p, "Entity:Pedido"));

    // Clone B adds a rule and pushes.
    let b = origin.clone_of(&bare, "b");
    b.write(
        "specs/01-domain/rules/BR-STOCK-001.md",
        &spec(
            "business-rule",
            "BR-STOCK-001",
            "Stock disponible",
            "## Declaración\n\nUn [[Pedido]] solo se confirma con stock disponible en almacén.\n",
        ),
    );
    index(&b);
    b.git(&["add", "-A"]);
    b.git(&["commit", "-qm", "B: stock rule"]);
    let log = push(&b);
    assert!(log.contains("fresh in"), "{log}");

    // Clone A adds another rule, merges B's work and pushes the merge.
    a.write(
        "specs/01-domain/rules/BR-ENVIO-001.md",
        &spec(
            "business-rule",
            "BR-ENVIO-001",
            "Envío gratuito",
            "## Declaración\n\nEl envío de un [[Pedido]] es gratuito por encima de cincuenta euros.\n",
        ),
    );
    index(&a);
    a.git(&["add", "-A"]);
    a.git(&["commit", "-qm", "A: shipping rule"]);
    a.git(&["pull", "-q", "--no-rebase", "--no-edit", "origin", "main"]);
    push(&a);

    std::thread::sleep(Duration::from_millis(600)); // the server's freshness-check interval
    for id in ["Entity:Pedido", "BR:BR-STOCK-001", "BR:BR-ENVIO-001"] {
        assert!(has_node(p, id), "{id} missing after the merge push");
    }
    let c = post(
        p,
        "/v1/retrieve/context",
        r#"{"query":"envío gratuito cincuenta euros"}"#,
    );
    assert_eq!(
        c.json()["results"][0]["node_id"],
        "BR:BR-ENVIO-001",
        "{}",
        c.body
    );
    let h = get(p, "/health").json();
    let head = b.git(&["ls-remote", "origin", "refs/heads/main"]);
    assert_eq!(
        h["commit"].as_str().unwrap(),
        head.split_whitespace().next().unwrap(),
        "{h}"
    );

    // B pushes a spec edit without re-indexing: the server re-derives it and says so.
    b.git(&["pull", "-q", "--no-rebase", "--no-edit", "origin", "main"]);
    b.write(
        "specs/01-domain/rules/BR-STOCK-001.md",
        &spec(
            "business-rule",
            "BR-STOCK-001",
            "Stock disponible",
            "## Declaración\n\nUn [[Pedido]] se reserva en el almacén secundario cuando falta mercancía.\n",
        ),
    );
    b.git(&["commit", "-qam", "B: edit without index"]);
    let log = push(&b);
    assert!(log.contains("re-derived"), "{log}");
    assert!(log.contains("BR-STOCK-001"), "{log}");
    std::thread::sleep(Duration::from_millis(600));
    let c = post(
        p,
        "/v1/retrieve/context",
        r#"{"query":"almacén secundario mercancía"}"#,
    );
    assert_eq!(
        c.json()["results"][0]["node_id"],
        "BR:BR-STOCK-001",
        "{}",
        c.body
    );
    // Nothing was written into the bare repository's refs or objects by the server.
    let refs = origin.git(&[
        "--git-dir",
        bare.to_str().unwrap(),
        "for-each-ref",
        "--format=%(refname)",
    ]);
    assert_eq!(refs.trim(), "refs/heads/main");
}

/// The slim `kdd-hook` (built without the `serve` feature) hands `post-receive` over to
/// `kdd hook post-receive`: that entry of the full binary refreshes the served mirror of the
/// pushed ref exactly as `kdd-hook post-receive` does.
#[test]
fn kdd_hook_post_receive_refreshes_the_served_mirror() {
    let r = indexed_repo();
    let bare = r.tmp.path().join("server.git");
    r.git(&[
        "clone",
        "-q",
        "--bare",
        r.dir.to_str().unwrap(),
        bare.to_str().unwrap(),
    ]);
    let head = r.git(&["rev-parse", "HEAD"]);
    let branch = r.git(&["symbolic-ref", "HEAD"]);
    let line = format!("{} {} {}\n", "0".repeat(40), head.trim(), branch.trim());
    let mut child = command(env!("CARGO_BIN_EXE_kdd"), &bare)
        .args(["hook", "post-receive"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kdd hook");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(line.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        err.contains(&format!("kdd: {}", branch.trim())) && err.contains("node(s)"),
        "post-receive report: {err}"
    );
}

/// Page through a budgeted answer with `ask(offset)` → (hit ids, next_offset, results JSON
/// size in tokens); every page must start where the last one said and fit the budget.
fn pages(
    budget: usize,
    mut ask: impl FnMut(usize) -> (Vec<String>, Option<u64>, usize),
) -> Vec<String> {
    let (mut got, mut off, mut n) = (Vec::new(), 0usize, 0);
    loop {
        let (ids, next, tokens) = ask(off);
        assert!(!ids.is_empty(), "offset {off}: an empty page");
        assert!(
            ids.len() == 1 || tokens <= budget,
            "offset {off}: {tokens} tokens"
        );
        got.extend(ids.clone());
        n += 1;
        match next {
            Some(next) => {
                assert_eq!(next as usize, off + ids.len(), "offset {off}");
                off = next as usize;
            }
            None => break,
        }
        assert!(n < 20, "paging does not end: {got:?}");
    }
    assert!(n >= 2, "one page only: the budget did not cut");
    got
}

#[test]
fn paging_a_budgeted_answer_reaches_every_hit_once_on_http_and_mcp() {
    // Red team, twenty-first round: the budget was spent on the hits before `offset` too, so
    // paging `/v1/retrieve/context` by offset lost the last hits and gave no `next_offset`;
    // `kdd_query`'s `next_offset` counted graph edges and restarted at 0, so an agent looped;
    // the budget counted snippets only (an answer "of 478 tokens" held about 1,000).
    let repo = crate::util::indexed_fixture_repo("demo");
    let dir = repo.path();
    let q = "devolución del pedido";
    let srv = Server::start(dir, &["--bind", "127.0.0.1:0"], &[]).expect("serve");
    let port = srv.port();
    let ask = |extra: String| {
        let a = post(
            port,
            "/v1/retrieve/context",
            &format!(r#"{{"query":"{q}"{extra}}}"#),
        );
        assert_eq!(a.status, 200, "{}", a.body);
        a.json()
    };
    let full = crate::util::ids(
        &ask(r#","limit":10,"max_tokens":50000"#.into()),
        "results",
        "node_id",
    );
    assert_eq!(full.len(), 10, "{full:?}");
    // The first ten hits, paged: `limit` counts from the offset.
    let size = |v: &Value| {
        serde_json::to_string(v)
            .unwrap()
            .chars()
            .count()
            .div_ceil(4)
    };
    let http = pages(500, |off| {
        let limit = 10 - off;
        let v = ask(format!(
            r#","limit":{limit},"max_tokens":500,"offset":{off}"#
        ));
        let ids = crate::util::ids(&v, "results", "node_id");
        (ids, v["next_offset"].as_u64(), size(&v["results"]))
    });
    assert_eq!(http, full);
    let mut mcp = Mcp::start(dir);
    mcp.initialize();
    let by_mcp = pages(500, |off| {
        let args = json!({"query": q, "limit": 10 - off, "max_tokens": 500, "offset": off});
        let (err, v) = mcp.call("kdd_query", args);
        assert!(!err, "{v}");
        assert_eq!(v["page"]["offset"], off, "{v}");
        let ids = crate::util::ids(&v, "results", "node_id");
        (ids, v["page"]["next_offset"].as_u64(), size(&v["results"]))
    });
    assert_eq!(by_mcp, full);
}
