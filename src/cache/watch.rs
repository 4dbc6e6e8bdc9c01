//! Specs whose cached text is not their indexed version, watched by their file stamps.
//!
//! A record is stale when its spec's bytes differ from the node's `source_hash` and git holds no
//! copy that matches (`indexed.rs`): its text then comes from the work tree as it was at that
//! update. Freshness is otherwise decided by the artifacts alone (`mod.rs`), so such a record
//! would keep that text, and its stale mark, until the spec's artifacts change, even after the
//! file itself is put back. The meta entry `watch` maps each stale record's stem to its spec's
//! size + mtime when it was read; an open whose watched specs moved updates those records again
//! (a few `stat`s, none when nothing is stale).

use super::scan::{folder_of, now_ns, racy_ns, stamp, DirStamps};
use super::store::{lm, FileStamp, Store};
use super::Error;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Stem → (spec path, its stamp when read; `None` when missing or just written).
type Watch = BTreeMap<String, (String, Option<FileStamp>)>;

/// The stamp of a spec file now; `None` when it is missing, or was written so recently that a
/// later write could keep its mtime (then it never matches, and is read again next time).
fn spec_stamp(repo_root: &Path, rel: &str) -> Option<FileStamp> {
    let md = std::fs::symlink_metadata(repo_root.join(rel)).ok()?;
    let st = stamp(&md);
    (st.mtime_ns <= now_ns() - racy_ns(st.mtime_ns)).then_some(st)
}

/// The watched stems whose spec file moved since they were read.
pub fn moved(store: &Store, txn: &heed::RoTxn, repo_root: &Path) -> BTreeSet<String> {
    let watch: Watch = store
        .get_meta(txn, "watch")
        .ok()
        .flatten()
        .unwrap_or_default();
    watch
        .into_iter()
        .filter(|(_, (rel, was))| was.is_none() || spec_stamp(repo_root, rel) != *was)
        .map(|(stem, _)| stem)
        .collect()
}

/// [`moved`] in a read transaction of its own (an error reads as nothing moved: the open that
/// follows meets it).
pub fn moved_now(store: &Store, repo_root: &Path) -> BTreeSet<String> {
    store
        .rtxn()
        .map(|t| moved(store, &t, repo_root))
        .unwrap_or_default()
}

/// Make the update read `stems` again: their stamps are forgotten and their folders re-scanned.
pub fn reload(
    store: &Store,
    wtxn: &mut heed::RwTxn,
    prev: &mut DirStamps,
    stems: &BTreeSet<String>,
) -> Result<(), Error> {
    for stem in stems {
        store.files.delete(wtxn, stem).map_err(lm)?;
        // Kept as a key (its parent lists it as a sub-folder), marked to be read again.
        prev.insert(folder_of(stem).to_string(), None);
    }
    Ok(())
}

/// Record what this update read: `read` maps each stem loaded to its spec path when its record
/// is stale (`None` when it is not); stems no longer stored are dropped.
pub fn record(
    store: &Store,
    wtxn: &mut heed::RwTxn,
    repo_root: &Path,
    read: Vec<(String, Option<String>)>,
) -> Result<(), Error> {
    let mut watch: Watch = store.get_meta(wtxn, "watch")?.unwrap_or_default();
    for (stem, stale) in read {
        match stale {
            Some(rel) => {
                let stamp = spec_stamp(repo_root, &rel);
                watch.insert(stem, (rel, stamp));
            }
            None => {
                watch.remove(&stem);
            }
        }
    }
    let mut kept = Watch::new();
    for (stem, v) in watch {
        let files = store.files.remap_data_type::<heed::types::DecodeIgnore>();
        if files.get(wtxn, &stem).map_err(lm)?.is_some() {
            kept.insert(stem, v);
        }
    }
    store.put_meta(wtxn, "watch", &kept)
}
