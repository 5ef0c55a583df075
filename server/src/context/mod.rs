//! Context: which text around the cursor goes into the prompt.
//!
//! Pure code over a `&str` and a byte offset. For now a window of whole lines around the
//! cursor; the tree-sitter scope builder replaces it.

/// The text before and after the cursor that the prompt is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptParts {
    /// Text that ends exactly at the cursor.
    pub prefix: String,
    /// Text that starts exactly at the cursor.
    pub suffix: String,
}

/// A window of `before` whole lines above the cursor's line and `after` lines below it.
///
/// `cursor` must be a char boundary in `text` (callers convert positions before this).
pub fn line_window(text: &str, cursor: usize, before: usize, after: usize) -> PromptParts {
    let cursor = cursor.min(text.len());
    let head = &text[..cursor];
    let tail = &text[cursor..];
    // Start of the line `before` lines above the cursor's line.
    let start = head
        .char_indices()
        .rev()
        .filter(|&(_, c)| c == '\n')
        .nth(before)
        .map_or(0, |(i, _)| i + 1);
    // End of the line `after` lines below the cursor's line (keeping its newline).
    let end = tail
        .char_indices()
        .filter(|&(_, c)| c == '\n')
        .nth(after)
        .map_or(tail.len(), |(i, _)| i + 1);
    PromptParts { prefix: head[start..].to_owned(), suffix: tail[..end].to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_keeps_whole_lines() {
        let text = "a\nb\nc\nd|x\ne\nf\ng\n";
        let at = text.find('|').unwrap();
        let text = text.replace('|', "");
        let p = line_window(&text, at, 1, 1);
        assert_eq!(p.prefix, "c\nd");
        assert_eq!(p.suffix, "x\ne\n");
        let p = line_window(&text, at, 0, 0);
        assert_eq!(p.prefix, "d");
        assert_eq!(p.suffix, "x\n");
    }

    #[test]
    fn window_at_edges() {
        let p = line_window("abc", 0, 5, 5);
        assert_eq!((p.prefix.as_str(), p.suffix.as_str()), ("", "abc"));
        let p = line_window("abc", 3, 5, 5);
        assert_eq!((p.prefix.as_str(), p.suffix.as_str()), ("abc", ""));
        let p = line_window("héllo\n🦀 x", 11, 0, 3);
        assert_eq!((p.prefix.as_str(), p.suffix.as_str()), ("🦀", " x"));
    }
}
