//! Document-sync fuzzing: random edits in UTF-16 positions (surrogate pairs, CRLF, deletions
//! across lines, full replacements) go through the real sync code (`Document::apply_all`), and
//! the text is compared with a reference after every step (and so is the text the returned
//! character edits make of the previous one); the incremental syntax tree is
//! compared with a fresh parse every so often. `GHOSTLINE_FUZZ_EDITS` and `GHOSTLINE_FUZZ_SEED`
//! override the defaults; a failure prints the seed and the step.

use ghostline::eval::Rng;
use ghostline::lsp::document::Document;
use ghostline::lsp::encoding::Encoding;
use ghostline::syntax;
use serde_json::json;
use tower_lsp_server::gen_lsp_types::TextDocumentContentChangeEvent;

/// Pieces of text edits are made of: ASCII, two-byte, astral (surrogate pairs in UTF-16), a ZWJ
/// sequence, tabs, every kind of line break, Python that keeps the parser busy, and comment lines
/// that make runs long enough to be read as spaces, or break them.
const PIECES: &[&str] = &[
    "a", "x = 1", "é", "🦀", "👩‍💻", "\t", "\n", "\r\n", "\r", " ", "def f(x):\n    return x\n", "(", ")", "\"s\"", "ü🦀\r\n", "",
    "# c", "    # ab\n    # cd\n    # ef\n    # gh\n    # ij\n    # kl\n    # mn\n    # op\n",
];

/// The reference: lines as LSP counts them (`\n`, `\r\n`, `\r`), positions in UTF-16.
fn line_starts(text: &str) -> Vec<usize> {
    let mut starts = vec![0];
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\r' if b.get(i + 1) == Some(&b'\n') => {
                starts.push(i + 2);
                i += 2;
                continue;
            }
            b'\r' | b'\n' => starts.push(i + 1),
            _ => {}
        }
        i += 1;
    }
    starts
}

fn line_content(text: &str, starts: &[usize], line: usize) -> (usize, usize) {
    let start = starts[line];
    let mut end = starts.get(line + 1).copied().unwrap_or(text.len());
    while end > start && matches!(text.as_bytes()[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    (start, end)
}

/// A random valid position (never inside a surrogate pair) and its byte offset.
fn random_position(text: &str, rng: &mut Rng) -> (u32, u32, usize) {
    let starts = line_starts(text);
    let line = rng.below(starts.len());
    let (start, end) = line_content(text, &starts, line);
    let boundaries: Vec<(usize, u32)> = {
        let mut v = vec![(start, 0u32)];
        let mut units = 0;
        for (i, c) in text[start..end].char_indices() {
            units += c.len_utf16() as u32;
            v.push((start + i + c.len_utf8(), units));
        }
        v
    };
    let (byte, col) = boundaries[rng.below(boundaries.len())];
    (line as u32, col, byte)
}

#[test]
fn random_utf16_edits_match_the_reference() {
    let edits: usize = std::env::var("GHOSTLINE_FUZZ_EDITS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let seed: u64 = std::env::var("GHOSTLINE_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x5eed);
    let spec = syntax::by_language_id("python").unwrap();
    let mut rng = Rng::new(seed);
    let mut reference = String::from("import os\r\n\ndef main():\n    print('héllo 🦀')\n");
    let mut doc = Document::new(&reference, 1, "python".into());
    let mut mirror = reference.clone();
    let mut compared_with_runs = 0;
    for step in 0..edits {
        let change: TextDocumentContentChangeEvent = if rng.below(500) == 0 {
            // A full replacement now and then.
            reference = (0..rng.below(8)).map(|_| PIECES[rng.below(PIECES.len())]).collect();
            serde_json::from_value(json!({"text": reference})).unwrap()
        } else {
            let (l0, c0, b0) = random_position(&reference, &mut rng);
            let (l1, c1, b1) = random_position(&reference, &mut rng);
            let ((l0, c0, b0), (l1, c1, b1)) = if b0 <= b1 { ((l0, c0, b0), (l1, c1, b1)) } else { ((l1, c1, b1), (l0, c0, b0)) };
            // Keep documents small: long deletions when big, short ones otherwise.
            let (l1, c1, b1) = if reference.len() > 4000 || rng.below(4) == 0 { (l1, c1, b1) } else { (l0, c0, b0) };
            let insert: String = (0..rng.below(4)).map(|_| PIECES[rng.below(PIECES.len())]).collect();
            reference.replace_range(b0..b1, &insert);
            serde_json::from_value(json!({
                "range": {"start": {"line": l0, "character": c0}, "end": {"line": l1, "character": c1}},
                "text": insert
            }))
            .unwrap()
        };
        let changes = [change];
        let edits = doc.apply_all(&changes, Encoding::Utf16);
        let got = doc.rope.to_string();
        assert!(got == reference, "seed {seed}, step {step}: text differs\n got: {got:?}\nwant: {reference:?}");
        // The edits it returns (in characters; a full replacement as the span that differs),
        // applied to the previous text, give the same text.
        for e in &edits {
            let byte = |c: usize| mirror.char_indices().nth(c).map_or(mirror.len(), |(b, _)| b);
            let (from, to) = (byte(e.start), byte(e.end));
            mirror.replace_range(from..to, e.text);
        }
        assert!(mirror == reference, "seed {seed}, step {step}: the returned edits {edits:?} give\n{mirror:?}\nwant {reference:?}");
        // Every 2,000 edits, and every 100 while the text has a comment run read as spaces.
        let runs = step % 100 == 0 && !syntax::comment_runs(syntax::lines(&reference)).is_empty();
        if step % 2000 == 0 || runs {
            compared_with_runs += usize::from(runs);
            // The document reads long comment runs as spaces (`syntax::comment_runs`).
            let fresh = spec.parse(&syntax::without_comment_runs(&reference)).root_node().to_sexp();
            let tree = doc.tree().expect("a python document has a tree").root_node().to_sexp();
            assert!(tree == fresh, "seed {seed}, step {step}: incremental tree differs from a fresh parse");
        }
    }
    eprintln!("sync fuzz: {edits} edits, seed {seed:#x}, text identical after every edit; {compared_with_runs} trees compared with a comment run read as spaces");
    assert!(edits < 100_000 || compared_with_runs > 0, "no comment run long enough to be read as spaces came up");
}
