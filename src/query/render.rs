//! Text renderings of query answers: Mermaid and DOT graphs, YAML (from any serde value) and
//! the markdown "context pack" an agent can paste.

use super::types::{ContextResponse, GraphResponse};
use serde_json::Value;

fn mermaid_id(i: usize) -> String {
    format!("n{i}")
}

fn esc_mermaid(s: &str) -> String {
    s.replace('"', "#quot;")
}

/// `graph LR` Mermaid diagram of a graph answer.
pub fn mermaid(g: &GraphResponse) -> String {
    let mut ids: Vec<&str> = vec![g.center_node.id.as_str()];
    ids.extend(g.related_nodes.iter().map(|r| r.node.id.as_str()));
    let idx = |id: &str| ids.iter().position(|x| *x == id);
    let mut out = String::from("graph LR\n");
    for (i, id) in ids.iter().enumerate() {
        out.push_str(&format!("  {}[\"{}\"]\n", mermaid_id(i), esc_mermaid(id)));
    }
    for e in &g.edges {
        if let (Some(a), Some(b)) = (idx(&e.from_node), idx(&e.to_node)) {
            out.push_str(&format!(
                "  {} -->|{}| {}\n",
                mermaid_id(a),
                esc_mermaid(&e.edge_type),
                mermaid_id(b)
            ));
        }
    }
    out
}

fn esc_dot(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Graphviz DOT digraph of a graph answer.
pub fn dot(g: &GraphResponse) -> String {
    let mut out = String::from("digraph kdd {\n  rankdir=LR;\n  node [shape=box];\n");
    out.push_str(&format!(
        "  \"{}\" [style=bold];\n",
        esc_dot(&g.center_node.id)
    ));
    for r in &g.related_nodes {
        out.push_str(&format!("  \"{}\";\n", esc_dot(&r.node.id)));
    }
    for e in &g.edges {
        out.push_str(&format!(
            "  \"{}\" -> \"{}\" [label=\"{}\"];\n",
            esc_dot(&e.from_node),
            esc_dot(&e.to_node),
            esc_dot(&e.edge_type)
        ));
    }
    out.push_str("}\n");
    out
}

fn yaml_scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && !s.contains([
            '\n', ':', '#', '"', '\'', '{', '}', '[', ']', ',', '&', '*', '!', '|', '>', '%', '@',
            '`',
        ])
        && !s.starts_with(['-', '?', ' '])
        && !s.ends_with(' ')
        && !matches!(s, "true" | "false" | "null" | "yes" | "no" | "~")
        && s.parse::<f64>().is_err();
    if plain {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_default()
    }
}

fn yaml_into(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) => {
            if m.is_empty() {
                out.push_str(" {}\n");
                return;
            }
            out.push('\n');
            for (k, x) in m {
                out.push_str(&format!("{pad}{}:", yaml_scalar(k)));
                yaml_value(x, indent, out);
            }
        }
        Value::Array(a) => {
            if a.is_empty() {
                out.push_str(" []\n");
                return;
            }
            out.push('\n');
            for x in a {
                out.push_str(&format!("{pad}-"));
                match x {
                    Value::Object(m) if !m.is_empty() => {
                        let mut first = true;
                        for (k, y) in m {
                            if first {
                                out.push_str(&format!(" {}:", yaml_scalar(k)));
                                first = false;
                            } else {
                                out.push_str(&format!("{pad}  {}:", yaml_scalar(k)));
                            }
                            yaml_value(y, indent + 4, out);
                        }
                    }
                    _ => yaml_value(x, indent + 2, out),
                }
            }
        }
        _ => yaml_value(v, indent, out),
    }
}

fn yaml_value(v: &Value, indent: usize, out: &mut String) {
    match v {
        Value::Null => out.push_str(" null\n"),
        Value::Bool(b) => out.push_str(&format!(" {b}\n")),
        Value::Number(n) => out.push_str(&format!(" {n}\n")),
        Value::String(s) => out.push_str(&format!(" {}\n", yaml_scalar(s))),
        Value::Object(_) | Value::Array(_) => yaml_into(v, indent + 2, out),
    }
}

/// Render any serde value as block YAML.
pub fn yaml<T: serde::Serialize>(v: &T) -> String {
    let v = serde_json::to_value(v).unwrap_or(Value::Null);
    let mut out = String::new();
    match &v {
        Value::Object(m) => {
            for (k, x) in m {
                out.push_str(&format!("{}:", yaml_scalar(k)));
                yaml_value(x, 0, &mut out);
            }
        }
        other => yaml_value(other, 0, &mut out),
    }
    out
}

/// A compact markdown context pack: constraints first, then behaviour, with sources.
pub fn context_markdown(c: &ContextResponse) -> String {
    let mut out = String::from("# Context pack\n\n");
    if !c.resolved_entities.is_empty() {
        out.push_str("Resolved: ");
        out.push_str(
            &c.resolved_entities
                .iter()
                .map(|r| format!("`{}` ← {} ({})", r.node_id, r.matched_from, r.match_method))
                .collect::<Vec<_>>()
                .join(", "),
        );
        out.push_str("\n\n");
    }
    for (title, items) in [
        ("Constraints (must hold)", &c.constraints),
        ("Behaviour", &c.behavior),
    ] {
        if items.is_empty() {
            continue;
        }
        out.push_str(&format!("## {title}\n\n"));
        for i in items {
            out.push_str(&format!(
                "### {} — {} ({})\n_Source: {} · via {}_\n\n{}\n\n",
                i.node_id, i.title, i.kind, i.source_file, i.reached_via, i.content
            ));
        }
    }
    for w in &c.warnings {
        out.push_str(&format!("> warning: {w}\n"));
    }
    out.push_str(&format!(
        "\n_{} items, ~{} tokens_\n",
        c.total_items, c.total_tokens
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_shapes() {
        let v = serde_json::json!({"a": [{"x": 1, "y": "b: c"}], "e": [], "s": "plain"});
        let y = yaml(&v);
        assert_eq!(y, "a:\n  - x: 1\n    y: \"b: c\"\ne: []\ns: plain\n");
    }
}
