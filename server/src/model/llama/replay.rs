//! The logits kept with the KV cache: for each cached position that was decoded with its logits,
//! the few most likely next tokens and their raw logits. Where a position's result does not
//! depend on its batch, these are what decoding that position again would give, so a later
//! generation over the same tokens (the next key, when the user typed what was suggested) picks
//! its next token from them under its own masks and penalties, without a decode, as long as the
//! pick is certain: the winner beats every logit left out.

use std::collections::VecDeque;

use llama_cpp_2::token::LlamaToken;

/// Tokens kept per position: enough that a lead, a blank guard or a repetition penalty rarely
/// pushes the pick past them (then the position is decoded again).
const KEPT: usize = 16;

/// A position's most likely next tokens, highest logit first, and the highest logit of every
/// token not among them (at most the last kept one's).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Top {
    kept: Vec<(f32, i32)>,
}

impl Top {
    /// The [`KEPT`] highest of `logits` (ids are indices), ties to the lower id as greedy
    /// sampling breaks them. `None` when a logit is not a number (nothing certain then).
    pub fn of(logits: &[f32]) -> Option<Top> {
        let mut kept: Vec<(f32, i32)> = Vec::with_capacity(KEPT + 1);
        for (c, chunk) in logits.chunks(64).enumerate() {
            // Once full, a chunk with nothing above the lowest kept (and no NaN, which fails
            // every comparison) is passed over whole: one vectorised test of 64 logits.
            if kept.len() == KEPT {
                let low = kept[KEPT - 1].0;
                if chunk.iter().fold(true, |all, &v| all & (v <= low)) {
                    continue;
                }
            }
            for (i, &v) in chunk.iter().enumerate() {
                if v.is_nan() {
                    return None;
                }
                if kept.len() == KEPT && v <= kept[KEPT - 1].0 {
                    continue;
                }
                // After every kept one at least as high: a later id loses a tie.
                let at = kept.partition_point(|&(k, _)| k >= v);
                kept.insert(at, (v, (c * 64 + i) as i32));
                kept.truncate(KEPT);
            }
        }
        Some(Top { kept })
    }

    /// What greedy sampling picks here, with `allowed` masking tokens out and `recent` applying
    /// the repetition penalty — when certain: the pick must beat the highest logit left out,
    /// which masks and a penalty of at least 1 can only lower. `None`: decode the position again.
    pub fn pick(&self, allowed: impl Fn(LlamaToken) -> bool, recent: &Recent) -> Option<LlamaToken> {
        let left_out = if self.kept.len() < KEPT { f32::NEG_INFINITY } else { self.kept[KEPT - 1].0 };
        let mut best: Option<(f32, i32)> = None;
        for &(raw, id) in &self.kept {
            if !allowed(LlamaToken(id)) {
                continue;
            }
            let v = recent.penalised(LlamaToken(id), raw)?;
            if best.is_none_or(|(b, bid)| v > b || (v == b && id < bid)) {
                best = Some((v, id));
            }
        }
        best.filter(|&(v, _)| v > left_out).map(|(_, id)| LlamaToken(id))
    }
}

/// The repetition penalty as llama.cpp's penalties sampler applies it, for [`Top::pick`]: the
/// last `last_n` tokens accepted in this generation, each seen lowering its logit (divided by
/// the penalty when positive, multiplied when not; frequency and presence penalties are 0).
pub(super) struct Recent {
    last_n: usize,
    penalty: f32,
    tokens: VecDeque<LlamaToken>,
}

impl Recent {
    pub fn new(last_n: u32, penalty: f32) -> Self {
        Recent { last_n: last_n as usize, penalty, tokens: VecDeque::new() }
    }

    fn off(&self) -> bool {
        self.last_n == 0 || self.penalty == 1.0
    }

    /// As the sampler accepts `token`.
    pub fn accept(&mut self, token: LlamaToken) {
        if self.off() {
            return;
        }
        if self.tokens.len() >= self.last_n {
            self.tokens.pop_front();
        }
        self.tokens.push_back(token);
    }

    /// `raw` as the sampler leaves it for `token`; `None` where a penalty below 1 would raise a
    /// logit (a token left out could then win).
    fn penalised(&self, token: LlamaToken, raw: f32) -> Option<f32> {
        if self.off() || !self.tokens.contains(&token) {
            return Some(raw);
        }
        if self.penalty < 1.0 {
            return None;
        }
        Some(if raw <= 0.0 { raw * self.penalty } else { raw / self.penalty })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logits(n: usize, high: &[(usize, f32)]) -> Vec<f32> {
        let mut v: Vec<f32> = (0..n).map(|i| -((i % 97) as f32) / 10.0 - 5.0).collect();
        for &(i, x) in high {
            v[i] = x;
        }
        v
    }

    #[test]
    fn the_top_holds_the_highest_logits_with_ties_to_the_lower_id() {
        let v = logits(1000, &[(700, 9.0), (3, 9.0), (500, 8.0)]);
        let top = Top::of(&v).unwrap();
        assert_eq!(top.kept.len(), KEPT);
        assert_eq!(top.kept[..3], [(9.0, 3), (9.0, 700), (8.0, 500)]);
        assert!(top.kept.windows(2).all(|w| w[0].0 >= w[1].0));
        assert!(Top::of(&[1.0, f32::NAN]).is_none());
    }

    #[test]
    fn the_top_is_the_sorted_vocabulary_s_head_across_the_chunks_passed_over() {
        // Values repeat (ties across chunks), the highest ones late and at chunk edges.
        for seed in 0..20u32 {
            let v: Vec<f32> = (0..5000u32).map(|i| ((i.wrapping_mul(2654435761).wrapping_add(seed * 7919)) >> 20) as f32 / 64.0).collect();
            let mut all: Vec<(f32, i32)> = v.iter().enumerate().map(|(i, &x)| (x, i as i32)).collect();
            all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            assert_eq!(Top::of(&v).unwrap().kept, all[..KEPT], "seed {seed}");
        }
        let mut v = vec![0.0f32; 640];
        v[63] = 5.0;
        v[64] = 5.0;
        v[639] = 6.0;
        let top = Top::of(&v).unwrap();
        assert_eq!(top.kept[..3], [(6.0, 639), (5.0, 63), (5.0, 64)]);
        v[300] = f32::NAN;
        assert!(Top::of(&v).is_none(), "a NaN in a chunk passed over is seen");
    }

    #[test]
    fn a_pick_is_greedy_sampling_when_certain_and_none_otherwise() {
        let v = logits(1000, &[(700, 9.0), (500, 8.0), (42, 2.0)]);
        let top = Top::of(&v).unwrap();
        let none = Recent::new(64, 1.1);
        assert_eq!(top.pick(|_| true, &none), Some(LlamaToken(700)));
        // Masked: the next allowed one, still above everything left out.
        assert_eq!(top.pick(|t| t.0 != 700, &none), Some(LlamaToken(500)));
        // Only tokens left out are allowed: not certain.
        assert_eq!(top.pick(|t| t.0 == 999, &none), None);
        // A penalised winner: 9.0 / 1.1 = 8.18 still beats 8.0; at 1.2 it does not.
        let mut recent = Recent::new(64, 1.1);
        recent.accept(LlamaToken(700));
        assert_eq!(top.pick(|_| true, &recent), Some(LlamaToken(700)));
        let mut recent = Recent::new(64, 1.2);
        recent.accept(LlamaToken(700));
        assert_eq!(top.pick(|_| true, &recent), Some(LlamaToken(500)));
        // The window: the penalised token left it.
        let mut recent = Recent::new(2, 1.2);
        for t in [700, 1, 2] {
            recent.accept(LlamaToken(t));
        }
        assert_eq!(top.pick(|_| true, &recent), Some(LlamaToken(700)));
        // A penalty below 1 raises logits: never certain for a seen token.
        let mut recent = Recent::new(64, 0.9);
        recent.accept(LlamaToken(700));
        assert_eq!(top.pick(|_| true, &recent), None);
    }

    #[test]
    fn a_pick_just_above_what_was_left_out_is_certain_and_one_at_it_is_not() {
        // 20 tokens at 1.0 but the first: the 16th kept is 1.0, as high as the 4 left out.
        let mut v = vec![1.0f32; 20];
        v[0] = 3.0;
        let top = Top::of(&v).unwrap();
        assert_eq!(top.pick(|_| true, &Recent::new(0, 1.0)), Some(LlamaToken(0)));
        assert_eq!(top.pick(|t| t.0 != 0, &Recent::new(0, 1.0)), None, "tied with tokens left out");
    }
}

