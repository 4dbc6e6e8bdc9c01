//! Property tests for parse/extract and a bounded, proptest-driven corpus mutator ("fuzz") for
//! the spec parser. Stable toolchain only (no cargo-fuzz).
//!
//! - The seed corpus is every `.md`/`.feature` file under `fixtures/`; each case picks one (or
//!   two, for splices) and applies a list of byte-level and syntax-aware mutations (front-matter
//!   fences, YAML anchors/aliases, wiki-link brackets, fences, headings, Gherkin keywords, NUL,
//!   BOM, CRLF, deep nesting).
//! - The property: `parse` + `extract` never panic, finish within a time budget, and when they
//!   succeed the node names the file, hashes exactly the given bytes and every diagnostic names
//!   the file. A refused file is an error diagnostic naming the file.
//! - `KDD_FUZZ_CASES` sets the number of mutated cases (default 256, under a second, so `cargo test` stays fast;
//!   CI raises it for a bounded longer run).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::time::{Duration, Instant};

const ROOT: &str = "specs";
/// Per-input budget (debug build, shared CI cores).
const BUDGET: Duration = Duration::from_secs(2);

fn corpus() -> Vec<(String, Vec<u8>)> {
    fn walk(dir: &std::path::Path, out: &mut Vec<(String, Vec<u8>)>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if let Some(name) = p.file_name().and_then(|n| n.to_str()) {
                if name.ends_with(".md") || name.ends_with(".feature") {
                    out.push((name.to_string(), std::fs::read(&p).unwrap_or_default()));
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&crate::util::crate_root().join("fixtures"), &mut out);
    out.sort();
    assert!(out.len() > 20, "seed corpus: {}", out.len());
    out
}

const TOKENS: &[&str] = &[
    "---\n",
    "...\n",
    "[[",
    "]]",
    "|",
    "::",
    "#",
    "&a ",
    "*a",
    "&b [*a, *a, *a, *a]\n",
    "```\n",
    "```mermaid\n",
    "~~~",
    "# ",
    "## ",
    "###### ",
    "> ",
    "- ",
    "1. ",
    "| a | b |\n|---|---|\n",
    "Feature: ",
    "Scenario: ",
    "Scenario Outline: ",
    "Given ",
    "Examples:\n",
    "@tag ",
    "\0",
    "\u{feff}",
    "\r\n",
    "\n\n",
    "<!--",
    "-->",
    "kind: entity\n",
    "id: X\n",
    "[[a::b#c|d]]",
    "\u{301}",
    "\u{202e}",
    "\x1b[31m",
    "\t",
    "\\",
    "{",
    "}",
    "[",
    "]",
];

#[derive(Debug, Clone)]
enum Mutation {
    Insert(usize, Vec<u8>),
    Token(usize, usize),
    Delete(usize, usize),
    Duplicate(usize, usize, usize),
    Splice(usize, usize, usize),
    Nest(usize, usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 1..16)
        )
            .prop_map(|(p, b)| Mutation::Insert(p, b)),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(p, t)| Mutation::Token(p, t)),
        (any::<usize>(), 0usize..64).prop_map(|(p, n)| Mutation::Delete(p, n)),
        (any::<usize>(), 0usize..256, 1usize..8).prop_map(|(p, n, k)| Mutation::Duplicate(p, n, k)),
        (any::<usize>(), any::<usize>(), 0usize..512)
            .prop_map(|(p, o, n)| Mutation::Splice(p, o, n)),
        (any::<usize>(), 0..TOKENS.len(), 1usize..400)
            .prop_map(|(p, t, n)| Mutation::Nest(p, t, n)),
    ]
}

fn apply(mut b: Vec<u8>, other: &[u8], muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        let at = |p: usize, b: &Vec<u8>| if b.is_empty() { 0 } else { p % (b.len() + 1) };
        match m {
            Mutation::Insert(p, bytes) => {
                let i = at(*p, &b);
                b.splice(i..i, bytes.iter().copied());
            }
            Mutation::Token(p, t) => {
                let i = at(*p, &b);
                b.splice(i..i, TOKENS[*t].bytes());
            }
            Mutation::Delete(p, n) => {
                let i = at(*p, &b);
                let j = (i + n).min(b.len());
                b.drain(i..j);
            }
            Mutation::Duplicate(p, n, k) => {
                let i = at(*p, &b);
                let j = (i + n).min(b.len());
                let piece: Vec<u8> = b[i..j].to_vec();
                for _ in 0..*k {
                    b.splice(j..j, piece.iter().copied());
                }
            }
            Mutation::Splice(p, o, n) => {
                let i = at(*p, &b);
                let s = if other.is_empty() { 0 } else { o % other.len() };
                let e = (s + n).min(other.len());
                b.splice(i..i, other[s..e].iter().copied());
            }
            Mutation::Nest(p, t, n) => {
                let i = at(*p, &b);
                let piece = TOKENS[*t].repeat(*n);
                b.splice(i..i, piece.bytes());
            }
        }
    }
    b
}

/// The property every input must satisfy.
fn check(path: &str, bytes: &[u8]) -> Result<(), TestCaseError> {
    let t = Instant::now();
    let r = kdd::extract::extract(path, bytes, ROOT);
    let took = t.elapsed();
    prop_assert!(took < BUDGET, "{path}: {took:?} for {} bytes", bytes.len());
    match r {
        Ok(ex) => {
            prop_assert_eq!(&ex.node.source_file, path);
            prop_assert_eq!(ex.node.source_hash.clone(), kdd::spec::content_hash(bytes));
            prop_assert!(!ex.node.id.is_empty());
            for d in &ex.diagnostics {
                prop_assert_eq!(&d.file, path);
            }
        }
        Err(d) => {
            prop_assert_eq!(&d.file, path);
            prop_assert_eq!(d.severity, kdd::spec::Severity::Error);
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("KDD_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

#[test]
fn fuzz_spec_parser_with_mutated_corpus() {
    let seeds = corpus();
    let n = seeds.len();
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let strat = (
        0..n,
        0..n,
        proptest::collection::vec(mutation(), 1..12),
        any::<bool>(),
    );
    let t = Instant::now();
    runner
        .run(&strat, |(a, b, muts, feature)| {
            let bytes = apply(seeds[a].1.clone(), &seeds[b].1, &muts);
            let ext = if feature { "feature" } else { "md" };
            let path = format!("{ROOT}/01-domain/entities/F{a}.{ext}");
            check(&path, &bytes)
        })
        .unwrap();
    println!(
        "fuzz: {} cases over {n} seeds in {:?}",
        cases(),
        t.elapsed()
    );
}

proptest! {
    #![proptest_config(Config { cases: 64, failure_persistence: None, ..Config::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        check("specs/x.md", &bytes)?;
        check("specs/x.feature", &bytes)?;
    }

    #[test]
    fn parsing_is_deterministic(text in "[-#\\[\\]|:a-z \n]{0,400}") {
        let a = kdd::extract::extract("specs/a.md", text.as_bytes(), ROOT);
        let b = kdd::extract::extract("specs/a.md", text.as_bytes(), ROOT);
        prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }

    #[test]
    fn written_wiki_links_are_found_in_order(
        targets in proptest::collection::vec("[A-Z][a-zA-Z0-9-]{0,12}", 1..20)
    ) {
        let body: Vec<String> = targets.iter().map(|t| format!("see [[{t}]] here")).collect();
        let text = format!("# Title\n\n{}\n", body.join("\n\n"));
        let doc = kdd::parse::parse("specs/a.md", text.as_bytes()).unwrap();
        let found: Vec<&str> = doc.links.iter().map(|l| l.target.as_str()).collect();
        prop_assert_eq!(found, targets.iter().map(String::as_str).collect::<Vec<_>>());
    }

    #[test]
    fn front_matter_ids_survive(id in "[A-Z]{2,4}-[0-9]{3}", title in "[A-Za-z ]{1,30}") {
        let text = format!("---\nid: {id}\nkind: business-rule\n---\n\n# {title}\n");
        let ex = kdd::extract::extract("specs/01-domain/rules/x.md", text.as_bytes(), ROOT).unwrap();
        prop_assert!(ex.node.id.ends_with(&id), "{} vs {id}", ex.node.id);
    }
}
