//! `server/cuda/batch-invariant.patch` applies to the CUDA backend of the llama.cpp that the
//! locked `llama-cpp-sys-2` vendors, as `server/cuda/batch-invariant.cmake` applies it (`patch
//! -p3` in a folder holding a copy named `ggml-cuda`). Where it does not, a CUDA build warns and
//! builds the stock kernels, and ghostline falls back to the slower aligned prefill: this test
//! says so on any machine, before a GPU build would. No model is needed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::TempDir;

/// The vendored `ggml/src/ggml-cuda` folder of the locked llama-cpp-sys-2, from `cargo metadata`.
fn vendored_cuda_backend() -> PathBuf {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let package = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "llama-cpp-sys-2")
        .expect("llama-cpp-sys-2 among the packages");
    let manifest = Path::new(package["manifest_path"].as_str().expect("manifest_path"));
    let dir = manifest.parent().unwrap().join("llama.cpp/ggml/src/ggml-cuda");
    assert!(dir.join("ggml-cuda.cu").is_file(), "no CUDA backend sources in {}", dir.display());
    dir
}

fn patch_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda/batch-invariant.patch")
}

/// Copies the backend into `root/ggml-cuda` and applies `patch` there as the CMake file does.
fn apply(root: &Path, patch: &Path) -> Result<(), String> {
    let copy = Command::new("cp").arg("-r").arg(vendored_cuda_backend()).arg(root.join("ggml-cuda")).status().expect("cp runs");
    assert!(copy.success(), "copying the CUDA backend failed");
    let out = Command::new("patch")
        .args(["-p3", "--forward", "--batch", "-i"])
        .arg(patch)
        .current_dir(root)
        .output()
        .map_err(|e| format!("`patch` could not be run ({e}): install it (apt-get install patch)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

#[test]
fn the_batch_invariant_patch_applies_to_the_vendored_cuda_backend() {
    let root = TempDir::new("cuda-patch");
    if let Err(said) = apply(&root, &patch_file()) {
        panic!("server/cuda/batch-invariant.patch does not apply to the vendored llama.cpp: {said}");
    }
    // What ghostline reads and sets is in the patched sources.
    let common = std::fs::read_to_string(root.join("ggml-cuda/common.cuh")).unwrap();
    assert!(common.contains("GGML_CUDA_BATCH_INVARIANT"), "the switch ghostline sets is not in common.cuh");
    let backend = std::fs::read_to_string(root.join("ggml-cuda/ggml-cuda.cu")).unwrap();
    assert!(backend.contains("\"BATCH_INVARIANT\""), "the feature ghostline reads is not reported");
    assert!(backend.contains("ggml_cuda_mul_mat_invariant(ctx, src0, src1, dst)"), "the invariant product is not called");
}

#[test]
fn a_patch_whose_context_moved_is_refused() {
    // The check above would pass on a patch that `patch` skips: one whose context no longer
    // matches must fail, as it would for a llama.cpp the patch was not made for.
    let root = TempDir::new("cuda-patch-stale");
    let stale = std::fs::read_to_string(patch_file()).unwrap().replacen(" #define WARP_SIZE 32", " #define WARP_SIZE 64", 1);
    let path = root.join("stale.patch");
    std::fs::write(&path, stale).unwrap();
    assert!(apply(&root, &path).is_err(), "a patch with a stale context applied");
}
