//! Parse: spec bytes → [`Document`] (front-matter, title, sections with blocks, wiki-links).
//!
//! Bounded: before any parser runs, [`limits::check`] refuses structures whose cost grows with
//! their count or depth, and YAML loads only through the budgeted [`yaml::load`]; a refused
//! file is a per-file error naming the file.
//!
//! No I/O and no knowledge of kinds: routing and per-kind extraction happen in
//! [`crate::extract`]. Markdown is parsed with pulldown-cmark (CommonMark + GFM tables), so code
//! spans and fences never yield links or headings; `.feature` files go through a small Gherkin
//! reader ([`gherkin`]). Bad input never panics: unusable files (binary, too large) give a
//! [`Diagnostic`] error; recoverable problems (malformed YAML, invalid UTF-8, empty file) give a
//! warning and the body is still parsed.

pub mod frontmatter;
pub mod gherkin;
pub mod heading;
pub mod limits;
mod markdown;
pub mod mdlink;
pub mod wikilink;
pub mod yaml;

use crate::spec::{Diagnostic, Section, Severity};
use serde_json::{Map, Value};

pub use heading::{fold, section_key};

/// Files larger than this are skipped with an error (the one cap of [`crate::source`]).
pub use crate::source::MAX_SPEC_BYTES;

/// Where a link sits inside a table block: row 0 is the header row, body rows start at 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TablePos {
    pub row: usize,
    pub col: usize,
}

/// A wiki-link occurrence with its position in the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WikiLink {
    /// Target as written, without domain, alias or anchor (`BR-MERGE-001`, `Pedido`).
    pub target: String,
    /// Explicit `[[domain::…]]` qualifier.
    pub domain: Option<String>,
    pub anchor: Option<String>,
    pub alias: Option<String>,
    /// Index into [`Document::sections`].
    pub section: usize,
    /// Index into that section's blocks.
    pub block: usize,
    /// Set when the link is in a table cell.
    pub cell: Option<TablePos>,
    /// 1-based line in the source file.
    pub line: usize,
}

/// A parsed Gherkin feature (only for `.feature` files).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Feature {
    pub name: String,
    /// Feature-level tags without `@`.
    pub tags: Vec<String>,
    pub scenarios: Vec<Scenario>,
    /// Spec ids mentioned in tags, scenario names and steps (`UC-001`, `BR-MERGE-001`), in order
    /// of first appearance, with their 1-based line.
    pub mentions: Vec<(String, usize)>,
}

/// One Scenario / Scenario Outline (or Background).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    pub name: String,
    pub tags: Vec<String>,
    pub outline: bool,
    pub background: bool,
    pub steps: Vec<String>,
    pub line: usize,
}

/// A parsed spec file.
#[derive(Debug, Clone, Default)]
pub struct Document {
    /// YAML front-matter as JSON (empty when absent or malformed).
    pub front_matter: Map<String, Value>,
    /// True when a `---` front-matter block was present (even if malformed).
    pub has_front_matter: bool,
    /// Text of the first H1 (HTML comments stripped), or the Gherkin feature name.
    pub title: Option<String>,
    /// Sections in document order; text before the first heading is a level-0 preamble.
    pub sections: Vec<Section>,
    /// Every wiki-link outside code, in document order.
    pub links: Vec<WikiLink>,
    /// Set for `.feature` files.
    pub feature: Option<Feature>,
    pub diagnostics: Vec<Diagnostic>,
}

fn diag(path: &str, severity: Severity, line: Option<usize>, message: String) -> Diagnostic {
    Diagnostic {
        severity,
        file: path.to_string(),
        line,
        message,
    }
}

/// Parse one spec file. `path` is repo-relative and only used for diagnostics and to tell
/// `.feature` files apart. Errors are files that cannot be indexed at all.
pub fn parse(path: &str, bytes: &[u8]) -> Result<Document, Diagnostic> {
    if bytes.len() > MAX_SPEC_BYTES {
        return Err(diag(
            path,
            Severity::Error,
            None,
            format!(
                "file is {} bytes, over the {} MB limit for a spec; skipped (split it, or move it out of the folders kdd indexes)",
                bytes.len(),
                MAX_SPEC_BYTES / (1024 * 1024)
            ),
        ));
    }
    if let Some(p) = memchr_nul(bytes) {
        return Err(diag(
            path,
            Severity::Error,
            Some(line_of(bytes, p)),
            "file contains NUL bytes: it looks binary, not a Markdown spec; skipped (move it out of the folders kdd indexes, or rename it)".into(),
        ));
    }
    let mut diagnostics = Vec::new();
    let text: std::borrow::Cow<'_, str> = match std::str::from_utf8(bytes) {
        Ok(s) => s.into(),
        Err(e) => {
            diagnostics.push(diag(
                path,
                Severity::Warning,
                Some(line_of(bytes, e.valid_up_to())),
                format!(
                    "not valid UTF-8 (first bad byte at offset {}); decoded with replacement characters — re-save the file as UTF-8",
                    e.valid_up_to()
                ),
            ));
            String::from_utf8_lossy(bytes).into_owned().into()
        }
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let text = &lone_cr_as_lf(text);
    if let Err(e) = limits::check(text, path.ends_with(".feature")) {
        return Err(diag(path, Severity::Error, Some(e.line), e.message));
    }
    if text.trim().is_empty() {
        diagnostics.push(diag(
            path,
            Severity::Warning,
            None,
            "file is empty; indexed with its file name only".into(),
        ));
    }
    let mut doc = if path.ends_with(".feature") {
        gherkin::parse(text)
    } else {
        let fm = frontmatter::split(text);
        let mut doc = markdown::parse(fm.body, fm.body_line);
        doc.has_front_matter = fm.present;
        match fm.parse() {
            Ok(map) => doc.front_matter = map,
            Err(e) if e.fatal => return Err(diag(path, Severity::Error, e.line, e.message)),
            Err(e) => diagnostics.push(diag(path, Severity::Warning, e.line, e.message)),
        }
        doc
    };
    diagnostics.append(&mut doc.diagnostics);
    for d in &mut diagnostics {
        d.file = path.to_string();
    }
    doc.diagnostics = diagnostics;
    Ok(doc)
}

fn memchr_nul(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == 0)
}

/// Classic Mac line endings: a CR not followed by LF reads as a line break, so a file saved that
/// way keeps its front matter, headings and cited lines (it read as one line, every citation
/// `1-1`). CRLF is left alone; the text keeps its length, byte for byte.
pub fn lone_cr_as_lf(text: &str) -> std::borrow::Cow<'_, str> {
    let b = text.as_bytes();
    let lone = |i: usize| b[i] == b'\r' && b.get(i + 1) != Some(&b'\n');
    if !(0..b.len()).any(lone) {
        return text.into();
    }
    let out: Vec<u8> = (0..b.len())
        .map(|i| if lone(i) { b'\n' } else { b[i] })
        .collect();
    // Only ASCII CR bytes became ASCII LF bytes: still UTF-8.
    String::from_utf8(out)
        .map(Into::into)
        .unwrap_or_else(|_| text.into())
}

fn line_of(bytes: &[u8], offset: usize) -> usize {
    bytes[..offset.min(bytes.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Block;

    #[test]
    fn bad_inputs_never_panic() {
        assert!(parse("a.md", b"ab\0cd").is_err());
        assert!(parse("a.md", &vec![b'a'; MAX_SPEC_BYTES + 1]).is_err());
        let d = parse("a.md", b"").unwrap();
        assert_eq!(d.diagnostics.len(), 1);
        let d = parse("a.md", b"# T\xff\xfe\n\ntext [[X]]\n").unwrap();
        assert_eq!(d.links.len(), 1);
        assert!(d.diagnostics[0].message.contains("UTF-8"));
        let d = parse("a.md", b"---\nkind: [entity\n---\n# T\n\n[[Y]]\n").unwrap();
        assert_eq!(d.links[0].target, "Y");
        assert!(d.front_matter.is_empty());
        assert!(
            d.diagnostics[0].message.contains("YAML"),
            "{:?}",
            d.diagnostics
        );
        assert!(d.diagnostics[0].line.is_some());
    }

    #[test]
    fn classic_mac_line_endings_keep_front_matter_and_lines() {
        let src =
            "---\rid: Pedido\rkind: entity\r---\r\r# Pedido\r\r## Descripción\r\rUn [[Usuario]].\r";
        let d = parse("specs/01-domain/entities/Pedido.md", src.as_bytes()).unwrap();
        assert_eq!(d.front_matter["id"], "Pedido");
        let heads: Vec<_> = d
            .sections
            .iter()
            .map(|s| (s.heading.as_str(), s.line))
            .collect();
        assert_eq!(heads, [("Pedido", 6), ("Descripción", 8)]);
        assert_eq!(d.links[0].line, 10);
        // CRLF and LF files parse as before.
        let crlf = parse("a.md", src.replace('\r', "\r\n").as_bytes()).unwrap();
        assert_eq!(crlf.sections.len(), 2);
        assert_eq!(crlf.links[0].line, 10);
    }

    #[test]
    fn sections_blocks_and_links() {
        let src = "---\nkind: entity\naliases: [A, B]\n---\n\nIntro [[Pre]].\n\n# Pedido <!-- t -->\n\n## Descripción\n\nUn [[Usuario|usuario]] y `[[NoLink]]`.\n\n```mermaid\nstateDiagram\n[[Nope]]\n# not a heading\n```\n\n## Relaciones\n\n| Relación | Destino |\n|---|---|\n| pertenece_a | [[Usuario\\|u]] |\n\n### Sub\n\n- a [[EVT-X]]\n  - nested\n- b\n";
        let d = parse("specs/01-domain/entities/Pedido.md", src.as_bytes()).unwrap();
        assert_eq!(d.front_matter["kind"], "entity");
        assert_eq!(d.title.as_deref(), Some("Pedido"));
        let heads: Vec<_> = d.sections.iter().map(|s| s.heading.as_str()).collect();
        assert_eq!(heads, ["", "Pedido", "Descripción", "Relaciones", "Sub"]);
        assert_eq!(d.sections[2].key.as_deref(), Some("description"));
        assert_eq!(d.sections[4].ancestors, vec!["Relaciones".to_string()]);
        assert_eq!(d.sections[2].line, 10);
        let targets: Vec<_> = d.links.iter().map(|l| l.target.as_str()).collect();
        assert_eq!(targets, ["Pre", "Usuario", "Usuario", "EVT-X"]);
        assert_eq!(d.links[1].line, 12);
        assert_eq!(d.links[2].cell, Some(TablePos { row: 1, col: 1 }));
        match &d.sections[2].blocks[0] {
            Block::Paragraph { text } => assert_eq!(text, "Un usuario y [[NoLink]]."),
            b => panic!("{b:?}"),
        }
        assert!(matches!(&d.sections[2].blocks[1], Block::Code { lang, .. } if lang == "mermaid"));
        match &d.sections[3].blocks[0] {
            Block::Table { header, rows } => {
                assert_eq!(header, &["Relación", "Destino"]);
                assert_eq!(rows[0], ["pertenece_a", "u"]);
            }
            b => panic!("{b:?}"),
        }
        match &d.sections[4].blocks[0] {
            Block::List { items } => assert_eq!(items, &["a EVT-X", "  nested", "b"]),
            b => panic!("{b:?}"),
        }
    }
}
