//! Where not to suggest: files matching `completion.exclude` (secrets: `.env`, keys), cursors
//! with more than `completion.maxRightChars` non-space characters after them on the line (the
//! user is editing inside a line, as llama.vim's `max_line_suffix` judges it), and suggestions
//! that add nothing: only closing brackets, or the text already right of the cursor.
//!
//! The language server asks [`skip_request`] before it asks the model (and before generating
//! ahead on a keystroke); the engine drops suggestions that add nothing
//! (`postprocess::redundant`), on every path.

use crate::cloud::redact::Exclusions;
use crate::config::CompletionConfig;

/// Files never completed in, unless `completion.excludeDefaults` is false. A glob without `/`
/// matches a file name in any folder; one with `/` matches the path from any folder down.
pub const DEFAULT_EXCLUDE: &[&str] = &[".env", ".env.*", "*.pem", "*.key", "secrets/**", "id_rsa*"];

/// `completion.maxRightChars`'s default: llama.vim's and llama.vscode's `max_line_suffix`.
pub const DEFAULT_MAX_RIGHT_CHARS: u32 = 8;

/// The globs in force: the user's added to the defaults (a user who sets one glob keeps the
/// rest), or the user's alone when `excludeDefaults` is false.
pub fn globs(user: Option<&[String]>, defaults: bool) -> Vec<String> {
    let mut out: Vec<String> = if defaults { DEFAULT_EXCLUDE.iter().map(|s| s.to_string()).collect() } else { Vec::new() };
    for g in user.unwrap_or_default() {
        if !g.trim().is_empty() && !out.contains(g) {
            out.push(g.clone());
        }
    }
    out
}

/// Why a cursor gets no request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// The file matches this `completion.exclude` glob.
    Excluded(String),
    /// This many non-space characters follow the cursor on its line.
    RightOfCursor(usize),
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Skip::Excluded(glob) => write!(f, "the file matches the exclusion `{glob}` (completion.exclude or context.exclude)"),
            Skip::RightOfCursor(n) => write!(f, "{n} characters follow the cursor on its line (completion.maxRightChars)"),
        }
    }
}

/// The first glob of `globs` that the document `uri` matches: a glob matches the file name, or
/// the path from any folder down (`secrets/**` matches `…/app/secrets/db.txt`).
pub fn excluded_by(globs: &[String], uri: &str) -> Option<String> {
    let path = crate::uri::uri_to_path(uri)
        .map(|p| p.to_string_lossy().replace('\\', "/"))
        .unwrap_or_else(|| uri.split_once(':').map_or(uri, |(_, rest)| rest).to_owned());
    let exclusions = compiled(globs);
    let mut tail = path.trim_start_matches('/');
    loop {
        if let Some(g) = exclusions.matching(tail) {
            return Some(g.to_owned());
        }
        match tail.split_once('/') {
            Some((_, rest)) if !rest.is_empty() => tail = rest,
            _ => return None,
        }
    }
}

/// `globs` compiled, once per list: the list changes only with the settings, and this runs on
/// every request and every keystroke's generation ahead.
fn compiled(globs: &[String]) -> std::sync::Arc<Exclusions> {
    use std::sync::{Arc, Mutex, PoisonError};
    static LAST: Mutex<Option<(Vec<String>, Arc<Exclusions>)>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((list, set)) = last.as_ref().filter(|(list, _)| list.as_slice() == globs) {
        let _ = list;
        return Arc::clone(set);
    }
    let (exclusions, bad) = Exclusions::new(globs);
    for e in bad {
        tracing::warn!("completion.exclude: {e}");
    }
    let set = Arc::new(exclusions);
    *last = Some((globs.to_vec(), Arc::clone(&set)));
    set
}

/// Whether to ask the model for this document and cursor (`cursor`: a byte offset in `text`).
pub fn skip_request(config: &CompletionConfig, uri: &str, text: &str, cursor: usize) -> Option<Skip> {
    if let Some(glob) = excluded_by(&config.exclude, uri) {
        return Some(Skip::Excluded(glob));
    }
    let after = text.get(cursor..).unwrap_or("");
    let right = after.split('\n').next().unwrap_or("").chars().filter(|c| !c.is_whitespace()).count();
    (right > config.max_right_chars as usize).then_some(Skip::RightOfCursor(right))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(user: Option<Vec<&str>>, defaults: bool) -> CompletionConfig {
        let mut c = crate::config::Config::default().completion;
        c.exclude = globs(user.map(|v| v.into_iter().map(String::from).collect::<Vec<_>>()).as_deref(), defaults);
        c
    }

    #[test]
    fn default_globs_and_user_globs_add_up() {
        let c = config(None, true);
        for uri in ["file:///p/.env", "file:///p/app/.env.local", "file:///p/tls/server.pem", "file:///p/a.key", "file:///p/secrets/db.txt", "file:///p/deep/secrets/x/y.py", "file:///home/u/.ssh/id_rsa.pub"] {
            assert!(skip_request(&c, uri, "", 0).is_some_and(|s| matches!(s, Skip::Excluded(_))), "{uri} not excluded");
        }
        for uri in ["file:///p/main.py", "file:///p/environment.py", "file:///p/keys.rs", "file:///p/secretsauce.py", "untitled:Untitled-1"] {
            assert_eq!(skip_request(&c, uri, "", 0), None, "{uri} excluded");
        }
        // A user glob adds to the defaults…
        let c = config(Some(vec!["*.sql"]), true);
        assert_eq!(excluded_by(&c.exclude, "file:///p/q.sql").as_deref(), Some("*.sql"));
        assert_eq!(excluded_by(&c.exclude, "file:///p/.env").as_deref(), Some(".env"));
        // …unless the defaults are turned off.
        let c = config(Some(vec!["*.sql"]), false);
        assert_eq!(c.exclude, vec!["*.sql".to_string()]);
        assert_eq!(excluded_by(&c.exclude, "file:///p/.env"), None);
        // Percent-encoded paths are decoded first.
        assert!(excluded_by(&config(None, true).exclude, "file:///p/my%20secrets/secrets/a.txt").is_some());
    }

    #[test]
    fn settings_keys() {
        use serde_json::json;
        let p = crate::config::parse(&json!({"completion": {"exclude": ["*.sql"], "excludeDefaults": false, "maxRightChars": 20}})).unwrap();
        assert!(p.unknown_keys.is_empty(), "{:?}", p.unknown_keys);
        let c = p.options.resolve(None).completion;
        assert_eq!((c.exclude, c.max_right_chars), (vec!["*.sql".to_string()], 20));
        let c = crate::config::parse(&json!({"completion": {"exclude": ["*.sql", ".env"]}})).unwrap().options.resolve(None).completion;
        assert_eq!(c.exclude.len(), DEFAULT_EXCLUDE.len() + 1, "{:?}", c.exclude);
        assert_eq!((c.exclude.last().map(String::as_str), c.max_right_chars), (Some("*.sql"), DEFAULT_MAX_RIGHT_CHARS));
        let e = crate::config::parse(&json!({"completion": {"exclude": "*.sql"}})).unwrap_err();
        assert!(e.contains("completion.exclude"), "{e}");
    }

    #[test]
    fn text_right_of_the_cursor() {
        let c = config(None, true);
        let text = "x = f(a, b)\nnext line is long enough\n";
        // Before "a, b)": 4 non-space characters; before "= f(a, b)": 7 (the next line does
        // not count).
        assert_eq!(skip_request(&c, "file:///p/m.py", text, 6), None);
        assert_eq!(skip_request(&c, "file:///p/m.py", text, 2), None);
        let text = "value = compute(first, second)\n";
        assert_eq!(skip_request(&c, "file:///p/m.py", text, 8), Some(Skip::RightOfCursor(21)));
        let mut wide = c.clone();
        wide.max_right_chars = 64;
        assert_eq!(skip_request(&wide, "file:///p/m.py", text, 8), None);
    }
}
