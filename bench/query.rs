//! Query benchmark (placeholder until the synthetic corpus generator lands).

pub fn run(_args: &[String]) {}
