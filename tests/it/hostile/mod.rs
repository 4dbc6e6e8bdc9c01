//! The hostile suite: every attack a teammate with commit rights (or a client of a shared
//! server) could try, committed through real git and run against the real binaries, with the
//! outcome asserted: no byte from outside the repository in any answer, bounded memory and
//! time, no SIGBUS, a truthful `verify`, servers that stay up.
//!
//! - [`input`]: what is read from the committed tree (symlinks, crafted artifacts, YAML bombs).
//! - [`store`]: the derived cache (truncated and corrupt stores heal themselves).
//! - [`net`]: the HTTP and MCP servers, and the merge driver's inputs.
//! - [`embed`]: the embedding service dying, going stale or going silent.

mod embed;
mod input;
mod net;
mod store;
