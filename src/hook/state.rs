//! The hook's verification record (`<cache dir>/hook-state`): per spec path, the staged blob id
//! and the blob ids of its artifacts last seen consistent. An optimisation only: a missing,
//! foreign (other version or specs root) or damaged record reads as empty, so every staged node
//! is checked against its spec once; it is written only when it changed.
//!
//! The [`Stamp`] (in the git dir): the digest of the staged specs and index the last
//! consistent pass left, so an unchanged staging area is not read at all.

use crate::artifact::{write_if_changed, INDEX_DIR};
use crate::config::Settings;
use crate::git;
use gix::ObjectId;
use std::collections::BTreeMap;
use std::path::PathBuf;

const STATE_FILE: &str = "hook-state";
/// Per work tree (in its git dir): digest of the staged specs + index last left consistent.
const STAMP_FILE: &str = "kdd-hook-stamp";
pub(super) const STATE_HEADER: &str = concat!("kdd-hook-state v1 ", env!("CARGO_PKG_VERSION"));

/// Verification record: spec path → (spec blob, [(artifact rel, blob)]).
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct State {
    pub specs: BTreeMap<String, (ObjectId, Vec<(String, ObjectId)>)>,
}

impl State {
    fn path(settings: &Settings) -> PathBuf {
        settings.cache_dir.join(STATE_FILE)
    }

    pub fn load(settings: &Settings) -> State {
        let mut st = State::default();
        let Ok(text) = std::fs::read_to_string(Self::path(settings)) else {
            return st;
        };
        let mut lines = text.lines();
        if lines.next() != Some(&format!("{STATE_HEADER} {}", settings.specs_root)) {
            return st;
        }
        for line in lines {
            let mut parts = line.split('\t');
            let (Some(p), Some(id)) = (parts.next(), parts.next()) else {
                continue;
            };
            let Ok(id) = ObjectId::from_hex(id.as_bytes()) else {
                continue;
            };
            let mut arts = Vec::new();
            for a in parts {
                if let Some((rel, aid)) = a.rsplit_once('=') {
                    if let Ok(aid) = ObjectId::from_hex(aid.as_bytes()) {
                        arts.push((rel.to_string(), aid));
                    }
                }
            }
            st.specs.insert(p.to_string(), (id, arts));
        }
        st
    }

    pub fn save(&self, settings: &Settings) {
        let mut out = format!("{STATE_HEADER} {}\n", settings.specs_root);
        for (p, (id, arts)) in &self.specs {
            if p.contains(['\t', '\n']) {
                continue;
            }
            out.push_str(p);
            out.push('\t');
            out.push_str(&id.to_string());
            for (rel, aid) in arts {
                out.push('\t');
                out.push_str(rel);
                out.push('=');
                out.push_str(&aid.to_string());
            }
            out.push('\n');
        }
        if std::fs::create_dir_all(&settings.cache_dir).is_ok() {
            let _ = write_if_changed(&Self::path(settings), out.as_bytes());
        }
    }
}

/// The digest of the staged specs, documents and `.kdd-index/` a consistent pass leaves, kept in
/// the git dir: an equal digest means nothing to read.
pub(super) struct Stamp {
    file: PathBuf,
    root: String,
    roots: crate::roots::Roots,
}

impl Stamp {
    pub(super) fn new(repo: &gix::Repository, settings: &Settings) -> Stamp {
        Stamp {
            file: repo.git_dir().join(STAMP_FILE),
            root: settings.specs_root.clone(),
            roots: settings.roots(),
        }
    }

    /// The stamp of a loaded index.
    fn of(&self, index: &gix::index::File) -> String {
        let root = self.root.as_str();
        format!(
            "{STATE_HEADER} {root}\n{}\n",
            git::index_stamp(index, &[root, INDEX_DIR])
                + &git::roots::docs_stamp(index, &self.roots)
        )
    }

    /// True when `index` is what the last consistent pass left.
    pub(super) fn matches(&self, index: &gix::index::File) -> bool {
        std::fs::read_to_string(&self.file).is_ok_and(|s| s == self.of(index))
    }

    /// Record `index` as consistent (best effort: the stamp is an optimisation only).
    pub(super) fn record(&self, index: &gix::index::File) {
        let _ = std::fs::write(&self.file, self.of(index));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_roundtrip_and_header_check() {
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings {
            repo_root: dir.path().to_path_buf(),
            git_common_dir: dir.path().join(".git"),
            bare: false,
            specs_root: "specs".into(),
            docs_roots: Vec::new(),
            index_dir: dir.path().join(".kdd-index"),
            cache_dir: dir.path().join("cache"),
        };
        let id = ObjectId::empty_blob(gix::hash::Kind::Sha1);
        let mut st = State::default();
        st.specs.insert(
            "specs/a b.md".into(),
            (id, vec![("nodes/entity/A.json".into(), id)]),
        );
        st.save(&settings);
        assert_eq!(State::load(&settings), st);
        let other = Settings {
            specs_root: "docs".into(),
            ..settings
        };
        assert_eq!(State::load(&other), State::default());
    }
}
