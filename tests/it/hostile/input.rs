//! Hostile cases: input (see the module doc in `mod.rs`).
