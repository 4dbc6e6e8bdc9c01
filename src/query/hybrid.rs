//! QRY-003 hybrid search and QRY-002/lexical single-strategy search.
//!
//! Ranking:
//! 0. Searched text (see [`super::searched`]): the question, its translation when it is in the
//!    other language of the corpus (the agent's own, else machine-made), the agent's keywords
//!    and hypothetical answer; a translated question leans a little less on the model, and a
//!    question naming an identifier the corpus contains (see [`super::ident`]) not at all.
//! 1. Lexical: field-weighted BM25 over identity and section documents (see `cache::text`),
//!    one score per node = identity match + best section (+ a little of the second best).
//! 2. Semantic (L2): cosine of the query embedding against every chunk vector; a node scores its
//!    best chunk.
//! 3. Fusion (see [`super::fuse`]; reciprocal rank and z-score fusion were measured there and
//!    not kept): each signal is normalised by its best score in this answer, then combined with
//!    fixed weights (lexical above semantic: measured, field-aware BM25 is the stronger signal
//!    for the small multilingual model). A node that has no vectors at all (events, by
//!    BR-EMBEDDING-001) is not "dissimilar": its lexical score stands in for the missing
//!    semantic one. At L1 lexical carries the ranking alone, so L1 is fully useful.
//! 4. Neighbourhood support: every candidate lends a share of its score (times the typed edge
//!    weight) to the specs it is linked with; each spec adds its best lent share. Specs that
//!    answer a question together (a use case, the rule it applies, the command it runs, the
//!    event that command emits) rise together; an isolated word match does not. Specs that
//!    only receive support are listed as graph hits with the edge that reached them.
//!    A question asking for a kind ("which event…", see [`super::intent`]) then lifts the
//!    candidates of that kind.
//! 5. Graph expansion: the top hits are expanded through typed, weighted edges (rules applied,
//!    commands executed, events emitted…; generic wiki-links weigh little and hubs are damped).
//!    Expansion adds context below the direct hits and gives a small bonus to direct hits that
//!    are also reached from a better hit; it never reorders the top blindly.
//! 6. Domain isolation (see [`super::isolate`]): a question that names one business domain of a
//!    multi-domain corpus (in its own words or its translation's) keeps the other domains' specs
//!    below that domain's and the shared ones,
//!    unless a typed link brings them in (`reached_via` names it).
//!
//! `--no-expand` turns off steps 4 and 5.

use super::expand::{expand, smooth, Candidate, Trail, Walk};
use super::hits::{
    answer_confidence, best_evidence, edges_between, fit_edges, hit_of, make_snippet, render,
    source_name, Budget, Found, Picked,
};
use super::types::*;
use super::Error;
use crate::artifact::IndexLevel;
use crate::cache::{Cache, NodeRecord, Snapshot, TextFilter};
use crate::spec::Kind;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Weight of the lexical signal in the fusion.
const W_LEX: f32 = 1.0;
// The semantic weights, the neighbourhood share and the expansion share are tuning knobs
// (`super::knobs`): measured defaults, overridable by `KDD_RANK_*` for cross-validated sweeps.
/// At least this many top candidates lend support to their neighbours.
const LENDERS: usize = 20;
/// How many top hits seed the graph expansion.
const SEEDS: usize = 3;

fn validate(query: &str, limit: usize, min_score: f32) -> Result<(), Error> {
    if let Some(e) = super::check_text(query) {
        return Err(e);
    }
    if !(1..=100).contains(&limit) {
        return Err(Error::invalid(
            "INVALID_LIMIT",
            "limit must be between 1 and 100",
        ));
    }
    if !(0.0..=1.0).contains(&min_score) {
        return Err(Error::invalid(
            "INVALID_SCORE_RANGE",
            "min_score must be between 0.0 and 1.0",
        ));
    }
    Ok(())
}

pub(super) struct Signals {
    pub(super) lex: Option<(f32, usize)>,
    pub(super) sem: Option<(f32, usize)>,
    /// The best chunk's raw cosine (absolute, for calibration).
    pub(super) sem_raw: Option<f32>,
    pub(super) best_section: Option<usize>,
    pub(super) sem_text: Option<String>,
}

fn filter_of(
    kinds: &[crate::spec::Kind],
    layers: &[crate::spec::Layer],
    domain: &Option<String>,
) -> TextFilter {
    TextFilter {
        kinds: kinds.iter().map(|k| k.as_str().to_string()).collect(),
        layers: layers.iter().map(|l| l.as_str().to_string()).collect(),
        domain: domain.clone(),
        question_lang: None,
    }
}

fn passes(rec: &NodeRecord, f: &TextFilter) -> bool {
    (f.kinds.is_empty() || f.kinds.iter().any(|k| k == rec.node.kind.as_str()))
        && (f.layers.is_empty() || f.layers.iter().any(|l| l == rec.node.layer.as_str()))
        && (f.domain.is_none() || f.domain == rec.node.domain)
}

/// (node id, best cosine, chunk text).
type SemHit = (String, f32, String);

/// Semantic hits for each of `texts`, merged (a node keeps its best cosine), best first;
/// `Err(reason)` when unavailable.
fn semantic(
    snap: &Snapshot<'_>,
    texts: &[&str],
    limit: usize,
) -> Result<Result<Vec<SemHit>, String>, Error> {
    let mut best: BTreeMap<String, (f32, String)> = BTreeMap::new();
    for t in texts {
        match semantic_one(snap, t, limit)? {
            Ok(hits) => {
                for (id, c, text) in hits {
                    let e = best.entry(id).or_insert((f32::MIN, String::new()));
                    if c > e.0 {
                        *e = (c, text);
                    }
                }
            }
            Err(reason) => return Ok(Err(reason)),
        }
    }
    let mut out: Vec<SemHit> = best.into_iter().map(|(id, (c, t))| (id, c, t)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out.truncate(limit);
    Ok(Ok(out))
}

/// Semantic hits of one text, best first; `Err(reason)` when unavailable.
fn semantic_one(
    snap: &Snapshot<'_>,
    query: &str,
    limit: usize,
) -> Result<Result<Vec<SemHit>, String>, Error> {
    let cache = snap.cache;
    if cache.level() < IndexLevel::L2 {
        return Ok(Err("the index is L1 (no embeddings)".into()));
    }
    let Some(emb) = cache.embedder() else {
        return Ok(Err(cache
            .embedder_missing()
            .unwrap_or("no embedding model loaded")
            .to_string()));
    };
    let v = {
        let _span = crate::trace::span("embed_query");
        emb.embed_query(query)
    };
    let v = match v {
        Ok(v) => v,
        Err(e) => return Ok(Err(format!("embedding the query failed: {e}"))),
    };
    let searching = crate::trace::span("vector_search");
    let found = snap.nearest(&v, limit);
    drop(searching);
    match found {
        Ok(hits) => Ok(Ok(hits)),
        // A damaged store is an error (the caller rebuilds and answers again), not a degraded
        // answer.
        Err(e) if cache.is_damaged() => Err(e.into()),
        Err(e) => Ok(Err(e.to_string())),
    }
}

/// Which signals a ranking uses, the semantic weight, and the texts embedded.
#[derive(Clone, Copy)]
struct Mix<'a> {
    lexical: bool,
    semantic: bool,
    w_sem: f32,
    sem_texts: &'a [&'a str],
}

/// Ranked direct hits (lexical + semantic), best first: (node id, fused score, signals).
fn ranked(
    snap: &Snapshot<'_>,
    query: &str,
    filter: &TextFilter,
    want: usize,
    mix: Mix<'_>,
    warnings: &mut Vec<Warning>,
) -> Result<Vec<(String, f32, Signals)>, Error> {
    let Mix {
        lexical: use_lex,
        semantic: use_sem,
        w_sem,
        sem_texts,
    } = mix;
    let pool = (want * 4).max(40);
    let lex = if use_lex {
        let _span = crate::trace::span("lexical_search");
        snap.lexical(query, filter, pool)?
    } else {
        Vec::new()
    };
    let sem = if use_sem {
        match semantic(snap, sem_texts, pool * 3)? {
            Ok(v) => v,
            Err(reason) => {
                warnings.push(Warning::new(
                    "NO_EMBEDDINGS",
                    format!("No embeddings available ({reason}), falling back to graph + lexical"),
                ));
                Vec::new()
            }
        }
    } else {
        Vec::new()
    };
    let mut sig: BTreeMap<String, Signals> = BTreeMap::new();
    let lex_max = lex.first().map(|h| h.score).unwrap_or(0.0).max(1e-6);
    for (i, h) in lex.iter().enumerate() {
        sig.insert(
            h.node_id.clone(),
            Signals {
                lex: Some((h.score / lex_max, i)),
                sem: None,
                sem_raw: None,
                best_section: h.best_section,
                sem_text: None,
            },
        );
    }
    // Cosines of one model sit in a narrow band: stretch them over the candidate pool
    // (best → 1, worst candidate → 0) so the semantic signal discriminates like BM25 does.
    let sem_max = sem.iter().map(|s| s.1).fold(f32::MIN, f32::max);
    let sem_min = sem.iter().map(|s| s.1).fold(f32::MAX, f32::min);
    let sem_span = (sem_max - sem_min).max(1e-6);
    for (i, (id, s, text)) in sem.iter().enumerate() {
        let e = sig.entry(id.clone()).or_insert(Signals {
            lex: None,
            sem: None,
            sem_raw: None,
            best_section: None,
            sem_text: None,
        });
        e.sem = Some(((s - sem_min) / sem_span, i));
        e.sem_raw = Some(*s);
        e.sem_text = Some(text.clone());
    }
    let have_sem = !sem.is_empty();
    let have_lex = !lex.is_empty();
    let wsum = if have_sem { w_sem } else { 0.0 } + if have_lex { W_LEX } else { 0.0 };
    let weights = super::fuse::Weights {
        lex: if have_lex { W_LEX } else { 0.0 },
        sem: if have_sem { w_sem } else { 0.0 },
    };
    let mut stand_in = Vec::with_capacity(sig.len());
    for (id, s) in &sig {
        // A node without vectors (events carry none by BR-EMBEDDING-001, some specs have no
        // embeddable prose) lacks the semantic signal: missing is not "dissimilar".
        stand_in.push(have_sem && s.sem.is_none() && s.lex.is_some() && !has_vectors(snap, id)?);
    }
    let inputs: Vec<super::fuse::Input<'_>> = sig
        .values()
        .zip(&stand_in)
        .map(|(s, b)| super::fuse::Input {
            sig: s,
            stand_in: *b,
        })
        .collect();
    let fused = super::fuse::fuse(super::knobs::knobs().fuse, &inputs, weights);
    let mut out: Vec<(String, f32, Signals)> = sig
        .into_iter()
        .zip(fused)
        .map(|((id, s), f)| (id, f, s))
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if use_lex && have_lex {
        feedback(snap, query, filter, pool, wsum, &mut out)?;
    }
    Ok(out)
}

/// Pseudo-relevance feedback (see [`super::prf`]): the feedback query's normalised lexical
/// score, times its knob weight, joins each candidate's fused score (new candidates enter with
/// that evidence alone); the ranking is re-sorted.
fn feedback(
    snap: &Snapshot<'_>,
    query: &str,
    filter: &TextFilter,
    pool: usize,
    wsum: f32,
    out: &mut Vec<(String, f32, Signals)>,
) -> Result<(), Error> {
    let k = super::knobs::knobs();
    if k.prf_terms == 0 || k.prf_weight <= 0.0 || wsum <= 0.0 {
        return Ok(());
    }
    let first: Vec<(String, f32)> = out.iter().map(|(id, s, _)| (id.clone(), *s)).collect();
    let words = super::prf::feedback_words(snap, query, &first, k.prf_terms)?;
    let mut fb = super::prf::feedback_scores(snap, &words, filter, pool)?;
    let w = k.prf_weight * W_LEX / wsum;
    for (id, s, _) in out.iter_mut() {
        if let Some(p) = fb.remove(id) {
            *s += w * p;
        }
    }
    for (id, p) in fb {
        out.push((
            id,
            w * p,
            Signals {
                lex: None,
                sem: None,
                sem_raw: None,
                best_section: None,
                sem_text: None,
            },
        ));
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(())
}

/// True when the node has at least one embedded chunk (read from its identity record).
fn has_vectors(snap: &Snapshot<'_>, id: &str) -> Result<bool, Error> {
    Ok(snap.degrees(id)?.is_some_and(|l| l.vectors))
}

/// QRY-003: hybrid search (semantic + lexical + graph).
pub fn hybrid(cache: &Cache, req: &HybridRequest) -> Result<HybridResponse, Error> {
    validate_hybrid(req)?;
    let snap = cache.snapshot()?;
    super::domain::check_filter(&snap, req.domain.as_deref())?;
    let mut filter = filter_of(&req.kinds, &req.layers, &req.domain);
    filter.question_lang = super::translate::text_lang(&snap, &req.query)?;
    let mut warnings = Vec::new();
    let reading = crate::trace::span("read_question");
    let searched = super::searched::searched(&snap, &req.query, &req.expansion, &mut warnings)?;
    let text = searched.text.clone();
    let sem_texts: Vec<&str> = searched.sem_texts.iter().map(String::as_str).collect();
    let (w_sem, ident) = super::ident::fusion_weight(&snap, &req.query, searched.w_sem)?;
    let mix = Mix {
        lexical: true,
        semantic: true,
        w_sem,
        sem_texts: &sem_texts,
    };
    drop(reading);
    let direct = ranked(&snap, &text, &filter, req.limit, mix, &mut warnings)?;
    let words = snap.query_words(&text);
    stale_warning(&snap, &mut warnings)?;

    // Neighbourhood smoothing over typed edges (part of graph expansion: off with --no-expand).
    let graph = crate::trace::span("graph");
    let cands: Vec<Candidate> = if req.expand {
        smooth(
            &snap,
            direct,
            req.respect_layers,
            (req.limit * 2).max(LENDERS),
        )?
    } else {
        direct
            .into_iter()
            .map(|(id, s, sg)| (id, s, Some(sg), None))
            .collect()
    };
    let (cands, asked) = super::intent::lift(&snap, cands, &req.query)?;
    let read_as = read_as(ident, &asked);
    let mut trail = Trail::from_support(&cands);
    let mut scores: HashMap<String, f32> =
        cands.iter().map(|(id, s, _, _)| (id.clone(), *s)).collect();
    let expanded = if req.expand {
        let seeds: Vec<(String, f32)> = cands
            .iter()
            .take(SEEDS)
            .map(|(id, s, _, _)| (id.clone(), *s))
            .collect();
        let is_cand: HashSet<&str> = cands.iter().map(|c| c.0.as_str()).collect();
        let walk = Walk {
            depth: req.depth,
            respect_layers: req.respect_layers,
        };
        expand(&snap, &seeds, &is_cand, walk, &mut scores, &mut trail)?
    } else {
        BTreeMap::new()
    };

    drop(graph);
    let assembling = crate::trace::span("assemble");
    let focus = (super::knobs::knobs().isolate == 1)
        .then(|| super::isolate::focus(&snap, &req.query, searched.translation.as_deref()))
        .flatten();
    let found = Assembly {
        cands: &cands,
        scores: &scores,
        trail: &trail,
        expanded,
        focus,
    };
    let (picked, sigs) = pick(&snap, found, &filter, req.limit)?;
    let conf = answer_confidence(&snap, &req.query, &searched.translation, &picked, &sigs);
    let budget = Budget::of(req);
    let found = Found {
        picked: &picked,
        sigs: &sigs,
        graph_hit: &trail.graph_hit,
        conf,
    };
    drop(assembling);
    let rendering = crate::trace::span("render");
    let (mut results, total_tokens, next_offset) =
        render(&snap, &found, &words, budget, &mut warnings);
    let mut edges = edges_between(&snap, trail.followed, &mut results)?;
    let total_tokens = fit_edges(&mut edges, total_tokens, req.max_tokens, &mut warnings);
    drop(rendering);
    Ok(HybridResponse {
        expanded_with: searched.used,
        read_as,
        total_results: results.len(),
        total_tokens,
        next_offset,
        results,
        graph_expansion: edges,
        warnings,
    })
}

/// [`validate`] plus the graph depth of a hybrid request.
fn validate_hybrid(req: &HybridRequest) -> Result<(), Error> {
    validate(&req.query, req.limit, req.min_score)?;
    if !(1..=5).contains(&req.depth) {
        return Err(Error::invalid(
            "INVALID_DEPTH",
            "depth must be between 1 and 5",
        ));
    }
    Ok(())
}

/// The answer's `read_as`: the question-reading rules that changed this ranking.
fn read_as(ident: Option<String>, lifted: &[Kind]) -> Vec<String> {
    ident
        .map(|i| format!("identifier:{i}"))
        .into_iter()
        .chain(lifted.iter().map(|k| format!("asks_for:{k}")))
        .collect()
}

/// A `STALE_SPECS` warning when specs changed since they were indexed.
fn stale_warning(snap: &Snapshot<'_>, warnings: &mut Vec<Warning>) -> Result<(), Error> {
    if let Some(st) = snap.stats()? {
        warnings.extend(Warning::stale_specs(&st.stale_specs));
    }
    Ok(())
}

/// What ranking assembled for [`pick`]: candidates, their (graph-boosted) scores, the trail,
/// the expanded nodes, and the question's domain focus (see [`super::isolate`]).
struct Assembly<'c, 's> {
    cands: &'c [Candidate],
    scores: &'s HashMap<String, f32>,
    trail: &'s Trail,
    expanded: BTreeMap<String, (f32, String)>,
    focus: Option<String>,
}

/// Nodes picked for the answer, best first, at most `limit` passing `filter`: direct hits and
/// supported neighbours (with their possibly graph-boosted `scores`) and expanded nodes (with
/// the path that reached them); plus the direct signals of each candidate.
fn pick<'c>(
    snap: &Snapshot<'_>,
    found: Assembly<'c, '_>,
    filter: &TextFilter,
    limit: usize,
) -> Result<(Vec<Picked>, HashMap<&'c str, &'c Signals>), Error> {
    let Assembly {
        cands,
        scores,
        trail,
        expanded,
        focus,
    } = found;
    // Assemble: direct hits, supported neighbours and expanded nodes, best first.
    let mut all: Vec<(String, f32, Option<String>)> = cands
        .iter()
        .map(|(id, _, _, _)| (id.clone(), scores[id], trail.support_path.get(id).cloned()))
        .collect();
    for (id, (s, path)) in expanded {
        all.push((id, s, Some(path)));
    }
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if let Some(f) = &focus {
        all = super::isolate::isolate(snap, f, all)?;
    }
    let sigs: HashMap<&str, &Signals> = cands
        .iter()
        .filter_map(|(id, _, s, _)| s.as_ref().map(|s| (id.as_str(), s)))
        .collect();
    let mut picked: Vec<Picked> = Vec::new();
    for (id, s, via) in all {
        if picked.len() >= limit {
            break;
        }
        let Some(rec) = snap.node(&id)? else { continue };
        if passes(&rec, filter) {
            picked.push((rec, s, via));
        }
    }
    Ok((picked, sigs))
}

/// Single-strategy search: `--lexical` (BM25) or `--semantic` (QRY-002).
pub fn search(cache: &Cache, req: &SearchRequest) -> Result<SearchResponse, Error> {
    validate(&req.query, req.limit, req.min_score)?;
    let snap = cache.snapshot()?;
    super::domain::check_filter(&snap, req.domain.as_deref())?;
    let mut filter = filter_of(&req.kinds, &req.layers, &req.domain);
    filter.question_lang = super::translate::text_lang(&snap, &req.query)?;
    let mut warnings = Vec::new();
    let searched = super::searched::searched(&snap, &req.query, &req.expansion, &mut warnings)?;
    let text = searched.text.clone();
    let words = snap.query_words(&text);
    let (lex, sem) = match req.mode {
        SearchMode::Lexical => (true, false),
        SearchMode::Semantic => (false, true),
    };
    let sem_texts: Vec<&str> = searched.sem_texts.iter().map(String::as_str).collect();
    let mix = Mix {
        lexical: lex,
        semantic: sem,
        // One signal: a fusion weight would only scale it (and a zero one would erase it).
        w_sem: 1.0,
        sem_texts: &sem_texts,
    };
    let direct = ranked(&snap, &text, &filter, req.limit, mix, &mut warnings)?;
    if sem && warnings.iter().any(|w| w.code == "NO_EMBEDDINGS") {
        let reason = warnings
            .iter()
            .filter(|w| w.code == "NO_EMBEDDINGS")
            .map(|w| w.message.clone())
            .collect::<Vec<_>>()
            .join("; ");
        return Err(Error::NoEmbeddings(reason));
    }
    let mut results = Vec::new();
    for (id, s, sg) in direct {
        if results.len() >= req.limit {
            break;
        }
        if s < req.min_score {
            continue;
        }
        let Some(rec) = snap.node(&id)? else { continue };
        if !passes(&rec, &filter) {
            continue;
        }
        let raw = match req.mode {
            SearchMode::Semantic => sg.sem.map(|x| x.0).unwrap_or(s),
            SearchMode::Lexical => s,
        };
        let at = best_evidence(&rec, Some(&sg));
        results.push(hit_of(
            &rec,
            raw,
            source_name(&sg, false),
            make_snippet(&snap, &rec, &sg, &words),
            None,
            at,
        ));
    }
    Ok(SearchResponse {
        expanded_with: searched.used,
        total_results: results.len(),
        results,
        warnings,
        embedding_model: if sem {
            cache.manifest().embedding.as_ref().map(|e| e.model.clone())
        } else {
            None
        },
    })
}
