//! Domain isolation for multi-domain corpora (seed 003): a context request whose hints clearly
//! point into one business domain keeps the other domains' look-alike specs out.
//!
//! - A hint names a domain when it is domain-qualified (`billing:BR-003`, `billing:Invoice`),
//!   when it is a path with a segment equal to a domain's id (`src/billing/invoices/cancel.py`),
//!   or else a path whose nearest folder named after specs names specs of one business domain
//!   only (`src/invoices/cancel.py`, the `Invoice` entity being billing's).
//!   Hints resolved by id, path or name add the domain of what they resolved to; keyword hints
//!   (a lexical search) name no domain, and neither does a hint that resolved into several
//!   domains (`BR-001`, numbered in every domain): it is ambiguous.
//! - The request is *focused* on domain D when the domains so named are exactly {D} (shared
//!   specs aside). Then a spec of another business domain enters only through a typed link
//!   (not a plain wiki-link or a generic cross-domain reference), and its `reached_via` shows
//!   that link; shared specs (`_shared`, or no domain) always stay eligible.
//!
//! - In a focused request an ambiguous hint keeps only its specs in the focus (and shared
//!   ones); the others leave its resolved entities, and a warning names them.
//!
//! Invariants: with no focus (single-domain corpora, hints in several domains, keyword-only
//! or ambiguous hints alone) nothing is filtered; the focus never removes a spec a hint
//! resolved to unambiguously by id or path.

use super::types::ResolvedEntity;
use super::Error;
use crate::cache::Snapshot;
use std::collections::BTreeSet;

/// True for specs every domain may see (`_shared`, `_…`, or no domain).
pub fn is_shared(domain: Option<&str>) -> bool {
    domain.is_none_or(|d| d.is_empty() || d.starts_with('_'))
}

/// `Err(INVALID_DOMAIN)` when a filter names a domain the index does not have: a typo would
/// otherwise answer nothing, as if nothing matched.
pub fn check_filter(snap: &Snapshot<'_>, domain: Option<&str>) -> Result<(), Error> {
    let Some(d) = domain else {
        return Ok(());
    };
    let known = &snap.cache.manifest().domains;
    if known.iter().any(|k| k == d) {
        return Ok(());
    }
    let shown: String = crate::spec::escape_control(d).chars().take(80).collect();
    let message = if known.is_empty() {
        format!("unknown domain `{shown}`: this index has no domains; drop the domain filter")
    } else {
        format!(
            "unknown domain `{shown}`; this index has: {}",
            known.join(", ")
        )
    };
    Err(Error::invalid("INVALID_DOMAIN", message))
}

/// Edges that may bring a spec of another domain into a focused answer: typed ones only.
pub fn crosses(edge_type: &str) -> bool {
    !matches!(edge_type, "WIKI_LINK" | "CROSS_DOMAIN_REF")
}

/// The business domains of the corpus (shared ones excluded), from its manifest (the
/// `specs/domains/` folders the index was made from; every spec's domain is one of them), so no
/// spec is read.
pub fn domains(snap: &Snapshot<'_>) -> BTreeSet<String> {
    snap.cache
        .manifest()
        .domains
        .iter()
        .filter(|d| !is_shared(Some(d)))
        .cloned()
        .collect()
}

/// The domain a hint names by itself (qualified, or a path segment), if any.
pub fn named_by_hint(hint: &str, known: &BTreeSet<String>) -> Option<String> {
    let h = hint.trim();
    if let Some((pre, rest)) = h.split_once(':') {
        if !rest.is_empty() && known.contains(pre) {
            return Some(pre.to_string());
        }
    }
    if h.contains('/') || h.contains('\\') {
        let norm = h.replace('\\', "/");
        return norm
            .split('/')
            .rev()
            .find_map(|seg| known.iter().find(|d| same_folder_name(seg, d)))
            .cloned();
    }
    None
}

/// A code folder named after a domain id, in any of the usual spellings of a kebab-case id:
/// `order-management`, `order_management`, `orderManagement`, `OrderManagement`.
pub(super) fn same_folder_name(seg: &str, id: &str) -> bool {
    let squash = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '-' && *c != '_')
            .flat_map(char::to_lowercase)
            .collect()
    };
    let id_squashed = squash(id);
    seg == id || (!id_squashed.is_empty() && squash(seg) == id_squashed)
}

/// The business domain a hint names by itself: by qualification or a path segment
/// ([`named_by_hint`]), else through a path's folders ([`named_by_folders`]).
pub fn named_by_path(
    snap: &Snapshot<'_>,
    hint: &str,
    known: &BTreeSet<String>,
) -> Result<Option<String>, Error> {
    match named_by_hint(hint, known) {
        Some(d) => Ok(Some(d)),
        None => named_by_folders(snap, hint, known),
    }
}

/// The domain a code path names through its folders when no segment is a domain's id: the
/// nearest folder named after specs (`src/reservations/cancel.py` → the `Reservation` entity,
/// a plural's `s`/`es` dropped) names their business domain when they all belong to one.
/// Folders named after shared specs, or after specs of several domains, name none.
fn named_by_folders(
    snap: &Snapshot<'_>,
    hint: &str,
    known: &BTreeSet<String>,
) -> Result<Option<String>, Error> {
    if known.is_empty() {
        return Ok(None);
    }
    let norm = hint.trim().replace('\\', "/");
    let mut segs: Vec<&str> = norm.split('/').filter(|s| !s.is_empty()).collect();
    if segs.len() < 2 {
        return Ok(None);
    }
    segs.pop();
    for seg in segs.iter().rev().filter(|s| s.chars().count() >= 3) {
        let mut ids = Vec::new();
        for name in [Some(*seg), seg.strip_suffix('s'), seg.strip_suffix("es")]
            .into_iter()
            .flatten()
        {
            ids.extend(snap.lookup(name)?.into_iter().map(|(_, id)| id));
        }
        if ids.is_empty() {
            continue;
        }
        let mut doms = BTreeSet::new();
        for id in &ids {
            let d = snap.node_brief(id)?.and_then(|r| r.node.domain);
            doms.extend(d.filter(|d| !is_shared(Some(d))));
        }
        return Ok(focus(&doms));
    }
    Ok(None)
}

/// The focus of a request: its one named business domain, if exactly one is named.
pub fn focus(named: &BTreeSet<String>) -> Option<String> {
    (named.len() == 1)
        .then(|| named.iter().next().cloned())
        .flatten()
}

/// The seeds a focused request keeps. Keyword hints do not pull another domain's look-alikes
/// in, and an ambiguous hint (`BR-001`, numbered in every domain) keeps only its spec in the
/// focus, the others leaving the resolved entities with a warning that says so.
pub(super) fn in_focus(
    snap: &Snapshot<'_>,
    resolved: &mut Vec<ResolvedEntity>,
    seeds: Vec<String>,
    ambiguous: &BTreeSet<String>,
    focus: &Focus,
    warnings: &mut Vec<String>,
) -> Result<Vec<String>, Error> {
    let mut kept = Vec::with_capacity(seeds.len());
    let mut left: BTreeSet<String> = BTreeSet::new();
    for id in seeds {
        let loose = resolved.iter().any(|r| {
            r.node_id == id
                && (matches!(r.match_method.as_str(), "text_search" | "path_words")
                    || ambiguous.contains(&r.matched_from))
        });
        let d = snap.node_brief(&id)?.and_then(|r| r.node.domain);
        if loose && focus.outside(&d) {
            left.insert(id);
        } else {
            kept.push(id);
        }
    }
    for h in ambiguous {
        let out: Vec<&str> = resolved
            .iter()
            .filter(|r| &r.matched_from == h && left.contains(&r.node_id))
            .map(|r| r.node_id.as_str())
            .collect();
        if let (false, Some(f)) = (out.is_empty(), &focus.0) {
            warnings.push(format!(
                "Hint '{h}' names specs in several domains: kept the one in {f} (the domain the other hints name), left out {}",
                out.join(", ")
            ));
        }
    }
    resolved.retain(|r| !(ambiguous.contains(&r.matched_from) && left.contains(&r.node_id)));
    Ok(kept)
}

/// The one business domain a request is focused on, if any.
pub(super) struct Focus(pub(super) Option<String>);

impl Focus {
    /// A spec of another business domain (shared specs are never outside).
    pub(super) fn outside(&self, d: &Option<String>) -> bool {
        self.0
            .as_ref()
            .is_some_and(|f| !is_shared(d.as_deref()) && d.as_deref() != Some(f.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_name_domains_by_prefix_or_path_segment() {
        let known: BTreeSet<String> = ["clinic".to_string(), "dining".to_string()].into();
        assert_eq!(
            named_by_hint("dining:BR-003", &known).as_deref(),
            Some("dining")
        );
        assert_eq!(
            named_by_hint("src/clinic/appointments/cancel.py", &known).as_deref(),
            Some("clinic")
        );
        assert_eq!(named_by_hint("Entity:Reservation", &known), None);
        assert_eq!(named_by_hint("cancellation fee", &known), None);
        let known: BTreeSet<String> = ["order-management".to_string()].into();
        for path in [
            "src/order_management/cancel.py",
            "src/orderManagement/cancel.ts",
            "pkg/OrderManagement/Cancel.java",
            "web/order-management/cancel.js",
        ] {
            assert_eq!(
                named_by_hint(path, &known).as_deref(),
                Some("order-management"),
                "{path}"
            );
        }
        assert_eq!(named_by_hint("src/orders/management.py", &known), None);
    }

    #[test]
    fn focus_needs_exactly_one_domain() {
        let one: BTreeSet<String> = ["clinic".to_string()].into();
        let two: BTreeSet<String> = ["clinic".to_string(), "dining".to_string()].into();
        assert_eq!(focus(&one).as_deref(), Some("clinic"));
        assert_eq!(focus(&two), None);
        assert!(is_shared(Some("_shared")) && is_shared(None) && !is_shared(Some("clinic")));
    }
}
