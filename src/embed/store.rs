//! The committed vector file `embeddings/<kind>/[<domain>/]<id>.bin`: one per spec.
//!
//! Format version 2 (written; [`VERSION`]), all integers little-endian:
//!
//! ```text
//! offset  size  field
//! 0       4     magic "KDDV"
//! 4       2     format version (2)
//! 6       1     quantisation (see `Quant`): 1 int8 + f32 scale, 2 int4 + f32 scale, 3 binary,
//!               4 int2 (no scale), 5 binary-centred (f32 scale, see `super::centre`)
//! 7       1     centre version for code 5 (`centre::CENTRE_VERSION`), else 0
//! 8       2     dims
//! 10      4     model fingerprint: first 4 bytes of blake3(model id)
//! then records to the end of the file (count = body length / record length), chunk order:
//!         8     chunk key (first 8 bytes of blake3(model id ‖ 0x00 ‖ context_text))
//!         4     scale (f32; int8/int4/binary-centred only): value_i = q_i × scale
//!               (binary-centred: centre_i + q_i × scale)
//!         …     int8: dims bytes; int4: ⌈dims/2⌉ bytes, two's-complement nibbles (low nibble =
//!               even index, q ∈ [-7, 7]); binary and binary-centred: ⌈dims/8⌉ bytes, bit i
//!               (LSB first) = q_i ≥ 0; int2: ⌈dims/4⌉ bytes, 2-bit codes (lowest bits = first
//!               index) 0, 1, 2, 3 for q = -3, -1, 1, 3
//! ```
//!
//! Format version 1 (read only; `kdd index` rewrites it as v2): a 16-byte header `KDDV`, u16
//! version 1, u8 quantisation 1, reserved, u32 dims, u32 count, then u16 model id length + the
//! model id, then `count` records of a 16-byte key, an f32 scale and `dims` int8 values. Its keys
//! are read as their first 8 bytes (a v2 key is the same blake3 prefix), so a migration reuses
//! every stored vector and embeds nothing.
//!
//! Bounds, stated: the 4-byte model fingerprint only guards against vectors of ANOTHER model
//! (an accidental collision between two model ids is 2^-32); the model id itself lives in the
//! manifest. A chunk key of 64 bits is looked up among every chunk of the index (the reuse
//! pool): at 100,000 chunks the chance of any accidental collision is n²/2^65 ≈ 3·10^-10.
//!
//! Quantisation ([`write_quant`]): every vector is first quantised to int8
//! (`Record::quantize`, scale = max|x|/127); the file codes are derived from those int8 values,
//! so a fresh index and a migrated v1 index give the same bytes. A model whose centre this build
//! ships (the default multilingual-e5-small) is written as centred sign bits, 52 bytes + key per
//! 384-d record; any other model as int2 (±1, ±3 around the vector's RMS, no scale: the 2-bit
//! Lloyd–Max levels rounded to 1 : 3), 96 bytes + key. Cosine needs no scale for raw codes, so
//! binary and int2 decode to unit vectors and the query stays float (asymmetric scoring).
//! Dev-set figures (issues 13 and 15, 60 queries, hybrid nDCG@10): int8 0.761, int4 0.766,
//! int2 0.761, binary 0.733, binary-centred 0.759 (check set: int2 0.839, binary-centred 0.851).
//! Int8, int4, binary and int2 files stay readable; when centred codes are written, int2 and
//! binary records are not reused (they cannot become centred codes without loss: their chunks
//! are embedded again).
//!
//! No timestamps, no platform-dependent fields: the same vectors give the same bytes everywhere.
//! Decoding is bounded: dims ≤ 8192, the length must be exactly header + k × record length.

use super::{centre, Error};

/// File magic.
pub const MAGIC: &[u8; 4] = b"KDDV";
/// Format version written by this build (version 1 is still read).
pub const VERSION: u16 = 2;
/// Bytes of a chunk key.
pub const KEY_LEN: usize = 8;
/// Bytes of a model fingerprint.
pub const FINGERPRINT_LEN: usize = 4;
const V1_KEY_LEN: usize = 16;
const V1_HEADER: usize = 18;
const V2_HEADER: usize = 14;
/// Largest dims accepted when decoding (guards against hostile files).
const MAX_DIMS: usize = 8192;

/// A chunk's content address.
pub type ChunkKey = [u8; KEY_LEN];
/// The short identity of a model in a vector file.
pub type Fingerprint = [u8; FINGERPRINT_LEN];

/// Stored quantisation of a vector file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quant {
    /// int8 with one f32 scale per vector (format v1's only quantisation).
    Int8,
    /// 4-bit (q ∈ [-7, 7]) with one f32 scale per vector.
    Int4,
    /// One sign bit per dimension, no scale.
    Binary,
    /// Two bits per dimension (q ∈ {-3, -1, 1, 3}: sign, and whether |x| reaches the vector's
    /// root mean square), no scale.
    Int2,
    /// One sign bit per dimension of the residual against the model's centre, plus an f32
    /// scale (see [`super::centre`]); written for a model that has a centre.
    BinaryCentred,
}

impl Quant {
    fn code(self) -> u8 {
        match self {
            Quant::Int8 => 1,
            Quant::Int4 => 2,
            Quant::Binary => 3,
            Quant::Int2 => 4,
            Quant::BinaryCentred => 5,
        }
    }

    fn from_code(c: u8) -> Option<Quant> {
        match c {
            1 => Some(Quant::Int8),
            2 => Some(Quant::Int4),
            3 => Some(Quant::Binary),
            4 => Some(Quant::Int2),
            5 => Some(Quant::BinaryCentred),
            _ => None,
        }
    }

    /// The name recorded in the manifest's `embedding.quantization`.
    pub const fn name(self) -> &'static str {
        match self {
            Quant::Int8 => "int8-scaled",
            Quant::Int4 => "int4-scaled",
            Quant::Binary => "binary-sign",
            Quant::Int2 => "int2-rms",
            Quant::BinaryCentred => "binary-centred",
        }
    }

    /// Bytes of one record of `dims` values (key included).
    pub fn record_len(self, dims: usize) -> usize {
        KEY_LEN
            + match self {
                Quant::Int8 => 4 + dims,
                Quant::Int4 => 4 + dims.div_ceil(2),
                Quant::Binary => dims.div_ceil(8),
                Quant::Int2 => dims.div_ceil(4),
                Quant::BinaryCentred => 4 + dims.div_ceil(8),
            }
    }
}

/// The quantisation this build writes for `model` vectors of `dims` values: centred sign bits
/// when the build ships the model's centre, else 2-bit codes (see the module doc).
pub fn write_quant(model: &str, dims: usize) -> Quant {
    match centre::centre_for(model, dims) {
        Some(_) => Quant::BinaryCentred,
        None => Quant::Int2,
    }
}

/// Quantisation name recorded in the manifest's `embedding.quantization`.
pub fn quantization(model: &str, dims: usize) -> &'static str {
    write_quant(model, dims).name()
}

/// The fingerprint of a model id.
pub fn fingerprint(model: &str) -> Fingerprint {
    let mut f = [0u8; FINGERPRINT_LEN];
    f.copy_from_slice(&blake3::hash(model.as_bytes()).as_bytes()[..FINGERPRINT_LEN]);
    f
}

/// One stored vector: value_i ≈ q_i × scale, or centre_i + q_i × scale for centred codes.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub key: ChunkKey,
    pub scale: f32,
    pub q: Vec<i8>,
    /// The centre of decoded centred codes (`None` for every other record).
    pub centre: Option<&'static [f32]>,
}

impl Record {
    /// Quantise a vector to int8: scale = max|x| / 127, q = round(x / scale).
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
        Record {
            key,
            scale,
            q,
            centre: None,
        }
    }

    /// The approximate f32 vector.
    pub fn dequantize(&self) -> Vec<f32> {
        match self.centre {
            Some(c) => centre::dequantize(self.scale, &self.q, c),
            None => self.q.iter().map(|&x| x as f32 * self.scale).collect(),
        }
    }

    /// This record as int8 codes (itself unless it holds centred codes).
    fn plain(&self) -> std::borrow::Cow<'_, Record> {
        match self.centre {
            Some(_) => std::borrow::Cow::Owned(Record::quantize(self.key, &self.dequantize())),
            None => std::borrow::Cow::Borrowed(self),
        }
    }

    /// The int4 codes and scale of this record: kept as they are when already within ±7 (a
    /// decoded int4 record), else derived from the int8 codes (q4 = round(q × 7 / 127)).
    fn int4(&self) -> (f32, Vec<i8>) {
        let max = self.q.iter().map(|q| q.unsigned_abs()).max().unwrap_or(0);
        if max <= 7 {
            return (self.scale, self.q.iter().map(|&q| q.clamp(-7, 7)).collect());
        }
        let scale = self.scale * max as f32 / 7.0;
        let q = self
            .q
            .iter()
            .map(|&q| (q as f32 * 7.0 / max as f32).round().clamp(-7.0, 7.0) as i8)
            .collect();
        (scale, q)
    }

    /// The int2 codes of this record: kept as they are when already in {-3, -1, 1, 3} (a decoded
    /// int2 record; a genuine int8 record always holds ±127), else ±1 below the root mean square
    /// of the int8 codes and ±3 at or above it (the levels and threshold of a 2-bit Lloyd–Max
    /// quantiser for normally distributed components, rounded to 1 : 3); zero counts as positive.
    fn int2(&self) -> Vec<i8> {
        if self.q.iter().all(|q| matches!(q, -3 | -1 | 1 | 3)) {
            return self.q.clone();
        }
        let n = self.q.len().max(1) as f32;
        let rms = (self.q.iter().map(|&q| (q as f32) * (q as f32)).sum::<f32>() / n).sqrt();
        self.q
            .iter()
            .map(|&q| {
                let big = (q as f32).abs() >= rms;
                match (q >= 0, big) {
                    (true, false) => 1,
                    (true, true) => 3,
                    (false, false) => -1,
                    (false, true) => -3,
                }
            })
            .collect()
    }
}

/// A vector file: decoded, or to encode.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorFile {
    /// The model id: set for a file to encode and for a decoded v1 file; empty for a decoded v2
    /// file, which carries only [`VectorFile::fingerprint`] (the manifest names the model).
    pub model: String,
    /// The model's fingerprint (what [`VectorFile::belongs_to`] checks).
    pub fingerprint: Fingerprint,
    pub dims: usize,
    /// Stored quantisation (encode writes [`write_quant`] of the model whatever this says).
    pub quant: Quant,
    pub records: Vec<Record>,
}

impl VectorFile {
    /// A file of `records` made with `model`, to encode.
    pub fn new(model: &str, dims: usize, records: Vec<Record>) -> VectorFile {
        VectorFile {
            model: model.to_string(),
            fingerprint: fingerprint(model),
            dims,
            quant: write_quant(model, dims),
            records,
        }
    }

    /// Whether the vectors were made with `model` (by fingerprint).
    pub fn belongs_to(&self, model: &str) -> bool {
        self.fingerprint == fingerprint(model)
    }

    /// Find a record by key.
    pub fn get(&self, key: &ChunkKey) -> Option<&Record> {
        self.records.iter().find(|r| &r.key == key)
    }
}

/// Encode a vector file in format v2 with [`write_quant`] of its model. Records keep the given
/// order.
pub fn encode(file: &VectorFile) -> Vec<u8> {
    let dims = file.dims.min(u16::MAX as usize);
    let quant = write_quant(&file.model, dims);
    let centre = centre::centre_for(&file.model, dims);
    let mut out = Vec::with_capacity(V2_HEADER + file.records.len() * quant.record_len(dims));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.push(quant.code());
    out.push(centre.map_or(0, |_| centre::CENTRE_VERSION));
    out.extend_from_slice(&(dims as u16).to_le_bytes());
    out.extend_from_slice(&fingerprint(&file.model));
    for r in &file.records {
        debug_assert_eq!(r.q.len(), dims);
        out.extend_from_slice(&r.key);
        let r = match centre {
            Some(_) if r.centre.is_some() => std::borrow::Cow::Borrowed(r),
            Some(c) => {
                let (scale, q) = centre::quantize(&r.dequantize(), c);
                std::borrow::Cow::Owned(Record {
                    key: r.key,
                    scale,
                    q,
                    centre: Some(c),
                })
            }
            None => r.plain(),
        };
        encode_codes(quant, &r, dims, &mut out);
    }
    out
}

fn encode_codes(quant: Quant, r: &Record, dims: usize, out: &mut Vec<u8>) {
    let q = |i: usize| r.q.get(i).copied().unwrap_or(0);
    match quant {
        Quant::Int8 => {
            out.extend_from_slice(&r.scale.to_le_bytes());
            out.extend((0..dims).map(|i| q(i) as u8));
        }
        Quant::Int4 => {
            let (scale, q4) = r.int4();
            out.extend_from_slice(&scale.to_le_bytes());
            let n = |i: usize| (q4.get(i).copied().unwrap_or(0) as u8) & 0x0f;
            out.extend((0..dims.div_ceil(2)).map(|b| n(2 * b) | (n(2 * b + 1) << 4)));
        }
        Quant::Binary => out.extend(sign_bits(dims, |i| q(i) >= 0)),
        Quant::BinaryCentred => {
            out.extend_from_slice(&r.scale.to_le_bytes());
            out.extend(sign_bits(dims, |i| q(i) > 0));
        }
        Quant::Int2 => {
            let q2 = r.int2();
            // -3, -1, 1, 3 → 0, 1, 2, 3 (padding dimensions code as 1, i.e. q = -1, never read).
            let code = |i: usize| ((q2.get(i).copied().unwrap_or(-1) + 3) / 2) as u8 & 3;
            out.extend(
                (0..dims.div_ceil(4))
                    .map(|b| (0..4).fold(0u8, |acc, j| acc | (code(4 * b + j) << (2 * j)))),
            );
        }
    }
}

/// ⌈dims/8⌉ bytes of sign bits: bit i (LSB first) is set when `positive(i)`.
fn sign_bits(dims: usize, positive: impl Fn(usize) -> bool) -> impl Iterator<Item = u8> {
    (0..dims.div_ceil(8)).map(move |b| {
        (0..8)
            .filter(|j| b * 8 + j < dims && positive(b * 8 + j))
            .fold(0u8, |acc, j| acc | (1 << j))
    })
}

/// The ±1 codes of `dims` sign bits (see [`sign_bits`]).
fn signs(bits: &[u8], dims: usize) -> Vec<i8> {
    (0..dims)
        .map(|i| {
            if bits[i / 8] >> (i % 8) & 1 == 1 {
                1
            } else {
                -1
            }
        })
        .collect()
}

fn decode_codes(quant: Quant, rec: &[u8], dims: usize) -> Result<(f32, Vec<i8>), String> {
    let scale = || f32::from_le_bytes(rec[..4].try_into().expect("4 bytes"));
    let (scale, q) = match quant {
        Quant::BinaryCentred => (scale(), signs(&rec[4..], dims)),
        Quant::Int8 => (scale(), rec[4..].iter().map(|&b| b as i8).collect()),
        Quant::Int4 => {
            let nib = |b: u8| ((b << 4) as i8) >> 4;
            let q = (0..dims)
                .map(|i| {
                    let b = rec[4 + i / 2];
                    nib(if i % 2 == 0 { b } else { b >> 4 })
                })
                .collect();
            (scale(), q)
        }
        Quant::Binary => (1.0 / (dims as f32).sqrt(), signs(rec, dims)),
        Quant::Int2 => {
            let q: Vec<i8> = (0..dims)
                .map(|i| ((rec[i / 4] >> (2 * (i % 4))) & 3) as i8 * 2 - 3)
                .collect();
            // Cosine ignores the scale; this one makes the decoded vector unit length.
            let norm = q
                .iter()
                .map(|&x| (x as f32) * (x as f32))
                .sum::<f32>()
                .sqrt();
            (1.0 / norm.max(1.0), q)
        }
    };
    // A committed file holds a teammate's bytes: only what an embedding can be is read. A scale
    // that is not finite, is zero or tiny, or is so large that a dot product overflows to NaN,
    // and a record whose codes are all zero (a zero vector, which a cosine distance puts first
    // for every question) are refused.
    if !(MIN_SCALE..=MAX_SCALE).contains(&scale) {
        return Err(format!(
            "invalid scale {scale} (a stored vector's scale lies between {MIN_SCALE:e} and {MAX_SCALE:e})"
        ));
    }
    if q.iter().all(|&x| x == 0) {
        return Err("a zero vector (every code is 0)".into());
    }
    Ok((scale, q))
}

/// Bounds of a stored vector's scale: the vectors of an embedding model are unit length (an
/// int8 scale is about 1/127 of the largest component, a centred one about the residual's
/// RMS), so anything outside is not a vector kdd wrote.
const MIN_SCALE: f32 = 1e-9;
const MAX_SCALE: f32 = 1e6;

/// Decode a vector file of format v1 or v2; `path` only labels errors.
pub fn decode(path: &str, bytes: &[u8]) -> Result<VectorFile, Error> {
    let corrupt = |message: String| Error::Corrupt {
        path: path.to_string(),
        message,
    };
    if bytes.len() < V2_HEADER.min(V1_HEADER) {
        return Err(corrupt(format!(
            "{} bytes is shorter than the header",
            bytes.len()
        )));
    }
    if &bytes[0..4] != MAGIC {
        return Err(corrupt("bad magic (not a kdd vector file)".into()));
    }
    match u16::from_le_bytes([bytes[4], bytes[5]]) {
        1 => decode_v1(bytes).map_err(corrupt),
        2 => decode_v2(bytes).map_err(corrupt),
        v => Err(corrupt(format!(
            "format version {v} is not supported (this kdd reads 1 and {VERSION})"
        ))),
    }
}

fn decode_v2(bytes: &[u8]) -> Result<VectorFile, String> {
    let quant =
        Quant::from_code(bytes[6]).ok_or(format!("unknown quantisation code {}", bytes[6]))?;
    let dims = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    if dims == 0 || dims > MAX_DIMS {
        return Err(format!("implausible dimension {dims}"));
    }
    let fp: Fingerprint = bytes[10..V2_HEADER].try_into().expect("4 bytes");
    let centre = match quant {
        Quant::BinaryCentred => Some(
            centre::centre_of_fingerprint(&fp)
                .filter(|c| c.len() == dims && bytes[7] == centre::CENTRE_VERSION)
                .ok_or(format!(
                    "vectors centred on a centre this kdd does not ship (version {}, {dims} dims)",
                    bytes[7]
                ))?,
        ),
        _ => None,
    };
    let rec_len = quant.record_len(dims);
    let body = &bytes[V2_HEADER..];
    if !body.len().is_multiple_of(rec_len) {
        return Err(format!(
            "{} bytes of records is not a whole number of {rec_len}-byte records ({dims} dims)",
            body.len()
        ));
    }
    let mut records = Vec::with_capacity(body.len() / rec_len);
    for rec in body.chunks_exact(rec_len) {
        let key: ChunkKey = rec[..KEY_LEN].try_into().expect("key bytes");
        let (scale, q) = decode_codes(quant, &rec[KEY_LEN..], dims)?;
        records.push(Record {
            key,
            scale,
            q,
            centre,
        });
    }
    Ok(VectorFile {
        model: String::new(),
        fingerprint: fp,
        dims,
        quant,
        records,
    })
}

fn decode_v1(bytes: &[u8]) -> Result<VectorFile, String> {
    if bytes.len() < V1_HEADER {
        return Err(format!("{} bytes is shorter than the header", bytes.len()));
    }
    if bytes[6] != Quant::Int8.code() {
        return Err(format!("unknown quantisation code {}", bytes[6]));
    }
    let dims = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
    let count = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
    let id_len = u16::from_le_bytes([bytes[16], bytes[17]]) as usize;
    if dims == 0 || dims > MAX_DIMS {
        return Err(format!("implausible dimension {dims}"));
    }
    let id_end = V1_HEADER + id_len;
    if bytes.len() < id_end {
        return Err("truncated model id".into());
    }
    let model = std::str::from_utf8(&bytes[V1_HEADER..id_end])
        .map_err(|_| "model id is not UTF-8".to_string())?
        .to_string();
    let rec_len = V1_KEY_LEN + 4 + dims;
    let expected = count
        .checked_mul(rec_len)
        .and_then(|n| n.checked_add(id_end))
        .ok_or("record count overflows")?;
    if bytes.len() != expected {
        return Err(format!(
            "expected {expected} bytes for {count} vectors of {dims} dims, found {}",
            bytes.len()
        ));
    }
    let mut records = Vec::with_capacity(count);
    for rec in bytes[id_end..].chunks_exact(rec_len) {
        let key: ChunkKey = rec[..KEY_LEN].try_into().expect("key bytes");
        let (scale, q) = decode_codes(Quant::Int8, &rec[V1_KEY_LEN..], dims)?;
        records.push(Record {
            key,
            scale,
            q,
            centre: None,
        });
    }
    Ok(VectorFile {
        fingerprint: fingerprint(&model),
        model,
        dims,
        quant: Quant::Int8,
        records,
    })
}

#[cfg(test)]
mod tests;
