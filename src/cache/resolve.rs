//! Name resolution over the whole node set: link targets as written (`UC-001-IndexDocument`,
//! `Pedido`, `auth::Token`) and command-line node arguments (`UC-004`, `Entity:Pedido`, a path or
//! a file stem) → node ids.
//!
//! Keys are normalised (case and accents folded, everything but letters and digits dropped), so
//! `[[retrieval query]]`, `RetrievalQuery` and `retrieval-query` meet. Every node is reachable by:
//! full id, local id, file stem, short id (`PREFIX-NNN` at the start of the local id or stem),
//! title and aliases. A key naming several nodes is ambiguous; exact-id style keys win over
//! titles and aliases.

use crate::spec::Node;
use std::collections::{BTreeMap, BTreeSet};
use unicode_normalization::UnicodeNormalization;

/// Fold case and accents and keep only letters and digits: `Sesión-Activa` → `sesionactiva`.
pub fn norm_key(s: &str) -> String {
    s.nfkd()
        .filter(|c| !unicode_normalization::char::is_combining_mark(*c))
        .flat_map(char::to_lowercase)
        .filter(|c| c.is_alphanumeric())
        .collect()
}

/// `UC-004-RetrieveContext` → `UC-004`; `BR-PRECIO-001` → `BR-PRECIO-001`; `Pedido` → `None`.
/// A short id is the prefix of the name up to and including its first all-digit component.
pub fn short_id(s: &str) -> Option<&str> {
    let mut end = 0;
    let mut parts = 0;
    for (i, part) in s.split('-').enumerate() {
        let start = if i == 0 { 0 } else { end + 1 };
        end = start + part.len();
        parts += 1;
        if !part.is_empty() && part.chars().all(|c| c.is_ascii_digit()) {
            if parts == 1 {
                return None;
            }
            return Some(&s[..end]);
        }
        if part.is_empty() || !part.chars().all(|c| c.is_alphanumeric()) {
            return None;
        }
    }
    None
}

/// The file stem of a repo-relative path (`specs/a/UC-004-X.md` → `UC-004-X`).
pub fn file_stem(path: &str) -> &str {
    let base = path.rsplit('/').next().unwrap_or(path);
    base.rsplit_once('.').map(|(s, _)| s).unwrap_or(base)
}

/// How strongly a key names a node (lower is stronger).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum KeyRank {
    Id = 0,
    Stem = 1,
    Short = 2,
    Title = 3,
    Alias = 4,
}

impl KeyRank {
    /// The `match_method` name used in answers.
    pub fn method(self) -> &'static str {
        match self {
            KeyRank::Id => "exact_id",
            KeyRank::Stem => "file_stem",
            KeyRank::Short => "short_id",
            KeyRank::Title => "title",
            KeyRank::Alias => "alias",
        }
    }
}

/// Every (key, rank) a node can be named by.
pub fn node_keys(node: &Node) -> Vec<(String, KeyRank)> {
    let mut out = Vec::new();
    let local = node.local_id();
    out.push((norm_key(&node.id), KeyRank::Id));
    // `Kind:Id` without the domain qualifier.
    if let Some(d) = &node.domain {
        if let Some(rest) = node.id.strip_prefix(&format!("{d}:")) {
            out.push((norm_key(rest), KeyRank::Id));
        }
    }
    out.push((norm_key(local), KeyRank::Id));
    let stem = file_stem(&node.source_file);
    out.push((norm_key(stem), KeyRank::Stem));
    for s in [short_id(local), short_id(stem)].into_iter().flatten() {
        out.push((norm_key(s), KeyRank::Short));
    }
    if !node.title.trim().is_empty() {
        out.push((norm_key(&node.title), KeyRank::Title));
    }
    for a in &node.aliases {
        out.push((norm_key(a), KeyRank::Alias));
    }
    out.retain(|(k, _)| !k.is_empty());
    out
}

/// Global name table: normalised key → nodes naming it, best rank first.
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    keys: BTreeMap<String, Vec<(KeyRank, String)>>,
    domains: BTreeMap<String, Option<String>>,
}

impl Resolver {
    /// Build from every node.
    pub fn new<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> Resolver {
        let mut r = Resolver::default();
        for n in nodes {
            r.add(n);
        }
        r
    }

    /// Add one node.
    pub fn add(&mut self, node: &Node) {
        self.domains.insert(node.id.clone(), node.domain.clone());
        let mut seen = BTreeSet::new();
        for (k, rank) in node_keys(node) {
            if seen.insert(k.clone()) {
                let v = self.keys.entry(k).or_default();
                v.push((rank, node.id.clone()));
                v.sort();
                v.dedup();
            }
        }
    }

    /// Candidates for a name, strongest rank only, as (rank, node id).
    pub fn lookup(&self, name: &str) -> Vec<(KeyRank, String)> {
        let k = norm_key(name);
        let Some(v) = self.keys.get(&k) else {
            return Vec::new();
        };
        let best = v[0].0;
        v.iter().filter(|(r, _)| *r == best).cloned().collect()
    }

    /// Resolve a link target written in a node of `from_domain`. Tries the whole target, then its
    /// short id (`UC-001-IndexDocument` → `UC-001`). Domain preference: the explicit domain, the
    /// source's domain, no domain, `_shared`. `None` when nothing (or an unresolvable tie) matches.
    pub fn resolve_link(
        &self,
        target: &str,
        explicit_domain: Option<&str>,
        from_domain: Option<&str>,
    ) -> Option<String> {
        let mut cands = self.lookup(target);
        if cands.is_empty() {
            if let Some(s) = short_id(target) {
                cands = self.lookup(s);
            }
        }
        if cands.is_empty() {
            return None;
        }
        let dom_of = |id: &str| self.domains.get(id).cloned().flatten();
        if let Some(d) = explicit_domain {
            return cands
                .into_iter()
                .find(|(_, id)| dom_of(id).as_deref() == Some(d))
                .map(|(_, id)| id);
        }
        if cands.len() == 1 {
            return Some(cands.remove(0).1);
        }
        let prefs: [Option<&str>; 3] = [from_domain, None, Some("_shared")];
        for p in prefs {
            let m: Vec<_> = cands
                .iter()
                .filter(|(_, id)| dom_of(id).as_deref() == p)
                .collect();
            if m.len() == 1 {
                return Some(m[0].1.clone());
            }
            if m.len() > 1 {
                // Deterministic choice among true duplicates: the smallest id.
                return m.iter().map(|(_, id)| id.clone()).min();
            }
        }
        cands.into_iter().map(|(_, id)| id).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Kind, Layer};

    fn node(id: &str, kind: Kind, file: &str, title: &str) -> Node {
        Node {
            id: id.into(),
            kind,
            source_file: file.into(),
            source_hash: String::new(),
            title: title.into(),
            status: None,
            aliases: vec![],
            domain: None,
            layer: Layer::Behavior,
        }
    }

    #[test]
    fn keys_and_short_ids() {
        assert_eq!(norm_key("Sesión-Activa"), "sesionactiva");
        assert_eq!(short_id("UC-004-RetrieveContext"), Some("UC-004"));
        assert_eq!(short_id("BR-PRECIO-001"), Some("BR-PRECIO-001"));
        assert_eq!(short_id("Pedido"), None);
        assert_eq!(short_id("001-x"), None);
        assert_eq!(file_stem("specs/a/UC-004-X.md"), "UC-004-X");
    }

    #[test]
    fn resolves_stems_short_ids_and_titles() {
        let a = node(
            "UC:UC-001",
            Kind::UseCase,
            "specs/02-behavior/use-cases/UC-001-IndexDocument.md",
            "IndexDocument",
        );
        let b = node(
            "CMD:CMD-001",
            Kind::Command,
            "specs/02-behavior/commands/CMD-001-IndexDocument.md",
            "IndexDocument",
        );
        let r = Resolver::new([&a, &b]);
        assert_eq!(
            r.resolve_link("UC-001-IndexDocument", None, None)
                .as_deref(),
            Some("UC:UC-001")
        );
        assert_eq!(
            r.resolve_link("CMD-001", None, None).as_deref(),
            Some("CMD:CMD-001")
        );
        assert_eq!(
            r.resolve_link("uc:uc-001", None, None).as_deref(),
            Some("UC:UC-001")
        );
        assert_eq!(r.lookup("IndexDocument").len(), 2);
        assert_eq!(r.resolve_link("Nope", None, None), None);
    }
}
