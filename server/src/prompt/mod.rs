//! Prompt formats: fill-in-the-middle detection from the model's vocabulary, and assembly of
//! prompt tokens in the order the model family was trained on.
//!
//! Works on plain token ids (`i32`) so it is tested without any model.

use std::fmt;

/// A token id as llama.cpp numbers it.
pub type Token = i32;

/// Model families whose FIM markers we recognise by their text in the vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FimFamily {
    /// `<|fim_prefix|>` … : Qwen2.5-Coder, CodeGemma.
    Qwen,
    /// `<fim_prefix>` … : StarCoder, StarCoder2, SantaCoder.
    StarCoder,
    /// `<PRE>` `<SUF>` `<MID>`: CodeLlama.
    CodeLlama,
    /// `<｜fim▁begin｜>` `<｜fim▁hole｜>` `<｜fim▁end｜>`: DeepSeek-Coder.
    DeepSeek,
    /// `[PREFIX]` `[SUFFIX]`: Codestral, trained suffix first.
    Codestral,
    /// FIM ids declared in the GGUF with marker texts we do not know: prefix–suffix–middle.
    Generic,
}

/// Where the suffix goes relative to the prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FimOrder {
    /// `PRE prefix SUF suffix MID`: the suffix is re-decoded when the prefix changes.
    PrefixSuffixMiddle,
    /// `SUF suffix PRE prefix [MID]`: the suffix stays cached while the user types.
    SuffixPrefixMiddle,
}

/// How prompts are built for one model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptFormat {
    /// No FIM tokens: the prompt is the text before the cursor.
    PrefixOnly,
    Fim { family: FimFamily, order: FimOrder, pre: Token, suf: Token, mid: Option<Token> },
}

impl fmt::Display for PromptFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PromptFormat::PrefixOnly => f.write_str("prefix-only (no FIM tokens)"),
            PromptFormat::Fim { family, order, .. } => {
                let order = match order {
                    FimOrder::PrefixSuffixMiddle => "PSM",
                    FimOrder::SuffixPrefixMiddle => "SPM",
                };
                write!(f, "FIM {family:?} ({order})")
            }
        }
    }
}

/// A FIM marker: its id and its text in the vocabulary.
pub type Marker<'a> = Option<(Token, &'a str)>;

/// Detects the prompt format from the FIM markers llama.cpp reports for the vocabulary
/// (`llama_vocab_fim_pre/suf/mid`; absent ones are `None`).
pub fn detect(pre: Marker<'_>, suf: Marker<'_>, mid: Marker<'_>) -> PromptFormat {
    let (Some((pre, pre_text)), Some((suf, _))) = (pre, suf) else {
        return PromptFormat::PrefixOnly;
    };
    let text = pre_text.trim_start_matches('▁').trim();
    let family = match text {
        "<|fim_prefix|>" => FimFamily::Qwen,
        "<fim_prefix>" | "<fim-prefix>" => FimFamily::StarCoder,
        "<PRE>" => FimFamily::CodeLlama,
        "<｜fim▁begin｜>" | "<|fim▁begin|>" => FimFamily::DeepSeek,
        "[PREFIX]" => FimFamily::Codestral,
        _ => FimFamily::Generic,
    };
    let mid = mid.map(|(id, _)| id);
    if family != FimFamily::Codestral && mid.is_none() {
        // Prefix–suffix order needs a middle marker to say where generation starts.
        return PromptFormat::PrefixOnly;
    }
    let order = if family == FimFamily::Codestral {
        FimOrder::SuffixPrefixMiddle
    } else {
        FimOrder::PrefixSuffixMiddle
    };
    PromptFormat::Fim { family, order, pre, suf, mid }
}

impl PromptFormat {
    /// Assembles prompt tokens from the tokenized prefix and suffix, keeping at most `budget`
    /// tokens: the prefix loses its oldest tokens first, the suffix its last ones, and the
    /// suffix never takes more than a quarter of the budget.
    pub fn assemble(&self, bos: Option<Token>, prefix: &[Token], suffix: &[Token], budget: usize) -> Vec<Token> {
        let mut out = Vec::with_capacity(budget.min(prefix.len() + suffix.len() + 4));
        out.extend(bos);
        match *self {
            PromptFormat::PrefixOnly => {
                let room = budget.saturating_sub(out.len());
                out.extend_from_slice(&prefix[prefix.len().saturating_sub(room)..]);
            }
            PromptFormat::Fim { order, pre, suf, mid, .. } => {
                let markers = 2 + usize::from(mid.is_some());
                let room = budget.saturating_sub(out.len() + markers);
                let suffix = &suffix[..suffix.len().min(room / 4).min(suffix.len())];
                let room = room - suffix.len();
                let prefix = &prefix[prefix.len().saturating_sub(room)..];
                match order {
                    FimOrder::PrefixSuffixMiddle => {
                        out.push(pre);
                        out.extend_from_slice(prefix);
                        out.push(suf);
                        out.extend_from_slice(suffix);
                    }
                    FimOrder::SuffixPrefixMiddle => {
                        out.push(suf);
                        out.extend_from_slice(suffix);
                        out.push(pre);
                        out.extend_from_slice(prefix);
                    }
                }
                out.extend(mid);
            }
        }
        out
    }

    /// Whether the suffix is part of the prompt at all.
    pub fn uses_suffix(&self) -> bool {
        matches!(self, PromptFormat::Fim { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fim(pre: &str, suf: &str, mid: &str) -> PromptFormat {
        detect(Some((10, pre)), Some((11, suf)), Some((12, mid)))
    }

    #[test]
    fn detects_families_by_marker_text() {
        let family = |f: PromptFormat| match f {
            PromptFormat::Fim { family, .. } => Some(family),
            PromptFormat::PrefixOnly => None,
        };
        assert_eq!(family(fim("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")), Some(FimFamily::Qwen));
        assert_eq!(family(fim("<fim_prefix>", "<fim_suffix>", "<fim_middle>")), Some(FimFamily::StarCoder));
        assert_eq!(family(fim("▁<PRE>", "▁<SUF>", "▁<MID>")), Some(FimFamily::CodeLlama));
        assert_eq!(family(fim("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>")), Some(FimFamily::DeepSeek));
        assert_eq!(family(fim("<repo_name>", "<reponame>", "<filename>")), Some(FimFamily::Generic));
        let codestral = detect(Some((10, "[PREFIX]")), Some((11, "[SUFFIX]")), None);
        assert_eq!(
            codestral,
            PromptFormat::Fim { family: FimFamily::Codestral, order: FimOrder::SuffixPrefixMiddle, pre: 10, suf: 11, mid: None }
        );
    }

    #[test]
    fn no_markers_means_prefix_only() {
        assert_eq!(detect(None, None, None), PromptFormat::PrefixOnly);
        assert_eq!(detect(Some((1, "<fim_prefix>")), None, None), PromptFormat::PrefixOnly);
        assert_eq!(detect(Some((1, "<fim_prefix>")), Some((2, "<fim_suffix>")), None), PromptFormat::PrefixOnly);
    }

    #[test]
    fn psm_and_spm_layouts() {
        let psm = fim("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>");
        assert_eq!(psm.assemble(Some(1), &[100, 101], &[200], 64), vec![1, 10, 100, 101, 11, 200, 12]);
        let spm = detect(Some((10, "[PREFIX]")), Some((11, "[SUFFIX]")), None);
        assert_eq!(spm.assemble(Some(1), &[100, 101], &[200], 64), vec![1, 11, 200, 10, 100, 101]);
        assert_eq!(PromptFormat::PrefixOnly.assemble(None, &[100, 101], &[200], 64), vec![100, 101]);
    }

    #[test]
    fn budget_trims_old_prefix_and_far_suffix() {
        let prefix: Vec<Token> = (100..200).collect();
        let suffix: Vec<Token> = (300..400).collect();
        let psm = fim("<fim_prefix>", "<fim_suffix>", "<fim_middle>");
        let out = psm.assemble(None, &prefix, &suffix, 43);
        assert_eq!(out.len(), 43);
        // 40 tokens of room: 10 for the suffix (its first ones), 30 for the prefix (its last ones)
        assert_eq!(&out[..3], &[10, 170, 171]);
        assert_eq!(out[31], 11);
        assert_eq!(&out[32..34], &[300, 301]);
        assert_eq!(*out.last().unwrap(), 12);
        let out = PromptFormat::PrefixOnly.assemble(Some(1), &prefix, &[], 11);
        assert_eq!(out, [1, 190, 191, 192, 193, 194, 195, 196, 197, 198, 199]);
    }
}
