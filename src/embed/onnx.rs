//! The ONNX Runtime session of the real model, built here (not through fastembed) so its memory
//! can be chosen, and the inference step: tokenize → run → pool → L2-normalise.
//!
//! Invariants:
//! - The vector of a text is what fastembed 7.5 computed for the same files: the same tokenizer
//!   configuration ([`super::tokenizer`]), the same inputs (`input_ids`, `attention_mask`, and
//!   `token_type_ids` when the graph declares it, all `i64`), the same output choice (the only
//!   output, else `text_embeds`, `last_hidden_state`, `sentence_embedding`), the same f32
//!   arithmetic: mean pooling sums the masked token vectors in token order and divides by the
//!   mask count (1 when it is 0), CLS takes token 0, a 2-d output is taken as already pooled;
//!   then `v / (‖v‖ + 1e-12)`. The golden test (`tests/it/embed/golden.rs`) holds it to that.
//! - Session options are [`SessionMemory`]; the defaults are justified, with figures, in
//!   [`SessionMemory::default`]'s doc. ONNX Runtime reads `model.onnx` itself
//!   (`commit_from_file`): with the file read into a `Vec` first and committed from memory the
//!   load peaked at 371 MB VmHWM, from the file it peaks at 256 MB, loads in half the time and
//!   settles at the same or lower RSS (166 vs 192 MB), with the same vectors. Every failure is a
//!   message for the caller's typed error.

use super::tokenizer::TextTokenizer;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::Tensor;

/// How the session is built (the memory/speed knobs measured for issue 12).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionMemory {
    /// ONNX Runtime intra-op threads (default: the number of cores).
    pub intra_threads: usize,
    /// Graph optimisation: 0 off, 1 basic, 2 extended, 3 all.
    pub optimization: u8,
    /// The CPU provider's memory arena.
    pub cpu_arena: bool,
    /// Memory-pattern planning (pre-allocates per input shape).
    pub memory_pattern: bool,
    /// Pre-packed weights for the GEMM kernels (a second, kernel-shaped copy of each weight).
    pub prepacking: bool,
}

impl Default for SessionMemory {
    /// fastembed's settings minus its CPU arena, kept because each alternative was measured
    /// and bought nothing (multilingual-e5-small int8, VmRSS after load / after 20 long
    /// passages, debug build, 2 cores): arena on +48 MB (212 vs 164 MB); memory pattern off
    /// ±0 (192 vs 192–196 MB after a 512-token run); prepacking off ±0 (192 MB) and slower;
    /// 1 intra-op thread ±0; `MALLOC_ARENA_MAX` 1 or 2 ±0 (so no `mallopt`); Level 2 the same
    /// vectors and memory as Level 3; Level 1 changes the vectors (min cosine 0.9974 on the
    /// golden texts), so Level 3 stays.
    fn default() -> Self {
        SessionMemory {
            intra_threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            optimization: 3,
            cpu_arena: false,
            memory_pattern: true,
            prepacking: true,
        }
    }
}

/// Which output holds the token (or sentence) vectors.
const OUTPUT_PRECEDENCE: [&str; 3] = ["text_embeds", "last_hidden_state", "sentence_embedding"];

/// A built session with its tokenizer.
pub struct OnnxModel {
    session: Session,
    tokenizer: TextTokenizer,
    token_type_ids: bool,
    output: usize,
    cls: bool,
}

impl OnnxModel {
    /// Build the session from the `model.onnx` file at `onnx` with `memory`.
    pub fn build(
        env: &ort::environment::Environment,
        onnx: &std::path::Path,
        tokenizer: TextTokenizer,
        cls: bool,
        memory: &SessionMemory,
    ) -> Result<OnnxModel, String> {
        let err = |e: ort::Error<_>| e.to_string();
        let level = match memory.optimization {
            0 => GraphOptimizationLevel::Disable,
            1 => GraphOptimizationLevel::Level1,
            2 => GraphOptimizationLevel::Level2,
            _ => GraphOptimizationLevel::Level3,
        };
        let mut builder = Session::builder(env)
            .map_err(|e| e.to_string())?
            .with_execution_providers([ort::ep::CPU::default()
                .with_arena_allocator(memory.cpu_arena)
                .build()])
            .map_err(err)?
            .with_optimization_level(level)
            .map_err(err)?
            .with_intra_threads(memory.intra_threads.max(1))
            .map_err(err)?
            .with_memory_pattern(memory.memory_pattern)
            .map_err(err)?;
        if !memory.prepacking {
            builder = builder
                .with_config_entry("session.disable_prepacking", "1")
                .map_err(err)?;
        }
        let session = builder.commit_from_file(onnx).map_err(|e| e.to_string())?;
        let token_type_ids = session
            .inputs()
            .iter()
            .any(|i| i.name() == "token_type_ids");
        let names: Vec<&str> = session.outputs().iter().map(|o| o.name()).collect();
        let output = if names.len() == 1 {
            0
        } else {
            OUTPUT_PRECEDENCE
                .iter()
                .find_map(|want| names.iter().position(|n| n == want))
                .ok_or_else(|| format!("no embedding output among {names:?}"))?
        };
        Ok(OnnxModel {
            session,
            tokenizer,
            token_type_ids,
            output,
            cls,
        })
    }

    /// Embed a batch of already-prefixed texts (padded to the longest; see the module docs).
    pub fn embed(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self.tokenizer.encode_batch(texts)?;
        let batch = encodings.len();
        let len = encodings.first().map_or(0, |e| e.len());
        let column = |f: &dyn Fn(&tokenizers::Encoding) -> &[u32]| -> Vec<i64> {
            encodings
                .iter()
                .flat_map(|e| f(e).iter().map(|&x| x as i64))
                .collect()
        };
        let ids = column(&|e| e.get_ids());
        let mask = column(&|e| e.get_attention_mask());
        let shape = [batch, len];
        let tensor = |v: Vec<i64>| Tensor::from_array((shape, v)).map_err(|e| e.to_string());
        let mut inputs = ort::inputs![
            "input_ids" => tensor(ids)?,
            "attention_mask" => tensor(mask.clone())?,
        ];
        if self.token_type_ids {
            let types = column(&|e| e.get_type_ids());
            inputs.push(("token_type_ids".into(), tensor(types)?.into()));
        }
        let outputs = self.session.run(inputs).map_err(|e| e.to_string())?;
        let (dims, data) = outputs[self.output]
            .try_extract_tensor::<f32>()
            .map_err(|e| e.to_string())?;
        let dims: Vec<usize> = dims.iter().map(|&d| d.max(0) as usize).collect();
        let pooled = match dims.as_slice() {
            [b, hidden] if *b == batch => data.chunks(*hidden).map(<[f32]>::to_vec).collect(),
            [b, seq, hidden] if *b == batch && *seq == len => {
                pool(data, &mask, batch, len, *hidden, self.cls)
            }
            other => return Err(format!("unexpected output shape {other:?}")),
        };
        Ok(pooled.iter().map(|v| normalize(v)).collect())
    }
}

/// Mean (or CLS) pooling of `[batch, seq, hidden]` token vectors, in fastembed's f32 order.
fn pool(
    data: &[f32],
    mask: &[i64],
    batch: usize,
    seq: usize,
    hidden: usize,
    cls: bool,
) -> Vec<Vec<f32>> {
    (0..batch)
        .map(|b| {
            let tokens = &data[b * seq * hidden..(b + 1) * seq * hidden];
            if cls {
                return tokens[..hidden].to_vec();
            }
            let mut sum = vec![0f32; hidden];
            let mut count = 0f32;
            for (t, token) in tokens.chunks(hidden).enumerate() {
                let m = mask[b * seq + t] as f32;
                for (s, x) in sum.iter_mut().zip(token) {
                    *s += m * x;
                }
                count += m;
            }
            let count = if count == 0.0 { 1.0 } else { count };
            sum.iter().map(|s| s / count).collect()
        })
        .collect()
}

/// fastembed's `normalize`: `v / (‖v‖ + 1e-12)`.
fn normalize(v: &[f32]) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / (norm + 1e-12)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_pooling_ignores_masked_tokens_and_cls_takes_the_first() {
        // batch 1, seq 3, hidden 2; the last token is padding.
        let data = [1.0, 2.0, 3.0, 4.0, 100.0, 100.0];
        let mask = [1, 1, 0];
        assert_eq!(pool(&data, &mask, 1, 3, 2, false), vec![vec![2.0, 3.0]]);
        assert_eq!(pool(&data, &mask, 1, 3, 2, true), vec![vec![1.0, 2.0]]);
        let n = normalize(&[3.0, 4.0]);
        assert!((n[0] - 0.6).abs() < 1e-6 && (n[1] - 0.8).abs() < 1e-6);
    }
}
