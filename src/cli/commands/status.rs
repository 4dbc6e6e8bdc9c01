//! `kdd status`: what the committed index says and how it compares with the work tree.
//!
//! Counts per kind and edge type, orphan links, layer violations, duplicate ids, spec files
//! that could not be indexed (with the reason), and stale nodes (spec changed or gone since it
//! was indexed) or unindexed specs. Human text on stdout, or `--json`. Exit 0 when the index
//! is present (even with findings), 2 when there is no index.

use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::graph::{Duplicate, Edge, Graph, Orphan};
use crate::spec::{Diagnostic, Severity};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Arguments of `kdd status`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: super::at_ref::RefArg,
    /// How many items of each list to print in text mode (0 = all).
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
}

/// A node whose spec no longer matches.
#[derive(Debug, Clone, Serialize)]
pub struct Stale {
    pub id: String,
    pub source_file: String,
    /// `changed` or `missing`.
    pub reason: &'static str,
}

/// The JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub specs_root: String,
    /// Documents roots indexed besides the specs (`kdd.docs`; omitted when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub docs_roots: Vec<String>,
    /// Spec and document files found.
    pub spec_files: usize,
    pub nodes: usize,
    pub edges: usize,
    pub kinds: BTreeMap<String, usize>,
    pub edge_types: BTreeMap<String, usize>,
    pub orphans: Vec<Orphan>,
    pub layer_violations: Vec<ViolationRow>,
    pub duplicates: Vec<Duplicate>,
    /// Spec files with an error (not indexed) and why.
    pub files_with_errors: Vec<Diagnostic>,
    pub stale: Vec<Stale>,
    /// Spec files in the work tree that have no node in the index (new, or failed).
    pub unindexed: Vec<String>,
    /// Artifact files that could not be read.
    pub corrupt: Vec<String>,
}

/// One layer violation with the layers spelled out.
#[derive(Debug, Clone, Serialize)]
pub struct ViolationRow {
    #[serde(flatten)]
    pub edge: Edge,
    pub from_layer: String,
    pub to_layer: String,
}

/// Build the report (also used by tests and other commands).
pub fn report(settings: &crate::config::Settings) -> anyhow::Result<Report> {
    let manifest = settings.index_dir.join("manifest.json");
    let nodes_dir = settings.index_dir.join("nodes");
    let manifest_rel = format!("{}/manifest.json", crate::artifact::INDEX_DIR);
    if !manifest.exists()
        && crate::git::roots::LeftOut::read(&settings.repo_root).holds(&manifest_rel)
    {
        anyhow::bail!(
            "{}: left out of this sparse checkout; `git sparse-checkout add {}` brings it back, \
             or read the committed index with `--ref HEAD`",
            settings.index_dir.display(),
            crate::artifact::INDEX_DIR
        );
    }
    if !manifest.exists() && !nodes_dir.exists() {
        anyhow::bail!(
            "{}: no kdd index here yet; run `kdd index` first",
            settings.index_dir.display()
        );
    }
    let (graph, errors) = Graph::load(&settings.index_dir)?;
    let (files, walk_diags) = if settings.bare {
        (Vec::new(), Vec::new())
    } else {
        crate::index::list_specs(settings).unwrap_or_default()
    };
    let mut files_with_errors = walk_diags;
    let mut duplicates = graph.duplicates.clone();
    let (stale, unindexed) = if settings.bare {
        (Vec::new(), Vec::new())
    } else {
        (
            stale_nodes(settings, &graph),
            unindexed_files(
                settings,
                &graph,
                &files,
                &mut files_with_errors,
                &mut duplicates,
            ),
        )
    };
    let layer_violations = graph
        .violations()
        .map(|e| ViolationRow {
            from_layer: graph.nodes[e.from_idx as usize].layer.to_string(),
            to_layer: graph.nodes[e.to_idx as usize].layer.to_string(),
            edge: e.clone(),
        })
        .collect();
    Ok(Report {
        specs_root: settings.specs_root.clone(),
        docs_roots: settings.docs_roots.clone(),
        spec_files: files.len(),
        nodes: graph.nodes.len(),
        edges: graph.edges.len(),
        kinds: graph
            .kind_counts()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        edge_types: graph.edge_type_counts(),
        orphans: graph.orphans.clone(),
        layer_violations,
        duplicates,
        files_with_errors,
        stale,
        unindexed,
        corrupt: crate::artifact::read_manifest(&manifest)
            .err()
            .map(|e| format!("{e} (queries refuse the index until then)"))
            .into_iter()
            .chain(errors.iter().map(|e| e.to_string()))
            .chain(unreadable_vectors(settings, &graph))
            .collect(),
    })
}

/// Vector files that exist but do not decode (a missing file is `verify`'s concern: specs
/// without embeddable prose have none at L1 and L2 alike).
fn unreadable_vectors(settings: &crate::config::Settings, graph: &Graph) -> Vec<String> {
    let paths = crate::artifact::ArtifactPaths::new(&settings.index_dir);
    let mut out = Vec::new();
    for n in &graph.nodes {
        let path = paths.abs(&crate::artifact::ArtifactPaths::embeddings_rel(n));
        match crate::artifact::read_artifact(&path) {
            Ok(bytes) => {
                if let Err(e) = crate::embed::decode(&path.display().to_string(), &bytes) {
                    out.push(e.to_string());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => out.push(format!("{}: {e}", path.display())),
        }
    }
    out
}

/// Indexed specs whose file changed, is missing or cannot be read.
fn stale_nodes(settings: &crate::config::Settings, graph: &Graph) -> Vec<Stale> {
    let roots = settings.roots();
    let mut stale = Vec::new();
    let left_out = std::cell::OnceCell::new();
    for n in &graph.nodes {
        match crate::roots::read_source(&settings.repo_root, &n.source_file, &roots) {
            Ok(b) => {
                if !crate::spec::same_content(&crate::spec::content_hash(&b), &n.source_hash) {
                    stale.push(Stale {
                        id: n.id.clone(),
                        source_file: n.source_file.clone(),
                        reason: "changed",
                    });
                }
            }
            Err(e) => stale.push(Stale {
                id: crate::source::printable(&n.id),
                source_file: crate::source::printable(&n.source_file),
                reason: match e {
                    crate::source::Error::BadPath { .. } => "invalid source_file",
                    crate::source::Error::Io { .. }
                        if left_out
                            .get_or_init(|| crate::git::roots::LeftOut::read(&settings.repo_root))
                            .holds(&n.source_file) =>
                    {
                        "not checked out (sparse checkout; the index keeps it)"
                    }
                    crate::source::Error::Io { .. } => "missing",
                    _ => "unreadable",
                },
            }),
        }
    }
    stale
}

/// Spec files no node comes from; those that cannot be indexed join `files_with_errors`, and
/// those whose id another file holds also join `duplicates` (as dropped beside the holder).
fn unindexed_files(
    settings: &crate::config::Settings,
    graph: &Graph,
    files: &[String],
    files_with_errors: &mut Vec<Diagnostic>,
    duplicates: &mut Vec<Duplicate>,
) -> Vec<String> {
    let roots = settings.roots();
    let by_file: HashMap<&str, &crate::spec::Node> = graph
        .nodes
        .iter()
        .map(|n| (n.source_file.as_str(), n))
        .collect();
    let mut unindexed = Vec::new();
    for f in files {
        if by_file.contains_key(f.as_str()) {
            continue;
        }
        unindexed.push(f.clone());
        let extracted = crate::roots::read_source(&settings.repo_root, f, &roots)
            .map_err(|e| e.diagnostic())
            .and_then(|bytes| crate::extract::extract(f, &bytes, &settings.specs_root));
        match extracted {
            Err(d) => files_with_errors.push(d),
            Ok(ex) => {
                if let Some(holder) = graph.node(&ex.node.id) {
                    files_with_errors.push(Diagnostic {
                        severity: Severity::Error,
                        file: f.clone(),
                        line: None,
                        message: format!(
                            "duplicate id `{}` (also in {})",
                            ex.node.id, holder.source_file
                        ),
                    });
                    match duplicates.iter_mut().find(|d| d.id == ex.node.id) {
                        Some(d) => d.dropped.push(f.clone()),
                        None => duplicates.push(Duplicate {
                            id: ex.node.id.clone(),
                            kept: holder.source_file.clone(),
                            dropped: vec![f.clone()],
                        }),
                    }
                }
            }
        }
    }
    unindexed
}

fn section<T>(out: &mut String, title: &str, items: &[T], limit: usize, f: impl Fn(&T) -> String) {
    out.push_str(&format!("{title}: {}\n", items.len()));
    let n = if limit == 0 {
        items.len()
    } else {
        limit.min(items.len())
    };
    for i in &items[..n] {
        // One item, one line: a committed file name cannot split it or drive the terminal.
        out.push_str("  ");
        out.push_str(&crate::spec::escape_control(&f(i)));
        out.push('\n');
    }
    if n < items.len() {
        out.push_str(&format!(
            "  … {} more (--limit 0 for all, or --json)\n",
            items.len() - n
        ));
    }
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    let (settings, mirror) = match super::at_ref::settings(global, args.at.get())? {
        (s, Some(m)) => (s, Some(m)),
        (s, None) => (crate::index::with_manifest_specs_root(s), None),
    };
    let mut r = report(&settings)?;
    if let Some(m) = mirror {
        // The tree read holds paths the mirror leaves out (links, files inside files).
        r.files_with_errors.extend(m.left_out()?);
    }
    if global.json {
        output::json(&r)?;
        return Ok(ExitStatus::Success);
    }
    let mut out = String::new();
    let docs = match r.docs_roots.is_empty() {
        true => String::new(),
        false => format!(" + documents: {}", r.docs_roots.join(", ")),
    };
    out.push_str(&format!(
        "specs root: {}{docs} ({} files)\nnodes: {}   edges: {}\n",
        r.specs_root, r.spec_files, r.nodes, r.edges
    ));
    let kinds: Vec<String> = r.kinds.iter().map(|(k, v)| format!("{k} {v}")).collect();
    out.push_str(&format!("kinds: {}\n", kinds.join(", ")));
    let types: Vec<String> = r
        .edge_types
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    out.push_str(&format!("edge types: {}\n", types.join(", ")));
    let lim = args.limit;
    section(&mut out, "orphan links", &r.orphans, lim, |o| {
        let d = o
            .domain
            .as_deref()
            .map(|d| format!("{d}::"))
            .unwrap_or_default();
        format!("{}: [[{d}{}]] ({})", o.source_file, o.to, o.edge_type)
    });
    section(
        &mut out,
        "layer violations",
        &r.layer_violations,
        lim,
        |v| {
            format!(
                "{} ({}) -> {} ({}) [{}]",
                v.edge.from, v.from_layer, v.edge.to, v.to_layer, v.edge.edge_type
            )
        },
    );
    section(&mut out, "duplicate ids", &r.duplicates, lim, |d| {
        format!(
            "{}: kept {}, dropped {}",
            d.id,
            d.kept,
            d.dropped.join(", ")
        )
    });
    section(
        &mut out,
        "files with errors",
        &r.files_with_errors,
        lim,
        |d| d.to_string(),
    );
    section(&mut out, "stale nodes", &r.stale, lim, |s| {
        format!("{} ({}): {}", s.id, s.source_file, s.reason)
    });
    section(&mut out, "unindexed spec files", &r.unindexed, lim, |s| {
        s.clone()
    });
    if !r.corrupt.is_empty() {
        section(&mut out, "unreadable artifacts", &r.corrupt, lim, |s| {
            s.clone()
        });
    }
    let sparse = |s: &&Stale| s.reason.starts_with("not checked out");
    if r.stale.iter().any(|s| !sparse(&s)) || !r.unindexed.is_empty() {
        let advice = super::verify::sparse_index_advice(&settings).unwrap_or("run `kdd index`");
        out.push_str(&format!("{advice} to bring the index up to date\n"));
    }
    output::data(&out)?;
    Ok(ExitStatus::Success)
}
