//! The completion engine: text and a cursor in, a cleaned-up suggestion out.
//!
//! context → prompt parts → model thread (with a stop rule) → post-processing. Knows nothing of
//! LSP; the language server and the `complete` command both call [`Engine::complete`].

use std::sync::{Arc, Mutex};

use tree_sitter::Tree;

use crate::config::CompletionConfig;
use crate::context::{self, Strategy};
use crate::model::{CacheHit, CancelFlag, GenerateError, GenerateRequest, ModelHandle, Timings};
use crate::postprocess::{self, StopRule};
use crate::syntax::{self, BlockEnd, Spec};

/// A suggestion to insert at the cursor.
#[derive(Debug, Clone, PartialEq)]
pub struct Suggestion {
    /// Text to insert at the cursor; empty when the model had nothing useful.
    pub text: String,
    pub timings: Timings,
    pub strategy: Strategy,
}

/// What to complete: a text, a cursor in it, and its language and tree when known.
#[derive(Clone, Copy)]
pub struct Input<'a> {
    pub text: &'a str,
    /// Byte offset of the cursor.
    pub cursor: usize,
    pub syntax: Option<(&'static Spec, &'a Tree)>,
}

/// Completes code with one model.
pub struct Engine {
    /// Shared with the engines that replace this one when only completion settings change
    /// ([`Engine::with_config`]): the model thread lives as long as any of them.
    pub model: Arc<ModelHandle>,
    pub config: CompletionConfig,
    /// The last suggestion shown, for typed-ahead reuse.
    last: Mutex<Option<Shown>>,
}

/// A suggestion and the text around the cursor it was made for.
struct Shown {
    before: String,
    after: String,
    text: String,
    strategy: Strategy,
}

impl Engine {
    pub fn new(model: ModelHandle, config: CompletionConfig) -> Self {
        Engine { model: Arc::new(model), config, last: Mutex::new(None) }
    }

    /// The same model (thread, KV cache and suggestion cache) with other completion settings.
    /// Only settings read per request change this way; the sampling the model thread was
    /// started with stays (see `crate::model::Sampling`).
    pub fn with_config(&self, config: CompletionConfig) -> Self {
        Engine { model: Arc::clone(&self.model), config, last: Mutex::new(None) }
    }

    pub async fn complete(&self, input: Input<'_>, cancel: CancelFlag) -> Result<Suggestion, GenerateError> {
        if looks_binary(input.text, input.cursor) {
            return Ok(Suggestion { text: String::new(), timings: Timings::default(), strategy: Strategy::Window });
        }
        if let Some(s) = self.typed_ahead(input) {
            return Ok(s);
        }
        let started = std::time::Instant::now();
        let request = self.request(input, cancel);
        let context_ms = started.elapsed().as_secs_f64() * 1e3;
        let mut suggestion = self.run(input, request).await?;
        suggestion.timings.context_ms = context_ms;
        if self.config.typed_ahead && !suggestion.text.is_empty() {
            let (before, after) = input.text.split_at(input.cursor.min(input.text.len()));
            *self.last.lock().unwrap() = Some(Shown {
                before: before.to_owned(),
                after: after.to_owned(),
                text: suggestion.text.clone(),
                strategy: suggestion.strategy,
            });
        }
        Ok(suggestion)
    }

    /// Starts generating for `input` ahead of any request (`completion.generateAhead`): the
    /// model thread keeps the answer in its suggestion cache, where [`Engine::complete`] for the
    /// same text and cursor finds it, or queues behind it while it is still running. Returns at
    /// once; false when nothing was started (binary text, typed-ahead would answer, no model).
    pub fn generate_ahead(&self, input: Input<'_>, cancel: CancelFlag) -> bool {
        if looks_binary(input.text, input.cursor) || self.typed_ahead(input).is_some() {
            return false;
        }
        self.model.generate_ahead(self.request(input, cancel))
    }

    /// When the user has typed the start of the last suggestion (and changed nothing else),
    /// the rest of it, with no model call.
    fn typed_ahead(&self, input: Input<'_>) -> Option<Suggestion> {
        if !self.config.typed_ahead {
            return None;
        }
        let last = self.last.lock().unwrap();
        let shown = last.as_ref()?;
        let (before, after) = input.text.split_at(input.cursor.min(input.text.len()));
        let typed = before.strip_prefix(shown.before.as_str())?;
        if typed.is_empty() || after != shown.after {
            return None;
        }
        let rest = shown.text.strip_prefix(typed)?;
        if rest.trim().is_empty() {
            return None;
        }
        let timings = Timings { cache: Some(CacheHit::TypedAhead), ..Timings::default() };
        Some(Suggestion { text: rest.to_owned(), timings, strategy: shown.strategy })
    }

    /// Generates for a request built by [`Engine::request`] (possibly adjusted, as `eval` does
    /// to compare context strategies) and post-processes the result.
    pub async fn run(&self, input: Input<'_>, request: GenerateRequest) -> Result<Suggestion, GenerateError> {
        let stop = request.stop.clone();
        let strategy = request.context.strategy;
        let generation = self.model.generate(request).await?;
        if crate::config::log_code() {
            tracing::trace!(raw = ?generation.text, "generated");
        }
        let started = std::time::Instant::now();
        let mut text = stop.finish(&generation.text);
        if let Some((spec, tree)) = input.syntax {
            text = postprocess::syntax::keep_if_parse_not_worse(spec, tree, input.text, input.cursor, &text);
        }
        let mut timings = generation.timings;
        timings.postprocess_ms = started.elapsed().as_secs_f64() * 1e3;
        Ok(Suggestion { text, timings, strategy })
    }

    /// The request the model thread gets for this cursor.
    ///
    /// When the cursor's line holds only indentation (or nothing), the prompt ends before that
    /// line's line break instead: a prompt ending in `\n` or a run of spaces splits tokens where
    /// the model never saw them split (BPE vocabularies merge a line break with the next
    /// indentation), and it answers with a stray blank line. The model writes the line break
    /// and indentation itself; the stop rule requires them and removes them again.
    pub fn request(&self, input: Input<'_>, cancel: CancelFlag) -> GenerateRequest {
        let text = input.text;
        let cursor = floor_char_boundary(text, input.cursor);
        let line_start = text[..cursor].rfind('\n').map_or(0, |i| i + 1);
        let before = &text[line_start..cursor];
        let mut stop = StopRule::for_cursor(before, &text[cursor..]);
        if let Some((spec, tree)) = input.syntax {
            if spec.block_end == BlockEnd::Braces {
                stop = stop.with_braces();
            }
            // Mid-expression (not a block opener), or inside a string or comment: this line only.
            let blank = before.trim().is_empty();
            if !blank && (syntax::in_string_or_comment(tree, cursor) || !syntax::opens_block(tree, text, cursor)) {
                stop = stop.single_line();
            }
        }
        let tree = input.syntax;
        let mut context = context::build(
            text,
            cursor,
            tree.map(|(s, t)| (s, t)),
            self.config.lines_before as usize,
            self.config.lines_after as usize,
        );
        if line_start > 0 && before.trim().is_empty() {
            let break_start = if text[..line_start].ends_with("\r\n") { line_start - 2 } else { line_start - 1 };
            let lead = &text[break_start..cursor];
            if context.prefix.len() > lead.len() && context.prefix.ends_with(lead) {
                context.prefix.truncate(context.prefix.len() - lead.len());
                stop = stop.with_lead(lead);
            }
        }
        GenerateRequest {
            context,
            max_prompt_tokens: self.config.max_prompt_tokens,
            stop,
            max_tokens: self.config.max_tokens,
            cancel,
            ahead: false,
        }
    }
}

/// Whether the text around the cursor is binary data rather than code: a NUL, or more than
/// one control character in twenty.
fn looks_binary(text: &str, cursor: usize) -> bool {
    let cursor = floor_char_boundary(text, cursor);
    let start = floor_char_boundary(text, cursor.saturating_sub(2048));
    let end = floor_char_boundary(text, cursor + 2048);
    let around = &text[start..end];
    let controls = around.chars().filter(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t')).count();
    around.contains('\0') || controls * 20 > around.chars().count()
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}
