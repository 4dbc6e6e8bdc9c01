//! One `kdd enrich` run over a list of specs: resolve each, skip the ones already enriched for
//! their current bytes by this agent, build the request, run the agent, validate, write.
//!
//! At L2 the summary is also embedded with the index's model (loaded once, on the first
//! enriched spec), so semantic search finds it; without a model it stays lexical, with a warning.
//!
//! Invariants: specs are handled one at a time, in order; each ends as one [`Outcome`]
//! (`enriched`, `skipped` or `failed` with its CMD-003 code), reported as soon as it is known;
//! nothing a spec does stops the next one. Only `.kdd-index/enrichments/` is written.

use super::{agent_id, run_agent, validate, Error, Neighbour, Request, SpecPart, INSTRUCTIONS};
use crate::artifact::enrichment::{self, Enrichment, SummaryVector};
use crate::artifact::{write_artifact, ArtifactPaths};
use crate::cache::{Cache, NodeRecord, Snapshot};
use crate::config::Settings;
use serde::Serialize;
use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

/// Options of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Node ids, short ids, stems or paths; empty = every spec.
    pub specs: Vec<String>,
    /// The command (else `git config kdd.agent`).
    pub agent: Option<String>,
    pub timeout: Duration,
    /// Re-run specs already enriched for their current bytes by this agent.
    pub force: bool,
}

/// How one spec ended.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The node id (or the argument, when it named no node).
    pub id: String,
    /// `enriched`, `skipped` or `failed`.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Repo-relative enrichment file written (or already current).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Agent id (`program@hash`; the command itself is never recorded).
    pub agent: String,
    pub enriched: usize,
    pub skipped: usize,
    pub failed: usize,
    pub results: Vec<Outcome>,
}

/// Run the agent over the chosen specs; `on_done` sees each outcome as soon as it is known.
/// `Err` only for what stops every spec alike (no agent configured).
pub fn enrich(
    settings: &Settings,
    cache: &Cache,
    opts: &Options,
    on_done: &mut dyn FnMut(&Outcome),
) -> Result<Report, Error> {
    let command = opts
        .agent
        .clone()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| settings.git_config("kdd.agent"))
        .ok_or(Error::NotConfigured)?;
    let agent = agent_id(&command);
    // Earlier agent edges are neither sent as neighbours nor trusted as context.
    cache.set_agent_edges(false);
    let snap = cache
        .snapshot()
        .map_err(|e| Error::Agent(format!("query cache: {e}")))?;
    let all = snap
        .node_ids()
        .map_err(|e| Error::Agent(format!("query cache: {e}")))?;
    let known: HashSet<String> = all.iter().cloned().collect();
    let targets: Vec<Result<String, (String, Error)>> = if opts.specs.is_empty() {
        all.iter().cloned().map(Ok).collect()
    } else {
        opts.specs
            .iter()
            .map(|a| {
                crate::query::resolve_node(&snap, a)
                    .map(|(id, _)| id)
                    .map_err(|_| (a.clone(), Error::NodeNotFound(a.clone())))
            })
            .collect()
    };
    let mut report = Report {
        agent: agent.clone(),
        enriched: 0,
        skipped: 0,
        failed: 0,
        results: Vec::new(),
    };
    let mut done = BTreeSet::new();
    let mut run = Run {
        settings,
        snap: &snap,
        command: &command,
        agent: &agent,
        known: &known,
        opts,
        embedder: None,
    };
    for t in targets {
        let (id, res) = match t {
            Ok(id) if !done.insert(id.clone()) => continue,
            Ok(id) => {
                let r = run.one(&id);
                (id, r)
            }
            Err((arg, e)) => (arg, Err(e)),
        };
        let out = match res {
            Ok((status, file, warnings)) => Outcome {
                id,
                status,
                code: None,
                message: None,
                file: Some(file),
                warnings,
            },
            Err(e) => Outcome {
                id,
                status: "failed",
                code: Some(e.code()),
                message: Some(e.to_string()),
                file: None,
                warnings: Vec::new(),
            },
        };
        match out.status {
            "enriched" => report.enriched += 1,
            "skipped" => report.skipped += 1,
            _ => report.failed += 1,
        }
        on_done(&out);
        report.results.push(out);
    }
    Ok(report)
}

type Done = (&'static str, String, Vec<String>);

/// What every spec of a run shares.
struct Run<'a> {
    settings: &'a Settings,
    snap: &'a Snapshot<'a>,
    command: &'a str,
    agent: &'a str,
    known: &'a HashSet<String>,
    opts: &'a Options,
    /// Opened on the first summary to embed (L2 only): the embedder, or why there is none.
    embedder: Option<Result<Box<dyn crate::embed::Embedder + Send>, String>>,
}

impl Run<'_> {
    fn one(&mut self, id: &str) -> Result<Done, Error> {
        let (settings, snap) = (self.settings, self.snap);
        let cache_err = |e: crate::cache::Error| Error::Agent(format!("query cache: {e}"));
        let rec = snap
            .node(id)
            .map_err(cache_err)?
            .ok_or_else(|| Error::NodeNotFound(id.to_string()))?;
        let bytes = crate::source::read_spec(
            &settings.repo_root,
            &rec.node.source_file,
            &settings.specs_root,
        )
        .map_err(|e| Error::DocumentNotFound {
            id: id.to_string(),
            why: e.to_string(),
        })?;
        let hash = crate::spec::content_hash(&bytes);
        let paths = ArtifactPaths::new(&settings.index_dir);
        let rel = ArtifactPaths::enrichment_rel(&rec.node);
        let shown = format!("{}/{rel}", crate::artifact::INDEX_DIR);
        let mut warnings = Vec::new();
        if !crate::spec::same_content(&hash, &rec.node.source_hash) {
            warnings.push(format!(
                "{} changed since it was indexed; the enrichment is used once the index is \
                 updated (commit, or run `kdd index`)",
                rec.node.source_file
            ));
        }
        if !self.opts.force {
            let existing = crate::artifact::read_artifact(&paths.abs(&rel))
                .ok()
                .and_then(|b| enrichment::parse(&b).ok());
            let current = existing.is_some_and(|e| {
                e.entries.iter().any(|x| {
                    crate::spec::same_content(&x.spec_hash, &hash) && x.agent == self.agent
                })
            });
            if current {
                return Ok(("skipped", shown, warnings));
            }
        }
        let request = request(snap, &rec, &bytes, &hash).map_err(cache_err)?;
        let body = serde_json::to_vec(&request).expect("request serialises");
        let stdout = run_agent(self.command, &settings.repo_root, &body, self.opts.timeout)?;
        let (answer, dropped) = validate(&stdout, id, self.known)?;
        warnings.extend(dropped);
        let mut entry = answer.entry(&hash, self.agent);
        match self.embed(&entry.summary) {
            Ok(v) => entry.vector = v,
            Err(why) => warnings.push(format!("summary not embedded (lexical only): {why}")),
        }
        let file = Enrichment::single(id, entry);
        write_artifact(&paths, &rel, &enrichment::render(&file))?;
        Ok(("enriched", shown, warnings))
    }

    /// The summary's vector with the index's model (L2 indexes only; `Ok(None)` at L1).
    fn embed(&mut self, summary: &str) -> Result<Option<SummaryVector>, String> {
        let Some(model) = self.snap.cache.manifest().embedding.clone() else {
            return Ok(None);
        };
        if self.snap.cache.level() < crate::artifact::IndexLevel::L2 {
            return Ok(None);
        }
        let e = self
            .embedder
            .get_or_insert_with(|| crate::embed::open().map_err(|e| e.to_string()))
            .as_mut()
            .map_err(|e| e.clone())?;
        if e.model_id() != model.model {
            return Err(format!(
                "the embedder is `{}`, the index uses `{}`",
                e.model_id(),
                model.model
            ));
        }
        let v = e
            .embed_passages(&[summary.to_string()])
            .map_err(|e| e.to_string())?
            .pop()
            .ok_or("the embedder returned no vector")?;
        let r = crate::embed::store::Record::quantize([0; crate::embed::store::KEY_LEN], &v);
        Ok(Some(SummaryVector {
            model: model.model,
            scale: r.scale,
            q: r.q,
        }))
    }
}

/// The request for one spec: identity, text (capped) and 1-hop spec-edge neighbours.
fn request(
    snap: &Snapshot<'_>,
    rec: &NodeRecord,
    bytes: &[u8],
    hash: &str,
) -> Result<Request, crate::cache::Error> {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    if text.len() > super::MAX_TEXT {
        let mut cut = super::MAX_TEXT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    let n = &rec.node;
    let mut neighbours = Vec::new();
    let mut seen = BTreeSet::new();
    let out = snap
        .out_edges(&n.id)?
        .into_iter()
        .map(|e| (e.to, e.edge_type, "out"));
    let inc = snap
        .in_edges(&n.id)?
        .into_iter()
        .map(|e| (e.from, e.edge_type, "in"));
    for (other, edge_type, direction) in out.chain(inc) {
        if other == n.id || !seen.insert((other.clone(), edge_type.clone(), direction)) {
            continue;
        }
        let Some(l) = snap.lite(&other)? else {
            continue;
        };
        neighbours.push(Neighbour {
            id: other,
            kind: l.node.kind.as_str().to_string(),
            title: l.node.title,
            edge_type,
            direction,
        });
    }
    Ok(Request {
        kdd_enrich: 1,
        instructions: INSTRUCTIONS,
        spec: SpecPart {
            id: n.id.clone(),
            kind: n.kind.as_str().to_string(),
            title: n.title.clone(),
            layer: n.layer.as_str().to_string(),
            domain: n.domain.clone(),
            source_file: n.source_file.clone(),
            spec_hash: hash.to_string(),
            text,
        },
        neighbours,
    })
}
