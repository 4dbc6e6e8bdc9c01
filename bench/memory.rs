//! Memory of the real model (issue 12): `cargo bench --bench bench -- memory [KDD_BINARY]`.
//!
//! Prints VmRSS / VmHWM (from `/proc`) of (1) this process loading the model in-process: after
//! load, after 100 queries, after 20 long passages; and (2) the per-user warm service
//! (`KDD_BINARY doctor --embed-server`, default the `kdd` built with this bench, in a private
//! socket directory) queried over its socket: after load, after 100 queries (with the median and
//! p90 query time), after 20 long passages. Passing an older `kdd` binary as the argument gives
//! the "before" figures of the same protocol. Needs the model installed (`./install.sh`).
//!
//! Measured (debug builds, 2 shared cores): see the README's memory paragraph — warm service
//! 437 → 190 MB after load, 439 → 192 MB after 100 queries, load peak 851 → 280 MB.

use kdd::cli::output;
use kdd::embed::model::{discover, ModelChoice, OrtEmbedder};
use kdd::embed::warm::{rss_kb_of, WarmClient};
use kdd::embed::Embedder;
use std::time::{Duration, Instant};

const QUERIES: [&str; 4] = [
    "Can an order be cancelled after it was shipped?",
    "password length policy",
    "¿quién aprueba una factura?",
    "release checklist",
];

fn say(s: &str) {
    let _ = output::data(s);
}

fn status_kb(pid: &str, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

fn mem(pid: &str, label: &str) {
    say(&format!(
        "{label:<40} VmRSS {:>4} MB  VmHWM {:>4} MB",
        rss_kb_of(pid) / 1024,
        status_kb(pid, "VmHWM:") / 1024
    ));
}

fn passages() -> Vec<String> {
    (0..20)
        .map(|i| format!("Un párrafo {i} sobre pedidos, envíos y devoluciones. ").repeat(20))
        .collect()
}

/// 100 queries; returns (median, p90) in ms.
fn queries(m: &mut dyn Embedder) -> (f64, f64) {
    let mut times: Vec<f64> = (0..100)
        .map(|i| {
            let t = Instant::now();
            m.embed_query(&format!("{} {i}", QUERIES[i % 4]))
                .expect("query");
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    (times[50], times[90])
}

fn measure(pid: &str, who: &str, m: &mut dyn Embedder) {
    mem(pid, &format!("{who}: after load"));
    let (median, p90) = queries(m);
    say(&format!(
        "{who}: 100 queries, median {median:.2} ms, p90 {p90:.2} ms"
    ));
    mem(pid, &format!("{who}: after 100 queries"));
    let t = Instant::now();
    m.embed_passages(&passages()).expect("passages");
    say(&format!(
        "{who}: 20 long passages, {:.1} ms each",
        t.elapsed().as_secs_f64() * 50.0
    ));
    mem(pid, &format!("{who}: after 20 long passages"));
}

pub fn run(args: &[String]) {
    let ModelChoice::Model(spec) = discover() else {
        say("memory: no real model selected (KDD_NO_EMBED / KDD_TEST_EMBEDDER set)");
        return;
    };
    let kdd = args
        .first()
        .cloned()
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_kdd").to_string());
    let run = tempfile::tempdir().expect("tempdir");
    let sock = run.path().join("bench.sock");
    let t = Instant::now();
    let mut child = std::process::Command::new(&kdd)
        .args(["doctor", "--embed-server"])
        .arg(&sock)
        .spawn()
        .expect("start the warm service");
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut client = loop {
        match WarmClient::connect(&sock, &spec, Duration::from_secs(60)) {
            Ok(c) => break c,
            Err(e) if Instant::now() > deadline => panic!("warm service: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let pid = client.status(&sock).expect("status").pid.to_string();
    client.embed_query("warm up").expect("first query");
    say(&format!(
        "warm service ({kdd}): ready in {:.2} s",
        t.elapsed().as_secs_f64()
    ));
    measure(&pid, "warm service", &mut client);
    let _ = child.kill();
    let _ = child.wait();

    let t = Instant::now();
    match OrtEmbedder::load(&spec) {
        Ok(mut m) => {
            say(&format!(
                "in-process: loaded in {:.2} s",
                t.elapsed().as_secs_f64()
            ));
            measure("self", "in-process", &mut m);
        }
        Err(e) => say(&format!("in-process: {e}")),
    }
}
