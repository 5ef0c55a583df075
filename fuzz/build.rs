//! Build script: gives the fuzz target the link option that `server/build.rs` gives ghostline's
//! own binaries (`--wrap` for llamafile's `sgemm` and flash attention, where llama.cpp is built
//! with llamafile on x86-64 Linux): the library's `model::sgemm` and `model::flash` call
//! llama.cpp's kernels under the wrapped names.

#[path = "../server/build_sgemm.rs"]
mod build_sgemm;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../server/build_sgemm.rs");
    if let Some(arg) = build_sgemm::sgemm_wrap() {
        println!("cargo:rustc-link-arg={arg}");
    }
}
