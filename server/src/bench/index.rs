//! `ghostline bench --index DIR`: the workspace index on a real project (a benchmark, not a
//! timed test): files, definitions, build time (wall and CPU), memory held, and the update time
//! of the median, 90th-percentile and largest source file, and `related` in the largest.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::syntax;
use crate::workspace::{Index, IndexOptions};

/// CPU time of this process (user + system), in seconds: the build's cost apart from other
/// load on the machine.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn rss_kb() -> u64 {
    super::system::proc_status_kb(&std::fs::read_to_string("/proc/self/status").unwrap_or_default(), "VmRSS")
}

/// Source files under `dir` that the index parses, with their sizes, smallest first.
fn sources(dir: &Path) -> Vec<(u64, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if syntax::by_path(&p.to_string_lossy()).is_some() {
                out.push((e.metadata().map_or(0, |m| m.len()), p));
            }
        }
    }
    out.sort();
    out
}

pub fn run(dir: &Path) -> Result<(), String> {
    let dir = dir.canonicalize().map_err(|e| format!("{}: {e}", dir.display()))?;
    let options = || IndexOptions { roots: vec![dir.clone()], ..IndexOptions::default() };
    println!("machine: {}; load average {:.1}", super::system::machine(), super::system::load_average());
    let index = Index::new(options());
    let before = rss_kb();
    let (cpu0, started) = (cpu_seconds(), Instant::now());
    let stats = index.build(&|_, _| {});
    println!(
        "build: {} files, {} definitions, {:.2} s wall, {:.2} s CPU; {:.1} MB held (estimated){}",
        stats.files,
        stats.definitions,
        started.elapsed().as_secs_f64(),
        cpu_seconds() - cpu0,
        stats.bytes as f64 / 1e6,
        if stats.truncated { " — truncated (max files or the memory cap)" } else { "" }
    );
    println!("resident memory: {before} KiB before the build, {} KiB after", rss_kb());
    let again = Index::new(options());
    let (cpu0, started) = (cpu_seconds(), Instant::now());
    again.build(&|_, _| {});
    println!("second build: {:.2} s wall, {:.2} s CPU", started.elapsed().as_secs_f64(), cpu_seconds() - cpu0);
    drop(again);
    let files = sources(&dir);
    let largest = files.iter().rfind(|(len, _)| *len <= IndexOptions::default().max_file_bytes).cloned();
    for (what, file) in [("median", files.get(files.len() / 2).cloned()), ("90th percentile", files.get(files.len() * 9 / 10).cloned()), ("largest", largest.clone())] {
        let Some((len, path)) = file else { continue };
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let runs = 20;
        let started = Instant::now();
        for _ in 0..runs {
            index.update(&path, &text);
        }
        let parsed = started.elapsed().as_secs_f64() * 1e3 / runs as f64;
        // A saved document: the editor's tree is at hand, kept edit by edit.
        let spec = syntax::by_path(&path.to_string_lossy()).ok_or("no grammar")?;
        let tree = spec.parse(&text);
        let started = Instant::now();
        for _ in 0..runs {
            index.update_parsed(&path, &text, Some((spec, &tree)));
        }
        let with_tree = started.elapsed().as_secs_f64() * 1e3 / runs as f64;
        println!("update of the {what} file ({len} bytes): {parsed:.2} ms parsing it, {with_tree:.2} ms from the editor's tree");
    }
    if let Some((_, path)) = largest {
        let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
        let spec = syntax::by_path(&path.to_string_lossy()).ok_or("no grammar")?;
        let tree = spec.parse(&text);
        // The end of the line at the middle: where a keystroke lands next.
        let mut cursor = text.len() / 2;
        while !text.is_char_boundary(cursor) {
            cursor += 1;
        }
        let cursor = text[cursor..].find('\n').map_or(text.len(), |i| cursor + i);
        let started = Instant::now();
        let snippets = index.related(&path, &text, &tree, spec, cursor, 6000);
        let first = started.elapsed().as_secs_f64() * 1e3;
        // A key typed there: the rest of the file is unchanged, its identifiers are not walked again.
        let typed = format!("{}x{}", &text[..cursor], &text[cursor..]);
        let tree = spec.parse(&typed);
        let started = Instant::now();
        let again = index.related(&path, &typed, &tree, spec, cursor + 1, 6000);
        let next = started.elapsed().as_secs_f64() * 1e3;
        println!(
            "related at the middle of the largest file: {} snippets in {first:.2} ms; after a key typed there {} in {next:.2} ms",
            snippets.len(),
            again.len()
        );
    }
    Ok(())
}
