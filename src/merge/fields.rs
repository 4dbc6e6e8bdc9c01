//! Forward-compatible reading of node JSON for the merge: a record is kept as its typed part
//! (the fields this kdd knows, validated by deserialising into [`Node`]) plus every other key as
//! raw JSON, so a file written by a newer kdd keeps the fields this one does not know through a
//! merge. Edge lines get the same treatment in `artifact::links` (unknown keys per line/group).
//!
//! Invariants:
//! - [`render`] of a record this kdd wrote gives exactly the bytes `kdd index` writes (known
//!   fields in the struct's order, the skip-if-empty rules of the typed struct); unknown keys
//!   follow, sorted by name, so the rendering is canonical whatever order the input had.
//! - A known key whose value the typed struct drops (`"status": null`) is dropped here too:
//!   only keys outside the known list are carried as extras.

use crate::spec::Node;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Keys of a node file this kdd knows (the fields of [`Node`]).
pub const NODE_FIELDS: &[&str] = &[
    "id",
    "kind",
    "source_file",
    "source_hash",
    "title",
    "status",
    "aliases",
    "domain",
    "layer",
];

/// A typed record plus the keys this kdd does not know.
#[derive(Debug, Clone, PartialEq)]
pub struct Rec<T> {
    pub known: T,
    pub extra: BTreeMap<String, Value>,
}

/// Parse one JSON object into its typed part and its unknown keys.
pub fn parse<T: DeserializeOwned>(v: Value, fields: &[&str]) -> Result<Rec<T>, String> {
    let Value::Object(map) = v else {
        return Err("not a JSON object".into());
    };
    let extra = map
        .iter()
        .filter(|(k, _)| !fields.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let known = serde_json::from_value(Value::Object(map)).map_err(|e| e.to_string())?;
    Ok(Rec { known, extra })
}

/// The canonical JSON object of a record: known fields first, unknown keys sorted after.
pub fn render<T: Serialize>(rec: &Rec<T>) -> Value {
    let mut m = match serde_json::to_value(&rec.known) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    for (k, v) in &rec.extra {
        m.insert(k.clone(), v.clone());
    }
    Value::Object(m)
}

/// A node file's bytes as a record.
pub fn parse_node(bytes: &[u8]) -> Result<Rec<Node>, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    parse(v, NODE_FIELDS)
}

/// Canonical bytes of a node record (one compact line, trailing newline, like `render_node`).
pub fn render_node(rec: &Rec<Node>) -> Vec<u8> {
    let mut v = serde_json::to_vec(&render(rec)).unwrap_or_default();
    v.push(b'\n');
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::links::LINK_FIELDS;
    use crate::spec::LinkRecord;
    use crate::spec::{Kind, Layer};

    #[test]
    fn known_lists_match_the_typed_structs() {
        let n = Node {
            id: "Entity:A".into(),
            kind: Kind::Entity,
            source_file: "specs/A.md".into(),
            source_hash: "h".into(),
            title: "A".into(),
            status: Some("draft".into()),
            aliases: vec!["B".into()],
            domain: Some("core".into()),
            layer: Layer::Domain,
        };
        let Value::Object(m) = serde_json::to_value(&n).unwrap() else {
            panic!()
        };
        assert_eq!(m.keys().collect::<Vec<_>>(), NODE_FIELDS);
        let l = LinkRecord {
            edge_type: "EMITS".into(),
            to: "X".into(),
            domain: Some("d".into()),
        };
        let Value::Object(m) = serde_json::to_value(&l).unwrap() else {
            panic!()
        };
        assert_eq!(m.keys().collect::<Vec<_>>(), LINK_FIELDS);
        // Without extras the rendering is exactly the artifact writer's.
        let rec = parse_node(&crate::artifact::render_node(&n)).unwrap();
        assert!(rec.extra.is_empty());
        assert_eq!(render_node(&rec), crate::artifact::render_node(&n));
    }
}
