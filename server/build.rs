//! Build script: where llama.cpp is built with llamafile's `sgemm` (`GGML_LLAMAFILE`, on in
//! `.cargo/config.toml`) and linked statically on x86-64 Linux, routes its calls of that kernel
//! through `model::sgemm` (the linker's `--wrap`), so that one token takes the same order of
//! arithmetic as a batch; `cfg(ghostline_sgemm_one_column)` tells the code.

fn main() {
    println!("cargo:rustc-check-cfg=cfg(ghostline_sgemm_one_column)");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=GGML_LLAMAFILE");
    if let Some(arg) = sgemm_wrap() {
        // Only the binaries, tests and benches of this package get the option; a crate that
        // links the library (fuzz/) gives the same option in its own build script.
        println!("cargo:rustc-link-arg={arg}");
        println!("cargo:rustc-cfg=ghostline_sgemm_one_column");
    }
}

/// The link option, where it applies: x86-64 Linux, llama.cpp linked into the binary (a
/// `dynamic-link` build loads libggml-cpu.so, whose calls inside it no link option reaches) and
/// built with llamafile (`GGML_LLAMAFILE` as llama-cpp-sys-2 passes it to CMake; without it
/// there is no `llamafile_sgemm` to wrap).
fn sgemm_wrap() -> Option<&'static str> {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let linux_x86 = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ARCH") == "x86_64";
    let dynamic = std::env::var_os("CARGO_FEATURE_DYNAMIC_LINK").is_some();
    let llamafile = matches!(var("GGML_LLAMAFILE").to_ascii_uppercase().as_str(), "ON" | "1" | "TRUE" | "YES");
    (linux_x86 && !dynamic && llamafile).then_some("-Wl,--wrap=llamafile_sgemm")
}
