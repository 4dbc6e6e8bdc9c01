//! Name keys for command-line node arguments and context hints (`UC-004`, `Entity:Pedido`, a
//! file stem, a title, an alias) → node ids, stored in the cache's `names` table. Link
//! resolution itself is core's [`crate::graph::Resolver`].
//!
//! Keys are normalised (case and accents folded, everything but letters and digits dropped), so
//! `[[retrieval query]]`, `RetrievalQuery` and `retrieval-query` meet. Every node is reachable by:
//! full id, local id, file stem, short id (`PREFIX-NNN` at the start of the local id or stem),
//! title and aliases. A key naming several nodes is ambiguous; exact-id style keys win over
//! titles and aliases.
//!
//! Path hints (`specs/01-domain/entities/Pedido.md`, `entities/Pedido.md`, an absolute path
//! ending with a spec's path) are looked up in the `paths` table: every ending of a spec's path
//! at a `/` names it, so a hint costs a few reads, not a scan of every spec.

use super::store::lm;
use super::{Error, Snapshot};
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

/// Every ending of `path` at a `/`, the whole path first (`specs/a/B.md`, `a/B.md`, `B.md`):
/// the keys a spec is found under by a path hint. Never an empty one (LMDB refuses an empty key,
/// and a read that fails so would be taken for a damaged cache).
pub fn path_endings(path: &str) -> impl Iterator<Item = &str> {
    std::iter::once(path)
        .chain(
            path.char_indices()
                .filter(|&(_, c)| c == '/')
                .map(move |(i, _)| &path[i + 1..]),
        )
        .filter(|p| !p.is_empty())
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

/// Name and path lookups of a snapshot (the `names` and `paths` tables).
impl Snapshot<'_> {
    /// Ids (sorted) of the specs whose source file is `path` or ends with `/path`, and with
    /// `within` also those whose whole source file `path` ends with after a `/` (a longer,
    /// absolute or repository-prefixed path). Read from the `paths` table, not by a scan.
    pub fn specs_at_path(&self, path: &str, within: bool) -> Result<Vec<String>, Error> {
        let mut out = std::collections::BTreeSet::new();
        // An empty path names no spec (and has no ending to look up).
        let take = if within { usize::MAX } else { 1 };
        for (i, key) in path_endings(path).take(take).enumerate() {
            let ids = self
                .cache
                .store
                .paths
                .get(&self.txn, &super::links::db_key(key.to_string()))
                .map_err(|e| self.bad(lm(e)))?
                .unwrap_or_default();
            for id in ids {
                // Checked against the spec itself: a long key is stored as its hash.
                let Some(l) = self.lite(&id)? else { continue };
                let sf = &l.node.source_file;
                let fits = if i == 0 {
                    sf == key || sf.ends_with(&format!("/{key}"))
                } else {
                    sf == key
                };
                if fits {
                    out.insert(id);
                }
            }
        }
        Ok(out.into_iter().collect())
    }

    /// Nodes named by `name` (normalised key), strongest rank first. A key over LMDB's size
    /// is stored as its 128-bit hash, like every other key table's.
    pub fn lookup(&self, name: &str) -> Result<Vec<(KeyRank, String)>, Error> {
        let k = norm_key(name);
        if k.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self
            .cache
            .store
            .names
            .get(&self.txn, &super::links::db_key(k))
            .map_err(|e| self.bad(lm(e)))?
            .unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_ends_at_each_slash() {
        let all: Vec<&str> = path_endings("specs/a/B.md").collect();
        assert_eq!(all, ["specs/a/B.md", "a/B.md", "B.md"]);
        assert_eq!(path_endings("B.md").collect::<Vec<_>>(), ["B.md"]);
        assert_eq!(
            path_endings("a//B.md/").collect::<Vec<_>>(),
            ["a//B.md/", "/B.md/", "B.md/"]
        );
        assert_eq!(path_endings("").count(), 0);
        assert_eq!(path_endings("/").collect::<Vec<_>>(), ["/"]);
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
}
