//! Request bodies shared by the HTTP API and the MCP tools, their strict validation, and the
//! calls into [`crate::query`].
//!
//! Every body rejects unknown fields and checks every range of QRY-001…007 before the query
//! runs, so a client learns which parameter is wrong from a stable error `code`
//! (`QUERY_TOO_SHORT`, `INVALID_DEPTH`, `INVALID_KIND`, `UNKNOWN_PARAMETER`…). Errors never
//! carry server paths: messages are built here or come from the query layer, whose
//! `INDEX_UNAVAILABLE` text (which names the index directory) is replaced by a fixed sentence.

mod bodies;

pub use bodies::*;

use crate::query::{self, types::*};
use crate::spec::{Kind, Layer};
use serde::Deserialize;

/// An API error: HTTP status, stable code and a message safe to show a client.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub code: String,
    pub message: String,
}

impl ApiError {
    pub fn new(status: u16, code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code: code.to_string(),
            message: message.into(),
        }
    }

    /// 400 with a code.
    pub fn bad(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(400, code, message)
    }

    /// The index is missing or cannot be opened (503).
    pub fn unavailable() -> ApiError {
        ApiError::new(
            503,
            "INDEX_UNAVAILABLE",
            "No index available for querying (run `kdd index` and commit `.kdd-index/`)",
        )
    }

    /// An internal failure; the detail goes to the server log only.
    pub fn internal() -> ApiError {
        ApiError::new(
            500,
            "INTERNAL",
            "internal error (see the server log with this request id)",
        )
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl From<query::Error> for ApiError {
    fn from(e: query::Error) -> ApiError {
        let code = e.code();
        // `CODE: message` → keep the message part only (the code is separate).
        let text = e.to_string();
        let msg = text
            .strip_prefix(code)
            .and_then(|m| m.strip_prefix(": "))
            .unwrap_or(&text)
            .to_string();
        match e {
            query::Error::IndexUnavailable(_) => ApiError::unavailable(),
            // The index exists but its query cache could not be read or rebuilt (a damaged
            // cache is rebuilt by itself first): say so, not "run kdd index".
            query::Error::Cache(_) => ApiError::new(
                503,
                code,
                "the query cache could not be opened or rebuilt (see the server log)",
            ),
            query::Error::NodeNotFound(_) => ApiError::new(404, code, msg),
            query::Error::NoEmbeddings(_) | query::Error::UnknownKind(_) => {
                ApiError::new(422, code, msg)
            }
            query::Error::Ambiguous { .. } => ApiError::new(409, code, msg),
            _ => ApiError::bad(code, msg),
        }
    }
}

impl From<crate::cache::Error> for ApiError {
    fn from(e: crate::cache::Error) -> ApiError {
        ApiError::from(query::Error::from(e))
    }
}

type R<T> = Result<T, ApiError>;

/// A list of strings given as a JSON array or one comma-separated string.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum StrList {
    #[default]
    None,
    One(String),
    Many(Vec<String>),
}

impl StrList {
    /// The items, split on commas, trimmed, empties dropped.
    pub fn items(&self) -> Vec<String> {
        let raw: Vec<&str> = match self {
            StrList::None => Vec::new(),
            StrList::One(s) => vec![s.as_str()],
            StrList::Many(v) => v.iter().map(String::as_str).collect(),
        };
        raw.iter()
            .flat_map(|s| s.split(','))
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    }
}

/// Parse kind names (`use-case`, `business_rule`, `entity`); unknown → `INVALID_KIND`.
pub fn parse_kinds(list: &StrList) -> R<Vec<Kind>> {
    list.items()
        .iter()
        .map(|s| {
            Kind::parse(s).ok_or_else(|| {
                ApiError::bad(
                    "INVALID_KIND",
                    format!(
                        "unknown kind `{}`; use one of: {}",
                        clip(s, 40),
                        Kind::ALL
                            .iter()
                            .map(|k| k.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })
        })
        .collect()
}

/// Parse layer names (`01-domain`, `01`, `domain`); unknown → `INVALID_LAYER`.
pub fn parse_layers(list: &StrList) -> R<Vec<Layer>> {
    list.items()
        .iter()
        .map(|s| {
            Layer::parse(s).ok_or_else(|| {
                ApiError::bad(
                    "INVALID_LAYER",
                    format!(
                        "unknown layer `{}`; use 00-requirements, 01-domain, 02-behavior, \
                         03-experience, 04-verification or 05-architecture",
                        clip(s, 40)
                    ),
                )
            })
        })
        .collect()
}

fn clip(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

fn int_in(name: &str, v: Option<i64>, default: i64, lo: i64, hi: i64, code: &str) -> R<i64> {
    let v = v.unwrap_or(default);
    if v < lo || v > hi {
        return Err(ApiError::bad(
            code,
            format!("`{name}` must be between {lo} and {hi} (got {v})"),
        ));
    }
    Ok(v)
}

fn query_text(q: &Option<String>) -> R<String> {
    let q = q.as_deref().unwrap_or("").trim();
    if q.is_empty() {
        return Err(ApiError::bad(
            "QUERY_MISSING",
            "`query` is required: the question or keywords to search for",
        ));
    }
    if query::too_short(q) {
        return Err(ApiError::bad(
            "QUERY_TOO_SHORT",
            "Query text must have at least 3 letters or digits",
        ));
    }
    if q.len() > 2000 {
        return Err(ApiError::bad(
            "QUERY_TOO_LONG",
            "Query text must be at most 2000 bytes",
        ));
    }
    Ok(q.to_string())
}

fn node_arg(n: &Option<String>) -> R<String> {
    let n = n.as_deref().unwrap_or("").trim();
    if n.is_empty() {
        return Err(ApiError::bad(
            "MISSING_NODE",
            "`node` is required: a full id like `Entity:Pedido`, a short id like `UC-004`, a \
             file stem or a spec path",
        ));
    }
    if n.len() > 512 {
        return Err(ApiError::bad("INVALID_NODE", "`node` is too long"));
    }
    Ok(n.to_string())
}

/// Token budget bounds shared by every endpoint.
pub const MIN_TOKENS: i64 = 100;
pub const MAX_TOKENS: i64 = 50_000;

/// Paging offset of list answers (`offset`, 0–100000).
pub fn offset_of(v: Option<i64>) -> R<usize> {
    Ok(int_in("offset", v, 0, 0, 100_000, "INVALID_OFFSET")? as usize)
}

/// Decode a JSON body strictly: unknown fields → `UNKNOWN_PARAMETER`, wrong types →
/// `INVALID_PARAMETER`, not JSON → `INVALID_JSON`.
pub fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> R<T> {
    let bytes = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}".as_slice()
    } else {
        bytes
    };
    serde_json::from_slice(bytes).map_err(json_error)
}

/// Decode a JSON value (MCP arguments) strictly.
pub fn decode_value<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> R<T> {
    serde_json::from_value(v).map_err(json_error)
}

fn json_error(e: serde_json::Error) -> ApiError {
    let msg = e.to_string();
    // serde messages name the field and the expected type; never paths.
    let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
    if msg.starts_with("unknown field") {
        ApiError::bad("UNKNOWN_PARAMETER", msg)
    } else if e.is_syntax() || e.is_eof() {
        ApiError::bad(
            "INVALID_JSON",
            format!("request body is not valid JSON: {msg}"),
        )
    } else {
        ApiError::bad("INVALID_PARAMETER", msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_too_short_and_alias() {
        let b: ContextBody = decode(br#"{"query_text":"ab"}"#).unwrap();
        assert_eq!(b.plan(8000).unwrap_err().code, "QUERY_TOO_SHORT");
        let b: ContextBody = decode(br#"{"query_text":"pedido"}"#).unwrap();
        assert_eq!(b.plan(8000).unwrap().req.query, "pedido");
    }

    #[test]
    fn ranges_and_unknown_fields() {
        let b: ContextBody = decode(br#"{"query":"pedido","depth":9}"#).unwrap();
        assert_eq!(b.plan(8000).unwrap_err().code, "INVALID_DEPTH");
        let b: ContextBody = decode(br#"{"query":"pedido","limit":0}"#).unwrap();
        assert_eq!(b.plan(8000).unwrap_err().code, "INVALID_LIMIT");
        let b: ContextBody = decode(br#"{"query":"pedido","min_score":2}"#).unwrap();
        assert_eq!(b.plan(8000).unwrap_err().code, "INVALID_MIN_SCORE");
        let e = decode::<ContextBody>(br#"{"query":"pedido","bogus":1}"#).unwrap_err();
        assert_eq!(e.code, "UNKNOWN_PARAMETER");
        let e = decode::<ContextBody>(br#"{"query":"pedido","depth":"x"}"#).unwrap_err();
        assert_eq!(e.code, "INVALID_PARAMETER");
        let e = decode::<ContextBody>(b"{not json").unwrap_err();
        assert_eq!(e.code, "INVALID_JSON");
        let b: ContextBody =
            decode(br#"{"query":"pedido","include_kinds":["use-case","nope"]}"#).unwrap();
        assert_eq!(b.plan(8000).unwrap_err().code, "INVALID_KIND");
    }

    #[test]
    fn lists_accept_commas() {
        let b: ContextBody =
            decode(br#"{"query":"pedido","include_kinds":"entity, use-case","layers":["01"]}"#)
                .unwrap();
        let p = b.plan(8000).unwrap();
        assert_eq!(p.req.kinds, vec![Kind::Entity, Kind::UseCase]);
        assert_eq!(p.req.layers, vec![Layer::Domain]);
    }

    #[test]
    fn hints_required() {
        let b: HintsBody = decode(br#"{"hints":[]}"#).unwrap();
        assert_eq!(b.validate(4000).unwrap_err().code, "EMPTY_HINTS");
        let b: HintsBody = decode(br#"{"hints":["pedido.ts"],"depth":4}"#).unwrap();
        assert_eq!(b.validate(4000).unwrap_err().code, "INVALID_DEPTH");
    }
}
