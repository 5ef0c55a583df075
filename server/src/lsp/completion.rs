//! Completion over LSP: `textDocument/inlineCompletion` and `textDocument/completion` share
//! [`Backend::suggest`] (snapshot, the document's completion session, the engine, and the
//! check that the document did not move on), then become ghost text or a completion item.

use tower_lsp_server::gen_lsp_types::*;
use tower_lsp_server::jsonrpc::{Error, Result};

use super::state::{LastCompletion, LastPosition};
use super::{encoding, Backend};
use crate::engine::{Input, Suggestion};
use crate::model::{CacheHit, CancelFlag, GenerateError};
use crate::session::Key;
use crate::stats::{track::Offer, Route};

/// The command each item carries, which the client runs once it inserted the item: its
/// arguments are the id the server gave the suggestion and, for a partial accept, the length
/// accepted so far (in the negotiated encoding's units).
pub const ACCEPTED: &str = "ghostline.accepted";

/// Cancels a request's model work when its future is dropped (e.g. on `$/cancelRequest`).
struct CancelOnDrop(CancelFlag);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Resolves once `flag` is cancelled (looked at every 10 ms).
async fn cancelled(flag: &CancelFlag) {
    while !flag.is_cancelled() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// A suggestion placed in the document.
pub(super) struct Placed {
    pub suggestion: Suggestion,
    pub cursor: Position,
    /// Start of the identifier that ends at the cursor, and its text.
    pub word_start: Position,
    pub word: String,
    /// The cursor line's indentation (the blanks it starts with, up to the cursor).
    pub indent: String,
    /// The id of the accept command (statistics on).
    pub accept: Option<u64>,
}

impl Backend {
    /// Shared path of both completion requests.
    pub(super) async fn suggest(&self, params: &TextDocumentPositionParams) -> Result<Option<Placed>> {
        let enc = self.caps().encoding;
        let uri = &params.text_document.uri;
        let requested = std::time::Instant::now();
        crate::fault::point("completion");
        let Some(mut engine) = self.engine() else { return Ok(None) };
        if engine.model.thread_died() {
            self.restart_dead_model().await;
            match self.engine() {
                Some(e) => engine = e,
                None => return Ok(None),
            }
        }
        let (snap, cursor, word_start, word, indent, session, left, offer) = {
            let mut state = self.state();
            if !state.config.completion.enabled {
                return Ok(None);
            }
            let doc = state.docs.get(uri).ok_or_else(|| Error::invalid_params(format!("unknown document: {}", uri.0.as_str())))?;
            let (before, after) = (engine.config.lines_before as usize, engine.config.lines_after as usize);
            let snap = doc.snapshot(params.position, enc, before, after).map_err(|e| Error::invalid_params(e.to_string()))?;
            let line_start = snap.text[..snap.cursor].rfind('\n').map_or(0, |i| i + 1);
            let typed = &snap.text[line_start..snap.cursor];
            let word_len = typed.chars().rev().take_while(|c| c.is_alphanumeric() || *c == '_').count();
            let word: String = typed.chars().skip(typed.chars().count() - word_len).collect();
            let word_start = encoding::from_char(&doc.rope, snap.cursor_char - word_len, enc);
            let cursor = encoding::from_char(&doc.rope, snap.cursor_char, enc);
            let indent: String = typed.chars().take_while(|c| *c == ' ' || *c == '\t').collect();
            let language = doc.language_id.clone();
            let model = state.config.model.path.as_ref().and_then(|p| p.file_stem()).map(|s| s.to_string_lossy().into_owned());
            let offer = (state.config.stats.clone(), model.unwrap_or_default(), language);
            let left = state.make_active(uri, Some(params.position.line));
            state.rest = Some((uri.clone(), params.position));
            (snap, cursor, word_start, word, indent, state.session(uri), left, offer)
        };
        if let Some((uri, touched, line)) = left {
            self.workspace_touched(&uri, touched, line);
        }
        if let Some(why) = crate::exclude::skip_request(&engine.config, uri.0.as_str(), &snap.text, snap.cursor) {
            tracing::debug!("no completion request: {why}");
            return Ok(None);
        }

        // The generation ahead for this very text and cursor is this request's answer in the
        // making: queue behind it. Any other work on the document is superseded.
        let cancel = session.begin_request(Key::of(&snap.text, snap.cursor));
        let _guard = CancelOnDrop(cancel.clone());
        let cross_file = self.cross_file_for(uri, &snap);
        let input = Input { cross_file: cross_file.as_ref(), text: &snap.text, cursor: snap.cursor, syntax: snap.syntax.as_ref().map(|(spec, tree)| (*spec, tree)) };
        // The text moving on (or a request for another cursor) cancels this one: answer at
        // once then, not when the model gets to look at the flag (after a prompt that may take
        // seconds on a busy machine). Helix ignores its automatic triggers while a request is
        // in flight, so a late answer here would cost the user the next suggestion.
        let result = tokio::select! {
            biased;
            result = engine.complete_in(&session, input, cancel.clone()) => result,
            () = cancelled(&cancel) => Err(GenerateError::Cancelled),
        };
        let current = {
            let mut state = self.state();
            let current = state.docs.get(uri).map(|d| d.version);
            if let Ok(s) = &result {
                let shown = current == Some(snap.version) && !s.text.is_empty();
                state.last_timings = Some(LastCompletion {
                    uri: uri.0.as_str().to_owned(),
                    version: snap.version,
                    position: LastPosition { line: params.position.line, character: params.position.character },
                    shown,
                    text: s.text.clone(),
                    timings: s.timings.clone(),
                    prompt: s.timings.prompt.clone(),
                    ahead: engine.ahead_counts(),
                    // As the prompt that made the answer laid it out (its budget's cut, the
                    // model's file separator).
                    cross_file: cross_file.as_ref().filter(|c| engine.config.cross_file && !c.snippets.is_empty()).map(|c| c.laid_out.get()).unwrap_or_default(),
                });
            }
            current
        };
        match result {
            Ok(suggestion) if current == Some(snap.version) && !suggestion.text.is_empty() => {
                tracing::debug!(
                    ttft_ms = suggestion.timings.ttft_ms,
                    total_ms = suggestion.timings.total_ms,
                    prompt_tokens = suggestion.timings.prompt_tokens,
                    reused = suggestion.timings.reused_tokens,
                    "suggestion"
                );
                let (settings, model, language) = offer;
                let route = match suggestion.timings.cache {
                    Some(CacheHit::GeneratedAhead) => Route::Ahead,
                    Some(CacheHit::ShownSuggestion) => Route::TypedAhead,
                    Some(CacheHit::Prompt) | None => Route::Model,
                };
                let offer = Offer { uri: uri.0.as_str().to_owned(), anchor: snap.cursor_char, text: suggestion.text.clone(), model, language, route, requested };
                let accept = self.stats.shown(&settings, offer);
                Ok(Some(Placed { suggestion, cursor, word_start, word, indent, accept }))
            }
            Err(GenerateError::Unavailable(why)) if why == crate::model::THREAD_STOPPED => {
                // It died under this request: start it again now, so that the next one works.
                self.restart_dead_model().await;
                Ok(None)
            }
            Ok(_) | Err(GenerateError::Cancelled) | Err(GenerateError::Unavailable(_)) => Ok(None),
            Err(e @ GenerateError::Failed(_)) => {
                tracing::error!("{e}");
                Err(Error { code: tower_lsp_server::jsonrpc::ErrorCode::InternalError, message: e.to_string().into(), data: None })
            }
        }
    }
}

/// The suggestion as ghost text at the cursor.
pub(super) fn inline_list(placed: Placed) -> InlineCompletionList {
    let item = InlineCompletionItem {
        insert_text: placed.suggestion.text.into(),
        filter_text: None,
        range: Some(Range { start: placed.cursor, end: placed.cursor }),
        command: accept_command(placed.accept),
    };
    InlineCompletionList { items: vec![item] }
}

/// The suggestion as a completion item for clients without ghost text (Helix): it replaces
/// the word before the cursor with that word plus the suggestion, so the client's fuzzy filter
/// (which matches `filterText` against the typed word) keeps it in the list.
pub(super) fn completion_list(placed: Placed, snippets: bool) -> CompletionList {
    let new_text = format!("{}{}", placed.word, placed.suggestion.text);
    let first_line = new_text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    let mut label: String = first_line.chars().take(80).collect();
    if new_text.trim().contains('\n') || first_line.chars().count() > 80 {
        label.push('…');
    }
    let filter_text = new_text.lines().next().unwrap_or("").to_owned();
    // A snippet's continuation lines get the cursor line's indentation from the client (Helix's
    // snippet renderer and Neovim's vim.snippet.expand both prepend it): send them without it.
    // A line that does not start with it (or a blank one, which would gain trailing blanks)
    // cannot be written so: then the text goes as plain text, inserted as it is.
    let snippet_text = snippets.then(|| dedent_continuation(&new_text, &placed.indent)).flatten();
    let item = CompletionItem {
        label,
        // Helix treats an item of kind Snippet as a snippet whatever its format.
        kind: Some(if snippet_text.is_some() { CompletionItemKind::Snippet } else { CompletionItemKind::Text }),
        detail: Some(format!("ghostline · {:.0} ms", placed.suggestion.timings.total_ms)),
        documentation: Some(MarkupContent { kind: MarkupKind::PlainText, value: new_text.clone() }.into()),
        filter_text: Some(filter_text),
        sort_text: Some("0".into()),
        preselect: Some(true),
        // As a snippet where supported: Neovim inserts a plain-text item only up to its first
        // space, but expands a snippet whole (multi-line included).
        insert_text_format: Some(if snippet_text.is_some() { InsertTextFormat::Snippet } else { InsertTextFormat::PlainText }),
        command: accept_command(placed.accept),
        text_edit: Some(
            TextEdit {
                range: Range { start: placed.word_start, end: placed.cursor },
                new_text: match snippet_text {
                    Some(text) => escape_snippet(&text),
                    None => new_text,
                },
            }
            .into(),
        ),
        ..Default::default()
    };
    // Incomplete: the client asks again as the user types, so the suggestion follows the text.
    CompletionList { is_incomplete: true, items: vec![item], ..Default::default() }
}

fn accept_command(id: Option<u64>) -> Option<Command> {
    id.map(|id| Command { title: "ghostline: suggestion accepted".into(), tooltip: None, command: ACCEPTED.into(), arguments: Some(vec![id.into()]) })
}

impl Backend {
    /// `ghostline.accepted`: the client inserted suggestion `arguments[0]` (all of it, or the
    /// first `arguments[1]` units so far); the statistics service takes it from there.
    pub(super) fn accepted(&self, arguments: &[serde_json::Value]) -> Result<()> {
        let bad = || Error::invalid_params(format!("{ACCEPTED} takes the suggestion's id and, for a partial accept, the length accepted"));
        let id = arguments.first().and_then(serde_json::Value::as_u64).ok_or_else(bad)?;
        let units = match arguments.get(1) {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => Some(v.as_u64().ok_or_else(bad)? as usize),
        };
        let Some((uri, text)) = self.stats.offered(id) else {
            tracing::debug!(id, "accept of a suggestion no longer tracked (statistics off, or too old)");
            return Ok(());
        };
        // The length in the negotiated encoding's units, as characters of the suggestion.
        let enc = self.caps().encoding;
        let chars = units.map(|units| {
            let mut seen = 0;
            text.chars().take_while(|c| {
                seen += match enc {
                    encoding::Encoding::Utf8 => c.len_utf8(),
                    encoding::Encoding::Utf16 => c.len_utf16(),
                };
                seen <= units
            })
            .count()
        });
        let state = self.state();
        if !state.config.stats.enabled {
            return Ok(()); // turned off since it was shown
        }
        match state.docs.iter().find(|(u, _)| u.0.as_str() == uri) {
            Some((_, doc)) => {
                self.stats.accepted(id, chars, &doc.rope);
            }
            None => tracing::debug!(id, "accept for a document that is not open"),
        }
        Ok(())
    }
}

/// `text` with `indent` taken off the start of each line after the first; `None` when one of
/// those lines is blank or does not start with it.
fn dedent_continuation(text: &str, indent: &str) -> Option<String> {
    let mut lines = text.split('\n');
    let mut out = lines.next().unwrap_or_default().to_owned();
    for line in lines {
        let rest = line.strip_prefix(indent).filter(|_| !line.trim().is_empty())?;
        out.push('\n');
        out.push_str(rest);
    }
    Some(out)
}

/// Text as a snippet that inserts exactly it: `\`, `$` and `}` escaped.
fn escape_snippet(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '$' | '}') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(text: &str, word: &str, indent: &str) -> Placed {
        let suggestion = Suggestion { text: text.into(), timings: Default::default(), strategy: crate::context::Strategy::Window, raw: String::new() };
        let at = Position { line: 3, character: (indent.len() + word.len()) as u32 };
        let word_start = Position { line: 3, character: indent.len() as u32 };
        Placed { suggestion, cursor: at, word_start, word: word.into(), indent: indent.into(), accept: None }
    }

    fn edit(list: &CompletionList) -> (&str, Option<InsertTextFormat>) {
        let item = &list.items[0];
        let Some(CompletionItemTextEdit::TextEdit(edit)) = &item.text_edit else { panic!("{item:?}") };
        let snippet = item.insert_text_format == Some(InsertTextFormat::Snippet);
        assert_eq!(item.kind == Some(CompletionItemKind::Snippet), snippet, "kind Snippet for snippets only: {item:?}");
        (edit.new_text.as_str(), item.insert_text_format)
    }

    /// Helix and Neovim indent a snippet's continuation lines like the cursor's line: the item
    /// leaves that indentation out, or goes as plain text when it cannot.
    #[test]
    fn snippet_items_leave_the_line_indentation_to_the_client() {
        let list = completion_list(placed("rn x\n    y = $1\n        z", "retu", "    "), true);
        assert_eq!(edit(&list), ("return x\ny = \\$1\n    z", Some(InsertTextFormat::Snippet)));
        // A line indented less than the cursor's line, or a blank one: plain text, as it is.
        for text in ["rn x\nfoo()", "rn x\n\n    y"] {
            let list = completion_list(placed(text, "retu", "    "), true);
            assert_eq!(edit(&list), (format!("retu{text}").as_str(), Some(InsertTextFormat::PlainText)));
        }
        // No snippet support: plain text, whole.
        let list = completion_list(placed("rn x\n    y", "retu", "    "), false);
        assert_eq!(edit(&list), ("return x\n    y", Some(InsertTextFormat::PlainText)));
    }
}
