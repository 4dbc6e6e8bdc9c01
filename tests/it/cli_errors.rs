//! Error messages a user meets first: a missing query, `--json` errors that are JSON, a
//! missing `--specs` directory, a specs root that would empty the index, an unusable cache directory, `verify` before the
//! first commit, `kdd mcp` logging under its
//! own name, and the HTTP 414 answer with a JSON body.

use crate::repo::{command, text, Repo};
use crate::util::indexed_fixture_repo;
use std::io::{Read, Write};

fn json_error(o: &std::process::Output) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {:?}", text(o)));
    v["error"].clone()
}

#[test]
fn json_errors_are_json_and_missing_queries_say_so() {
    let r = Repo::new();
    let o = r.kdd(&["--json", "query"]);
    assert_eq!(o.status.code(), Some(2));
    let e = json_error(&o);
    assert_eq!(e["code"], "USAGE", "{e}");
    assert!(e["message"].as_str().unwrap().contains("<TEXT>"), "{e}");
    let o = r.kdd(&["--json", "query", "   "]);
    assert_eq!(json_error(&o)["code"], "QUERY_MISSING");
    let o = r.kdd(&["query", ""]);
    assert!(text(&o).1.contains("QUERY_MISSING"), "{:?}", text(&o));
    let o = r.kdd(&["--json", "nosuch"]);
    assert_eq!(json_error(&o)["code"], "USAGE");
    // Any other failure under --json: JSON on stdout, prose on stderr, exit 2.
    let o = r.kdd(&["--json", "status"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(json_error(&o)["code"], "ERROR");
    assert!(text(&o).1.contains("kdd index"));
    // --help still prints help.
    let o = r.kdd(&["--json", "--help"]);
    assert!(o.status.success() && text(&o).0.contains("Usage"));
}

#[test]
fn missing_specs_dir_and_verify_without_commits_are_errors() {
    let r = Repo::new();
    let o = r.kdd(&["status", "--specs", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o).1;
    assert!(
        err.contains("`nope` does not exist") && err.contains("--specs"),
        "{err}"
    );
    // A `-C` to nowhere says so (it read "not inside a git repository").
    let o = r.kdd(&["-C", "/nonexistent-kdd-dir", "status"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("no such directory"), "{:?}", text(&o));
    // A `-C` at a file says that.
    let file = r.dir.join(".git/HEAD");
    let o = r.kdd(&["-C", &file.to_string_lossy(), "status"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("not a directory"), "{:?}", text(&o));
    let o = r.kdd(&["verify"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("no commits yet"), "{:?}", text(&o));
    let o = r.kdd(&["--json", "verify"]);
    assert!(json_error(&o)["message"]
        .as_str()
        .unwrap()
        .contains("no commits yet"));
}

#[test]
fn mcp_logs_say_kdd_mcp() {
    let dir = indexed_fixture_repo("demo");
    let mut c = command(env!("CARGO_BIN_EXE_kdd"), dir.path());
    c.arg("mcp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().expect("kdd mcp");
    let msgs = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"kdd_search","arguments":{"query":"cancel an order"}}}"#,
    ];
    let mut stdin = child.stdin.take().unwrap();
    for m in msgs {
        writeln!(stdin, "{m}").unwrap();
    }
    // Wait for the answer to id 2, then close stdin so the server exits.
    let mut out = child.stdout.take().unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    let t0 = std::time::Instant::now();
    while !seen.contains(r#""id":2"#) && t0.elapsed().as_secs() < 60 {
        let n = out.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("kdd mcp:"), "{err}");
    assert!(!err.contains("kdd serve"), "{err}");
}

fn raw_request(addr: &str, request: &[u8]) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn http_414_has_a_json_body() {
    let dir = indexed_fixture_repo("demo");
    let mut c = command(env!("CARGO_BIN_EXE_kdd"), dir.path());
    c.args(["serve", "--bind", "127.0.0.1:0"]);
    let (mut child, addr) = crate::repo::spawn_serve(c).expect("kdd serve");
    for n in [9_000, 70_000, 200_000] {
        let req = format!(
            "GET /v1/retrieve/graph?node={} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n",
            "a".repeat(n)
        );
        let resp = raw_request(&addr, req.as_bytes());
        assert!(
            resp.starts_with("HTTP/1.1 414"),
            "{n}: {}",
            &resp[..resp.len().min(200)]
        );
        assert!(resp.contains(r#""code":"URI_TOO_LONG""#), "{n}: {resp}");
    }
    // The second request of a kept-alive connection is held to the same bound.
    let req = format!(
        "GET /health HTTP/1.1\r\nHost: {addr}\r\n\r\nGET /v1/retrieve/graph?node={} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n",
        "a".repeat(20_000)
    );
    let resp = raw_request(&addr, req.as_bytes());
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(
        resp.contains("414") && resp.contains("URI_TOO_LONG"),
        "{resp}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_specs_root_that_would_empty_the_index_is_refused() {
    let dir = indexed_fixture_repo("demo");
    let index = || crate::util::git(dir.path(), &["ls-files", "-o", "-m", "-d", ".kdd-index"]);
    std::fs::create_dir_all(dir.path().join("empty")).unwrap();
    for specs in [".git", ".kdd-index", "./.git/hooks", "empty"] {
        let o = crate::util::kdd(dir.path(), &["index", "--specs", specs]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{specs}: {err}");
        assert!(err.contains("nothing was"), "{specs}: {err}");
        assert!(index().trim().is_empty(), "{specs}: the index changed");
    }
    // The real root still indexes, and changes nothing.
    let o = crate::util::kdd(dir.path(), &["index"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(index().trim().is_empty());
    // A cache directory that cannot be one: the error says what to set.
    let o = crate::util::kdd_env(
        dir.path(),
        &["query", "pedido"],
        &[("KDD_NO_EMBED", "1"), ("KDD_CACHE_DIR", "/dev/null")],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("set KDD_CACHE_DIR"), "{:?}", text(&o));
    // One inside the work tree (it would be committed with `git add .kdd-index`, or read as
    // specs) or relative (it would land wherever the command ran) is refused, and not made.
    let inside = dir.path().join(".kdd-index/cache");
    let inside_s = inside.to_string_lossy().into_owned();
    for (value, why) in [
        (inside_s.as_str(), "inside the repository's work tree"),
        ("rel-cache", "must be an absolute path"),
    ] {
        let o = crate::util::kdd_env(
            &dir.path().join("specs"),
            &["query", "pedido"],
            &[("KDD_NO_EMBED", "1"), ("KDD_CACHE_DIR", value)],
        );
        assert_eq!(o.status.code(), Some(2), "{value}: {:?}", text(&o));
        assert!(text(&o).1.contains(why), "{value}: {:?}", text(&o));
    }
    assert!(!inside.exists() && !dir.path().join("specs/rel-cache").exists());
    // A manifest no command can read is named by `kdd status` (it reported all clear).
    std::fs::write(
        dir.path().join(".kdd-index/manifest.json"),
        "{\"format\": 999}\n",
    )
    .unwrap();
    let o = crate::util::kdd(dir.path(), &["status"]);
    let out = text(&o).0;
    assert!(
        out.contains("unreadable artifacts") && out.contains("manifest.json"),
        "{out}"
    );
}
