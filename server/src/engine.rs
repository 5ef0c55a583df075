//! The completion engine: text and a cursor in, a cleaned-up suggestion out.
//!
//! context → prompt parts → model thread (with a stop rule) → post-processing. Knows nothing of
//! LSP; the language server and the `complete` command both call [`Engine::complete`].

use crate::config::CompletionConfig;
use crate::context;
use crate::model::{CancelFlag, GenerateError, GenerateRequest, ModelHandle, Timings};
use crate::postprocess::StopRule;

/// A suggestion to insert at the cursor.
#[derive(Debug, Clone, PartialEq)]
pub struct Suggestion {
    /// Text to insert at the cursor; empty when the model had nothing useful.
    pub text: String,
    pub timings: Timings,
}

/// Completes code with one model.
pub struct Engine {
    pub model: ModelHandle,
    pub config: CompletionConfig,
}

impl Engine {
    pub fn new(model: ModelHandle, config: CompletionConfig) -> Self {
        Engine { model, config }
    }

    /// Completes `text` at byte offset `cursor` (a char boundary).
    pub async fn complete(&self, text: &str, cursor: usize, cancel: CancelFlag) -> Result<Suggestion, GenerateError> {
        let request = self.request(text, cursor, cancel);
        let stop = request.stop.clone();
        let generation = self.model.generate(request).await?;
        tracing::trace!(raw = ?generation.text, "generated");
        Ok(Suggestion { text: stop.finish(&generation.text), timings: generation.timings })
    }

    /// The request the model thread gets for this cursor.
    ///
    /// When the cursor's line holds only indentation (or nothing), the prompt ends before that
    /// line's line break instead: a prompt ending in `\n` or a run of spaces splits tokens where
    /// the model never saw them split (BPE vocabularies merge a line break with the next
    /// indentation), and it answers with a stray blank line. The model writes the line break
    /// and indentation itself; the stop rule requires them and removes them again.
    pub fn request(&self, text: &str, cursor: usize, cancel: CancelFlag) -> GenerateRequest {
        let cursor = floor_char_boundary(text, cursor);
        let line_start = text[..cursor].rfind('\n').map_or(0, |i| i + 1);
        let before = &text[line_start..cursor];
        let mut stop = StopRule::for_cursor(before, &text[cursor..]);
        let mut parts = context::line_window(
            text,
            cursor,
            self.config.lines_before as usize,
            self.config.lines_after as usize,
        );
        if line_start > 0 && before.trim().is_empty() {
            let break_start = if text[..line_start].ends_with("\r\n") { line_start - 2 } else { line_start - 1 };
            let lead = &text[break_start..cursor];
            if parts.prefix.len() > lead.len() && parts.prefix.ends_with(lead) {
                parts.prefix.truncate(parts.prefix.len() - lead.len());
                stop = stop.with_lead(lead);
            }
        }
        GenerateRequest { parts, stop, max_tokens: self.config.max_tokens, cancel }
    }
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

