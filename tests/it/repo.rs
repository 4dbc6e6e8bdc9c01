//! Temporary git repositories isolated from the user's git configuration, and running the real binaries (used by the git and serve tests).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Directory holding the built binaries (`kdd`, `kdd-hook`, `kdd-merge-driver`).
pub fn bin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kdd"))
        .parent()
        .expect("bin dir")
        .to_path_buf()
}

/// A `Command` for `program` in `dir`, isolated from global/system git config, with the kdd
/// binaries first on PATH.
pub fn command(program: impl AsRef<std::ffi::OsStr>, dir: &Path) -> Command {
    let mut c = Command::new(program);
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin_dir()];
    paths.extend(std::env::split_paths(&path));
    c.current_dir(dir)
        .env("PATH", std::env::join_paths(paths).expect("PATH"))
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "kdd test")
        .env("GIT_AUTHOR_EMAIL", "test@kdd.invalid")
        .env("GIT_COMMITTER_NAME", "kdd test")
        .env("GIT_COMMITTER_EMAIL", "test@kdd.invalid")
        .env("GIT_EDITOR", "true")
        .env("GIT_MERGE_AUTOEDIT", "no")
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_WORK_TREE")
        .env_remove("KDD_HOOK")
        .env_remove("KDD_MERGE")
        .env_remove("KDD_SPECS")
        .env_remove("KDD_TRANSLATOR")
        .env("KDD_TRANSLATE", "off")
        .env("KDD_NO_EMBED", "1");
    c
}

/// Output as text (stdout, stderr).
pub fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A temporary git repository (deleted on drop).
pub struct Repo {
    pub tmp: tempfile::TempDir,
    pub dir: PathBuf,
}

impl Repo {
    /// `git init -b main` with a local identity.
    pub fn new() -> Repo {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("repo");
        std::fs::create_dir_all(&dir).unwrap();
        let r = Repo { tmp, dir };
        r.git(&["init", "-q", "-b", "main"]);
        r.git(&["config", "user.name", "kdd test"]);
        r.git(&["config", "user.email", "test@kdd.invalid"]);
        r
    }

    /// A repository object for another directory (clone, worktree) sharing this temp dir.
    pub fn at(&self, dir: PathBuf) -> Repo {
        Repo {
            tmp: tempfile::tempdir().expect("tempdir"),
            dir,
        }
    }

    /// `git clone` the repository at `from` into `<tmp>/name`, with a committer identity.
    pub fn clone_of(&self, from: &Path, name: &str) -> Repo {
        let c = self.at(self.tmp.path().join(name));
        self.git(&[
            "clone",
            "-q",
            from.to_str().unwrap(),
            c.dir.to_str().unwrap(),
        ]);
        c.git(&["config", "user.name", name]);
        c.git(&["config", "user.email", &format!("{name}@kdd.invalid")]);
        c
    }

    /// `git clone` this repository into `<tmp>/name`; the clone's path.
    pub fn clone_to(&self, name: &str) -> PathBuf {
        let dest = self.tmp.path().join(name);
        self.git(&[
            "clone",
            "-q",
            self.dir.to_str().expect("utf-8 path"),
            dest.to_str().expect("utf-8 path"),
        ]);
        dest
    }

    /// Run git; panic with its output on failure; return stdout.
    pub fn git(&self, args: &[&str]) -> String {
        let o = self.git_out(args);
        let (out, err) = text(&o);
        assert!(o.status.success(), "git {args:?} failed:\n{out}\n{err}");
        out
    }

    /// Run git and return the raw output.
    pub fn git_out(&self, args: &[&str]) -> Output {
        command("git", &self.dir)
            .args(args)
            .output()
            .expect("run git")
    }

    /// Run the `kdd` binary.
    pub fn kdd(&self, args: &[&str]) -> Output {
        command(env!("CARGO_BIN_EXE_kdd"), &self.dir)
            .args(args)
            .output()
            .expect("run kdd")
    }

    /// Write a file (creating directories).
    pub fn write(&self, rel: &str, content: &str) {
        let p = self.dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    /// Read a file as text.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    /// True when a work-tree path exists.
    pub fn exists(&self, rel: &str) -> bool {
        self.dir.join(rel).exists()
    }
}

/// Spawn `kdd serve` as configured in `c` (its stdout and stdin are silenced, stderr is read)
/// and wait up to 60 s until it says where it listens: the child and its `host:port`, or the
/// whole log when it exits first (a refused start).
pub fn spawn_serve(mut c: Command) -> Result<(std::process::Child, String), String> {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn kdd serve");
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        let mut all = String::new();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            all.push_str(&line);
            all.push('\n');
            if let Some(a) = line.split("listening on http://").nth(1) {
                if let Some(t) = tx.take() {
                    let _ = t.send(Ok(a.trim().to_string()));
                }
            }
        }
        if let Some(t) = tx.take() {
            let _ = t.send(Err(all));
        }
    });
    match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(Ok(addr)) => Ok((child, addr)),
        Ok(Err(log)) => {
            let _ = child.wait();
            Err(log)
        }
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            Err("kdd serve did not start within 60 s".into())
        }
    }
}

/// A `kdd mcp` session over stdio, the one test client: JSON-RPC requests answered one at a
/// time, every stdout line asserted to be JSON-RPC (stdout is the protocol), answers awaited at
/// most 60 s. The child is killed on drop.
pub struct Mcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
    next: u64,
}

impl Mcp {
    /// `kdd mcp` in `dir`, not yet initialised.
    pub fn start(dir: &Path) -> Mcp {
        let mut c = command(env!("CARGO_BIN_EXE_kdd"), dir);
        c.arg("mcp");
        Mcp::spawn(c)
    }

    /// Spawn `c` (a configured `kdd mcp` command) with piped stdin and stdout.
    pub fn spawn(mut c: Command) -> Mcp {
        use std::io::{BufRead, BufReader};
        use std::process::Stdio;
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn kdd mcp");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Mcp {
            child,
            stdin,
            lines: rx,
            next: 1,
        }
    }

    /// The MCP handshake (`initialize`, then `notifications/initialized`); returns the answer.
    pub fn initialize(&mut self) -> serde_json::Value {
        let init = self.request(
            "initialize",
            serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "kdd-test", "version": "1"}}),
        );
        self.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        init
    }

    /// Write one JSON-RPC message.
    pub fn send(&mut self, v: &serde_json::Value) {
        use std::io::Write;
        writeln!(self.stdin, "{v}").expect("write to kdd mcp");
        self.stdin.flush().expect("flush kdd mcp");
    }

    /// Send a request and wait for the answer with its id.
    pub fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let id = self.next;
        self.next += 1;
        self.send(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
        loop {
            let line = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|_| {
                    panic!("no MCP answer within 60 s: {:?}", self.child.try_wait())
                });
            let v: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("non-JSON line on MCP stdout ({e}): {line}"));
            assert_eq!(v["jsonrpc"], "2.0", "{line}");
            if v["id"] == serde_json::json!(id) {
                return v;
            }
        }
    }

    /// Call a tool; returns (is_error, its JSON text parsed).
    pub fn call(&mut self, name: &str, args: serde_json::Value) -> (bool, serde_json::Value) {
        let r = self.request(
            "tools/call",
            serde_json::json!({"name": name, "arguments": args}),
        );
        let res = &r["result"];
        assert!(res.is_object(), "{name}: {r}");
        let text = res["content"][0]["text"].as_str().expect("text content");
        (
            res["isError"].as_bool().unwrap_or(false),
            serde_json::from_str(text).expect("JSON text"),
        )
    }

    /// Call a tool with raw `params` JSON; the whole answer as one line of text.
    pub fn call_raw(&mut self, params: &str) -> String {
        let params = serde_json::from_str(params).expect("params are JSON");
        self.request("tools/call", params).to_string()
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
