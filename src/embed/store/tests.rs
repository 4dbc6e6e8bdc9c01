//! Unit tests of the vector file format (`super`): round trips, every quantisation, v1
//! migration, corrupt files.

use super::*;
use crate::embed::cosine;

fn sample() -> VectorFile {
    let v1: Vec<f32> = (0..8).map(|i| (i as f32 - 3.5) / 10.0).collect();
    let v2: Vec<f32> = (0..8).map(|i| ((i * 7) % 5) as f32 / 4.0 - 0.3).collect();
    VectorFile::new(
        "m",
        8,
        vec![Record::quantize([1; 8], &v1), Record::quantize([2; 8], &v2)],
    )
}

/// Format v1 bytes as the previous kdd wrote them (test-only writer).
fn encode_v1(f: &VectorFile) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(f.dims as u32).to_le_bytes());
    out.extend_from_slice(&(f.records.len() as u32).to_le_bytes());
    out.extend_from_slice(&(f.model.len() as u16).to_le_bytes());
    out.extend_from_slice(f.model.as_bytes());
    for r in &f.records {
        out.extend_from_slice(&r.key);
        out.extend_from_slice(&[0xee; V1_KEY_LEN - KEY_LEN]);
        out.extend_from_slice(&r.scale.to_le_bytes());
        out.extend(r.q.iter().map(|&x| x as u8));
    }
    out
}

#[test]
fn roundtrip_is_stable_and_sized() {
    let f = sample();
    let bytes = encode(&f);
    assert_eq!(bytes.len(), V2_HEADER + 2 * Quant::Int2.record_len(8));
    let d = decode("x.bin", &bytes).unwrap();
    assert!(d.belongs_to("m") && !d.belongs_to("other"));
    assert_eq!((d.dims, d.quant, d.records.len()), (8, Quant::Int2, 2));
    // Re-encoding a decoded file gives the same bytes (no churn on re-index).
    assert_eq!(encode(&VectorFile::new("m", 8, d.records.clone())), bytes);
    // Signs survive; cosine against the float vector stays high for a 384-d vector.
    let v: Vec<f32> = (0..384)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 77.0)
        .collect();
    let r = Record::quantize([0; 8], &v);
    assert!(cosine(&v, &r.dequantize()) > 0.9999);
    let one = encode(&VectorFile::new("m", 384, vec![r]));
    let back = &decode("y.bin", &one).unwrap().records[0];
    assert!(
        cosine(&v, &back.dequantize()) > 0.9,
        "{}",
        cosine(&v, &back.dequantize())
    );
    assert_eq!(
        Record::quantize([0; 8], &[0.0; 4]).dequantize(),
        vec![0.0; 4]
    );
}

#[test]
fn every_quantisation_roundtrips() {
    let f = sample();
    for quant in [Quant::Int8, Quant::Int4, Quant::Binary, Quant::Int2] {
        for r in &f.records {
            let mut out = Vec::new();
            encode_codes(quant, r, 8, &mut out);
            assert_eq!(out.len() + KEY_LEN, quant.record_len(8));
            let (scale, q) = decode_codes(quant, &out, 8).unwrap();
            let back = Record {
                key: r.key,
                scale,
                q,
                centre: None,
            };
            let c = cosine(&r.dequantize(), &back.dequantize());
            assert!(c > 0.7, "{quant:?} {c}");
            let mut again = Vec::new();
            encode_codes(quant, &back, 8, &mut again);
            assert_eq!(again, out, "{quant:?} is idempotent");
        }
    }
}

#[test]
fn v1_files_are_read_and_migrate_to_the_same_v2_bytes() {
    let f = sample();
    let v1 = encode_v1(&f);
    let d = decode("old.bin", &v1).unwrap();
    assert_eq!((d.model.as_str(), d.quant), ("m", Quant::Int8));
    assert_eq!(d.records, f.records);
    assert_eq!(encode(&VectorFile::new("m", 8, d.records)), encode(&f));
}

#[test]
fn corrupt_files_are_named_errors() {
    let bytes = encode(&sample());
    let v1 = encode_v1(&sample());
    for bad in [
        &b""[..],
        &b"NOPE00000000000000000"[..],
        &bytes[..bytes.len() - 1],
        &v1[..v1.len() - 1],
        &v1[..17],
    ] {
        let e = decode("embeddings/entity/X.bin", bad).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("embeddings/entity/X.bin"), "{msg}");
        assert!(msg.contains("kdd index"), "{msg}");
    }
    // The error of `bytes` with byte `at` set to `v`.
    let with = |at: usize, v: u8| {
        let mut b = bytes.clone();
        b[at] = v;
        decode("a", &b).unwrap_err().to_string()
    };
    assert!(with(4, 9).contains("version 9"));
    assert!(with(6, 7).contains("quantisation"));
    let mut zero = bytes.clone();
    zero[8..10].copy_from_slice(&0u16.to_le_bytes());
    assert!(decode("a", &zero).is_err());
    let mut huge = v1.clone();
    huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode("a", &huge).is_err());
    let mut many = v1;
    many[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode("a", &many).is_err());
    // An int8 record whose codes are all zero is a zero vector: refused, not read as the
    // nearest vector to every question.
    let mut f = sample();
    f.quant = Quant::Int8;
    f.records[1].q = vec![0; 8];
    f.records[1].scale = 0.01;
    let e = decode("z.bin", &encode_v1(&f)).unwrap_err().to_string();
    assert!(e.contains("zero vector") && e.contains("z.bin"), "{e}");
    f.records.truncate(1);
    assert!(
        decode("z.bin", &encode_v1(&f)).is_ok(),
        "the first record alone is fine"
    );
}

#[test]
fn the_shipped_model_is_written_centred_and_roundtrips_exactly() {
    let model = crate::embed::model::DEFAULT_MODEL;
    let c = centre::centre_of(model).unwrap();
    // Unit vectors near the centre, as the model's passages are.
    let v: Vec<f32> = c
        .iter()
        .enumerate()
        .map(|(i, x)| x + ((i * 37 % 101) as f32 - 50.0) / 1500.0)
        .collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let v: Vec<f32> = v.into_iter().map(|x| x / n).collect();
    let f = VectorFile::new(model, 384, vec![Record::quantize([3; 8], &v)]);
    assert_eq!(f.quant, Quant::BinaryCentred);
    let bytes = encode(&f);
    assert_eq!((bytes[6], bytes[7]), (5, centre::CENTRE_VERSION));
    assert_eq!(bytes.len(), V2_HEADER + 8 + 4 + 48);
    let d = decode("e.bin", &bytes).unwrap();
    assert_eq!(d.quant, Quant::BinaryCentred);
    assert!(d.records[0].centre.is_some());
    let back = d.records[0].dequantize();
    assert!(cosine(&v, &back) > 0.97, "{}", cosine(&v, &back));
    // Re-encoding decoded records gives the same bytes (no churn on re-index or merge).
    assert_eq!(
        encode(&VectorFile::new(model, 384, d.records.clone())),
        bytes
    );
    // Another centre version, or centred codes of a model without a centre, are refused.
    let mut other = bytes.clone();
    other[7] = 9;
    let e = decode("e.bin", &other).unwrap_err().to_string();
    assert!(e.contains("centre") && e.contains("e.bin"), "{e}");
    let mut foreign = bytes.clone();
    foreign[10..14].copy_from_slice(&fingerprint("m"));
    assert!(decode("e.bin", &foreign).is_err());
    // Scales no embedding has (a dot product overflowing to NaN, a vector equal to the centre
    // matching every question) are refused (the scale is the 4 bytes after the 8-byte key).
    for scale in [1e38f32, 3e38, f32::INFINITY, f32::NAN, 0.0, -0.01, 1e-40] {
        let mut crafted = bytes.clone();
        let at = V2_HEADER + KEY_LEN;
        crafted[at..at + 4].copy_from_slice(&scale.to_le_bytes());
        let e = decode("e.bin", &crafted).unwrap_err().to_string();
        assert!(e.contains("scale") && e.contains("e.bin"), "{scale}: {e}");
    }
    // Other models keep int2.
    assert_eq!(write_quant("m", 384), Quant::Int2);
    assert_eq!(quantization(model, 384), "binary-centred");
}
