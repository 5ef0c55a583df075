//! Saved KV states: copies, in host memory, of prompts the context held before it moved on to
//! another, so that coming back to one (the layout of an earlier keystroke, another function,
//! another file) restores its KV entries instead of decoding them again.

use llama_cpp_2::context::session::SeqState;
use llama_cpp_2::token::LlamaToken;

/// States kept at most, and their bytes at most (a 300-token SmolLM2 state is ~7 MB; 1,000
/// tokens of a 1.5B coder ~28 MB), unless the memory budget leaves less (see [`SavedStates::new`]).
const MAX_STATES: usize = 4;
pub(super) const MAX_BYTES: usize = 256 << 20;

/// The prompt tokens whose KV entries a state holds, and the state.
pub(super) struct Saved {
    pub tokens: Vec<LlamaToken>,
    pub state: SeqState,
}

/// Most recently used first.
pub(super) struct SavedStates {
    states: Vec<Saved>,
    max_bytes: usize,
}

impl SavedStates {
    /// Keeping at most `max_bytes` of states (at most [`MAX_BYTES`]).
    pub fn new(max_bytes: usize) -> Self {
        SavedStates { states: Vec::new(), max_bytes: max_bytes.min(MAX_BYTES) }
    }

    /// The state sharing the longest token prefix with `prompt`, and that length.
    pub fn best(&self, prompt: &[LlamaToken]) -> Option<(usize, usize)> {
        self.states.iter().enumerate().map(|(i, s)| (i, common_prefix(&s.tokens, prompt))).max_by_key(|&(i, n)| (n, usize::MAX - i))
    }

    pub fn get(&mut self, i: usize) -> &Saved {
        let s = self.states.remove(i);
        self.states.insert(0, s);
        &self.states[0]
    }

    pub fn remove(&mut self, i: usize) {
        self.states.remove(i);
    }

    /// Whether saving `tokens` would add nothing: a state already holds them (or more after them).
    pub fn covers(&self, tokens: &[LlamaToken]) -> bool {
        self.states.iter().any(|s| s.tokens.starts_with(tokens))
    }

    /// Keeps `saved`, dropping the states it extends and the least recently used beyond the
    /// limits.
    pub fn put(&mut self, saved: Saved) {
        self.states.retain(|s| !saved.tokens.starts_with(&s.tokens));
        self.states.insert(0, saved);
        self.states.truncate(MAX_STATES);
        let mut bytes = 0;
        self.states.retain(|s| {
            bytes += s.state.byte_len();
            bytes <= self.max_bytes
        });
    }

    pub fn clear(&mut self) {
        self.states.clear();
    }
}

pub(super) fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
