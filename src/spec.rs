//! Stage contracts shared by the whole pipeline, with no I/O.
//!
//! The pipeline reads as a chain of types:
//! `&[u8]` → [`crate::parse::Document`] → [`Extracted`] (node + typed link records + sections)
//! → [`crate::embed::Chunk`]s → artifacts in `.kdd-index/` → the query cache.
//!
//! Invariants:
//! - A [`Node`] is derived from exactly one spec file; its `source_hash` is [`content_hash`] of
//!   that file's bytes (128-bit truncated blake3, CRLF read as LF), so anyone holding the spec can check whether
//!   the node is fresh ([`same_content`] also accepts the full 256-bit hash of format v1).
//! - [`LinkRecord`]s keep the link *as written* (target text + optional domain); resolution to
//!   node ids is global and happens in [`crate::graph`], never at extraction time, so one spec's
//!   artifacts never depend on another spec's content (incremental + merge friendly).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Every kind of KDD document the engine knows, plus `.feature` files and generic documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Entity,
    Event,
    BusinessRule,
    BusinessPolicy,
    CrossPolicy,
    Command,
    Query,
    Process,
    UseCase,
    UiView,
    UiComponent,
    Requirement,
    Objective,
    Prd,
    Adr,
    // v2 kinds
    Role,
    System,
    Nfr,
    ValueUnit,
    Release,
    UiFlow,
    ImplementationCharter,
    Glossary,
    /// A Gherkin `.feature` file (BDD scenarios).
    Feature,
    /// Markdown under the specs root whose kind could not be determined.
    Document,
}

impl Kind {
    /// All kinds, in declaration order.
    pub const ALL: [Kind; 25] = [
        Kind::Entity,
        Kind::Event,
        Kind::BusinessRule,
        Kind::BusinessPolicy,
        Kind::CrossPolicy,
        Kind::Command,
        Kind::Query,
        Kind::Process,
        Kind::UseCase,
        Kind::UiView,
        Kind::UiComponent,
        Kind::Requirement,
        Kind::Objective,
        Kind::Prd,
        Kind::Adr,
        Kind::Role,
        Kind::System,
        Kind::Nfr,
        Kind::ValueUnit,
        Kind::Release,
        Kind::UiFlow,
        Kind::ImplementationCharter,
        Kind::Glossary,
        Kind::Feature,
        Kind::Document,
    ];

    /// The front-matter spelling (`business-rule`) — also the artifact folder name.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Entity => "entity",
            Kind::Event => "event",
            Kind::BusinessRule => "business-rule",
            Kind::BusinessPolicy => "business-policy",
            Kind::CrossPolicy => "cross-policy",
            Kind::Command => "command",
            Kind::Query => "query",
            Kind::Process => "process",
            Kind::UseCase => "use-case",
            Kind::UiView => "ui-view",
            Kind::UiComponent => "ui-component",
            Kind::Requirement => "requirement",
            Kind::Objective => "objective",
            Kind::Prd => "prd",
            Kind::Adr => "adr",
            Kind::Role => "role",
            Kind::System => "system",
            Kind::Nfr => "nfr",
            Kind::ValueUnit => "value-unit",
            Kind::Release => "release",
            Kind::UiFlow => "ui-flow",
            Kind::ImplementationCharter => "implementation-charter",
            Kind::Glossary => "glossary",
            Kind::Feature => "feature",
            Kind::Document => "document",
        }
    }

    /// Parse the front-matter spelling (case-insensitive, `_`/space tolerated).
    pub fn parse(s: &str) -> Option<Kind> {
        let norm: String = s
            .trim()
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c == '_' || c == ' ' { '-' } else { c })
            .collect();
        let k = match norm.as_str() {
            "entity" | "catalog" => Kind::Entity,
            "event" => Kind::Event,
            "business-rule" | "rule" => Kind::BusinessRule,
            "business-policy" | "policy" => Kind::BusinessPolicy,
            "cross-policy" => Kind::CrossPolicy,
            "command" => Kind::Command,
            "query" => Kind::Query,
            "process" => Kind::Process,
            "use-case" | "usecase" => Kind::UseCase,
            "ui-view" | "view" => Kind::UiView,
            "ui-component" | "component" => Kind::UiComponent,
            "requirement" | "verification" => Kind::Requirement,
            "objective" => Kind::Objective,
            "prd" => Kind::Prd,
            "adr" => Kind::Adr,
            "role" => Kind::Role,
            "system" => Kind::System,
            "nfr" => Kind::Nfr,
            "value-unit" => Kind::ValueUnit,
            "release" => Kind::Release,
            "ui-flow" | "flow" => Kind::UiFlow,
            "implementation-charter" | "charter" => Kind::ImplementationCharter,
            "glossary" => Kind::Glossary,
            "feature" => Kind::Feature,
            "document" => Kind::Document,
            _ => return None,
        };
        Some(k)
    }

    /// The node-id prefix (`Entity`, `BR`, `CMD`…): node ids are `<prefix>:<local id>`.
    pub fn id_prefix(self) -> &'static str {
        match self {
            Kind::Entity => "Entity",
            Kind::Event => "EVT",
            Kind::BusinessRule => "BR",
            Kind::BusinessPolicy => "BP",
            Kind::CrossPolicy => "XP",
            Kind::Command => "CMD",
            Kind::Query => "QRY",
            Kind::Process => "PROC",
            Kind::UseCase => "UC",
            Kind::UiView | Kind::UiComponent | Kind::UiFlow => "UI",
            Kind::Requirement => "REQ",
            Kind::Objective => "OBJ",
            Kind::Prd => "PRD",
            Kind::Adr => "ADR",
            Kind::Role => "Role",
            Kind::System => "System",
            Kind::Nfr => "NFR",
            Kind::ValueUnit => "UV",
            Kind::Release => "REL",
            Kind::ImplementationCharter => "ARCH",
            Kind::Glossary => "Glossary",
            Kind::Feature => "Feature",
            Kind::Document => "Doc",
        }
    }

    /// The layer a kind lives in when its path does not say.
    pub fn default_layer(self) -> Layer {
        match self {
            Kind::Entity
            | Kind::Event
            | Kind::BusinessRule
            | Kind::Role
            | Kind::System
            | Kind::Glossary => Layer::Domain,
            Kind::BusinessPolicy
            | Kind::CrossPolicy
            | Kind::Command
            | Kind::Query
            | Kind::Process
            | Kind::UseCase => Layer::Behavior,
            Kind::UiView | Kind::UiComponent | Kind::UiFlow => Layer::Experience,
            Kind::Requirement | Kind::Feature => Layer::Verification,
            Kind::Objective
            | Kind::Prd
            | Kind::Nfr
            | Kind::ValueUnit
            | Kind::Release
            | Kind::Adr => Layer::Requirements,
            Kind::ImplementationCharter => Layer::Architecture,
            Kind::Document => Layer::Unknown,
        }
    }

    /// Kinds that state constraints (rules, policies, requirements): QRY-007 puts them first.
    pub fn is_constraint(self) -> bool {
        matches!(
            self,
            Kind::BusinessRule
                | Kind::BusinessPolicy
                | Kind::CrossPolicy
                | Kind::Requirement
                | Kind::Nfr
        )
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// KDD layers. `00` and `05` are outside the dependency flow (BR-LAYER-001).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Layer {
    #[serde(rename = "00-requirements")]
    Requirements,
    #[serde(rename = "01-domain")]
    Domain,
    #[serde(rename = "02-behavior")]
    Behavior,
    #[serde(rename = "03-experience")]
    Experience,
    #[serde(rename = "04-verification")]
    Verification,
    #[serde(rename = "05-architecture")]
    Architecture,
    #[serde(rename = "unknown")]
    Unknown,
}

impl Layer {
    /// The folder spelling (`01-domain`).
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Requirements => "00-requirements",
            Layer::Domain => "01-domain",
            Layer::Behavior => "02-behavior",
            Layer::Experience => "03-experience",
            Layer::Verification => "04-verification",
            Layer::Architecture => "05-architecture",
            Layer::Unknown => "unknown",
        }
    }

    /// Parse `01-domain`, `01`, `domain`.
    pub fn parse(s: &str) -> Option<Layer> {
        let s = s.trim().to_ascii_lowercase();
        Some(match s.as_str() {
            "00-requirements" | "00" | "requirements" => Layer::Requirements,
            "01-domain" | "01" | "domain" => Layer::Domain,
            "02-behavior" | "02" | "behavior" | "02-behaviour" => Layer::Behavior,
            "03-experience" | "03" | "experience" => Layer::Experience,
            "04-verification" | "04" | "verification" => Layer::Verification,
            "05-architecture" | "05" | "architecture" => Layer::Architecture,
            "unknown" => Layer::Unknown,
            _ => return None,
        })
    }

    /// Position in the 01→04 flow; `None` for layers outside the flow (00, 05, unknown).
    pub fn rank(self) -> Option<u8> {
        match self {
            Layer::Domain => Some(1),
            Layer::Behavior => Some(2),
            Layer::Experience => Some(3),
            Layer::Verification => Some(4),
            _ => None,
        }
    }

    /// BR-LAYER-001: a reference from `self` to `target` violates the layer rule when both are in
    /// the flow and the target sits in a higher layer.
    pub fn violates(self, target: Layer) -> bool {
        matches!((self.rank(), target.rank()), (Some(a), Some(b)) if b > a)
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node of the knowledge graph: the identity of one spec file. This is what is committed in
/// `.kdd-index/nodes/<kind>/…json` (see [`crate::artifact`]); everything else about a spec can be
/// re-derived from its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Full node id: `Entity:Pedido`, `BR:BR-PRECIO-001`; in multi-domain repos `auth:Entity:Token`.
    pub id: String,
    pub kind: Kind,
    /// Repo-relative path with `/` separators (`specs/01-domain/entities/Pedido.md`).
    pub source_file: String,
    /// blake3 hex of the source bytes.
    pub source_hash: String,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// Domain in multi-domain repos (`auth`, `_shared`); `None` in single-domain repos.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    pub layer: Layer,
}

impl Node {
    /// The id without domain qualifier and kind prefix (`BR-PRECIO-001`).
    pub fn local_id(&self) -> &str {
        self.id.rsplit(':').next().unwrap_or(&self.id)
    }
}

/// A link as written in a spec, classified by where it appears. Stored per source document in
/// `.kdd-index/edges/…`; resolved to node ids by [`crate::graph`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LinkRecord {
    /// Edge type decided from the source kind and section: `WIKI_LINK`, `EMITS`,
    /// `UC_APPLIES_RULE`…, or an author relation in `snake_case` (`pertenece_a`).
    /// The resolver may refine it once the target's kind is known (see `graph::refine_type`).
    #[serde(rename = "type")]
    pub edge_type: String,
    /// Target as written, without alias/anchor: `BR-MERGE-001`, `Pedido`, `EVT-Pedido-Creado`.
    pub to: String,
    /// Explicit domain qualifier from `[[domain::Target]]` (`_shared` included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
}

/// One heading section of a spec with its text, used by lexical search, chunking and context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Section {
    /// Heading text as written (HTML comments stripped); empty for text before the first heading.
    pub heading: String,
    /// Canonical section key when the heading is a known KDD section (`declaration`,
    /// `main_flow`, `purpose`…), else `None`.
    pub key: Option<String>,
    /// Heading level (1–6; 0 for the preamble).
    pub level: u8,
    /// Titles of the ancestor headings, outermost first (the H1 title excluded).
    pub ancestors: Vec<String>,
    /// Paragraph-level blocks, in order.
    pub blocks: Vec<Block>,
    /// 1-based line of the heading in the source file.
    pub line: usize,
}

impl Section {
    /// All block texts of the section joined with blank lines.
    pub fn text(&self) -> String {
        self.blocks
            .iter()
            .map(Block::text)
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}

/// A paragraph-level piece of a section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// A paragraph or block quote, as plain text (links rendered as their display text).
    Paragraph { text: String },
    /// A list; one string per item (nested items flattened with indentation).
    List { items: Vec<String> },
    /// A table: header cells and rows of cells (plain text).
    Table {
        header: Vec<String>,
        rows: Vec<Vec<String>>,
    },
    /// A fenced or indented code block (`mermaid` included); never scanned for links.
    Code { lang: String, text: String },
}

impl Block {
    /// Plain text of the block (tables as `a | b` lines).
    pub fn text(&self) -> String {
        match self {
            Block::Paragraph { text } => text.clone(),
            Block::List { items } => items
                .iter()
                .map(|i| format!("- {i}"))
                .collect::<Vec<_>>()
                .join("\n"),
            Block::Table { header, rows } => std::iter::once(header)
                .chain(rows.iter())
                .map(|r| r.join(" | "))
                .collect::<Vec<_>>()
                .join("\n"),
            Block::Code { text, .. } => text.clone(),
        }
    }
}

/// Severity of a per-file diagnostic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

/// A problem found in one file; never aborts a run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Repo-relative path of the file.
    pub file: String,
    /// 1-based line when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// What is wrong and what to do about it.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        let (file, message) = (escape_control(&self.file), escape_control(&self.message));
        match self.line {
            Some(l) => write!(f, "{sev}: {file}:{l}: {message}"),
            None => write!(f, "{sev}: {file}: {message}"),
        }
    }
}

/// The one escaper of text headed for a terminal: file names come from the repository, so a
/// name holding a newline, a carriage return, ESC (terminal control sequences) or a Unicode
/// bidi override must not forge a line or repaint the screen. Every control character (C0,
/// DEL, C1) and every bidi control becomes a visible escape (`\n`, `\r`, `\t`, `\u001b`,
/// `\u202e`; the `\uXXXX` form keeps JSON text valid with the same meaning); `keep` lists
/// layout characters a multi-line text may keep (`"\n\t"` for stdout data, `""` for a line).
/// Text without such characters is returned as is.
/// Hex digits of a content hash: blake3 truncated to 128 bits. It only detects a change of one
/// path's bytes (never an adversarial proof of identity): an accidental collision is 2^-128.
pub const HASH_HEX_LEN: usize = 32;

/// The content hash of a spec's bytes (`source_hash`, an enrichment's `spec_hash`), blind to
/// line endings: each CRLF counts as LF. A checkout with `core.autocrlf` or `eol=crlf` holds
/// CRLF files whose blobs are LF, and both derive the same artifacts (only the hash told them
/// apart), so the hook reading blobs and `kdd index` / `status` / queries reading the work tree
/// agree (red team, sixteenth round: every spec of such a checkout was reported stale).
pub fn content_hash(bytes: &[u8]) -> String {
    let mut h = blake3::Hasher::new();
    let mut rest = bytes;
    while let Some(i) = rest.windows(2).position(|w| w == b"\r\n") {
        h.update(&rest[..i]);
        rest = &rest[i + 1..];
    }
    h.update(rest);
    h.finalize().to_hex()[..HASH_HEX_LEN].to_string()
}

/// The comparable part of a stored hash: format v1 stored all 64 hex digits, v2 the first 32.
pub fn hash_key(hash: &str) -> &str {
    hash.get(..HASH_HEX_LEN).unwrap_or(hash)
}

/// Whether two stored or computed content hashes name the same bytes (v1 and v2 alike).
pub fn same_content(a: &str, b: &str) -> bool {
    hash_key(a) == hash_key(b)
}

pub fn escape_control_keep<'a>(s: &'a str, keep: &str) -> std::borrow::Cow<'a, str> {
    fn hostile(c: char) -> bool {
        c.is_control()
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    }
    if !s.chars().any(|c| hostile(c) && !keep.contains(c)) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if !hostile(c) || keep.contains(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push_str(&format!("\\u{:04x}", c as u32)),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// [`escape_control_keep`] for one line of text: every control character is escaped.
pub fn escape_control(s: &str) -> std::borrow::Cow<'_, str> {
    escape_control_keep(s, "")
}

/// Kind-specific structured fields (the PRD's `indexed_fields`): `declaration`, `attributes`,
/// `state_machine`, `main_flow`… Values are JSON so each kind can carry its own shape.
pub type IndexedFields = BTreeMap<String, serde_json::Value>;

/// Everything extraction derives from one spec file.
#[derive(Debug, Clone, PartialEq)]
pub struct Extracted {
    pub node: Node,
    pub fields: IndexedFields,
    /// Deduplicated, sorted by (type, to, domain).
    pub links: Vec<LinkRecord>,
    pub sections: Vec<Section>,
    /// `.feature` files: scenario names and tags (also in `fields`).
    pub diagnostics: Vec<Diagnostic>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_never_reach_a_terminal() {
        assert_eq!(escape_control("specs/a.md"), "specs/a.md");
        assert_eq!(
            escape_control("a\nkdd: ok\r\u{1b}[2J\u{202e}b\u{7f}\u{9b}"),
            "a\\nkdd: ok\\r\\u001b[2J\\u202eb\\u007f\\u009b"
        );
        assert_eq!(escape_control_keep("a\n\tb\u{1b}", "\n\t"), "a\n\tb\\u001b");
        let d = Diagnostic {
            severity: Severity::Error,
            file: "specs/x\n\u{1b}[31mforged.md".into(),
            line: Some(3),
            message: "bad \u{7}".into(),
        };
        let shown = d.to_string();
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
        assert_eq!(
            shown,
            "error: specs/x\\n\\u001b[31mforged.md:3: bad \\u0007"
        );
    }

    /// CRLF reads as LF (an `autocrlf` checkout hashes like its blob); an LF file keeps the
    /// plain blake3 it always had; a lone CR still counts.
    #[test]
    fn the_content_hash_is_blind_to_crlf_only() {
        let lf = b"---\nid: A\n---\n\n# A\n";
        assert_eq!(content_hash(lf), blake3::hash(lf).to_hex()[..HASH_HEX_LEN]);
        assert_eq!(
            content_hash(b"---\r\nid: A\r\n---\r\n\r\n# A\r\n"),
            content_hash(lf)
        );
        assert_ne!(content_hash(b"a\rb"), content_hash(b"ab"));
        assert_ne!(content_hash(b"a\r\nb"), content_hash(b"ab"));
    }
}
