//! Build script: where llama.cpp is built with llamafile's `sgemm` (`GGML_LLAMAFILE`, on in
//! `.cargo/config.toml`) and linked statically on x86-64 Linux, routes its calls of that kernel
//! through `model::sgemm` and of its CPU flash attention through `model::flash` (the linker's
//! `--wrap`), so that one token takes the same order of arithmetic as a batch;
//! `cfg(ghostline_sgemm_one_column)` tells the code.

#[path = "build_sgemm.rs"]
mod build_sgemm;

fn main() {
    println!("cargo:rustc-check-cfg=cfg(ghostline_sgemm_one_column)");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build_sgemm.rs");
    if let Some(arg) = build_sgemm::sgemm_wrap() {
        // Only the binaries, tests and benches of this package get the option; a crate that
        // links the library (fuzz/) gives the same option in its own build script.
        println!("cargo:rustc-link-arg={arg}");
        println!("cargo:rustc-cfg=ghostline_sgemm_one_column");
    }
}
