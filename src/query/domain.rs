//! Domain isolation for multi-domain corpora (seed 003): a context request whose hints clearly
//! point into one business domain keeps the other domains' look-alike specs out.
//!
//! - A hint names a domain when it is domain-qualified (`billing:BR-003`, `billing:Invoice`) or
//!   when it is a path with a segment equal to a domain's id (`src/billing/invoices/cancel.py`).
//!   Hints resolved by id, path or name add the domain of what they resolved to; keyword hints
//!   (a lexical search) name no domain.
//! - The request is *focused* on domain D when the domains so named are exactly {D} (shared
//!   specs aside). Then a spec of another business domain enters only through a typed link
//!   (not a plain wiki-link or a generic cross-domain reference), and its `reached_via` shows
//!   that link; shared specs (`_shared`, or no domain) always stay eligible.
//!
//! Invariants: with no focus (single-domain corpora, hints in several domains, keyword-only
//! hints) nothing is filtered; the focus never removes a spec a hint resolved to by id or path.

use super::Error;
use crate::cache::Snapshot;
use std::collections::BTreeSet;

/// True for specs every domain may see (`_shared`, `_…`, or no domain).
pub fn is_shared(domain: Option<&str>) -> bool {
    domain.is_none_or(|d| d.is_empty() || d.starts_with('_'))
}

/// Edges that may bring a spec of another domain into a focused answer: typed ones only.
pub fn crosses(edge_type: &str) -> bool {
    !matches!(edge_type, "WIKI_LINK" | "CROSS_DOMAIN_REF")
}

/// The business domains of the corpus (shared ones excluded).
pub fn domains(snap: &Snapshot<'_>) -> Result<BTreeSet<String>, Error> {
    Ok(snap
        .all_lite()?
        .into_iter()
        .filter_map(|n| n.domain)
        .filter(|d| !is_shared(Some(d)))
        .collect())
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
            .rfind(|seg| known.contains(*seg))
            .map(str::to_string);
    }
    None
}

/// The focus of a request: its one named business domain, if exactly one is named.
pub fn focus(named: &BTreeSet<String>) -> Option<String> {
    (named.len() == 1)
        .then(|| named.iter().next().cloned())
        .flatten()
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
