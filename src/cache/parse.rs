//! Re-deriving a spec's searchable text from its bytes: core's extractor when the file
//! extracts, else a small CommonMark-aware heading splitter (front matter skipped, fences kept
//! as text, wiki-links shown by their display text). Pure: no I/O.

use super::store::SectionText;
use crate::spec::IndexedFields;

/// Re-derive a spec's sections and indexed fields from its bytes (core's extractor; a plain
/// heading splitter when the file cannot be extracted at all).
pub fn parse_spec(rel: &str, bytes: &[u8], specs_root: &str) -> (IndexedFields, Vec<SectionText>) {
    let (f, s, _) = parse_spec_full(rel, bytes, specs_root);
    (f, s)
}

/// [`parse_spec`] plus the extraction itself (for re-chunking vectors).
pub(super) fn parse_spec_full(
    rel: &str,
    bytes: &[u8],
    specs_root: &str,
) -> (
    IndexedFields,
    Vec<SectionText>,
    Option<crate::spec::Extracted>,
) {
    match crate::extract::extract(rel, bytes, specs_root) {
        Ok(x) => {
            let sections = x
                .sections
                .iter()
                .map(|s| SectionText {
                    heading: s.heading.clone(),
                    key: s.key.clone(),
                    level: s.level,
                    ancestors: s.ancestors.clone(),
                    text: s.text(),
                    line: s.line,
                    end: 0,
                })
                .collect();
            (x.fields.clone(), set_ends(sections, bytes), Some(x))
        }
        Err(_) => {
            let text = String::from_utf8_lossy(bytes);
            let (f, s) = fallback_sections(rel, &text);
            (f, set_ends(s, bytes), None)
        }
    }
}

/// Set each section's `end`: the last non-blank line of the file before the next section's
/// heading (or the end of the file), so a cited span covers the section's whole body, code
/// fences and all, however its text was trimmed for search.
fn set_ends(mut sections: Vec<SectionText>, bytes: &[u8]) -> Vec<SectionText> {
    let text = String::from_utf8_lossy(bytes);
    // Lines as the parser counts them (a lone CR breaks a line, as in classic Mac files).
    let text = crate::parse::lone_cr_as_lf(&text);
    let lines: Vec<&str> = text.lines().collect();
    let mut starts: Vec<usize> = sections.iter().map(|s| s.line).filter(|l| *l > 0).collect();
    starts.sort_unstable();
    for s in &mut sections {
        if s.line == 0 {
            continue;
        }
        let next = starts.iter().find(|l| **l > s.line).copied();
        let stop = next.map_or(lines.len(), |n| n - 1).min(lines.len());
        s.end = (s.line..=stop)
            .rev()
            .find(|l| lines.get(l - 1).is_some_and(|t| !t.trim().is_empty()))
            .unwrap_or(s.line);
    }
    sections
}

/// A small CommonMark-aware splitter used for the searchable text: headings outside code fences
/// start sections, front matter is skipped, wiki-links keep their display text.
fn fallback_sections(rel: &str, text: &str) -> (IndexedFields, Vec<SectionText>) {
    let mut body = text;
    if let Some(rest) = text.strip_prefix("---") {
        if let Some(end) = rest.find("\n---") {
            let after = &rest[end + 4..];
            body = after.split_once('\n').map(|(_, b)| b).unwrap_or("");
        }
    }
    let feature = rel.ends_with(".feature");
    let mut sections: Vec<SectionText> = Vec::new();
    let mut cur = SectionText {
        heading: String::new(),
        key: None,
        level: 0,
        ancestors: Vec::new(),
        text: String::new(),
        line: 1,
        end: 0,
    };
    let mut stack: Vec<(u8, String)> = Vec::new();
    let mut fence: Option<&str> = None;
    let fm_lines = text[..text.len() - body.len()].lines().count();
    for (i, line) in body.lines().enumerate() {
        let t = line.trim_start();
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
                continue;
            }
            cur.text.push_str(line);
            cur.text.push('\n');
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = Some(if t.starts_with("```") { "```" } else { "~~~" });
            continue;
        }
        let heading = if feature {
            let lw = t.to_ascii_lowercase();
            [
                "feature:",
                "scenario:",
                "scenario outline:",
                "background:",
                "escenario:",
                "característica:",
            ]
            .iter()
            .find(|p| lw.starts_with(*p))
            .map(|_| (if lw.starts_with("feature") { 1 } else { 2 }, t.to_string()))
        } else {
            let hashes = t.chars().take_while(|c| *c == '#').count();
            if (1..=6).contains(&hashes) && t[hashes..].starts_with(' ') {
                Some((
                    hashes as u8,
                    t[hashes..].trim().trim_end_matches('#').trim().to_string(),
                ))
            } else {
                None
            }
        };
        if let Some((level, h)) = heading {
            sections.push(std::mem::replace(
                &mut cur,
                SectionText {
                    heading: strip_links(&h),
                    key: None,
                    level,
                    ancestors: Vec::new(),
                    text: String::new(),
                    line: fm_lines + i + 1,
                    end: 0,
                },
            ));
            while stack.last().is_some_and(|(l, _)| *l >= level) {
                stack.pop();
            }
            cur.ancestors = stack.iter().skip(1).map(|(_, h)| h.clone()).collect();
            stack.push((level, strip_links(&h)));
            continue;
        }
        cur.text.push_str(&strip_links(line));
        cur.text.push('\n');
    }
    sections.push(cur);
    sections.retain(|s| !(s.heading.is_empty() && s.text.trim().is_empty()));
    for s in &mut sections {
        s.text = s.text.trim().to_string();
    }
    (IndexedFields::new(), sections)
}

/// `[[Target|alias]]` → `alias`, `[[Target]]` → `Target`, `[[d::T]]` → `T`.
pub fn strip_links(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("[[") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        match after.find("]]") {
            Some(j) => {
                let inner = &after[..j];
                let shown = inner.rsplit('|').next().unwrap_or(inner);
                let shown = shown.rsplit("::").next().unwrap_or(shown);
                let shown = shown.split('#').next().unwrap_or(shown);
                out.push_str(shown);
                rest = &after[j + 2..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_section_ends_on_its_last_written_line() {
        let spec = "# T\n\n## A\n\nfirst\n\n## B\n\n```\ncode\n```\n\n";
        let (_, s) = fallback_sections("x.md", spec);
        let s = set_ends(s, spec.as_bytes());
        let by: Vec<(&str, usize, usize)> = s
            .iter()
            .map(|s| (s.heading.as_str(), s.line, s.end))
            .collect();
        assert_eq!(by, vec![("T", 1, 1), ("A", 3, 5), ("B", 7, 11)]);
        // Classic Mac line endings (a lone CR): the same lines, as the parser counts them (red
        // team: every span ended on its heading line).
        let mac = spec.replace('\n', "\r");
        let s = set_ends(s, mac.as_bytes());
        let ends: Vec<usize> = s.iter().map(|s| s.end).collect();
        assert_eq!(ends, vec![1, 5, 11]);
    }

    #[test]
    fn sections_skip_fences_and_front_matter() {
        let (_, s) = fallback_sections(
            "specs/x.md",
            "---\nid: X\n---\n# Title\n\nIntro [[Pedido|el pedido]].\n\n## Flujo\n\n```yaml\n# not a heading\n```\n\n### Paso\n\ntexto\n",
        );
        let heads: Vec<&str> = s.iter().map(|s| s.heading.as_str()).collect();
        assert_eq!(heads, vec!["Title", "Flujo", "Paso"]);
        assert_eq!(s[0].text, "Intro el pedido.");
        assert_eq!(s[2].ancestors, vec!["Flujo".to_string()]);
        assert_eq!(s[0].line, 4);
    }
}
