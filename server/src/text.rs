//! Text helpers shared by the modules that read code as lines: indentation widths and line
//! endings. Below `context/`, `postprocess/` and `actions/`; imports nothing from the crate.

/// Columns of leading whitespace (a tab counts as 4).
pub fn indent_width(line: &str) -> usize {
    line.chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum()
}

/// The line ending a text uses: `"\r\n"` when its first line break is one, else `"\n"`.
pub fn line_ending(text: &str) -> &'static str {
    match text.find('\n') {
        Some(i) if text[..i].ends_with('\r') => "\r\n",
        _ => "\n",
    }
}

/// `text` with every line break written as `eol` (inserted text follows its document's line
/// ending: a model, or ghostline's own templates, write `\n`).
pub fn with_line_ending(text: &str, eol: &str) -> String {
    let unix = text.replace("\r\n", "\n");
    if eol == "\n" {
        unix
    } else {
        unix.replace('\n', eol)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_endings_follow_the_document() {
        assert_eq!(line_ending("a\r\nb\n"), "\r\n");
        assert_eq!(line_ending("a\nb\r\n"), "\n");
        assert_eq!(line_ending("one line"), "\n");
        assert_eq!(with_line_ending("x\n    y\r\nz", "\r\n"), "x\r\n    y\r\nz");
        assert_eq!(with_line_ending("x\r\ny\n", "\n"), "x\ny\n");
    }

    #[test]
    fn tabs_count_four_columns() {
        assert_eq!(indent_width("    x"), 4);
        assert_eq!(indent_width("\t  x"), 6);
        assert_eq!(indent_width("x  "), 0);
    }
}
