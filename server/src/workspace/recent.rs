//! Recently seen code: a ring of 64-line chunks of the files the user opened, edited or saved
//! (llama.vim's ring buffer), de-duplicated by similarity, for the prompt of another file.

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};

use super::Snippet;

/// Lines in a chunk.
pub const CHUNK_LINES: usize = 64;
/// A new chunk replaces an old one of the same file when more than this share of its lines
/// is in the old one.
const SIMILAR: f64 = 0.5;

/// The last chunks of code the user saw or edited, oldest first.
#[derive(Debug, Clone)]
pub struct Recent {
    capacity: usize,
    /// Each chunk with the file it came from.
    chunks: VecDeque<(PathBuf, Snippet)>,
}

impl Recent {
    pub fn new(capacity: usize) -> Recent {
        Recent { capacity, chunks: VecDeque::new() }
    }

    /// Notes the chunk of `text` around line `line` (zero-based) of `file`, shown as `path`: the 64 lines
    /// centred on it, clamped to the file. A chunk already held that shares most of its lines
    /// with the new one is dropped; beyond the capacity the oldest goes. Blank chunks are not
    /// kept.
    pub fn note(&mut self, file: &Path, path: &str, text: &str, line: u32) {
        if self.capacity == 0 {
            return;
        }
        let lines: Vec<&str> = text.lines().collect();
        let line = (line as usize).min(lines.len().saturating_sub(1));
        let start = line.saturating_sub(CHUNK_LINES / 2).min(lines.len().saturating_sub(CHUNK_LINES));
        let end = (start + CHUNK_LINES).min(lines.len());
        let chunk = &lines[start..end];
        if chunk.iter().all(|l| l.trim().is_empty()) {
            return;
        }
        let new: HashSet<&str> = chunk.iter().copied().filter(|l| !l.trim().is_empty()).collect();
        self.chunks.retain(|(_, old)| {
            if old.path != path {
                return true;
            }
            let shared = old.text.lines().filter(|l| new.contains(l)).collect::<HashSet<_>>().len();
            (shared as f64) <= SIMILAR * new.len() as f64
        });
        self.chunks.push_back((file.to_owned(), Snippet { path: path.to_owned(), text: chunk.join("\n"), start_line: start as u32 }));
        while self.chunks.len() > self.capacity {
            self.chunks.pop_front();
        }
    }

    /// The chunks of files other than `except_path`, oldest first (unchanged while nothing
    /// new is noted).
    pub fn chunks(&self, except_path: &str) -> Vec<Snippet> {
        self.chunks.iter().filter(|(_, c)| c.path != except_path).map(|(_, c)| c.clone()).collect()
    }

    /// Keeps the chunks for which `keep(file, chunk)` holds (a deleted file's go; after a
    /// settings change, those the new filters still let in).
    pub fn retain(&mut self, mut keep: impl FnMut(&Path, &Snippet) -> bool) {
        self.chunks.retain(|(file, chunk)| keep(file, chunk));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(n: usize, tag: &str) -> String {
        (0..n).map(|i| format!("{tag} line {i}\n")).collect()
    }

    #[test]
    fn chunks_are_64_lines_around_the_line() {
        let mut r = Recent::new(4);
        let text = file(200, "a");
        r.note(Path::new("a.py"), "a.py", &text, 100);
        let c = r.chunks("b.py");
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].start_line, 68);
        assert_eq!(c[0].text.lines().count(), CHUNK_LINES);
        assert!(c[0].text.starts_with("a line 68\n") && c[0].text.ends_with("a line 131"));
        // Near the end of the file: the last 64 lines; a short file: all of it.
        r.note(Path::new("a.py"), "a.py", &text, 199);
        assert_eq!(r.chunks("").last().unwrap().start_line, 136);
        r.note(Path::new("s.py"), "s.py", "x = 1\n", 0);
        assert_eq!(r.chunks("").last().unwrap().text, "x = 1");
        assert!(r.chunks("s.py").iter().all(|c| c.path != "s.py"));
    }

    #[test]
    fn similar_chunks_replace_old_ones_and_the_ring_is_bounded() {
        let mut r = Recent::new(3);
        let a = file(300, "a");
        r.note(Path::new("a.py"), "a.py", &a, 100);
        r.note(Path::new("a.py"), "a.py", &a, 110); // shares 54 of 64 lines: replaces the first
        assert_eq!(r.chunks("").len(), 1);
        assert_eq!(r.chunks("")[0].start_line, 78);
        r.note(Path::new("a.py"), "a.py", &a, 200); // far away: kept beside it
        assert_eq!(r.chunks("").len(), 2);
        r.note(Path::new("b.py"), "b.py", &file(300, "b"), 10);
        r.note(Path::new("c.py"), "c.py", &file(300, "c"), 10);
        let paths: Vec<_> = r.chunks("").iter().map(|c| (c.path.clone(), c.start_line)).collect();
        assert_eq!(paths, [("a.py".to_owned(), 168), ("b.py".to_owned(), 0), ("c.py".to_owned(), 0)]);
        r.note(Path::new("x.py"), "x.py", "\n\n  \n", 1);
        assert_eq!(r.chunks("").len(), 3, "blank chunks are not kept");
    }
}
