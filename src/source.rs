//! Source: the ONE rule for reading spec bytes from a work tree, and for trusting a spec path
//! that comes out of a committed artifact. Lowest I/O module of the pipeline (below `parse`);
//! every reader of spec bytes (`index`, `cache`, `status`, `serve`, MCP `kdd_read`) goes through
//! it, and `git` applies the same rule to blobs (symlink entries are never read as specs).
//!
//! Invariants:
//! - [`walk_specs`] lists the regular spec files under the specs root with the `ignore` walker,
//!   never following a symbolic link (a link inside the tree, or a specs root reached through a
//!   link, is never entered). A link (or other non-regular file) named like a spec is an
//!   **error** diagnostic naming the file — the same message the pre-commit hook gives for a
//!   staged link blob (mode 120000) — so a linked spec is never indexed by one and skipped by
//!   the other. Hidden names are skipped as before; `.gitignore` files are NOT consulted (what is
//!   indexed stays what git commits).
//! - `<specs root>/.kddignore` (gitignore syntax, paths relative to the specs root) excludes
//!   specs. [`Ignore`] is built from its bytes wherever they come from — the work tree, the
//!   staged blob (hook), a committed tree (`verify`, the bare mirror) — so every reader
//!   excludes exactly the same specs. A bad line is skipped.
//! - [`read_spec`] reads a repo-relative spec path only after [`check_rel`] accepted it, refuses
//!   a symlink at any component (the last with `O_NOFOLLOW`, the folders with
//!   `symlink_metadata`), refuses anything but a regular file (fstat of the open descriptor, so
//!   FIFOs and devices are never read), and never reads more than [`MAX_SPEC_BYTES`] + 1 bytes.
//! - [`check_rel`] accepts only a relative, already normalised `/`-path without `.`/`..`/empty
//!   components, NUL, backslashes or control characters, that names a spec under the specs root
//!   ([`is_spec_path`]). Anything else is an [`Error::BadPath`] and is never opened.
//! - Documents (`crate::roots`) are listed by the same walker ([`walk_root`]) and read by the
//!   same read ([`read_checked`]), after their own path check.
//! - Every error names the file (repo-relative) and says what to do.

use crate::spec::{Diagnostic, Severity};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::paths::INDEX_DIR;

/// Files larger than this are skipped with an error (specs are small; this is a safety cap).
pub const MAX_SPEC_BYTES: usize = 5 * 1024 * 1024;

/// Why a spec file could not be listed or read. `path` is repo-relative.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {}", symlink_message())]
    Symlink { path: String },
    #[error("{path}: not a regular file (a device, FIFO or socket); not indexed — remove it from the specs root")]
    NotRegular { path: String },
    #[error("{path}: {}", too_large_message(*len))]
    TooLarge { path: String, len: u64 },
    #[error("{path}: cannot read: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a path kdd reads ({why}); never read — rename a file named so, or re-run `kdd index` to rewrite an artifact that names it")]
    BadPath { path: String, why: &'static str },
    #[error("{path}: specs directory not found; create it, or pass --specs DIR / set KDD_SPECS / `git config kdd.specs DIR`")]
    SpecsMissing { path: PathBuf },
}

fn symlink_message() -> &'static str {
    "is a symbolic link; kdd never follows links in the specs tree (one could expose a file from \
     outside the repository); not indexed — commit the file itself instead of a link"
}

fn too_large_message(len: u64) -> String {
    format!(
        "file is {len} bytes, over the {} MB limit for a spec; skipped (split it, or move it out of the folders kdd indexes)",
        MAX_SPEC_BYTES / (1024 * 1024)
    )
}

impl Error {
    /// The repo-relative path the error is about.
    pub fn path(&self) -> String {
        match self {
            Error::Symlink { path }
            | Error::NotRegular { path }
            | Error::TooLarge { path, .. }
            | Error::Io { path, .. }
            | Error::BadPath { path, .. } => path.clone(),
            Error::SpecsMissing { path } => path.display().to_string(),
        }
    }

    /// The per-file error diagnostic for this error (file = the path, message without it).
    pub fn diagnostic(&self) -> Diagnostic {
        let path = self.path();
        let full = self.to_string();
        let message = full
            .strip_prefix(&format!("{path}: "))
            .unwrap_or(&full)
            .to_string();
        Diagnostic {
            severity: Severity::Error,
            file: path,
            line: None,
            message,
        }
    }
}

/// The diagnostic of a spec path that is a symbolic link (work tree or staged/committed blob of
/// mode 120000): identical in `kdd index`, the hook, `verify` and the bare mirror.
pub fn symlink_diagnostic(path: &str) -> Diagnostic {
    Error::Symlink {
        path: path.to_string(),
    }
    .diagnostic()
}

/// The per-file errors of the symbolic links among `links` (staged or committed paths) that
/// name specs kept by `keep`.
pub fn link_errors(links: Vec<String>, keep: impl Fn(&String) -> bool) -> Vec<Diagnostic> {
    links
        .into_iter()
        .filter(|p| keep(p))
        .map(|p| symlink_diagnostic(&printable(&p)))
        .collect()
}

/// True for paths the indexer reads: `.md`/`.markdown`/`.feature` files under `specs_root`, not
/// hidden, not `_`-prefixed files, not under `.kdd-index/`.
pub fn is_spec_path(path: &str, specs_root: &str) -> bool {
    let rel = if specs_root.is_empty() {
        path
    } else {
        match path
            .strip_prefix(specs_root)
            .and_then(|r| r.strip_prefix('/'))
        {
            Some(r) => r,
            None => return false,
        }
    };
    let comps: Vec<&str> = rel.split('/').collect();
    if comps.iter().any(|c| c.is_empty() || c.starts_with('.')) {
        return false;
    }
    if comps.first() == Some(&INDEX_DIR) {
        return false;
    }
    let file = comps.last().copied().unwrap_or("");
    !file.starts_with('_')
        && (file.ends_with(".md") || file.ends_with(".markdown") || file.ends_with(".feature"))
}

/// Validate a repo-relative spec path taken from a committed artifact (`source_file`, an id
/// used as a path) or a client: see the module doc. Returns the path unchanged when accepted.
pub fn check_rel(rel: &str, specs_root: &str) -> Result<String, Error> {
    let bad = |why| {
        Err(Error::BadPath {
            path: printable(rel),
            why,
        })
    };
    if rel.is_empty() {
        return bad("empty path");
    }
    if rel.starts_with('/') || (rel.len() > 1 && rel.as_bytes()[1] == b':') {
        return bad("absolute path");
    }
    if rel.chars().any(|c| c == '\\' || c.is_control()) {
        return bad("backslash or control character");
    }
    // A name that is not UTF-8 reaches kdd with U+FFFD in place of its bytes (git and the
    // walk alike): refused everywhere, so no reader indexes it under a name that is not its own.
    if rel.contains('\u{FFFD}') {
        return bad("a file name that is not valid UTF-8");
    }
    if rel
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return bad("`.`, `..` or empty component");
    }
    if !is_spec_path(rel, specs_root) {
        return bad("not a .md/.markdown/.feature file under the specs root");
    }
    Ok(rel.to_string())
}

/// A path safe to echo in a diagnostic: the project's one escaper for control characters
/// ([`crate::spec::escape_control`]).
pub fn printable(s: &str) -> String {
    crate::spec::escape_control(s).into_owned()
}

/// Read one spec of the work tree under the one rule (see the module doc).
pub fn read_spec(repo_root: &Path, rel: &str, specs_root: &str) -> Result<Vec<u8>, Error> {
    let rel = check_rel(rel, specs_root)?;
    read_checked(repo_root, &rel)
}

/// [`read_spec`] after the path check (also the read of documents, `crate::roots`): no link at
/// any component, a regular file, at most [`MAX_SPEC_BYTES`].
pub fn read_checked(repo_root: &Path, rel: &str) -> Result<Vec<u8>, Error> {
    let rel = rel.to_string();
    // Folders: never through a link (O_NOFOLLOW only guards the last component).
    let comps: Vec<&str> = rel.split('/').collect();
    let mut dir = repo_root.to_path_buf();
    for (i, c) in comps[..comps.len() - 1].iter().enumerate() {
        dir.push(c);
        match std::fs::symlink_metadata(&dir) {
            Ok(md) if md.file_type().is_symlink() => {
                return Err(Error::Symlink {
                    path: comps[..=i].join("/"),
                })
            }
            Ok(_) => {}
            Err(source) => return Err(Error::Io { path: rel, source }),
        }
    }
    read_regular(&repo_root.join(&rel), &rel, MAX_SPEC_BYTES)
}

/// Open `abs` without following a final symlink, check it is a regular file of at most `cap`
/// bytes, and read at most `cap + 1` bytes. `shown` names it in errors.
pub fn read_regular(abs: &Path, shown: &str, cap: usize) -> Result<Vec<u8>, Error> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = || shown.to_string();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(abs)
        .map_err(|source| {
            if source.raw_os_error() == Some(libc::ELOOP) {
                Error::Symlink { path: path() }
            } else {
                Error::Io {
                    path: path(),
                    source,
                }
            }
        })?;
    let md = file.metadata().map_err(|source| Error::Io {
        path: path(),
        source,
    })?;
    if !md.file_type().is_file() {
        return Err(Error::NotRegular { path: path() });
    }
    if md.len() > cap as u64 {
        return Err(Error::TooLarge {
            path: path(),
            len: md.len(),
        });
    }
    let mut bytes = Vec::with_capacity(md.len() as usize);
    file.take(cap as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| Error::Io {
            path: path(),
            source,
        })?;
    if bytes.len() > cap {
        return Err(Error::TooLarge {
            path: path(),
            len: bytes.len() as u64,
        });
    }
    Ok(bytes)
}

/// Name of the ignore file at the specs root.
pub const KDDIGNORE: &str = ".kddignore";

/// Repo-relative path of `<specs root>/.kddignore`.
pub fn kddignore_path(specs_root: &str) -> String {
    if specs_root.is_empty() {
        KDDIGNORE.to_string()
    } else {
        format!("{specs_root}/{KDDIGNORE}")
    }
}

/// Patterns a `.kddignore` may hold; later lines are skipped (and named).
pub const MAX_IGNORE_PATTERNS: usize = 1000;
/// Longest `.kddignore` pattern, in bytes.
pub const MAX_IGNORE_PATTERN_BYTES: usize = 256;
/// Most wildcards (`*`, `?`, `[`) in one `.kddignore` pattern: globs compile to automata whose
/// size grows with them (2,000 patterns of 1,000 `*a` each took 2.3 GB in every command).
pub const MAX_IGNORE_WILDCARDS: usize = 16;

/// The `.kddignore` matcher of one specs root (empty when there is no file).
#[derive(Debug, Clone)]
pub struct Ignore {
    specs_root: String,
    matcher: Option<ignore::gitignore::Gitignore>,
    /// Lines over the bounds above, skipped.
    skipped: usize,
}

impl Ignore {
    /// A matcher that ignores nothing.
    pub fn none(specs_root: &str) -> Ignore {
        Ignore {
            specs_root: specs_root.to_string(),
            matcher: None,
            skipped: 0,
        }
    }

    /// Build from the bytes of `.kddignore` (gitignore syntax; bad lines skipped, and lines
    /// past [`MAX_IGNORE_PATTERNS`] or over the size and wildcard bounds skipped and counted).
    pub fn from_bytes(specs_root: &str, bytes: &[u8]) -> Ignore {
        let mut b = ignore::gitignore::GitignoreBuilder::new("");
        let (mut patterns, mut skipped) = (0usize, 0usize);
        for line in String::from_utf8_lossy(bytes).lines() {
            let p = line.trim();
            if p.is_empty() || p.starts_with('#') {
                continue;
            }
            let wild = p.chars().filter(|c| matches!(c, '*' | '?' | '[')).count();
            if patterns >= MAX_IGNORE_PATTERNS
                || p.len() > MAX_IGNORE_PATTERN_BYTES
                || wild > MAX_IGNORE_WILDCARDS
            {
                skipped += 1;
                continue;
            }
            patterns += 1;
            let _ = b.add_line(None, line);
        }
        Ignore {
            specs_root: specs_root.to_string(),
            matcher: b.build().ok().filter(|m| !m.is_empty()),
            skipped,
        }
    }

    /// A warning naming the `.kddignore` when lines were skipped.
    pub fn diagnostic(&self) -> Option<Diagnostic> {
        (self.skipped > 0).then(|| Diagnostic {
            severity: Severity::Warning,
            file: kddignore_path(&self.specs_root),
            line: None,
            message: format!(
                "{} pattern line(s) skipped: a .kddignore holds at most {MAX_IGNORE_PATTERNS} patterns, each at most {MAX_IGNORE_PATTERN_BYTES} bytes with at most {MAX_IGNORE_WILDCARDS} wildcards; shorten or merge them",
                self.skipped
            ),
        })
    }

    /// Read `<repo_root>/<specs root>/.kddignore` from a work tree or mirror (no-follow,
    /// bounded); absent or unreadable → ignores nothing.
    pub fn load(repo_root: &Path, specs_root: &str) -> Ignore {
        let rel = kddignore_path(specs_root);
        match read_regular(&repo_root.join(&rel), &rel, MAX_SPEC_BYTES) {
            Ok(b) => Ignore::from_bytes(specs_root, &b),
            Err(_) => Ignore::none(specs_root),
        }
    }

    /// True when the repo-relative `path` (under the specs root) is excluded.
    pub fn ignores(&self, path: &str) -> bool {
        let Some(m) = &self.matcher else {
            return false;
        };
        let rel = if self.specs_root.is_empty() {
            Some(path)
        } else {
            path.strip_prefix(self.specs_root.as_str())
                .and_then(|r| r.strip_prefix('/'))
        };
        match rel {
            Some(r) if !r.is_empty() && !r.starts_with('/') => {
                m.matched_path_or_any_parents(r, false).is_ignore()
            }
            _ => false,
        }
    }
}

/// What [`walk_specs`] found.
#[derive(Debug, Default)]
pub struct Walk {
    /// Repo-relative paths of the regular spec files, sorted.
    pub files: Vec<String>,
    /// Per-file errors (links, non-regular files, unreadable folders), sorted by file.
    pub diagnostics: Vec<Diagnostic>,
}

/// List the specs of the work tree under the one rule (see the module doc).
pub fn walk_specs(repo_root: &Path, specs_root: &str) -> Result<Walk, Error> {
    let ign = Ignore::load(repo_root, specs_root);
    let mut w = walk_root(repo_root, specs_root, &|rel| {
        is_spec_path(rel, specs_root) && !ign.ignores(rel)
    })?;
    w.diagnostics.extend(ign.diagnostic());
    w.diagnostics.sort();
    Ok(w)
}

/// The walker of [`walk_specs`] over any folder `root` of the work tree (also the documents
/// roots, `crate::roots`): the files `keep` accepts, links never followed.
pub fn walk_root(repo_root: &Path, root: &str, keep: &dyn Fn(&str) -> bool) -> Result<Walk, Error> {
    let specs_root = root;
    let dir = repo_root.join(specs_root);
    let missing = || Error::SpecsMissing { path: dir.clone() };
    // The specs root itself must be a real folder reached without links.
    let mut cur = repo_root.to_path_buf();
    for c in specs_root.split('/').filter(|c| !c.is_empty()) {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(md) if md.file_type().is_symlink() => {
                return Err(Error::Symlink {
                    path: specs_root.to_string(),
                })
            }
            Ok(md) if md.is_dir() => {}
            _ => return Err(missing()),
        }
    }
    if !dir.is_dir() {
        return Err(missing());
    }
    let walker = ignore::WalkBuilder::new(&dir)
        .standard_filters(false)
        .hidden(true)
        .follow_links(false)
        .build();
    let mut out = Walk::default();
    for entry in walker {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                let shown = e
                    .to_string()
                    .replace(&format!("{}/", repo_root.display()), "");
                out.diagnostics.push(Diagnostic {
                    severity: Severity::Error,
                    file: specs_root.to_string(),
                    line: None,
                    message: format!("cannot list part of the specs tree: {}", printable(&shown)),
                });
                continue;
            }
        };
        let Ok(sub) = entry.path().strip_prefix(repo_root) else {
            continue;
        };
        let rel = sub.to_string_lossy().replace('\\', "/");
        let Some(ft) = entry.file_type() else {
            continue;
        };
        if ft.is_dir() || !keep(&rel) {
            continue;
        }
        if rel.contains('\u{FFFD}') {
            // Not UTF-8 (or holding U+FFFD): the one path rule names it (see `check_rel`).
            if let Err(e) = check_rel(&rel, root) {
                out.diagnostics.push(e.diagnostic());
            }
        } else if ft.is_file() {
            out.files.push(rel);
        } else if ft.is_symlink() {
            out.diagnostics.push(symlink_diagnostic(&printable(&rel)));
        } else {
            out.diagnostics.push(
                Error::NotRegular {
                    path: printable(&rel),
                }
                .diagnostic(),
            );
        }
    }
    out.files.sort();
    out.diagnostics.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_paths() {
        assert!(is_spec_path("specs/01-domain/a.md", "specs"));
        assert!(is_spec_path("specs/x.feature", "specs"));
        assert!(!is_spec_path("specs/_kdd.yaml", "specs"));
        assert!(!is_spec_path("docs/a.md", "specs"));
        assert!(!is_spec_path("specs/.hidden/a.md", "specs"));
        assert!(is_spec_path("a.md", ""));
        assert!(!is_spec_path(".kdd-index/a.md", ""));
    }

    #[test]
    fn committed_paths_are_checked() {
        assert!(check_rel("specs/a/b.md", "specs").is_ok());
        for bad in [
            "/etc/passwd",
            "../../x.md",
            "specs/../x.md",
            "specs/./a.md",
            "specs//a.md",
            "specs/a\\b.md",
            "specs/a\nb.md",
            "specs/a.txt",
            "other/a.md",
            "C:/a.md",
            "",
        ] {
            assert!(check_rel(bad, "specs").is_err(), "{bad:?}");
        }
        assert_eq!(printable("a\nb\x1b"), "a\\nb\\u001b");
    }

    #[test]
    fn reads_only_regular_files_without_links() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("specs/d")).unwrap();
        std::fs::write(root.join("specs/d/a.md"), "# A\n").unwrap();
        std::fs::write(root.join("secret.md"), "SECRET").unwrap();
        std::os::unix::fs::symlink(root.join("secret.md"), root.join("specs/l.md")).unwrap();
        std::os::unix::fs::symlink(root.join("specs/d"), root.join("specs/ld")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", root.join("specs/z.md")).unwrap();
        assert_eq!(read_spec(root, "specs/d/a.md", "specs").unwrap(), b"# A\n");
        for p in ["specs/l.md", "specs/ld/a.md", "specs/z.md"] {
            let e = read_spec(root, p, "specs").unwrap_err();
            assert!(matches!(e, Error::Symlink { .. }), "{p}: {e}");
        }
        let w = walk_specs(root, "specs").unwrap();
        assert_eq!(w.files, vec!["specs/d/a.md"]);
        let files: Vec<&str> = w.diagnostics.iter().map(|d| d.file.as_str()).collect();
        assert_eq!(files, vec!["specs/l.md", "specs/z.md"]);
        assert!(w.diagnostics[0].message.contains("symbolic link"));
        std::fs::write(
            root.join("specs/.kddignore"),
            "# drafts\nd/\n!keep.md\n[bad\n",
        )
        .unwrap();
        let w = walk_specs(root, "specs").unwrap();
        assert!(w.files.is_empty(), "{:?}", w.files);
        let ign = Ignore::load(root, "specs");
        assert!(ign.ignores("specs/d/a.md") && !ign.ignores("specs/e/a.md"));
        assert!(!Ignore::none("specs").ignores("specs/d/a.md"));
        let e = read_regular(Path::new("/dev/zero"), "z", 10).unwrap_err();
        assert!(matches!(e, Error::NotRegular { .. }), "{e}");
        std::fs::write(root.join("specs/big.md"), vec![b'a'; 20]).unwrap();
        let e = read_regular(&root.join("specs/big.md"), "big", 10).unwrap_err();
        assert!(matches!(e, Error::TooLarge { len: 20, .. }), "{e}");
    }
    #[test]
    fn a_kddignore_over_its_bounds_is_cut_and_named() {
        let mut text = String::from("drafts/\n");
        text.push_str(&"*a".repeat(1000));
        text.push_str("\nold/\n");
        let ign = Ignore::from_bytes("specs", text.as_bytes());
        assert!(ign.ignores("specs/drafts/x.md") && ign.ignores("specs/old/x.md"));
        let d = ign.diagnostic().expect("named");
        assert_eq!(d.file, "specs/.kddignore");
        assert!(
            d.message.starts_with("1 pattern line(s) skipped"),
            "{}",
            d.message
        );
        let many: String = (0..MAX_IGNORE_PATTERNS + 5)
            .map(|i| format!("d{i}/\n"))
            .collect();
        let ign = Ignore::from_bytes("specs", many.as_bytes());
        assert!(ign.ignores("specs/d0/x.md") && !ign.ignores("specs/d1004/x.md"));
        assert!(Ignore::from_bytes("specs", b"a/\n").diagnostic().is_none());
    }
}
