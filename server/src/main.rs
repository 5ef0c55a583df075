//! The `ghostline` binary: the language server (default), and its command-line tools.

fn main() -> std::process::ExitCode {
    ghostline::cli::main()
}
