//! Step 3 of hybrid ranking (see [`super::hybrid`]): fusing the lexical and the semantic signal
//! of each candidate into one score.
//!
//! Modes (knob `KDD_RANK_FUSE`, see [`super::knobs`]):
//! - 0, max-normalised weighted sum: each signal divided by its best in this answer (the
//!   semantic one first stretched over the candidate pool), then weighted;
//! - 1, reciprocal rank fusion: each signal contributes `(K+1) / (K+1+rank)`;
//! - 2, z-scores: each signal standardised over the candidates that have it (a candidate
//!   without it takes the pool's lowest value), weighted, then rescaled to [0, 1].
//!
//! Invariants: scores are finite and in [0, 1], the best possible candidate scores 1; a node
//! without vectors (`stand_in`) lets its lexical value stand in for the missing semantic one in
//! every mode (missing is not "dissimilar").

use super::hybrid::Signals;

/// Rank offset of reciprocal rank fusion (small: the pools are tens of candidates, not
/// thousands of documents).
const RRF_K: f32 = 20.0;

/// One candidate to fuse: its signals and whether its lexical value stands in for a missing
/// semantic one.
pub(super) struct Input<'a> {
    pub sig: &'a Signals,
    pub stand_in: bool,
}

/// Weights of the two signals (0 for a signal this answer does not have).
#[derive(Clone, Copy)]
pub(super) struct Weights {
    pub lex: f32,
    pub sem: f32,
}

/// The fused score of each input, in order.
pub(super) fn fuse(mode: u8, inputs: &[Input<'_>], w: Weights) -> Vec<f32> {
    let wsum = w.lex + w.sem;
    if wsum <= 0.0 {
        return vec![0.0; inputs.len()];
    }
    match mode {
        1 => inputs
            .iter()
            .map(|i| {
                let rrf = |x: Option<(f32, usize)>| {
                    x.map_or(0.0, |(_, r)| (RRF_K + 1.0) / (RRF_K + 1.0 + r as f32))
                };
                let l = rrf(i.sig.lex);
                let s = if i.sig.sem.is_none() && i.stand_in {
                    l
                } else {
                    rrf(i.sig.sem)
                };
                (w.lex * l + w.sem * s) / wsum
            })
            .collect(),
        2 => zscores(inputs, w),
        _ => inputs
            .iter()
            .map(|i| {
                let l = i.sig.lex.map_or(0.0, |x| x.0);
                let s = match i.sig.sem {
                    Some(x) => x.0,
                    None if i.stand_in => l,
                    None => 0.0,
                };
                (w.lex * l + w.sem * s) / wsum
            })
            .collect(),
    }
}

/// Standardise the present values of a signal; missing ones take the lowest present value.
fn standardise(vals: &[Option<f32>]) -> Vec<f32> {
    let present: Vec<f32> = vals.iter().flatten().copied().collect();
    if present.is_empty() {
        return vec![0.0; vals.len()];
    }
    let n = present.len() as f32;
    let mean = present.iter().sum::<f32>() / n;
    let var = present.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / n;
    let sd = var.sqrt().max(1e-6);
    let lo = present.iter().copied().fold(f32::MAX, f32::min);
    vals.iter().map(|v| (v.unwrap_or(lo) - mean) / sd).collect()
}

fn zscores(inputs: &[Input<'_>], w: Weights) -> Vec<f32> {
    let lex: Vec<Option<f32>> = inputs.iter().map(|i| i.sig.lex.map(|x| x.0)).collect();
    let sem: Vec<Option<f32>> = inputs.iter().map(|i| i.sig.sem.map(|x| x.0)).collect();
    let zl = standardise(&lex);
    let zs = standardise(&sem);
    let raw: Vec<f32> = inputs
        .iter()
        .enumerate()
        .map(|(k, i)| {
            let s = if i.sig.sem.is_none() && i.stand_in {
                zl[k]
            } else {
                zs[k]
            };
            w.lex * zl[k] + w.sem * s
        })
        .collect();
    let hi = raw.iter().copied().fold(f32::MIN, f32::max);
    let lo = raw.iter().copied().fold(f32::MAX, f32::min);
    let span = (hi - lo).max(1e-6);
    raw.iter().map(|x| (x - lo) / span).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(lex: Option<(f32, usize)>, sem: Option<(f32, usize)>) -> Signals {
        Signals {
            lex,
            sem,
            sem_raw: None,
            best_section: None,
            sem_text: None,
        }
    }

    #[test]
    fn every_mode_scores_in_unit_range_and_keeps_the_best_first() {
        let a = sig(Some((1.0, 0)), Some((1.0, 0)));
        let b = sig(Some((0.5, 1)), Some((0.2, 3)));
        let c = sig(None, Some((0.6, 1)));
        let d = sig(Some((0.4, 2)), None);
        let inputs = [&a, &b, &c, &d].map(|s| Input {
            sig: s,
            stand_in: false,
        });
        let w = Weights { lex: 1.0, sem: 0.6 };
        for mode in 0..=2 {
            let f = fuse(mode, &inputs, w);
            assert!(f.iter().all(|x| (0.0..=1.0).contains(x)), "{mode}: {f:?}");
            assert!(f[1..].iter().all(|x| *x < f[0]), "{mode}: {f:?}");
            assert!((f[0] - 1.0).abs() < 1e-5, "{mode}: {f:?}");
        }
    }

    #[test]
    fn a_node_without_vectors_is_not_dissimilar() {
        let e = sig(Some((0.8, 1)), None);
        let w = Weights { lex: 1.0, sem: 0.6 };
        for mode in 0..=1 {
            let with = fuse(
                mode,
                &[Input {
                    sig: &e,
                    stand_in: true,
                }],
                w,
            )[0];
            let without = fuse(
                mode,
                &[Input {
                    sig: &e,
                    stand_in: false,
                }],
                w,
            )[0];
            assert!(with > without, "{mode}");
        }
    }
}
