//! The prompt format of models trained for next edits on Qwen2.5-Coder's repository format
//! (Sweep's next-edit models): files are sections behind `<|file_sep|>` headers; the file's
//! earlier edits are `<path>.diff` sections (`original:` then `updated:`), then a window of
//! lines around the last edit as it was before it (`original/<path>`) and as it is now
//! (`current/<path>`), and the model writes the window as it should become after
//! `updated/<path>`. What it writes is compared line by line with the current window: each run
//! of changed lines is one proposed edit. Detected from the GGUF's `general.name` /
//! `general.basename`, or chosen with `nextEdit.format`.
//!
//! The header token is the vocabulary's own `<|file_sep|>` (`VocabFacts::file_sep`), put
//! between sections as a token: the text of the sections is tokenized as plain text, so code
//! that contains the marker's characters cannot start a section.

use std::ops::Range;

use super::history::EditEvent;
use super::{line_start, Kind, Proposal};
use crate::model::{Token, Tokenize};

/// Lines above the edit and below it that the window shows.
pub const RADIUS: usize = 10;
/// Earlier edits of the file shown as `.diff` sections, the newest last.
pub const MAX_DIFFS: usize = 4;
/// Tokens the model may write for the window.
pub const MAX_TOKENS: usize = 512;
/// The marker between sections, as the rendered prompt shows it.
pub const FILE_SEP: &str = "<|file_sep|>";

/// Whether a GGUF's `general.name` or `general.basename` names a next-edit model of this
/// format (Sweep's: "sweep-next-edit-1.5B", "Sweep Next Edit 0.5B"…).
pub fn detected(name: Option<&str>, basename: Option<&str>) -> bool {
    [name, basename].into_iter().flatten().any(|n| {
        let n: String = n.to_lowercase().chars().filter(|c| c.is_ascii_alphanumeric()).collect();
        n.contains("sweep") && n.contains("nextedit")
    })
}

/// Whether the GGUF at `path` is a next-edit model of this format ([`detected`] on its
/// metadata); read once per path.
pub fn model_is_sweep(path: &std::path::Path) -> bool {
    static SEEN: std::sync::Mutex<Option<(std::path::PathBuf, bool)>> = std::sync::Mutex::new(None);
    let mut seen = SEEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, is)) = seen.as_ref().filter(|(p, _)| p == path) {
        return *is;
    }
    let is = crate::model::gguf::Gguf::open(path).is_ok_and(|g| detected(g.name(), g.str("general.basename")));
    if is {
        tracing::info!("next edits: the model is a next-edit model (Sweep's format)");
    }
    *seen = Some((path.to_path_buf(), is));
    is
}

/// One prompt: its sections (header, body) in order, the last being the open `updated/`
/// one, and the window of the document it asks about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepPrompt {
    pub sections: Vec<(String, String)>,
    /// Bytes of the document the window covers (whole lines).
    pub window: Range<usize>,
}

impl SweepPrompt {
    /// The prompt as text, `<|file_sep|>` written out (what the golden tests read; the
    /// model gets [`SweepPrompt::tokens`]).
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (header, body) in &self.sections {
            out.push_str(FILE_SEP);
            out.push_str(header);
            out.push('\n');
            out.push_str(body);
        }
        out
    }

    /// The prompt's tokens: `bos` if any, then each section as the separator token and its
    /// header and body tokenized as plain text.
    pub fn tokens(&self, tokenizer: &dyn Tokenize, file_sep: Token, bos: Option<Token>) -> Vec<Token> {
        let mut out: Vec<Token> = bos.into_iter().collect();
        for (header, body) in &self.sections {
            out.push(file_sep);
            out.extend(tokenizer.tokenize(&format!("{header}\n{body}")));
        }
        out
    }
}

/// Text with a line break at its end (a section's body ends with one).
fn terminated(s: &str) -> String {
    if s.is_empty() || s.ends_with('\n') {
        s.to_owned()
    } else {
        format!("{s}\n")
    }
}

/// The prompt after `event` (the last edit of the document, `text` now; `path` as the
/// sections name it), with `earlier` (the document's events before it, oldest first) as diffs;
/// `None` when the event no longer matches the text.
pub fn prompt(path: &str, text: &str, event: &EditEvent, earlier: &[&EditEvent]) -> Option<SweepPrompt> {
    if event.large {
        return None;
    }
    let start = line_start(text, event.first_line)?;
    if text.get(start..start + event.after.len()) != Some(event.after.as_str()) {
        return None;
    }
    let from = line_start(text, event.first_line.saturating_sub(RADIUS)).unwrap_or(0);
    let to = line_start(text, event.first_line + event.after_lines + RADIUS).unwrap_or(text.len());
    let current = &text[from..to];
    let original = format!("{}{}{}", &text[from..start], event.before, &text[start + event.after.len()..to]);
    let mut sections = Vec::new();
    let shown = earlier.iter().filter(|e| !e.large).rev().take(MAX_DIFFS).collect::<Vec<_>>();
    for e in shown.into_iter().rev() {
        sections.push((format!("{path}.diff"), format!("original:\n{}updated:\n{}", terminated(&e.before), terminated(&e.after))));
    }
    sections.push((format!("original/{path}"), terminated(&original)));
    sections.push((format!("current/{path}"), terminated(current)));
    sections.push((format!("updated/{path}"), String::new()));
    Some(SweepPrompt { sections, window: from..to })
}

/// Runs `prompt` on the model thread (greedy, like completions; cancelled by `cancel`) and
/// turns what it writes into edits of `text`'s window. Nothing when the vocabulary has no
/// `<|file_sep|>` token or the prompt does not fit the context.
pub async fn generate(engine: &crate::engine::Engine, prompt: &SweepPrompt, text: &str, cancel: crate::model::CancelFlag) -> Result<Vec<Proposal>, crate::model::GenerateError> {
    let owned = prompt.clone();
    let build: crate::model::BuildPrompt = Box::new(move |tokenizer, facts| {
        let tokens = match facts.file_sep {
            Some(sep) => owned.tokens(tokenizer, sep, facts.bos),
            None => Vec::new(),
        };
        let fits = tokens.len() + MAX_TOKENS <= facts.n_ctx;
        crate::model::Prompt {
            tokens: if fits { tokens } else { Vec::new() },
            stop: Box::new(stop),
            stop_key: 0x5157_ee9,
            max_tokens: MAX_TOKENS,
            unfinished: Box::new(|_| false),
            lead: String::new(),
            blank_enders: String::new(),
        }
    });
    let generation = engine.model.generate(crate::model::GenerateRequest { prompt: build, cancel }).await?;
    let complete = generation.timings.generated_tokens < MAX_TOKENS;
    Ok(edits(&text[prompt.window.clone()], &generation.text, prompt.window.start, complete))
}

/// Of the model's edits `found` after `event` in `text`, those to propose: not touching what
/// the user changed (that would revert it), not overlapping an edit of the rules (`planned`),
/// and changing something.
pub fn admissible(event: &EditEvent, text: &str, planned: &[Proposal], found: Vec<Proposal>) -> Vec<Proposal> {
    let Some(edited) = super::Edited::of(event, text) else { return Vec::new() };
    let overlaps = |a: &Range<usize>, b: &Range<usize>| a.start < b.end && b.start < a.end || a == b;
    found
        .into_iter()
        .filter(|p| !super::touches(&p.range, &edited.changed) && !planned.iter().any(|q| overlaps(&p.range, &q.range)) && text.get(p.range.clone()) != Some(p.new_text.as_str()))
        .collect()
}

/// Where what the model wrote ends: before the next section's marker or an end-of-text
/// marker; `None` while neither came (the text may go on).
pub fn stop(generated: &str) -> Option<usize> {
    [FILE_SEP, "<|endoftext|>", "<|im_end|>"].iter().filter_map(|m| generated.find(m)).min()
}

/// The edits that make the window `current` (at byte `at` of the document) into `updated`,
/// what the model wrote: one per run of changed lines (the common lines found by their
/// longest common subsequence). A model that wrote nothing, or stopped mid-window without
/// closing it (`complete` false), proposes only the edits before its last line.
pub fn edits(current: &str, updated: &str, at: usize, complete: bool) -> Vec<Proposal> {
    let (updated, complete) = match stop(updated) {
        Some(end) => (&updated[..end], true),
        None if complete => (updated, true),
        // Cut off: its last line may be unfinished.
        None => (updated.rfind('\n').map_or("", |i| &updated[..=i]), false),
    };
    if updated.trim().is_empty() {
        return Vec::new();
    }
    let a: Vec<&str> = current.split_inclusive('\n').collect();
    let mut b: Vec<String> = updated.split_inclusive('\n').map(str::to_owned).collect();
    if complete && current.ends_with('\n') {
        // The window's last line break, when the model left it out.
        if let Some(last) = b.last_mut().filter(|l| !l.ends_with('\n')) {
            last.push('\n');
        }
    }
    let b: Vec<&str> = b.iter().map(String::as_str).collect();
    // Cut off: the lines the model never reached stay as they are.
    let reached = if complete { a.len() } else { b.len().min(a.len()) };
    diff(&a[..reached], &b, at)
}

/// Line runs that differ between `a` and `b` (the LCS of lines kept), as edits of `a`
/// starting at byte `at`.
fn diff(a: &[&str], b: &[&str], at: usize) -> Vec<Proposal> {
    let (n, m) = (a.len(), b.len());
    // lcs[i][j]: common lines of a[i..] and b[j..].
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let offsets: Vec<usize> = std::iter::once(0).chain(a.iter().scan(0, |s, l| {
        *s += l.len();
        Some(*s)
    })).collect();
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    let mut run: Option<(usize, usize)> = None;
    let flush = |run: &mut Option<(usize, usize)>, i: usize, j: usize, out: &mut Vec<Proposal>| {
        if let Some((i0, j0)) = run.take() {
            out.push(Proposal { range: at + offsets[i0]..at + offsets[i], new_text: b[j0..j].concat(), kind: Kind::Model });
        }
    };
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            flush(&mut run, i, j, &mut out);
            i += 1;
            j += 1;
        } else {
            run.get_or_insert((i, j));
            if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
                j += 1;
            } else {
                i += 1;
            }
        }
    }
    flush(&mut run, i, j, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::nextedit::fixture::apply;

    fn event(first_line: usize, before: &str, after: &str) -> EditEvent {
        let now = Instant::now();
        EditEvent {
            uri: "file:///w/app/shapes.py".into(),
            first_line,
            before_lines: before.lines().count(),
            after_lines: after.lines().count(),
            before: before.into(),
            after: after.into(),
            large: false,
            started: now,
            last: now,
        }
    }

    #[test]
    fn names_of_next_edit_models_are_recognised() {
        assert!(detected(Some("sweep-next-edit-1.5B"), None));
        assert!(detected(None, Some("Sweep Next Edit")));
        assert!(detected(Some("Sweep_NextEdit 0.5B"), None));
        assert!(!detected(Some("Qwen2.5 Coder 1.5B"), Some("qwen2.5-coder")));
        assert!(!detected(Some("sweep"), None), "a name alone is not the format");
        assert!(!detected(None, None));
    }

    #[test]
    fn golden_prompt() {
        let text = "def area(width, h):\n    return w * h\n\n\nx = area(3, 4)\n";
        let earlier = event(4, "x = area(1, 2)\n", "x = area(3, 4)\n");
        let last = event(0, "def area(w, h):\n", "def area(width, h):\n");
        let p = prompt("app/shapes.py", text, &last, &[&earlier]).unwrap();
        let golden = "<|file_sep|>app/shapes.py.diff\noriginal:\nx = area(1, 2)\nupdated:\nx = area(3, 4)\n\
<|file_sep|>original/app/shapes.py\ndef area(w, h):\n    return w * h\n\n\nx = area(3, 4)\n\
<|file_sep|>current/app/shapes.py\ndef area(width, h):\n    return w * h\n\n\nx = area(3, 4)\n\
<|file_sep|>updated/app/shapes.py\n";
        assert_eq!(p.render(), golden);
        assert_eq!(p.window, 0..text.len());
    }

    #[test]
    fn golden_prompt_of_a_window_in_a_long_file() {
        let mut text = String::new();
        for i in 0..40 {
            text.push_str(&format!("v{i} = {i}\n"));
        }
        let edited = text.replace("v20 = 20\n", "v20 = 21\n");
        let p = prompt("m.py", &edited, &event(20, "v20 = 20\n", "v20 = 21\n"), &[]).unwrap();
        let lines = |from: usize, to: usize, t: &str| t.lines().skip(from).take(to - from).map(|l| format!("{l}\n")).collect::<String>();
        let golden = format!(
            "<|file_sep|>original/m.py\n{}<|file_sep|>current/m.py\n{}<|file_sep|>updated/m.py\n",
            lines(10, 31, &text),
            lines(10, 31, &edited)
        );
        assert_eq!(p.render(), golden, "ten lines either side of the edited one");
        assert_eq!(&edited[p.window.clone()], lines(10, 31, &edited));
        // A stale event (the text moved on) makes no prompt.
        assert!(prompt("m.py", &text, &event(20, "v20 = 20\n", "v20 = 21\n"), &[]).is_none());
    }

    /// A tokenizer of one token per byte, for the token layout.
    struct Bytes;
    impl Tokenize for Bytes {
        fn tokenize(&self, text: &str) -> Vec<Token> {
            text.bytes().map(i32::from).collect()
        }
        fn token_text(&self, token: Token) -> String {
            char::from(token as u8).to_string()
        }
    }

    #[test]
    fn the_marker_is_the_vocabulary_s_token_and_code_cannot_forge_it() {
        let text = "s = '<|file_sep|>'\n";
        let p = prompt("a.py", text, &event(0, "s = ''\n", text), &[]).unwrap();
        let tokens = p.tokens(&Bytes, -7, Some(-1));
        assert_eq!(tokens[0], -1);
        assert_eq!(tokens.iter().filter(|&&t| t == -7).count(), 3, "original, current, updated");
        assert_eq!(p.sections.len(), 3);
    }

    #[test]
    fn what_the_model_writes_becomes_edits_of_the_changed_lines() {
        let current = "def area(width, h):\n    return w * h\n\n\nx = area(3, 4)\n";
        let updated = "def area(width, h):\n    return width * h\n\n\nx = area(3, 4)\n<|file_sep|>";
        let edits = edits(current, updated, 100, false);
        assert_eq!(edits.len(), 1, "{edits:?}");
        assert_eq!((edits[0].range.clone(), edits[0].new_text.as_str()), (120..137, "    return width * h\n"));
        let doc = format!("{}{current}", "#".repeat(99) + "\n");
        assert_eq!(apply(&doc, &edits), format!("{}{}", "#".repeat(99) + "\n", updated.trim_end_matches(FILE_SEP)));
    }

    #[test]
    fn insertions_deletions_and_nothing() {
        let current = "a\nb\nc\n";
        let e = edits(current, "a\nb2\nnew\nc\n", 0, true);
        assert_eq!(apply(current, &e), "a\nb2\nnew\nc\n");
        assert_eq!(e.len(), 1, "one run: {e:?}");
        let e = edits(current, "a\nc", 0, true);
        assert_eq!(apply(current, &e), "a\nc\n", "the window's last line break is kept");
        assert!(edits(current, current, 0, true).is_empty());
        assert!(edits(current, "<|endoftext|>", 0, false).is_empty());
        assert!(edits(current, "", 0, true).is_empty());
    }

    #[test]
    fn a_window_cut_off_proposes_only_what_the_model_finished() {
        let current = "a = 1\nb = 2\nc = 3\nd = 4\n";
        // Cut off inside its third line: that line and those after it are left.
        let e = edits(current, "a = 10\nb = 2\nc = 3", 0, false);
        assert_eq!(apply(current, &e), "a = 10\nb = 2\nc = 3\nd = 4\n", "{e:?}");
    }
}
