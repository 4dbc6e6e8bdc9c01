//! `kdd`: the command-line interface. All logic lives in [`kdd::cli`].
fn main() -> std::process::ExitCode {
    kdd::cli::main()
}
