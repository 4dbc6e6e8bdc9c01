//! Bounded parsing: a linear pre-scan of a spec's text that refuses, before any parser runs,
//! the structures whose cost grows with their count or depth (one spec never takes a run's
//! memory or time). Pure.
//!
//! Limits (far above any real spec; the largest bundled spec has < 100 headings and links):
//! - [`MAX_HEADINGS`] lines starting with `#` (each is a section with its own keys),
//! - [`MAX_WIKILINKS`] `[[` openings (each becomes a link record and an edge),
//! - [`MAX_BRACKETS`] `[` and [`MAX_PIPES`] `|` (link-reference and table-cell work),
//! - [`MAX_QUOTE_DEPTH`] block quotes / list items opened on one line (`> - 1. x`), and
//!   [`MAX_LIST_INDENT`] columns of indentation,
//! - [`MAX_FEATURE_LINES`] lines in a `.feature` file.
//!
//! YAML front-matter has its own budget ([`super::yaml`]). A refused file is a per-file error
//! whose message names the limit and what to do.

/// Most heading lines in one spec.
pub const MAX_HEADINGS: usize = 5_000;
/// Most `[[` wiki-link openings in one spec.
pub const MAX_WIKILINKS: usize = 10_000;
/// Most `[` in one spec.
pub const MAX_BRACKETS: usize = 100_000;
/// Most `|` in one spec.
pub const MAX_PIPES: usize = 200_000;
/// Deepest nesting of block quotes and list items opened at one line start.
pub const MAX_QUOTE_DEPTH: usize = 32;
/// Widest leading indentation (columns) of a line (nested lists).
pub const MAX_LIST_INDENT: usize = 400;
/// Most lines in a Gherkin `.feature` file.
pub const MAX_FEATURE_LINES: usize = 50_000;

/// A limit that was exceeded: 1-based line where it was crossed and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    pub line: usize,
    pub message: String,
}

fn over(line: usize, what: &str, limit: usize) -> Exceeded {
    Exceeded {
        line,
        message: format!(
            "{what} over the limit of {limit} for one spec; not indexed (guards memory and time) — split the spec"
        ),
    }
}

/// Block quotes and list items opened at the start of one line (`> - 1. * x` is 4 deep).
fn container_depth(line: &str) -> usize {
    let b = line.as_bytes();
    let (mut i, mut depth) = (0, 0);
    loop {
        while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
            i += 1;
        }
        let spaced = |j: usize| j >= b.len() || b[j] == b' ' || b[j] == b'\t';
        let quote = i < b.len() && b[i] == b'>';
        if quote || (i < b.len() && matches!(b[i], b'-' | b'*' | b'+') && spaced(i + 1)) {
            i += 1;
        } else {
            let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            let j = i + digits;
            if (1..=9).contains(&digits)
                && j < b.len()
                && matches!(b[j], b'.' | b')')
                && spaced(j + 1)
            {
                i = j + 1;
            } else {
                return depth;
            }
        }
        depth += 1;
    }
}

/// Check `text` against every limit (see the module doc).
pub fn check(text: &str, feature: bool) -> Result<(), Exceeded> {
    let (mut headings, mut links, mut brackets, mut pipes) = (0usize, 0usize, 0usize, 0usize);
    for (i, line) in text.split('\n').enumerate() {
        let n = i + 1;
        if feature && n > MAX_FEATURE_LINES {
            return Err(over(n, "lines in a .feature file", MAX_FEATURE_LINES));
        }
        let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
        if indent > MAX_LIST_INDENT {
            return Err(over(n, "indentation (columns)", MAX_LIST_INDENT));
        }
        if container_depth(line) > MAX_QUOTE_DEPTH {
            return Err(over(
                n,
                "nesting of block quotes and lists",
                MAX_QUOTE_DEPTH,
            ));
        }
        if line.trim_start().starts_with('#') {
            headings += 1;
            if headings > MAX_HEADINGS {
                return Err(over(n, "headings", MAX_HEADINGS));
            }
        }
        links += line.matches("[[").count();
        if links > MAX_WIKILINKS {
            return Err(over(n, "wiki-links", MAX_WIKILINKS));
        }
        brackets += line.bytes().filter(|b| *b == b'[').count();
        if brackets > MAX_BRACKETS {
            return Err(over(n, "`[` characters", MAX_BRACKETS));
        }
        pipes += line.bytes().filter(|b| *b == b'|').count();
        if pipes > MAX_PIPES {
            return Err(over(n, "`|` characters (table cells)", MAX_PIPES));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_shapes_are_refused_with_their_line() {
        assert!(check("# T\n\nA [[B]] and [[C]].\n> quote\n", false).is_ok());
        let e = check(&"[[a]] ".repeat(MAX_WIKILINKS + 1), false).unwrap_err();
        assert!(e.message.contains("wiki-links"), "{e:?}");
        let e = check(&"# h\n".repeat(MAX_HEADINGS + 1), false).unwrap_err();
        assert_eq!(e.line, MAX_HEADINGS + 1);
        assert!(check(&format!("{} x", ">".repeat(40)), false).is_err());
        assert!(check(&format!("{}x", "- ".repeat(40)), false).is_err());
        assert!(check(&format!("{}x", "> 1. * ".repeat(12)), false).is_err());
        assert_eq!(container_depth("> - 1. * x"), 4);
        assert_eq!(container_depth("---"), 0);
        assert_eq!(container_depth("- [ ] task"), 1);
        assert_eq!(container_depth("2024. was a year"), 1);
        assert!(check(&format!("{}- x", " ".repeat(500)), false).is_err());
        assert!(check(&"[".repeat(MAX_BRACKETS + 1), false).is_err());
        assert!(check(&"|".repeat(MAX_PIPES + 1), false).is_err());
        let feature = "Given x\n".repeat(MAX_FEATURE_LINES + 1);
        assert!(check(&feature, true).is_err());
        assert!(check(&feature, false).is_ok());
    }
}
