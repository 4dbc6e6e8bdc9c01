//! Integrity of one cache generation, checked with plain file reads BEFORE anything is mapped.
//!
//! Invariants:
//! - A generation is only ever opened when [`intact`] says so: its `complete` marker exists
//!   (written last, with fsync, after every successful build or update, and removed before an
//!   update starts, so a crash mid-write leaves a generation without one), the LMDB data file
//!   has two valid meta pages (magic, version, page size) whose newest transaction is the one
//!   the marker recorded, the file is at least as long as the last page those meta pages name
//!   (a shorter file is what makes a memory-mapped read die of SIGBUS), and every tantivy file
//!   the marker lists has the recorded length (its `meta.json` the recorded hash).
//! - [`condemn`] marks a generation damaged (its marker goes, a `damaged` note says why): the
//!   next open under the writer lock rebuilds into a fresh generation, never reuses it.
//! - [`deep`] reads everything (every LMDB table, the vector index, tantivy's own checksums):
//!   used by `kdd doctor`, too slow for every open.
//!
//! Nothing here maps a file or opens an environment; reads are bounded (two meta pages and one
//! root page per table).

use super::Error;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

/// LMDB's magic number (`MDB_MAGIC`) and data-file format version (`MDB_DATA_VERSION`).
const MDB_MAGIC: u32 = 0xBEEF_C0DE;
const MDB_DATA_VERSION: u32 = 1;
/// Byte offsets inside a meta page (64-bit build): a 16-byte page header, then `MDB_meta`:
/// magic, version, address, map size, two `MDB_db` of 48 bytes (the first one's `md_pad`
/// holds the page size), last page number, transaction id.
const OFF_MAGIC: usize = 16;
const OFF_VERSION: usize = 20;
const OFF_PSIZE: usize = 40;
const OFF_LAST_PG: usize = 136;
const OFF_TXNID: usize = 144;
const META_LEN: usize = OFF_TXNID + 8;
/// `md_root` of the main database (`mm_dbs[1]`, 48 bytes after `mm_dbs[0]` at 40).
const OFF_MAIN_ROOT: usize = 128;
/// Page flags (`P_BRANCH`, `P_LEAF`) and node flags (`F_BIGDATA`, `F_SUBDATA`).
const P_BRANCH: u16 = 0x01;
const P_LEAF: u16 = 0x02;
const F_BIGDATA: u16 = 0x01;
const F_SUBDATA: u16 = 0x02;

/// Name of the marker written last into a complete generation.
pub const MARKER: &str = "complete";
/// Name of the note left in a condemned generation.
pub const DAMAGED: &str = "damaged";

/// What the newest valid LMDB meta page says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LmdbMeta {
    pub page_size: u64,
    pub last_page: u64,
    pub txnid: u64,
}

/// The `complete` marker: what a finished generation looked like when it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    pub cache_version: u32,
    pub lmdb: LmdbMeta,
    /// Length of every tantivy file (segment files are immutable once written).
    pub text_files: BTreeMap<String, u64>,
    /// blake3 of tantivy's `meta.json` (the list of live segments).
    pub text_meta: String,
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

fn read_exact_at(f: &mut std::fs::File, off: u64, buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::Seek;
    f.seek(std::io::SeekFrom::Start(off))?;
    f.read_exact(buf)
}

/// Validate one meta page image: `Ok((page_size, last_page, txnid))`.
fn parse_meta(b: &[u8]) -> Result<LmdbMeta, String> {
    if u32_at(b, OFF_MAGIC) != MDB_MAGIC {
        return Err("bad LMDB magic".into());
    }
    let v = u32_at(b, OFF_VERSION);
    if v != MDB_DATA_VERSION {
        return Err(format!(
            "LMDB data version {v}, expected {MDB_DATA_VERSION}"
        ));
    }
    let psize = u32_at(b, OFF_PSIZE) as u64;
    if !(512..=65536).contains(&psize) || !psize.is_power_of_two() {
        return Err(format!("LMDB page size {psize} is not valid"));
    }
    Ok(LmdbMeta {
        page_size: psize,
        last_page: u64_at(b, OFF_LAST_PG),
        txnid: u64_at(b, OFF_TXNID),
    })
}

/// Read and check the two meta pages of `<dir>/data.mdb` with plain reads: both valid, and the
/// file long enough for every page they name. Returns the newest meta.
pub fn lmdb_meta(dir: &Path) -> Result<LmdbMeta, String> {
    let path = dir.join("data.mdb");
    let mut f = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let len = f
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    let mut b0 = [0u8; META_LEN];
    read_exact_at(&mut f, 0, &mut b0)
        .map_err(|_| format!("{}: shorter than one LMDB page", path.display()))?;
    let m0 = parse_meta(&b0).map_err(|e| format!("{}: meta page 0: {e}", path.display()))?;
    let mut b1 = [0u8; META_LEN];
    read_exact_at(&mut f, m0.page_size, &mut b1)
        .map_err(|_| format!("{}: shorter than two LMDB pages", path.display()))?;
    let m1 = parse_meta(&b1).map_err(|e| format!("{}: meta page 1: {e}", path.display()))?;
    if m1.page_size != m0.page_size {
        return Err(format!(
            "{}: meta pages disagree on the page size",
            path.display()
        ));
    }
    // Pages are never given back to the file system, so the larger last page is the one the
    // file must hold, whichever meta LMDB picks.
    let last = m0.last_page.max(m1.last_page);
    let need = last
        .checked_add(1)
        .and_then(|n| n.checked_mul(m0.page_size))
        .ok_or_else(|| format!("{}: last page {last} is out of range", path.display()))?;
    if len < need {
        return Err(format!(
            "{}: truncated ({len} bytes, the meta pages need {need})",
            path.display()
        ));
    }
    let (newest, bytes) = if m1.txnid > m0.txnid {
        (m1, b1)
    } else {
        (m0, b0)
    };
    check_roots(&mut f, &newest, u64_at(&bytes, OFF_MAIN_ROOT))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(newest)
}

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(b[off..off + 2].try_into().expect("2 bytes"))
}

/// Check one B-tree page with plain reads: its number, kind, bounds and every node inside the
/// page (garbage there sends LMDB's reads past the page, and past the file: SIGBUS). Returns
/// the roots of the tables a leaf of the main database names.
fn check_page(f: &mut std::fs::File, m: &LmdbMeta, pgno: u64) -> Result<Vec<u64>, String> {
    let bad = |why: &str| Err(format!("B-tree page {pgno} is damaged ({why})"));
    if pgno > m.last_page {
        return bad("beyond the last page");
    }
    let ps = m.page_size as usize;
    let mut b = vec![0u8; ps];
    read_exact_at(f, pgno * m.page_size, &mut b).map_err(|e| format!("page {pgno}: {e}"))?;
    let (flags, lower, upper) = (
        u16_at(&b, 10),
        u16_at(&b, 12) as usize,
        u16_at(&b, 14) as usize,
    );
    let kind = flags & (P_BRANCH | P_LEAF);
    if u64_at(&b, 0) != pgno || (kind != P_BRANCH && kind != P_LEAF) {
        return bad("header");
    }
    if lower < 16 || lower > upper || upper > ps || (lower - 16) % 2 != 0 {
        return bad("bounds");
    }
    let mut roots = Vec::new();
    for i in 0..(lower - 16) / 2 {
        let at = u16_at(&b, 16 + 2 * i) as usize;
        if at < upper || at + 8 > ps {
            return bad("node offset");
        }
        let lo = u16_at(&b, at) as u64 | (u16_at(&b, at + 2) as u64) << 16;
        let (nflags, ksize) = (u16_at(&b, at + 4), u16_at(&b, at + 6) as usize);
        let end = at + 8 + ksize;
        if kind == P_BRANCH {
            if end > ps || (lo | (nflags as u64) << 32) > m.last_page {
                return bad("branch node");
            }
            continue;
        }
        let dsize = if nflags & F_BIGDATA != 0 {
            8
        } else {
            lo as usize
        };
        if end + dsize > ps {
            return bad("leaf node");
        }
        if nflags & F_SUBDATA != 0 && dsize == 48 {
            roots.push(u64_at(&b, end + 40));
        }
    }
    Ok(roots)
}

/// The main database's root page and the root page of every table it names, checked with plain
/// reads before LMDB maps the file.
fn check_roots(f: &mut std::fs::File, m: &LmdbMeta, main: u64) -> Result<(), String> {
    if main == u64::MAX {
        return Ok(());
    }
    for root in check_page(f, m, main)? {
        if root != u64::MAX {
            check_page(f, m, root)?;
        }
    }
    Ok(())
}

fn text_files(dir: &Path) -> Result<(BTreeMap<String, u64>, String), String> {
    let mut files = BTreeMap::new();
    let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        // Lock files and tantivy's own bookkeeping change without the index changing.
        if name.starts_with('.') || name == "meta.json" {
            continue;
        }
        let md = e.metadata().map_err(|e| format!("{name}: {e}"))?;
        if md.is_file() {
            files.insert(name, md.len());
        }
    }
    let meta = dir.join("meta.json");
    let bytes = read_small(&meta, 16 << 20)?;
    Ok((files, blake3::hash(&bytes).to_hex().to_string()))
}

fn read_small(path: &Path, cap: u64) -> Result<Vec<u8>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    f.take(cap + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if out.len() as u64 > cap {
        return Err(format!("{}: larger than {cap} bytes", path.display()));
    }
    Ok(out)
}

/// Describe a finished generation (after its last commit).
pub fn describe(gen: &Path) -> Result<Marker, String> {
    let lmdb = lmdb_meta(&gen.join("lmdb"))?;
    let (text_files, text_meta) = text_files(&gen.join("text"))?;
    Ok(Marker {
        cache_version: super::CACHE_VERSION,
        lmdb,
        text_files,
        text_meta,
    })
}

/// Write the `complete` marker last, durably (file and directory fsync'd).
pub fn seal(gen: &Path) -> Result<(), Error> {
    let m = describe(gen).map_err(Error::Corrupt)?;
    let bytes = serde_json::to_vec(&m).map_err(|e| Error::Corrupt(e.to_string()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(gen).map_err(|e| Error::io(gen, e))?;
    tmp.write_all(&bytes).map_err(|e| Error::io(gen, e))?;
    tmp.as_file().sync_all().map_err(|e| Error::io(gen, e))?;
    tmp.persist(gen.join(MARKER))
        .map_err(|e| Error::io(gen, e.error))?;
    if let Ok(d) = std::fs::File::open(gen) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Remove the marker before changing a generation in place (a crash leaves it incomplete).
pub fn unseal(gen: &Path) -> Result<(), Error> {
    match std::fs::remove_file(gen.join(MARKER)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(gen, e)),
    }
}

/// Is this generation complete and undamaged as far as cheap checks can tell? `Err` says why
/// not: [`Error::Outdated`] for a generation another kdd version built (nothing is wrong with
/// it), [`Error::Corrupt`] otherwise. Costs two page reads, one small file read and a `stat` per
/// tantivy file.
pub fn intact(gen: &Path) -> Result<(), Error> {
    // The generation is named once (most reasons already start with one of its files).
    let corrupt = |why: String| {
        if why.starts_with(&*gen.to_string_lossy()) {
            Error::Corrupt(why)
        } else {
            Error::Corrupt(format!("{}: {why}", gen.display()))
        }
    };
    let want = read_marker(gen).map_err(corrupt)?;
    if want.cache_version != super::CACHE_VERSION {
        return Err(Error::Outdated(format!(
            "cache version {}, expected {}",
            want.cache_version,
            super::CACHE_VERSION
        )));
    }
    matches_marker(gen, &want).map_err(corrupt)
}

/// The `complete` marker, or why there is none.
fn read_marker(gen: &Path) -> Result<Marker, String> {
    let marker = gen.join(MARKER);
    let bytes = match read_small(&marker, 1 << 20) {
        Ok(b) => b,
        Err(_) if gen.join(DAMAGED).exists() => {
            let why = read_small(&gen.join(DAMAGED), 64 << 10).unwrap_or_default();
            return Err(format!(
                "found damaged earlier: {}",
                String::from_utf8_lossy(&why).trim()
            ));
        }
        Err(_) => return Err("incomplete (no `complete` marker: a build did not finish)".into()),
    };
    serde_json::from_slice(&bytes).map_err(|e| format!("unreadable marker: {e}"))
}

/// Do the LMDB meta pages and tantivy's files still match what the marker recorded?
fn matches_marker(gen: &Path, want: &Marker) -> Result<(), String> {
    let have = lmdb_meta(&gen.join("lmdb"))?;
    if have != want.lmdb {
        return Err(format!(
            "LMDB store changed outside kdd (transaction {} page {}, the marker says {} page {})",
            have.txnid, have.last_page, want.lmdb.txnid, want.lmdb.last_page
        ));
    }
    let text = gen.join("text");
    for (name, len) in &want.text_files {
        let p = text.join(name);
        match std::fs::metadata(&p) {
            Ok(md) if md.len() == *len => {}
            Ok(md) => {
                return Err(format!(
                    "{}: {} bytes, expected {len}",
                    p.display(),
                    md.len()
                ))
            }
            Err(e) => return Err(format!("{}: {e}", p.display())),
        }
    }
    let meta = read_small(&text.join("meta.json"), 16 << 20)?;
    if blake3::hash(&meta).to_hex().as_str() != want.text_meta {
        return Err(format!(
            "{}: changed outside kdd",
            text.join("meta.json").display()
        ));
    }
    Ok(())
}

/// Mark a generation damaged: the marker goes, a note says why. Best effort (the generation
/// may be read-only or gone); returns whether the marker is gone now.
pub fn condemn(gen: &Path, why: &str) -> bool {
    // The first diagnosis is kept (later ones only say "found damaged earlier").
    if !gen.join(DAMAGED).exists() {
        if let Ok(mut f) = std::fs::File::create(gen.join(DAMAGED)) {
            let _ = f.write_all(why.as_bytes());
        }
    }
    unseal(gen).is_ok()
}

/// Read everything in an open generation: every LMDB table, every vector, and tantivy's own
/// checksums. `Err` says what is damaged.
pub fn deep(store: &super::store::Store, text: &super::text::TextIndex) -> Result<(), String> {
    let rtxn = store.rtxn().map_err(|e| e.to_string())?;
    fn scan<K, V>(
        rtxn: &heed::RoTxn<heed::WithoutTls>,
        name: &str,
        db: heed::Database<K, V>,
    ) -> Result<(), String>
    where
        K: for<'a> heed::BytesDecode<'a> + 'static,
        V: for<'a> heed::BytesDecode<'a> + 'static,
    {
        for kv in db.iter(rtxn).map_err(|e| format!("table {name}: {e}"))? {
            kv.map_err(|e| format!("table {name}: {e}"))?;
        }
        Ok(())
    }
    scan(&rtxn, "meta", store.meta)?;
    scan(&rtxn, "nodes", store.nodes)?;
    scan(&rtxn, "lite", store.lite)?;
    scan(&rtxn, "fwd", store.fwd)?;
    scan(&rtxn, "rev", store.rev)?;
    scan(&rtxn, "names", store.names)?;
    scan(&rtxn, "keys", store.keys)?;
    scan(&rtxn, "lkeys", store.lkeys)?;
    scan(&rtxn, "paths", store.paths)?;
    let files = store
        .files
        .remap_data_type::<heed::types::SerdeJson<super::build::StemStamp>>();
    scan(&rtxn, "files", files)?;
    scan(&rtxn, "chunks", store.chunks)?;
    scan(&rtxn, "pending", store.pending)?;
    match arroy::Reader::open(&rtxn, 0, store.vectors) {
        Ok(r) => {
            for item in r.iter(&rtxn).map_err(|e| format!("vectors: {e}"))? {
                item.map_err(|e| format!("vectors: {e}"))?;
            }
        }
        Err(arroy::Error::MissingMetadata(_)) => {}
        Err(e) => return Err(format!("vectors: {e}")),
    }
    let bad = text
        .index
        .validate_checksum()
        .map_err(|e| format!("text index: {e}"))?;
    if let Some(f) = bad.iter().next() {
        return Err(format!("text index: {} fails its checksum", f.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta_page(psize: u32, last: u64, txn: u64) -> Vec<u8> {
        let mut b = vec![0u8; psize as usize];
        b[OFF_MAGIC..OFF_MAGIC + 4].copy_from_slice(&MDB_MAGIC.to_le_bytes());
        b[OFF_VERSION..OFF_VERSION + 4].copy_from_slice(&1u32.to_le_bytes());
        b[OFF_PSIZE..OFF_PSIZE + 4].copy_from_slice(&psize.to_le_bytes());
        b[OFF_LAST_PG..OFF_LAST_PG + 8].copy_from_slice(&last.to_le_bytes());
        b[OFF_TXNID..OFF_TXNID + 8].copy_from_slice(&txn.to_le_bytes());
        b[OFF_MAIN_ROOT..OFF_MAIN_ROOT + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        b
    }

    #[test]
    fn a_garbage_root_page_is_caught_before_mapping() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("data.mdb");
        let mut bytes = meta_page(4096, 3, 4);
        bytes.extend(meta_page(4096, 3, 5));
        bytes[4096 + OFF_MAIN_ROOT..4096 + OFF_MAIN_ROOT + 8].copy_from_slice(&2u64.to_le_bytes());
        // Page 2: a leaf whose one node claims a key running past the page.
        let mut page = vec![0u8; 4096];
        page[..8].copy_from_slice(&2u64.to_le_bytes());
        page[10..12].copy_from_slice(&P_LEAF.to_le_bytes());
        page[12..14].copy_from_slice(&18u16.to_le_bytes());
        page[14..16].copy_from_slice(&4000u16.to_le_bytes());
        page[16..18].copy_from_slice(&4000u16.to_le_bytes());
        page[4006..4008].copy_from_slice(&500u16.to_le_bytes());
        bytes.extend(&page);
        bytes.resize(4 * 4096, 0);
        std::fs::write(&p, &bytes).unwrap();
        let e = lmdb_meta(d.path()).unwrap_err();
        assert!(e.contains("page 2 is damaged (leaf node)"), "{e}");
        // The same leaf with a key that fits is fine.
        bytes[2 * 4096 + 4006..2 * 4096 + 4008].copy_from_slice(&5u16.to_le_bytes());
        std::fs::write(&p, &bytes).unwrap();
        lmdb_meta(d.path()).unwrap();
        // A root beyond the last page.
        bytes[4096 + OFF_MAIN_ROOT..4096 + OFF_MAIN_ROOT + 8].copy_from_slice(&9u64.to_le_bytes());
        std::fs::write(&p, &bytes).unwrap();
        assert!(lmdb_meta(d.path())
            .unwrap_err()
            .contains("beyond the last page"));
    }

    #[test]
    fn meta_pages_and_length_are_checked() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("data.mdb");
        let mut bytes = meta_page(4096, 9, 4);
        bytes.extend(meta_page(4096, 11, 5));
        bytes.resize(12 * 4096, 0);
        std::fs::write(&p, &bytes).unwrap();
        let m = lmdb_meta(d.path()).unwrap();
        assert_eq!((m.page_size, m.last_page, m.txnid), (4096, 11, 5));
        std::fs::write(&p, &bytes[..11 * 4096]).unwrap();
        assert!(lmdb_meta(d.path()).unwrap_err().contains("truncated"));
        std::fs::write(&p, &bytes[..100]).unwrap();
        assert!(lmdb_meta(d.path()).is_err());
        let mut bad = bytes.clone();
        bad[4096 + OFF_MAGIC] ^= 0xff;
        std::fs::write(&p, &bad).unwrap();
        assert!(lmdb_meta(d.path()).unwrap_err().contains("meta page 1"));
        let mut huge = bytes.clone();
        huge[OFF_LAST_PG..OFF_LAST_PG + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        std::fs::write(&p, &huge).unwrap();
        assert!(lmdb_meta(d.path()).is_err());
    }
}
