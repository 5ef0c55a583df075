//! The completion engine: text and a cursor in, a cleaned-up suggestion out.
//!
//! context → prompt parts → model thread (with a stop rule) → post-processing. Knows nothing of
//! LSP; the language server and the `complete` command both call [`Engine::complete`], which
//! first looks for the suggestion [`Engine::generate_ahead`] started on the keystroke.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;
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

/// An [`Input`] that owns its text and tree, for work that outlives the caller.
pub struct OwnedInput {
    pub text: String,
    pub cursor: usize,
    pub syntax: Option<(&'static Spec, Tree)>,
}

impl OwnedInput {
    pub fn input(&self) -> Input<'_> {
        Input { text: &self.text, cursor: self.cursor, syntax: self.syntax.as_ref().map(|(s, t)| (*s, t)) }
    }
}

/// The generation started ahead on the last keystroke: which text and cursor it is for, and
/// its suggestion once made (`None` while it runs).
struct Ahead {
    key: u64,
    done: watch::Receiver<Option<Result<Suggestion, GenerateError>>>,
}

/// Completes code with one model.
pub struct Engine {
    /// Shared with the engines that replace this one when only completion settings change
    /// ([`Engine::with_config`]): the model thread lives as long as any of them.
    pub model: Arc<ModelHandle>,
    pub config: CompletionConfig,
    /// The last suggestion shown, for typed-ahead reuse.
    last: Mutex<Option<Shown>>,
    ahead: Mutex<Option<Ahead>>,
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
        Engine { model: Arc::new(model), config, last: Mutex::new(None), ahead: Mutex::new(None) }
    }

    /// The same model (thread, KV cache and suggestion cache) with other completion settings.
    /// Only settings read per request change this way; the sampling the model thread was
    /// started with stays (see `crate::model::Sampling`).
    pub fn with_config(&self, config: CompletionConfig) -> Self {
        Engine { model: Arc::clone(&self.model), config, last: Mutex::new(None), ahead: Mutex::new(None) }
    }

    pub async fn complete(&self, input: Input<'_>, cancel: CancelFlag) -> Result<Suggestion, GenerateError> {
        if looks_binary(input.text, input.cursor) {
            return Ok(Suggestion { text: String::new(), timings: Timings::default(), strategy: Strategy::Window });
        }
        if let Some(s) = self.typed_ahead(input) {
            return Ok(s);
        }
        let suggestion = match self.made_ahead(input).await {
            Some(s) => s,
            None => self.generate(input, cancel).await?,
        };
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

    /// The suggestion generated ahead for exactly this text and cursor, waiting for it if it
    /// is still being made; `None` when there is none (or it was cancelled or failed).
    async fn made_ahead(&self, input: Input<'_>) -> Option<Suggestion> {
        let key = ahead_key(input);
        let mut done = self.ahead.lock().unwrap().as_ref().filter(|a| a.key == key)?.done.clone();
        let made = done.wait_for(Option::is_some).await.ok()?.clone()?;
        let mut suggestion = made.ok()?;
        // Made by the model ahead (unless the suggestion cache had answered it).
        suggestion.timings.cache.get_or_insert(CacheHit::Ahead);
        self.model.ahead_stats().used.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(suggestion)
    }

    /// Starts generating for `input` ahead of any request (`completion.generateAhead`): a
    /// [`Engine::complete`] for the same text and cursor then takes its suggestion, waiting for
    /// it if needed. Returns at once; false when nothing was started (binary text, typed-ahead
    /// would answer, no model). Needs a tokio runtime.
    pub fn generate_ahead(&self, owned: OwnedInput, cancel: CancelFlag) -> bool {
        let input = owned.input();
        if looks_binary(input.text, input.cursor) || self.typed_ahead(input).is_some() {
            return false;
        }
        let key = ahead_key(input);
        let started = std::time::Instant::now();
        let request = self.request(input, cancel);
        let context_ms = started.elapsed().as_secs_f64() * 1e3;
        let (stop, strategy) = (request.stop.clone(), request.context.strategy);
        let Some(answer) = self.model.generate_ahead(request) else { return false };
        let (tx, done) = watch::channel(None);
        *self.ahead.lock().unwrap() = Some(Ahead { key, done });
        tokio::spawn(async move {
            let result = answer.await.unwrap_or_else(|_| Err(GenerateError::Unavailable(crate::model::THREAD_STOPPED.into())));
            let made = result.map(|generation| {
                let mut s = finish(owned.input(), &stop, strategy, generation);
                s.timings.context_ms = context_ms;
                s
            });
            let _ = tx.send(Some(made));
        });
        true
    }

    /// Runs the model for `input` (context, model thread, post-processing).
    async fn generate(&self, input: Input<'_>, cancel: CancelFlag) -> Result<Suggestion, GenerateError> {
        let started = std::time::Instant::now();
        let request = self.request(input, cancel);
        let context_ms = started.elapsed().as_secs_f64() * 1e3;
        let mut suggestion = self.run(input, request).await?;
        suggestion.timings.context_ms = context_ms;
        Ok(suggestion)
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
        Ok(finish(input, &stop, strategy, generation))
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

/// The generated text cut at the stop rule and checked against the syntax tree.
fn finish(input: Input<'_>, stop: &StopRule, strategy: Strategy, generation: crate::model::Generation) -> Suggestion {
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
    Suggestion { text, timings, strategy }
}

/// Identifies a text and cursor, to match a request with the generation made ahead for it.
fn ahead_key(input: Input<'_>) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one((input.text, input.cursor))
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
