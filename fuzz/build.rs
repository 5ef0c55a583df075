//! Build script: gives the fuzz target the link option that `server/build.rs` gives ghostline's
//! own binaries (`--wrap=llamafile_sgemm`, where llama.cpp is built with llamafile on x86-64
//! Linux): the library's `model::sgemm` calls llama.cpp's kernel under the wrapped name.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=GGML_LLAMAFILE");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let on = matches!(var("GGML_LLAMAFILE").to_ascii_uppercase().as_str(), "ON" | "1" | "TRUE" | "YES");
    if on && var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ARCH") == "x86_64" {
        println!("cargo:rustc-link-arg=-Wl,--wrap=llamafile_sgemm");
    }
}
