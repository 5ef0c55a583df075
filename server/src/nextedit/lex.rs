//! A small lexer for comparing lines token by token (next edits' rename and repeated-edit
//! rules): identifiers, numbers, strings and single punctuation characters, with byte
//! offsets; whitespace and line comments are skipped.

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokKind {
    Ident,
    Number,
    Str,
    Punct,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tok<'a> {
    pub kind: TokKind,
    pub text: &'a str,
    /// Byte offset in the lexed text.
    pub at: usize,
}

impl Tok<'_> {
    pub fn end(&self) -> usize {
        self.at + self.text.len()
    }

    pub fn literal(&self) -> bool {
        matches!(self.kind, TokKind::Number | TokKind::Str)
    }
}

/// The tokens of `text`; `comment` starts a line comment (`#`).
pub fn lex<'a>(text: &'a str, comment: &str) -> Vec<Tok<'a>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if !comment.is_empty() && text[i..].starts_with(comment) {
            i = text[i..].find('\n').map_or(bytes.len(), |n| i + n);
            continue;
        }
        let kind = if c == b'_' || c.is_ascii_alphabetic() || c >= 0x80 {
            while i < bytes.len() && (bytes[i] == b'_' || bytes[i].is_ascii_alphanumeric() || bytes[i] >= 0x80) {
                i += 1;
            }
            // A string prefix (`f"`, `rb'`) belongs to the string.
            if i < bytes.len() && (bytes[i] == b'"' || bytes[i] == b'\'') && i - start <= 2 && text[start..i].chars().all(|c| "rbfuRBFU".contains(c)) {
                i = string_end(text, i);
                TokKind::Str
            } else {
                TokKind::Ident
            }
        } else if c.is_ascii_digit() {
            while i < bytes.len() && (bytes[i] == b'_' || bytes[i] == b'.' || bytes[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            TokKind::Number
        } else if c == b'"' || c == b'\'' {
            i = string_end(text, i);
            TokKind::Str
        } else {
            i += text[i..].chars().next().map_or(1, char::len_utf8);
            TokKind::Punct
        };
        out.push(Tok { kind, text: &text[start..i], at: start });
    }
    out
}

/// The end of the string starting at `i` (a quote): its closing quote (triple quotes too), or
/// the line's end when it has none there.
fn string_end(text: &str, i: usize) -> usize {
    let bytes = text.as_bytes();
    let q = bytes[i];
    let triple = text[i..].starts_with(if q == b'"' { "\"\"\"" } else { "'''" });
    if triple {
        let close = if q == b'"' { "\"\"\"" } else { "'''" };
        return text[i + 3..].find(close).map_or(text.len(), |n| i + 3 + n + 3);
    }
    let mut j = i + 1;
    while j < bytes.len() && bytes[j] != b'\n' {
        if bytes[j] == b'\\' {
            j += 2;
            continue;
        }
        if bytes[j] == q {
            return j + 1;
        }
        j += 1;
    }
    j.min(bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_with_offsets_strings_and_comments() {
        let toks = lex("x = f(a, 'b c') + 1.5  # note\n", "#");
        let texts: Vec<_> = toks.iter().map(|t| t.text).collect();
        assert_eq!(texts, ["x", "=", "f", "(", "a", ",", "'b c'", ")", "+", "1.5"]);
        assert_eq!(toks[6].kind, TokKind::Str);
        assert_eq!(toks[2].at, 4);
        assert_eq!(lex("f\"{x}\" rb'y'", "#").iter().map(|t| t.kind).collect::<Vec<_>>(), [TokKind::Str, TokKind::Str]);
    }
}
