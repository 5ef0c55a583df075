//! Build script: gives the fuzz target the link option that `server/build.rs` gives ghostline's
//! own binaries (`--wrap=llamafile_sgemm`, where llama.cpp is built with llamafile on x86-64
//! Linux): the library's `model::sgemm` calls llama.cpp's kernel under the wrapped name.

#[path = "../server/build_sgemm.rs"]
mod build_sgemm;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../server/build_sgemm.rs");
    if let Some(arg) = build_sgemm::sgemm_wrap() {
        println!("cargo:rustc-link-arg={arg}");
    }
}
