//! L3 enrichment by the developer's own agent (UC-003 / CMD-003): `kdd enrich`.
//!
//! Pipeline place: after `query` (it reads the cache for the spec's graph neighbours and resolves
//! names like every query), before `cli`. It writes only `.kdd-index/enrichments/…` through
//! `artifact::write_artifact`; the developer commits those files (the pre-commit hook never
//! runs an agent, so enrichment can never block a commit).
//!
//! Invariants:
//! - The request (JSON on the agent's stdin, [`Request`]) holds the spec's identity, its source
//!   text and its 1-hop neighbours (id, kind, title, edge type, direction) — nothing from
//!   outside the repository. The answer ([`Answer`], JSON on stdout) is validated strictly
//!   ([`validate`]): a bad shape, an empty or oversized summary, too many relations or notes is
//!   an invalid answer (`AGENT_ERROR`); a relation to an unknown id, a self-relation, a
//!   malformed edge type or a confidence outside 0–1 is dropped with a warning.
//! - Content addressing: an entry is keyed by the blake3 of the spec bytes sent and the agent id
//!   ([`agent_id`]: program name + hash of the command, never the command itself). A spec whose
//!   file already has an entry for its current bytes and this agent is skipped unless forced.
//! - Every error is per spec ([`Error`], with the CMD-003 codes); one failing spec never stops
//!   the others.

mod flow;
mod run;

pub use flow::{enrich, Options, Outcome, Report};
pub use run::{run_agent, MAX_ANSWER_BYTES};

use crate::artifact::enrichment::{Entry, Relation};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashSet};

/// The limits of an answer are those of a committed entry (`artifact::enrichment`).
pub use crate::artifact::enrichment::{MAX_NOTE, MAX_NOTES, MAX_RELATIONS, MAX_SUMMARY};
/// Longest spec text sent to the agent (bytes; the spec reader caps files at 5 MB anyway).
pub const MAX_TEXT: usize = 256 * 1024;

/// Per-spec enrichment errors (CMD-003 codes).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "AGENT_NOT_CONFIGURED: no agent configured; pass --agent '<command>' or run \
         `git config kdd.agent '<command>'` (e.g. your coding agent in print mode)"
    )]
    NotConfigured,
    #[error("NODE_NOT_FOUND: Node not found: {0}")]
    NodeNotFound(String),
    #[error("DOCUMENT_NOT_FOUND: Source document not found for node {id}: {why}")]
    DocumentNotFound { id: String, why: String },
    #[error("AGENT_TIMEOUT: Agent enrichment timed out after {0}ms; the agent's processes were killed (raise --timeout)")]
    Timeout(u64),
    #[error("AGENT_ERROR: Agent enrichment failed: {0}")]
    Agent(String),
    #[error("AGENT_ERROR: Agent enrichment failed: invalid answer: {0}")]
    Invalid(String),
    #[error("{0}")]
    Artifact(#[from] crate::artifact::Error),
}

impl Error {
    /// The CMD-003 code.
    pub fn code(&self) -> &'static str {
        match self {
            Error::NotConfigured => "AGENT_NOT_CONFIGURED",
            Error::NodeNotFound(_) => "NODE_NOT_FOUND",
            Error::DocumentNotFound { .. } => "DOCUMENT_NOT_FOUND",
            Error::Timeout(_) => "AGENT_TIMEOUT",
            Error::Agent(_) | Error::Invalid(_) => "AGENT_ERROR",
            Error::Artifact(_) => "INDEX_WRITE_FAILED",
        }
    }
}

/// The spec sent to the agent.
#[derive(Debug, Clone, Serialize)]
pub struct SpecPart {
    pub id: String,
    pub kind: String,
    pub title: String,
    pub layer: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    pub source_file: String,
    /// blake3 hex of the bytes in `text`.
    pub spec_hash: String,
    pub text: String,
}

/// A graph neighbour of the spec (spec edges only; earlier agent edges are not sent).
#[derive(Debug, Clone, Serialize)]
pub struct Neighbour {
    pub id: String,
    pub kind: String,
    pub title: String,
    pub edge_type: String,
    /// `out` (the spec links to it) or `in` (it links to the spec).
    pub direction: &'static str,
}

/// The JSON written to the agent's stdin.
#[derive(Debug, Clone, Serialize)]
pub struct Request {
    pub kdd_enrich: u32,
    pub instructions: &'static str,
    pub spec: SpecPart,
    pub neighbours: Vec<Neighbour>,
}

/// What the agent is asked to do (also the README's contract).
pub const INSTRUCTIONS: &str = "You are enriching one specification of a knowledge graph. \
Read `spec.text` and its graph `neighbours`. Answer with ONE JSON object and nothing else: \
{\"summary\": string (1-2000 chars, a better summary of the spec), \"relations\": [{\"target\": \
node id, \"type\": UPPER_SNAKE edge type such as AFFECTS or DEPENDS_ON, \"confidence\": number \
0-1, \"reason\": optional string}] (at most 20 implicit relations the spec does not write as \
links; targets must be existing node ids), \"impact\": [string] (at most 10 short notes on what \
a change to this spec would affect)}.";

/// A relation as the agent wrote it.
#[derive(Debug, Clone, Deserialize)]
struct RawRelation {
    target: serde_json::Value,
    #[serde(rename = "type")]
    edge_type: serde_json::Value,
    confidence: serde_json::Value,
    #[serde(default)]
    reason: Option<serde_json::Value>,
}

/// The answer as the agent wrote it (unknown keys are ignored).
#[derive(Debug, Clone, Deserialize)]
struct RawAnswer {
    summary: String,
    #[serde(default)]
    relations: Vec<serde_json::Value>,
    #[serde(default)]
    impact: Vec<String>,
}

/// A validated answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub summary: String,
    pub relations: Vec<Relation>,
    pub impact: Vec<String>,
}

impl Answer {
    /// The committed entry for this answer.
    pub fn entry(self, spec_hash: &str, agent: &str) -> Entry {
        Entry {
            spec_hash: spec_hash.to_string(),
            agent: agent.to_string(),
            summary: self.summary,
            relations: self.relations,
            impact: self.impact,
            vector: None,
        }
    }
}

/// The agent id of a command: its program name and 8 hex chars of blake3 of the whole command.
pub fn agent_id(command: &str) -> String {
    let prog = command
        .split_whitespace()
        .find(|w| !w.contains('='))
        .unwrap_or("agent");
    let prog = prog.rsplit('/').next().unwrap_or(prog);
    let name: String = prog
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(40)
        .collect();
    let h = blake3::hash(command.as_bytes()).to_hex();
    format!(
        "{}@{}",
        if name.is_empty() { "agent" } else { &name },
        &h[..8]
    )
}

/// The JSON text of an answer: the whole stdout, or the body of one ```json fence around it.
fn answer_text(stdout: &[u8]) -> Result<&str, Error> {
    let text = std::str::from_utf8(stdout)
        .map_err(|_| Error::Invalid("stdout is not UTF-8".into()))?
        .trim();
    if let Some(rest) = text.strip_prefix("```") {
        let body = rest.split_once('\n').map(|(_, b)| b).unwrap_or("");
        return Ok(body.trim_end().strip_suffix("```").unwrap_or(body).trim());
    }
    Ok(text)
}

fn clip_len(field: &str, s: &str, max: usize) -> Result<String, Error> {
    let n = s.chars().count();
    if n > max {
        return Err(Error::Invalid(format!(
            "{field} has {n} characters, at most {max} are allowed"
        )));
    }
    Ok(s.trim().to_string())
}

/// Validate the agent's stdout for spec `self_id`; `known` holds every node id. Returns the
/// answer and the warnings of dropped relations.
pub fn validate(
    stdout: &[u8],
    self_id: &str,
    known: &HashSet<String>,
) -> Result<(Answer, Vec<String>), Error> {
    let text = answer_text(stdout)?;
    if text.is_empty() {
        return Err(Error::Invalid("the agent printed nothing".into()));
    }
    let raw: RawAnswer = serde_json::from_str(text).map_err(|e| {
        let head: String = text.chars().take(120).collect();
        Error::Invalid(format!("{e} (answer begins: {head:?})"))
    })?;
    let summary = clip_len("summary", &raw.summary, MAX_SUMMARY)?;
    if summary.is_empty() {
        return Err(Error::Invalid("summary is empty".into()));
    }
    if raw.relations.len() > MAX_RELATIONS {
        return Err(Error::Invalid(format!(
            "{} relations, at most {MAX_RELATIONS} are allowed",
            raw.relations.len()
        )));
    }
    if raw.impact.len() > MAX_NOTES {
        return Err(Error::Invalid(format!(
            "{} impact notes, at most {MAX_NOTES} are allowed",
            raw.impact.len()
        )));
    }
    let mut impact = Vec::new();
    for n in &raw.impact {
        let n = clip_len("an impact note", n, MAX_NOTE)?;
        if !n.is_empty() {
            impact.push(n);
        }
    }
    let mut warnings = Vec::new();
    let mut relations = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, v) in raw.relations.into_iter().enumerate() {
        match relation(v, self_id, known) {
            Ok(r) if seen.insert((r.target.clone(), r.edge_type.clone())) => relations.push(r),
            Ok(_) => {}
            Err(why) => warnings.push(format!("relation {}: {why}; dropped", i + 1)),
        }
    }
    Ok((
        Answer {
            summary,
            relations,
            impact,
        },
        warnings,
    ))
}

fn relation(
    v: serde_json::Value,
    self_id: &str,
    known: &HashSet<String>,
) -> Result<Relation, String> {
    let r: RawRelation = serde_json::from_value(v).map_err(|e| e.to_string())?;
    let target = r
        .target
        .as_str()
        .ok_or("target is not a string")?
        .trim()
        .to_string();
    let clipped: String = target.chars().take(80).collect();
    if !known.contains(&target) {
        return Err(format!("unknown target id {clipped:?}"));
    }
    if target == self_id {
        return Err("a relation to the spec itself".into());
    }
    let ty = r
        .edge_type
        .as_str()
        .ok_or("type is not a string")?
        .trim()
        .to_ascii_uppercase();
    let ok_ty = !ty.is_empty()
        && ty.len() <= 40
        && ty.starts_with(|c: char| c.is_ascii_uppercase())
        && ty
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    if !ok_ty {
        return Err(format!(
            "type {:?} is not an UPPER_SNAKE edge type",
            ty.chars().take(40).collect::<String>()
        ));
    }
    let confidence = r.confidence.as_f64().ok_or("confidence is not a number")?;
    if !(0.0..=1.0).contains(&confidence) {
        // The number in short form (`1e+308`), not expanded to hundreds of digits.
        return Err(format!("confidence {} is outside 0–1", r.confidence));
    }
    let reason = match r.reason {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) if s.chars().count() <= MAX_NOTE => {
            Some(s.trim().to_string()).filter(|s| !s.is_empty())
        }
        Some(_) => {
            return Err(format!(
                "reason is not a string of at most {MAX_NOTE} characters"
            ))
        }
    };
    Ok(Relation {
        target,
        edge_type: ty,
        confidence: confidence as f32,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> HashSet<String> {
        ["Entity:A", "Entity:B"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn answers_are_validated_strictly() {
        let ok = br#"```json
{"summary": " Orders. ", "relations": [
  {"target": "Entity:B", "type": "affects", "confidence": 0.7},
  {"target": "Nope", "type": "AFFECTS", "confidence": 0.5},
  {"target": "Entity:B", "type": "X-Y", "confidence": 0.5},
  {"target": "Entity:B", "type": "USES", "confidence": 1.5},
  {"target": "Entity:B", "type": "USES", "confidence": 1e308},
  {"target": "Entity:A", "type": "USES", "confidence": 0.5}
], "impact": ["billing"], "extra": 1}
```"#;
        let (a, w) = validate(ok, "Entity:A", &known()).unwrap();
        assert_eq!(a.summary, "Orders.");
        assert_eq!(a.relations.len(), 1);
        assert_eq!(a.relations[0].edge_type, "AFFECTS");
        assert_eq!(w.len(), 5, "{w:?}");
        assert!(w[0].contains("unknown target id \"Nope\""));
        assert!(w[3].contains("confidence 1e+308 is outside"), "{w:?}");
        for bad in [
            &b"not json"[..],
            b"",
            br#"{"summary": ""}"#,
            br#"{"relations": []}"#,
            br#"[1, 2]"#,
        ] {
            let e = validate(bad, "Entity:A", &known()).unwrap_err();
            assert_eq!(e.code(), "AGENT_ERROR", "{e}");
        }
        let long = format!(r#"{{"summary": "{}"}}"#, "x".repeat(MAX_SUMMARY + 1));
        assert!(validate(long.as_bytes(), "Entity:A", &known()).is_err());
    }

    #[test]
    fn agent_ids_hide_the_command() {
        let id = agent_id("OPENAI_API_KEY=sk-secret /usr/bin/claude -p --model x");
        assert!(id.starts_with("claude@"), "{id}");
        assert!(!id.contains("secret"));
        assert_ne!(id, agent_id("claude -p"));
    }
}
