//! Rendering, atomic writing and reading of artifact files.
//!
//! Rendering is pure (`render_*` → bytes) so the merge driver and tests can produce the exact
//! bytes `kdd index` would write; [`write_if_changed`] is the only writer. Its files get the
//! mode git gives a checked-out file (0666 minus the process umask), never tempfile's 0600.
//!
//! Every artifact read goes through [`read_artifact`]: the one no-follow, bounded read of
//! [`crate::source`] (a committed symlink `.kdd-index/…` → `/dev/zero` or a file outside the
//! repository is never followed; nothing over [`MAX_ARTIFACT_BYTES`] is read).

use super::{ArtifactPaths, Error, Manifest, FORMAT_VERSION};
use crate::spec::{LinkRecord, Node};
use std::io::Write;
use std::path::{Path, PathBuf};

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Largest artifact file read (vector files of the largest spec are a few MB).
pub const MAX_ARTIFACT_BYTES: usize = 64 << 20;

/// Read an artifact file: regular files only, never through a final symlink, at most
/// [`MAX_ARTIFACT_BYTES`]. A missing file keeps `ErrorKind::NotFound`; a link, device or
/// oversized file is `ErrorKind::InvalidData` with the reason.
pub fn read_artifact(path: &Path) -> std::io::Result<Vec<u8>> {
    let shown = path.display().to_string();
    crate::source::read_regular(path, &shown, MAX_ARTIFACT_BYTES).map_err(|e| match e {
        crate::source::Error::Io { source, .. } if absent(&source) => {
            std::io::Error::new(std::io::ErrorKind::NotFound, source)
        }
        crate::source::Error::Io { source, .. } => source,
        other => std::io::Error::new(std::io::ErrorKind::InvalidData, refusal(&other)),
    })
}

/// Why an artifact file was not read, without its path (the caller names it) and with the
/// artifact's remedy, not a spec's.
fn refusal(e: &crate::source::Error) -> String {
    use crate::source::Error as E;
    let why = match e {
        E::Symlink { .. } => "a symbolic link (never followed)".to_string(),
        E::NotRegular { .. } => "not a regular file (a device, FIFO or socket)".to_string(),
        E::TooLarge { len, .. } => format!(
            "{len} bytes, over the {} MB limit for an artifact",
            MAX_ARTIFACT_BYTES >> 20
        ),
        other => other.to_string(),
    };
    format!("{why}: not written by kdd, never read; `kdd index` (or `kdd resolve`) rewrites it")
}

/// Whether an I/O error says the file is not there: missing, or a file where a folder on its
/// path belongs (`manifest.json/y` once committed, now that `manifest.json` is a file).
pub fn absent(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// Canonical bytes of a node file (format v2): one compact JSON line in the struct's key order,
/// empty optional fields left out, trailing `\n`. (Format v1 pretty-printed the same object;
/// [`read_node`] reads both.)
pub fn render_node(node: &Node) -> Vec<u8> {
    let mut v = serde_json::to_vec(node).expect("node serialises");
    v.push(b'\n');
    v
}

/// Canonical bytes of the manifest.
pub fn render_manifest(m: &Manifest) -> Vec<u8> {
    let mut v = serde_json::to_vec_pretty(m).expect("manifest serialises");
    v.push(b'\n');
    v
}

/// Parse a node file.
pub fn read_node(path: &Path) -> Result<Node, Error> {
    let bytes = read_artifact(path).map_err(io(path))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// Parse an edges file (a missing file is an empty list).
pub fn read_links(path: &Path) -> Result<Vec<LinkRecord>, Error> {
    let bytes = match read_artifact(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(path)(e)),
    };
    let corrupt = |message: String| Error::Corrupt {
        path: path.to_path_buf(),
        message,
    };
    let text = std::str::from_utf8(&bytes).map_err(|e| corrupt(e.to_string()))?;
    let set = super::links::parse_links_text(text).map_err(corrupt)?;
    let mut out: Vec<LinkRecord> = set.into_iter().map(|(l, _)| l).collect();
    out.dedup();
    Ok(out)
}

/// Why a manifest's roots cannot be read, if so. kdd writes the roots it indexed relative to
/// the repository: a root that is not (a crafted `../outside/specs`) is one error on the
/// manifest, not one per node, for every reader (queries, merges, sync).
pub fn root_outside(m: &Manifest) -> Option<String> {
    std::iter::once(&m.specs_root)
        .chain(&m.docs)
        .find_map(|root| {
            let plain = crate::paths::normalize_rel(root)
                .is_some_and(|n| n == *root && !n.chars().any(char::is_control));
            (!plain).then(|| {
                format!(
                    "root `{}` is not a folder inside the repository",
                    crate::spec::escape_control(root)
                )
            })
        })
}

/// Parse the manifest, checking its roots and its format version (v1 and v2 are read, see
/// [`super::READ_VERSIONS`]).
pub fn read_manifest(path: &Path) -> Result<Manifest, Error> {
    let bytes = read_artifact(path).map_err(io(path))?;
    parse_manifest(path, &bytes)
}

/// [`read_manifest`] of bytes read elsewhere (a sync bundle, a remote ref); `path` names them.
pub fn parse_manifest(path: &Path, bytes: &[u8]) -> Result<Manifest, Error> {
    let m: Manifest = serde_json::from_slice(bytes).map_err(|e| Error::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    if let Some(message) = root_outside(&m) {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            message,
        });
    }
    if !super::READ_VERSIONS.contains(&m.format_version) {
        return Err(Error::Version {
            path: path.to_path_buf(),
            found: m.format_version,
            expected: FORMAT_VERSION,
        });
    }
    Ok(m)
}

/// Write the artifact `rel` (relative to the index root) with [`write_if_changed`], after making
/// sure the path down to it is made of real folders and ends at a file or nothing: a committed
/// link (`.kdd-index -> ~/x`, `nodes/entity -> /etc`) is removed (never its target) and replaced
/// by a real folder, so no write ever lands outside `.kdd-index/`; a file, FIFO or other
/// non-folder where a folder belongs, or a folder or FIFO where the artifact file belongs
/// (`nodes/entity/Pedido.json/x` committed by hand), is removed too. Everything removed lies
/// inside the index root and is an artifact path kdd owns.
pub fn write_artifact(paths: &ArtifactPaths, rel: &str, bytes: &[u8]) -> Result<bool, Error> {
    let mut dir = paths.root().to_path_buf();
    let comps: Vec<&str> = rel.split('/').collect();
    let folder = |d: &Path| -> Result<(), Error> {
        match std::fs::symlink_metadata(d) {
            // Another writer of the same run may have removed it first.
            Ok(m) if !m.is_dir() => match std::fs::remove_file(d) {
                Err(e) if !absent(&e) => Err(io(d)(e)),
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    };
    if comps
        .iter()
        .any(|c| c.is_empty() || *c == "." || *c == "..")
    {
        return Err(Error::Corrupt {
            path: paths.abs(rel),
            message: "not a path inside the index".into(),
        });
    }
    folder(&dir)?;
    for c in &comps[..comps.len().saturating_sub(1)] {
        dir.push(c);
        folder(&dir)?;
    }
    let target = paths.abs(rel);
    let gone = |r: std::io::Result<()>| match r {
        Err(e) if !absent(&e) => Err(io(&target)(e)),
        _ => Ok(()),
    };
    match std::fs::symlink_metadata(&target) {
        Ok(m) if m.is_dir() => gone(std::fs::remove_dir_all(&target))?,
        Ok(m) if !m.is_file() => gone(std::fs::remove_file(&target))?,
        _ => {}
    }
    write_if_changed(&target, bytes)
}

/// Write `bytes` to `path` atomically (temp file in the same directory + rename), creating
/// parent directories. Returns `false` and touches nothing when the file already holds exactly
/// these bytes.
pub fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<bool, Error> {
    if let Ok(existing) = read_artifact(path) {
        if existing == bytes {
            return Ok(false);
        }
    }
    let dir = path.parent().ok_or_else(|| Error::Corrupt {
        path: path.to_path_buf(),
        message: "artifact path has no parent directory".into(),
    })?;
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut builder = tempfile::Builder::new();
    builder.prefix(".kdd-tmp-");
    // Like git: files are created 0666 and the kernel applies the umask (tempfile's own
    // default is 0600, which would make a shared clone's index unreadable to the group).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder.tempfile_in(dir).map_err(io(dir))?;
    tmp.write_all(bytes).map_err(io(path))?;
    tmp.persist(path).map_err(|e| Error::Io {
        path: path.to_path_buf(),
        source: e.error,
    })?;
    Ok(true)
}

/// Make the index at `paths` hold exactly `files` (path relative to the index root → bytes):
/// each file written with [`write_artifact`] (unchanged bytes untouched), then every file under
/// `nodes/`, `edges/` and `embeddings/` that `files` does not name removed (and emptied folders
/// pruned). Nothing outside those kdd folders and `manifest.json` is touched. Used by
/// `kdd merge-index` and `kdd sync pull` to install a merged index.
pub fn replace_index(
    paths: &ArtifactPaths,
    files: &std::collections::BTreeMap<String, Vec<u8>>,
) -> Result<(), Error> {
    for (rel, bytes) in files {
        write_artifact(paths, rel, bytes)?;
    }
    let out = paths.root();
    if is_link(out) {
        return Ok(());
    }
    for top in ["nodes", "edges", "embeddings"] {
        let top = out.join(top);
        if is_link(&top) {
            // A committed link (`embeddings -> ~/x`) is removed, never walked: the sweep below
            // deletes what the index does not name.
            std::fs::remove_file(&top).map_err(io(&top))?;
            continue;
        }
        let mut stack = vec![top];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(p);
                    continue;
                }
                let rel = p
                    .strip_prefix(out)
                    .unwrap_or(&p)
                    .to_string_lossy()
                    .replace('\\', "/");
                if !files.contains_key(&rel) {
                    std::fs::remove_file(&p).map_err(io(&p))?;
                    prune_empty_dirs(out, &p);
                }
            }
        }
    }
    Ok(())
}

fn is_link(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// True when the artifact `rel` is reached through a link (the index root or a folder on the
/// way is a committed symbolic link): then it is not in the index, and nothing is removed
/// through it.
pub fn through_link(paths: &ArtifactPaths, rel: &str) -> bool {
    let mut dir = paths.root().to_path_buf();
    if is_link(&dir) {
        return true;
    }
    let comps: Vec<&str> = rel.split('/').collect();
    comps[..comps.len().saturating_sub(1)].iter().any(|c| {
        dir.push(c);
        is_link(&dir)
    })
}

/// Remove a node's node/edges/embeddings files (missing files are fine) and prune empty parent
/// directories up to the index root; its L3 enrichment file goes too. Returns the relative
/// paths that existed and were removed.
pub fn remove_artifacts(paths: &ArtifactPaths, node: &Node) -> Result<Vec<String>, Error> {
    let mut removed = Vec::new();
    for rel in [
        ArtifactPaths::node_rel(node),
        ArtifactPaths::edges_rel(node),
        ArtifactPaths::embeddings_rel(node),
        ArtifactPaths::enrichment_rel(node),
    ] {
        let p = paths.abs(&rel);
        if through_link(paths, &rel) {
            continue;
        }
        match std::fs::remove_file(&p) {
            Ok(()) => {
                removed.push(rel);
                prune_empty_dirs(paths.root(), &p);
            }
            Err(e) if absent(&e) => {}
            Err(e) => return Err(io(&p)(e)),
        }
    }
    Ok(removed)
}

fn prune_empty_dirs(root: &Path, file: &Path) {
    let mut dir = file.parent();
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) {
            break;
        }
        if std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

/// A read view of an index directory: lists and loads the committed node files.
#[derive(Debug, Clone)]
pub struct IndexStore {
    pub paths: ArtifactPaths,
}

impl IndexStore {
    /// Open the index rooted at `root` (the `.kdd-index` directory; it may not exist yet).
    pub fn new(root: impl Into<PathBuf>) -> IndexStore {
        IndexStore {
            paths: ArtifactPaths::new(root),
        }
    }

    /// Relative paths (`nodes/…json`) of every node file, sorted.
    pub fn node_files(&self) -> Result<Vec<String>, Error> {
        let mut out = Vec::new();
        let base = self.paths.root().join("nodes");
        walk(&base, "nodes", &mut out)?;
        out.retain(|p| p.ends_with(".json"));
        out.sort();
        Ok(out)
    }

    /// Load every node; unreadable files are returned as errors alongside, never dropped silently.
    pub fn load_nodes(&self) -> Result<(Vec<Node>, Vec<Error>), Error> {
        let mut nodes = Vec::new();
        let mut errors = Vec::new();
        for rel in self.node_files()? {
            match read_node(&self.paths.abs(&rel)) {
                Ok(n) => nodes.push(n),
                Err(e) => errors.push(e),
            }
        }
        Ok((nodes, errors))
    }
}

/// The one walker of index folders: the paths (`rel/…`, or relative to `dir` when `rel` is
/// empty) of the regular files under `dir`,
/// recursively, in directory order; links and kdd's own temporary files are never listed, and a
/// folder that cannot be read is skipped (see [`walk`] for the error-reporting form).
pub fn list_files(dir: &Path, rel: &str, out: &mut Vec<String>) {
    let _ = walk_with(dir, rel, out, false);
}

fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) -> Result<(), Error> {
    walk_with(dir, rel, out, true)
}

fn walk_with(dir: &Path, rel: &str, out: &mut Vec<String>, strict: bool) -> Result<(), Error> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound || !strict => return Ok(()),
        Err(e) => return Err(io(dir)(e)),
    };
    for entry in rd {
        let entry = match entry {
            Ok(e) => e,
            Err(_) if !strict => continue,
            Err(e) => return Err(io(dir)(e)),
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(".kdd-tmp-") {
            continue;
        }
        let ft = match entry.file_type() {
            Ok(t) => t,
            Err(_) if !strict => continue,
            Err(e) => return Err(io(&entry.path())(e)),
        };
        let child_rel = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        if ft.is_dir() {
            walk_with(&entry.path(), &child_rel, out, strict)?;
        } else if ft.is_file() {
            out.push(child_rel);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Kind, Layer};

    fn node() -> Node {
        Node {
            id: "Entity:Pedido".into(),
            kind: Kind::Entity,
            source_file: "specs/01-domain/entities/Pedido.md".into(),
            source_hash: "ab".into(),
            title: "Pedido".into(),
            status: Some("approved".into()),
            aliases: vec!["Orden".into()],
            domain: None,
            layer: Layer::Domain,
        }
    }

    #[test]
    fn node_roundtrip_and_write_once() {
        let dir = tempfile::tempdir().unwrap();
        let paths = ArtifactPaths::new(dir.path().join(".kdd-index"));
        let n = node();
        let p = paths.abs(&ArtifactPaths::node_rel(&n));
        assert!(write_if_changed(&p, &render_node(&n)).unwrap());
        assert!(!write_if_changed(&p, &render_node(&n)).unwrap());
        assert_eq!(read_node(&p).unwrap(), n);
        let removed = remove_artifacts(&paths, &n).unwrap();
        assert_eq!(removed, vec!["nodes/entity/Pedido.json".to_string()]);
        assert!(!dir.path().join(".kdd-index/nodes").exists());
    }

    #[cfg(unix)]
    #[test]
    fn artifacts_honour_the_umask_like_git() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(".kdd-index/nodes/entity/Pedido.json");
        assert!(write_if_changed(&p, &render_node(&node())).unwrap());
        // A file created the ordinary way (mode 0666, minus the umask) is the reference.
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"x").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&p), mode(&plain));
    }

    #[test]
    fn v1_pretty_nodes_and_link_lines_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let n = node();
        let p = dir.path().join("n.json");
        let mut v1 = serde_json::to_vec_pretty(&n).unwrap();
        v1.push(b'\n');
        std::fs::write(&p, &v1).unwrap();
        assert_eq!(read_node(&p).unwrap(), n);
        assert_eq!(render_node(&n).iter().filter(|&&b| b == b'\n').count(), 1);
        let e = dir.path().join("e.jsonl");
        std::fs::write(
            &e,
            "{\"type\":\"W\",\"to\":\"B\"}\n{\"type\":\"W\",\"to\":[\"A\",\"B\"],\"bare\":true}\n",
        )
        .unwrap();
        let links = read_links(&e).unwrap();
        assert_eq!(
            links.iter().map(|l| l.to.as_str()).collect::<Vec<_>>(),
            ["A", "B"]
        );
        std::fs::write(&e, "{\"type\":\"W\",\"to\":{}}\n").unwrap();
        let msg = read_links(&e).unwrap_err().to_string();
        assert!(
            msg.contains("e.jsonl") && msg.contains("kdd index"),
            "{msg}"
        );
    }
}
