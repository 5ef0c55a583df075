//! cargo-fuzz target for document sync: arbitrary bytes become a sequence of UTF-16 range
//! edits applied through `Document::apply_all`; the rope must equal a plain-string reference
//! after each, and nothing may panic. For long local runs: `cargo +nightly fuzz run sync`.
#![no_main]

use ghostline::lsp::document::Document;
use ghostline::lsp::encoding::Encoding;
use libfuzzer_sys::fuzz_target;
use serde_json::json;
use tower_lsp_server::gen_lsp_types::TextDocumentContentChangeEvent;

fn utf16_to_byte(line: &str, col: usize) -> usize {
    let mut units = 0;
    for (i, c) in line.char_indices() {
        if units >= col {
            return i;
        }
        units += c.len_utf16();
    }
    line.len()
}

fuzz_target!(|data: &[u8]| {
    let mut reference = String::from("a\nb🦀\r\nc\n");
    let mut doc = Document::new(&reference, 1, "python".into());
    for chunk in data.chunks(6) {
        if chunk.len() < 6 {
            break;
        }
        // Only `\n` line breaks in inserted text keep the reference's line arithmetic simple;
        // the reference text itself has CRLF, and edits may land next to it.
        let lines: Vec<&str> = reference.split('\n').collect();
        let pick = |b: u8| (b as usize) % lines.len();
        let (l0, l1) = { let (a, b) = (pick(chunk[0]), pick(chunk[2])); (a.min(b), a.max(b)) };
        let content = |l: usize| lines[l].strip_suffix('\r').unwrap_or(lines[l]);
        let c0 = utf16_to_byte(content(l0), chunk[1] as usize % 8);
        let c1 = utf16_to_byte(content(l1), chunk[3] as usize % 8);
        let offset = |l: usize| lines[..l].iter().map(|s| s.len() + 1).sum::<usize>();
        let (b0, b1) = (offset(l0) + c0, offset(l1) + c1);
        if b0 > b1 {
            continue;
        }
        let insert = ["", "x", "é", "🦀", "\n", " ", "()"][chunk[4] as usize % 7].repeat(chunk[5] as usize % 3);
        let units = |l: usize, b: usize| content(l)[..b].encode_utf16().count();
        let change: TextDocumentContentChangeEvent = serde_json::from_value(json!({
            "range": {"start": {"line": l0, "character": units(l0, c0)}, "end": {"line": l1, "character": units(l1, c1)}},
            "text": insert
        }))
        .unwrap();
        reference.replace_range(b0..b1, &insert);
        doc.apply_all(&[change], Encoding::Utf16);
        assert_eq!(doc.rope.to_string(), reference);
    }
});
