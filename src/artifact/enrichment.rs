//! The committed L3 artifact: `enrichments/<kind>/[<domain>/]<id>.json`, what the developer's own
//! agent said about one spec (`kdd enrich`, UC-003 / CMD-003).
//!
//! Invariants:
//! - One file per spec, at the spec's artifact stem (same sanitised path components as its node
//!   file), holding a list of entries keyed by `(spec_hash, agent)`: the blake3 of the spec
//!   bytes the agent read and the agent id (program name + a hash of its command, never the
//!   command itself, so nothing secret a command line might hold is committed).
//! - Canonical bytes: pretty JSON, entries sorted by key, one entry per key, trailing `\n`, no
//!   clock. `kdd enrich` writes a single entry; the merge driver unions entries
//!   ([`merge_enrichment`]), so a file can hold one entry per branch until the next `kdd enrich`.
//! - Readers use only the entry whose `spec_hash` is the node's `source_hash` ([`Enrichment::current`]):
//!   an enrichment of text that no longer exists never reaches an answer. Among several current
//!   entries (two agents enriched the same text on two branches) the smallest agent id wins.
//! - An entry may carry the summary's vector (int8, with its model id) so semantic search finds
//!   it too; readers ignore a vector of another model than the manifest's.
//! - Everything in an entry was validated by `kdd enrich` before it was written; [`parse`] checks
//!   the shape again (the file is committed, so it can be hand-edited or hostile).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Format marker of an enrichment file.
pub const ENRICHMENT_FORMAT: u32 = 1;

/// Longest summary kept (characters).
pub const MAX_SUMMARY: usize = 2000;
/// Most relations per entry.
pub const MAX_RELATIONS: usize = 20;
/// Most impact notes per entry.
pub const MAX_NOTES: usize = 10;
/// Longest impact note or relation reason (characters).
pub const MAX_NOTE: usize = 500;
/// Most entries per file (one per spec version and agent; merges add them up).
pub const MAX_ENTRIES: usize = 64;
/// Longest summary vector (components).
pub const MAX_VECTOR: usize = 4096;

/// An implicit relation the agent found: `spec --type--> target`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relation {
    /// A node id that existed in the graph when the answer was validated.
    pub target: String,
    /// Upper-case edge type (`AFFECTS`, `DEPENDS_ON`…).
    #[serde(rename = "type")]
    pub edge_type: String,
    /// 0–1.
    pub confidence: f32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What one agent said about one version of a spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// blake3 hex of the spec bytes sent to the agent.
    pub spec_hash: String,
    /// `<program>@<8 hex of blake3(command)>`.
    pub agent: String,
    pub summary: String,
    #[serde(default)]
    pub relations: Vec<Relation>,
    /// Preliminary impact notes.
    #[serde(default)]
    pub impact: Vec<String>,
    /// The summary's vector, when `kdd enrich` ran with the index's embedding model (L2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector: Option<SummaryVector>,
}

/// An int8-quantised passage vector of the summary (as in `embed::store`: x ≈ q × scale).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryVector {
    /// Model id; used only when it is the manifest's.
    pub model: String,
    pub scale: f32,
    pub q: Vec<i8>,
}

/// The file: the spec's node id and its entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Enrichment {
    pub format: u32,
    pub id: String,
    pub entries: Vec<Entry>,
}

impl Enrichment {
    /// A file holding one entry.
    pub fn single(id: &str, entry: Entry) -> Enrichment {
        Enrichment {
            format: ENRICHMENT_FORMAT,
            id: id.to_string(),
            entries: vec![entry],
        }
    }

    /// The entry for the spec bytes hashing to `source_hash` (smallest agent id among several).
    pub fn current(&self, source_hash: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .filter(|e| crate::spec::same_content(&e.spec_hash, source_hash))
            .min_by(|a, b| a.agent.cmp(&b.agent))
    }
}

/// Canonical bytes: entries sorted and deduplicated by `(spec_hash, agent)` (on a duplicate key
/// the entry with the smaller rendering stays).
pub fn render(e: &Enrichment) -> Vec<u8> {
    let mut by_key: BTreeMap<(String, String), (Vec<u8>, Entry)> = BTreeMap::new();
    for x in &e.entries {
        let bytes = serde_json::to_vec(x).expect("entry serialises");
        let key = (x.spec_hash.clone(), x.agent.clone());
        match by_key.get(&key) {
            Some((b, _)) if *b <= bytes => {}
            _ => {
                by_key.insert(key, (bytes, x.clone()));
            }
        }
    }
    let canon = Enrichment {
        format: e.format,
        id: e.id.clone(),
        entries: by_key.into_values().map(|(_, x)| x).collect(),
    };
    let mut v = serde_json::to_vec_pretty(&canon).expect("enrichment serialises");
    v.push(b'\n');
    v
}

/// Parse and check an enrichment file.
pub fn parse(bytes: &[u8]) -> Result<Enrichment, String> {
    let e: Enrichment = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if e.format != ENRICHMENT_FORMAT {
        return Err(format!(
            "enrichment format {} is not supported (this kdd reads {ENRICHMENT_FORMAT})",
            e.format
        ));
    }
    if e.entries.len() > MAX_ENTRIES {
        return Err(format!(
            "{} entries, at most {MAX_ENTRIES} (`kdd enrich` never writes so many)",
            e.entries.len()
        ));
    }
    for x in &e.entries {
        if x.relations
            .iter()
            .any(|r| !(0.0..=1.0).contains(&r.confidence))
        {
            return Err(format!("entry of {}: a confidence is outside 0–1", x.agent));
        }
        if let Some(why) = over_limits(x) {
            return Err(format!(
                "entry of {}: {why} (`kdd enrich` never writes such an entry)",
                clip_chars(&x.agent, 80)
            ));
        }
    }
    Ok(e)
}

/// The limits `kdd enrich` checks an agent's answer against, checked again on every read: a
/// committed file is a teammate's input, and one with 50,000 relations made graph walks
/// quadratic.
fn over_limits(x: &Entry) -> Option<String> {
    let chars = |s: &str| s.chars().count();
    let note = |s: &str| chars(s) > MAX_NOTE;
    if chars(&x.summary) > MAX_SUMMARY {
        Some(format!(
            "a summary of {} characters, at most {MAX_SUMMARY}",
            chars(&x.summary)
        ))
    } else if x.relations.len() > MAX_RELATIONS {
        Some(format!(
            "{} relations, at most {MAX_RELATIONS}",
            x.relations.len()
        ))
    } else if x.impact.len() > MAX_NOTES {
        Some(format!(
            "{} impact notes, at most {MAX_NOTES}",
            x.impact.len()
        ))
    } else if x.impact.iter().any(|n| note(n))
        || x.relations
            .iter()
            .any(|r| r.reason.as_deref().is_some_and(note))
        || x.relations
            .iter()
            .any(|r| chars(&r.target) > MAX_NOTE || chars(&r.edge_type) > MAX_NOTE)
    {
        Some(format!(
            "a note, reason, target or type over {MAX_NOTE} characters"
        ))
    } else if x.vector.as_ref().is_some_and(|v| v.q.len() > MAX_VECTOR) {
        Some(format!("a summary vector over {MAX_VECTOR} components"))
    } else {
        None
    }
}

fn clip_chars(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Three-way merge of two enrichment files (BR-MERGE-001 style, symmetric): the union of the
/// entries of both sides minus the entries one side removed relative to the base. `Err` when a
/// side is not a valid enrichment file (the driver then falls back).
pub fn merge_enrichment(
    base: Option<&[u8]>,
    ours: &[u8],
    theirs: &[u8],
) -> Result<Vec<u8>, String> {
    let o = parse(ours).map_err(|e| format!("our enrichment is not valid: {e}"))?;
    let t = parse(theirs).map_err(|e| format!("their enrichment is not valid: {e}"))?;
    let key = |x: &Entry| (x.spec_hash.clone(), x.agent.clone());
    let keys = |e: &Enrichment| -> Vec<(String, String)> { e.entries.iter().map(key).collect() };
    let (ko, kt) = (keys(&o), keys(&t));
    let removed: Vec<(String, String)> = base
        .and_then(|b| parse(b).ok())
        .map(|b| {
            keys(&b)
                .into_iter()
                .filter(|k| !ko.contains(k) || !kt.contains(k))
                .collect()
        })
        .unwrap_or_default();
    let entries = o
        .entries
        .iter()
        .chain(&t.entries)
        .filter(|x| !removed.contains(&key(x)))
        .cloned()
        .collect();
    Ok(render(&Enrichment {
        format: ENRICHMENT_FORMAT,
        id: o.id.clone().min(t.id.clone()),
        entries,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(hash: &str, agent: &str, summary: &str) -> Entry {
        Entry {
            spec_hash: hash.into(),
            agent: agent.into(),
            summary: summary.into(),
            relations: vec![Relation {
                target: "Entity:B".into(),
                edge_type: "AFFECTS".into(),
                confidence: 0.5,
                reason: None,
            }],
            impact: vec![],
            vector: None,
        }
    }

    fn file(entries: Vec<Entry>) -> Vec<u8> {
        render(&Enrichment {
            format: ENRICHMENT_FORMAT,
            id: "Entity:A".into(),
            entries,
        })
    }

    #[test]
    fn merge_is_symmetric_and_honours_removals() {
        let base = file(vec![entry("h1", "a@1", "old")]);
        let ours = file(vec![entry("h2", "a@1", "ours")]);
        let theirs = file(vec![
            entry("h1", "a@1", "old"),
            entry("h3", "b@2", "theirs"),
        ]);
        let m1 = merge_enrichment(Some(&base), &ours, &theirs).unwrap();
        let m2 = merge_enrichment(Some(&base), &theirs, &ours).unwrap();
        assert_eq!(m1, m2);
        let m = parse(&m1).unwrap();
        let hashes: Vec<&str> = m.entries.iter().map(|e| e.spec_hash.as_str()).collect();
        assert_eq!(hashes, vec!["h2", "h3"]);
        assert_eq!(m.current("h3").unwrap().summary, "theirs");
        assert!(m.current("h1").is_none());
        assert!(merge_enrichment(None, b"garbage", &ours).is_err());
    }

    #[test]
    fn current_prefers_the_smallest_agent() {
        let e = parse(&file(vec![entry("h", "z@1", "z"), entry("h", "a@1", "a")])).unwrap();
        assert_eq!(e.current("h").unwrap().summary, "a");
        let mut bad = entry("h", "a@1", "a");
        bad.relations[0].confidence = 2.0;
        assert!(parse(&file(vec![bad])).is_err());
    }

    #[test]
    fn a_committed_entry_over_the_answer_limits_is_refused() {
        let mut e = entry("h", "a@1", "a");
        let r = e.relations[0].clone();
        e.relations = vec![r; MAX_RELATIONS];
        assert!(parse(&file(vec![e.clone()])).is_ok());
        e.relations.push(e.relations[0].clone());
        let err = parse(&file(vec![e])).unwrap_err();
        assert!(err.contains("21 relations, at most 20"), "{err}");
        let long = entry("h", "a@1", &"x".repeat(MAX_SUMMARY + 1));
        assert!(parse(&file(vec![long])).is_err());
        let many: Vec<Entry> = (0..=MAX_ENTRIES)
            .map(|i| entry(&format!("h{i}"), "a@1", "a"))
            .collect();
        assert!(parse(&file(many)).is_err());
    }
}
