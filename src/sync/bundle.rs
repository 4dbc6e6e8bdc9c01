//! The wire form of an index for the API transport: one binary body holding every file of a
//! `.kdd-index/` (path relative to the index root → bytes).
//!
//! ```text
//! "KDDSYNC1"                     magic + version (8 bytes)
//! u32 count                      number of files (little-endian, as every integer here)
//! count × { u32 path_len, path (UTF-8), u32 data_len, data }
//! ```
//!
//! Invariants: decoding is bounded (at most [`MAX_FILES`] files, paths of at most
//! [`MAX_PATH`] bytes, lengths checked against the body before any allocation) and every path
//! is checked with [`super::valid_rel`] before it is accepted (and no path may lie inside another,
//! [`crate::artifact::path_clash`]), so a hostile body can neither exhaust memory, name a file
//! outside the index nor ask for a file and a folder at one path. Encoding is deterministic (sorted paths).

use super::Error;
use std::collections::BTreeMap;

/// Magic and format version of a bundle.
pub const MAGIC: &[u8; 8] = b"KDDSYNC1";
/// Most files one bundle may hold.
pub const MAX_FILES: usize = 200_000;
/// Longest path accepted (bytes).
pub const MAX_PATH: usize = 1024;
/// Content type of a bundle body.
pub const CONTENT_TYPE: &str = "application/x-kdd-index";

/// The file count a bundle's header declares (its first 12 bytes), without decoding the rest.
pub fn declared_files(head: &[u8]) -> Option<usize> {
    match head.get(..12)? {
        h if &h[..8] == MAGIC => Some(u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize),
        _ => None,
    }
}

/// Encode files (sorted by path) into one body.
pub fn encode(files: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let size: usize = files.iter().map(|(p, d)| 8 + p.len() + d.len()).sum();
    let mut out = Vec::with_capacity(12 + size);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(files.len() as u32).to_le_bytes());
    for (path, data) in files {
        out.extend_from_slice(&(path.len() as u32).to_le_bytes());
        out.extend_from_slice(path.as_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
    }
    out
}

/// Decode a body; `what` names the body in errors (`push body`, `pull answer`).
pub fn decode(body: &[u8], what: &str) -> Result<BTreeMap<String, Vec<u8>>, Error> {
    let bad = |m: &str| Error::BadBundle(format!("{what}: {m}"));
    let mut r = Reader { buf: body, pos: 0 };
    if r.take(MAGIC.len()).ok_or_else(|| bad("truncated"))? != MAGIC {
        return Err(bad("not a kdd index bundle (bad magic)"));
    }
    let count = r.u32().ok_or_else(|| bad("truncated"))? as usize;
    if count > MAX_FILES {
        return Err(bad(&format!("{count} files (at most {MAX_FILES})")));
    }
    let mut files = BTreeMap::new();
    for _ in 0..count {
        let n = r.u32().ok_or_else(|| bad("truncated"))? as usize;
        if n > MAX_PATH {
            return Err(bad("path too long"));
        }
        let p = r.take(n).ok_or_else(|| bad("truncated"))?;
        let path = std::str::from_utf8(p).map_err(|_| bad("path is not UTF-8"))?;
        if !super::valid_rel(path) {
            return Err(bad(&format!("`{path}` is not a kdd index artifact path")));
        }
        let d = r.u32().ok_or_else(|| bad("truncated"))? as usize;
        let data = r.take(d).ok_or_else(|| bad("truncated"))?;
        if files.insert(path.to_string(), data.to_vec()).is_some() {
            return Err(bad(&format!("`{path}` appears twice")));
        }
    }
    if r.pos != body.len() {
        return Err(bad("trailing bytes"));
    }
    if let Some((file, inner)) = crate::artifact::path_clash(&files) {
        return Err(bad(&format!(
            "`{file}` is a file and `{inner}` puts a file inside it"
        )));
    }
    Ok(files)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_hostile_bodies() {
        let mut files = BTreeMap::new();
        files.insert("manifest.json".to_string(), b"{}\n".to_vec());
        files.insert(
            "nodes/entity/Pedido.json".to_string(),
            b"{\"id\":1}\n".to_vec(),
        );
        files.insert(
            "embeddings/entity/Pedido.bin".to_string(),
            vec![0, 1, 2, 255],
        );
        let body = encode(&files);
        assert_eq!(decode(&body, "t").unwrap(), files);
        // Truncation anywhere, bad magic, trailing bytes: errors, never panics.
        for cut in 0..body.len() {
            assert!(decode(&body[..cut], "t").is_err(), "cut at {cut}");
        }
        let mut trailing = body.clone();
        trailing.push(0);
        assert!(decode(&trailing, "t").is_err());
        // A path outside the index is refused.
        let mut evil = BTreeMap::new();
        evil.insert("nodes/../../.git/hooks/pre-commit.json".to_string(), vec![]);
        assert!(decode(&encode(&evil), "t").is_err());
        // A file and a file inside it: refused.
        let mut clash = files.clone();
        clash.insert("nodes/entity/Pedido.json/x.json".to_string(), vec![]);
        clash.insert("nodes/entity/Pedido.json.json".to_string(), vec![]);
        let e = decode(&encode(&clash), "t").unwrap_err().to_string();
        assert!(e.contains("`nodes/entity/Pedido.json` is a file"), "{e}");
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&huge, "t").is_err());
    }
}
