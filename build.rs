//! Build script: tells the integration tests what this machine has, so tests that need the real
//! embedding model or the shared corpus are reported as ignored (with the reason) when it is
//! absent, instead of passing silently.
//!
//! - `kdd_real_model`: the default model's `model.onnx` is installed where the product looks
//!   (`KDD_DATA_DIR`, else `${XDG_DATA_HOME:-~/.local/share}/kdd`, then
//!   `models/<KDD_MODEL or multilingual-e5-small-int8>/model.onnx`) together with the ONNX
//!   Runtime library (`ORT_DYLIB_PATH`, else `lib/libonnxruntime.so*` there).
//! - `kdd_shared`: `../shared/corpus` (or `../../shared/corpus` for a git worktree) exists.
//! - `kdd_hook_managers`: `lefthook` and `husky` (npm packages) are on `PATH`.
//!
//! Invariants: the script only reads (never writes outside `OUT_DIR`), and it re-runs when the
//! environment variables above change or when the watched paths appear or change. A missing
//! model is watched through its nearest existing ancestor up to the data dir's parent (never
//! wider: cargo scans a watched directory); a missing `shared/` is not watched (touch
//! `build.rs` after adding it).

use std::path::{Path, PathBuf};

const DEFAULT_MODEL: &str = "multilingual-e5-small-int8";

fn env_nonempty(name: &str) -> Option<String> {
    println!("cargo:rerun-if-env-changed={name}");
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Watch `p`, or while it does not exist its nearest existing ancestor inside `limit`.
fn watch(p: &Path, limit: &Path) {
    let mut cur = Some(p);
    while let Some(c) = cur {
        if !c.starts_with(limit) {
            return;
        }
        if c.exists() {
            println!("cargo:rerun-if-changed={}", c.display());
            return;
        }
        cur = c.parent();
    }
}

fn data_dir() -> Option<PathBuf> {
    if let Some(d) = env_nonempty("KDD_DATA_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(x) = env_nonempty("XDG_DATA_HOME") {
        return Some(PathBuf::from(x).join("kdd"));
    }
    env_nonempty("HOME").map(|h| PathBuf::from(h).join(".local/share/kdd"))
}

fn real_model() -> bool {
    let Some(data) = data_dir() else {
        return false;
    };
    let name = env_nonempty("KDD_MODEL").unwrap_or_else(|| DEFAULT_MODEL.to_string());
    let model = data.join("models").join(name).join("model.onnx");
    let limit = data.parent().unwrap_or(&data).to_path_buf();
    watch(&model, &limit);
    let runtime = match env_nonempty("ORT_DYLIB_PATH") {
        Some(p) => PathBuf::from(p),
        None => data.join("lib/libonnxruntime.so"),
    };
    watch(&runtime, &limit);
    model.is_file() && runtime.exists()
}

fn shared() -> bool {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let candidates = [
        root.join("../shared/corpus"),
        root.join("../../shared/corpus"),
    ];
    for c in &candidates {
        watch(c, c);
    }
    candidates.iter().any(|c| c.is_dir())
}

fn on_path(name: &str) -> bool {
    let Some(path) = env_nonempty("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|d| d.join(name).is_file())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(kdd_real_model)");
    println!("cargo::rustc-check-cfg=cfg(kdd_shared)");
    println!("cargo::rustc-check-cfg=cfg(kdd_hook_managers)");
    println!("cargo::rustc-check-cfg=cfg(kdd_apertium)");
    println!("cargo::rustc-check-cfg=cfg(kdd_root)");
    // Apertium with the eng-spa pair (Debian packages): the warm-translation tests run.
    let mode = Path::new("/usr/share/apertium/modes/eng-spa.mode");
    watch(mode, mode);
    if mode.is_file() && on_path("apertium") && on_path("apertium-wblank-mode") {
        println!("cargo:rustc-cfg=kdd_apertium");
    }
    if on_path("lefthook") && on_path("husky") {
        println!("cargo:rustc-cfg=kdd_hook_managers");
    }
    // Root (the owner of /proc/self): the tests that mount a tiny tmpfs (a full disk) run.
    {
        use std::os::unix::fs::MetadataExt;
        if std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0) && on_path("mount") {
            println!("cargo:rustc-cfg=kdd_root");
        }
    }
    if real_model() {
        println!("cargo:rustc-cfg=kdd_real_model");
    }
    if shared() {
        println!("cargo:rustc-cfg=kdd_shared");
    }
}
