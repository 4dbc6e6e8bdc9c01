//! Hostile cases: embed (see the module doc in `mod.rs`).
