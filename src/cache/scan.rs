//! Which artifact files a spec has, and their size + mtime stamps: the cheap change detection
//! behind incremental cache updates (read-only; never opens a file); and the decoding of a
//! spec's committed vector file, the one artifact read here.
//!
//! The third stamp of a spec covers its extra files: the vector file (L2) and the agent
//! enrichment file (L3), so a changed enrichment re-loads the spec like a changed vector file.

use super::store::{ChunkRef, FileStamp};
use std::collections::BTreeMap;
use std::path::Path;

fn stamp(md: &std::fs::Metadata) -> FileStamp {
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

fn walk(dir: &Path, rel: &str, ext: &str, out: &mut BTreeMap<String, FileStamp>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let Ok(ft) = e.file_type() else { continue };
        let child = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if ft.is_dir() {
            walk(&e.path(), &child, ext, out);
        } else if let Some(stem) = child.strip_suffix(ext) {
            if let Ok(md) = e.metadata() {
                out.insert(stem.to_string(), stamp(&md));
            }
        }
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

/// Current stamps of every spec's artifacts, keyed by artifact stem (`entity/Pedido`).
pub fn scan(index_dir: &Path) -> BTreeMap<String, Stamps> {
    let mut nodes = BTreeMap::new();
    let mut edges = BTreeMap::new();
    let mut emb = BTreeMap::new();
    let mut enr = BTreeMap::new();
    walk(&index_dir.join("nodes"), "", ".json", &mut nodes);
    walk(&index_dir.join("edges"), "", ".jsonl", &mut edges);
    walk(&index_dir.join("embeddings"), "", ".bin", &mut emb);
    walk(&index_dir.join("enrichments"), "", ".json", &mut enr);
    nodes
        .into_iter()
        .map(|(k, n)| {
            let e = edges.get(&k).copied();
            let v = extras(emb.get(&k).copied(), enr.get(&k).copied());
            (k, (n, e, v))
        })
        .collect()
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
