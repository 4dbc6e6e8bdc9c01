//! QRY-007: task context from hints (file paths, ids, names, keywords).
//!
//! 1. Hint resolution: exact id / short id / file stem / title / alias; for paths, the basename
//!    without extension (`src/pedido.ts` → `pedido` → `Entity:Pedido`, `enrich_with_agent.py` →
//!    every node titled `EnrichWithAgent`), and for a code file named like no spec a text search
//!    over its words within the domain its path names (`src/clinic/billing/late_fee.ts` →
//!    `late fee billing` among the clinic's specs, method `path_words`; the hits named after a
//!    word of the file name, when there are such, not those only the folder's word found);
//!    otherwise a lexical search (keywords; a hint clearly in the other language of the corpus
//!    is searched with its machine translation, like a search's question, and a warning quotes
//!    it). A path is read relative to the repository root
//!    ([`codepath::in_repo`]); one that points outside it resolves to nothing, with a warning.
//! 2. Discovery: the resolved nodes themselves (when they are rules or behaviour), their graph
//!    neighbours of constraint kinds (rules, policies) and behaviour kinds (use cases, commands,
//!    queries, processes), up to `depth` hops; a use case brings its own structure with it (the
//!    rules it applies and the commands it executes).
//! 3. Content: the part of each spec an agent must respect (declaration of a rule, pre/post
//!    conditions of a command, description + main flow of a use case).
//! 4. Constraints first, then behaviour; nearest first; cut at the token budget.
//!
//! Domain isolation (see [`super::domain`]): hints that clearly point into one business domain
//! keep other domains' specs out unless a typed link from that domain brings them in. A
//! keyword hint points into a domain when every spec it matched lies in that one (or in
//! `_shared`), and only when no other hint names a domain.

use super::codepath;
use super::domain;
use super::types::*;
use super::util::{clip, section_text, summary, tokens};
use super::Error;
use crate::cache::resolve::{file_stem, KeyRank};
use crate::cache::{Cache, NodeRecord, Snapshot, TextFilter};
use crate::spec::Kind;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

fn is_constraint(k: Kind) -> bool {
    matches!(
        k,
        Kind::BusinessRule | Kind::BusinessPolicy | Kind::CrossPolicy
    )
}

fn is_behavior(k: Kind) -> bool {
    matches!(
        k,
        Kind::UseCase | Kind::Command | Kind::Query | Kind::Process
    )
}

/// Edges that make a use case's structure (followed from any use case reached).
fn is_structure(t: &str) -> bool {
    matches!(t, "UC_APPLIES_RULE" | "UC_EXECUTES_CMD")
}

fn content_of(rec: &NodeRecord) -> String {
    let k = rec.node.kind;
    let mut parts: Vec<&str> = Vec::new();
    if is_constraint(k) {
        parts.extend(section_text(
            rec,
            &["declaration", "declaracion", "statement"],
        ));
        parts.extend(section_text(
            rec,
            &["when_applies", "cuando aplica", "when applies"],
        ));
        parts.extend(section_text(
            rec,
            &["violation", "violacion", "que pasa si se incumple"],
        ));
    } else if matches!(k, Kind::Command | Kind::Query) {
        parts.extend(section_text(
            rec,
            &["purpose", "proposito", "description", "descripcion"],
        ));
        parts.extend(section_text(rec, &["preconditions", "precondiciones"]));
        parts.extend(section_text(rec, &["postconditions", "postcondiciones"]));
    } else if k == Kind::UseCase {
        parts.extend(section_text(rec, &["description", "descripcion"]));
        parts.extend(section_text(
            rec,
            &["main_flow", "flujo principal", "main flow"],
        ));
    }
    if parts.is_empty() {
        parts.push(summary(rec));
    }
    clip(&parts.join("\n"), 1200)
}

/// `place`: the business domain the hint names by itself (see [`domain::named_by_path`]).
fn resolve_hint(
    snap: &Snapshot<'_>,
    hint: &str,
    known: &BTreeSet<String>,
    place: Option<&str>,
    tr: &HintTranslations,
) -> Result<Vec<(String, String)>, Error> {
    let h = hint.trim();
    if h.is_empty() {
        return Ok(Vec::new());
    }
    if snap.node(h)?.is_some() {
        return Ok(vec![(h.to_string(), "exact_id".into())]);
    }
    // `domain:rest`: resolve the rest within that domain.
    if let Some((d, rest)) = h
        .split_once(':')
        .filter(|(d, r)| known.contains(*d) && !r.is_empty())
    {
        return resolve_in_domain(snap, d, rest, known, tr);
    }
    let is_path = h.contains('/') || h.contains('\\') || {
        let ext = h.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
        !ext.is_empty()
            && ext.len() <= 5
            && ext.chars().all(|c| c.is_ascii_alphanumeric())
            && !ext.chars().all(|c| c.is_ascii_digit())
    };
    if is_path {
        let by_name = resolve_path(snap, h)?;
        if !by_name.is_empty() {
            return Ok(by_name);
        }
        return resolve_path_words(snap, h, known, place);
    }
    let c = snap.lookup(h)?;
    if !c.is_empty() {
        let best = c[0].0;
        return Ok(c
            .into_iter()
            .filter(|(r, _)| *r == best)
            .map(|(r, id)| (id, r.method().to_string()))
            .collect());
    }
    if let Some(s) = crate::cache::resolve::short_id(h) {
        let c = snap.lookup(s)?;
        if let Some((r, _)) = c.first() {
            if *r <= KeyRank::Short {
                return Ok(vec![(c[0].1.clone(), "short_id".into())]);
            }
        }
    }
    // Keywords: the best lexical hits (those within half of the best score).
    if h.chars().count() < 3 {
        return Ok(Vec::new());
    }
    let f = TextFilter {
        question_lang: super::translate::text_lang(snap, h)?,
        ..TextFilter::default()
    };
    let text = match tr.of(snap, h)? {
        Some(t) => format!("{h} {t}"),
        None => h.to_string(),
    };
    best_hits(snap, &text, &f, "text_search")
}

/// The machine translations of one request's keyword hints clearly in the other language of
/// the corpus (searched with the hint, by BM25 only). Each hint is translated once, none over
/// `MAX_TRANSLATED` bytes (a longer "keyword" is not one), and none after the translator failed, so a
/// slow or broken translator costs one deadline per request; the failure is then a warning.
#[derive(Default)]
struct HintTranslations {
    done: std::cell::RefCell<BTreeMap<String, Option<String>>>,
    failed: std::cell::RefCell<Option<String>>,
}

impl HintTranslations {
    /// The translation of hint `h`, when one is needed and could be made.
    fn of(&self, snap: &Snapshot<'_>, h: &str) -> Result<Option<String>, Error> {
        use super::translate;
        if let Some(t) = self.done.borrow().get(h) {
            return Ok(t.clone());
        }
        if self.failed.borrow().is_some() {
            return Ok(None);
        }
        let translate::Plan::Translate { from, to } = translate::plan(snap, h)? else {
            return Ok(None);
        };
        let t = match translate::translate(h, from, to, translate::Style::Full) {
            Ok(t) => Some(t),
            Err(e) => {
                *self.failed.borrow_mut() = Some(e.to_string());
                None
            }
        };
        self.done.borrow_mut().insert(h.to_string(), t.clone());
        Ok(t)
    }

    /// The translation already made for hint `h`, if any.
    fn made(&self, h: &str) -> Option<String> {
        self.done.borrow().get(h).cloned().flatten()
    }
}

/// A hint's text search: the lexical hits within half of the best score, at most 3, each with
/// `method`.
fn best_hits(
    snap: &Snapshot<'_>,
    text: &str,
    f: &TextFilter,
    method: &str,
) -> Result<Vec<(String, String)>, Error> {
    let hits = snap.lexical(text, f, 5)?;
    let top = hits.first().map(|x| x.score).unwrap_or(0.0);
    Ok(hits
        .into_iter()
        .filter(|x| x.score >= top * 0.5)
        .take(3)
        .map(|x| (x.node_id, method.to_string()))
        .collect())
}

/// A `domain:rest` hint: `rest` resolved among that domain's specs, else its best lexical hit
/// there.
fn resolve_in_domain(
    snap: &Snapshot<'_>,
    d: &str,
    rest: &str,
    known: &BTreeSet<String>,
    tr: &HintTranslations,
) -> Result<Vec<(String, String)>, Error> {
    let mut inside = Vec::new();
    for (id, m) in resolve_hint(snap, rest, known, Some(d), tr)? {
        if snap.node_brief(&id)?.and_then(|r| r.node.domain).as_deref() == Some(d) {
            inside.push((id, m));
        }
    }
    if inside.is_empty() && rest.chars().count() >= 3 {
        let f = TextFilter {
            domain: Some(d.to_string()),
            ..TextFilter::default()
        };
        let hits = snap.lexical(rest, &f, 3)?;
        inside.extend(
            hits.into_iter()
                .take(1)
                .map(|x| (x.node_id, "text_search".into())),
        );
    }
    Ok(inside)
}

/// A path hint: the spec at that path, else every spec named like the file's basename.
fn resolve_path(snap: &Snapshot<'_>, h: &str) -> Result<Vec<(String, String)>, Error> {
    let norm = h.replace('\\', "/");
    if let Some(id) = snap.specs_at_path(&norm, false)?.into_iter().next() {
        return Ok(vec![(id, "path".into())]);
    }
    // A code file is named after what it implements: every spec named like its basename
    // (id, stem, title or alias), preferring specs over test features when both exist.
    let stem = file_stem(&norm);
    let mut c = snap.lookup(stem)?;
    let mut spec_like = Vec::new();
    for (r, id) in &c {
        if let Some(n) = snap.node_brief(id)? {
            if !matches!(n.node.kind, Kind::Feature | Kind::Requirement) {
                spec_like.push((*r, id.clone()));
            }
        }
    }
    if !spec_like.is_empty() {
        c = spec_like;
    }
    let Some(best) = c.iter().map(|(r, _)| *r).min() else {
        return Ok(Vec::new());
    };
    Ok(c.into_iter()
        .filter(|(r, _)| *r == best)
        .map(|(_, id)| (id, "basename".into()))
        .collect())
}

/// A code path whose file is named like no spec (`src/clinic/billing/late_fee.ts`): the specs
/// its words find by text search (those within half of the best, at most 3, as for keyword
/// hints), within the business domain the path names.
fn resolve_path_words(
    snap: &Snapshot<'_>,
    h: &str,
    known: &BTreeSet<String>,
    place: Option<&str>,
) -> Result<Vec<(String, String)>, Error> {
    let words = codepath::path_words(h, known);
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let f = TextFilter {
        domain: place.map(str::to_string),
        ..TextFilter::default()
    };
    let hits = best_hits(snap, &words.join(" "), &f, "path_words")?;
    // The file's name says what the code implements, its folder only where it lives: hits
    // named after a word of the file name (`book.py` → `BookAppointment`) are the subject, and
    // a hit the folder's word alone named (`appointments/` → the `Appointment` entity, with
    // every rule about it) is left out when there are such.
    let file = codepath::path_words(file_stem(&h.replace('\\', "/")), known).join(" ");
    let file = super::evidence::question_stems(snap, &file);
    let mut named = Vec::new();
    for (id, m) in &hits {
        if let Some(rec) = snap.node_brief(id)? {
            if codepath::names_a_stem(snap, &rec, &file) {
                named.push((id.clone(), m.clone()));
            }
        }
    }
    Ok(if named.is_empty() { hits } else { named })
}

/// The hints resolved: the entities, the seeds of discovery (in hint order), the business
/// domains the hints name, and a warning per hint that matched nothing.
struct Hints {
    resolved: Vec<ResolvedEntity>,
    seeds: Vec<String>,
    named: BTreeSet<String>,
    /// Hints (as quoted in `matched_from`) that resolved into several business domains.
    ambiguous: BTreeSet<String>,
    warnings: Vec<String>,
}

fn resolve_hints(snap: &Snapshot<'_>, hints: &[String], root: &Path) -> Result<Hints, Error> {
    let mut out = Hints {
        resolved: Vec::new(),
        seeds: Vec::new(),
        named: BTreeSet::new(),
        ambiguous: BTreeSet::new(),
        warnings: Vec::new(),
    };
    // The corpus's business domains (from the manifest: no spec is read).
    let known = domain::domains(snap);
    let tr = HintTranslations::default();
    // The business domains keyword hints found specs in (see the end of this function).
    let mut searched_into = BTreeSet::new();
    for h in hints {
        if h.trim().is_empty() {
            continue;
        }
        // The hint as the answer quotes it: a hostile 100 KB hint is not echoed whole.
        let shown: String = if h.chars().count() > 300 {
            h.chars().take(300).chain(std::iter::once('…')).collect()
        } else {
            h.clone()
        };
        // A path is read relative to the repository; one that leaves it names no spec.
        let read = if h.contains(['/', '\\']) {
            match codepath::in_repo(h, root) {
                Some(rel) => rel,
                None => {
                    out.warnings.push(format!(
                        "Hint '{shown}' points outside the repository: ignored \
                         (paths are read relative to the repository root)"
                    ));
                    continue;
                }
            }
        } else {
            h.clone()
        };
        let h = &read;
        let place = domain::named_by_path(snap, h, &known)?;
        let r = resolve_hint(snap, h, &known, place.as_deref(), &tr)?;
        out.named.extend(place);
        // The business domains the hint resolved into by id, path or name: one is named; several
        // (`BR-001` numbered in every domain) make the hint ambiguous, and it names none.
        let mut doms = BTreeSet::new();
        for (id, m) in &r {
            let d = snap.node_brief(id)?.and_then(|r| r.node.domain);
            let d = d.filter(|d| !domain::is_shared(Some(d)));
            match m.as_str() {
                "text_search" => searched_into.extend(d),
                "path_words" => {}
                _ => doms.extend(d),
            }
        }
        if doms.len() > 1 {
            out.ambiguous.insert(shown.clone());
        } else {
            out.named.extend(doms);
        }
        if r.is_empty() {
            out.warnings
                .push(format!("No match found for hint: '{shown}'"));
        } else if r.iter().any(|(_, m)| m == "text_search") {
            if let Some(t) = tr.made(h) {
                out.warnings.push(format!(
                    "Hint '{shown}' is in the other language of the specs: also searched as \"{}\"",
                    clip(&t, 300)
                ));
            }
        }
        for (id, method) in r {
            if !out.resolved.iter().any(|x| x.node_id == id) {
                out.resolved.push(ResolvedEntity {
                    node_id: id.clone(),
                    matched_from: shown.clone(),
                    match_method: method,
                });
            }
            if !out.seeds.contains(&id) {
                out.seeds.push(id);
            }
        }
    }
    // Keyword hints whose matches all lie in one business domain (and `_shared`) point into
    // it like one of its specs would, unless another hint names a domain: then that one
    // decides, and keyword matches elsewhere are look-alikes (`domain::in_focus`).
    if out.named.is_empty() && searched_into.len() == 1 {
        out.named = searched_into;
    }
    if let Some(e) = tr.failed.borrow().as_ref() {
        out.warnings.push(format!(
            "Keyword hints in the other language of the specs could not be translated ({e}); they were searched as they are (hints in the specs' language match better)"
        ));
    }
    Ok(out)
}

/// Discovery: a breadth-first walk from the seeds over constraint and behaviour neighbours;
/// found node → (distance, path).
fn discover(
    snap: &Snapshot<'_>,
    seeds: &[String],
    depth: u8,
    focus: &domain::Focus,
) -> Result<BTreeMap<String, (u8, String)>, Error> {
    let mut found: BTreeMap<String, (u8, String)> = BTreeMap::new();
    let mut q: VecDeque<(String, u8, String)> = VecDeque::new();
    for s in seeds {
        found.insert(s.clone(), (0, s.clone()));
        q.push_back((s.clone(), 0, s.clone()));
    }
    while let Some((cur, d, path)) = q.pop_front() {
        let Some(rec) = snap.node_brief(&cur)? else {
            continue;
        };
        let structure_only = d >= depth;
        let uc = rec.node.kind == Kind::UseCase;
        let mut nbs: Vec<(String, String)> = Vec::new();
        for e in snap.out_edges(&cur)? {
            if !structure_only || (uc && is_structure(&e.edge_type)) {
                nbs.push((e.to, e.edge_type));
            }
        }
        if !structure_only {
            for e in snap.in_edges(&cur)? {
                nbs.push((e.from, e.edge_type));
            }
        }
        for (nb, ty) in nbs {
            if found.contains_key(&nb) {
                continue;
            }
            let Some(n) = snap.node_brief(&nb)? else {
                continue;
            };
            let k = n.node.kind;
            if !(is_constraint(k) || is_behavior(k)) {
                continue;
            }
            // Focused on one domain: another domain's spec needs a typed link from inside it.
            if focus.outside(&n.node.domain)
                && (focus.outside(&rec.node.domain)
                    || domain::is_shared(rec.node.domain.as_deref())
                    || !domain::crosses(&ty))
            {
                continue;
            }
            let np = format!("{path} -> {ty} -> {nb}");
            let nd = if structure_only { d } else { d + 1 };
            found.insert(nb.clone(), (nd, np.clone()));
            // Use cases always bring their structure; other nodes expand while depth allows.
            if nd < depth || k == Kind::UseCase {
                q.push_back((nb, nd, np));
            }
        }
    }
    Ok(found)
}

/// QRY-007: constraints and behaviour an agent should know before touching the hinted code.
pub fn context(cache: &Cache, req: &ContextRequest) -> Result<ContextResponse, Error> {
    if req.hints.iter().all(|h| h.trim().is_empty()) {
        return Err(Error::EmptyHints);
    }
    if !(1..=3).contains(&req.depth) {
        return Err(Error::invalid(
            "INVALID_DEPTH",
            "depth must be between 1 and 3",
        ));
    }
    let snap = cache.snapshot()?;
    let Hints {
        mut resolved,
        seeds,
        named,
        ambiguous,
        mut warnings,
    } = resolve_hints(&snap, &req.hints, cache.repo_root())?;
    let focus = domain::Focus(domain::focus(&named));
    let kept = domain::in_focus(
        &snap,
        &mut resolved,
        seeds,
        &ambiguous,
        &focus,
        &mut warnings,
    )?;
    let found = discover(&snap, &kept, req.depth, &focus)?;
    let (constraints, behavior, total_tokens, dropped) = pack(&snap, &found, req.max_tokens)?;
    if dropped > 0 {
        warnings.push(format!(
            "Token budget of {} reached: {dropped} item(s) omitted",
            req.max_tokens
        ));
    }
    Ok(ContextResponse {
        total_items: constraints.len() + behavior.len(),
        constraints,
        behavior,
        resolved_entities: resolved,
        warnings,
        total_tokens,
    })
}

/// Constraints and behaviour items: constraints first, nearest first, cut at the token
/// budget; also the tokens used and how many items were dropped.
type Packed = (Vec<ContextItem>, Vec<ContextItem>, usize, usize);

fn pack(
    snap: &Snapshot<'_>,
    found: &BTreeMap<String, (u8, String)>,
    max_tokens: usize,
) -> Result<Packed, Error> {
    let mut items: Vec<(u8, u8, String, ContextItem)> = Vec::new();
    for (id, (d, path)) in found {
        let Some(rec) = snap.node(id)? else { continue };
        let k = rec.node.kind;
        let group = if is_constraint(k) {
            0
        } else if is_behavior(k) {
            1
        } else {
            continue;
        };
        items.push((
            group,
            *d,
            id.clone(),
            ContextItem {
                node_id: id.clone(),
                kind: k,
                title: rec.node.title.clone(),
                content: content_of(&rec),
                source_file: rec.node.source_file.clone(),
                reached_via: if *d == 0 && !path.contains(" -> ") {
                    format!("hint -> {id}")
                } else {
                    path.clone()
                },
            },
        ));
    }
    items.sort_by(|a, b| (a.0, a.1, &a.2).cmp(&(b.0, b.1, &b.2)));
    let mut constraints = Vec::new();
    let mut behavior = Vec::new();
    let mut total_tokens = 0;
    let mut dropped = 0;
    for (group, _, _, item) in items {
        let t = tokens(&item.content) + tokens(&item.node_id) + tokens(&item.reached_via) + 8;
        if total_tokens + t > max_tokens {
            dropped += 1;
            continue;
        }
        total_tokens += t;
        if group == 0 {
            constraints.push(item);
        } else {
            behavior.push(item);
        }
    }
    Ok((constraints, behavior, total_tokens, dropped))
}
