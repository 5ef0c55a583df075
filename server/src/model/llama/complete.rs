//! Completion jobs on the model thread: the caller's prompt builder runs with the model's
//! tokenizer, then the tokens are answered from the suggestion cache or decoded (aligned) until
//! the builder's stop predicate says the text is complete.

use std::time::Instant;

use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;

use super::{Run, Worker};
use crate::model::{CacheHit, GenerateError, GenerateRequest, Generation, Prompt, Timings, Token, Tokenize, VocabFacts};

impl Worker<'_> {
    /// Builds the request's prompt with this model's tokenizer and facts, then answers it from
    /// the suggestion cache (same tokens, stop key and token cap) or generates it.
    pub(super) fn generate(&mut self, request: &GenerateRequest) -> Result<Generation, GenerateError> {
        let start = Instant::now();
        let mut timings = Timings::default();
        let facts = VocabFacts { fim: self.format.clone(), bos: self.bos, n_ctx: self.ctx.n_ctx() as usize, file_sep: self.file_sep };
        let Prompt { tokens, stop, stop_key, max_tokens, unfinished, lead, blank_enders } = (request.prompt)(&Vocab(self.model) as &dyn Tokenize, &facts);
        if tokens.is_empty() {
            return Ok(Generation { text: String::new(), timings });
        }
        if tokens.len() + max_tokens > facts.n_ctx {
            return Err(GenerateError::Failed(format!(
                "the prompt ({} tokens) and answer ({max_tokens} tokens) do not fit the context of {} tokens",
                tokens.len(),
                facts.n_ctx
            )));
        }
        let prompt: Vec<LlamaToken> = tokens.iter().copied().map(LlamaToken).collect();
        timings.prompt_tokens = prompt.len();
        timings.prompt = tokens;
        timings.build_ms = start.elapsed().as_secs_f64() * 1e3;
        let key = crate::model::suggestion_key(&timings.prompt, stop_key, max_tokens);
        // A prompt decoded ahead (no answer wanted) is about the KV cache, which the suggestion
        // cache knows nothing of: never answered from it, never kept in it.
        let ahead_only = max_tokens == 0;
        if let Some((text, generated)) = self.suggestions.get(&key).filter(|_| !ahead_only) {
            timings.cache = Some(CacheHit::Prompt);
            timings.generated_tokens = generated;
            timings.total_ms = start.elapsed().as_secs_f64() * 1e3;
            timings.ttft_ms = timings.total_ms;
            return Ok(Generation { text, timings });
        }

        // Decoded ahead and already in the KV cache, as the start of what it holds: nothing to
        // do. Decoding it again would drop the rest (the whole prompt decoded where the cursor
        // rests, when the head of the file's prompts comes after it).
        if ahead_only && super::states::common_prefix(&self.cached, &prompt) == prompt.len() {
            timings.reused_tokens = prompt.len();
            timings.total_ms = start.elapsed().as_secs_f64() * 1e3;
            return Ok(Generation { text: String::new(), timings });
        }
        let run = Run { cancel: &request.cancel, max_tokens, stop: &*stop, unfinished: Some(&*unfinished), lead: lead.as_bytes(), blank_enders: blank_enders.as_bytes(), fim_stops: true, aligned: true };
        let text = self.prefill_and_decode(&prompt, &run, start, &mut timings)?;
        if !ahead_only {
            self.suggestions.put(key, (text.clone(), timings.generated_tokens));
        }
        Ok(Generation { text, timings })
    }

}

/// The model's vocabulary as the prompt builder sees it.
pub(in crate::model) struct Vocab<'m>(pub(in crate::model) &'m LlamaModel);

impl Tokenize for Vocab<'_> {
    fn tokenize(&self, text: &str) -> Vec<Token> {
        self.0.vocab().tokenize(text.as_bytes(), false, false).into_iter().map(|t| t.0).collect()
    }

    fn token_text(&self, token: Token) -> String {
        let mut bytes = Vec::new();
        self.0.vocab().token_to_piece_into(LlamaToken(token), &mut bytes, false, None);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

