//! `kdd verify [--ref REF]`: exit 1 when the `.kdd-index/` committed at a revision does not
//! equal a fresh index of that revision's specs (for CI, a server, or before a release).
//! At an L2 manifest, nodes whose embeddable chunks have no committed vector are reported too
//! (`lacking_vectors`; vectors cannot be recomputed without the model, but their keys can).
//! Mismatches are reported whatever diagnostics the specs have (no false pass).

use crate::cli::{output, ExitStatus, GlobalArgs};
use std::collections::{BTreeMap, BTreeSet};

/// Arguments of `kdd verify`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Revision to check (default HEAD).
    #[arg(long = "ref", default_value = "HEAD")]
    pub rev: String,
    /// Check the staging area instead of a revision.
    #[arg(long, conflicts_with = "rev")]
    pub staged: bool,
    /// Also fail (exit 1) when a spec has an error and is in no index (a YAML error, a refused
    /// file name, a link…), not only when `.kdd-index/` disagrees with the specs.
    #[arg(long)]
    pub strict: bool,
}

/// Differences between the committed and the expected index.
#[derive(Debug, Default, serde::Serialize)]
pub struct Mismatch {
    pub missing: Vec<String>,
    pub extra: Vec<String>,
    pub different: Vec<String>,
    pub unreadable_specs: Vec<String>,
    /// Node ids (L2 manifest only) whose embeddable chunks lack vectors.
    pub lacking_vectors: Vec<String>,
    /// How many of `unreadable_specs` are errors (the rest are warnings).
    #[serde(skip)]
    pub spec_errors: usize,
}

impl Mismatch {
    /// True when the index matches.
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty()
            && self.extra.is_empty()
            && self.different.is_empty()
            && self.lacking_vectors.is_empty()
    }
}

/// Compare the index at `rev` (or the staging area) with its specs. Missing, different and extra
/// artifacts are always reported, whatever diagnostics the specs have: only the artifacts of a
/// spec that cannot be indexed at all (which the hook keeps) are neither missing nor extra.
/// Symbolic links named like specs are never read: they are reported as unreadable specs.
pub fn check(settings: &crate::config::Settings, rev: Option<&str>) -> anyhow::Result<Mismatch> {
    let repo = crate::git::open(&settings.repo_root)?;
    let (specs, arts, settings) = read_side(settings, &repo, rev)?;
    let settings = &settings;
    let (mut specs, links) = specs;
    specs.sort();
    specs.dedup_by(|a, b| a.0 == b.0);
    let manifest = arts
        .iter()
        .find(|(p, _)| p == &format!("{}/manifest.json", crate::artifact::INDEX_DIR))
        .map(|(_, b)| b.clone());
    let actual: BTreeMap<String, Vec<u8>> = arts
        .into_iter()
        .map(|(p, b)| (p[crate::artifact::INDEX_DIR.len() + 1..].to_string(), b))
        .collect();
    let audit = l2_model(manifest.as_deref()).map(|model| {
        let vectors = actual
            .iter()
            .filter(|(p, _)| p.starts_with("embeddings/"))
            .map(|(p, b)| (p.clone(), b.clone()))
            .collect();
        crate::index::l2::VectorAudit::new(&model, vectors)
    });
    let extras = audit
        .as_ref()
        .map(|a| a as &dyn crate::index::ArtifactExtras);
    // The claims the committed node files give their specs (read only if two specs make one).
    let holders = crate::index::Holders::new(|| {
        actual
            .iter()
            .filter(|(p, _)| p.starts_with("nodes/"))
            .filter_map(|(_, b)| serde_json::from_slice::<crate::spec::Node>(b).ok())
            .collect()
    });
    let derived =
        crate::index::derive_index(settings, &specs, manifest.as_deref(), &holders, extras);
    let expected = &derived.files;
    let roots = settings.roots();
    let ign = crate::roots::Ignores::from_lookup(&roots, |rel| {
        specs.iter().find(|(p, _)| p == rel).map(|(_, b)| b.clone())
    });
    let mut diags = derived.diagnostics.clone();
    diags.extend(crate::source::link_errors(links, |p| {
        roots.is_source(p) && !ign.ignores(p)
    }));
    diags.sort();
    let mut m = Mismatch {
        unreadable_specs: diags.iter().map(|d| d.to_string()).collect(),
        spec_errors: diags
            .iter()
            .filter(|d| d.severity == crate::spec::Severity::Error)
            .count(),
        lacking_vectors: audit.map(|a| a.lacking()).unwrap_or_default(),
        ..Mismatch::default()
    };
    for (p, b) in expected {
        match actual.get(p) {
            None => m.missing.push(p.clone()),
            Some(a) if a != b => m.different.push(p.clone()),
            _ => {}
        }
    }
    let kept = kept_artifacts(&actual, &derived.unreadable);
    // Vectors cannot be recomputed without the model: a vector file of a live node is fine,
    // one whose node is gone is extra.
    let live: std::collections::BTreeSet<&str> = expected
        .keys()
        .filter_map(|p| p.strip_prefix("nodes/")?.strip_suffix(".json"))
        .collect();
    for p in actual.keys() {
        // Vectors and agent enrichments (L3) of a live node are fine too.
        let live_vectors = p
            .strip_prefix("embeddings/")
            .or_else(|| p.strip_prefix("enrichments/"))
            .and_then(|r| r.rsplit_once('.'))
            .is_some_and(|(stem, _)| live.contains(stem));
        if !expected.contains_key(p) && !live_vectors && !kept.contains(p) {
            m.extra.push(p.clone());
        }
    }
    Ok(m)
}

/// Files as (path, bytes).
type Files = Vec<(String, Vec<u8>)>;
/// Spec files and the paths of symbolic links among them.
type Sources = (Files, Vec<String>);

/// Spec files (with the documents roots' files), their symbolic links and the index files at
/// `rev` (or in the staging area), and the settings with the documents roots the manifest
/// records when none are configured.
fn read_side(
    settings: &crate::config::Settings,
    repo: &gix::Repository,
    rev: Option<&str>,
) -> anyhow::Result<(Sources, Files, crate::config::Settings)> {
    use crate::git;
    // Committed artifacts are a teammate's input: one over the read cap is never inflated; it
    // reads as empty, so it differs from what the specs derive and is named as such.
    let capped = |entries: git::Entries| -> anyhow::Result<Files> {
        let max = crate::artifact::MAX_ARTIFACT_BYTES;
        entries
            .into_iter()
            .map(|(p, id)| Ok((p, git::read_blob_within(repo, id, max)?.unwrap_or_default())))
            .collect()
    };
    let (specs, links, arts) = match rev {
        Some(r) => (
            git::read_tree_files(repo, r, &settings.specs_root)?,
            git::tree_entries_and_links(repo, r, &settings.specs_root)?.1,
            capped(git::tree_entries(repo, r, crate::artifact::INDEX_DIR)?)?,
        ),
        None => {
            let idx = git::load_index(repo)?;
            let read = |prefix: &str| -> anyhow::Result<Files> {
                git::index_entries(&idx, prefix)
                    .into_iter()
                    .map(|(p, id)| Ok((p, git::read_blob(repo, id)?)))
                    .collect()
            };
            (
                read(&settings.specs_root)?,
                git::index_links(&idx, &settings.specs_root),
                capped(git::index_entries(&idx, crate::artifact::INDEX_DIR))?,
            )
        }
    };
    let manifest = arts
        .iter()
        .find(|(p, _)| p == &format!("{}/manifest.json", crate::artifact::INDEX_DIR))
        .map(|(_, b)| b.as_slice());
    // Documents roots: configured, else those the manifest records; their files join the specs.
    let mut settings = settings.clone();
    if settings.docs_roots.is_empty() {
        settings.docs_roots = manifest
            .and_then(|b| serde_json::from_slice::<crate::artifact::Manifest>(b).ok())
            .map(|m| m.docs)
            .unwrap_or_default();
    }
    let (mut specs, mut links) = (specs, links);
    for d in &settings.docs_roots {
        let (entries, l) = match rev {
            Some(r) => git::roots::tree_root_entries(repo, r, d)?,
            None => git::roots::index_root_entries(&git::load_index(repo)?, d),
        };
        for (p, id) in entries {
            specs.push((p, git::read_blob(repo, id)?));
        }
        links.extend(l);
    }
    Ok(((specs, links), arts, settings))
}

/// The embedding model of an L2 manifest.
fn l2_model(manifest: Option<&[u8]>) -> Option<String> {
    let m: crate::artifact::Manifest = serde_json::from_slice(manifest?).ok()?;
    if m.index_level < crate::artifact::IndexLevel::L2 {
        return None;
    }
    m.embedding.map(|e| e.model)
}

/// Artifact paths of the committed nodes whose spec cannot be indexed (kept by the hook).
fn kept_artifacts(
    actual: &BTreeMap<String, Vec<u8>>,
    unreadable: &BTreeSet<String>,
) -> BTreeSet<String> {
    use crate::artifact::ArtifactPaths;
    let mut kept = BTreeSet::new();
    for (p, b) in actual {
        if !p.starts_with("nodes/") {
            continue;
        }
        let Ok(n) = serde_json::from_slice::<crate::spec::Node>(b) else {
            continue;
        };
        if unreadable.contains(&n.source_file) {
            kept.insert(p.clone());
            kept.insert(ArtifactPaths::edges_rel(&n));
            kept.insert(ArtifactPaths::embeddings_rel(&n));
            kept.insert(ArtifactPaths::enrichment_rel(&n));
        }
    }
    kept
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    let settings = global.settings()?;
    if !args.staged {
        let commit = format!("{}^{{commit}}", args.rev);
        if crate::git::git(
            &settings.repo_root,
            &["rev-parse", "-q", "--verify", &commit],
        )
        .is_err()
        {
            let unborn = crate::git::git(
                &settings.repo_root,
                &["rev-parse", "-q", "--verify", "HEAD"],
            )
            .is_err();
            if unborn && args.rev == "HEAD" {
                anyhow::bail!(
                    "this repository has no commits yet, so there is no committed index to \
                     verify; commit your specs and .kdd-index/ first (`kdd verify --staged` \
                     checks the staging area)"
                );
            }
            anyhow::bail!("unknown revision `{}`: not a commit here", args.rev);
        }
    }
    let m = check(&settings, (!args.staged).then_some(args.rev.as_str()))?;
    if global.json {
        output::json(&m)?;
    } else {
        for (label, list) in [
            ("missing", &m.missing),
            ("extra", &m.extra),
            ("different", &m.different),
        ] {
            for p in list {
                output::data(&format!("{label}\t.kdd-index/{p}"))?;
            }
        }
        for id in &m.lacking_vectors {
            output::data(&format!("no-vectors\t{id}"))?;
        }
        // Each already names its severity ("error: <file>: …"), like `kdd resolve` prints them.
        for d in &m.unreadable_specs {
            output::info(&format!("kdd: {d}"));
        }
    }
    let errors = m.spec_errors;
    if m.is_empty() && errors > 0 {
        let n = errors;
        if args.strict {
            output::error(&format!(
                "verify: .kdd-index/ matches the specs, but specs with errors ({n}, named above) \
                 are in no index; fix them and run `kdd index`"
            ));
            return Ok(ExitStatus::Failure);
        }
        output::info(&format!(
            "kdd verify: .kdd-index/ matches the specs; specs with errors ({n}, named above) \
             are in no index (`--strict` fails on them)"
        ));
        Ok(ExitStatus::Success)
    } else if m.is_empty() {
        output::info("kdd verify: .kdd-index/ matches the specs");
        Ok(ExitStatus::Success)
    } else {
        output::error(&format!(
            "verify: .kdd-index/ does not match the specs; {} and commit",
            repair_advice(&settings)
        ));
        Ok(ExitStatus::Failure)
    }
}

/// How to bring the index in line: `kdd resolve` (or `kdd index`), or first
/// [`sparse_index_advice`].
fn repair_advice(settings: &crate::config::Settings) -> &'static str {
    sparse_index_advice(settings).unwrap_or("run `kdd resolve` (or `kdd index`)")
}

/// When a sparse index folds specs away, `kdd resolve` and `kdd index` refuse: list every spec
/// again first.
pub fn sparse_index_advice(settings: &crate::config::Settings) -> Option<&'static str> {
    crate::git::roots::LeftOut::read(&settings.repo_root)
        .folds(&settings.roots())
        .then_some(
            "the staging area is a sparse index that folds specs away: run `git sparse-checkout \
             init --no-sparse-index` (the sparse checkout stays), then `kdd resolve`",
        )
}
