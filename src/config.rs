//! Where things are: repository root, specs root, index and cache directories, model location.
//!
//! Resolution order for every setting: command-line flag → `KDD_*` environment variable →
//! `git config kdd.<name>` → default. All environment variable names live in [`env`].

use std::path::{Path, PathBuf};

pub use crate::paths::INDEX_DIR;

/// Every `KDD_*` environment variable the product reads, in one place.
pub mod env {
    /// Specs root relative to the repository root (default `specs`).
    pub const SPECS: &str = "KDD_SPECS";
    /// Documents roots, comma-separated, relative to the repository root (`docs,README.md`).
    pub const DOCS: &str = "KDD_DOCS";
    /// Cache directory (default `<git common dir>/kdd-cache`).
    pub const CACHE_DIR: &str = "KDD_CACHE_DIR";
    /// Local embedding model directory (fastembed user-defined model layout).
    pub const MODEL_DIR: &str = "KDD_MODEL_DIR";
    /// Model name under the data dir (`multilingual-e5-small-int8`, `all-MiniLM-L6-v2`).
    pub const MODEL: &str = "KDD_MODEL";
    /// Data directory holding `lib/` (ONNX Runtime) and `models/` (default `~/.local/share/kdd`).
    pub const DATA_DIR: &str = "KDD_DATA_DIR";
    /// Set to `0` to disable the git hooks.
    pub const HOOK: &str = "KDD_HOOK";
    /// Set to `0` to make the merge driver fall back to `git merge-file`.
    pub const MERGE: &str = "KDD_MERGE";
    /// Bearer token required by `kdd serve` when it binds a non-loopback address.
    pub const TOKEN: &str = "KDD_TOKEN";
    /// Force L1 (no embeddings) when set to `1`.
    pub const NO_EMBED: &str = "KDD_NO_EMBED";
    /// Use the deterministic hashed test embedder (tests only; never the shipped default).
    pub const TEST_EMBEDDER: &str = "KDD_TEST_EMBEDDER";
    /// Set to `0` to never use (or start) the warm embedder process.
    pub const EMBED_WARM: &str = "KDD_EMBED_WARM";
    /// Idle lifetime of the per-user warm embedding service in seconds (default 600).
    pub const EMBED_IDLE: &str = "KDD_EMBED_IDLE_S";
    /// The older name of [`EMBED_IDLE`], still honoured.
    pub const EMBED_IDLE_LEGACY: &str = "KDD_EMBED_IDLE";
    /// Set to `1` to make `kdd serve` / `kdd mcp` load the embedding model at start instead of
    /// on the first semantic query.
    pub const EMBED_PRELOAD: &str = "KDD_EMBED_PRELOAD";
    /// Set to `off` to never translate cross-lingual queries.
    pub const TRANSLATE: &str = "KDD_TRANSLATE";
    /// Translator program for cross-lingual queries (default `apertium -u <pair>`).
    pub const TRANSLATOR: &str = "KDD_TRANSLATOR";
    /// `0`: index specs without their translation; `all`: no cap on one build's translations.
    pub const DOC_TRANSLATE: &str = "KDD_DOC_TRANSLATE";
}

/// True when the environment variable `name` switches something off (`off`, `0`, `false` or
/// `no`, any case); unset or anything else leaves it on.
pub fn env_off(name: &str) -> bool {
    matches!(
        std::env::var(name)
            .unwrap_or_default()
            .to_ascii_lowercase()
            .as_str(),
        "off" | "0" | "false" | "no"
    )
}

/// Errors locating the repository.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {} (check -C / --repo)", if path.exists() { "not a directory" } else { "no such directory" })]
    NoSuchDir { path: PathBuf },
    #[error("{path}: not inside a git repository (run `git init` first, or pass --repo)")]
    NotARepo { path: PathBuf },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// Resolved locations for one invocation.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Work-tree root; for a bare repository, the git directory.
    pub repo_root: PathBuf,
    /// The git directory shared by all worktrees (`.git`, or the bare repo itself).
    pub git_common_dir: PathBuf,
    /// True for a bare repository (no work tree).
    pub bare: bool,
    /// Specs root relative to `repo_root`, `/`-separated, no leading `./` (default `specs`).
    pub specs_root: String,
    /// Documents roots (`--docs` → `KDD_DOCS` → `git config kdd.docs` → the committed
    /// manifest's, see `index::with_manifest_specs_root`), normalised and sorted.
    pub docs_roots: Vec<String>,
    /// `<repo_root>/.kdd-index`.
    pub index_dir: PathBuf,
    /// Derived query cache (never committed).
    pub cache_dir: PathBuf,
}

impl Settings {
    /// Discover the repository containing `start` and resolve every location.
    pub fn discover(start: &Path, specs_override: Option<&str>) -> Result<Settings, Error> {
        // Made absolute first: gix does not find a bare repository by a relative path such as
        // `../server.git` when the current directory is inside another repository's work tree.
        if !start.is_dir() {
            return Err(Error::NoSuchDir {
                path: start.to_path_buf(),
            });
        }
        let repo = gix::discover(absolute(start)).map_err(|_| Error::NotARepo {
            path: start.to_path_buf(),
        })?;
        let git_common_dir = absolute(repo.common_dir());
        let (repo_root, bare) = match repo.workdir() {
            Some(w) => (absolute(w), false),
            None => (absolute(repo.git_dir()), true),
        };
        let from_git = repo
            .config_snapshot()
            .string("kdd.specs")
            .map(|s| s.to_string());
        let specs = specs_override
            .map(str::to_string)
            .or_else(|| std::env::var(env::SPECS).ok().filter(|s| !s.is_empty()))
            .or(from_git)
            .unwrap_or_else(|| "specs".to_string());
        let specs_root = normalize_rel(&specs).ok_or_else(|| Error::Invalid {
            path: PathBuf::from(&specs),
            message: "the specs root must be a relative path inside the repository".into(),
        })?;
        let docs = std::env::var(env::DOCS).ok().or_else(|| {
            repo.config_snapshot()
                .string("kdd.docs")
                .map(|s| s.to_string())
        });
        let docs_roots =
            crate::roots::parse_docs(docs.as_deref().unwrap_or("")).map_err(|message| {
                Error::Invalid {
                    path: PathBuf::from("kdd.docs"),
                    message,
                }
            })?;
        let cache_dir = match std::env::var_os(env::CACHE_DIR) {
            Some(d) if !d.is_empty() => {
                chosen_cache_dir(Path::new(&d), &repo_root, &git_common_dir)?
            }
            _ => git_common_dir.join("kdd-cache"),
        };
        Ok(Settings {
            index_dir: repo_root.join(INDEX_DIR),
            repo_root,
            git_common_dir,
            bare,
            specs_root,
            docs_roots,
            cache_dir,
        })
    }

    /// The specs root and documents roots.
    pub fn roots(&self) -> crate::roots::Roots {
        crate::roots::Roots::new(&self.specs_root, &self.docs_roots)
    }

    /// Absolute specs directory in the work tree.
    pub fn specs_dir(&self) -> PathBuf {
        self.repo_root.join(&self.specs_root)
    }

    /// A string from the repository's git configuration (`kdd.agent`), read fresh.
    pub fn git_config(&self, key: &str) -> Option<String> {
        let repo = gix::discover(&self.repo_root).ok()?;
        let v = repo.config_snapshot().string(key)?.to_string();
        Some(v).filter(|v| !v.trim().is_empty())
    }
}

/// `KDD_CACHE_DIR` checked: an absolute path outside the work tree (or inside the git
/// directory), so the cache is never committed with `git add .kdd-index` nor read as specs,
/// and a relative value never lands wherever the command happened to run.
fn chosen_cache_dir(dir: &Path, repo_root: &Path, git_dir: &Path) -> Result<PathBuf, Error> {
    let refuse = |message: &str| {
        Error::Invalid {
        path: dir.to_path_buf(),
        message: format!("KDD_CACHE_DIR {message}; unset it (the default is inside the git directory) or point it at a folder outside the repository"),
    }
    };
    if !dir.is_absolute() {
        return Err(refuse("must be an absolute path"));
    }
    // Its nearest existing ancestor resolved (links included), the rest appended: the cache
    // folder need not exist yet.
    let mut existing = dir.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (
            existing.file_name().map(|n| n.to_os_string()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let mut real = absolute(&existing);
    real.extend(rest.iter().rev());
    if real.starts_with(repo_root) && !real.starts_with(git_dir) {
        return Err(refuse("is inside the repository's work tree"));
    }
    Ok(dir.to_path_buf())
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

pub use crate::paths::normalize_rel;

#[cfg(test)]
mod tests {
    use super::normalize_rel;

    #[test]
    fn rel_paths() {
        assert_eq!(normalize_rel("./specs/").as_deref(), Some("specs"));
        assert_eq!(normalize_rel("docs\\specs").as_deref(), Some("docs/specs"));
        assert_eq!(normalize_rel("../x"), None);
        assert_eq!(normalize_rel("/abs"), None);
    }
}
