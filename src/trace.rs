//! Per-phase timings on stderr: `KDD_TRACE=1 kdd query …` prints one `kdd-trace: <phase>
//! <ms>` line per phase as it ends (cache open, embedder connection, translation, query
//! embedding, lexical and vector search, the graph steps, assembly, rendering, the whole search,
//! output…), for finding where a cold command or a server request spends its time
//! (`cargo bench --bench bench -- latency` reads them).
//!
//! Invariants: off unless `KDD_TRACE` is `1`/`true`/`yes` (read once per process); a line names
//! a phase and a duration only, never a question, a path or anything from the repository.

use std::sync::OnceLock;
use std::time::Instant;

/// Environment switch.
pub const ENV_TRACE: &str = "KDD_TRACE";

/// True when `KDD_TRACE` asks for timings.
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var(ENV_TRACE).is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes"))
    })
}

/// Report that `phase` took the time since `start`.
pub fn done(phase: &'static str, start: Instant) {
    if enabled() {
        let ms = start.elapsed().as_secs_f64() * 1000.0;
        crate::report::info(&format!("kdd-trace: {phase} {ms:.2}"));
    }
}

/// A phase that is reported when the value is dropped.
pub struct Span {
    phase: &'static str,
    start: Instant,
}

/// Start timing `phase`.
pub fn span(phase: &'static str) -> Span {
    Span {
        phase,
        start: Instant::now(),
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        done(self.phase, self.start);
    }
}
