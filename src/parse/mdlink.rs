//! Markdown links between documents: `[text](other.md)`, `[text](../adr/0001.md#context)`,
//! reference links (`[text][ref]` + `[ref]: other.md`) and autolinks are all seen by
//! pulldown-cmark as links; this keeps the ones that point at another Markdown file of the same
//! repository. Pure.
//!
//! Invariants:
//! - Only relative destinations ending in `.md`/`.markdown` (case-insensitive, after dropping a
//!   `#anchor` or `?query`) are kept: never a URL with a scheme (`https:`, `mailto:`), never an
//!   absolute path (`/x.md`), never a same-page anchor. `%20` is decoded; nothing else is.
//! - [`resolve`] joins a destination with the linking file's folder and normalises `.`/`..`;
//!   a destination that climbs above the repository root gives `None` (never an edge).
//! - Links in code spans and code blocks are not links (CommonMark). At most
//!   [`super::limits::MAX_WIKILINKS`] destinations are kept per file.

use pulldown_cmark::{Event, Options, Parser, Tag};

/// Relative Markdown destinations linked from `text`, in document order, deduplicated.
pub fn relative_targets(text: &str) -> Vec<String> {
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut out: Vec<String> = Vec::new();
    for ev in Parser::new_ext(text, opts) {
        let Event::Start(Tag::Link { dest_url, .. }) = ev else {
            continue;
        };
        if let Some(t) = keep(&dest_url) {
            if !out.contains(&t) {
                out.push(t);
                if out.len() >= super::limits::MAX_WIKILINKS {
                    break;
                }
            }
        }
    }
    out
}

fn keep(dest: &str) -> Option<String> {
    let d = dest.trim();
    let d = d.split(['#', '?']).next().unwrap_or("");
    if d.is_empty() || d.starts_with('/') || d.starts_with('\\') {
        return None;
    }
    // A scheme (`https:`, `mailto:`, `c:`) before any `/`.
    if let Some(colon) = d.find(':') {
        if !d[..colon].contains('/') {
            return None;
        }
    }
    let d = d.replace("%20", " ");
    let lower = d.to_ascii_lowercase();
    (lower.ends_with(".md") || lower.ends_with(".markdown")).then_some(d)
}

/// The repo-relative path a destination of the file `from` (repo-relative) names, or `None`
/// when it leaves the repository or has control characters.
pub fn resolve(from: &str, dest: &str) -> Option<String> {
    if dest.chars().any(|c| c.is_control() || c == '\\') {
        return None;
    }
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop(); // the linking file itself
    for c in dest.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_relative_markdown_links() {
        let text =
            "See [guide](guide.md#setup), [adr](../adr/0001-x.md), [web](https://x.io/a.md),\n\
                    [abs](/etc/a.md), [here](#top), [img](a.png), `[code](c.md)`, [ref][r]\n\n\
                    ```\n[block](b.md)\n```\n\n[r]: sub/Ref%20Doc.MD\n";
        assert_eq!(
            relative_targets(text),
            vec!["guide.md", "../adr/0001-x.md", "sub/Ref Doc.MD"]
        );
        assert_eq!(
            resolve("docs/a.md", "guide.md").as_deref(),
            Some("docs/guide.md")
        );
        assert_eq!(
            resolve("docs/x/a.md", "../../adr/1.md").as_deref(),
            Some("adr/1.md")
        );
        assert_eq!(
            resolve("README.md", "docs/./g.md").as_deref(),
            Some("docs/g.md")
        );
        assert_eq!(resolve("docs/a.md", "../../etc/passwd.md"), None);
    }
}
