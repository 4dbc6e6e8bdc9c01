//! Helpers every retrieval command shares: parsing kinds and layers for clap, opening the cache
//! (at a ref, healing a damaged one, loading the query embedder), reporting a query error (JSON
//! with `--json`), highlighting ids and printing hits. Colour is for stdout only: messages on
//! stderr are never coloured.

use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::query;
use crate::spec::{Kind, Layer};

/// Parse a kind name for clap.
pub fn parse_kind(s: &str) -> Result<Kind, String> {
    Kind::parse(s).ok_or_else(|| format!("unknown kind `{s}`"))
}

/// Parse a layer name for clap.
pub fn parse_layer(s: &str) -> Result<Layer, String> {
    Layer::parse(s).ok_or_else(|| format!("unknown layer `{s}`"))
}

/// Open the cache (building or refreshing it), loading the query embedder for L2 indexes.
pub fn open_cache(
    global: &GlobalArgs,
    want_embedder: bool,
) -> Result<crate::cache::Cache, query::Error> {
    open_cache_at(global, want_embedder, None)
}

/// [`open_cache`] at a ref (`--ref`; a bare repository reads its served ref: see
/// [`super::commands::at_ref`]).
pub fn open_cache_at(
    global: &GlobalArgs,
    want_embedder: bool,
    rev: Option<&str>,
) -> Result<crate::cache::Cache, query::Error> {
    let opened = crate::trace::span("open_cache");
    let unavailable = |e: anyhow::Error| query::Error::IndexUnavailable(crate::cli::describe(&e));
    let (settings, mirror) = super::commands::at_ref::settings(global, rev).map_err(unavailable)?;
    let mut cache = match mirror {
        Some(m) => crate::cache::Cache::open_paths(
            &m.index_dir(),
            &m.tree(),
            &m.cache_root(),
            &crate::cache::OpenOptions::default(),
        )?,
        None => query::open(&settings)?,
    };
    for why in cache.healed() {
        output::warn(&format!(
            "the query cache was damaged ({why}); rebuilt it into a fresh generation"
        ));
    }
    if let Some(stats) = cache.last_update() {
        for e in &stats.errors {
            output::warn(e);
        }
    }
    drop(opened);
    if want_embedder && cache.level() >= crate::artifact::IndexLevel::L2 {
        let _span = crate::trace::span("embedder");
        match query::embedder_for(cache.manifest()) {
            Ok(e) => cache.set_embedder(e),
            Err(reason) => cache.set_embedder_unavailable(reason),
        }
    }
    Ok(cache)
}

/// A read met a damaged query cache (its generation is condemned): the dispatcher runs the
/// command once more, which rebuilds the cache.
#[derive(Debug, thiserror::Error)]
#[error("the query cache is damaged ({0})")]
pub struct CacheDamaged(String);

/// Set while the dispatcher runs a command again after [`CacheDamaged`].
pub static RETRYING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Report a query error: JSON on stdout with `--json`, a message on stderr otherwise. Returns
/// the exit status (1 for "nothing found" errors, 2 otherwise). An error from a damaged cache
/// is returned as [`CacheDamaged`] instead (first time only), so the command runs again.
pub fn fail(global: &GlobalArgs, e: &query::Error) -> anyhow::Result<ExitStatus> {
    if crate::cache::take_damage() && !RETRYING.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(CacheDamaged(e.to_string()).into());
    }
    let status = match e {
        query::Error::NodeNotFound(_) => ExitStatus::Failure,
        _ => ExitStatus::Error,
    };
    if global.json {
        output::json(&serde_json::json!({"error": {"code": e.code(), "message": e.to_string()}}))?;
    } else {
        output::error(&e.to_string());
    }
    Ok(status)
}

/// Bold/cyan an id when colour is allowed.
pub fn hl(s: &str) -> String {
    if crate::report::colour() {
        let [on, off] = crate::report::COLOURS;
        format!("{on}{s}{off}")
    } else {
        s.to_string()
    }
}

/// Human rendering of a hybrid or search answer.
pub fn print_hits(hits: &[query::Hit]) -> std::io::Result<()> {
    let mut out = String::new();
    for (i, h) in hits.iter().enumerate() {
        out.push_str(&format!(
            "{:>2}. {:.3}  {}  {} — {}\n    {}{}  [{}{}]\n    {}\n",
            i + 1,
            h.score,
            hl(&h.node_id),
            h.kind,
            h.title,
            h.source_file,
            match (&h.section, h.lines, &h.source) {
                (Some(s), Some([a, b]), _) => format!(":{a}-{b} ({s})"),
                (Some(s), None, Some(src)) => format!(" ({s}; source: {src})"),
                _ => String::new(),
            },
            h.match_source,
            h.reached_via
                .as_deref()
                .map(|v| format!(" via {v}"))
                .unwrap_or_default(),
            h.snippet
        ));
    }
    output::data(&out)
}
