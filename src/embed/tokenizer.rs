//! The model's tokenizer, configured exactly as fastembed 7.5 configured it (so vectors stay
//! the same), with the Unigram vocabulary held by [`super::unigram::CompactUnigram`].
//!
//! Loading (`tokenizer.json`, `config.json`, `special_tokens_map.json`,
//! `tokenizer_config.json`):
//! 1. `tokenizer.json` as the library reads it — normaliser, pre-tokeniser, post-processor,
//!    decoder, truncation, padding, then the added tokens through `add_tokens` — except that a
//!    `Unigram` model becomes a [`CompactUnigram`] (330 MB → ~6 MB resident for XLM-R's 250k
//!    pieces). Any other model type is loaded by the library unchanged.
//! 2. fastembed's `load_tokenizer`: truncation at `min(max_length, model_max_length)`, padding
//!    to the longest of a batch with `pad_token` / `pad_token_id`, then every entry of
//!    `special_tokens_map.json`, in file order, added as a special token.
//!
//! Invariant: the token ids of any text equal those of fastembed's tokenizer for the same
//! files; errors name the file that is wrong.

use super::unigram::CompactUnigram;
use serde::Deserialize;
use tokenizers::{
    AddedToken, DecoderWrapper, Encoding, Model, NormalizerWrapper, PaddingParams, PaddingStrategy,
    PostProcessorWrapper, PreTokenizerWrapper, TokenizerBuilder, TokenizerImpl, TruncationParams,
};

type CompactTokenizer = TokenizerImpl<
    CompactUnigram,
    NormalizerWrapper,
    PreTokenizerWrapper,
    PostProcessorWrapper,
    DecoderWrapper,
>;

/// The four tokenizer files of a model directory, as bytes.
pub struct TokenizerFiles {
    pub tokenizer: Vec<u8>,
    pub config: Vec<u8>,
    pub special_tokens_map: Vec<u8>,
    pub tokenizer_config: Vec<u8>,
}

/// A loaded tokenizer (see the module docs).
pub enum TextTokenizer {
    /// A Unigram vocabulary in the compact model.
    Compact(Box<CompactTokenizer>),
    /// Any other model type, as the library loads it.
    Library(Box<tokenizers::Tokenizer>),
}

/// Just the model's `type` (the vocabulary is skipped, not built).
#[derive(Deserialize)]
struct Peek {
    model: PeekModel,
}

#[derive(Deserialize)]
struct PeekModel {
    #[serde(rename = "type")]
    kind: Option<String>,
}

/// `tokenizer.json` with a Unigram model.
#[derive(Deserialize)]
struct UnigramFile {
    version: Option<String>,
    truncation: Option<TruncationParams>,
    padding: Option<PaddingParams>,
    #[serde(default)]
    added_tokens: Vec<AddedToken>,
    normalizer: Option<NormalizerWrapper>,
    pre_tokenizer: Option<PreTokenizerWrapper>,
    post_processor: Option<PostProcessorWrapper>,
    decoder: Option<DecoderWrapper>,
    model: UnigramModel,
}

#[derive(Deserialize)]
struct UnigramModel {
    vocab: Vec<(String, f64)>,
    unk_id: Option<usize>,
    #[serde(default)]
    byte_fallback: bool,
}

impl TextTokenizer {
    /// Load and configure (see the module docs). `Err` is a message naming the file.
    pub fn load(files: &TokenizerFiles, max_length: usize) -> Result<TextTokenizer, String> {
        Self::load_as(files, max_length, true)
    }

    /// The library's own tokenizer for the same files, whatever the model type (the reference
    /// the compact one is compared with in tests and benchmarks; 330 MB for XLM-R).
    pub fn load_reference(
        files: &TokenizerFiles,
        max_length: usize,
    ) -> Result<TextTokenizer, String> {
        Self::load_as(files, max_length, false)
    }

    fn load_as(
        files: &TokenizerFiles,
        max_length: usize,
        allow_compact: bool,
    ) -> Result<TextTokenizer, String> {
        let bad = |file: &str, e: &dyn std::fmt::Display| format!("{file}: {e}");
        let peek: Peek =
            serde_json::from_slice(&files.tokenizer).map_err(|e| bad("tokenizer.json", &e))?;
        let unigram = peek.model.kind.as_deref() == Some("Unigram");
        let mut tokenizer = if unigram && allow_compact {
            TextTokenizer::Compact(Box::new(
                compact(&files.tokenizer).map_err(|e| bad("tokenizer.json", &e))?,
            ))
        } else {
            TextTokenizer::Library(Box::new(
                tokenizers::Tokenizer::from_bytes(&files.tokenizer)
                    .map_err(|e| bad("tokenizer.json", &e))?,
            ))
        };
        match &mut tokenizer {
            TextTokenizer::Compact(t) => configure(t, files, max_length)?,
            TextTokenizer::Library(t) => configure(t, files, max_length)?,
        }
        Ok(tokenizer)
    }

    /// Tokenize a batch with the special tokens (`<s>`, `</s>`), truncated and padded.
    pub fn encode_batch(&self, texts: &[&str]) -> Result<Vec<Encoding>, String> {
        let inputs = texts.to_vec();
        match self {
            TextTokenizer::Compact(t) => t.encode_batch(inputs, true),
            TextTokenizer::Library(t) => t.encode_batch(inputs, true),
        }
        .map_err(|e| format!("tokenizing: {e}"))
    }
}

/// `tokenizer.json` → the library's tokenizer around a [`CompactUnigram`], built the way the
/// library's own deserializer builds it.
fn compact(bytes: &[u8]) -> Result<CompactTokenizer, String> {
    let file: UnigramFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if let Some(v) = file.version.as_deref().filter(|v| *v != "1.0") {
        return Err(format!("unknown tokenizer version '{v}'"));
    }
    let model = CompactUnigram::new(
        file.model.vocab,
        file.model.unk_id,
        file.model.byte_fallback,
    )
    .map_err(|e| e.to_string())?;
    let mut tokenizer = TokenizerBuilder::new()
        .with_model(model)
        .with_normalizer(file.normalizer)
        .with_pre_tokenizer(file.pre_tokenizer)
        .with_post_processor(file.post_processor)
        .with_decoder(file.decoder)
        .with_truncation(file.truncation)
        .with_padding(file.padding)
        .build()
        .map_err(|e| e.to_string())?;
    tokenizer
        .add_tokens(file.added_tokens)
        .map_err(|e| e.to_string())?;
    Ok(tokenizer)
}

/// fastembed 7.5's `load_tokenizer` configuration, step for step.
fn configure<M: Model>(
    tokenizer: &mut TokenizerImpl<
        M,
        NormalizerWrapper,
        PreTokenizerWrapper,
        PostProcessorWrapper,
        DecoderWrapper,
    >,
    files: &TokenizerFiles,
    max_length: usize,
) -> Result<(), String> {
    let json = |bytes: &[u8], file: &str| {
        serde_json::from_slice::<serde_json::Value>(bytes).map_err(|e| format!("{file}: {e}"))
    };
    let config = json(&files.config, "config.json")?;
    let special = json(&files.special_tokens_map, "special_tokens_map.json")?;
    let tok_config = json(&files.tokenizer_config, "tokenizer_config.json")?;
    let model_max = tok_config["model_max_length"]
        .as_f64()
        .ok_or("tokenizer_config.json: no numeric `model_max_length` (the model's longest input)")?
        as f32;
    let max_length = max_length.min(model_max as usize);
    let pad = &tok_config["pad_token"];
    let pad_token: String = pad
        .as_str()
        .or_else(|| pad["content"].as_str())
        .ok_or("tokenizer_config.json: no string `pad_token`")?
        .into();
    let pad_id = config["pad_token_id"]
        .as_u64()
        .map(|id| id as u32)
        .or_else(|| tokenizer.token_to_id(&pad_token))
        .unwrap_or(0);
    tokenizer.with_padding(Some(PaddingParams {
        strategy: PaddingStrategy::BatchLongest,
        pad_token,
        pad_id,
        ..Default::default()
    }));
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length,
            ..Default::default()
        }))
        .map_err(|e| format!("tokenizer truncation: {e}"))?;
    let serde_json::Value::Object(entries) = special else {
        return Ok(());
    };
    for value in entries.values() {
        let token = if let Some(content) = value.as_str() {
            Some(AddedToken {
                content: content.into(),
                special: true,
                ..Default::default()
            })
        } else {
            match (
                value["content"].as_str(),
                value["single_word"].as_bool(),
                value["lstrip"].as_bool(),
                value["rstrip"].as_bool(),
                value["normalized"].as_bool(),
            ) {
                (
                    Some(content),
                    Some(single_word),
                    Some(lstrip),
                    Some(rstrip),
                    Some(normalized),
                ) => Some(AddedToken {
                    content: content.into(),
                    special: true,
                    single_word,
                    lstrip,
                    rstrip,
                    normalized,
                }),
                _ => None,
            }
        };
        if let Some(token) = token {
            tokenizer
                .add_special_tokens([token])
                .map_err(|e| format!("special_tokens_map.json: {e}"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKENIZER: &str = r#"{
      "version": "1.0", "truncation": null, "padding": null,
      "added_tokens": [
        {"id": 0, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
        {"id": 1, "content": "<pad>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
        {"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
        {"id": 3, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
      ],
      "normalizer": {"type": "NFKC"},
      "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
      "post_processor": {"type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}, "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}},
      "decoder": null,
      "model": {"type": "Unigram", "unk_id": 3, "byte_fallback": false, "vocab": [
        ["<s>", 0.0], ["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0], ["▁", -1.0], ["▁a", -2.0],
        ["b", -2.5], ["ab", -1.5], ["▁ab", -1.2], ["c", -3.0], ["ñ", -2.0], ["▁ñ", -2.2]]}
    }"#;

    fn files(tokenizer_config: &str) -> TokenizerFiles {
        TokenizerFiles {
            tokenizer: TOKENIZER.as_bytes().to_vec(),
            config: br#"{"pad_token_id": 1}"#.to_vec(),
            special_tokens_map: br#"{"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": {"content": "<pad>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false}}"#.to_vec(),
            tokenizer_config: tokenizer_config.as_bytes().to_vec(),
        }
    }

    const CONFIG: &str = r#"{"model_max_length": 8, "pad_token": "<pad>"}"#;

    #[test]
    fn compact_and_library_tokenizers_agree_truncate_and_pad() {
        let f = files(CONFIG);
        let compact = TextTokenizer::load(&f, 512).unwrap();
        let reference = TextTokenizer::load_reference(&f, 512).unwrap();
        assert!(matches!(compact, TextTokenizer::Compact(_)));
        let texts = [
            "ab abc",
            "ñab  ñ xyz",
            "<s> ab </s>",
            "ab ab ab ab ab ab ab ab ab",
            "",
        ];
        let a = compact.encode_batch(&texts).unwrap();
        let b = reference.encode_batch(&texts).unwrap();
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.get_ids(), y.get_ids());
            assert_eq!(x.get_attention_mask(), y.get_attention_mask());
            assert_eq!(x.get_type_ids(), y.get_type_ids());
            // model_max_length 8 caps the 512 asked for; the batch is padded to its longest.
            assert_eq!(x.len(), 8);
        }
        assert_eq!(a[0].get_ids()[0], 0, "<s> first");
        assert!(a[4].get_ids().ends_with(&[1]), "padded with <pad> = 1");
    }

    #[test]
    fn bad_files_are_errors_naming_the_file() {
        let err = |r: Result<TextTokenizer, String>| r.err().expect("an error");
        let e = err(TextTokenizer::load(
            &files(r#"{"pad_token": "<pad>"}"#),
            512,
        ));
        assert!(
            e.contains("tokenizer_config.json") && e.contains("model_max_length"),
            "{e}"
        );
        let mut broken = files(CONFIG);
        broken.tokenizer = b"{ not json".to_vec();
        assert!(err(TextTokenizer::load(&broken, 512)).starts_with("tokenizer.json"));
        let mut bad_vocab = files(CONFIG);
        bad_vocab.tokenizer = TOKENIZER
            .replace("\"unk_id\": 3", "\"unk_id\": 99")
            .into_bytes();
        let e = err(TextTokenizer::load(&bad_vocab, 512));
        assert!(e.starts_with("tokenizer.json") && e.contains("99"), "{e}");
        let mut bad_config = files(CONFIG);
        bad_config.config = b"[".to_vec();
        assert!(err(TextTokenizer::load(&bad_config, 512)).starts_with("config.json"));
    }
}
