//! Which artifact files a spec has, and their size + mtime stamps: the cheap change detection
//! behind incremental cache updates (read-only; never opens a file); and the decoding of a
//! spec's committed vector file, the one artifact read here.
//!
//! The third stamp of a spec covers its extra files: the vector file (L2) and the agent
//! enrichment file (L3), so a changed enrichment re-loads the spec like a changed vector file.
//!
//! [`scan_since`] only reads the folders that changed: artifacts are written by temp file +
//! rename (git checkouts unlink + create), so a folder whose four copies (`nodes/<d>`,
//! `edges/<d>`, `embeddings/<d>`, `enrichments/<d>`) kept their mtimes holds the same files
//! with the same stamps — the rule the freshness fingerprint already rests on. A folder touched
//! less than [`racy_ns`] ago is not trusted (file-system clocks are coarse: a later write in the
//! same tick would keep the mtime) and is read again next time.

use super::store::{ChunkRef, FileStamp};
use std::collections::BTreeMap;
use std::path::Path;

/// The size and mtime of a file's metadata.
pub fn stamp(md: &std::fs::Metadata) -> FileStamp {
    let mtime_ns = md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0);
    FileStamp {
        len: md.len(),
        mtime_ns,
    }
}

/// Stamps of a spec's node, edges and extra (embeddings + enrichment) files.
pub type Stamps = (FileStamp, Option<FileStamp>, Option<FileStamp>);

/// One stamp for the vector file and the enrichment file together (either may be missing).
fn extras(emb: Option<FileStamp>, enr: Option<FileStamp>) -> Option<FileStamp> {
    let Some(e) = enr else { return emb };
    let v = emb.unwrap_or(FileStamp {
        len: 0,
        mtime_ns: 0,
    });
    Some(FileStamp {
        len: (v.len ^ e.len.rotate_left(32)) | (1 << 63),
        mtime_ns: v.mtime_ns ^ e.mtime_ns.rotate_left(29),
    })
}

/// The artifact top folders, in the order of a folder's mtimes in [`DirStamps`].
const TOPS: [&str; 4] = ["nodes", "edges", "embeddings", "enrichments"];
/// Nanoseconds since the epoch now (the clock [`racy_ns`] is measured against).
pub fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// How long after its mtime a folder is still read again: 100 ms, far above the clock tick of
/// Linux file systems with nanosecond stamps (≤ 10 ms); 2 s when the stamp has no sub-second
/// part (a file system with second granularity).
pub fn racy_ns(mtime_ns: i128) -> i128 {
    if mtime_ns % 1_000_000_000 == 0 {
        2_000_000_000
    } else {
        100_000_000
    }
}

/// Per folder under the tops (`""`, `entity`, `entity/core`): the mtimes of its four copies
/// (0 when absent), or `None` when it must be read again.
pub type DirStamps = BTreeMap<String, Option<[i128; 4]>>;

/// What [`scan_since`] found.
#[derive(Debug, Default)]
pub struct Scan {
    /// Stamps of every stem in the folders read.
    pub stems: BTreeMap<String, Stamps>,
    /// Folders read, or gone since the previous scan: their stems are exactly `stems`' ones.
    pub read: std::collections::BTreeSet<String>,
    /// The folder stamps to keep for the next scan.
    pub dirs: DirStamps,
}

fn mtime_ns(p: &Path) -> i128 {
    std::fs::metadata(p).map_or(0, |md| stamp(&md).mtime_ns)
}

/// The folder of a stem (`entity/core/Token` → `entity/core`).
pub fn folder_of(stem: &str) -> &str {
    stem.rsplit_once('/').map_or("", |(d, _)| d)
}

fn join(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_string()
    } else {
        format!("{rel}/{name}")
    }
}

/// Read folder `rel` in every top: the stems of its files (stamped) and its sub-folders.
fn read_folder(index_dir: &Path, rel: &str, out: &mut Scan) -> std::collections::BTreeSet<String> {
    let mut subs = std::collections::BTreeSet::new();
    let mut per_top: [BTreeMap<String, FileStamp>; 4] = Default::default();
    for (t, top) in TOPS.iter().enumerate() {
        let ext = [".json", ".jsonl", ".bin", ".json"][t];
        let Ok(rd) = std::fs::read_dir(index_dir.join(top).join(rel)) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                subs.insert(join(rel, &name));
            } else if let Some(stem) = name.strip_suffix(ext) {
                if let Ok(md) = e.metadata() {
                    per_top[t].insert(join(rel, stem), stamp(&md));
                }
            }
        }
    }
    let [nodes, edges, emb, enr] = per_top;
    for (k, n) in nodes {
        let v = extras(emb.get(&k).copied(), enr.get(&k).copied());
        let e = edges.get(&k).copied();
        out.stems.insert(k, (n, e, v));
    }
    subs
}

/// Stamps of the stems in every folder that changed since `prev` (see the module docs).
pub fn scan_since(index_dir: &Path, prev: &DirStamps) -> Scan {
    let now = now_ns();
    let mut out = Scan::default();
    let mut todo = vec![String::new()];
    while let Some(rel) = todo.pop() {
        let m: [i128; 4] = TOPS.map(|t| mtime_ns(&index_dir.join(t).join(&rel)));
        let racy = m.iter().any(|t| *t > now - racy_ns(*t));
        let same = prev.get(&rel).is_some_and(|p| *p == Some(m));
        if same && !racy {
            // Unchanged: same entries, so the same sub-folders as last time.
            let pre = join(&rel, "");
            let subs = prev
                .keys()
                .filter(|k| !k.is_empty() && k.starts_with(&pre) && !k[pre.len()..].contains('/'));
            todo.extend(subs.cloned());
        } else {
            todo.extend(read_folder(index_dir, &rel, &mut out));
            out.read.insert(rel.clone());
        }
        out.dirs.insert(rel, (!racy).then_some(m));
    }
    for k in prev.keys() {
        if !out.dirs.contains_key(k) {
            out.read.insert(k.clone());
        }
    }
    out
}

/// A chunk vector read from the committed `.bin` file, with its text re-derived by chunking.
pub struct LoadedVector {
    pub chunk: ChunkRef,
    pub vector: Vec<f32>,
}

/// The model id of a decoded vector file: a v1 file names it; a v2 file carries only a
/// fingerprint, checked against the model of the index's manifest (`<index>/manifest.json`, the
/// parent of the `embeddings/` folder holding `path`).
fn vector_model(path: &Path, vf: &crate::embed::VectorFile) -> Result<String, String> {
    if !vf.model.is_empty() {
        return Ok(vf.model.clone());
    }
    let model = path
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "embeddings"))
        .and_then(Path::parent)
        .and_then(|i| crate::artifact::read_manifest(&i.join("manifest.json")).ok())
        .and_then(|m| m.embedding)
        .map(|e| e.model)
        .unwrap_or_default();
    if !vf.belongs_to(&model) {
        return Err(format!(
            "{}: vectors were not made with the index's model `{model}`; run `kdd index` to re-embed",
            path.display()
        ));
    }
    Ok(model)
}

/// Decode a spec's vector file and attach each record's chunk text (matched by chunk key).
pub fn load_vectors(
    path: &Path,
    node_id: &str,
    extracted: Option<&crate::spec::Extracted>,
) -> Result<Vec<LoadedVector>, String> {
    let bytes = match crate::artifact::read_artifact(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let vf = crate::embed::decode(&path.to_string_lossy(), &bytes).map_err(|e| e.to_string())?;
    let model = vector_model(path, &vf)?;
    let chunks = extracted
        .map(|x| crate::embed::chunk_spec(x, &model))
        .unwrap_or_default();
    Ok(vf
        .records
        .iter()
        .map(|r| {
            let c = chunks.iter().find(|c| c.key == r.key);
            LoadedVector {
                chunk: ChunkRef {
                    node_id: node_id.to_string(),
                    section: c.map(|c| c.section.clone()).unwrap_or_default(),
                    text: c.map(|c| c.text.clone()).unwrap_or_default(),
                },
                vector: r.dequantize(),
            }
        })
        .collect())
}
