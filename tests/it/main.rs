//! Integration tests: one binary, one module per area.

mod core;
mod embed;
mod util;
