//! The module graph stays a pipeline, no source file grows past 600 lines and no function past 100 (data tables marked `// table:` aside): no module under `src/` uses (`crate::<module>`) a module
//! of a higher layer. The layer table is the one in ARCHITECTURE.md (between `<!-- layers -->`
//! and the end of its code block), so the document and the code cannot drift apart.

use crate::util::crate_root;
use std::collections::BTreeMap;
use std::path::Path;

fn layers() -> BTreeMap<String, usize> {
    let arch =
        std::fs::read_to_string(crate_root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let start = arch.find("<!-- layers -->").expect("layer table marker");
    let block = &arch[start..];
    let open = block.find("```text\n").expect("layer code block") + "```text\n".len();
    let close = block[open..].find("```").expect("end of layer block") + open;
    let mut order = BTreeMap::new();
    for (i, line) in block[open..close]
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
    {
        let (_, names) = line.split_once(':').expect("`N: modules`");
        for n in names.split_whitespace() {
            order.insert(n.to_string(), i);
        }
    }
    order
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The `crate::<name>` references of a line of code (comments dropped).
fn uses(line: &str) -> Vec<&str> {
    let code = line.split("//").next().unwrap_or("");
    code.match_indices("crate::")
        .map(|(i, _)| {
            let rest = &code[i + "crate::".len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect()
}

#[test]
fn no_module_imports_one_above_it() {
    let order = layers();
    let src = crate_root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut bad = Vec::new();
    let mut unknown = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let top = top.trim_end_matches(".rs").to_string();
        if top == "bin" || top == "lib" {
            continue;
        }
        let Some(&mine) = order.get(&top) else {
            unknown.push(top);
            continue;
        };
        for (n, line) in std::fs::read_to_string(f).unwrap().lines().enumerate() {
            for used in uses(line) {
                if let Some(&theirs) = order.get(used) {
                    if theirs > mine {
                        bad.push(format!(
                            "{}:{}: {top} (layer {mine}) uses {used} (layer {theirs})",
                            rel.display(),
                            n + 1
                        ));
                    }
                }
            }
        }
    }
    unknown.sort();
    unknown.dedup();
    assert!(
        unknown.is_empty(),
        "modules missing from ARCHITECTURE.md's layer table: {unknown:?}"
    );
    assert!(bad.is_empty(), "upward imports:\n{}", bad.join("\n"));
}

#[test]
fn no_source_file_over_600_lines() {
    let mut files = Vec::new();
    rust_files(&crate_root().join("src"), &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > 600).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "split these files: {long:?}");
}

/// A line with string and char literals emptied and the comment dropped, for brace counting.
fn code_of(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                // Skip to the closing quote (escapes honoured).
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                out.push_str("\"\"");
            }
            '\'' => {
                // A char literal ('x', '\n', '{') — not a lifetime ('a).
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') || rest.chars().nth(1) == Some('\'') {
                    while let Some(d) = chars.next() {
                        if d == '\\' {
                            chars.next();
                        } else if d == '\'' {
                            break;
                        }
                    }
                    out.push_str("''");
                } else {
                    out.push(c);
                }
            }
            '/' if chars.peek() == Some(&'/') => break,
            _ => out.push(c),
        }
    }
    out
}

/// Functions (`fn name`) of one file longer than `limit` lines, from the `fn` line to its
/// closing brace. A function preceded by a `// table:` comment (a data table written as code)
/// is exempt.
fn long_functions(text: &str, limit: usize) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let t = t.strip_prefix("pub(crate) ").unwrap_or(t);
        let t = t.strip_prefix("pub(super) ").unwrap_or(t);
        let t = t.strip_prefix("pub ").unwrap_or(t);
        let t = t.strip_prefix("async ").unwrap_or(t);
        let Some(rest) = t.strip_prefix("fn ") else {
            continue;
        };
        if i > 0 && lines[i - 1].trim_start().starts_with("// table:") {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let (mut depth, mut opened) = (0i64, false);
        for (j, l) in lines.iter().enumerate().skip(i) {
            let code = code_of(l);
            depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
            opened |= code.contains('{');
            if !opened && code.trim_end().ends_with(';') {
                break;
            }
            if opened && depth <= 0 {
                let n = j - i + 1;
                if n > limit {
                    out.push((i + 1, name.clone(), n));
                }
                break;
            }
        }
    }
    out
}

#[test]
fn no_function_over_100_lines() {
    let mut files = Vec::new();
    rust_files(&crate_root().join("src"), &mut files);
    let mut long = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, name, n) in long_functions(&text, 100) {
            long.push(format!("{}:{line} {name} ({n} lines)", f.display()));
        }
    }
    assert!(
        long.is_empty(),
        "split these functions:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_function_length_check_counts_braces_in_code_only() {
    let text = "fn a() {\n    let s = \"{{{\";\n    let c = '{';\n    // {\n}\nfn b<'a>(x: &'a str) {\n    x;\n}\n";
    assert!(long_functions(text, 1)
        .iter()
        .any(|(_, n, len)| n == "a" && *len == 5));
    assert!(long_functions(text, 1)
        .iter()
        .any(|(_, n, len)| n == "b" && *len == 3));
    assert!(long_functions(text, 5).is_empty());
}
