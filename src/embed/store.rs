//! The committed vector file `embeddings/<kind>/[<domain>/]<id>.bin`: one per spec.
//!
//! Layout (all integers little-endian), format version [`VERSION`]:
//!
//! ```text
//! offset  size  field
//! 0       4     magic "KDDV"
//! 4       2     format version (1)
//! 6       1     quantisation: 1 = int8 with one f32 scale per vector ("int8-scaled")
//! 7       1     reserved (0)
//! 8       4     dims
//! 12      4     count
//! 16      2     model id length n
//! 18      n     model id (UTF-8)
//! then `count` records, in the spec's chunk order:
//!         16    chunk key (first 16 bytes of blake3(model id ‖ 0x00 ‖ context_text))
//!         4     scale (f32): value_i = q_i × scale
//!         dims  q (i8 × dims)
//! ```
//!
//! No timestamps, no platform-dependent fields: the same vectors give the same bytes everywhere.
//! 384-d records take 404 bytes (vs 1,552 as f32). Cosine between a vector and its int8 round
//! trip is > 0.9999 for these models.

use super::Error;

/// File magic.
pub const MAGIC: &[u8; 4] = b"KDDV";
/// Format version written by this build.
pub const VERSION: u16 = 1;
/// Quantisation name recorded in the manifest's `embedding.quantization`.
pub const QUANTIZATION: &str = "int8-scaled";
const QUANT_INT8_SCALED: u8 = 1;
/// Bytes of a chunk key.
pub const KEY_LEN: usize = 16;
const HEADER_FIXED: usize = 18;
/// Largest dims / model-id length accepted when decoding (guards against hostile files).
const MAX_DIMS: usize = 8192;

/// A chunk's content address.
pub type ChunkKey = [u8; KEY_LEN];

/// One stored vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub key: ChunkKey,
    pub scale: f32,
    pub q: Vec<i8>,
}

impl Record {
    /// Quantise a vector: scale = max|x| / 127, q = round(x / scale).
    pub fn quantize(key: ChunkKey, v: &[f32]) -> Record {
        let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        let scale = if max > 0.0 && max.is_finite() {
            max / 127.0
        } else {
            0.0
        };
        let q = v
            .iter()
            .map(|x| {
                if scale == 0.0 || !x.is_finite() {
                    0
                } else {
                    (x / scale).round().clamp(-127.0, 127.0) as i8
                }
            })
            .collect();
        Record { key, scale, q }
    }

    /// The approximate f32 vector.
    pub fn dequantize(&self) -> Vec<f32> {
        self.q.iter().map(|&x| x as f32 * self.scale).collect()
    }
}

/// A decoded vector file.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorFile {
    pub model: String,
    pub dims: usize,
    pub records: Vec<Record>,
}

impl VectorFile {
    /// Find a record by key.
    pub fn get(&self, key: &ChunkKey) -> Option<&Record> {
        self.records.iter().find(|r| &r.key == key)
    }
}

/// Encode a vector file. Records keep the given order.
pub fn encode(file: &VectorFile) -> Vec<u8> {
    let id = file.model.as_bytes();
    let id_len = id.len().min(u16::MAX as usize);
    let mut out =
        Vec::with_capacity(HEADER_FIXED + id_len + file.records.len() * (KEY_LEN + 4 + file.dims));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.push(QUANT_INT8_SCALED);
    out.push(0);
    out.extend_from_slice(&(file.dims as u32).to_le_bytes());
    out.extend_from_slice(&(file.records.len() as u32).to_le_bytes());
    out.extend_from_slice(&(id_len as u16).to_le_bytes());
    out.extend_from_slice(&id[..id_len]);
    for r in &file.records {
        out.extend_from_slice(&r.key);
        out.extend_from_slice(&r.scale.to_le_bytes());
        debug_assert_eq!(r.q.len(), file.dims);
        out.extend(r.q.iter().map(|&x| x as u8));
    }
    out
}

/// Decode a vector file; `path` only labels errors.
pub fn decode(path: &str, bytes: &[u8]) -> Result<VectorFile, Error> {
    let corrupt = |message: String| Error::Corrupt {
        path: path.to_string(),
        message,
    };
    if bytes.len() < HEADER_FIXED {
        return Err(corrupt(format!(
            "{} bytes is shorter than the header",
            bytes.len()
        )));
    }
    if &bytes[0..4] != MAGIC {
        return Err(corrupt("bad magic (not a kdd vector file)".into()));
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    if version != VERSION {
        return Err(corrupt(format!(
            "format version {version} is not supported (this kdd reads {VERSION})"
        )));
    }
    if bytes[6] != QUANT_INT8_SCALED {
        return Err(corrupt(format!("unknown quantisation code {}", bytes[6])));
    }
    let dims = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
    let count = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
    let id_len = u16::from_le_bytes([bytes[16], bytes[17]]) as usize;
    if dims == 0 || dims > MAX_DIMS {
        return Err(corrupt(format!("implausible dimension {dims}")));
    }
    let id_end = HEADER_FIXED + id_len;
    if bytes.len() < id_end {
        return Err(corrupt("truncated model id".into()));
    }
    let model = std::str::from_utf8(&bytes[HEADER_FIXED..id_end])
        .map_err(|_| corrupt("model id is not UTF-8".into()))?
        .to_string();
    let rec_len = KEY_LEN + 4 + dims;
    let expected = count
        .checked_mul(rec_len)
        .and_then(|n| n.checked_add(id_end))
        .ok_or_else(|| corrupt("record count overflows".into()))?;
    if bytes.len() != expected {
        return Err(corrupt(format!(
            "expected {expected} bytes for {count} vectors of {dims} dims, found {}",
            bytes.len()
        )));
    }
    let mut records = Vec::with_capacity(count);
    for rec in bytes[id_end..].chunks_exact(rec_len) {
        let key: ChunkKey = rec[..KEY_LEN].try_into().expect("key bytes");
        let scale = f32::from_le_bytes(rec[KEY_LEN..KEY_LEN + 4].try_into().expect("4 bytes"));
        if !scale.is_finite() || scale < 0.0 {
            return Err(corrupt(format!("invalid scale {scale}")));
        }
        let q = rec[KEY_LEN + 4..].iter().map(|&b| b as i8).collect();
        records.push(Record { key, scale, q });
    }
    Ok(VectorFile {
        model,
        dims,
        records,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::cosine;

    fn sample() -> VectorFile {
        let v1: Vec<f32> = (0..8).map(|i| (i as f32 - 3.5) / 10.0).collect();
        let v2: Vec<f32> = (0..8).map(|i| ((i * 7) % 5) as f32 / 4.0).collect();
        VectorFile {
            model: "m".into(),
            dims: 8,
            records: vec![
                Record::quantize([1; 16], &v1),
                Record::quantize([2; 16], &v2),
            ],
        }
    }

    #[test]
    fn roundtrip_and_fidelity() {
        let f = sample();
        let bytes = encode(&f);
        assert_eq!(bytes.len(), 18 + 1 + 2 * (16 + 4 + 8));
        assert_eq!(decode("x.bin", &bytes).unwrap(), f);
        assert_eq!(encode(&decode("x.bin", &bytes).unwrap()), bytes);
        let v: Vec<f32> = (0..384)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 77.0)
            .collect();
        let r = Record::quantize([0; 16], &v);
        assert!(cosine(&v, &r.dequantize()) > 0.9999);
        let zero = Record::quantize([0; 16], &[0.0; 4]);
        assert_eq!(zero.dequantize(), vec![0.0; 4]);
    }

    #[test]
    fn corrupt_files_are_named_errors() {
        let bytes = encode(&sample());
        for bad in [
            &b""[..],
            &b"NOPE00000000000000000"[..],
            &bytes[..bytes.len() - 1],
        ] {
            let e = decode("embeddings/entity/X.bin", bad).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains("embeddings/entity/X.bin"), "{msg}");
            assert!(msg.contains("kdd index"), "{msg}");
        }
        let mut v2 = bytes.clone();
        v2[4] = 9;
        assert!(decode("a", &v2)
            .unwrap_err()
            .to_string()
            .contains("version 9"));
        let mut huge = bytes.clone();
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode("a", &huge).is_err());
        let mut many = bytes;
        many[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode("a", &many).is_err());
    }
}
