//! Generations of the cache: `<root>/gen-*` directories, the `current` pointer swapped
//! atomically, the writer lock, and the open / update-in-place / build-fresh steps.
//!
//! Invariants: a generation is opened only after [`super::check::intact`] passed (plain reads,
//! before LMDB maps anything); it is changed in place only under the writer lock, unsealed
//! first and sealed after its last commit; anything found damaged on the way is condemned and
//! replaced by a fresh generation, never opened again. Older generations are removed when a new
//! one becomes current (the previous one stays: a reader may still be opening it).

use super::check;
use super::store::{lm, Store};
use super::text::TextIndex;
use super::{build, BuildStats, Error, CACHE_VERSION};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// One LMDB environment per directory per process (heed forbids opening one twice).
pub(super) fn store_for(dir: &Path) -> Result<Store, Error> {
    static STORES: OnceLock<Mutex<HashMap<PathBuf, Store>>> = OnceLock::new();
    let m = STORES.get_or_init(|| Mutex::new(HashMap::new()));
    let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = g.get(dir) {
        return Ok(s.clone());
    }
    let s = Store::open(dir)?;
    g.insert(dir.to_path_buf(), s.clone());
    Ok(s)
}

/// Exclusive writer lock on the cache root (released on drop).
pub(super) struct WriterLock(std::fs::File);

impl WriterLock {
    pub(super) fn acquire(root: &Path) -> Result<WriterLock, Error> {
        // The first write into the cache directory: say what to do when it cannot be used.
        let unusable = |path: &Path, e: std::io::Error| {
            let why = format!(
                "{e}; the query cache needs a writable directory there: fix it, or set \
                 KDD_CACHE_DIR to one (default: the git directory's kdd-cache)"
            );
            Error::io(path, std::io::Error::new(e.kind(), why))
        };
        std::fs::create_dir_all(root).map_err(|e| unusable(root, e))?;
        let p = root.join("lock");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&p)
            .map_err(|e| unusable(&p, e))?;
        fs4::FileExt::lock(&f).map_err(|e| Error::io(&p, e))?;
        Ok(WriterLock(f))
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        let _ = fs4::FileExt::unlock(&self.0);
    }
}

pub(super) fn read_current(root: &Path) -> Option<PathBuf> {
    let name = std::fs::read_to_string(root.join("current")).ok()?;
    let name = name.trim();
    if name.is_empty() || name.contains('/') || name.contains("..") {
        return None;
    }
    let p = root.join(name);
    p.is_dir().then_some(p)
}

pub(super) fn write_current(root: &Path, gen: &Path) -> Result<(), Error> {
    let name = gen
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = tempfile::NamedTempFile::new_in(root).map_err(|e| Error::io(root, e))?;
    tmp.write_all(name.as_bytes())
        .map_err(|e| Error::io(root, e))?;
    tmp.persist(root.join("current"))
        .map_err(|e| Error::io(root, e.error))?;
    Ok(())
}

/// What `kdd doctor` finds in the query cache of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// No generation yet (the first query builds one).
    Missing,
    /// The live generation passed every check, deep reads included.
    Intact(PathBuf),
    /// The live generation is damaged (why); it has been condemned, so the next open
    /// rebuilds it into a fresh generation.
    Damaged(PathBuf, String),
    /// Another kdd version built it (why): nothing is wrong, the next open builds anew.
    Outdated(String),
}

/// Check the live generation of the cache under `root` thoroughly: the cheap pre-open checks,
/// then every table, vector and text-index checksum. A damaged generation is condemned.
pub fn health(root: &Path) -> Health {
    let Some(gen) = read_current(root) else {
        return Health::Missing;
    };
    let res = match gen_ok(&gen) {
        Err(Error::Outdated(why)) => return Health::Outdated(why),
        Err(Error::Corrupt(why)) => Err(why),
        Err(e) => Err(e.to_string()),
        Ok((store, text, _)) => check::deep(&store, &text),
    };
    match res {
        Ok(()) => Health::Intact(gen),
        Err(why) => {
            check::condemn(&gen, &why);
            Health::Damaged(gen, why)
        }
    }
}

pub(super) fn gen_ok(gen: &Path) -> Result<(Store, TextIndex, Option<String>), Error> {
    // Checked with plain reads before LMDB maps anything (a truncated file is a SIGBUS).
    check::intact(gen)?;
    let store = store_for(&gen.join("lmdb"))?;
    let text = TextIndex::open(&gen.join("text"))?;
    let rtxn = store.rtxn()?;
    let v: Option<u32> = store.get_meta(&rtxn, "version")?;
    if v != Some(CACHE_VERSION) {
        return Err(Error::Outdated(format!(
            "cache version {v:?}, expected {CACHE_VERSION}"
        )));
    }
    let fp: Option<String> = store.get_meta(&rtxn, "fingerprint")?;
    Ok((store, text, fp))
}

/// Where a generation is opened, updated or built.
pub(super) struct Paths<'a> {
    pub(super) index_dir: &'a Path,
    pub(super) repo_root: &'a Path,
    pub(super) root: &'a Path,
    pub(super) roots: &'a crate::roots::Roots,
}

/// A generation opened (or built) under the writer lock.
pub(super) struct Opened {
    pub(super) gen: PathBuf,
    pub(super) store: Store,
    pub(super) text: TextIndex,
    pub(super) stats: Option<BuildStats>,
}

/// Bring the live generation up to date in place. `Ok(None)`: there is none usable (missing,
/// incomplete, damaged, old); the reason is pushed to `healed` when it was damaged.
pub(super) fn update_current(
    p: &Paths,
    fp: &str,
    healed: &mut Vec<String>,
) -> Result<Option<Opened>, Error> {
    let Some(gen) = read_current(p.root) else {
        return Ok(None);
    };
    let (store, text, have) = match gen_ok(&gen) {
        Ok(x) => x,
        // Another version's cache: built anew, without a word about damage.
        Err(Error::Outdated(_)) => return Ok(None),
        Err(e) => {
            let why = match e {
                Error::Corrupt(why) => why,
                e => e.to_string(),
            };
            check::condemn(&gen, &why);
            healed.push(why);
            return Ok(None);
        }
    };
    // Built with other translations (Apertium installed or switched off since), or under other
    // roots (the manifest's specs root or documents changed, e.g. by a branch switch: which
    // artifacts were left out depends on them): from scratch.
    let rtxn = store.rtxn()?;
    let tr: Option<String> = store.get_meta(&rtxn, "doctr")?;
    let built_roots: Option<String> = store.get_meta(&rtxn, "roots")?;
    drop(rtxn);
    if tr.as_deref() != Some(super::doctr::state().as_str())
        || built_roots.as_deref() != Some(roots_key(p.roots).as_str())
    {
        return Ok(None);
    }
    if have.as_deref() == Some(fp) && super::watch::moved_now(&store, p.repo_root).is_empty() {
        return Ok(Some(Opened {
            gen,
            store,
            text,
            stats: None,
        }));
    }
    check::unseal(&gen)?;
    let res = build::update(
        &store,
        &text,
        p.index_dir,
        p.repo_root,
        p.roots,
        false,
        Some(&p.root.join("translations")),
    )
    .and_then(|stats| {
        let mut w = store.wtxn()?;
        store.put_meta(&mut w, "fingerprint", &fp)?;
        w.commit().map_err(lm)?;
        Ok(stats)
    });
    match res {
        Ok(stats) => {
            check::seal(&gen)?;
            Ok(Some(Opened {
                gen,
                store,
                text,
                stats: Some(stats),
            }))
        }
        Err(Error::Corrupt(why)) => {
            check::condemn(&gen, &why);
            healed.push(format!("{}: {why}", gen.display()));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Build a fresh generation from scratch, seal it and make it current; older generations
/// (but the previous one, which a reader may still be opening) are removed.
pub(super) fn build_fresh(p: &Paths, fp: &str) -> Result<Opened, Error> {
    let gen = p.root.join(format!(
        "gen-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    match fill_fresh(p, fp, &gen) {
        Ok(o) => Ok(o),
        Err(e) => {
            // Never current, so never opened by a reader: removed, or a full disk stays full
            // and every later query fails on it. A store being written from scratch is not
            // damaged: what failed is the write.
            let _ = std::fs::remove_dir_all(&gen);
            Err(match e {
                Error::Corrupt(why) => Error::Unwritable(p.root.to_path_buf(), why),
                e => e,
            })
        }
    }
}

/// The build of [`build_fresh`] into the new generation `gen`.
fn fill_fresh(p: &Paths, fp: &str, gen: &Path) -> Result<Opened, Error> {
    let gen = gen.to_path_buf();
    std::fs::create_dir_all(gen.join("text")).map_err(|e| Error::io(&gen, e))?;
    let store = store_for(&gen.join("lmdb"))?;
    let text = TextIndex::create(&gen.join("text"))?;
    let stats = build::update(
        &store,
        &text,
        p.index_dir,
        p.repo_root,
        p.roots,
        true,
        Some(&p.root.join("translations")),
    )?;
    let mut w = store.wtxn()?;
    store.put_meta(&mut w, "version", &CACHE_VERSION)?;
    store.put_meta(&mut w, "doctr", &super::doctr::state())?;
    store.put_meta(&mut w, "roots", &roots_key(p.roots))?;
    store.put_meta(&mut w, "fingerprint", &fp)?;
    w.commit().map_err(lm)?;
    check::seal(&gen)?;
    let old = read_current(p.root);
    write_current(p.root, &gen)?;
    if let Ok(rd) = std::fs::read_dir(p.root) {
        for e in rd.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("gen-") && path != gen && Some(&path) != old.as_ref() {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }
    Ok(Opened {
        gen,
        store,
        text,
        stats: Some(stats),
    })
}

/// The roots a generation was built under, as its `roots` meta records them.
fn roots_key(r: &crate::roots::Roots) -> String {
    std::iter::once(r.specs.as_str())
        .chain(r.docs.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}
