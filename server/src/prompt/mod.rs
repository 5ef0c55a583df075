//! The prompt plan: a completion's context, fitted to the token budget and laid out in tokens
//! for the model's FIM family, with the rule that says where the answer ends, made in one place
//! and handed to the model thread as token ids and a stop predicate.
//!
//! [`Draft`] is what the engine decides from the text and cursor (context parts, stop rule,
//! limits); [`PromptPlan::build`] turns it into tokens with the model's tokenizer, through the
//! [`Tokenize`] trait, so the layout is tested here with a small tokenizer and no model.
//! [`budget`] holds the budget rule (all of it), [`layout`] the order of tokens per family.

pub mod budget;
pub mod cross_file;
pub mod layout;

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault};
use std::ops::Range;
use std::sync::{Arc, Mutex};

pub use budget::PromptParts;
pub use layout::Section;

use crate::context::{ContextParts, CrossFile};
use crate::model::{CancelFlag, GenerateRequest, Prompt, Token, Tokenize, VocabFacts};
use crate::postprocess::StopRule;

type Hasher = BuildHasherDefault<std::collections::hash_map::DefaultHasher>;

/// Lines whose token counts are remembered, at most (then the memo starts again).
const LINE_COUNTS: usize = 50_000;

/// A completion before tokens: the text around the cursor, where the answer must end, and the
/// configured limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draft {
    pub context: ContextParts,
    pub stop: StopRule,
    /// What the code uses from other files (`completion.crossFile`); `None`: no such section.
    pub cross_file: Option<CrossFile>,
    /// What the model thread decodes for it: the prompt and an answer, or only part of the
    /// prompt, ahead of requests.
    pub purpose: Purpose,
    /// `completion.maxPromptTokens` (the context size bounds it too).
    pub max_prompt_tokens: u32,
    /// `completion.maxTokens` (at most half the context).
    pub max_tokens: u32,
    /// `completion.fim`: lay the prompt out with the model's FIM markers (and the suffix) when
    /// it has them; `false`: prefix only, whatever the model.
    pub fim: bool,
}

/// What a draft is decoded for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Purpose {
    /// The prompt, then the answer.
    #[default]
    Complete,
    /// Only the head every prompt in the file starts with (BOS and the cross-file section),
    /// decoded when the file opens ([`crate::engine::Engine::prefill_head`]).
    Head,
    /// The whole prompt and no answer: decoded where the cursor rests before the user types
    /// there ([`crate::engine::Engine::prefill_at`]).
    Prompt,
}

impl Draft {
    /// The model thread's job for this draft: the plan is built when the thread takes the job,
    /// with its tokenizer, and only its tokens and stop predicate reach the decoder.
    pub fn into_request(self, memo: Arc<TokenMemo>, cancel: CancelFlag) -> GenerateRequest {
        GenerateRequest { prompt: Box::new(move |tokenizer: &dyn Tokenize, model: &VocabFacts| PromptPlan::build(&self, tokenizer, model, &memo).into_prompt()), cancel }
    }

    /// [`Draft::into_request`], with `inspect` shown the plan and the tokenizer on the model
    /// thread before the tokens go to the decoder (`ghostline eval` measures where a
    /// definition landed in the prompt this way).
    pub fn into_request_inspected(self, memo: Arc<TokenMemo>, cancel: CancelFlag, inspect: Box<dyn Fn(&PromptPlan, &dyn Tokenize) + Send>) -> GenerateRequest {
        let build = move |tokenizer: &dyn Tokenize, model: &VocabFacts| {
            let plan = PromptPlan::build(&self, tokenizer, model, &memo);
            inspect(&plan, tokenizer);
            plan.into_prompt()
        };
        GenerateRequest { prompt: Box::new(build), cancel }
    }
}

/// A completion's prompt, made once: tokens with their sections, the text they hold, where the
/// answer ends and how long it may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptPlan {
    pub tokens: Vec<Token>,
    /// What each run of `tokens` is, in order.
    pub sections: Vec<(Section, Range<usize>)>,
    /// The text after the budget's line cut (before the last cut in tokens).
    pub text: PromptParts,
    /// The cross-file section as it went in (empty when there is none).
    pub cross_file: String,
    pub stop: StopRule,
    pub max_tokens: usize,
}

impl PromptPlan {
    /// Context → budget → layout: fits `draft`'s parts to the limits of the model's context
    /// (counting tokens line by line, remembered in `memo`), tokenizes them (the outline apart,
    /// so its tokens and their KV entries stay the same while the prefix after it changes), and
    /// lays them out for the model's FIM format.
    pub fn build(draft: &Draft, tokenizer: &dyn Tokenize, model: &VocabFacts, memo: &TokenMemo) -> PromptPlan {
        let limits = budget::limits(model.n_ctx, draft.max_prompt_tokens as usize, draft.max_tokens as usize);
        let mut context = draft.context.clone();
        let format = if draft.fim { model.fim.clone() } else { crate::model::fim::FimFormat::PrefixOnly };
        if !format.uses_suffix() {
            context.suffix.clear();
        }
        let mut memo = memo.0.lock().unwrap_or_else(|e| e.into_inner());
        // The cross-file section first, within its own share: the rest of the text fits in
        // what it leaves, so the section never depends on the text around the cursor.
        let (cross_text, cross) = match &draft.cross_file {
            Some(cross) => {
                let room = budget::cross_file_room(limits.text);
                let kept = {
                    let memo = RefCell::new(&mut *memo);
                    budget::fit_cross_file(&cross.snippets, room, &|s: &str| memo.borrow_mut().count(tokenizer, s))
                };
                // Counted line by line, the section can still be over in tokens: drop the least
                // wanted snippets until it fits.
                let mut kept = kept;
                loop {
                    let section = cross_file::render(cross, &kept, model.file_sep.is_some());
                    let tokens = memo.cross_file(tokenizer, &section, model.file_sep);
                    if tokens.len() <= room || kept.pop().is_none() {
                        let text = section.text();
                        cross.laid_out.set(text.clone());
                        break (text, tokens);
                    }
                }
            }
            None => (String::new(), Vec::new()),
        };
        if draft.purpose == Purpose::Head {
            let head = if cross.is_empty() { layout::Layout::default() } else { layout::head(model.bos, &cross) };
            return PromptPlan { tokens: head.tokens, sections: head.sections, text: PromptParts::default(), cross_file: cross_text, stop: draft.stop.clone(), max_tokens: 0 };
        }
        let text = {
            let memo = RefCell::new(&mut *memo);
            budget::fit(&context, limits.text - cross.len(), &|s: &str| memo.borrow_mut().count(tokenizer, s))
        };
        if crate::config::log_code() {
            tracing::trace!(cross_file = ?cross_text, outline = ?text.outline, prefix = ?text.prefix, suffix = ?text.suffix, "prompt parts");
        }
        let mut before = memo.outline(tokenizer, &text.outline);
        let outline = before.len();
        before.extend(tokenizer.tokenize(&text.prefix));
        let suffix = tokenizer.tokenize(&text.suffix);
        let room = limits.prompt.saturating_sub(layout::overhead(&format, model.bos) + cross.len());
        let (kept, suffix) = budget::cut(&before, &suffix, room);
        let outline = outline.saturating_sub(before.len() - kept.len());
        let layout = layout::lay_out(&format, model.bos, &cross, kept, outline, suffix);
        let max_tokens = if draft.purpose == Purpose::Prompt { 0 } else { limits.max_tokens };
        PromptPlan { tokens: layout.tokens, sections: layout.sections, text, cross_file: cross_text, stop: draft.stop.clone(), max_tokens }
    }

    /// The tokens of one kind, in order (several runs for markers).
    pub fn section(&self, which: Section) -> Vec<Token> {
        self.sections.iter().filter(|(s, _)| *s == which).flat_map(|(_, r)| self.tokens[r.clone()].iter().copied()).collect()
    }

    /// What the model thread runs: the tokens, and the stop rule as a predicate with a key that
    /// identifies it for the suggestion cache.
    pub fn into_prompt(self) -> Prompt {
        let stop_key = Hasher::default().hash_one(&self.stop);
        let lead = self.stop.forced_lead().to_owned();
        let blank_enders = self.stop.blank_enders().to_owned();
        let (stop, open) = (self.stop.clone(), self.stop);
        Prompt {
            tokens: self.tokens,
            stop: Box::new(move |text| stop.check(text)),
            stop_key,
            max_tokens: self.max_tokens,
            unfinished: Box::new(move |text| open.unfinished(text)),
            lead,
            blank_enders,
        }
    }
}

/// Token counts the budget fit remembers between requests, for one model's tokenizer.
#[derive(Debug, Default)]
pub struct TokenMemo(Mutex<Memo>);

#[derive(Debug, Default)]
struct Memo {
    /// Token counts of single lines (by hash): between two keystrokes only the cursor's line
    /// changes, so each request tokenizes one short line instead of the whole context several
    /// times over.
    lines: HashMap<u64, usize>,
    /// The last outline and its tokens: the outline seldom changes between keystrokes.
    outline: (u64, String, Vec<Token>),
    /// The last cross-file section and its tokens: it changes even more seldom.
    cross_file: (u64, cross_file::Section, Vec<Token>),
}

// Each entry is kept with the tokenizer's `Tokenize::view`: tokens made from a text as it is
// are never reused for a prompt whose texts must be redacted first (the endpoint's, see
// `model::Reach::Redacted`), nor the other way.

impl Memo {
    /// Tokens of `text` for the budget: the sum of its lines' counts, each line tokenized once
    /// and remembered. Tokenizing lines apart never merges across a line break, so the sum is at
    /// least the whole text's count in practice; [`budget::cut`] trims any excess.
    fn count(&mut self, tokenizer: &dyn Tokenize, text: &str) -> usize {
        if self.lines.len() > LINE_COUNTS {
            self.lines.clear();
        }
        text.split_inclusive('\n')
            .map(|line| *self.lines.entry(Hasher::default().hash_one((tokenizer.view(), line))).or_insert_with(|| tokenizer.tokenize(line).len()))
            .sum()
    }

    /// The cross-file section's tokens, made again only when it changed.
    fn cross_file(&mut self, tokenizer: &dyn Tokenize, section: &cross_file::Section, file_sep: Option<Token>) -> Vec<Token> {
        if self.cross_file.0 != tokenizer.view() || self.cross_file.1 != *section || self.cross_file.2.is_empty() {
            self.cross_file = (tokenizer.view(), section.clone(), section.tokens(tokenizer, file_sep));
        }
        self.cross_file.2.clone()
    }

    /// The outline's tokens, tokenized again only when it changed.
    fn outline(&mut self, tokenizer: &dyn Tokenize, outline: &str) -> Vec<Token> {
        if self.outline.0 != tokenizer.view() || self.outline.1 != outline {
            self.outline = (tokenizer.view(), outline.to_owned(), tokenizer.tokenize(outline));
        }
        self.outline.2.clone()
    }
}

#[cfg(test)]
mod tests;
