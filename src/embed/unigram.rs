//! A compact Unigram (SentencePiece) tokenizer model: the same pieces as the Hugging Face
//! `tokenizers` Unigram model in a few flat arrays instead of a trie of hash maps.
//!
//! Why: the multilingual e5 models use the XLM-R vocabulary (250 002 pieces). `tokenizers`
//! 0.23.2 keeps it as a byte trie with one `AHashMap` per node plus a `String`→id map: 330 MB
//! resident for this one vocabulary (measured: `Tokenizer::from_file` on the installed
//! `tokenizer.json`, VmRSS before/after) — more than the ONNX session. Here the pieces live in
//! one string arena with offsets (~2 MB), the scores in a `Vec<f64>`, and lookups go through a
//! byte-sorted permutation of the ids (binary search; a prefix search narrows the sorted range
//! one byte at a time, which is what a trie walk does).
//!
//! Invariant: for every input, [`CompactUnigram::tokenize`] returns exactly the tokens
//! `tokenizers::models::unigram::Unigram` (optimised Viterbi, `fuse_unk`, byte fallback)
//! returns: the same candidate order (pieces by increasing length from each start, starts left
//! to right), the same strict `>` tie rule, the same unknown-piece score (`min_score - 10`), the
//! same fusion of adjacent unknowns and the same id for a duplicated piece (the last one, as the
//! reference's `String`→id map keeps). Unit tests compare it with the reference model; the
//! embedding golden test (`tests/it/embed/golden.rs`) compares whole vectors.
//! Only the model is replaced: normaliser, pre-tokeniser, added tokens, post-processor,
//! truncation and padding are the library's own (see [`super::tokenizer`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tokenizers::models::unigram::UnigramTrainer;
use tokenizers::{Model, Token};

/// Penalty of an unknown piece below the lowest score (the reference's `K_UNK_PENALTY`).
const UNK_PENALTY: f64 = 10.0;

/// Errors of [`CompactUnigram::new`] and of tokenizing.
#[derive(Debug, thiserror::Error)]
pub enum UnigramError {
    #[error("the Unigram vocabulary is empty")]
    EmptyVocabulary,
    #[error("the Unigram `unk_id` {0} is outside the vocabulary")]
    UnkOutside(usize),
    #[error("the Unigram vocabulary is too large ({0} pieces)")]
    TooLarge(usize),
    #[error("an unknown piece was met but the Unigram model has no `unk_id`")]
    MissingUnk,
}

/// The pieces of a Unigram vocabulary in flat arrays (see the module docs).
#[derive(Debug, Clone)]
pub struct CompactUnigram {
    /// Every piece, concatenated in id order.
    arena: String,
    /// `arena[ends[id - 1]..ends[id]]` is piece `id` (`ends[-1]` = 0).
    ends: Vec<u32>,
    scores: Vec<f64>,
    /// Piece ids ordered by piece bytes; for a duplicated piece only its last id is kept.
    sorted: Vec<u32>,
    /// `sorted[first[b]..first[b + 1]]` are the pieces starting with byte `b` (the first step
    /// of every prefix search, without a binary search over the whole vocabulary).
    first: Vec<u32>,
    min_score: f64,
    unk_id: Option<usize>,
    byte_fallback: bool,
}

impl CompactUnigram {
    /// Build from the `(piece, score)` list of `tokenizer.json` (`model.vocab`).
    pub fn new(
        vocab: Vec<(String, f64)>,
        unk_id: Option<usize>,
        byte_fallback: bool,
    ) -> Result<CompactUnigram, UnigramError> {
        if vocab.is_empty() {
            return Err(UnigramError::EmptyVocabulary);
        }
        if let Some(u) = unk_id.filter(|u| *u >= vocab.len()) {
            return Err(UnigramError::UnkOutside(u));
        }
        let total: usize = vocab.iter().map(|(p, _)| p.len()).sum();
        if total > u32::MAX as usize || vocab.len() > u32::MAX as usize {
            return Err(UnigramError::TooLarge(vocab.len()));
        }
        let mut arena = String::with_capacity(total);
        let mut ends = Vec::with_capacity(vocab.len());
        let mut scores = Vec::with_capacity(vocab.len());
        let mut min_score = f64::INFINITY;
        for (piece, score) in &vocab {
            arena.push_str(piece);
            ends.push(arena.len() as u32);
            scores.push(*score);
            if *score < min_score {
                min_score = *score;
            }
        }
        drop(vocab);
        let mut model = CompactUnigram {
            arena,
            ends,
            scores,
            sorted: Vec::new(),
            first: Vec::new(),
            min_score,
            unk_id,
            byte_fallback,
        };
        let mut sorted: Vec<u32> = (0..model.ends.len() as u32).collect();
        // Stable: equal pieces stay in id order, so the last of a run is the highest id.
        sorted.sort_by(|a, b| model.piece(*a).as_bytes().cmp(model.piece(*b).as_bytes()));
        let mut kept: Vec<u32> = Vec::with_capacity(sorted.len());
        for id in sorted {
            match kept.last_mut() {
                Some(last) if model.piece(*last) == model.piece(id) => *last = id,
                _ => kept.push(id),
            }
        }
        kept.shrink_to_fit();
        model.first = (0..=256u32)
            .map(|b| {
                // Pieces are non-empty except a possible "" (which sorts first).
                kept.partition_point(|id| {
                    model
                        .piece(*id)
                        .as_bytes()
                        .first()
                        .map_or(-1, |&x| x as i32)
                        < b as i32
                }) as u32
            })
            .collect();
        model.sorted = kept;
        Ok(model)
    }

    /// Number of pieces (ids `0..len`).
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Always false: [`CompactUnigram::new`] refuses an empty vocabulary.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    fn piece(&self, id: u32) -> &str {
        let i = id as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.arena[start..self.ends[i] as usize]
    }

    /// [`CompactUnigram::piece`] as bytes (no char-boundary checks on the hot path).
    fn bytes(&self, id: u32) -> &[u8] {
        let i = id as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.arena.as_bytes()[start..self.ends[i] as usize]
    }

    /// The id of `piece` (the last one when the vocabulary repeats it).
    fn id_of(&self, piece: &str) -> Option<u32> {
        self.sorted
            .binary_search_by(|id| self.bytes(*id).cmp(piece.as_bytes()))
            .ok()
            .map(|i| self.sorted[i])
    }

    /// Every piece that is a prefix of `rest`, shortest first, as `(byte length, id)`: the
    /// sorted range of pieces starting with `rest[..n]` narrows as `n` grows.
    fn prefixes(&self, rest: &[u8], out: &mut Vec<(usize, u32)>) {
        out.clear();
        let Some(&b0) = rest.first() else {
            return;
        };
        let (mut lo, mut hi) = (
            self.first[b0 as usize] as usize,
            self.first[b0 as usize + 1] as usize,
        );
        if lo == hi {
            return;
        }
        if self.bytes(self.sorted[lo]).len() == 1 {
            out.push((1, self.sorted[lo]));
        }
        for n in 2..=rest.len() {
            let byte = rest[n - 1];
            // Within [lo, hi) every piece shares rest[..n-1]; order by the byte at n-1
            // (a piece of length n-1 sorts first, as if its byte were below 0).
            let key = |id: &u32| self.bytes(*id).get(n - 1).copied();
            let range = &self.sorted[lo..hi];
            let first = range.partition_point(|id| key(id) < Some(byte));
            let last = first + range[first..].partition_point(|id| key(id) == Some(byte));
            if first == last {
                return;
            }
            hi = lo + last;
            lo += first;
            let id = self.sorted[lo];
            if self.bytes(id).len() == n {
                out.push((n, id));
            }
        }
    }

    /// The reference's optimised Viterbi (`Unigram::encode_optimized`), returning pieces with
    /// the id the search found them under (`None` for a run of unknown pieces, looked up by
    /// the caller as the reference looks up every piece).
    fn encode(&self, sentence: &str) -> Result<Vec<(String, Option<u32>)>, UnigramError> {
        #[derive(Clone, Copy)]
        struct Best {
            id: usize,
            score: f64,
            starts_at: Option<usize>,
        }
        if sentence.is_empty() {
            return Ok(Vec::new());
        }
        let size = sentence.len();
        let unk_score = self.min_score - UNK_PENALTY;
        let mut best = vec![
            Best {
                id: 0,
                score: 0.0,
                starts_at: None
            };
            size + 1
        ];
        let bytes = sentence.as_bytes();
        let mut found = Vec::new();
        let mut start = 0;
        while start < size {
            let here = best[start].score;
            let mblen = sentence[start..].chars().next().map_or(1, char::len_utf8);
            let mut has_single = false;
            self.prefixes(&bytes[start..], &mut found);
            for &(len, id) in &found {
                let target = &mut best[start + len];
                let candidate = self.scores[id as usize] + here;
                if target.starts_at.is_none() || candidate > target.score {
                    *target = Best {
                        id: id as usize,
                        score: candidate,
                        starts_at: Some(start),
                    };
                }
                has_single |= len == mblen;
            }
            if !has_single {
                let target = &mut best[start + mblen];
                let candidate = unk_score + here;
                if target.starts_at.is_none() || candidate > target.score {
                    *target = Best {
                        id: self.unk_id.ok_or(UnigramError::MissingUnk)?,
                        score: candidate,
                        starts_at: Some(start),
                    };
                }
            }
            start += mblen;
        }
        // Backtrack, fusing runs of unknown pieces into one.
        let mut results: Vec<(String, Option<u32>)> = Vec::new();
        let mut end = size;
        let mut unk_run_start: Option<usize> = None;
        let mut unk_run_end = 0;
        while end > 0 {
            let node = best[end];
            let start = node.starts_at.ok_or(UnigramError::MissingUnk)?;
            if Some(node.id) == self.unk_id {
                if unk_run_start.is_none() {
                    unk_run_end = end;
                }
                unk_run_start = Some(start);
            } else {
                if let Some(s) = unk_run_start.take() {
                    results.push((sentence[s..unk_run_end].to_string(), None));
                }
                results.push((sentence[start..end].to_string(), Some(node.id as u32)));
            }
            end = start;
        }
        if let Some(s) = unk_run_start {
            results.push((sentence[s..unk_run_end].to_string(), None));
        }
        results.reverse();
        Ok(results)
    }
}

impl Model for CompactUnigram {
    type Trainer = UnigramTrainer;

    /// The reference's `Unigram::tokenize`: pieces to ids, byte fallback, then `unk_id`.
    fn tokenize(&self, sentence: &str) -> tokenizers::Result<Vec<Token>> {
        let pieces = self.encode(sentence)?;
        let mut offset = 0;
        let mut tokens = Vec::with_capacity(pieces.len());
        for (piece, found) in pieces {
            let len = piece.len();
            let offsets = (offset, offset + len);
            offset += len;
            if let Some(id) = found.or_else(|| self.id_of(&piece)) {
                tokens.push(Token::new(id, piece, offsets));
                continue;
            }
            if self.byte_fallback {
                let bytes: Option<Vec<Token>> = piece
                    .bytes()
                    .map(|b| {
                        let name = format!("<0x{b:02X}>");
                        self.id_of(&name).map(|id| Token::new(id, name, offsets))
                    })
                    .collect();
                if let Some(bytes) = bytes {
                    tokens.extend(bytes);
                    continue;
                }
            }
            let unk = self.unk_id.ok_or(UnigramError::MissingUnk)? as u32;
            tokens.push(Token::new(unk, piece, offsets));
        }
        Ok(tokens)
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.id_of(token)
    }

    fn id_to_token(&self, id: u32) -> Option<String> {
        ((id as usize) < self.len()).then(|| self.piece(id).to_string())
    }

    fn get_vocab(&self) -> HashMap<String, u32> {
        self.sorted
            .iter()
            .map(|id| (self.piece(*id).to_string(), *id))
            .collect()
    }

    fn get_vocab_size(&self) -> usize {
        self.len()
    }

    /// Read-only: kdd never writes a tokenizer.
    fn save(&self, _folder: &Path, _prefix: Option<&str>) -> tokenizers::Result<Vec<PathBuf>> {
        Err("the compact Unigram model is read-only".into())
    }

    fn get_trainer(&self) -> Self::Trainer {
        UnigramTrainer::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenizers::models::unigram::Unigram;

    fn vocab() -> Vec<(String, f64)> {
        [
            ("<unk>", 0.0),
            ("a", -1.0),
            ("b", -1.5),
            ("c", -2.0),
            ("d", -1.0),
            ("cd", -1.0),
            ("ab", -1.2),
            ("abc", -1.1),
            ("abcd", -0.5),
            ("▁", -0.7),
            ("▁a", -1.3),
            ("ñ", -2.5),
            ("ña", -1.9),
            ("日本", -3.0),
            ("日", -4.0),
            ("b", -0.2),
            ("<0x78>", -9.0),
        ]
        .iter()
        .map(|(p, s)| (p.to_string(), *s))
        .collect()
    }

    fn both(byte_fallback: bool) -> (CompactUnigram, Unigram) {
        (
            CompactUnigram::new(vocab(), Some(0), byte_fallback).unwrap(),
            Unigram::from(vocab(), Some(0), byte_fallback).unwrap(),
        )
    }

    #[test]
    fn same_tokens_as_the_reference_model() {
        for fallback in [false, true] {
            let (compact, reference) = both(fallback);
            for s in [
                "abcdacdxx",
                "▁abcd▁ab▁a",
                "ñañaña",
                "日本日本語",
                "xyzq",
                "axbxc",
                "",
                "d",
                "😀a😀😀b",
                "abababcdcdcd",
            ] {
                let a = compact.tokenize(s).unwrap();
                let b = reference.tokenize(s).unwrap();
                let view = |t: &[Token]| {
                    t.iter()
                        .map(|t| (t.id, t.value.clone(), t.offsets))
                        .collect::<Vec<_>>()
                };
                assert_eq!(view(&a), view(&b), "{s:?} (byte fallback {fallback})");
            }
        }
    }

    #[test]
    fn duplicated_piece_resolves_to_its_last_id_like_the_reference() {
        let (compact, reference) = both(false);
        assert_eq!(compact.token_to_id("b"), reference.token_to_id("b"));
        assert_eq!(compact.token_to_id("b"), Some(15));
        assert_eq!(compact.id_to_token(2).as_deref(), Some("b"));
        assert_eq!(compact.token_to_id("zz"), None);
    }

    #[test]
    fn bad_vocabularies_are_typed_errors() {
        assert!(matches!(
            CompactUnigram::new(Vec::new(), Some(0), false),
            Err(UnigramError::EmptyVocabulary)
        ));
        assert!(matches!(
            CompactUnigram::new(vocab(), Some(99), false),
            Err(UnigramError::UnkOutside(99))
        ));
        let no_unk = CompactUnigram::new(vocab(), None, false).unwrap();
        assert!(no_unk.tokenize("zz").is_err());
    }
}
