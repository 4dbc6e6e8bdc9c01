//! `cargo bench --bench bench -- hook [--specs N[,M…]] [--iters K] [--keep DIR]`: cost of the
//! pre-commit hook.
//!
//! For each size (default 1 000 and 10 000 specs) builds a temporary repository (under DIR with
//! `--keep`, left in place for profiling) with N synthetic specs and a committed index, then
//! measures, with the real `kdd-hook` binary as git runs it:
//! - the first run without a verification record (fresh clone / new cache);
//! - a commit touching no spec (the fast path; target well under 50 ms);
//! - a commit changing one spec (target < 0.5 s at L1);
//! - `git commit` wall time with and without the hook, for scale.

use kdd::cli::output;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn git(dir: &Path, args: &[&str]) {
    let o = cmd("git", dir).args(args).output().expect("git");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn cmd(program: &str, dir: &Path) -> Command {
    let mut c = Command::new(program);
    c.current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("KDD_NO_EMBED", "1")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_DIR");
    c
}

/// A small KDD entity/rule spec with a few links (the demo helper's generator replaces this
/// when it lands in `bench/synth.rs`).
fn synth_spec(i: usize, n: usize, salt: usize) -> (String, String) {
    let (dir, kind, id) = match i % 3 {
        0 => ("01-domain/entities", "entity", format!("Ent{i:05}")),
        1 => ("01-domain/rules", "business-rule", format!("BR-GEN-{i:05}")),
        _ => ("02-behavior/commands", "command", format!("CMD-{i:05}")),
    };
    let link = |k: usize| {
        let j = (i * 7 + k * 13) % n;
        match j % 3 {
            0 => format!("Ent{j:05}"),
            1 => format!("BR-GEN-{j:05}"),
            _ => format!("CMD-{j:05}"),
        }
    };
    let text = format!(
        "---\nid: {id}\nkind: {kind}\ntitle: Generated {id}\nstatus: draft\n---\n\n# {id}\n\n\
         ## Descripción\n\nGenerated spec {i} (rev {salt}) about [[{}]] and [[{}]].\n\n\
         ## Relaciones\n\n- [[{}]]\n",
        link(1),
        link(2),
        link(3)
    );
    (format!("specs/{dir}/{id}.md"), text)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn time_hook(dir: &Path) -> Duration {
    let t = Instant::now();
    let o = cmd(env!("CARGO_BIN_EXE_kdd-hook"), dir)
        .arg("pre-commit")
        .output()
        .expect("kdd-hook");
    let d = t.elapsed();
    assert!(o.status.success());
    d
}

/// Run the benchmark.
pub fn run(args: &[String]) {
    let mut sizes = vec![1_000usize, 10_000];
    let mut iters = 7usize;
    let mut keep: Option<std::path::PathBuf> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--specs" => {
                let list = it.next().map(String::as_str).unwrap_or_default();
                let parsed: Vec<usize> = list.split(',').filter_map(|v| v.parse().ok()).collect();
                if !parsed.is_empty() {
                    sizes = parsed;
                }
            }
            "--iters" => iters = it.next().and_then(|v| v.parse().ok()).unwrap_or(iters),
            "--keep" => keep = it.next().map(Into::into),
            _ => {}
        }
    }
    let mut summary = Vec::new();
    for n in sizes {
        let (none, one) = run_size(n, iters, keep.as_deref());
        summary.push(format!(
            "  {n:>6} specs: no spec changed {}, one spec changed {}",
            ms(none),
            ms(one)
        ));
    }
    output::data("hook bench summary (median kdd-hook pre-commit):").ok();
    for line in summary {
        output::data(&line).ok();
    }
}

/// One repository of `n` specs; returns the medians (no spec changed, one spec changed).
fn run_size(n: usize, iters: usize, keep: Option<&Path>) -> (Duration, Duration) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = match keep {
        Some(k) => k.join(format!("repo-{n}")),
        None => tmp.path().join("repo"),
    };
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cache = dir.with_extension("cache");
    let _ = std::fs::remove_dir_all(&cache);
    std::env::set_var("KDD_CACHE_DIR", &cache);
    git(&dir, &["init", "-q", "-b", "main"]);
    git(&dir, &["config", "user.name", "bench"]);
    git(&dir, &["config", "user.email", "bench@kdd.invalid"]);
    let t = Instant::now();
    for i in 0..n {
        let (p, text) = synth_spec(i, n, 0);
        let p = dir.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    std::fs::write(dir.join("README.md"), "bench\n").unwrap();
    git(&dir, &["add", "."]);
    let o = cmd(env!("CARGO_BIN_EXE_kdd"), &dir)
        .arg("index")
        .output()
        .unwrap();
    assert!(
        o.status.code() != Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    git(&dir, &["add", "."]);
    git(&dir, &["commit", "-q", "-m", "base"]);
    let o = cmd(env!("CARGO_BIN_EXE_kdd"), &dir)
        .arg("install")
        .output()
        .unwrap();
    assert!(o.status.success());
    output::data(&format!(
        "hook bench: {n} specs, setup {:.1} s",
        t.elapsed().as_secs_f64()
    ))
    .ok();

    // First run: no verification record, every staged node is checked once.
    let first = time_hook(&dir);
    output::data(&format!(
        "  first run (no record, {n} specs verified): {}",
        ms(first)
    ))
    .ok();

    // No-spec commit: stage a non-spec file, run the hook.
    let mut nospec = Vec::new();
    for k in 0..iters {
        std::fs::write(dir.join("README.md"), format!("bench {k}\n")).unwrap();
        git(&dir, &["add", "README.md"]);
        nospec.push(time_hook(&dir));
        git(&dir, &["commit", "-q", "--no-verify", "-m", "readme"]);
    }
    let nospec = median(nospec);
    output::data(&format!(
        "  commit touching no spec: median {} (kdd-hook process, {iters} runs)",
        ms(nospec)
    ))
    .ok();

    // One changed spec.
    let mut one = Vec::new();
    for k in 0..iters {
        let i = (k * 977) % n;
        let (p, text) = synth_spec(i, n, k + 1);
        std::fs::write(dir.join(&p), text).unwrap();
        git(&dir, &["add", &p]);
        one.push(time_hook(&dir));
        git(&dir, &["commit", "-q", "--no-verify", "-m", "one spec"]);
    }
    let one = median(one);
    output::data(&format!(
        "  commit changing one spec (L1): median {} ({iters} runs)",
        ms(one)
    ))
    .ok();

    // Whole `git commit` with and without the hook.
    let mut with = Vec::new();
    let mut without = Vec::new();
    for k in 0..iters {
        std::fs::write(dir.join("README.md"), format!("with {k}\n")).unwrap();
        git(&dir, &["add", "README.md"]);
        let t = Instant::now();
        git(&dir, &["commit", "-q", "-m", "with hook"]);
        with.push(t.elapsed());
        std::fs::write(dir.join("README.md"), format!("without {k}\n")).unwrap();
        git(&dir, &["add", "README.md"]);
        let t = Instant::now();
        let o = cmd("git", &dir)
            .env("KDD_HOOK", "0")
            .args(["commit", "-q", "--no-verify", "-m", "no hook"])
            .output()
            .unwrap();
        assert!(o.status.success());
        without.push(t.elapsed());
    }
    output::data(&format!(
        "  git commit (no spec): {} with hooks, {} without",
        ms(median(with)),
        ms(median(without))
    ))
    .ok();
    (nospec, one)
}
