//! Freshness of a one-shot answer: which of the answer's specs changed on disk since the cache
//! indexed them. A server scans every spec on a timer (`serve::Served::stale_scan`); a command
//! such as `kdd query` checks only the specs it answers with, so the check costs one read per
//! result and a large corpus stays fast. A spec whose file changed gets the answer a
//! `STALE_SPECS` warning: its text, evidence and line ranges are those of the indexed version.
//! Files are read through the one source rule ([`crate::roots::read_source`]): a path the
//! index names outside the specs and documents roots is never read, and counts as changed.

use super::{Error, Warning};
use crate::cache::Cache;
use std::collections::BTreeSet;

/// The source files, among the nodes `ids`, whose bytes differ from the indexed version (a
/// file gone or unreadable counts as changed). Unknown ids are skipped.
pub fn changed_specs<'a>(
    cache: &Cache,
    ids: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<String>, Error> {
    let m = cache.manifest();
    let roots = crate::roots::Roots::new(&m.specs_root, &m.docs);
    let snap = cache.snapshot()?;
    let mut files = BTreeSet::new();
    for id in ids {
        if let Some(lite) = snap.lite(id)? {
            files.insert((lite.node.source_file, lite.node.source_hash));
        }
    }
    Ok(files
        .into_iter()
        .filter(|(file, hash)| {
            crate::roots::read_source(cache.repo_root(), file, &roots)
                .map(|b| !crate::spec::same_content(&crate::spec::content_hash(&b), hash))
                .unwrap_or(true)
        })
        .map(|(file, _)| crate::source::printable(&file))
        .collect())
}

/// The `STALE_SPECS` warning of an answer over `ids`: the specs the index itself marks stale
/// plus those of `ids` changed on disk ([`changed_specs`]); `None` when there are none.
pub fn stale_warning<'a>(
    cache: &Cache,
    ids: impl IntoIterator<Item = &'a str>,
) -> Result<Option<Warning>, Error> {
    let mut stale: BTreeSet<String> = changed_specs(cache, ids)?.into_iter().collect();
    if let Some(st) = cache.snapshot()?.stats()? {
        stale.extend(st.stale_specs);
    }
    Ok(Warning::stale_specs(&stale.into_iter().collect::<Vec<_>>()))
}

/// Replace `warnings`' `STALE_SPECS` entry with [`stale_warning`] over `ids`.
pub fn mark_stale<'a>(
    cache: &Cache,
    warnings: &mut Vec<Warning>,
    ids: impl IntoIterator<Item = &'a str>,
) -> Result<(), Error> {
    let w = stale_warning(cache, ids)?;
    warnings.retain(|w| w.code != "STALE_SPECS");
    warnings.extend(w);
    Ok(())
}
