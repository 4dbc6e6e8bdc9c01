//! `kdd-merge-driver %O %A %B %P`: git merge driver for `.kdd-index/` artifacts.
//! Logic lives in [`kdd::merge`].
fn main() -> std::process::ExitCode {
    kdd::cli::merge_driver_main()
}
