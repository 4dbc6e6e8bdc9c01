//! Query latency work (issue 13) that must not change answers: translations memoised in a
//! server (a repeated question runs no translator), and the warm Apertium pipeline of the
//! per-user service answering exactly like a cold `apertium` process (needs Apertium: ignored
//! with the reason when it is absent).

use crate::util::{copy_dir, fixture, git_repo, kdd_env, text};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

fn indexed(name: &str, envs: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = git_repo();
    copy_dir(
        &fixture(&format!("{name}/specs")),
        &dir.path().join("specs"),
    );
    let o = kdd_env(dir.path(), &["index"], envs);
    assert!(o.status.success(), "{}", text(&o));
    dir
}

/// POST a JSON body to the server and return the JSON answer.
fn post(port: u16, path: &str, body: &str) -> Value {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    assert!(head.starts_with("HTTP/1.1 200"), "{raw}");
    assert!(!head.to_ascii_lowercase().contains("chunked"), "{raw}");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

fn translated(v: &Value) -> bool {
    v["warnings"]
        .as_array()
        .is_some_and(|w| w.iter().any(|w| w["code"] == "QUERY_TRANSLATED"))
}

fn runs(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[test]
fn a_server_runs_the_translator_once_for_a_repeated_question() {
    let dir = indexed("core-es", &[("KDD_NO_EMBED", "1")]);
    let log = dir.path().join(".git/translator-runs");
    let counting = fixture("translate/counting-translator");
    let mut c = crate::repo::command(env!("CARGO_BIN_EXE_kdd"), dir.path());
    c.args(["serve", "--bind", "127.0.0.1:0"])
        .env_remove("KDD_TOKEN")
        .env("KDD_NO_EMBED", "1")
        .env("KDD_TRANSLATE", "on")
        .env("KDD_TRANSLATOR", &counting)
        .env("KDD_TEST_TRANSLATOR_LOG", &log);
    let (mut child, addr) = crate::repo::spawn_serve(c).expect("kdd serve starts");
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    let body = r#"{"query":"why is there a smallest amount for shipping?","limit":5}"#;
    let first = post(port, "/v1/retrieve/search", body);
    let again = post(port, "/v1/retrieve/search", body);
    let other = post(
        port,
        "/v1/retrieve/search",
        r#"{"query":"is there a discount for volume?","limit":5}"#,
    );
    let _ = child.kill();
    let _ = child.wait();
    assert!(translated(&first) && translated(&again), "{first}");
    assert_eq!(first["results"], again["results"]);
    assert_eq!(first["warnings"], again["warnings"]);
    assert!(translated(&other), "{other}");
    // Two distinct questions, two translator runs: the repeated one came from the memo.
    assert_eq!(runs(&log), 2, "translator runs");
}

#[cfg_attr(not(kdd_apertium), ignore = "Apertium with eng-spa is not installed")]
#[test]
fn the_warm_service_translates_exactly_like_a_cold_apertium() {
    let dir = indexed("core-es", &[("KDD_TEST_EMBEDDER", "1")]);
    let run = dir.path().join(".git/run");
    std::fs::create_dir_all(&run).unwrap();
    let run = run.to_str().unwrap().to_string();
    let query = |warm: &str| {
        let envs = [
            ("KDD_TEST_EMBEDDER", "1"),
            ("KDD_EMBED_WARM", "1"),
            ("KDD_EMBED_IDLE_S", "20"),
            ("XDG_RUNTIME_DIR", run.as_str()),
            ("KDD_TRANSLATE", "on"),
            ("KDD_TRANSLATE_WARM", warm),
            ("KDD_TRACE", "1"),
        ];
        let q = "why is there a minimum amount for shipping costs?";
        let o = kdd_env(dir.path(), &["query", q, "--json"], &envs);
        let v: Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
        (v, String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (cold, cold_trace) = query("0");
    assert!(
        cold_trace.contains("kdd-trace: translate_cold"),
        "{cold_trace}"
    );
    assert!(translated(&cold), "{cold}");
    // The service (started by the first query for embeddings) now keeps Apertium warm.
    for _ in 0..2 {
        let (warm, trace) = query("1");
        assert!(trace.contains("kdd-trace: translate_warm"), "{trace}");
        assert_eq!(warm["results"], cold["results"]);
        assert_eq!(warm["warnings"], cold["warnings"]);
    }
    // Removing the socket directory stops the service.
    let _ = std::fs::remove_dir_all(Path::new(&run).join("kdd"));
}
