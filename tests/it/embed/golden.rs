//! The real model gives the vectors fastembed 7.5 gave (issue 12: kdd builds its own ONNX
//! Runtime session and tokenizer to cut memory; the vectors must not move).
//!
//! Goldens, written with the fastembed path before it was replaced (`fixtures/embed-golden/`):
//! `e5-small-int8.json` (fixed passages and queries → vectors, including a text truncated at 512
//! tokens, accents, emoji and markdown) and `demo-embeddings/` (the committed
//! `.kdd-index/embeddings` of `fixtures/demo` at L2, format v1: compared through its migration
//! to format v2). Both were written on a CPU with AVX-512 VNNI, where they hold to the byte; on
//! other CPU families ONNX Runtime's int8 kernels round differently, and the tests check the
//! same chunks with vectors within that rounding. Needs the default model installed
//! (`./install.sh`); ignored with the reason otherwise.

use super::{installed_model, real_spec};
use crate::util::{copy_dir, fixture, git_repo, kdd_env, text, tree};
use kdd::embed::store::Record;
use kdd::embed::tokenizer::{TextTokenizer, TokenizerFiles};
use kdd::embed::{cosine, Embedder};

fn golden() -> serde_json::Value {
    let bytes = std::fs::read(fixture("embed-golden/e5-small-int8.json")).expect("golden");
    serde_json::from_slice(&bytes).expect("golden json")
}

#[test]
#[cfg_attr(
    not(kdd_real_model),
    ignore = "embedding model not installed (run ./install.sh)"
)]
fn real_model_vectors_match_the_fastembed_golden() {
    let doc = golden();
    let mut m = installed_model().lock().unwrap();
    assert_eq!(
        doc["model"].as_str(),
        Some(m.model_id()),
        "golden is for another model"
    );
    for item in doc["items"].as_array().unwrap() {
        let t = item["text"].as_str().unwrap();
        let want: Vec<f32> = item["vector"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        let got = if item["role"] == "query" {
            m.embed_query(t).unwrap()
        } else {
            m.embed_passages(&[t.to_string()]).unwrap().remove(0)
        };
        // Bit-identical on the CPU family the golden was written on (AVX-512 VNNI); on AVX2
        // ONNX Runtime's int8 kernels (presumably u8 × s8 products summed in saturating 16-bit lanes) give
        // vectors a little apart: cosine 0.998 at worst on this golden. A pipeline fault
        // (pooling, prefix, truncation, normalisation) moves a vector far more than that.
        let c = cosine(&got, &want);
        assert!(c >= 0.995, "cosine {c} for {t:?}");
        let (a, b) = (
            Record::quantize([0; 8], &got).q,
            Record::quantize([0; 8], &want).q,
        );
        let off = a.iter().zip(&b).filter(|(x, y)| x != y).count();
        let head: String = t.chars().take(50).collect();
        println!(
            "cosine {c:.5}, {off} of {} int8 components differ: {head:?}",
            a.len()
        );
    }
}

#[test]
#[cfg_attr(
    not(kdd_real_model),
    ignore = "embedding model not installed (run ./install.sh)"
)]
fn real_model_demo_index_commits_the_same_embedding_bytes_as_fastembed() {
    let dir = git_repo();
    copy_dir(&fixture("demo/specs"), &dir.path().join("specs"));
    let o = kdd_env(dir.path(), &["index"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let got = tree(&dir.path().join(".kdd-index/embeddings"));
    let want = tree(&fixture("embed-golden/demo-embeddings"));
    // The golden predates identity chunks (issue 13): a spec without section chunks (the demo's
    // events) holds its one identity vector; every other file of the golden is byte-identical.
    for (k, bytes) in got.iter().filter(|(k, _)| !want.contains_key(*k)) {
        let vf = kdd::embed::decode(k, bytes).expect("new vector file decodes");
        assert_eq!(vf.records.len(), 1, "{k}: only an identity vector is new");
    }
    assert_eq!(
        want.keys().filter(|k| got.contains_key(*k)).count(),
        want.len(),
        "golden vector files missing"
    );
    // The golden is format v1 (int8, written before format v2): the same vectors must give
    // exactly the v2 bytes their migration gives (v2 codes derive from the int8 values).
    let model = kdd::embed::decode("golden", want.values().next().unwrap())
        .unwrap()
        .model;
    let as_v2 = |rel: &str, b: &[u8]| {
        let f = kdd::embed::decode(rel, b).unwrap();
        kdd::embed::encode(&kdd::embed::VectorFile::new(&model, f.dims, f.records))
    };
    // Golden files without records (events) now hold exactly their identity vector.
    let grew = |k: &String| {
        let n = |b: &[u8]| kdd::embed::decode(k, b).expect("vector file").records.len();
        n(&want[k]) == 0 && n(&got[k]) == 1
    };
    // Byte-identical on the golden's CPU family; elsewhere the same chunks (keys, order) with
    // vectors a rounding apart: a sign bit near the centre may flip (see the test above).
    let mut worst = 1f32;
    let mut identical = 0;
    for k in want.keys().filter(|k| !grew(k)) {
        let v2 = as_v2(k, &want[k]);
        if got[k] == v2 {
            identical += 1;
            continue;
        }
        let (g, w) = (
            kdd::embed::decode(k, &got[k]).unwrap(),
            kdd::embed::decode(k, &v2).unwrap(),
        );
        let keys = |f: &kdd::embed::VectorFile| f.records.iter().map(|r| r.key).collect::<Vec<_>>();
        assert_eq!(keys(&g), keys(&w), "{k}: other chunks than the golden's");
        for (a, b) in g.records.iter().zip(&w.records) {
            worst = worst.min(cosine(&a.dequantize(), &b.dequantize()));
        }
    }
    println!(
        "{identical} of {} vector files byte-identical to the golden; worst record cosine {worst:.4}",
        want.len()
    );
    assert!(
        worst >= 0.95,
        "a vector moved further than rounding: cosine {worst}"
    );
}

#[test]
#[cfg_attr(
    not(kdd_real_model),
    ignore = "embedding model not installed (run ./install.sh)"
)]
fn compact_tokenizer_gives_the_library_ids_on_the_demo_corpus() {
    let spec = real_spec().expect("model installed");
    let read = |n: &str| std::fs::read(spec.dir.join(n)).unwrap();
    let files = TokenizerFiles {
        tokenizer: read("tokenizer.json"),
        config: read("config.json"),
        special_tokens_map: read("special_tokens_map.json"),
        tokenizer_config: read("tokenizer_config.json"),
    };
    let compact = TextTokenizer::load(&files, 512).unwrap();
    let reference = TextTokenizer::load_reference(&files, 512).unwrap();
    let mut texts: Vec<String> = golden()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["text"].as_str().unwrap().to_string())
        .collect();
    texts.extend(tree(&fixture("demo/specs")).into_values().map(|b| {
        // Short and long inputs: the whole spec (truncated at 512) and its first lines.
        String::from_utf8_lossy(&b).into_owned()
    }));
    let firsts: Vec<String> = texts
        .iter()
        .map(|t| t.lines().take(3).collect::<Vec<_>>().join("\n"))
        .collect();
    texts.extend(firsts);
    texts.push("<s> literal </s> <mask> and <pad>   spaces\u{3000}full-width ＡＢＣ".into());
    for t in &texts {
        let a = compact.encode_batch(&[t]).unwrap();
        let b = reference.encode_batch(&[t]).unwrap();
        assert_eq!(a[0].get_ids(), b[0].get_ids(), "{t:?}");
        assert_eq!(a[0].get_attention_mask(), b[0].get_attention_mask());
    }
    // A padded batch too (the longest sets the length).
    let refs: Vec<&str> = texts.iter().take(6).map(String::as_str).collect();
    let a = compact.encode_batch(&refs).unwrap();
    let b = reference.encode_batch(&refs).unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.get_ids(), y.get_ids());
        assert_eq!(x.get_attention_mask(), y.get_attention_mask());
    }
}
