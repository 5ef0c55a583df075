//! The fill-in-the-middle markers of a vocabulary: which family they are (from their text) and
//! the order that family was trained on. What the model exposes about itself; the prompt plan
//! (`crate::prompt`) lays tokens out from it.
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

/// The fill-in-the-middle format of a vocabulary: none, or a family with its marker tokens and
/// the order it was trained on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FimFormat {
    /// No FIM tokens: the prompt is the text before the cursor.
    PrefixOnly,
    Fim { family: FimFamily, order: FimOrder, pre: Token, suf: Token, mid: Option<Token> },
}

impl fmt::Display for FimFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FimFormat::PrefixOnly => f.write_str("prefix-only (no FIM tokens)"),
            FimFormat::Fim { family, order, .. } => {
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
pub fn detect(pre: Marker<'_>, suf: Marker<'_>, mid: Marker<'_>) -> FimFormat {
    let (Some((pre, pre_text)), Some((suf, _))) = (pre, suf) else {
        return FimFormat::PrefixOnly;
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
        return FimFormat::PrefixOnly;
    }
    let order = if family == FimFamily::Codestral {
        FimOrder::SuffixPrefixMiddle
    } else {
        FimOrder::PrefixSuffixMiddle
    };
    FimFormat::Fim { family, order, pre, suf, mid }
}

impl FimFormat {
    /// Whether the suffix is part of a prompt at all.
    pub fn uses_suffix(&self) -> bool {
        matches!(self, FimFormat::Fim { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fim(pre: &str, suf: &str, mid: &str) -> FimFormat {
        detect(Some((10, pre)), Some((11, suf)), Some((12, mid)))
    }

    #[test]
    fn detects_families_by_marker_text() {
        let family = |f: FimFormat| match f {
            FimFormat::Fim { family, .. } => Some(family),
            FimFormat::PrefixOnly => None,
        };
        assert_eq!(family(fim("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")), Some(FimFamily::Qwen));
        assert_eq!(family(fim("<fim_prefix>", "<fim_suffix>", "<fim_middle>")), Some(FimFamily::StarCoder));
        assert_eq!(family(fim("▁<PRE>", "▁<SUF>", "▁<MID>")), Some(FimFamily::CodeLlama));
        assert_eq!(family(fim("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>")), Some(FimFamily::DeepSeek));
        assert_eq!(family(fim("<repo_name>", "<reponame>", "<filename>")), Some(FimFamily::Generic));
        let codestral = detect(Some((10, "[PREFIX]")), Some((11, "[SUFFIX]")), None);
        assert_eq!(
            codestral,
            FimFormat::Fim { family: FimFamily::Codestral, order: FimOrder::SuffixPrefixMiddle, pre: 10, suf: 11, mid: None }
        );
    }

    #[test]
    fn no_markers_means_prefix_only() {
        assert_eq!(detect(None, None, None), FimFormat::PrefixOnly);
        assert_eq!(detect(Some((1, "<fim_prefix>")), None, None), FimFormat::PrefixOnly);
        assert_eq!(detect(Some((1, "<fim_prefix>")), Some((2, "<fim_suffix>")), None), FimFormat::PrefixOnly);
    }
}
