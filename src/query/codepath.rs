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
        .filter(|d| !known.contains(**d))
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
