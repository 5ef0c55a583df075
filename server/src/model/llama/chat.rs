//! Chat jobs on the model thread: code actions' instruction-style generations through the
//! model's own chat template, with greedy sampling and a caller-supplied end rule.

use std::time::Instant;

use llama_cpp_2::model::LlamaChatMessage;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

use super::{valid_utf8_prefix, PrefillError, Worker};
use crate::model::{ChatRequest, GenerateError, Generation, Timings};

impl Worker<'_> {
    /// The prompt text for `messages`: the GGUF's chat template when it has one, else a plain
    /// ChatML layout (what most instruction-tuned small models were trained on).
    fn chat_prompt(&self, messages: &[(String, String)]) -> String {
        let templated = self.model.chat_template(None).ok().and_then(|template| {
            let chat: Vec<LlamaChatMessage> = messages
                .iter()
                .filter_map(|(role, content)| LlamaChatMessage::new(role.clone(), content.replace('\0', "")).ok())
                .collect();
            self.model.apply_chat_template(&template, &chat, true).ok()
        });
        templated.unwrap_or_else(|| {
            let mut out = String::new();
            for (role, content) in messages {
                out.push_str(&format!("<|im_start|>{role}\n{content}<|im_end|>\n"));
            }
            out.push_str("<|im_start|>assistant\n");
            out
        })
    }

    pub(super) fn chat(&mut self, request: &ChatRequest) -> Result<Generation, GenerateError> {
        let start = Instant::now();
        let mut timings = Timings::default();
        let n_ctx = self.ctx.n_ctx() as usize;
        let text = self.chat_prompt(&request.messages);
        let mut prompt: Vec<LlamaToken> = self.bos.map(LlamaToken).into_iter().collect();
        // The template's markers (`<|im_start|>`…) are special tokens: parse them as such.
        prompt.extend(self.model.vocab().tokenize(text.as_bytes(), false, true));
        let max_tokens = (request.max_tokens as usize).max(1);
        if prompt.len() + max_tokens >= n_ctx {
            return Err(GenerateError::Failed(format!(
                "the prompt ({} tokens) and answer ({max_tokens} tokens) do not fit the local context of {n_ctx} tokens",
                prompt.len()
            )));
        }
        timings.prompt_tokens = prompt.len();
        let reused = self.prefill(&prompt, &request.cancel).map_err(|e| match e {
            PrefillError::Cancelled => GenerateError::Cancelled,
            PrefillError::Decode(m) => GenerateError::Failed(m),
        })?;
        timings.reused_tokens = reused;
        timings.prefill_tokens = prompt.len() - reused;

        let mut sampler = LlamaSampler::chain_simple([
            LlamaSampler::penalties(
                self.model.n_vocab(),
                self.sampling.repeat_last_n as i32,
                self.sampling.repeat_penalty,
                0.0,
                0.0,
            ),
            LlamaSampler::greedy(),
        ]);
        let vocab = self.model.vocab();
        let mut bytes = Vec::new();
        let mut keep = None;
        let mut logits_at = self.batch.n_tokens() - 1;
        let mut first_token_at = None;
        for _ in 0..max_tokens {
            if request.cancel.is_cancelled() {
                return Err(GenerateError::Cancelled);
            }
            let token = sampler.sample(&self.ctx, logits_at);
            first_token_at.get_or_insert_with(Instant::now);
            if vocab.is_eog(token) {
                break;
            }
            timings.generated_tokens += 1;
            vocab.token_to_piece_into(token, &mut bytes, false, None);
            if let Some(cut) = (request.stop)(valid_utf8_prefix(&bytes)) {
                keep = Some(cut);
                break;
            }
            if self.cached.len() + 1 >= n_ctx {
                break;
            }
            self.batch.clear();
            self.batch
                .add(token, self.cached.len() as i32, &[0], true)
                .map_err(|e| GenerateError::Failed(e.to_string()))?;
            self.ctx.decode(&mut self.batch).map_err(|e| GenerateError::Failed(e.to_string()))?;
            self.cached.push(token);
            logits_at = 0;
        }
        let end = Instant::now();
        let first = first_token_at.unwrap_or(end);
        timings.ttft_ms = (first - start).as_secs_f64() * 1e3;
        timings.total_ms = (end - start).as_secs_f64() * 1e3;
        if timings.generated_tokens > 1 {
            timings.decode_tokens_per_s = (timings.generated_tokens - 1) as f64 / (end - first).as_secs_f64().max(1e-9);
        }
        let all = valid_utf8_prefix(&bytes);
        let text = all[..keep.unwrap_or(all.len()).min(all.len())].to_owned();
        Ok(Generation { text, timings })
    }
}
