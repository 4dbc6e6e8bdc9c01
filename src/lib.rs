//! `kdd` — a git-native retrieval engine for KDD specs.
//!
//! The write pipeline, in module order:
//!
//! ```text
//! spec bytes ─ parse ─▶ Document ─ extract ─▶ Extracted (Node + LinkRecords + Sections)
//!            ─ embed ─▶ chunk vectors ─ artifact ─▶ .kdd-index/ (committed)
//!   index (full) / hook (staged tree, incremental) drive those stages; merge unions artifacts.
//! ```
//!
//! The read pipeline:
//!
//! ```text
//! .kdd-index/ + specs ─ graph (global link resolution) ─ cache (LMDB + arroy + tantivy, derived)
//!                    ─ query (lexical, semantic, graph, fusion) ─ cli / serve (MCP, HTTP)
//! ```
//!
//! See `ARCHITECTURE.md` for a walk through each module in this order.
//!
//! Features (ARCHITECTURE.md, "Features"): `cache` (the read model, queries, enrichment) and
//! `serve` (the servers and the full `kdd` CLI; default). Without them the library holds the
//! write side only, which is all `kdd-hook` and `kdd-merge-driver` link.

pub mod artifact;
#[cfg(feature = "cache")]
pub mod cache;
pub mod cli;
pub mod config;
pub mod embed;
#[cfg(feature = "cache")]
pub mod enrich;
pub mod extract;
pub mod git;
pub mod graph;
pub mod hook;
pub mod index;
pub mod merge;
pub mod parse;
pub mod paths;
pub mod proc;
#[cfg(feature = "cache")]
pub mod query;
pub mod report;
pub mod roots;
#[cfg(feature = "serve")]
pub mod serve;
pub mod source;
pub mod spec;
pub mod sync;
pub mod trace;
