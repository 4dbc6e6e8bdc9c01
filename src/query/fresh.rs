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

/// The `STALE_SPECS` warning of an answer over `ids`: the specs the index itself marks stale
/// plus the source files of `ids` whose bytes differ from the indexed version (a file gone or
/// unreadable counts as changed; unknown ids are skipped); `None` when there are none.
pub fn stale_warning<'a>(
    cache: &Cache,
    ids: impl IntoIterator<Item = &'a str>,
) -> Result<Option<Warning>, Error> {
    let m = cache.manifest();
    let roots = crate::roots::Roots::new(&m.specs_root, &m.docs);
    let snap = cache.snapshot()?;
    let mut stale = BTreeSet::new();
    let left_out = std::cell::OnceCell::new();
    for id in ids {
        let Some(lite) = snap.lite(id)? else { continue };
        let (file, hash) = (&lite.node.source_file, &lite.node.source_hash);
        let now = crate::roots::hash_source(cache.repo_root(), file, &roots);
        if now
            .as_ref()
            .is_ok_and(|h| crate::spec::same_content(h, hash))
        {
            continue;
        }
        // A spec a sparse checkout leaves out is committed as indexed, not changed.
        let sparse = matches!(now, Err(crate::source::Error::Io { .. }))
            && left_out
                .get_or_init(|| crate::git::roots::LeftOut::read(cache.repo_root()))
                .holds(file);
        if !sparse {
            stale.insert(crate::source::printable(file));
        }
    }
    if let Some(st) = snap.stats()? {
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
