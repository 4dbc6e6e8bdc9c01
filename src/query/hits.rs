//! Turning ranked nodes into answer hits: the cited section and lines of the best evidence,
//! the snippet, the `match_source`, the calibrated score, and the fit into a token budget.
//!
//! Invariants: a hit cites the section its best evidence came from (lexical section, else the
//! semantic chunk's section, else the summary); scores are calibrated against the answer's
//! absolute confidence (see [`super::evidence`]) and hits under `min_score` are dropped with a
//! `NO_MATCH` warning when nothing is left; the budget drops whole hits from the bottom only
//! (the first hit always stays) before it drops indexed fields.

use super::hybrid::Signals;
use super::types::*;
use super::util::{clip, snippet, summary, tokens};
use crate::cache::{NodeRecord, Snapshot};
use std::collections::{HashMap, HashSet};

/// Limits of an answer.
#[derive(Clone, Copy)]
pub(super) struct Budget {
    pub min_score: f32,
    pub max_tokens: usize,
    /// Ranked hits skipped before the page the budget is spent on.
    pub offset: usize,
}

impl Budget {
    /// The limits `req` asks for.
    pub fn of(req: &HybridRequest) -> Budget {
        Budget {
            min_score: req.min_score,
            max_tokens: req.max_tokens,
            offset: req.offset,
        }
    }
}

/// A node picked for the answer: its record, fused score, and the path that reached it when
/// only the graph did.
pub(super) type Picked = (NodeRecord, f32, Option<String>);

/// What ranking found: the picked nodes (node, fused score, path when only the graph reached
/// it), best first; their direct signals; the direct hits the graph also reached; the answer's
/// absolute confidence.
pub(super) struct Found<'a> {
    pub picked: &'a [Picked],
    pub sigs: &'a HashMap<&'a str, &'a Signals>,
    pub graph_hit: &'a HashSet<String>,
    pub conf: f32,
}

/// The hits of `found` after `budget.offset`, best first: calibrated, cited, under `budget`;
/// the tokens they use and the next page's offset when the budget cut this one; warnings for
/// an empty or truncated answer.
pub(super) fn render(
    snap: &Snapshot<'_>,
    found: &Found<'_>,
    words: &[String],
    budget: Budget,
    warnings: &mut Vec<Warning>,
) -> (Vec<Hit>, usize, Option<usize>) {
    let Found {
        picked,
        sigs,
        graph_hit,
        conf,
    } = *found;
    let best = picked.first().map_or(0.0, |p| p.1);
    let mut results = Vec::new();
    for (rec, s, via) in picked {
        let score = super::evidence::calibrated(conf, *s, best);
        if score < budget.min_score {
            continue;
        }
        let id = rec.node.id.as_str();
        let sg = sigs.get(id).copied();
        let at = best_evidence(rec, sg);
        results.push(match sg {
            Some(sg) => hit_of(
                rec,
                score,
                source_name(sg, graph_hit.contains(id)),
                make_snippet(snap, rec, sg, words),
                // A direct hit carries a path only when domain isolation let it in by a link.
                via.clone(),
                at,
            ),
            None => hit_of(
                rec,
                score,
                "graph",
                snippet(summary(rec), words, 240),
                via.clone(),
                at,
            ),
        });
    }
    if results.is_empty() {
        warnings.push(Warning::new(
            "NO_MATCH",
            format!(
                "No spec matches the query (best confidence {conf:.2}, below min_score {:.2}); try the specs' own words, an id, or a lower --min-score",
                budget.min_score
            ),
        ));
    }
    results.drain(..budget.offset.min(results.len()));
    let on_page = results.len();
    let (total_tokens, truncated) = fit_budget(&mut results, budget.max_tokens);
    let next_offset = (results.len() < on_page).then_some(budget.offset + results.len());
    if truncated {
        let next = match next_offset {
            Some(n) => format!("; the next page starts at offset {n}"),
            None => String::new(),
        };
        warnings.push(Warning::new(
            "TOKEN_LIMIT_EXCEEDED",
            format!("Results truncated at {} tokens{next}", budget.max_tokens),
        ));
    }
    (results, total_tokens, next_offset)
}

pub(super) fn hit_of(
    rec: &NodeRecord,
    score: f32,
    match_source: &str,
    snip: String,
    via: Option<String>,
    best: Option<usize>,
) -> Hit {
    let span = best.and_then(|i| super::evidence::span(rec, i));
    let source = super::agent::hit_source(rec, best);
    Hit {
        node_id: rec.node.id.clone(),
        kind: rec.node.kind,
        score: (score * 10_000.0).round() / 10_000.0,
        source_file: rec.node.source_file.clone(),
        match_source: match_source.to_string(),
        snippet: snip,
        title: rec.node.title.clone(),
        layer: rec.node.layer,
        domain: rec.node.domain.clone(),
        indexed_fields: rec.fields.clone(),
        reached_via: via,
        section: span.as_ref().map(|s| s.0.clone()),
        lines: span.map(|s| s.1).filter(|_| source.is_none()),
        source,
    }
}

/// The section holding a hit's best evidence: its best lexical section, else the section of
/// its best semantic chunk, else its summary section. A heading without text of its own (a
/// title matched) cites its first section with text instead.
pub(super) fn best_evidence(rec: &NodeRecord, s: Option<&Signals>) -> Option<usize> {
    let i = evidence_section(rec, s)?;
    rec.sections
        .iter()
        .enumerate()
        .skip(i)
        .find(|(_, x)| !x.text.trim().is_empty())
        .map(|(j, _)| j)
        .or(Some(i))
}

pub(super) fn evidence_section(rec: &NodeRecord, s: Option<&Signals>) -> Option<usize> {
    if let Some(s) = s {
        if let Some(i) = s.best_section {
            return Some(i);
        }
        if let Some(i) = s
            .sem_text
            .as_deref()
            .and_then(|t| super::evidence::section_of_chunk(rec, t))
        {
            return Some(i);
        }
    }
    let sum = summary(rec);
    rec.sections
        .iter()
        .position(|x| !sum.is_empty() && x.text == sum)
        .or_else(|| rec.sections.iter().position(|x| !x.text.trim().is_empty()))
}

/// The tokens a hit costs in the answer: its whole JSON (ids, paths, span, score…), at four
/// characters a token, as MCP pages count.
pub(super) fn hit_tokens(h: &Hit) -> usize {
    serde_json::to_string(h).map_or(0, |s| tokens(&s)) + 1
}

pub(super) fn source_name(s: &Signals, graph: bool) -> &'static str {
    let n = s.lex.is_some() as u8 + s.sem.is_some() as u8 + graph as u8;
    if n > 1 {
        "fusion"
    } else if s.sem.is_some() {
        "semantic"
    } else if s.lex.is_some() {
        "lexical"
    } else {
        "graph"
    }
}

pub(super) fn make_snippet(
    snap: &Snapshot<'_>,
    rec: &NodeRecord,
    s: &Signals,
    words: &[String],
) -> String {
    let _ = snap;
    if let Some(i) = s.best_section {
        if let Some(sec) = rec.sections.get(i) {
            if !sec.text.trim().is_empty() {
                return snippet(&sec.text, words, 240);
            }
        }
    }
    if let Some(t) = &s.sem_text {
        return clip(t, 240);
    }
    snippet(summary(rec), words, 240)
}

/// Fit the answer into `max_tokens`: the ranking matters most, so every hit first gets its
/// compact form (id, title, snippet) and hits are dropped from the bottom only when even those
/// do not fit (the first hit always stays); then indexed fields are restored in rank order while
/// they fit. Returns (tokens used, whether anything was cut).
pub(super) fn fit_budget(results: &mut Vec<Hit>, max_tokens: usize) -> (usize, bool) {
    let mut fields: Vec<_> = results
        .iter_mut()
        .map(|h| std::mem::take(&mut h.indexed_fields))
        .collect();
    let mut total = 0usize;
    let mut keep = 0usize;
    for h in results.iter() {
        let t = hit_tokens(h);
        if keep > 0 && total + t > max_tokens {
            break;
        }
        total += t;
        keep += 1;
    }
    let mut truncated = keep < results.len();
    results.truncate(keep);
    for (h, f) in results.iter_mut().zip(fields.iter_mut()) {
        let base = hit_tokens(h);
        h.indexed_fields = std::mem::take(f);
        let full = hit_tokens(h);
        if total + full - base <= max_tokens {
            total += full - base;
        } else {
            h.indexed_fields = Default::default();
            truncated = true;
        }
    }
    (total, truncated)
}

/// Keep the edges between the hits while the answer stays within `max_tokens` (the hits were
/// fitted first, at `total` tokens); returns the tokens used.
pub(super) fn fit_edges(
    edges: &mut Vec<EdgeRef>,
    mut total: usize,
    max_tokens: usize,
    warnings: &mut Vec<Warning>,
) -> usize {
    let mut keep = 0;
    for e in edges.iter() {
        let t = serde_json::to_string(e).map_or(0, |s| tokens(&s)) + 1;
        if total + t > max_tokens {
            break;
        }
        total += t;
        keep += 1;
    }
    if keep < edges.len() {
        edges.truncate(keep);
        if !warnings.iter().any(|w| w.code == "TOKEN_LIMIT_EXCEEDED") {
            warnings.push(Warning::new(
                "TOKEN_LIMIT_EXCEEDED",
                format!("graph_expansion truncated at {max_tokens} tokens (the hits come first)"),
            ));
        }
    }
    total
}

/// The answer's absolute confidence (see [`super::evidence`]): the best of its first hits,
/// each the larger of its coverage of the question's words (of the question as asked, or of
/// its translation) and the semantic closeness of its best chunk.
pub(super) fn answer_confidence(
    snap: &Snapshot<'_>,
    query: &str,
    translation: &Option<String>,
    picked: &[Picked],
    sigs: &HashMap<&str, &Signals>,
) -> f32 {
    use super::evidence::{confidence, coverage, question_stems, CONF_TOP};
    let asked = question_stems(snap, query);
    let translated = translation
        .as_deref()
        .map(|t| question_stems(snap, t))
        .unwrap_or_default();
    picked
        .iter()
        .take(CONF_TOP)
        .map(|(rec, _, _)| {
            let cov = coverage(snap, rec, &asked).max(coverage(snap, rec, &translated));
            let cos = sigs.get(rec.node.id.as_str()).and_then(|s| s.sem_raw);
            confidence(cov, cos)
        })
        .fold(0.0, f32::max)
}

/// The followed edges whose two ends are both among `results`, and the agent's marks on both
/// (edges and results an agent relation reached).
pub(super) fn edges_between(
    snap: &Snapshot<'_>,
    followed: Vec<EdgeRef>,
    results: &mut [Hit],
) -> Result<Vec<EdgeRef>, super::Error> {
    let kept: HashSet<&str> = results.iter().map(|h| h.node_id.as_str()).collect();
    let mut edges: Vec<EdgeRef> = followed
        .into_iter()
        .filter(|e| kept.contains(e.from_node.as_str()) && kept.contains(e.to_node.as_str()))
        .collect();
    super::agent::mark_edges(snap, &mut edges)?;
    super::agent::mark_reached(snap, results)?;
    Ok(edges)
}
