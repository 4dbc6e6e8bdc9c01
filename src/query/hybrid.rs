//! QRY-003 hybrid search and QRY-002/lexical single-strategy search.
//!
//! Ranking:
//! 0. Searched text (see [`super::searched`]): the question, its translation when it is in the
//!    other language of the corpus (the agent's own, else machine-made), the agent's keywords
//!    and hypothetical answer; a translated question leans a little less on the model.
//! 1. Lexical: field-weighted BM25 over identity and section documents (see `cache::text`),
//!    one score per node = identity match + best section (+ a little of the second best).
//! 2. Semantic (L2): cosine of the query embedding against every chunk vector; a node scores its
//!    best chunk.
//! 3. Fusion: each signal is normalised by its best score in this answer, then combined with
//!    fixed weights (lexical above semantic: measured, field-aware BM25 is the stronger signal
//!    for the small multilingual model). A node that has no vectors at all (events, by
//!    BR-EMBEDDING-001) is not "dissimilar": its lexical score stands in for the missing
//!    semantic one. At L1 lexical carries the ranking alone, so L1 is fully useful.
//! 4. Neighbourhood support: every candidate lends a share of its score (times the typed edge
//!    weight) to the specs it is linked with; each spec adds its best lent share. Specs that
//!    answer a question together (a use case, the rule it applies, the command it runs, the
//!    event that command emits) rise together; an isolated word match does not. Specs that
//!    only receive support are listed as graph hits with the edge that reached them.
//! 5. Graph expansion: the top hits are expanded through typed, weighted edges (rules applied,
//!    commands executed, events emitted…; generic wiki-links weigh little and hubs are damped).
//!    Expansion adds context below the direct hits and gives a small bonus to direct hits that
//!    are also reached from a better hit; it never reorders the top blindly.
//!
//! `--no-expand` turns off steps 4 and 5.

use super::types::*;
use super::util::{clip, snippet, summary, tokens};
use super::Error;
use crate::artifact::IndexLevel;
use crate::cache::{Cache, NodeRecord, Snapshot, TextFilter};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

/// Weight of the lexical signal in the fusion.
const W_LEX: f32 = 1.0;
// The semantic weights, the neighbourhood share and the expansion share are tuning knobs
// (`super::knobs`): measured defaults, overridable by `KDD_RANK_*` for cross-validated sweeps.
/// At least this many top candidates lend support to their neighbours.
const LENDERS: usize = 20;
/// How many top hits seed the graph expansion.
const SEEDS: usize = 3;
/// Bonus (times edge weight and seed score) for a direct hit also reached from a better hit.
const GRAPH_BONUS: f32 = 0.1;

/// Weight of an edge type for expansion: typed structure first, generic links last.
pub fn edge_weight(t: &str) -> f32 {
    match t {
        "UC_APPLIES_RULE" | "UC_EXECUTES_CMD" => 0.9,
        "ENTITY_RULE" | "ENTITY_POLICY" => 0.8,
        "EMITS" | "CONSUMES" => 0.7,
        "VALIDATES" | "REQ_TRACES_TO" | "VIEW_TRIGGERS_UC" => 0.6,
        "DOMAIN_RELATION" | "UC_STORY" | "DECIDES_FOR" => 0.5,
        "WIKI_LINK" | "CROSS_DOMAIN_REF" => 0.25,
        t if t.chars().any(|c| c.is_ascii_lowercase()) => 0.5,
        _ => 0.4,
    }
}

fn validate(query: &str, limit: usize, min_score: f32) -> Result<(), Error> {
    if super::too_short(query) {
        return Err(Error::QueryTooShort);
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

struct Signals {
    lex: Option<(f32, usize)>,
    sem: Option<(f32, usize)>,
    /// The best chunk's raw cosine (absolute, for calibration).
    sem_raw: Option<f32>,
    best_section: Option<usize>,
    sem_text: Option<String>,
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
    }
}

fn passes(rec: &NodeRecord, f: &TextFilter) -> bool {
    (f.kinds.is_empty() || f.kinds.iter().any(|k| k == rec.node.kind.as_str()))
        && (f.layers.is_empty() || f.layers.iter().any(|l| l == rec.node.layer.as_str()))
        && (f.domain.is_none() || f.domain == rec.node.domain)
}

/// (node id, best cosine, chunk text).
type SemHit = (String, f32, String);

/// Semantic hits, best first; `Err(reason)` when unavailable.
fn semantic(
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
    let v = match emb.embed_query(query) {
        Ok(v) => v,
        Err(e) => return Ok(Err(format!("embedding the query failed: {e}"))),
    };
    match snap.nearest(&v, limit) {
        Ok(hits) => Ok(Ok(hits)),
        // A damaged store is an error (the caller rebuilds and answers again), not a degraded
        // answer.
        Err(e) if cache.is_damaged() => Err(e.into()),
        Err(e) => Ok(Err(e.to_string())),
    }
}

fn hit_of(
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
fn best_evidence(rec: &NodeRecord, s: Option<&Signals>) -> Option<usize> {
    let i = evidence_section(rec, s)?;
    rec.sections
        .iter()
        .enumerate()
        .skip(i)
        .find(|(_, x)| !x.text.trim().is_empty())
        .map(|(j, _)| j)
        .or(Some(i))
}

fn evidence_section(rec: &NodeRecord, s: Option<&Signals>) -> Option<usize> {
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

fn hit_tokens(h: &Hit) -> usize {
    tokens(&h.snippet)
        + tokens(&h.title)
        + tokens(&serde_json::to_string(&h.indexed_fields).unwrap_or_default())
        + 12
}

/// Which signals a ranking uses, and the semantic weight.
#[derive(Clone, Copy)]
struct Mix {
    lexical: bool,
    semantic: bool,
    w_sem: f32,
}

/// Ranked direct hits (lexical + semantic), best first: (node id, fused score, signals).
fn ranked(
    snap: &Snapshot<'_>,
    query: &str,
    filter: &TextFilter,
    want: usize,
    mix: Mix,
    warnings: &mut Vec<Warning>,
) -> Result<Vec<(String, f32, Signals)>, Error> {
    let Mix {
        lexical: use_lex,
        semantic: use_sem,
        w_sem,
    } = mix;
    let pool = (want * 4).max(40);
    let lex = if use_lex {
        snap.lexical(query, filter, pool)?
    } else {
        Vec::new()
    };
    let sem = if use_sem {
        match semantic(snap, query, pool * 3)? {
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
    let mut out: Vec<(String, f32, Signals)> = Vec::with_capacity(sig.len());
    for (id, s) in sig {
        let l = s.lex.map(|x| x.0).unwrap_or(0.0);
        let m = match s.sem {
            Some(x) => x.0,
            // A node without vectors (events carry none by BR-EMBEDDING-001, some specs have
            // no embeddable prose) lacks the semantic signal: missing is not "dissimilar", so
            // its lexical evidence stands in instead of a zero that would sink it.
            None if have_sem && s.lex.is_some() && !has_vectors(snap, &id)? => l,
            None => 0.0,
        };
        let fused = if wsum > 0.0 {
            (W_LEX * l + w_sem * m) / wsum
        } else {
            0.0
        };
        out.push((id, fused, s));
    }
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

/// True when the node has at least one embedded chunk.
fn has_vectors(snap: &Snapshot<'_>, id: &str) -> Result<bool, Error> {
    Ok(snap.node(id)?.is_some_and(|r| !r.items.is_empty()))
}

/// Where a node's neighbourhood support came from: (neighbour, edge type, outgoing from it).
type Support = (String, String, bool);

/// A ranked candidate: id, score, its direct signals (none when only the graph reached it) and
/// the neighbour that supported it.
type Candidate = (String, f32, Option<Signals>, Option<Support>);

/// Neighbourhood smoothing: every candidate lends a share of its score to the nodes it is linked
/// with (both directions, typed edge weights), and each node adds its best lent share. Specs that
/// answer a question together (a use case, the rule it applies, the command it runs, the event
/// that command emits) support each other; an isolated hit that merely shares words does not.
/// Nodes that only receive support join the candidates (reached through the graph).
fn smooth(
    snap: &Snapshot<'_>,
    direct: Vec<(String, f32, Signals)>,
    respect_layers: bool,
    lenders: usize,
) -> Result<Vec<Candidate>, Error> {
    let mut lent: HashMap<String, (f32, Support)> = HashMap::new();
    // `direct` is best first: only the leading candidates lend (a low one's share is negligible).
    for (id, score, _) in direct.iter().take(lenders) {
        if *score <= 0.0 {
            continue;
        }
        let out = snap
            .out_edges(id)?
            .into_iter()
            .map(|e| (e.to.clone(), e, true));
        let inc = snap
            .in_edges(id)?
            .into_iter()
            .map(|e| (e.from.clone(), e, false));
        for (nb, e, outgoing) in out.chain(inc) {
            if nb == *id || (respect_layers && e.violation) {
                continue;
            }
            let share = edge_weight(&e.edge_type) * score;
            let slot = lent
                .entry(nb)
                .or_insert((0.0, (String::new(), String::new(), true)));
            if share > slot.0 {
                *slot = (share, (id.clone(), e.edge_type.clone(), outgoing));
            }
        }
    }
    let mut out = Vec::with_capacity(direct.len() + lent.len());
    for (id, score, sig) in direct {
        let support = lent.remove(&id);
        let smooth_share = super::knobs::knobs().smooth;
        let bonus = support.as_ref().map_or(0.0, |s| smooth_share * s.0);
        out.push((id, score + bonus, Some(sig), support.map(|s| s.1)));
    }
    // Edge ends are resolved nodes; a vanished one is skipped when results are assembled.
    for (id, (share, support)) in lent {
        out.push((
            id,
            super::knobs::knobs().smooth * share,
            None,
            Some(support),
        ));
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(out)
}

fn source_name(s: &Signals, graph: bool) -> &'static str {
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

fn make_snippet(snap: &Snapshot<'_>, rec: &NodeRecord, s: &Signals, words: &[String]) -> String {
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
fn fit_budget(results: &mut Vec<Hit>, max_tokens: usize) -> (usize, bool) {
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

/// QRY-003: hybrid search (semantic + lexical + graph).
pub fn hybrid(cache: &Cache, req: &HybridRequest) -> Result<HybridResponse, Error> {
    validate(&req.query, req.limit, req.min_score)?;
    if !(1..=5).contains(&req.depth) {
        return Err(Error::invalid(
            "INVALID_DEPTH",
            "depth must be between 1 and 5",
        ));
    }
    let snap = cache.snapshot()?;
    let filter = filter_of(&req.kinds, &req.layers, &req.domain);
    let mut warnings = Vec::new();
    let searched = super::searched::searched(&snap, &req.query, &req.expansion, &mut warnings)?;
    let (text, w_sem) = (searched.text.clone(), searched.w_sem);
    let mix = Mix {
        lexical: true,
        semantic: true,
        w_sem,
    };
    let direct = ranked(&snap, &text, &filter, req.limit, mix, &mut warnings)?;
    let words = snap.query_words(&text);
    if let Some(st) = snap.stats()? {
        if !st.stale_specs.is_empty() {
            warnings.push(Warning::new(
                "STALE_SPECS",
                format!(
                    "{} spec(s) changed since they were indexed (e.g. {}); run `kdd index`",
                    st.stale_specs.len(),
                    st.stale_specs[0]
                ),
            ));
        }
    }

    // Neighbourhood smoothing over typed edges (part of graph expansion: off with --no-expand).
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
    let mut graph_hit: HashSet<String> = HashSet::new();
    // Edges followed, in order, without repeats.
    let mut followed: Vec<EdgeRef> = Vec::new();
    let mut followed_set: HashSet<EdgeRef> = HashSet::new();
    let mut support_path: HashMap<String, String> = HashMap::new();
    for (id, _, sg, support) in &cands {
        if let Some((nb, ty, outgoing)) = support {
            let (from, to) = if *outgoing { (nb, id) } else { (id, nb) };
            let er = EdgeRef::new(from, to, ty);
            if followed_set.insert(er.clone()) {
                followed.push(er);
            }
            if sg.is_some() {
                graph_hit.insert(id.clone());
            } else {
                support_path.insert(id.clone(), format!("{nb} -> {ty} -> {id}"));
            }
        }
    }
    let is_cand: HashSet<&str> = cands.iter().map(|c| c.0.as_str()).collect();

    // Graph expansion from the top hits.
    let mut scores: HashMap<String, f32> =
        cands.iter().map(|(id, s, _, _)| (id.clone(), *s)).collect();
    let mut expanded: BTreeMap<String, (f32, String)> = BTreeMap::new();
    if req.expand {
        for (seed, seed_score, _, _) in cands.iter().take(SEEDS) {
            let mut seen: HashSet<String> = HashSet::from([seed.clone()]);
            let mut q: VecDeque<(String, u8, f32, String)> =
                VecDeque::from([(seed.clone(), 0u8, *seed_score, seed.clone())]);
            while let Some((cur, d, s, path)) = q.pop_front() {
                if d >= req.depth {
                    continue;
                }
                let mut nexts: Vec<(String, String, bool, f32)> = Vec::new();
                for e in snap.out_edges(&cur)? {
                    nexts.push((e.to.clone(), e.edge_type.clone(), e.violation, 1.0));
                }
                for e in snap.in_edges(&cur)? {
                    nexts.push((e.from.clone(), e.edge_type.clone(), e.violation, 0.8));
                }
                for (nb, ty, viol, dir_w) in nexts {
                    if req.respect_layers && viol {
                        continue;
                    }
                    if !seen.insert(nb.clone()) {
                        continue;
                    }
                    let indeg = snap.lite(&nb)?.map_or(1, |l| l.in_degree.max(1)) as f32;
                    let hub = 1.0 / (1.0 + (indeg / 8.0)).sqrt();
                    let w = edge_weight(&ty) * dir_w * hub;
                    let ns = s * w * super::knobs::knobs().expand;
                    let npath = format!("{path} -> {ty} -> {nb}");
                    let (from, to) = if dir_w == 1.0 {
                        (cur.clone(), nb.clone())
                    } else {
                        (nb.clone(), cur.clone())
                    };
                    let er = EdgeRef::new(&from, &to, &ty);
                    if let Some(own) = scores.get(&nb).copied() {
                        if own < *seed_score && is_cand.contains(nb.as_str()) {
                            let bonus = GRAPH_BONUS * w * seed_score;
                            scores.insert(nb.clone(), own + bonus);
                            graph_hit.insert(nb.clone());
                            if followed_set.insert(er.clone()) {
                                followed.push(er);
                            }
                        }
                    } else {
                        let e = expanded.entry(nb.clone()).or_insert((0.0, String::new()));
                        if ns > e.0 {
                            *e = (ns, npath.clone());
                        }
                        if followed_set.insert(er.clone()) {
                            followed.push(er);
                        }
                    }
                    q.push_back((nb, d + 1, ns, npath));
                }
            }
        }
    }

    // Assemble: direct hits, supported neighbours and expanded nodes, best first.
    let mut all: Vec<(String, f32, Option<String>)> = cands
        .iter()
        .map(|(id, _, _, _)| (id.clone(), scores[id], support_path.get(id).cloned()))
        .collect();
    for (id, (s, path)) in expanded {
        all.push((id, s, Some(path)));
    }
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let sigs: HashMap<&str, &Signals> = cands
        .iter()
        .filter_map(|(id, _, s, _)| s.as_ref().map(|s| (id.as_str(), s)))
        .collect();
    let mut picked: Vec<(NodeRecord, f32, Option<String>)> = Vec::new();
    for (id, s, via) in all {
        if picked.len() >= req.limit {
            break;
        }
        let Some(rec) = snap.node(&id)? else { continue };
        if passes(&rec, &filter) {
            picked.push((rec, s, via));
        }
    }
    let conf = answer_confidence(&snap, &req.query, &searched.translation, &picked, &sigs);
    let best = picked.first().map_or(0.0, |p| p.1);
    let mut results = Vec::new();
    for (rec, s, via) in &picked {
        let score = super::evidence::calibrated(conf, *s, best);
        if score < req.min_score {
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
                make_snippet(&snap, rec, sg, &words),
                None,
                at,
            ),
            None => hit_of(
                rec,
                score,
                "graph",
                snippet(summary(rec), &words, 240),
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
                req.min_score
            ),
        ));
    }
    let (total_tokens, truncated) = fit_budget(&mut results, req.max_tokens);
    if truncated {
        warnings.push(Warning::new(
            "TOKEN_LIMIT_EXCEEDED",
            format!("Results truncated at {} tokens", req.max_tokens),
        ));
    }
    let kept: HashSet<&str> = results.iter().map(|h| h.node_id.as_str()).collect();
    let mut graph_expansion: Vec<EdgeRef> = followed
        .into_iter()
        .filter(|e| kept.contains(e.from_node.as_str()) && kept.contains(e.to_node.as_str()))
        .collect();
    super::agent::mark_edges(&snap, &mut graph_expansion)?;
    super::agent::mark_reached(&snap, &mut results)?;
    Ok(HybridResponse {
        expanded_with: searched.used,
        total_results: results.len(),
        total_tokens,
        results,
        graph_expansion,
        warnings,
    })
}

/// The answer's absolute confidence (see [`super::evidence`]): the best of its first hits,
/// each the larger of its coverage of the question's words (of the question as asked, or of
/// its translation) and the semantic closeness of its best chunk.
fn answer_confidence(
    snap: &Snapshot<'_>,
    query: &str,
    translation: &Option<String>,
    picked: &[(NodeRecord, f32, Option<String>)],
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

/// Single-strategy search: `--lexical` (BM25) or `--semantic` (QRY-002).
pub fn search(cache: &Cache, req: &SearchRequest) -> Result<SearchResponse, Error> {
    validate(&req.query, req.limit, req.min_score)?;
    let snap = cache.snapshot()?;
    let filter = filter_of(&req.kinds, &req.layers, &req.domain);
    let mut warnings = Vec::new();
    let searched = super::searched::searched(&snap, &req.query, &req.expansion, &mut warnings)?;
    let (text, w_sem) = (searched.text.clone(), searched.w_sem);
    let words = snap.query_words(&text);
    let (lex, sem) = match req.mode {
        SearchMode::Lexical => (true, false),
        SearchMode::Semantic => (false, true),
    };
    let mix = Mix {
        lexical: lex,
        semantic: sem,
        w_sem,
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
