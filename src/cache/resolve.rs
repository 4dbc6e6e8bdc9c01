//! Name keys for command-line node arguments and context hints (`UC-004`, `Entity:Pedido`, a
//! file stem, a title, an alias) → node ids, stored in the cache's `names` table. Link
//! resolution itself is core's [`crate::graph::Resolver`].
//!
//! Keys are normalised (case and accents folded, everything but letters and digits dropped), so
//! `[[retrieval query]]`, `RetrievalQuery` and `retrieval-query` meet. Every node is reachable by:
//! full id, local id, file stem, short id (`PREFIX-NNN` at the start of the local id or stem),
//! title and aliases. A key naming several nodes is ambiguous; exact-id style keys win over
//! titles and aliases.

use crate::spec::Node;
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
        // `QRY-004 — RetrieveImpact`: the name without the id prefix.
        let t = node.title.trim();
        for id in [local, node.id.as_str()] {
            if let Some(rest) = t.strip_prefix(id) {
                let rest = rest.trim_start_matches(|c: char| !c.is_alphanumeric());
                if !rest.is_empty() {
                    out.push((norm_key(rest), KeyRank::Title));
                }
            }
        }
    }
    for a in &node.aliases {
        out.push((norm_key(a), KeyRank::Alias));
    }
    out.retain(|(k, _)| !k.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_short_ids() {
        assert_eq!(norm_key("Sesión-Activa"), "sesionactiva");
        assert_eq!(short_id("UC-004-RetrieveContext"), Some("UC-004"));
        assert_eq!(short_id("BR-PRECIO-001"), Some("BR-PRECIO-001"));
        assert_eq!(short_id("Pedido"), None);
        assert_eq!(short_id("001-x"), None);
        assert_eq!(file_stem("specs/a/UC-004-X.md"), "UC-004-X");
    }
}
