//! Wiki-link lexer: `[[T]]`, `[[T|alias]]`, `[[T\|alias]]`, `[[domain::T]]`, `[[_shared::T]]`,
//! `[[#Section]]` (same document, no target) and `[[T#Section]]`.
//!
//! The lexer runs on text that the Markdown walker already stripped of code spans and code
//! blocks (they are replaced by [`CODE_MARK`]), so links in code are never seen.

/// Placeholder the Markdown walker puts where an inline code span was; links never cross it.
pub const CODE_MARK: char = '\u{1}';

/// One `[[…]]` occurrence, split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawLink {
    /// Target without domain, alias or anchor; empty for `[[#Section]]`.
    pub target: String,
    pub domain: Option<String>,
    pub anchor: Option<String>,
    pub alias: Option<String>,
    /// Byte range of the whole `[[…]]` in the scanned text.
    pub start: usize,
    pub end: usize,
}

impl RawLink {
    /// Text shown to a reader: the alias, else the target, else the anchor.
    pub fn display(&self) -> &str {
        if let Some(a) = self.alias.as_deref().filter(|a| !a.is_empty()) {
            return a;
        }
        if !self.target.is_empty() {
            return &self.target;
        }
        self.anchor.as_deref().unwrap_or("")
    }
}

/// Find every wiki-link in `text`.
pub fn scan(text: &str) -> Vec<RawLink> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(off) = text[i..].find("[[") {
        let start = i + off;
        let inner_start = start + 2;
        // `[[[x]]]`: start at the innermost `[[`.
        if bytes.get(inner_start) == Some(&b'[') {
            i = start + 1;
            continue;
        }
        let Some(close) = text[inner_start..].find("]]") else {
            break;
        };
        let inner = &text[inner_start..inner_start + close];
        if inner.contains(['\n', CODE_MARK, '[']) || inner.trim().is_empty() {
            i = inner_start;
            continue;
        }
        let end = inner_start + close + 2;
        if let Some(l) = split(inner, start, end) {
            out.push(l);
        }
        i = end;
    }
    out
}

fn split(inner: &str, start: usize, end: usize) -> Option<RawLink> {
    let (mut body, alias) = match inner.find('|') {
        Some(p) => (&inner[..p], Some(inner[p + 1..].trim().to_string())),
        None => (inner, None),
    };
    // `[[T\|alias]]` when the table parser did not unescape the pipe.
    body = body.strip_suffix('\\').unwrap_or(body);
    let mut domain = None;
    if let Some(p) = body.find("::") {
        let d = body[..p].trim();
        if !d.is_empty()
            && d.chars()
                .all(|c| c.is_alphanumeric() || c == '-' || c == '_')
        {
            domain = Some(d.to_string());
            body = &body[p + 2..];
        }
    }
    let (target, anchor) = match body.find('#') {
        Some(p) => (body[..p].trim(), Some(body[p + 1..].trim().to_string())),
        None => (body.trim(), None),
    };
    if target.is_empty() && anchor.as_deref().unwrap_or("").is_empty() {
        return None;
    }
    Some(RawLink {
        target: target.to_string(),
        domain,
        anchor,
        alias,
        start,
        end,
    })
}

/// Replace every link in `text` by its display text (and drop the code marks' slots — callers
/// substitute them afterwards).
pub fn render(text: &str, links: &[RawLink]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for l in links {
        out.push_str(&text[pos..l.start]);
        out.push_str(l.display());
        pos = l.end;
    }
    out.push_str(&text[pos..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &str) -> RawLink {
        let v = scan(s);
        assert_eq!(v.len(), 1, "{s}: {v:?}");
        v.into_iter().next().unwrap()
    }

    #[test]
    fn variants() {
        let l = one("see [[Pedido]].");
        assert_eq!(
            (l.target.as_str(), l.domain, l.alias),
            ("Pedido", None, None)
        );
        let l = one("[[Product|products]]");
        assert_eq!(l.target, "Product");
        assert_eq!(l.display(), "products");
        let l = one("[[GraphNode\\|nodos]]");
        assert_eq!(l.target, "GraphNode");
        assert_eq!(l.alias.as_deref(), Some("nodos"));
        let l = one("[[core::Customer]]");
        assert_eq!(l.domain.as_deref(), Some("core"));
        assert_eq!(l.target, "Customer");
        let l = one("[[_shared::XP-003-AuditTrail]]");
        assert_eq!(l.domain.as_deref(), Some("_shared"));
        let l = one("see [[#States]]");
        assert_eq!(l.target, "");
        assert_eq!(l.anchor.as_deref(), Some("States"));
        assert_eq!(l.display(), "States");
        let l = one("[[UC-001-X#Main Flow]]");
        assert_eq!(l.target, "UC-001-X");
        assert_eq!(l.anchor.as_deref(), Some("Main Flow"));
        let l = one("[[a::b::c]]");
        assert_eq!(
            (l.domain.as_deref(), l.target.as_str()),
            (Some("a"), "b::c")
        );
    }

    #[test]
    fn not_links() {
        assert!(scan("[[]] [[ ]] [[a\nb]] [x] [[x").is_empty());
        assert!(scan("\u{1}[[x\u{1}]]").is_empty());
        assert_eq!(scan("[[[X]]]")[0].target, "X");
    }

    #[test]
    fn render_display() {
        let t = "a [[X|y]] b [[Z]]";
        assert_eq!(render(t, &scan(t)), "a y b Z");
    }
}
