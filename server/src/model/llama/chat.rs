//! Chat jobs on the model thread: code actions' instruction-style generations through the
//! model's own chat template, with greedy sampling and a caller-supplied end rule.

use std::time::Instant;

use llama_cpp_2::model::LlamaChatMessage;
use llama_cpp_2::token::LlamaToken;

use super::Worker;
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
        let run = super::Run { cancel: &request.cancel, max_tokens, stop: &*request.stop, unfinished: None, lead: &[], blank_enders: &[], fim_stops: false, aligned: false };
        let text = self.prefill_and_decode(&prompt, &run, start, &mut timings)?;
        Ok(Generation { text, timings })
    }
}
