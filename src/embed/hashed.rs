//! A small deterministic embedder for tests: feature hashing of lower-cased words and their
//! character trigrams into 64 signed buckets, L2-normalised. Texts sharing words get similar
//! vectors, so ranking tests behave sensibly; it is NOT a semantic model and is never the shipped
//! default (selected only by tests in-process or by `KDD_TEST_EMBEDDER=1`).
//!
//! Tests of the warm service and its failure modes run it behind the service too
//! (`KDD_TEST_EMBEDDER=1` with `KDD_EMBED_WARM=1`), and can slow it down with
//! `KDD_TEST_EMBED_DELAY_MS` (per passage) to kill the service in the middle of a run.

use super::{Embedder, Error};

/// Model id recorded in vector files made by this embedder.
pub const MODEL_ID: &str = "kdd-test-hashed-64";
/// Vector length.
pub const DIMS: usize = 64;
/// Test knob: milliseconds to sleep per embedded passage.
pub const DELAY_ENV: &str = "KDD_TEST_EMBED_DELAY_MS";

/// The deterministic test embedder. Counts the texts it embedded (tests check reuse with it).
#[derive(Debug, Default, Clone)]
pub struct HashedEmbedder {
    /// Number of passages embedded so far.
    pub passages_embedded: usize,
}

impl HashedEmbedder {
    pub fn new() -> HashedEmbedder {
        HashedEmbedder::default()
    }

    /// The vector of one text (no prefix handling: queries and passages share a space).
    pub fn vector(text: &str) -> Vec<f32> {
        let mut v = vec![0f32; DIMS];
        let lower = text.to_lowercase();
        for word in lower.split(|c: char| !c.is_alphanumeric()) {
            if word.is_empty() {
                continue;
            }
            add(&mut v, word.as_bytes(), 1.0);
            let chars: Vec<char> = word.chars().collect();
            if chars.len() > 3 {
                for w in chars.windows(3) {
                    let tri: String = w.iter().collect();
                    add(&mut v, tri.as_bytes(), 0.3);
                }
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        } else {
            v[0] = 1.0;
        }
        v
    }
}

fn add(v: &mut [f32], feature: &[u8], weight: f32) {
    let h = blake3::hash(feature);
    let b = h.as_bytes();
    let idx = u16::from_le_bytes([b[0], b[1]]) as usize % DIMS;
    let sign = if b[2] & 1 == 0 { 1.0 } else { -1.0 };
    v[idx] += sign * weight;
}

impl Embedder for HashedEmbedder {
    fn model_id(&self) -> &str {
        MODEL_ID
    }

    fn dims(&self) -> usize {
        DIMS
    }

    fn embed_passages(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        let delay = std::env::var(DELAY_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if delay > 0 {
            std::thread::sleep(std::time::Duration::from_millis(delay * texts.len() as u64));
        }
        self.passages_embedded += texts.len();
        Ok(texts.iter().map(|t| Self::vector(t)).collect())
    }

    fn embed_query(&mut self, q: &str) -> Result<Vec<f32>, Error> {
        Ok(Self::vector(q))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::cosine;

    #[test]
    fn deterministic_normalised_and_lexically_similar() {
        let a = HashedEmbedder::vector("El pedido se cancela antes del envío");
        assert_eq!(
            a,
            HashedEmbedder::vector("El pedido se cancela antes del envío")
        );
        let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        let b = HashedEmbedder::vector("se cancela el pedido");
        let c = HashedEmbedder::vector("autenticación de usuarios con token");
        assert!(cosine(&a, &b) > cosine(&a, &c));
        assert_eq!(HashedEmbedder::vector("").len(), DIMS);
    }
}
