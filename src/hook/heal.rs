//! The heal pass as named steps (see the module doc of `hook`): [`heal`] reads like the list.
//!
//! 1. [`Stamp`]: the staged specs and index are exactly what the last pass left consistent →
//!    nothing to read (the fastest path).
//! 2. [`Staged::read`]: the staged specs (documents roots and `.kddignore` honoured), the staged
//!    `.kdd-index/` entries, conflicts, the staged `_kdd.yaml` and manifest.
//! 3. [`Claims::check`]: specs whose blob and artifacts the verification record vouches for;
//!    everything else is to do. Nothing to do and the manifest current → fast path.
//! 4. [`owners_of_unclaimed`]: the unclaimed node files name the spec they belong to.
//! 5. [`Plan::rederive`]: re-derive every spec to do from its staged blob through the pure
//!    `index` core ([`crate::index::derive_spec`]); duplicate ids are settled by
//!    [`crate::index::takes_id`] (the spec `HEAD`'s node file names keeps its id: what is
//!    committed decides, not a node file staged beside the newcomer).
//! 6. [`Plan::stale`]: every staged or conflicted artifact nobody owns goes.
//! 7. [`Plan::write`], [`Plan::manifest`], [`Plan::remove`]: the work tree, then staging and
//!    the stamp ([`finish`]).
//!
//! Invariants: the work tree's specs are never read (staged blobs only); only paths under
//! `.kdd-index/` are written, removed or staged; one bad spec is a diagnostic and keeps its
//! previous artifacts.

use super::holder;
use super::state::{Stamp, State};
use super::{art_key, lock, remove_file, stem_of, Error, Options, Report};
use crate::artifact::{write_artifact, ArtifactPaths, INDEX_DIR};
use crate::config::Settings;
use crate::git::{self, Entries};
use crate::index::l2::Level;
use crate::index::ArtifactExtras;
use crate::spec::{Diagnostic, Node};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Make `.kdd-index/` in the index git is committing agree with the staged specs (see `hook`).
pub fn heal(settings: &Settings, opts: Options) -> Result<Report, Error> {
    let repo = git::open(&settings.repo_root)?;
    // One heal at a time per work tree; released when the file is dropped.
    let _lock = lock(repo.git_dir());
    let index = git::load_index(&repo)?;
    let settings = &crate::index::with_manifest_specs_root(settings.clone());
    let stamp = Stamp::new(&repo, settings);
    if stamp.matches(&index) {
        return Ok(fast_path(Report::default()));
    }
    if let Some(link) = git::staged_root_link(&index, &settings.specs_root) {
        // A linked specs root is never followed; nothing is re-derived or removed.
        let diagnostics = crate::source::link_errors(vec![link], |_| true);
        return Ok(Report {
            diagnostics,
            ..Report::default()
        });
    }
    super::refuse_a_sparse_index(&index, &settings.roots())?;
    // The whole folder left out (its manifest), or some of its files (a sparse pattern under it).
    let whole = git::sparse::skips_worktree(&index, &art_key("manifest.json"));
    let left_out = |rel: &String| whole || git::sparse::skips_worktree(&index, &art_key(rel));
    let staged = Staged::read(&repo, &index, settings)?;
    let no_spec = staged.specs.is_empty() && staged.conflicted_specs.is_empty();
    super::refuse_an_empty_root(&repo, &index, settings, no_spec, staged.arts.keys())?;
    let mut report = staged.report();
    let mut state = State::load(settings);
    let mut claims = Claims::check(&staged, &state);
    if claims.nothing_to_do(&staged) && staged.manifest_current(&repo, settings, None) {
        if staged.link_errors.is_empty() {
            stamp.record(&index);
        }
        return Ok(fast_path(report));
    }
    // Something to do: open the L2 step now (never on the fast path).
    let level = opts.embed.then(crate::index::l2::for_index);
    if let Some(Level::L1(_, why)) = &level {
        report.warnings.push(why.clone());
    }
    let extras = level.as_ref().map(|l| l.extras());
    let owners = owners_of_unclaimed(&repo, &staged, &claims.unclaimed)?;
    let mut plan = Plan::new(&staged, &mut claims);
    let ctx = Ctx {
        settings,
        repo: &repo,
        staged: &staged,
        owners: &owners,
        extras,
    };
    plan.rederive(&ctx, claims, &mut state, &mut report)?;
    state.specs.retain(|p, _| staged.specs.contains_key(p));
    let remove = plan.stale(&staged);
    let paths = ArtifactPaths::new(&settings.index_dir);
    let mut stage = plan.write(&ctx, &paths, &mut report)?;
    super::l2_failures(level.as_ref(), &mut report);
    let manifest = plan.manifest(&ctx, &paths, &mut report)?;
    stage.extend(manifest.clone());
    stage.extend(Plan::remove(&remove, &paths, &mut report)?);
    if opts.stage && !settings.bare {
        finish(&repo, settings, &stage, &report, &stamp)?;
        let manifest = manifest.filter(|k| report.written.contains(k));
        let written = plan.write.keys().cloned();
        let written = written.chain(manifest.map(|_| "manifest.json".to_string()));
        super::leave_out(&repo, settings, &paths, written.filter(left_out).collect())?;
    }
    // Something was re-derived or removed: the record changed (an identical file is not
    // rewritten). No clone-and-compare of the whole record: that cost more than the save.
    state.save(settings);
    Ok(report)
}

fn fast_path(report: Report) -> Report {
    Report {
        fast_path: true,
        ..report
    }
}

/// Step 2: what the staged tree holds.
pub(super) struct Staged {
    /// Wanted spec and document paths → staged blob.
    pub specs: Entries,
    /// Staged `.kdd-index/…` entries (repo-relative keys).
    pub arts: Entries,
    pub conflicted_specs: BTreeSet<String>,
    /// Conflicted `.kdd-index/…` paths (repo-relative).
    pub conflicted_arts: BTreeSet<String>,
    /// Staged links named like specs: never read, one error each.
    pub link_errors: Vec<Diagnostic>,
    pub kdd_yaml: Option<Vec<u8>>,
    /// The staged manifest's bytes.
    pub manifest: Option<Vec<u8>>,
}

impl Staged {
    /// Read the staged entries of every root (the staged `.kddignore` files exclude exactly
    /// what `kdd index` excludes in the work tree) and of `.kdd-index/`.
    fn read(
        repo: &gix::Repository,
        index: &gix::index::File,
        settings: &Settings,
    ) -> Result<Staged, Error> {
        let roots = settings.roots();
        let (staged_root, staged_links, conflicted) = git::roots::staged(index, &roots);
        let yaml_path = crate::index::kdd_yaml_path(&settings.specs_root);
        let kdd_yaml_id = staged_root.get(&yaml_path).copied();
        let ign = git::roots::ignores_of(repo, &staged_root, &roots)?;
        let wanted = |p: &String| roots.is_source(p) && !ign.ignores(p);
        let specs: Entries = staged_root.into_iter().filter(|(p, _)| wanted(p)).collect();
        let arts = git::index_entries(index, INDEX_DIR);
        let blob = |id: Option<&gix::ObjectId>| id.map(|id| git::read_blob(repo, *id)).transpose();
        Ok(Staged {
            manifest: blob(arts.get(&art_key("manifest.json")))?,
            kdd_yaml: blob(kdd_yaml_id.as_ref())?,
            specs,
            arts,
            conflicted_specs: conflicted.into_iter().filter(wanted).collect(),
            conflicted_arts: git::conflicted_paths(index, INDEX_DIR),
            link_errors: crate::source::link_errors(staged_links, wanted),
        })
    }

    /// The report before anything is done.
    fn report(&self) -> Report {
        Report {
            specs: self.specs.len(),
            conflicted_specs: self.conflicted_specs.iter().cloned().collect(),
            diagnostics: self.link_errors.clone(),
            ..Report::default()
        }
    }

    /// The manifest the indexed spec paths call for (None: no spec and no manifest).
    fn expected_manifest<'a>(
        &self,
        settings: &Settings,
        indexed: impl Iterator<Item = &'a str>,
        extras: Option<&dyn ArtifactExtras>,
    ) -> Option<Vec<u8>> {
        let paths: Vec<&str> = indexed.collect();
        (!paths.is_empty() || self.manifest.is_some()).then(|| {
            crate::index::derive_manifest(
                settings,
                paths.into_iter(),
                self.kdd_yaml.as_deref(),
                self.manifest.as_deref(),
                extras,
            )
        })
    }

    /// True when the staged manifest is the one every staged spec calls for.
    fn manifest_current(
        &self,
        repo: &gix::Repository,
        settings: &Settings,
        extras: Option<&dyn ArtifactExtras>,
    ) -> bool {
        let m = self.expected_manifest(settings, self.specs.keys().map(String::as_str), extras);
        m.as_ref().map(|b| git::blob_id(repo, b))
            == self.arts.get(&art_key("manifest.json")).copied()
    }
}

/// Step 3: what the verification record vouches for.
pub(super) struct Claims {
    /// Index-relative artifact paths of vouched specs.
    pub claimed: HashSet<String>,
    /// Node file (index-relative) → the spec path that owns it.
    pub owner: BTreeMap<String, String>,
    /// Specs to re-derive, in path order.
    pub todo: Vec<String>,
    /// Staged artifact keys (repo-relative) no vouched spec owns (manifest excluded).
    pub unclaimed: Vec<String>,
}

impl Claims {
    /// Linear in the staged entries: the staged specs and the record are both sorted by path
    /// (one merge walk, no lookup per spec), staged artifacts are looked up in a hash view and
    /// the claimed set is hashed (at 10k specs the ordered lookups on long shared path prefixes
    /// were a fifth of a one-spec pre-commit).
    fn check(staged: &Staged, state: &State) -> Claims {
        let mut c = Claims {
            claimed: HashSet::new(),
            owner: BTreeMap::new(),
            todo: Vec::new(),
            unclaimed: Vec::new(),
        };
        let arts: HashMap<&str, &gix::ObjectId> = staged
            .arts
            .iter()
            .map(|(k, id)| (&k[INDEX_DIR.len() + 1..], id))
            .collect();
        let mut record = state.specs.iter().peekable();
        for (p, id) in &staged.specs {
            while record.next_if(|(rp, _)| rp.as_str() < p.as_str()).is_some() {}
            let vouched = record.next_if(|(rp, _)| *rp == p).filter(|(_, (sid, a))| {
                sid == id
                    && a.iter()
                        .all(|(rel, aid)| arts.get(rel.as_str()) == Some(&aid))
            });
            let Some((_, (_, files))) = vouched else {
                c.todo.push(p.clone());
                continue;
            };
            for (rel, _) in files {
                c.claimed.insert(rel.clone());
                if rel.starts_with("nodes/") {
                    c.owner.insert(rel.clone(), p.clone());
                }
            }
        }
        for key in staged.arts.keys() {
            let rel = &key[INDEX_DIR.len() + 1..];
            if rel == "manifest.json" {
                continue;
            }
            let owned = match rel.strip_prefix("enrichments/") {
                Some(_) => c.claimed.contains(&ArtifactPaths::owner_rel(rel)),
                None => c.claimed.contains(rel),
            };
            if !owned {
                c.unclaimed.push(key.clone());
            }
        }
        c.rederive_incomplete();
        c
    }

    /// A vouched spec with a staged artifact its record does not name (the vectors `kdd index`
    /// wrote at L2 after the record was made at L1, or a teammate's pulled in) is re-derived
    /// rather than trusted, and that artifact is kept meanwhile: the derivation decides what
    /// the spec owns (at L1 it keeps the staged vectors), nothing of it is removed unread.
    fn rederive_incomplete(&mut self) {
        let by_stem: HashMap<&str, &String> = self
            .owner
            .iter()
            .filter_map(|(rel, p)| Some((stem_of(rel)?.1, p)))
            .collect();
        let mut again = BTreeSet::new();
        let mut kept = Vec::new();
        self.unclaimed.retain(|key| {
            let rel = &key[INDEX_DIR.len() + 1..];
            match stem_of(rel).and_then(|(_, s)| by_stem.get(s)) {
                Some(p) => {
                    again.insert((*p).clone());
                    kept.push(rel.to_string());
                    false
                }
                None => true,
            }
        });
        if again.is_empty() {
            return;
        }
        self.claimed.extend(kept);
        // Its id is settled again by the derivation (left here, it would claim it twice).
        self.owner.retain(|_, p| !again.contains(p));
        self.todo.extend(again);
        self.todo.sort();
        self.todo.dedup();
    }

    fn nothing_to_do(&self, staged: &Staged) -> bool {
        self.todo.is_empty() && self.unclaimed.is_empty() && staged.conflicted_arts.is_empty()
    }
}

/// Step 4: read the unclaimed node files to learn which spec each belongs to (a corrupt node
/// file belongs to nobody and is removed in step 6).
fn owners_of_unclaimed(
    repo: &gix::Repository,
    staged: &Staged,
    unclaimed: &[String],
) -> Result<BTreeMap<String, Vec<(String, Node)>>, Error> {
    let mut by_spec: BTreeMap<String, Vec<(String, Node)>> = BTreeMap::new();
    for key in unclaimed {
        let rel = &key[INDEX_DIR.len() + 1..];
        if !rel.starts_with("nodes/") {
            continue;
        }
        let bytes = git::read_blob(repo, staged.arts[key])?;
        if let Ok(n) = serde_json::from_slice::<Node>(&bytes) {
            by_spec
                .entry(n.source_file.clone())
                .or_default()
                .push((rel.to_string(), n));
        }
    }
    Ok(by_spec)
}

/// What every step after the record check reads.
struct Ctx<'a> {
    settings: &'a Settings,
    repo: &'a gix::Repository,
    staged: &'a Staged,
    owners: &'a BTreeMap<String, Vec<(String, Node)>>,
    extras: Option<&'a dyn ArtifactExtras>,
}

/// Steps 5–7: the files to write and keep, and the specs indexed after the pass.
struct Plan {
    /// Index-relative path → bytes to write.
    write: BTreeMap<String, Vec<u8>>,
    /// Index-relative paths some live spec owns.
    keep: HashSet<String>,
    /// Artifact stems re-derived in this pass (a conflicted artifact of one is replaced).
    derived: BTreeSet<String>,
    /// Spec paths whose node is in the index after the pass.
    indexed: BTreeSet<String>,
    /// Claim ([`ArtifactPaths::claim_key`]) → owning spec path and its node file (duplicate
    /// ids: [`crate::index::takes_id`]).
    owner: BTreeMap<String, (String, String)>,
}

impl Plan {
    fn new(staged: &Staged, claims: &mut Claims) -> Plan {
        let todo: BTreeSet<&String> = claims.todo.iter().collect();
        Plan {
            write: BTreeMap::new(),
            keep: std::mem::take(&mut claims.claimed),
            derived: BTreeSet::new(),
            indexed: staged
                .specs
                .keys()
                .filter(|p| !todo.contains(p))
                .cloned()
                .collect(),
            owner: std::mem::take(&mut claims.owner)
                .into_iter()
                .filter_map(|(rel, p)| Some((ArtifactPaths::claim_key_of_rel(&rel)?, (p, rel))))
                .collect(),
        }
    }

    /// Keep a node file and the files that follow it.
    fn keep_node(&mut self, n: &Node, rel: &str) {
        self.keep.insert(rel.to_string());
        self.keep.insert(ArtifactPaths::edges_rel(n));
        self.keep.insert(ArtifactPaths::embeddings_rel(n));
    }

    /// Step 5: re-derive every spec the record does not vouch for (cheap at L1; after a merge
    /// a node can match its spec while its edges were unioned from both sides). Nodes of
    /// conflicted specs are left alone.
    fn rederive(
        &mut self,
        ctx: &Ctx<'_>,
        claims: Claims,
        state: &mut State,
        report: &mut Report,
    ) -> Result<(), Error> {
        for p in claims.todo {
            let id = ctx.staged.specs[&p];
            let bytes = git::read_blob(ctx.repo, id)?;
            match crate::index::derive_spec(ctx.settings, &p, &bytes, ctx.extras) {
                Ok(d) => self.take(ctx, p, id, d, state, report),
                Err(diag) => {
                    // Keep whatever was indexed for it; `kdd status` shows it stale.
                    report.diagnostics.push(diag);
                    state.specs.remove(&p);
                    self.keep_previous(ctx, &p);
                }
            }
        }
        for p in &ctx.staged.conflicted_specs {
            for (rel, n) in ctx.owners.get(p).into_iter().flatten() {
                self.keep_node(n, rel);
            }
        }
        Ok(())
    }

    /// A spec that could not be read keeps the artifacts it had.
    fn keep_previous(&mut self, ctx: &Ctx<'_>, p: &str) {
        let candidates = ctx.owners.get(p).map(Vec::as_slice).unwrap_or_default();
        for (rel, n) in candidates {
            self.keep_node(n, rel);
            self.derived.remove(&ArtifactPaths::node_stem(n));
        }
        if !candidates.is_empty() {
            self.indexed.insert(p.to_string());
        }
    }

    /// Take one derived spec: settle a duplicate id ([`crate::index::takes_id`], as in
    /// `kdd index`: the spec `HEAD`'s node file names keeps it, else the first path),
    /// then record its files. When this run produced no vectors (L1), the node's existing
    /// vector file is kept (vectors are keyed by chunk content; L2 re-embeds what changed).
    fn take(
        &mut self,
        ctx: &Ctx<'_>,
        p: String,
        id: gix::ObjectId,
        d: crate::index::Derived,
        state: &mut State,
        report: &mut Report,
    ) {
        report.diagnostics.extend(d.diagnostics.iter().cloned());
        let node_rel = ArtifactPaths::node_rel(&d.node);
        let claim = ArtifactPaths::claim_key(&d.node);
        if let Some((o, o_rel)) = self.owner.get(&claim).cloned() {
            let held = holder::committed_holder(ctx.repo, &[&node_rel, &o_rel]);
            let other = holder::node_at(ctx.repo, &ctx.staged.arts, &self.write, &o_rel);
            if !crate::index::takes_id(&p, &o, held.as_deref()) {
                report.diagnostics.push(match &other {
                    Some(w) => crate::index::claim_error(&d.node, w),
                    None => crate::index::duplicate_error(&p, &o, &d.node.id),
                });
                state.specs.remove(&p);
                return;
            }
            // This spec holds the id, or sorts first among newcomers: it takes the id over.
            report.diagnostics.push(match &other {
                Some(l) => crate::index::claim_error(l, &d.node),
                None => crate::index::duplicate_error(&o, &p, &d.node.id),
            });
            if let Some((_, files)) = state.specs.remove(&o) {
                for (rel, _) in files {
                    self.keep.remove(&rel);
                    self.write.remove(&rel);
                }
            }
            self.indexed.remove(&o);
        }
        self.owner.insert(claim, (p.clone(), node_rel));
        report.rederived.push(p.clone());
        let emb = ArtifactPaths::embeddings_rel(&d.node);
        let mut files = Vec::new();
        for (rel, b) in d.files {
            files.push((rel.clone(), git::blob_id(ctx.repo, &b)));
            self.keep.insert(rel.clone());
            self.write.insert(rel, b);
        }
        let staged = ctx.staged;
        if !staged.conflicted_arts.contains(&art_key(&emb)) && !self.write.contains_key(&emb) {
            if let Some(eid) = staged.arts.get(&art_key(&emb)) {
                files.push((emb.clone(), *eid));
                self.keep.insert(emb);
            }
        }
        state.specs.insert(p.clone(), (id, files));
        self.derived.insert(ArtifactPaths::node_stem(&d.node));
        self.indexed.insert(p);
    }

    /// Step 6: everything staged (or conflicted) under `.kdd-index/` that nobody owns.
    fn stale(&self, staged: &Staged) -> BTreeSet<String> {
        let mut remove = BTreeSet::new();
        for key in staged.arts.keys().chain(staged.conflicted_arts.iter()) {
            let rel = &key[INDEX_DIR.len() + 1..];
            if rel == "manifest.json" || self.write.contains_key(rel) {
                continue;
            }
            let replaced = staged.conflicted_arts.contains(key.as_str())
                && stem_of(rel).is_some_and(|(_, s)| self.derived.contains(s));
            if !self.keep.contains(&ArtifactPaths::owner_rel(rel)) || replaced {
                remove.insert(rel.to_string());
            }
        }
        remove
    }

    /// Step 7a: write the derived files; returns the keys whose staged blob changes.
    fn write(
        &self,
        ctx: &Ctx<'_>,
        paths: &ArtifactPaths,
        report: &mut Report,
    ) -> Result<Vec<String>, Error> {
        let mut stage = Vec::new();
        for (rel, bytes) in &self.write {
            let key = art_key(rel);
            write_artifact(paths, rel, bytes)?;
            let id = git::blob_id(ctx.repo, bytes);
            if ctx.staged.arts.get(&key) != Some(&id) || ctx.staged.conflicted_arts.contains(&key) {
                report.written.push(key.clone());
                stage.push(key);
            }
        }
        Ok(stage)
    }

    /// Step 7b: the manifest of the specs indexed after the pass (removed when none is left).
    fn manifest(
        &self,
        ctx: &Ctx<'_>,
        paths: &ArtifactPaths,
        report: &mut Report,
    ) -> Result<Option<String>, Error> {
        let key = art_key("manifest.json");
        let indexed = self.indexed.iter().map(String::as_str);
        let m = ctx
            .staged
            .expected_manifest(ctx.settings, indexed, ctx.extras);
        let m_id = m.as_ref().map(|b| git::blob_id(ctx.repo, b));
        if m_id == ctx.staged.arts.get(&key).copied() && !ctx.staged.conflicted_arts.contains(&key)
        {
            return Ok(None);
        }
        match &m {
            Some(bytes) => {
                write_artifact(paths, "manifest.json", bytes)?;
                report.written.push(key.clone());
            }
            None => {
                remove_file(paths, "manifest.json")?;
                report.removed.push(key.clone());
            }
        }
        Ok(Some(key))
    }

    /// Step 7c: remove the stale files; returns their keys.
    fn remove(
        remove: &BTreeSet<String>,
        paths: &ArtifactPaths,
        report: &mut Report,
    ) -> Result<Vec<String>, Error> {
        let mut stage = Vec::new();
        for rel in remove {
            remove_file(paths, rel)?;
            let key = art_key(rel);
            report.removed.push(key.clone());
            stage.push(key);
        }
        Ok(stage)
    }
}

/// Step 7d: stage exactly the paths written or removed, and stamp the result consistent when
/// no spec failed and none is in conflict.
fn finish(
    repo: &gix::Repository,
    settings: &Settings,
    stage: &[String],
    report: &Report,
    stamp: &Stamp,
) -> Result<(), Error> {
    git::stage_paths(repo, &settings.repo_root, stage)?;
    let failed = report
        .diagnostics
        .iter()
        .any(|d| d.severity == crate::spec::Severity::Error);
    if !failed && report.conflicted_specs.is_empty() {
        if let Ok(after) = git::load_index(repo) {
            stamp.record(&after);
        }
    }
    Ok(())
}
