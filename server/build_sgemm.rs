//! When ghostline's binaries link with `--wrap` for llama.cpp's CPU kernels (llamafile's `sgemm`
//! and flash attention): the rule shared by `server/build.rs` and `fuzz/build.rs` (each a build
//! script of its own, with this as a module).

/// The link option that routes llama.cpp's calls of llamafile's `sgemm` through ghostline's
/// `model::sgemm` and of its CPU flash attention through `model::flash` (the linker's `--wrap`),
/// where it applies: x86-64 Linux, llama.cpp linked into
/// the binary (a `dynamic-link` build loads libggml-cpu.so, whose calls inside it no link option
/// reaches), and llama.cpp really built with llamafile. The last is read from the CMake cache of
/// the llama.cpp that is linked (llama-cpp-sys-2 tells its dependents where its build is), not
/// from `GGML_LLAMAFILE`: llama-cpp-sys-2 configures CMake once, so a build folder made with
/// llamafile off keeps it off whatever the variable says now, and without `llamafile_sgemm` in
/// the library the wrapped name would not link.
pub fn sgemm_wrap() -> Option<&'static str> {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    println!("cargo:rerun-if-env-changed=DEP_LLAMA_GGML_CMAKE_DIR");
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ARCH") != "x86_64" {
        return None;
    }
    if std::env::var_os("CARGO_FEATURE_DYNAMIC_LINK").is_some() {
        return None;
    }
    // `<out>/lib/cmake` → `<out>/build/CMakeCache.txt`.
    let cmake_dir = std::env::var_os("DEP_LLAMA_GGML_CMAKE_DIR")?;
    let cache = std::path::Path::new(&cmake_dir).parent()?.parent()?.join("build").join("CMakeCache.txt");
    println!("cargo:rerun-if-changed={}", cache.display());
    let text = std::fs::read_to_string(&cache).ok()?;
    text.lines().any(|l| l.trim() == "GGML_LLAMAFILE:BOOL=ON").then_some("-Wl,--wrap=llamafile_sgemm,--wrap=ggml_compute_forward_flash_attn_ext")
}
