//! How a code path names the specs it implements (context hints, QRY-007; see
//! [`super::context`]): its words, and which specs its file name, not only its folder, names.
//!
//! Invariants: words are lowercase, at most six per path segment; nothing here reads a file or
//! the path's folders on disk — a path is only text.

use crate::cache::resolve::file_stem;
use crate::cache::{NodeRecord, Snapshot};
use std::collections::BTreeSet;

/// Directory and file names that say where code lives, not what it does.
const GENERIC_PATH_WORDS: &[&str] = &[
    "src", "lib", "libs", "app", "apps", "internal", "pkg", "pkgs", "packages", "cmd", "main",
    "java", "kotlin", "scala", "python", "go", "js", "ts", "test", "tests", "spec", "specs", "com",
    "org", "net", "io", "modules", "module", "source", "sources", "code", "server", "client",
    "backend", "frontend", "api", "web", "index", "mod", "init", "util", "utils", "helpers",
    "common", "core",
];

/// The words of a code path that may name what it implements: the file name's words (split at
/// `_`, `-`, `.` and case changes) and those of the nearest directory that is neither a
/// generic code folder nor a business domain; lowercase, generic words dropped.
pub(super) fn path_words(path: &str, known: &BTreeSet<String>) -> Vec<String> {
    let norm = path.replace('\\', "/");
    let split = |seg: &str| -> Vec<String> {
        let mut words = Vec::new();
        let mut cur = String::new();
        let mut prev_lower = false;
        for ch in seg.chars() {
            if !ch.is_alphanumeric() {
                words.push(std::mem::take(&mut cur));
                prev_lower = false;
                continue;
            }
            if ch.is_uppercase() && prev_lower {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = ch.is_lowercase() || ch.is_ascii_digit();
            cur.extend(ch.to_lowercase());
        }
        words.push(cur);
        let mut words: Vec<String> = words
            .into_iter()
            .filter(|w| w.chars().count() >= 2 && !GENERIC_PATH_WORDS.contains(&w.as_str()))
            .collect();
        words.dedup();
        words.truncate(6);
        words
    };
    let mut segs: Vec<&str> = norm.split('/').filter(|s| !s.is_empty()).collect();
    let mut words = split(segs.pop().map(file_stem).unwrap_or(""));
    let dir = segs
        .iter()
        .rev()
        .filter(|d| !known.iter().any(|k| super::domain::same_folder_name(d, k)))
        .map(|d| split(d))
        .find(|w| !w.is_empty())
        .unwrap_or_default();
    words.extend(
        dir.into_iter()
            .filter(|w| !words.contains(w))
            .collect::<Vec<_>>(),
    );
    words
}

/// A path hint read relative to the repository at `root`, with `.` and `..` folded away:
/// `./src/x.py` and `src/lib/../x.py` → `src/x.py`, an absolute path inside the repository →
/// its repository-relative path. `None` when the path points outside the repository (an
/// absolute path elsewhere, or a `..` that climbs above the root): no spec can live there.
/// Text only: nothing is resolved on disk, so a symlink cannot change the answer.
pub(super) fn in_repo(hint: &str, root: &std::path::Path) -> Option<String> {
    let norm = hint.trim().replace('\\', "/");
    let root = root.to_string_lossy().replace('\\', "/");
    let root = root.trim_end_matches('/');
    let b = norm.as_bytes();
    let drive = b.len() > 2 && b[0].is_ascii_alphabetic() && b[1] == b':' && b[2] == b'/';
    let rel = if norm.starts_with('/') || drive {
        let rest = norm.strip_prefix(root)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        rest.to_string()
    } else {
        norm
    };
    let mut out: Vec<&str> = Vec::new();
    for seg in rel.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            s => out.push(s),
        }
    }
    Some(out.join("/"))
}

/// True when the spec's id, title, aliases or file name hold one of the `stems` (the stems of
/// [`super::evidence::question_stems`], so `tables` meets `Table`).
pub(super) fn names_a_stem(snap: &Snapshot<'_>, rec: &NodeRecord, stems: &[String]) -> bool {
    let n = &rec.node;
    let text = [n.id.as_str(), n.title.as_str(), file_stem(&n.source_file)]
        .into_iter()
        .chain(n.aliases.iter().map(String::as_str))
        .map(crate::cache::text::expand_identifier)
        .collect::<Vec<_>>()
        .join(" ");
    super::evidence::question_stems(snap, &text)
        .iter()
        .any(|s| stems.contains(s))
}

#[cfg(test)]
mod tests {
    #[test]
    fn in_repo_folds_dots_and_refuses_paths_outside_the_repository() {
        use super::in_repo;
        let root = std::path::Path::new("/home/dev/shop");
        let ok = |h: &str| in_repo(h, root);
        assert_eq!(
            ok("./src/lib/../cancel.py").as_deref(),
            Some("src/cancel.py")
        );
        assert_eq!(
            ok("src\\dining\\tables.go").as_deref(),
            Some("src/dining/tables.go")
        );
        assert_eq!(ok("/home/dev/shop/src/x.py").as_deref(), Some("src/x.py"));
        assert_eq!(ok("/home/dev/shopping/x.py"), None);
        assert_eq!(ok("/etc/passwd"), None);
        assert_eq!(ok("C:\\Users\\x.py"), None);
        assert_eq!(ok("src/../../root/.ssh/id_rsa"), None);
        assert_eq!(ok("../../../etc/passwd"), None);
        assert_eq!(ok("src/.."), Some(String::new()));
    }

    use super::path_words;
    use std::collections::BTreeSet;

    #[test]
    fn path_words_read_the_file_name_then_its_nearest_meaningful_folder() {
        let known: BTreeSet<String> = ["clinic".to_string()].into();
        assert_eq!(
            path_words("src/clinic/billing/late_fee.ts", &known),
            ["late", "fee", "billing"]
        );
        assert_eq!(
            path_words("src\\clinic\\appointments\\index.ts", &known),
            ["appointments"],
            "a generic file name leaves the folder; the domain folder is a filter, not a word"
        );
        assert_eq!(
            path_words("app/LateCancellationFee.kt", &known),
            ["late", "cancellation", "fee"]
        );
        assert_eq!(
            path_words("tests/__init__.py", &known),
            Vec::<String>::new()
        );
        assert_eq!(path_words("clinic/x.py", &known), Vec::<String>::new());
        let many = format!("src/{}.rs", "word_".repeat(500));
        assert!(path_words(&many, &known).len() <= 6);
    }
}
