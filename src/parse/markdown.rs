//! CommonMark walk (pulldown-cmark) → sections, blocks and wiki-links.
//!
//! Inline text of each block is gathered with code spans replaced by [`CODE_MARK`], scanned for
//! wiki-links, then rendered with links shown as their display text and code spans restored.

use super::heading::{section_key, strip_html_comments};
use super::wikilink::{self, CODE_MARK};
use super::{Document, TablePos, WikiLink};
use crate::spec::{Block, Section};
use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// Inline text being gathered for one block (paragraph, list item, table cell, heading).
#[derive(Default)]
struct Inline {
    /// Text with code spans replaced by `CODE_MARK`.
    text: String,
    /// Contents of the code spans, in order.
    codes: Vec<String>,
    /// (position in `text`, source byte offset) for each appended text run.
    spans: Vec<(usize, usize)>,
}

impl Inline {
    fn push_text(&mut self, s: &str, src: usize) {
        self.spans.push((self.text.len(), src));
        self.text.push_str(s);
    }
    fn push_code(&mut self, s: &str) {
        self.text.push(CODE_MARK);
        self.codes.push(s.to_string());
    }
    fn is_blank(&self) -> bool {
        self.text.trim().is_empty()
    }
    fn src_of(&self, pos: usize) -> usize {
        let i = self.spans.partition_point(|(p, _)| *p <= pos);
        match i.checked_sub(1).and_then(|i| self.spans.get(i)) {
            Some((p, s)) => s + (pos - p),
            None => self.spans.first().map_or(0, |(_, s)| *s),
        }
    }
    /// Scan links, render display text; returns (plain text, links with source offsets).
    fn finish(&mut self) -> (String, Vec<(wikilink::RawLink, usize)>) {
        let raw = wikilink::scan(&self.text);
        let rendered = wikilink::render(&self.text, &raw);
        let mut plain = String::with_capacity(rendered.len());
        let mut codes = std::mem::take(&mut self.codes).into_iter();
        for c in rendered.chars() {
            if c == CODE_MARK {
                plain.push_str(&codes.next().unwrap_or_default());
            } else {
                plain.push(c);
            }
        }
        let links = raw
            .into_iter()
            .map(|l| {
                let src = self.src_of(l.start);
                (l, src)
            })
            .collect();
        self.text.clear();
        self.spans.clear();
        (plain.trim().to_string(), links)
    }
}

struct Walker<'a> {
    src: &'a str,
    line_starts: Vec<usize>,
    line_base: usize,
    doc: Document,
    /// Links found in the block being built (block index assigned when the block is emitted).
    pending: Vec<WikiLink>,
    heading_stack: Vec<(u8, String)>,
    inline: Inline,
    // list state
    list_depth: usize,
    list_items: Vec<String>,
    // table state
    in_table: bool,
    table_header: Vec<String>,
    table_rows: Vec<Vec<String>>,
    row: Vec<String>,
    row_index: usize,
    // code block state
    code: Option<(String, String)>,
    heading: Option<(u8, usize)>,
    in_html_block: bool,
}

/// Parse a Markdown body. `line_base` is the 1-based line of the body's first line.
pub fn parse(body: &str, line_base: usize) -> Document {
    let mut line_starts = vec![0];
    line_starts.extend(body.match_indices('\n').map(|(i, _)| i + 1));
    let mut w = Walker {
        src: body,
        line_starts,
        line_base,
        doc: Document::default(),
        pending: Vec::new(),
        heading_stack: Vec::new(),
        inline: Inline::default(),
        list_depth: 0,
        list_items: Vec::new(),
        in_table: false,
        table_header: Vec::new(),
        table_rows: Vec::new(),
        row: Vec::new(),
        row_index: 0,
        code: None,
        heading: None,
        in_html_block: false,
    };
    w.doc.sections.push(Section {
        heading: String::new(),
        key: None,
        level: 0,
        ancestors: Vec::new(),
        blocks: Vec::new(),
        line: line_base,
    });
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for (ev, range) in Parser::new_ext(body, opts).into_offset_iter() {
        w.event(ev, range.start);
    }
    w.flush_paragraph();
    // Drop an empty preamble.
    if w.doc.sections[0].blocks.is_empty() {
        w.doc.sections.remove(0);
        for l in &mut w.doc.links {
            l.section -= 1;
        }
    }
    w.doc
}

impl Walker<'_> {
    fn line(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&s| s <= offset) + self.line_base - 1
    }

    fn cur(&self) -> usize {
        self.doc.sections.len() - 1
    }

    fn collect_links(&mut self, cell: Option<TablePos>) -> String {
        let (plain, links) = self.inline.finish();
        let section = self.cur();
        for (l, src) in links {
            if l.target.is_empty() {
                continue; // `[[#Section]]`: same-document anchor, no edge
            }
            let line = self.line(src);
            self.pending.push(WikiLink {
                target: l.target,
                domain: l.domain,
                anchor: l.anchor,
                alias: l.alias,
                section,
                block: 0,
                cell,
                line,
            });
        }
        plain
    }

    fn emit(&mut self, block: Block) {
        let section = self.cur();
        let idx = self.doc.sections[section].blocks.len();
        for mut l in self.pending.drain(..) {
            l.section = section;
            l.block = idx;
            self.doc.links.push(l);
        }
        self.doc.sections[section].blocks.push(block);
    }

    /// Emit loose inline text (e.g. text directly in a block quote without paragraph events).
    fn flush_paragraph(&mut self) {
        if !self.inline.is_blank() {
            let text = self.collect_links(None);
            if !text.is_empty() {
                self.emit(Block::Paragraph { text });
            }
        }
        self.inline = Inline::default();
    }

    fn push_item(&mut self) {
        if self.inline.is_blank() {
            self.inline = Inline::default();
            return;
        }
        let text = self.collect_links(None);
        let indent = "  ".repeat(self.list_depth.saturating_sub(1));
        self.list_items.push(format!("{indent}{text}"));
    }

    fn event(&mut self, ev: Event<'_>, off: usize) {
        if let Some((_, text)) = &mut self.code {
            match ev {
                Event::Text(t) => text.push_str(&t),
                Event::End(TagEnd::CodeBlock) => {
                    let (lang, text) = self.code.take().unwrap_or_default();
                    let text = text.trim_end_matches('\n').to_string();
                    if self.list_depth > 0 {
                        self.push_item();
                        self.list_items.push(text);
                    } else {
                        self.emit(Block::Code { lang, text });
                    }
                }
                _ => {}
            }
            return;
        }
        match ev {
            Event::Start(tag) => self.start(tag, off),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => {
                if !self.in_html_block {
                    self.inline.push_text(&t, off);
                }
            }
            Event::Code(c) => self.inline.push_code(&c),
            Event::InlineMath(c) | Event::DisplayMath(c) => self.inline.push_code(&c),
            Event::SoftBreak | Event::HardBreak => self.inline.push_text("\n", off),
            Event::TaskListMarker(done) => self
                .inline
                .push_text(if done { "[x] " } else { "[ ] " }, off),
            Event::Html(_) | Event::InlineHtml(_) | Event::FootnoteReference(_) | Event::Rule => {}
        }
    }

    fn start(&mut self, tag: Tag<'_>, off: usize) {
        match tag {
            Tag::Heading { level, .. } => {
                self.flush_paragraph();
                self.heading = Some((level as u8, off));
            }
            Tag::CodeBlock(kind) => {
                if self.list_depth == 0 {
                    self.flush_paragraph();
                }
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or("").to_string()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
            }
            Tag::List(_) => {
                if self.list_depth == 0 {
                    self.flush_paragraph();
                } else {
                    self.push_item();
                }
                self.list_depth += 1;
            }
            Tag::Item => {}
            Tag::Table(_) => {
                self.flush_paragraph();
                self.in_table = true;
                self.table_header.clear();
                self.table_rows.clear();
                self.row_index = 0;
            }
            Tag::TableHead | Tag::TableRow => self.row.clear(),
            Tag::TableCell => self.inline = Inline::default(),
            Tag::HtmlBlock => self.in_html_block = true,
            Tag::Paragraph if self.list_depth > 0 && !self.inline.is_blank() => {
                self.inline.push_text(" ", off);
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Heading(_) => {
                let (level, off) = self.heading.take().unwrap_or((2, 0));
                // Links in headings are not followed ("never link in headings").
                let (plain, _) = self.inline.finish();
                self.inline = Inline::default();
                let heading = strip_html_comments(&plain);
                let line = self.line(off);
                if level == 1 && self.doc.title.is_none() {
                    self.doc.title = Some(heading.clone()).filter(|h| !h.is_empty());
                }
                while self.heading_stack.last().is_some_and(|(l, _)| *l >= level) {
                    self.heading_stack.pop();
                }
                let ancestors = self.heading_stack.iter().map(|(_, h)| h.clone()).collect();
                if level > 1 {
                    self.heading_stack.push((level, heading.clone()));
                }
                self.doc.sections.push(Section {
                    key: section_key(&heading).map(str::to_string),
                    heading,
                    level,
                    ancestors,
                    blocks: Vec::new(),
                    line,
                });
            }
            TagEnd::Paragraph if self.list_depth == 0 && !self.in_table => {
                self.flush_paragraph();
            }
            TagEnd::Item => self.push_item(),
            TagEnd::List(_) => {
                self.push_item();
                self.list_depth = self.list_depth.saturating_sub(1);
                if self.list_depth == 0 && !self.list_items.is_empty() {
                    let items = std::mem::take(&mut self.list_items);
                    self.emit(Block::List { items });
                }
            }
            TagEnd::TableCell => {
                let cell = TablePos {
                    row: self.row_index,
                    col: self.row.len(),
                };
                let text = self.collect_links(Some(cell));
                self.row.push(text);
            }
            TagEnd::TableHead => {
                self.table_header = std::mem::take(&mut self.row);
                self.row_index = 1;
            }
            TagEnd::TableRow => {
                let r = std::mem::take(&mut self.row);
                self.table_rows.push(r);
                self.row_index += 1;
            }
            TagEnd::Table => {
                self.in_table = false;
                let header = std::mem::take(&mut self.table_header);
                let rows = std::mem::take(&mut self.table_rows);
                self.emit(Block::Table { header, rows });
            }
            TagEnd::HtmlBlock => self.in_html_block = false,
            TagEnd::BlockQuote(_) => self.flush_paragraph(),
            _ => {}
        }
        let _ = self.src;
    }
}
