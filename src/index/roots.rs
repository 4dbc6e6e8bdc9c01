//! The roots an index run reads, completed from the committed manifest: the specs root when
//! the configured one does not exist (an index built with `--specs DIR`) and the documents roots
//! when none is configured (a clone without `kdd.docs`, the bare mirror), so every writer keeps
//! the files the last full index covered and never drops documents it was not told of.

use crate::artifact::read_manifest;
use crate::config::Settings;

/// When the configured specs root does not exist but the committed manifest names another
/// one that does (the index was built with `--specs DIR`), use the manifest's.
pub fn with_manifest_specs_root(settings: Settings) -> Settings {
    let mut settings = with_manifest_docs(settings);
    if settings.specs_dir().is_dir() {
        return settings;
    }
    if let Ok(m) = read_manifest(&settings.index_dir.join("manifest.json")) {
        if let Some(rel) = crate::config::normalize_rel(&m.specs_root) {
            if settings.repo_root.join(&rel).is_dir() {
                settings.specs_root = rel;
            }
        }
    }
    settings
}

/// When no documents root is configured, use the ones the committed manifest records (a clone
/// without `kdd.docs`, the bare mirror): the hook must never drop documents it was not told of.
pub fn with_manifest_docs(mut settings: Settings) -> Settings {
    if settings.docs_roots.is_empty() {
        if let Ok(m) = read_manifest(&settings.index_dir.join("manifest.json")) {
            if let Ok(docs) = crate::roots::parse_docs(&m.docs.join(",")) {
                settings.docs_roots = docs;
            }
        }
    }
    settings
}
