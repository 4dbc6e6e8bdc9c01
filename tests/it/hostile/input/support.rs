//! Helpers of the hostile input tests: a child run under a heap `ulimit` with its peak RSS
//! and wall time (`/usr/bin/time`), and a minimal `kdd mcp` session.

use crate::repo::{command, text};
use std::path::Path;
use std::process::Output;
use std::time::Instant;

/// Heap cap of every bounded run, in KiB (`ulimit -d`; LMDB's file-backed map does not count).
pub const HEAP_KIB: u64 = 1024 * 1024;

/// A run of a program under the heap cap: output, peak RSS (KiB) and wall time.
pub struct Bounded {
    pub out: Output,
    pub rss_kib: u64,
    pub secs: f64,
}

impl Bounded {
    pub fn all(&self) -> String {
        let (o, e) = text(&self.out);
        format!("{o}\n{e}")
    }
}

pub fn bounded_env(dir: &Path, program: &str, args: &[&str], env: &[(&str, &str)]) -> Bounded {
    let stats = tempfile::NamedTempFile::new().unwrap();
    let script = format!(
        "ulimit -d {HEAP_KIB}; exec /usr/bin/time -o '{}' -f '%M %e' \"$@\"",
        stats.path().display()
    );
    let mut c = command("bash", dir);
    c.args(["-c", &script, "bounded", program]).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let t = Instant::now();
    let out = c.output().expect("run bounded");
    let secs = t.elapsed().as_secs_f64();
    let s = std::fs::read_to_string(stats.path()).unwrap_or_default();
    let rss_kib = s
        .lines()
        .last()
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Bounded { out, rss_kib, secs }
}

pub fn bounded(dir: &Path, program: &str, args: &[&str]) -> Bounded {
    bounded_env(dir, program, args, &[])
}

pub fn kdd_bin() -> String {
    env!("CARGO_BIN_EXE_kdd").to_string()
}
