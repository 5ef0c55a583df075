//! The scripts' prerequisite check (`ensure_build_prerequisites` in `scripts/lib.sh`, run first
//! by `scripts/demo.sh` and `scripts/test.sh`): on this machine it passes silently; with a
//! `PATH` that hides `cmake` (and `cargo`) each script stops at once with one line naming what
//! is missing and the one command that installs it, before anything is fetched or built.
//! `GHOSTLINE_NO_INSTALL=1` keeps the check from installing (as root it would call apt-get).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::TempDir;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A folder of links to every program on `PATH` except `hidden`.
fn path_without(name: &str, hidden: &[&str]) -> TempDir {
    let dir = TempDir::new(&format!("prereq-{name}"));
    for d in std::env::split_paths(&std::env::var_os("PATH").unwrap()) {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let file = entry.file_name();
            let link = dir.join(&file);
            if hidden.iter().any(|h| file == *h) || link.exists() {
                continue;
            }
            let _ = std::os::unix::fs::symlink(entry.path(), link);
        }
    }
    dir
}

fn run(script: &str, path: &Path) -> (Output, Duration) {
    let started = Instant::now();
    let out = Command::new("bash")
        .arg(root().join(script))
        .env("PATH", path)
        .env("GHOSTLINE_NO_INSTALL", "1")
        .output()
        .unwrap();
    (out, started.elapsed())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn this_machine_has_what_the_build_needs() {
    let out = Command::new("bash")
        .args(["-c", ". scripts/lib.sh && ensure_build_prerequisites"])
        .current_dir(root())
        .env("GHOSTLINE_NO_INSTALL", "1")
        .output()
        .unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{}", text(&out.stderr));
}

#[test]
fn demo_and_test_stop_before_building_with_one_line_when_cmake_is_missing() {
    // Without cmake: demo.sh stops with the apt-get line (it would otherwise fetch the model,
    // build, and run the demo to a success).
    let path = path_without("cmake", &["cmake"]);
    let (out, took) = run("scripts/demo.sh", &path);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("missing cmake.") && err.ends_with("Install: sudo apt-get install -y cmake\n"), "{err}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    // Counted work would be a build: none happens; 60 s is generous for a few `command -v`s on
    // a busy 2-core machine and far below any build of llama.cpp.
    assert!(took < Duration::from_secs(60), "{took:?}");

    // Without cmake and cargo (so that a broken check could not start the whole test suite from
    // inside it): test.sh names both, with the one way to install each.
    let path = path_without("cmake-cargo", &["cmake", "cargo"]);
    let (out, _) = run("scripts/test.sh", &path);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("missing cmake, cargo.") && err.contains("sudo apt-get install -y cmake; and Rust with rustup"), "{err}");
}
