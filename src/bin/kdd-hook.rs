//! `kdd-hook`: git hook entry point (pre-commit, post-merge, post-checkout, post-rewrite,
//! post-receive). Logic lives in [`kdd::hook`].
fn main() -> std::process::ExitCode {
    kdd::cli::hook_main()
}
