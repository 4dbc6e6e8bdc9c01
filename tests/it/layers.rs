//! The module graph stays a pipeline, and no source file grows past 600 lines: no module under `src/` uses (`crate::<module>`) a module
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
