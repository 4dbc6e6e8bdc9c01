//! Hostile cases: net (see the module doc in `mod.rs`).
