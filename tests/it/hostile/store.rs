//! Hostile cases: store (see the module doc in `mod.rs`).
