//! Hostile cases: the embedding service dying, going stale or going silent (see the module doc
//! in `mod.rs`). Each runs the real binaries with the deterministic embedder behind the warm
//! service (`KDD_TEST_EMBEDDER=1`, `KDD_EMBED_WARM=1`) in its own `XDG_RUNTIME_DIR`.
//!
//! Asserted: a service killed in the middle of `kdd index` never costs vectors (the client
//! reconnects or loads in-process) and the manifest never claims L2 for specs without them; a
//! stale socket file is replaced; a socket that answers garbage never means a silent L1; the
//! socket is 0600 in a 0700 directory; `verify` reports nodes lacking vectors at L2.

use crate::embed::flow::{ok, Env};
use crate::repo::Repo;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

fn write_specs(r: &Repo, n: usize) {
    for i in 0..n {
        r.write(
            &format!("specs/01-domain/rules/BR-R{i:03}.md"),
            &format!(
                "---\nid: BR-R{i:03}\nkind: business-rule\n---\n# BR-R{i:03}: Regla {i}\n\n## Declaración\n\nLa regla número {i} limita los pedidos de la categoría {i} a importes razonables.\n\n## Por qué existe\n\nPorque la categoría {i} tiene un riesgo propio que conviene acotar.\n"
            ),
        );
    }
}

fn manifest_level(r: &Repo) -> String {
    let m: serde_json::Value =
        serde_json::from_str(&r.read(".kdd-index/manifest.json")).expect("manifest");
    m["index_level"].as_str().unwrap_or_default().to_string()
}

fn service_pid(env: &Env) -> Option<u32> {
    let socket = env.sockets().pop()?;
    let spec = kdd::embed::model::ModelSpec::test();
    let mut c =
        kdd::embed::warm::WarmClient::connect(&socket, &spec, Duration::from_secs(5)).ok()?;
    c.status(&socket).ok().map(|s| s.pid)
}

/// Commit what `kdd index` wrote (no hooks installed) and run `kdd verify`.
fn commit_and_verify(env: &Env, r: &Repo) -> std::process::Output {
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "index"]);
    env.kdd(&r.dir, &["verify"])
}

#[test]
fn service_killed_mid_index_still_completes_with_vectors() {
    let env = Env::new(false);
    let r = Repo::new();
    write_specs(&r, 24);
    // ~2 chunks a spec, 40 ms each: the run takes about 2 s, the kill lands in the middle.
    let child = env
        .cmd(env!("CARGO_BIN_EXE_kdd"), &r.dir)
        .args(["index"])
        .env("KDD_TEST_EMBED_DELAY_MS", "40")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn kdd index");
    let t = Instant::now();
    let pid = loop {
        if let Some(p) = service_pid(&env) {
            break p;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no service started");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(500));
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let o = child.wait_with_output().expect("index");
    let text = ok(&o);
    assert_eq!(manifest_level(&r), "L2", "{text}");
    let v = commit_and_verify(&env, &r);
    assert!(v.status.success(), "{}", crate::util::text(&v));
}

#[test]
fn stale_socket_file_is_replaced_and_permissions_are_tight() {
    let env = Env::new(false);
    let spec = kdd::embed::model::ModelSpec::test();
    let dir = env.service_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join(format!("embed-{}.sock", kdd::embed::warm::model_key(&spec)));
    // A service that died without cleaning up: the socket file exists, nobody listens.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let r = Repo::new();
    write_specs(&r, 3);
    let text = ok(&env.kdd(&r.dir, &["index"]));
    assert_eq!(manifest_level(&r), "L2", "{text}");
    // The stale file was replaced by a live service: 0600 socket in a 0700 directory.
    assert!(
        service_pid(&env).is_some(),
        "no live service after a stale socket"
    );
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&socket), 0o600);
    let v = commit_and_verify(&env, &r);
    assert!(v.status.success(), "{}", crate::util::text(&v));
}

#[test]
fn a_socket_answering_garbage_never_means_silent_l1() {
    let env = Env::new(false);
    let spec = kdd::embed::model::ModelSpec::test();
    let dir = env.service_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join(format!("embed-{}.sock", kdd::embed::warm::model_key(&spec)));
    // Something holds the socket and answers garbage (then hangs up).
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    listener.set_nonblocking(true).unwrap();
    let stop2 = stop.clone();
    let h = std::thread::spawn(move || {
        use std::io::Write;
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut c, _)) => {
                    let _ = c.write_all(b"\x00\x00\x00\x05hello");
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    let r = Repo::new();
    write_specs(&r, 3);
    let t = Instant::now();
    let text = ok(&env.kdd(&r.dir, &["index"]));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    h.join().unwrap();
    println!(
        "index beside a garbage socket: {:.2}s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(manifest_level(&r), "L2", "{text}");
    assert!(!text.contains("L1"), "{text}");
    let v = commit_and_verify(&env, &r);
    assert!(v.status.success(), "{}", crate::util::text(&v));
}

#[test]
fn verify_reports_nodes_lacking_vectors_at_l2() {
    let env = Env::new(false);
    let r = Repo::new();
    write_specs(&r, 3);
    ok(&env.kdd(&r.dir, &["index"]));
    let v = commit_and_verify(&env, &r);
    assert!(v.status.success(), "{}", crate::util::text(&v));
    // Vectors lost (the silent-loss shape of issue 11 item 7): the manifest still says L2.
    std::fs::remove_file(
        r.dir
            .join(".kdd-index/embeddings/business-rule/BR-R001.bin"),
    )
    .unwrap();
    let v = commit_and_verify(&env, &r);
    let text = crate::util::text(&v);
    assert_eq!(v.status.code(), Some(1), "{text}");
    assert!(text.contains("no-vectors\tBR:BR-R001"), "{text}");
    assert!(!text.contains("BR:BR-R000"), "{text}");
}
