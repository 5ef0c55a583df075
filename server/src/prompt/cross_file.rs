//! The cross-file section's text and tokens: the snippets the budget kept, grouped by file
//! with a path header each, in an order that does not depend on the cursor — recent chunks
//! first (oldest first), then definitions by path and line — and the current file's own
//! header last. Models whose vocabulary has a file separator (Qwen2.5-Coder's
//! `<|file_sep|>`) get it before each path, as they were trained on repositories; others get
//! the path in a comment of the current file's language (`# path: pkg/utils.py`).

use crate::context::{CrossFile, Related};
use crate::model::{Token, Tokenize};

/// The section before tokens. Compared to decide whether its tokens are still valid.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Section {
    /// Each file's path and its kept lines, in display order.
    files: Vec<(String, String)>,
    /// The current file's path (its header ends the section).
    current: String,
    comment: &'static str,
    file_sep: bool,
}

/// The section for the snippets `kept` (a subset of `cross.snippets`); empty when none is kept.
pub fn render(cross: &CrossFile, kept: &[&Related], file_sep: bool) -> Section {
    let mut recent: Vec<&Related> = kept.iter().copied().filter(|r| r.recent).collect();
    let mut defs: Vec<&Related> = kept.iter().copied().filter(|r| !r.recent).collect();
    // Recent chunks keep the order given (oldest first); definitions go by file and line.
    recent.sort_by_key(|r| cross.snippets.iter().position(|s| std::ptr::eq(s, *r)));
    defs.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    let mut files: Vec<(String, String)> = Vec::new();
    for group in [recent, defs] {
        let start = files.len();
        for snippet in group {
            let mut text = snippet.text.clone();
            if !text.ends_with('\n') {
                text.push('\n');
            }
            match files[start..].iter_mut().find(|(path, _)| *path == snippet.path) {
                Some((_, body)) => body.push_str(&text),
                None => files.push((snippet.path.clone(), text)),
            }
        }
    }
    if files.is_empty() {
        return Section::default();
    }
    Section { files, current: cross.path.clone(), comment: cross.comment, file_sep }
}

/// Every snippet `cross` offers, as the section would show them with room for all (for
/// reports and tests; a prompt shows what its budget keeps).
pub fn offered(cross: &CrossFile) -> String {
    let all: Vec<&Related> = cross.snippets.iter().collect();
    render(cross, &all, false).text()
}

impl Section {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The section as text (with `<file_sep>` standing for the separator token, for logs and
    /// tests).
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (path, body) in self.files.iter().map(|(p, b)| (p.as_str(), b.as_str())).chain(self.current_header()) {
            out.push_str(&self.header(path));
            out.push_str(body);
        }
        out
    }

    /// The section's tokens: each file's header and lines tokenized together, the separator
    /// token (when there is one) before each.
    pub fn tokens(&self, tokenizer: &dyn Tokenize, file_sep: Option<Token>) -> Vec<Token> {
        let mut out = Vec::new();
        for (path, body) in self.files.iter().map(|(p, b)| (p.as_str(), b.as_str())).chain(self.current_header()) {
            match file_sep.filter(|_| self.file_sep) {
                Some(sep) => {
                    out.push(sep);
                    out.extend(tokenizer.tokenize(&format!("{path}\n{body}")));
                }
                None => out.extend(tokenizer.tokenize(&format!("{}{body}", self.header(path)))),
            }
        }
        out
    }

    fn current_header(&self) -> Option<(&str, &str)> {
        (!self.files.is_empty()).then_some((self.current.as_str(), ""))
    }

    fn header(&self, path: &str) -> String {
        if self.file_sep {
            format!("<file_sep>{path}\n")
        } else {
            format!("{} path: {path}\n", self.comment)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn related(path: &str, line: u32, text: &str, recent: bool) -> Related {
        Related { path: path.into(), text: text.into(), line, recent }
    }

    fn cross() -> CrossFile {
        CrossFile {
            path: "pkg/app.py".into(),
            comment: "#",
            snippets: vec![
                related("pkg/util.py", 10, "def slug(text: str) -> str: ...", false),
                related("pkg/models.py", 3, "class User:\n    def name(self) -> str: ...", false),
                related("pkg/util.py", 2, "def clean(x): ...", false),
                related("pkg/views.py", 40, "    return render(user)", true),
            ],
            laid_out: Default::default(),
        }
    }

    #[test]
    fn files_in_a_stable_order_with_headers() {
        let c = cross();
        let kept: Vec<&Related> = c.snippets.iter().collect();
        let text = render(&c, &kept, false).text();
        assert_eq!(
            text,
            "# path: pkg/views.py\n    return render(user)\n\
             # path: pkg/models.py\nclass User:\n    def name(self) -> str: ...\n\
             # path: pkg/util.py\ndef clean(x): ...\ndef slug(text: str) -> str: ...\n\
             # path: pkg/app.py\n"
        );
        // The order the snippets come in (most wanted first) does not change the text.
        let reversed: Vec<&Related> = c.snippets.iter().rev().collect();
        assert_eq!(render(&c, &reversed, false).text(), text);
        assert!(render(&c, &[], false).is_empty());
        assert_eq!(render(&c, &[], false).text(), "");
    }

    #[test]
    fn a_file_separator_token_before_each_path() {
        struct Bytes;
        impl Tokenize for Bytes {
            fn tokenize(&self, text: &str) -> Vec<Token> {
                text.bytes().map(Token::from).collect()
            }
            fn token_text(&self, t: Token) -> String {
                char::from(t as u8).to_string()
            }
        }
        let c = cross();
        let kept = vec![&c.snippets[2]];
        let tokens = render(&c, &kept, true).tokens(&Bytes, Some(-7));
        let mut expected = vec![-7];
        expected.extend("pkg/util.py\ndef clean(x): ...\n".bytes().map(Token::from));
        expected.push(-7);
        expected.extend("pkg/app.py\n".bytes().map(Token::from));
        assert_eq!(tokens, expected);
        assert_eq!(render(&c, &kept, true).text(), "<file_sep>pkg/util.py\ndef clean(x): ...\n<file_sep>pkg/app.py\n");
    }
}
