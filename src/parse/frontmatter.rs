//! YAML front-matter: split the `---` block from the body and convert it to JSON values.
//!
//! The YAML is loaded only through the bounded loader ([`super::yaml`]); a document over its
//! budget (alias bomb, absurd nesting) is a fatal [`FmError`]: the file is not indexed.

use serde_json::{Map, Number, Value};
use yaml_rust2::Yaml;

/// The result of splitting a file into front-matter and body.
#[derive(Debug, Clone)]
pub struct Split<'a> {
    /// True when the file starts with a `---` line.
    pub present: bool,
    /// YAML text between the fences (empty when absent).
    pub yaml: &'a str,
    /// 1-based line of the first YAML line.
    pub yaml_line: usize,
    /// Markdown after the closing fence.
    pub body: &'a str,
    /// 1-based line of the first body line.
    pub body_line: usize,
    /// Set when the opening fence is never closed.
    pub unterminated: bool,
}

/// A front-matter problem, with the 1-based line when known.
#[derive(Debug, Clone)]
pub struct FmError {
    pub line: Option<usize>,
    pub message: String,
    /// Set when the YAML is over the parsing budget: the whole file is refused.
    pub fatal: bool,
}

/// Split `text` at its front-matter fences (`---` … `---` or `...`).
pub fn split(text: &str) -> Split<'_> {
    let absent = Split {
        present: false,
        yaml: "",
        yaml_line: 1,
        body: text,
        body_line: 1,
        unterminated: false,
    };
    let first_end = text.find('\n').unwrap_or(text.len());
    if text[..first_end].trim_end() != "---" {
        return absent;
    }
    let yaml_start = (first_end + 1).min(text.len());
    let mut pos = yaml_start;
    let mut line = 2;
    while pos < text.len() {
        let end = text[pos..].find('\n').map_or(text.len(), |i| pos + i);
        let l = text[pos..end].trim_end();
        if l == "---" || l == "..." {
            let body_start = (end + 1).min(text.len());
            return Split {
                present: true,
                yaml: &text[yaml_start..pos],
                yaml_line: 2,
                body: &text[body_start..],
                body_line: line + 1,
                unterminated: false,
            };
        }
        pos = end + 1;
        line += 1;
    }
    Split {
        unterminated: true,
        present: true,
        ..absent
    }
}

impl Split<'_> {
    /// Parse the YAML into a JSON object (empty when absent).
    pub fn parse(&self) -> Result<Map<String, Value>, FmError> {
        if self.unterminated {
            return Err(FmError {
                line: Some(1),
                message: "front-matter `---` is never closed; the whole file was read as Markdown — add the closing `---` line".into(),
                fatal: false,
            });
        }
        if !self.present || self.yaml.trim().is_empty() {
            return Ok(Map::new());
        }
        let docs = super::yaml::load(self.yaml).map_err(|e| match e {
            super::yaml::Error::Syntax(e) => FmError {
                line: Some(self.yaml_line + e.marker().line().saturating_sub(1)),
                message: format!(
                    "malformed YAML front-matter ({}); kind, id and status from it are ignored — fix the YAML",
                    e.info()
                ),
                fatal: false,
            },
            e => FmError {
                line: Some(self.yaml_line),
                message: format!(
                    "front-matter: {e}; this file was not indexed — {}",
                    e.remedy()
                ),
                fatal: true,
            },
        })?;
        match docs.into_iter().next() {
            None | Some(Yaml::Null) => Ok(Map::new()),
            Some(Yaml::Hash(h)) => {
                let mut m = Map::new();
                for (k, v) in h {
                    m.insert(key_string(&k), to_json(v));
                }
                Ok(m)
            }
            Some(_) => Err(FmError {
                line: Some(self.yaml_line),
                message: "front-matter is not a YAML mapping (`key: value` lines); ignored".into(),
                fatal: false,
            }),
        }
    }
}

fn key_string(k: &Yaml) -> String {
    match k {
        Yaml::String(s) | Yaml::Real(s) => s.clone(),
        Yaml::Integer(i) => i.to_string(),
        Yaml::Boolean(b) => b.to_string(),
        _ => String::new(),
    }
}

/// Convert a YAML value to JSON (aliases and bad values become `null`).
pub fn to_json(y: Yaml) -> Value {
    match y {
        Yaml::String(s) => Value::String(s),
        Yaml::Integer(i) => Value::Number(i.into()),
        Yaml::Real(s) => s
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map_or(Value::String(s), Value::Number),
        Yaml::Boolean(b) => Value::Bool(b),
        Yaml::Array(a) => Value::Array(a.into_iter().map(to_json).collect()),
        Yaml::Hash(h) => Value::Object(
            h.into_iter()
                .map(|(k, v)| (key_string(&k), to_json(v)))
                .collect(),
        ),
        Yaml::Alias(_) | Yaml::Null | Yaml::BadValue => Value::Null,
    }
}

/// A scalar front-matter value as a string (numbers and booleans converted).
pub fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.trim().to_string()).filter(|s| !s.is_empty()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A front-matter value as a list of strings: a sequence, or one scalar (never split into chars).
pub fn string_list(v: &Value) -> Vec<String> {
    match v {
        Value::Array(a) => a.iter().filter_map(scalar).collect(),
        Value::Object(m) => m.values().flat_map(string_list).collect(),
        other => scalar(other).into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_parse() {
        let s = split("---\nid: UC-001\nn: 3\n---\n# T\n");
        assert!(s.present);
        assert_eq!(s.body, "# T\n");
        assert_eq!(s.body_line, 5);
        let m = s.parse().unwrap();
        assert_eq!(m["id"], "UC-001");
        assert_eq!(scalar(&m["n"]).as_deref(), Some("3"));
        let s = split("# no fm\n");
        assert!(!s.present);
        let s = split("---\nid: x\n");
        assert!(s.unterminated && s.parse().is_err());
        let s = split("---\na: 1\nb: [x\n---\n");
        let e = s.parse().unwrap_err();
        assert!(e.line.unwrap() >= 2, "{e:?}");
        assert_eq!(string_list(&Value::String("Orden".into())), vec!["Orden"]);
    }
}
