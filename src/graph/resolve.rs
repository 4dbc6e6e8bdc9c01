//! Link text → node, the way authors write links (kdd-tools' entity index, done right).
//!
//! Lookup levels, first hit wins: full node id (`UC:UC-001`, `auth:Entity:Token`) → local id
//! (`UC-001`) → file stem (`UC-001-IndexDocument`) → `PREFIX-NNN` short form of the link
//! against local ids and stems (`[[UC-001-Whatever]]`, `[[BR-001]]` → `BR-001-MinOrderAmount`)
//! → aliases → title (also without a leading `ID —` / `ID:`). Keys are case- and
//! accent-folded. Within a level, candidates are ranked by domain: an explicit `[[d::X]]`
//! only accepts domain `d` (or an undomained node in single-domain repos); otherwise the
//! linking node's domain → `core` → `_shared` → undomained; nodes of other domains are only
//! reachable unqualified from undomained specs. Remaining ties prefer the kind whose id prefix
//! the link carries, then the smallest id. Building is O(n); a lookup is a few hash probes.
//!
//! Locality: a link probes only its [`probe_keys`] and a node is found only under its
//! [`lookup_keys`] (both derived from the one table of keys the resolver indexes), so a resolver
//! built over just the nodes holding a link's probe keys resolves it exactly like the global one
//! — what the cache's incremental update relies on.

use crate::extract::links::target_prefix;
use crate::parse::fold;
use crate::spec::{Kind, Node};
use std::collections::HashMap;

const LEVELS: usize = 6;

#[derive(Debug, Clone)]
struct Entry {
    domain: Option<String>,
    kind: Kind,
    /// Lower-cased source path, for path hints.
    source: String,
}

/// Resolves link text and user hints to node indices (indices into the slice given to
/// [`Resolver::new`]).
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    maps: Vec<HashMap<String, Vec<u32>>>,
    entries: Vec<Entry>,
    by_source: HashMap<String, u32>,
    /// Folded source path without its extension (`docs/guide`, `specs/01-domain/x`): links
    /// written as paths (`[[docs/guide]]`, a document's `[t](../guide.md)`) resolve by it.
    by_path: HashMap<String, u32>,
}

/// The path key of a source file or a path-like link: folded, without `./` or extension.
fn path_key(p: &str) -> String {
    let p = p.trim().trim_start_matches("./");
    let lower = p.to_ascii_lowercase();
    let cut = [".md", ".markdown", ".feature"]
        .iter()
        .find_map(|e| lower.strip_suffix(e).map(str::len))
        .unwrap_or(p.len());
    key(&p[..cut])
}

/// `UC-001-IndexDocument` → `UC-001`; `BR-SESION-001-X` → `BR-SESION-001`; else `None`.
pub fn short_form(s: &str) -> Option<String> {
    let parts: Vec<&str> = s.split('-').collect();
    if parts.len() < 2 || parts[0].is_empty() || !parts[0].chars().all(|c| c.is_alphabetic()) {
        return None;
    }
    let digits = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
    if digits(parts[1]) {
        return Some(format!("{}-{}", parts[0], parts[1]));
    }
    if parts.len() >= 3 && digits(parts[2]) {
        return Some(format!("{}-{}-{}", parts[0], parts[1], parts[2]));
    }
    None
}

fn key(s: &str) -> String {
    let s = s.trim();
    let s = s.strip_suffix(".md").unwrap_or(s);
    fold(s)
}

/// A title without a leading id: `UC-001 — IndexDocument` → `IndexDocument`.
fn title_tail(title: &str) -> Option<&str> {
    for sep in [" — ", " – ", " - ", ": "] {
        if let Some((head, tail)) = title.split_once(sep) {
            let head = head.trim();
            if !head.contains(' ') && head.contains('-') && !tail.trim().is_empty() {
                return Some(tail.trim());
            }
        }
    }
    None
}

fn stem_of(path: &str) -> &str {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.rsplit_once('.').map_or(file, |(s, _)| s)
}

/// Every (level, key) a node is indexed under (non-empty keys; a key may repeat across levels).
/// [`Resolver::new`] indexes exactly these, so [`lookup_keys`] and [`probe_keys`] stay exact.
fn level_keys(n: &Node) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::with_capacity(12);
    let local = n.local_id();
    let stem = stem_of(&n.source_file);
    out.push((0, key(&n.id)));
    // `UC:UC-001` written without the domain qualifier.
    if n.domain.is_some() {
        if let Some((_, unq)) = n.id.split_once(':') {
            out.push((0, key(unq)));
        }
    }
    out.push((1, key(local)));
    out.push((2, key(stem)));
    out.push((3, key(local)));
    for s in [short_form(local), short_form(stem)].into_iter().flatten() {
        out.push((3, key(&s)));
    }
    for a in &n.aliases {
        out.push((4, key(a)));
    }
    out.push((5, key(&n.title)));
    if let Some(t) = title_tail(&n.title) {
        out.push((5, key(t)));
    }
    out.retain(|(_, k)| !k.is_empty());
    out
}

/// Every key under which [`Resolver::resolve`] can find `n` (any level, plus its path key),
/// sorted and deduplicated. A link's resolution can only change when a node whose lookup keys
/// meet the link's [`probe_keys`] is added, removed or changed: the cache's reverse index of
/// link keys rests on this.
pub fn lookup_keys(n: &Node) -> Vec<String> {
    let mut out: Vec<String> = level_keys(n).into_iter().map(|(_, k)| k).collect();
    out.push(path_key(&n.source_file));
    out.retain(|k| !k.is_empty());
    out.sort();
    out.dedup();
    out
}

/// Every key [`Resolver::resolve`] probes for link text `text` (whatever the domains), sorted
/// and deduplicated: its folded form, its `PREFIX-NNN` short form and, for path-like text, its
/// path key.
pub fn probe_keys(text: &str) -> Vec<String> {
    let mut out = vec![key(text)];
    if text.contains('/') {
        out.push(path_key(text));
    }
    if let Some(s) = short_form(text.trim()) {
        out.push(key(&s));
    }
    out.retain(|k| !k.is_empty());
    out.sort();
    out.dedup();
    out
}

impl Resolver {
    /// Index `nodes` (their order defines the indices returned).
    pub fn new(nodes: &[Node]) -> Resolver {
        let mut maps: Vec<HashMap<String, Vec<u32>>> = vec![HashMap::new(); LEVELS];
        let mut entries = Vec::with_capacity(nodes.len());
        let mut by_source = HashMap::with_capacity(nodes.len());
        let mut by_path = HashMap::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            let i = i as u32;
            for (level, k) in level_keys(n) {
                let v = maps[level].entry(k).or_default();
                if v.last() != Some(&i) {
                    v.push(i);
                }
            }
            entries.push(Entry {
                domain: n.domain.clone(),
                kind: n.kind,
                source: n.source_file.to_lowercase(),
            });
            by_source.insert(n.source_file.clone(), i);
            by_path.entry(path_key(&n.source_file)).or_insert(i);
        }
        Resolver {
            maps,
            entries,
            by_source,
            by_path,
        }
    }

    /// Number of indexed nodes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no node is indexed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn rank(&self, i: u32, explicit: Option<&str>, from: Option<&str>) -> Option<u8> {
        let d = self.entries[i as usize].domain.as_deref();
        match explicit {
            Some(e) => {
                if d == Some(e) {
                    Some(0)
                } else if d.is_none() {
                    Some(1)
                } else {
                    None
                }
            }
            None => match (d, from) {
                (d, Some(f)) if d == Some(f) => Some(0),
                (Some("core"), _) => Some(1),
                (Some("_shared"), _) => Some(2),
                (None, _) => Some(if from.is_none() { 0 } else { 3 }),
                (Some(_), None) => Some(4),
                (Some(_), Some(_)) => None,
            },
        }
    }

    fn pick(
        &self,
        cands: &[u32],
        text: &str,
        explicit: Option<&str>,
        from: Option<&str>,
    ) -> Option<usize> {
        let want = target_prefix(text);
        cands
            .iter()
            .filter_map(|&i| {
                let r = self.rank(i, explicit, from)?;
                let k = self.entries[i as usize].kind;
                let prefix_miss = match want {
                    Some(p) => u8::from(!k.id_prefix().eq_ignore_ascii_case(p)),
                    None => u8::from(!matches!(k, Kind::Entity | Kind::Role | Kind::System)),
                };
                Some((r, prefix_miss, i))
            })
            .min()
            .map(|(_, _, i)| i as usize)
    }

    /// Resolve link text written in a node of domain `from_domain`, with an optional explicit
    /// `[[domain::…]]` qualifier.
    pub fn resolve(
        &self,
        text: &str,
        explicit: Option<&str>,
        from_domain: Option<&str>,
    ) -> Option<usize> {
        let k = key(text);
        if k.is_empty() {
            return None;
        }
        if text.contains('/') {
            if let Some(&i) = self.by_path.get(&path_key(text)) {
                if self.rank(i, explicit, from_domain).is_some() {
                    return Some(i as usize);
                }
            }
        }
        let short = short_form(text.trim()).map(|s| key(&s));
        for level in 0..LEVELS {
            let probe = if level == 3 {
                short.as_deref().unwrap_or(&k)
            } else {
                &k
            };
            if let Some(c) = self.maps[level].get(probe) {
                if let Some(i) = self.pick(c, text, explicit, from_domain) {
                    return Some(i);
                }
            }
            if level == 3 && short.is_some() {
                if let Some(c) = self.maps[3].get(&k) {
                    if let Some(i) = self.pick(c, text, explicit, from_domain) {
                        return Some(i);
                    }
                }
            }
        }
        None
    }

    /// Resolve a user hint: a repo path (`specs/…/Pedido.md`, `src/pedido.ts` → by stem), a
    /// node id, an id (`UC-004`), a name or alias (`Pedido`). Returns the best match first;
    /// several only when a path hint matches several specs.
    pub fn resolve_hint(&self, hint: &str) -> Vec<usize> {
        let h = hint.trim().trim_start_matches("./").replace('\\', "/");
        if h.is_empty() {
            return Vec::new();
        }
        if let Some(&i) = self.by_source.get(&h) {
            return vec![i as usize];
        }
        if h.contains('/') {
            let low = h.to_lowercase();
            let mut v: Vec<usize> = self
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| e.source.ends_with(&low))
                .map(|(i, _)| i)
                .collect();
            if !v.is_empty() {
                v.sort_unstable();
                return v;
            }
            // A code path: try its stem (`src/pedido.ts` → `pedido`).
            return self.resolve(stem_of(&h), None, None).into_iter().collect();
        }
        // `auth::Token` hint form.
        let (explicit, text) = match h.split_once("::") {
            Some((d, t)) if !d.is_empty() && !t.is_empty() => (Some(d), t),
            _ => (None, h.as_str()),
        };
        if let Some(i) = self.resolve(text, explicit, None) {
            return vec![i];
        }
        if text.contains('.') {
            return self
                .resolve(stem_of(text), explicit, None)
                .into_iter()
                .collect();
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Layer;

    fn node(id: &str, kind: Kind, file: &str, title: &str, domain: Option<&str>) -> Node {
        Node {
            id: id.into(),
            kind,
            source_file: file.into(),
            source_hash: String::new(),
            title: title.into(),
            status: None,
            aliases: vec!["Orden".into()],
            domain: domain.map(str::to_string),
            layer: Layer::Domain,
        }
    }

    fn sample() -> Vec<Node> {
        vec![
            node(
                "UC:UC-001",
                Kind::UseCase,
                "specs/02-behavior/use-cases/UC-001-IndexDocument.md",
                "UC-001 — IndexDocument",
                None,
            ),
            node(
                "Entity:Pedido",
                Kind::Entity,
                "specs/01-domain/entities/Pedido.md",
                "Pedido",
                None,
            ),
            node(
                "BR:BR-001-MinOrder",
                Kind::BusinessRule,
                "specs/01-domain/rules/BR-001-MinOrder.md",
                "BR-001: Min order",
                None,
            ),
            node(
                "core:Entity:Usuario",
                Kind::Entity,
                "specs/domains/core/01-domain/entities/Usuario.md",
                "Usuario",
                Some("core"),
            ),
            node(
                "auth:Entity:Usuario",
                Kind::Entity,
                "specs/domains/auth/01-domain/entities/Usuario.md",
                "Usuario",
                Some("auth"),
            ),
            node(
                "billing:Entity:Factura",
                Kind::Entity,
                "specs/domains/billing/01-domain/entities/Factura.md",
                "Factura",
                Some("billing"),
            ),
        ]
    }

    #[test]
    fn levels_and_domains() {
        let nodes = sample();
        let r = Resolver::new(&nodes);
        let id = |i: Option<usize>| i.map(|i| nodes[i].id.as_str());
        assert_eq!(
            id(r.resolve("UC-001-IndexDocument", None, None)),
            Some("UC:UC-001")
        );
        assert_eq!(id(r.resolve("uc-001", None, None)), Some("UC:UC-001"));
        assert_eq!(
            id(r.resolve("UC-001-Renamed", None, None)),
            Some("UC:UC-001")
        );
        assert_eq!(id(r.resolve("UC:UC-001", None, None)), Some("UC:UC-001"));
        assert_eq!(
            id(r.resolve("IndexDocument", None, None)),
            Some("UC:UC-001")
        );
        assert_eq!(
            id(r.resolve("BR-001", None, None)),
            Some("BR:BR-001-MinOrder")
        );
        assert_eq!(id(r.resolve("pédido", None, None)), Some("Entity:Pedido"));
        assert_eq!(
            id(r.resolve("Usuario", None, Some("auth"))),
            Some("auth:Entity:Usuario")
        );
        assert_eq!(
            id(r.resolve("Usuario", None, Some("sessions"))),
            Some("core:Entity:Usuario")
        );
        assert_eq!(
            id(r.resolve("Usuario", Some("auth"), Some("core"))),
            Some("auth:Entity:Usuario")
        );
        assert_eq!(id(r.resolve("Factura", None, Some("auth"))), None);
        assert_eq!(
            id(r.resolve("Factura", Some("billing"), Some("auth"))),
            Some("billing:Entity:Factura")
        );
        assert_eq!(id(r.resolve("Nope", None, None)), None);
    }

    #[test]
    fn hints_and_short_forms() {
        let nodes = sample();
        let r = Resolver::new(&nodes);
        let h = |s: &str| {
            r.resolve_hint(s)
                .into_iter()
                .map(|i| nodes[i].id.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(h("src/pedido.ts"), ["Entity:Pedido"]);
        assert_eq!(h("specs/01-domain/entities/Pedido.md"), ["Entity:Pedido"]);
        assert_eq!(h("UC-004"), Vec::<&str>::new());
        assert_eq!(h("UC-001"), ["UC:UC-001"]);
        assert_eq!(h("billing::Factura"), ["billing:Entity:Factura"]);
        assert_eq!(
            short_form("BR-SESION-001-X").as_deref(),
            Some("BR-SESION-001")
        );
        assert_eq!(short_form("Pedido"), None);
    }

    /// The locality the cache's incremental update rests on: a resolver over just the nodes
    /// whose lookup keys meet a link's probe keys answers like the global one.
    #[test]
    fn a_resolver_over_the_probed_nodes_answers_like_the_global_one() {
        let nodes = sample();
        let full = Resolver::new(&nodes);
        let texts = [
            "UC-001-IndexDocument",
            "uc-001",
            "UC-001-Renamed",
            "UC:UC-001",
            "IndexDocument",
            "BR-001",
            "pédido",
            "Usuario",
            "Factura",
            "Orden",
            "Nope",
            "BR-001-MinOrder",
            "specs/01-domain/entities/Pedido",
            "01-domain/entities/Pedido.md",
            "core:Entity:Usuario",
        ];
        let domains = [
            None,
            Some("auth"),
            Some("core"),
            Some("billing"),
            Some("sessions"),
        ];
        for text in texts {
            let probes = probe_keys(text);
            let near: Vec<Node> = nodes
                .iter()
                .filter(|n| lookup_keys(n).iter().any(|k| probes.contains(k)))
                .cloned()
                .collect();
            let part = Resolver::new(&near);
            for explicit in domains {
                for from in domains {
                    let a = full.resolve(text, explicit, from).map(|i| &nodes[i].id);
                    let b = part.resolve(text, explicit, from).map(|i| &near[i].id);
                    assert_eq!(a, b, "{text} {explicit:?} {from:?}");
                }
            }
        }
    }
}
