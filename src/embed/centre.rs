//! Centred one-bit vectors: the quantisation written for a model whose embeddings share a
//! common direction (see [`super::store`] for the file layout, code 5 `binary-centred`).
//!
//! Why: the passage vectors of multilingual-e5-small are far from isotropic. Their mean over a
//! corpus has norm ≈ 0.92 (of unit vectors): every vector is mostly the same vector, and what
//! tells two passages apart is a small residual. Quantising the raw vector (sign bits, or the
//! 2-bit codes the previous format wrote) spends its levels on the shared part. Subtracting a
//! fixed centre first and storing one sign bit per residual component plus one scale keeps the
//! residual; decoding adds the centre back. Measured on the 60 dev queries (issue 13), the
//! semantic signal alone (`kdd search --semantic`, nDCG@10): int8 0.469, raw 2-bit 0.433,
//! centred 1-bit 0.461, in 60 bytes a record instead of 104 (int2) or 396 (int8). Hybrid:
//! dev 0.761 → 0.759, the check set 0.839 → 0.851 (`tools/eval/README.md`).
//!
//! Record (after the 8-byte key; written by `super::store`): f32 `scale`, then ⌈dims/8⌉ bytes of sign bits (bit i, LSB
//! first, set = q_i = +1). value_i = centre_i + scale × q_i. `scale` = √(2/π) × RMS of the
//! residual: the one-bit Lloyd–Max level of a normally distributed component.
//!
//! The centre of a model is a constant of this build ([`centre_of`]): the mean passage
//! embedding of this repository's own fixture specs (not of any evaluated corpus), made by
//! `tools/models/centre.py` and stored in `src/embed/centre/`. Files record the centre's version
//! in their header, so a file centred on another centre is refused, never decoded wrongly.
//! A model without a centre (the test embedder, all-MiniLM-L6-v2) keeps the 2-bit format.
//!
//! Invariants: encoding a decoded record gives the same bytes (the codes and scale are kept);
//! the same vector gives the same bytes everywhere (no platform-dependent arithmetic beyond
//! IEEE f32 sums in a fixed order).

use std::sync::OnceLock;

/// Version of the shipped centres, recorded in byte 7 of a centred file's header.
pub const CENTRE_VERSION: u8 = 1;

/// √(2/π): the reconstruction level of one sign bit for a normal component of unit variance.
const LEVEL: f32 = 0.797_884_6;

const E5_SMALL_ID: &str = super::model::DEFAULT_MODEL;
const E5_SMALL: &[u8] = include_bytes!("centre/multilingual-e5-small-int8.f32");

/// The centre of `model` (its id), when this build ships one.
pub fn centre_of(model: &str) -> Option<&'static [f32]> {
    (model == E5_SMALL_ID).then(e5_small)
}

/// Every centre this build ships (for the server's resident vectors, `cache::resident`).
pub fn shipped() -> Vec<Vec<f32>> {
    vec![e5_small().to_vec()]
}

/// The centre of `model` when this build ships one for vectors of `dims` values.
pub fn centre_for(model: &str, dims: usize) -> Option<&'static [f32]> {
    centre_of(model).filter(|c| c.len() == dims)
}

/// The centre of the model whose fingerprint is `fp`, when this build ships one.
pub fn centre_of_fingerprint(fp: &super::store::Fingerprint) -> Option<&'static [f32]> {
    (super::store::fingerprint(E5_SMALL_ID) == *fp).then(e5_small)
}

fn e5_small() -> &'static [f32] {
    static C: OnceLock<Vec<f32>> = OnceLock::new();
    C.get_or_init(|| {
        E5_SMALL
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect()
    })
}

/// The scale and ±1 codes of `v` centred on `centre` (same length).
pub fn quantize(v: &[f32], centre: &[f32]) -> (f32, Vec<i8>) {
    let r: Vec<f32> = v.iter().zip(centre).map(|(x, c)| x - c).collect();
    let n = r.len().max(1) as f32;
    let rms = (r.iter().map(|x| x * x).sum::<f32>() / n).sqrt();
    let q = r.iter().map(|&x| if x >= 0.0 { 1 } else { -1 }).collect();
    let scale = if rms.is_finite() { LEVEL * rms } else { 0.0 };
    (scale, q)
}

/// The approximate vector of centred codes.
pub fn dequantize(scale: f32, q: &[i8], centre: &[f32]) -> Vec<f32> {
    q.iter()
        .zip(centre)
        .map(|(&q, c)| c + scale * q as f32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::cosine;

    #[test]
    fn the_shipped_centre_is_the_model_size_and_near_unit() {
        let c = centre_of(E5_SMALL_ID).unwrap();
        assert_eq!(c.len(), 384);
        let n = c.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((0.8..1.0).contains(&n), "{n}");
        assert!(centre_of("all-MiniLM-L6-v2").is_none());
        let fp = crate::embed::store::fingerprint(E5_SMALL_ID);
        assert_eq!(centre_of_fingerprint(&fp).unwrap().as_ptr(), c.as_ptr());
    }

    #[test]
    fn residuals_survive_where_raw_signs_do_not() {
        let c = centre_of(E5_SMALL_ID).unwrap();
        // Two unit vectors that share the centre and differ only in a small residual.
        let unit = |d: &[f32]| {
            let v: Vec<f32> = c.iter().zip(d).map(|(a, b)| a + b).collect();
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.into_iter().map(|x| x / n).collect::<Vec<f32>>()
        };
        let d1: Vec<f32> = (0..384)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 1500.0)
            .collect();
        let d2: Vec<f32> = (0..384)
            .map(|i| ((i * 53 % 89) as f32 - 44.0) / 1500.0)
            .collect();
        let (a, b) = (unit(&d1), unit(&d2));
        let (sa, qa) = quantize(&a, c);
        let back = dequantize(sa, &qa, c);
        // Raw sign bits of the same vector, for comparison.
        let raw: Vec<f32> = a.iter().map(|x| x.signum()).collect();
        let (ca, cb) = (cosine(&a, &back), cosine(&b, &back));
        assert!(ca > 0.97, "{ca}");
        assert!(
            ca > cosine(&a, &raw) + 0.1,
            "{ca} vs raw {}",
            cosine(&a, &raw)
        );
        // The residual's direction is kept: a is closer to its own reconstruction than b is,
        // by a margin raw signs do not keep.
        assert!(ca - cb > 0.01, "{ca} {cb}");
        assert!(qa.iter().all(|q| q.abs() == 1));
    }
}
