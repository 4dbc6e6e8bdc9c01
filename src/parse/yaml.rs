//! Bounded YAML: the only way spec front-matter and `_kdd.yaml` are loaded.
//!
//! yaml-rust2's loader copies the anchored node at every alias, so a ~600-byte "billion laughs"
//! document expands to gigabytes. [`load`] first streams the document through yaml-rust2's event
//! parser (linear in the input, nothing built) and computes the size the loaded value WOULD
//! have — every alias counts the full size of its anchor — and its nesting depth. Only a document
//! within [`MAX_NODES`] and [`MAX_DEPTH`] is then handed to the loader, whose output is therefore
//! bounded by the same budget. Pure; never panics.

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, ScanError};
use yaml_rust2::{Yaml, YamlLoader};

/// Most YAML nodes (scalars, sequences, mappings; aliases counted expanded) one document may load.
pub const MAX_NODES: u64 = 20_000;
/// Deepest nesting of sequences/mappings.
pub const MAX_DEPTH: usize = 64;

/// Why a YAML text was not loaded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Syntax(#[from] ScanError),
    #[error("YAML would expand to over {MAX_NODES} nodes (aliases of anchors count in full, e.g. a \"billion laughs\" document); refused")]
    TooManyNodes,
    #[error("YAML holds over {MAX_NODES} nodes (keys, values and list items); refused")]
    TooLarge,
    #[error("YAML is nested deeper than {MAX_DEPTH} levels; refused")]
    TooDeep,
}

impl Error {
    /// What the author can do about a refused document.
    pub fn remedy(&self) -> &'static str {
        match self {
            Error::Syntax(_) => "fix the YAML",
            Error::TooManyNodes => "remove the anchors and aliases",
            Error::TooLarge => "move the data out of the front-matter into the body",
            Error::TooDeep => "flatten the nesting",
        }
    }

    /// 0-based line of a syntax error.
    pub fn line(&self) -> Option<usize> {
        match self {
            Error::Syntax(e) => Some(e.marker().line()),
            _ => None,
        }
    }
}

#[derive(Default)]
struct Budget {
    /// Expanded node count so far.
    total: u64,
    /// Open collections: (anchor id, total when opened).
    open: Vec<(usize, u64)>,
    /// Expanded size of each anchor seen.
    anchors: std::collections::HashMap<usize, u64>,
    /// An alias was met (a refusal then blames them).
    aliases: bool,
    too_deep: bool,
}

impl Budget {
    fn node(&mut self, anchor: usize, size: u64) {
        self.total = self.total.saturating_add(size);
        if anchor > 0 {
            self.anchors.insert(anchor, size);
        }
    }
}

impl MarkedEventReceiver for Budget {
    fn on_event(&mut self, ev: Event, _mark: Marker) {
        if self.total > MAX_NODES || self.too_deep {
            return;
        }
        match ev {
            Event::Scalar(_, _, anchor, _) => self.node(anchor, 1),
            Event::Alias(id) => {
                self.aliases = true;
                let size = self.anchors.get(&id).copied().unwrap_or(1);
                self.total = self.total.saturating_add(size);
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                self.open.push((anchor, self.total));
                if self.open.len() > MAX_DEPTH {
                    self.too_deep = true;
                }
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((anchor, start)) = self.open.pop() {
                    let size = self.total - start + 1;
                    self.total = start;
                    self.node(anchor, size);
                }
            }
            _ => {}
        }
    }
}

/// Load every document of `text` within the budget (see the module doc).
pub fn load(text: &str) -> Result<Vec<Yaml>, Error> {
    let mut budget = Budget::default();
    Parser::new_from_str(text).load(&mut budget, true)?;
    if budget.too_deep {
        return Err(Error::TooDeep);
    }
    if budget.total > MAX_NODES {
        return Err(if budget.aliases {
            Error::TooManyNodes
        } else {
            Error::TooLarge
        });
    }
    Ok(YamlLoader::load_from_str(text)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bomb(levels: usize) -> String {
        let mut s = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for i in 1..levels {
            let refs = vec![format!("*a{}", i - 1); 9].join(", ");
            s.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        s
    }

    #[test]
    fn billion_laughs_is_refused_fast() {
        let text = bomb(9);
        assert!(text.len() < 700, "{}", text.len());
        let t = std::time::Instant::now();
        assert!(matches!(load(&text), Err(Error::TooManyNodes)));
        assert!(t.elapsed().as_millis() < 500);
        // A few aliases are fine.
        let ok = load("base: &b {x: 1}\nuse: *b\nlist: [*b, *b]\n").unwrap();
        assert_eq!(ok.len(), 1);
        assert!(load(&bomb(3)).is_ok());
        // Plain size without aliases is refused under its own name.
        let keys: String = (0..20_001).map(|i| format!("k{i}: v\n")).collect();
        assert!(matches!(load(&keys), Err(Error::TooLarge)));
    }

    #[test]
    fn depth_and_syntax() {
        let deep = format!("k: {}{}", "[".repeat(200), "]".repeat(200));
        assert!(load(&deep).is_err());
        let e = load("a: [x\n").unwrap_err();
        assert!(matches!(e, Error::Syntax(_)));
        assert!(load("a: 1\n").is_ok());
    }
}
