//! A small line-based Gherkin reader for `.feature` files (English and Spanish keywords).
//!
//! It keeps what retrieval needs: the feature name and description, Background, Scenario /
//! Scenario Outline names with their tags and steps, Examples tables, wiki-links in steps and
//! spec ids mentioned in tags, names and steps (`@BR-MERGE-001`, `UC-001`). Doc strings
//! (`"""` blocks) are example content, never references: they are kept as code blocks and not
//! scanned.

use super::heading::fold;
use super::wikilink;
use super::{Document, Feature, Scenario, WikiLink};
use crate::spec::{Block, Section};

const FEATURE: &[&str] = &[
    "feature",
    "caracteristica",
    "funcionalidad",
    "ability",
    "business need",
    "necesidad del negocio",
];
const BACKGROUND: &[&str] = &["background", "antecedentes", "contexto"];
const OUTLINE: &[&str] = &[
    "scenario outline",
    "scenario template",
    "esquema del escenario",
];
const SCENARIO: &[&str] = &["scenario", "example", "escenario", "ejemplo"];
const EXAMPLES: &[&str] = &["examples", "scenarios", "ejemplos", "escenarios"];
const RULE: &[&str] = &["rule", "regla"];

/// Id prefixes recognised as spec references in tags and steps.
pub const ID_PREFIXES: &[&str] = &[
    "UC", "BR", "BP", "XP", "CMD", "QRY", "PROC", "REQ", "OBJ", "ADR", "NFR", "EVT", "PRD", "UV",
    "REL",
];

/// `keyword: rest` when the line starts with one of `kws` (folded) followed by `:`.
fn keyword<'a>(line: &'a str, kws: &[&str]) -> Option<&'a str> {
    let colon = line.find(':')?;
    let head = fold(&line[..colon]);
    kws.iter()
        .any(|k| *k == head)
        .then(|| line[colon + 1..].trim())
}

fn is_step(line: &str) -> bool {
    const STEPS: &[&str] = &[
        "given", "when", "then", "and", "but", "*", "dado", "dada", "dados", "dadas", "cuando",
        "entonces", "y", "e", "pero",
    ];
    let first = line.split_whitespace().next().unwrap_or("");
    STEPS.contains(&fold(first).as_str())
}

/// Spec ids (`UC-001`, `BR-MERGE-001`, `EVT-Pedido-Creado`) mentioned in `text`.
pub fn id_mentions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (start, c) = chars[i];
        let prev_ok = i == 0 || !(chars[i - 1].1.is_alphanumeric() || chars[i - 1].1 == '-');
        if c.is_ascii_uppercase() && prev_ok {
            let mut j = i;
            while j < chars.len() && (chars[j].1.is_alphanumeric() || chars[j].1 == '-') {
                j += 1;
            }
            let end = chars.get(j).map_or(text.len(), |(o, _)| *o);
            let tok = text[start..end].trim_end_matches('-');
            if let Some((p, rest)) = tok.split_once('-') {
                if ID_PREFIXES.contains(&p)
                    && !rest.is_empty()
                    && rest
                        .chars()
                        .any(|c| c.is_ascii_digit() || p == "EVT" || p == "PRD")
                {
                    out.push(tok.to_string());
                }
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// Parse a `.feature` file.
pub fn parse(text: &str) -> Document {
    let mut p = Parser::default();
    for (idx, raw) in text.lines().enumerate() {
        p.line(raw, idx + 1);
    }
    p.finish()
}

/// The line-by-line state of [`parse`].
#[derive(Default)]
struct Parser {
    doc: Document,
    feature: Feature,
    pending_tags: Vec<String>,
    description: Vec<String>,
    /// An open doc string: its fence and the text so far.
    doc_string: Option<(String, String)>,
    table: Vec<Vec<String>>,
}

impl Parser {
    /// Record the spec ids a line mentions (first mention wins).
    fn mention(&mut self, text: &str, line: usize) {
        for id in id_mentions(text) {
            if !self.feature.mentions.iter().any(|(m, _)| *m == id) {
                self.feature.mentions.push((id, line));
            }
        }
    }

    /// Close an open data table into the current section.
    fn flush_table(&mut self) {
        if self.table.is_empty() {
            return;
        }
        let mut rows = std::mem::take(&mut self.table);
        let header = rows.remove(0);
        if let Some(s) = self.doc.sections.last_mut() {
            s.blocks.push(Block::Table { header, rows });
        }
    }

    /// Append a code block to the current section.
    fn push_code(&mut self, text: String) {
        if let Some(s) = self.doc.sections.last_mut() {
            s.blocks.push(Block::Code {
                lang: String::new(),
                text,
            });
        }
    }

    /// One source line.
    fn line(&mut self, raw: &str, line_no: usize) {
        let line = raw.trim();
        if let Some((fence, buf)) = &mut self.doc_string {
            if line.starts_with(fence.as_str()) {
                let code = std::mem::take(buf);
                self.doc_string = None;
                self.push_code(code);
            } else {
                if !buf.is_empty() {
                    buf.push('\n');
                }
                buf.push_str(raw);
            }
            return;
        }
        if line.starts_with("\"\"\"") || line.starts_with("```") {
            self.flush_table();
            self.doc_string = Some((line[..3].to_string(), String::new()));
            return;
        }
        if line.is_empty() || line.starts_with('#') {
            return;
        }
        if line.starts_with('|') {
            let cells: Vec<String> = line
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect();
            scan_links(&mut self.doc, line, line_no);
            self.mention(line, line_no);
            self.table.push(cells);
            return;
        }
        self.flush_table();
        if line.starts_with('@') {
            self.tags(line, line_no);
        } else if !self.keyword_line(line, line_no) {
            self.text_line(line, line_no);
        }
    }

    /// A tag line: the tags wait for the next feature or scenario.
    fn tags(&mut self, line: &str, line_no: usize) {
        for t in line.split_whitespace() {
            if let Some(t) = t.strip_prefix('@') {
                if !t.is_empty() {
                    self.pending_tags.push(t.to_string());
                }
            }
        }
        self.mention(line, line_no);
    }

    /// A Feature / Examples / Background / Scenario (Outline) / Rule line; false for others.
    fn keyword_line(&mut self, line: &str, line_no: usize) -> bool {
        if let Some(name) = keyword(line, FEATURE) {
            self.feature.name = name.to_string();
            self.feature.tags = std::mem::take(&mut self.pending_tags);
            self.doc.title = Some(name.to_string()).filter(|n| !n.is_empty());
            self.mention(name, line_no);
            self.doc.sections.push(section(name, None, 1, line_no));
            return true;
        }
        if keyword(line, EXAMPLES).is_some() {
            self.pending_tags.clear();
            return true;
        }
        let scen = if let Some(n) = keyword(line, BACKGROUND) {
            Some((n, false, true))
        } else if let Some(n) = keyword(line, OUTLINE) {
            Some((n, true, false))
        } else {
            keyword(line, SCENARIO).map(|n| (n, false, false))
        };
        if let Some((name, outline, background)) = scen {
            self.scenario(name, outline, background, line_no);
            return true;
        }
        if let Some(name) = keyword(line, RULE) {
            finish_description(&mut self.doc, &mut self.description);
            self.doc.sections.push(section(name, None, 2, line_no));
            return true;
        }
        false
    }

    /// A Background / Scenario / Scenario Outline header.
    fn scenario(&mut self, name: &str, outline: bool, background: bool, line_no: usize) {
        finish_description(&mut self.doc, &mut self.description);
        let name = if name.is_empty() && background {
            "Background"
        } else {
            name
        };
        self.mention(name, line_no);
        let key = if background { "background" } else { "scenario" };
        self.doc.sections.push(section(name, Some(key), 2, line_no));
        self.feature.scenarios.push(Scenario {
            name: name.to_string(),
            tags: std::mem::take(&mut self.pending_tags),
            outline,
            background,
            steps: Vec::new(),
            line: line_no,
        });
    }

    /// A step inside a scenario, or free description text.
    fn text_line(&mut self, line: &str, line_no: usize) {
        scan_links(&mut self.doc, line, line_no);
        if is_step(line) && !self.feature.scenarios.is_empty() {
            self.mention(line, line_no);
            let plain = wikilink::render(line, &wikilink::scan(line));
            if let Some(s) = self.feature.scenarios.last_mut() {
                s.steps.push(plain.clone());
            }
            if let Some(sec) = self.doc.sections.last_mut() {
                match sec.blocks.last_mut() {
                    Some(Block::List { items }) => items.push(plain),
                    _ => sec.blocks.push(Block::List { items: vec![plain] }),
                }
            }
            return;
        }
        self.description.push(line.to_string());
        if self.doc.sections.is_empty() {
            self.doc.sections.push(section("", None, 0, line_no));
        }
    }

    /// Close what is still open and return the document.
    fn finish(mut self) -> Document {
        self.flush_table();
        if let Some((_, buf)) = self.doc_string.take() {
            self.push_code(buf);
        }
        finish_description(&mut self.doc, &mut self.description);
        self.doc.feature = Some(self.feature);
        self.doc
    }
}

fn section(name: &str, key: Option<&str>, level: u8, line: usize) -> Section {
    Section {
        heading: name.to_string(),
        key: key.map(str::to_string),
        level,
        ancestors: Vec::new(),
        blocks: Vec::new(),
        line,
    }
}

fn finish_description(doc: &mut Document, description: &mut Vec<String>) {
    if description.is_empty() {
        return;
    }
    let text = std::mem::take(description).join("\n");
    let raw = wikilink::scan(&text);
    let text = wikilink::render(&text, &raw);
    if let Some(s) = doc.sections.last_mut() {
        s.blocks.insert(0, Block::Paragraph { text });
    }
}

fn scan_links(doc: &mut Document, line: &str, line_no: usize) {
    if doc.sections.is_empty() {
        doc.sections.push(section("", None, 0, line_no));
    }
    let section = doc.sections.len() - 1;
    let block = doc.sections[section].blocks.len();
    for l in wikilink::scan(line) {
        if l.target.is_empty() {
            continue;
        }
        doc.links.push(WikiLink {
            target: l.target,
            domain: l.domain,
            anchor: l.anchor,
            alias: l.alias,
            section,
            block,
            cell: None,
            line: line_no,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spanish_feature() {
        let src = "# language: es\n@BR-MERGE-001\nCaracterística: Merge\n  Descripción libre\n\n  Antecedentes:\n    Dado un repo\n\n  @UC-006 @wip\n  Escenario: SCN-Merge-001 — dos devs\n    Dado un fichero \"specs/x/UC-001-IndexDocument.md\" que referencia \"[[KDDDocument]]\"\n    Y un docstring:\n      \"\"\"\n      [[Usuario]] BR-PRECIO-001\n      \"\"\"\n    Entonces el edge va de \"UC:UC-001\" a \"Entity:X\"\n\n  Esquema del escenario: outline <n>\n    Dado <n>\n    Ejemplos:\n      | n |\n      | 1 |\n";
        let d = parse(src);
        let f = d.feature.as_ref().unwrap();
        assert_eq!(f.name, "Merge");
        assert_eq!(f.tags, vec!["BR-MERGE-001"]);
        assert_eq!(f.scenarios.len(), 3);
        assert!(f.scenarios[0].background);
        assert_eq!(f.scenarios[1].tags, vec!["UC-006", "wip"]);
        assert!(f.scenarios[2].outline);
        let ids: Vec<_> = f.mentions.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(
            ids,
            ["BR-MERGE-001", "UC-006", "UC-001-IndexDocument", "UC-001"]
        );
        let links: Vec<_> = d.links.iter().map(|l| l.target.as_str()).collect();
        assert_eq!(links, ["KDDDocument"]);
        assert_eq!(d.title.as_deref(), Some("Merge"));
        assert_eq!(d.sections[2].key.as_deref(), Some("scenario"));
    }
}
