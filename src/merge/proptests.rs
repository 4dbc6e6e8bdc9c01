//! Property tests of [`merge_file`] (proptest): the two sides commute (a rebase gives the
//! bytes a merge gives), `merge(a, a, a) == a` for every canonical artifact, keys this kdd does
//! not know survive a merge, a valid vector file beats an invalid one, and arbitrary bytes
//! never panic. The mutation fuzz of the driver's inputs lives in `tests/it/hostile/net.rs`.

use super::fields::{self, Rec};
use super::{merge_file, FileKind, Outcome};
use crate::artifact::{render_manifest, IndexLevel, Manifest, Structure};
use crate::embed::store::{encode, Record, VectorFile};
use crate::spec::{Kind, Layer, LinkRecord, Node};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn extras() -> impl Strategy<Value = BTreeMap<String, Value>> {
    let value = prop_oneof![
        any::<i64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        proptest::collection::vec(0u8..9, 0..3).prop_map(|v| json!({ "n": v })),
    ];
    proptest::collection::btree_map("x_[a-z]{1,6}", value, 0..3)
}

fn node() -> impl Strategy<Value = Vec<u8>> {
    (
        "[A-Z][a-z]{0,5}",
        prop_oneof![Just(Kind::Entity), Just(Kind::Event), Just(Kind::UseCase)],
        "[0-9a-f]{1,8}",
        ".{0,16}",
        proptest::option::of("[a-z]{1,6}"),
        proptest::collection::vec("[A-Za-z ]{1,6}", 0..3),
        proptest::option::of(prop_oneof![Just("core"), Just("auth")]),
        extras(),
    )
        .prop_map(|(id, kind, hash, title, status, aliases, domain, extra)| {
            let known = Node {
                id: format!("Entity:{id}"),
                kind,
                source_file: format!("specs/{id}.md"),
                source_hash: hash,
                title,
                status,
                aliases,
                domain: domain.map(str::to_string),
                layer: Layer::Domain,
            };
            fields::render_node(&Rec { known, extra })
        })
}

fn edges() -> impl Strategy<Value = Vec<u8>> {
    let link = (
        prop_oneof![Just("WIKI_LINK"), Just("EMITS"), Just("pertenece_a")],
        "[A-C][a-c]{0,2}",
        proptest::option::of(Just("auth")),
        extras(),
    );
    proptest::collection::vec(link, 0..6).prop_map(|links| {
        let mut by_key = BTreeMap::new();
        for (t, to, domain, extra) in links {
            let known = LinkRecord {
                edge_type: t.into(),
                to,
                domain: domain.map(str::to_string),
            };
            let extra = if extra.is_empty() {
                String::new()
            } else {
                serde_json::to_string(&extra).unwrap()
            };
            by_key.entry(known).or_insert(extra);
        }
        let set: std::collections::BTreeSet<_> = by_key.into_iter().collect();
        crate::artifact::links::render_link_lines(set.iter())
    })
}

fn vectors() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        (any::<[u8; 8]>(), proptest::collection::vec(-1f32..1f32, 4)),
        0..3,
    )
    .prop_map(|recs| {
        encode(&VectorFile::new(
            "m",
            4,
            recs.iter().map(|(k, v)| Record::quantize(*k, v)).collect(),
        ))
    })
}

fn manifest() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::collection::btree_set("[a-z]{1,5}", 0..3),
        prop_oneof![Just("specs"), Just("docs/specs")],
    )
        .prop_map(|(domains, root)| {
            let m = Manifest::new(root, Structure::MultiDomain, domains.into_iter().collect());
            debug_assert_eq!(m.index_level, IndexLevel::L1);
            render_manifest(&m)
        })
}

fn enrichment() -> impl Strategy<Value = Vec<u8>> {
    use crate::artifact::enrichment::{render, Enrichment, Entry};
    proptest::collection::vec(("h[1-3]", "[ab]@1", "[a-z]{0,6}"), 0..4).prop_map(|xs| {
        let entries = xs
            .into_iter()
            .map(|(spec_hash, agent, summary)| Entry {
                spec_hash,
                agent,
                summary,
                relations: Vec::new(),
                impact: Vec::new(),
                vector: None,
            })
            .collect();
        render(&Enrichment {
            format: 1,
            id: "Entity:A".into(),
            entries,
        })
    })
}

/// A valid, canonical artifact of `kind`.
fn valid(kind: FileKind) -> BoxedStrategy<Vec<u8>> {
    match kind {
        FileKind::Node => node().boxed(),
        FileKind::Edges => edges().boxed(),
        FileKind::Embedding => vectors().boxed(),
        FileKind::Manifest => manifest().boxed(),
        FileKind::Enrichment => enrichment().boxed(),
        FileKind::Other => any::<Vec<u8>>().boxed(),
    }
}

/// A valid artifact of `kind`, or (one time in eight) arbitrary bytes.
fn artifact(kind: FileKind) -> BoxedStrategy<Vec<u8>> {
    prop_oneof![7 => valid(kind), 1 => any::<Vec<u8>>()].boxed()
}

fn kind() -> impl Strategy<Value = FileKind> {
    prop_oneof![
        Just(FileKind::Node),
        Just(FileKind::Edges),
        Just(FileKind::Embedding),
        Just(FileKind::Manifest),
        Just(FileKind::Enrichment),
    ]
}

fn triple() -> impl Strategy<Value = (FileKind, Option<Vec<u8>>, Vec<u8>, Vec<u8>)> {
    kind().prop_flat_map(|k| {
        (
            Just(k),
            proptest::option::of(artifact(k)),
            artifact(k),
            artifact(k),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sides_commute((k, b, o, t) in triple()) {
        // Merged bytes are equal; a conflict or a fallback is one either way (its message
        // names the side, git's text fallback labels them).
        let shape = |x: Outcome| match x {
            Outcome::Merged(b) => Outcome::Merged(b),
            Outcome::Conflict(_) => Outcome::Conflict(String::new()),
            Outcome::Unsupported(_) => Outcome::Unsupported(String::new()),
        };
        prop_assert_eq!(
            shape(merge_file(k, b.as_deref(), &o, &t)),
            shape(merge_file(k, b.as_deref(), &t, &o))
        );
    }

    #[test]
    fn merging_a_file_with_itself_is_the_file(
        (k, a) in kind().prop_flat_map(|k| (Just(k), valid(k)))
    ) {
        prop_assert_eq!(merge_file(k, Some(&a), &a, &a), Outcome::Merged(a.clone()));
        prop_assert_eq!(merge_file(k, None, &a, &a), Outcome::Merged(a));
    }

    #[test]
    fn unknown_keys_survive((b, t) in (node(), node())) {
        // One side unchanged: the result is the other side, unknown keys and all.
        prop_assert_eq!(merge_file(FileKind::Node, Some(&b), &b, &t), Outcome::Merged(t.clone()));
        // Both changed: the result is one whole side.
        let Outcome::Merged(m) = merge_file(FileKind::Node, None, &b, &t) else {
            return Err(TestCaseError::fail("two valid nodes merge"));
        };
        prop_assert!(m == b || m == t);
    }

    #[test]
    fn unknown_keys_of_links_survive((b, t) in (edges(), edges())) {
        prop_assert_eq!(merge_file(FileKind::Edges, Some(&b), &b, &t), Outcome::Merged(t.clone()));
        // A plain union keeps every line of a side whose links the other side lacks.
        let Outcome::Merged(m) = merge_file(FileKind::Edges, None, &b, &t) else {
            return Err(TestCaseError::fail("two valid edge files merge"));
        };
        let set = |b: &[u8]| {
            crate::artifact::links::parse_links_text(std::str::from_utf8(b).unwrap()).unwrap()
        };
        let (bs, ts, ms) = (set(&b), set(&t), set(&m));
        let tk: Vec<&LinkRecord> = ts.iter().map(|(l, _)| l).collect();
        for link in &bs {
            if !tk.contains(&&link.0) {
                prop_assert!(ms.contains(link), "{link:?} lost from {ms:?}");
            }
            prop_assert!(ms.iter().any(|(l, _)| *l == link.0));
        }
    }

    #[test]
    fn a_valid_vector_file_beats_an_invalid_one(
        v in vectors(),
        bad in prop_oneof![Just(Vec::new()), any::<Vec<u8>>()],
        base in proptest::option::of(vectors()),
    ) {
        prop_assume!(crate::embed::store::decode("", &bad).is_err());
        let want = Outcome::Merged(v.clone());
        prop_assert_eq!(merge_file(FileKind::Embedding, base.as_deref(), &v, &bad), want.clone());
        prop_assert_eq!(merge_file(FileKind::Embedding, base.as_deref(), &bad, &v), want);
        prop_assert!(matches!(
            merge_file(FileKind::Embedding, Some(&v), &bad, &bad),
            Outcome::Unsupported(_)
        ));
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        k in prop_oneof![kind(), Just(FileKind::Other)],
        b in proptest::option::of(any::<Vec<u8>>()),
        o in any::<Vec<u8>>(),
        t in any::<Vec<u8>>(),
    ) {
        let _ = merge_file(k, b.as_deref(), &o, &t);
    }
}
