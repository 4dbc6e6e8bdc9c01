//! The MCP tool catalogue: names, descriptions and JSON schemas of the `kdd_*` tools, all
//! annotated read-only, idempotent and closed-world. Arguments are named like the HTTP bodies.

use super::super::api;
use super::MAX_TOKENS;
use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{json, Map, Value};
use std::sync::Arc;

fn schema(v: Value) -> Arc<Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(Map::new()),
    }
}

fn ro(title: &str) -> ToolAnnotations {
    ToolAnnotations::with_title(title)
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
}

fn p_kinds() -> Value {
    json!({"type": "array", "items": {"type": "string"},
        "description": "Only these kinds, e.g. [\"use-case\", \"business-rule\", \"entity\", \"command\", \"event\"]. Omit for all."})
}
fn p_layers() -> Value {
    json!({"type": "array", "items": {"type": "string"},
        "description": "Only these layers: 00-requirements, 01-domain, 02-behavior, 03-experience, 04-verification, 05-architecture. Omit for all."})
}
fn p_node() -> Value {
    json!({"type": "string", "minLength": 1,
        "description": "The node: full id (`Entity:Pedido`, `UC:UC-004`), short id (`UC-004`), file stem, title or spec path."})
}
fn p_tokens() -> Value {
    json!({"type": "integer", "minimum": api::MIN_TOKENS, "maximum": MAX_TOKENS,
        "description": "Token budget of the answer (default 4000). Long lists are paged, not cut."})
}
fn p_offset() -> Value {
    json!({"type": "integer", "minimum": 0,
        "description": "Paging: skip this many list items (use `page.next_offset` of the previous answer)."})
}

// table: every tool's name, description and input schema.
pub(super) fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "kdd_query",
            "Search the KDD specs (hybrid: lexical + semantic + typed graph expansion). The main \
             entry point: describe the task in natural language and get the most relevant spec \
             nodes (use cases, rules, entities, commands, events…) with snippets. Ask in English \
             or Spanish: a question in the other language of the specs is also searched \
             translated (a QUERY_TRANSLATED warning quotes it). Each result cites its best \
             evidence: `section` (heading path) and `lines` [start, end] in `source_file`; \
             `score` is a calibrated confidence (an empty answer with NO_MATCH means nothing \
             matched). To improve recall, add `keywords`, a `hypothetical_answer` and, when \
             you ask in another language than the specs', your own `translation`; the answer's \
             `expanded_with` lists what was used, and `read_as` how the question itself \
             steered the ranking (an identifier it names, a kind it asks for). Follow up with kdd_read for full text or \
             kdd_graph/kdd_impact for relations.",
            schema(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 3, "description": "What you are looking for, in natural language (≥ 3 characters), e.g. \"cancel an order\"."},
                    "include_kinds": p_kinds(),
                    "layers": p_layers(),
                    "domain": {"type": "string", "description": "Only this domain (multi-domain repos)."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "Maximum results (default 10)."},
                    "min_score": {"type": "number", "minimum": 0, "maximum": 1, "description": "Drop results below this calibrated score (default 0.10). Scores are absolute confidences comparable across questions: ≥ 0.6 is a strong match, < 0.10 no match (the answer is then empty with a NO_MATCH warning)."},
                    "depth": {"type": "integer", "minimum": 1, "maximum": 5, "description": "Graph expansion depth (default 2)."},
                    "expand_graph": {"type": "boolean", "description": "Add nodes linked to the top hits (default true)."},
                    "respect_layers": {"type": "boolean", "description": "Skip links that violate the KDD layer rule while expanding (default true)."},
                    "strategy": {"type": "string", "enum": ["hybrid", "semantic", "lexical"], "description": "Retrieval strategy (default hybrid)."},
                    "max_tokens": p_tokens(),
                    "offset": {"type": "integer", "minimum": 0, "maximum": 99, "description": "Skip this many results (paging)."},
                    "keywords": {"type": "array", "items": {"type": "string", "maxLength": 2000}, "maxItems": 20, "description": "Optional extra lexical queries: ids, names and terms the specs are likely to use (e.g. [\"BR-ORDER-002\", \"refund window\"]). Searched with the question."},
                    "hypothetical_answer": {"type": "string", "maxLength": 2000, "description": "Optional: a short passage written like the spec that would answer (2-3 sentences in the specs' style and language). Searched with the question; helps paraphrased questions."},
                    "translation": {"type": "string", "maxLength": 2000, "description": "Optional: the question rendered in the specs' language when you ask in another one (replaces the built-in machine translation)."}
                },
                "required": ["query"],
                "additionalProperties": false
            })),
        )
        .annotate(ro("Search KDD specs")),
        Tool::new(
            "kdd_context",
            "Before changing code: give hints (file paths you will touch, entity names, \
             keywords) and get the constraints (business rules, policies, invariants, command \
             pre/postconditions) and behaviour (use cases) that apply, each with how it was \
             reached.",
            schema(json!({
                "type": "object",
                "properties": {
                    "hints": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "File paths (relative to the repository root, or absolute inside it), node ids, entity names or keywords, e.g. [\"src/orders/pedido.ts\", \"checkout\"]."},
                    "depth": {"type": "integer", "minimum": 1, "maximum": 3, "description": "Graph traversal depth (default 1)."},
                    "max_tokens": p_tokens()
                },
                "required": ["hints"],
                "additionalProperties": false
            })),
        )
        .annotate(ro("Constraints for a change")),
        Tool::new(
            "kdd_graph",
            "Nodes and typed edges around one node (QRY-001), e.g. the rules, events and use \
             cases linked to an entity.",
            schema(json!({
                "type": "object",
                "properties": {
                    "node": p_node(),
                    "depth": {"type": "integer", "minimum": 1, "maximum": 5, "description": "Hops from the node (default 2)."},
                    "edge_types": {"type": "array", "items": {"type": "string"}, "description": "Only these edge types, e.g. [\"ENTITY_RULE\", \"EMITS\"]. Omit for all."},
                    "kinds": p_kinds(),
                    "respect_layers": {"type": "boolean", "description": "Skip layer-violating edges (default true)."},
                    "max_tokens": p_tokens(),
                    "offset": p_offset()
                },
                "required": ["node"],
                "additionalProperties": false
            })),
        )
        .annotate(ro("Graph around a node")),
        Tool::new(
            "kdd_impact",
            "What depends on a node (QRY-004): directly and transitively affected specs and the \
             BDD scenarios to re-run if it changes.",
            schema(json!({
                "type": "object",
                "properties": {
                    "node": p_node(),
                    "change_type": {"type": "string", "enum": ["modify_attribute", "add_attribute", "remove", "rename"], "description": "Kind of change (default modify_attribute)."},
                    "depth": {"type": "integer", "minimum": 1, "maximum": 5, "description": "Propagation depth (default 3)."},
                    "max_tokens": p_tokens(),
                    "offset": p_offset()
                },
                "required": ["node"],
                "additionalProperties": false
            })),
        )
        .annotate(ro("Impact of a change")),
        Tool::new(
            "kdd_coverage",
            "Governance coverage of a node (QRY-005): which expected related specs exist \
             (e.g. an entity's events and rules, a use case's rules and scenarios) and which are \
             missing.",
            schema(json!({
                "type": "object",
                "properties": {"node": p_node()},
                "required": ["node"],
                "additionalProperties": false
            })),
        )
        .annotate(ro("Coverage of a node")),
        Tool::new(
            "kdd_violations",
            "Links that break the KDD layer rule (QRY-006: a lower layer referencing a higher \
             one, e.g. 01-domain → 02-behavior).",
            schema(json!({
                "type": "object",
                "properties": {
                    "kinds": p_kinds(),
                    "layers": p_layers(),
                    "max_tokens": p_tokens(),
                    "offset": p_offset()
                },
                "additionalProperties": false
            })),
        )
        .annotate(ro("Layer violations")),
        Tool::new(
            "kdd_read",
            "Read a spec: the sections of a node (or of a spec file under the specs root), or \
             just one section (by heading, heading path or line: a kdd_query hit's `section` / \
             `lines[0]` read just its cited evidence). Use after kdd_query to read the full text.",
            schema(json!({
                "type": "object",
                "properties": {
                    "node": {"type": "string", "description": "Node id, short id, stem or title (give this or `path`)."},
                    "path": {"type": "string", "description": "Spec file path relative to the specs root, e.g. \"01-domain/entities/Pedido.md\", or a result's `source_file` as the other tools return it (\"specs/01-domain/entities/Pedido.md\"); no `..`, no absolute paths."},
                    "section": {"type": "string", "description": "Only this section: a heading (\"Invariants\", \"Flujo Principal\") or a canonical key (invariants, main_flow, preconditions…)."},
                    "line": {"type": "integer", "minimum": 1, "description": "Only the section whose heading is on this line: pass a kdd_query hit's lines[0] to read just its cited evidence."},
                    "max_tokens": p_tokens(),
                    "offset": p_offset()
                },
                "additionalProperties": false
            })),
        )
        .annotate(ro("Read a spec")),
        Tool::new(
            "kdd_list",
            "List spec nodes (id, kind, title, layer, file), filtered by kind, layer or domain, \
             sorted by id, paged.",
            schema(json!({
                "type": "object",
                "properties": {
                    "kinds": p_kinds(),
                    "layers": p_layers(),
                    "domain": {"type": "string", "description": "Only this domain."},
                    "page_size": {"type": "integer", "minimum": 1, "maximum": 200, "description": "Items per page (default 50)."},
                    "max_tokens": p_tokens(),
                    "offset": p_offset()
                },
                "additionalProperties": false
            })),
        )
        .annotate(ro("List spec nodes")),
        Tool::new(
            "kdd_status",
            "Index status: level (L1 graph+lexical / L2 with embeddings), node/edge counts per \
             kind, orphan links, layer violations, and freshness (specs changed since they were \
             indexed).",
            schema(json!({"type": "object", "properties": {}, "additionalProperties": false})),
        )
        .annotate(ro("Index status")),
    ]
}
