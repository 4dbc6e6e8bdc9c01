//! The ranking's tuning knobs, read in this one place.
//!
//! Each knob has a measured default (see `tools/eval/cv.py` and the commit that set it) and an
//! optional `KDD_RANK_*` environment override, so one release binary serves a whole
//! cross-validated parameter sweep. They are tuning knobs for evaluation, not configuration:
//! an unparsable or out-of-range value is ignored (the default stands). The set is kept small
//! on purpose — every knob is a general property of the ranking, none exists for one query.
//!
//! One knob lives below this module: `KDD_RANK_DOC_TR` (0–3, default 1.0, the weight of the
//! specs' translations in BM25) is read in `cache/text.rs`, where that weight applies.
//!
//! Invariants: values are read once per process and never change afterwards; every value is
//! finite and within the range stated on its field.

use std::sync::OnceLock;

/// The ranking's parameters.
#[derive(Debug, Clone, Copy)]
pub struct Knobs {
    /// `KDD_RANK_W_SEM` (0–3): weight of the semantic signal against lexical (1.0).
    pub w_sem: f32,
    /// `KDD_RANK_W_SEM_TR` (0–3): the semantic weight when the question was translated.
    pub w_sem_translated: f32,
    /// `KDD_RANK_W_SEM_ID` (0–3): the semantic weight (at most) when the question names an
    /// identifier the corpus contains verbatim (see `query::ident`). 0 chosen in every fold of
    /// the 5-fold sweep {0, 0.15, 0.3, 0.6}: dev 0.759 → 0.781 out of fold, check 0.851 → 0.857.
    pub w_sem_ident: f32,
    /// `KDD_RANK_KIND` (0–2): share of score added to a candidate of a kind the question asks
    /// for ("which event…", see `query::intent`). Swept {0, 0.2, 0.4, 0.6, 0.8, 1.2}: dev
    /// 0.781 → 0.790 at 0.6 (0.794 at 0.8, chosen in 5/5 folds), check 0.858 → 0.879 at 0.6
    /// (chosen in 5/5 folds; 0.878 at 0.8); 0.6 kept, the smaller of the two optima.
    pub kind_boost: f32,
    /// `KDD_RANK_SMOOTH` (0–2): share of a linked candidate's score a node adds to its own.
    pub smooth: f32,
    /// `KDD_RANK_EXPAND` (0–2): share of its seed's score a graph-expanded node inherits.
    pub expand: f32,
    /// `KDD_RANK_PRF` (0–40): pseudo-relevance feedback terms added to the lexical query
    /// (0 turns feedback off).
    pub prf_terms: usize,
    /// `KDD_RANK_PRF_W` (0–2): weight of the feedback query's lexical score.
    pub prf_weight: f32,
    /// `KDD_RANK_FUSE` (0–2): how lexical and semantic scores are fused: 0 = each normalised by
    /// its best in the answer, weighted sum; 1 = reciprocal rank fusion; 2 = z-scores over the
    /// candidate pool, weighted sum.
    pub fuse: u8,
    /// `KDD_RANK_XSEM` (0–1): 1 = a translated question is embedded twice (as asked, and its
    /// translation) and a node keeps its best cosine of the two; 0 = one embedding of both.
    pub xsem: u8,
    /// `KDD_RANK_ISOLATE` (0–1): 1 = domain isolation in search (see `query::isolate`).
    pub isolate: u8,
}

const DEFAULTS: Knobs = Knobs {
    w_sem: 0.6,
    w_sem_translated: 0.5,
    w_sem_ident: 0.0,
    kind_boost: 0.6,
    smooth: 0.4,
    expand: 0.5,
    prf_terms: 0,
    prf_weight: 0.5,
    fuse: 0,
    xsem: 0,
    isolate: 1,
};

fn read(name: &str, default: f32, lo: f32, hi: f32) -> f32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse::<f32>().ok())
        .filter(|v| v.is_finite() && (lo..=hi).contains(v))
        .unwrap_or(default)
}

/// The knobs of this process (defaults overridden by `KDD_RANK_*`).
pub fn knobs() -> &'static Knobs {
    static K: OnceLock<Knobs> = OnceLock::new();
    K.get_or_init(|| Knobs {
        w_sem: read("KDD_RANK_W_SEM", DEFAULTS.w_sem, 0.0, 3.0),
        w_sem_translated: read("KDD_RANK_W_SEM_TR", DEFAULTS.w_sem_translated, 0.0, 3.0),
        w_sem_ident: read("KDD_RANK_W_SEM_ID", DEFAULTS.w_sem_ident, 0.0, 3.0),
        kind_boost: read("KDD_RANK_KIND", DEFAULTS.kind_boost, 0.0, 2.0),
        smooth: read("KDD_RANK_SMOOTH", DEFAULTS.smooth, 0.0, 2.0),
        expand: read("KDD_RANK_EXPAND", DEFAULTS.expand, 0.0, 2.0),
        prf_terms: read("KDD_RANK_PRF", DEFAULTS.prf_terms as f32, 0.0, 40.0) as usize,
        prf_weight: read("KDD_RANK_PRF_W", DEFAULTS.prf_weight, 0.0, 2.0),
        fuse: read("KDD_RANK_FUSE", DEFAULTS.fuse as f32, 0.0, 2.0) as u8,
        xsem: read("KDD_RANK_XSEM", DEFAULTS.xsem as f32, 0.0, 1.0) as u8,
        isolate: read("KDD_RANK_ISOLATE", DEFAULTS.isolate as f32, 0.0, 1.0) as u8,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn defaults_are_in_range() {
        let k = super::DEFAULTS;
        assert!(k.w_sem >= 0.0 && k.smooth >= 0.0 && k.expand >= 0.0);
    }
}
