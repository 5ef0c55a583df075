//! Token layout per FIM family: where BOS, the markers, the text before the cursor and the text
//! after it go, in the order the family was trained on. The budget has already cut the text.

use std::ops::Range;

use crate::model::fim::{FimFormat, FimOrder};
use crate::model::Token;

/// What a run of a prompt's tokens is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Bos,
    /// What the code uses from other files, with a path header per file: before everything
    /// but BOS, so it stays cached while the text after it changes.
    CrossFile,
    /// A FIM marker (prefix, suffix or middle).
    Marker,
    /// The outline of the rest of the file, before the prefix.
    Outline,
    /// The text before the cursor.
    Prefix,
    /// The text after the cursor.
    Suffix,
}

/// Prompt tokens and what each run of them is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    pub tokens: Vec<Token>,
    /// Non-empty runs, in token order.
    pub sections: Vec<(Section, Range<usize>)>,
}

impl Layout {
    fn push(&mut self, section: Section, tokens: &[Token]) {
        if tokens.is_empty() {
            return;
        }
        let start = self.tokens.len();
        self.tokens.extend_from_slice(tokens);
        self.sections.push((section, start..self.tokens.len()));
    }
}

/// Tokens the layout adds to the text for `format`: BOS and the FIM markers.
pub fn overhead(format: &FimFormat, bos: Option<Token>) -> usize {
    usize::from(bos.is_some())
        + match format {
            FimFormat::PrefixOnly => 0,
            FimFormat::Fim { mid, .. } => 2 + usize::from(mid.is_some()),
        }
}

/// The head every prompt of a file starts with: BOS and the cross-file section.
pub fn head(bos: Option<Token>, cross_file: &[Token]) -> Layout {
    let mut out = Layout::default();
    if let Some(bos) = bos {
        out.push(Section::Bos, &[bos]);
    }
    out.push(Section::CrossFile, cross_file);
    out
}

/// Lays out the cross-file section (tokens made by `prompt::cross_file`), then the tokens
/// before the cursor (`before`, whose first `outline` tokens are the outline) and after it
/// (`suffix`, left out without FIM).
pub fn lay_out(format: &FimFormat, bos: Option<Token>, cross_file: &[Token], before: &[Token], outline: usize, suffix: &[Token]) -> Layout {
    let mut out = head(bos, cross_file);
    let (outline, prefix) = before.split_at(outline.min(before.len()));
    match *format {
        FimFormat::PrefixOnly => {
            out.push(Section::Outline, outline);
            out.push(Section::Prefix, prefix);
        }
        FimFormat::Fim { order, pre, suf, mid, .. } => {
            match order {
                FimOrder::PrefixSuffixMiddle => {
                    out.push(Section::Marker, &[pre]);
                    out.push(Section::Outline, outline);
                    out.push(Section::Prefix, prefix);
                    out.push(Section::Marker, &[suf]);
                    out.push(Section::Suffix, suffix);
                }
                FimOrder::SuffixPrefixMiddle => {
                    out.push(Section::Marker, &[suf]);
                    out.push(Section::Suffix, suffix);
                    out.push(Section::Marker, &[pre]);
                    out.push(Section::Outline, outline);
                    out.push(Section::Prefix, prefix);
                }
            }
            if let Some(mid) = mid {
                out.push(Section::Marker, &[mid]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fim::detect;

    fn psm() -> FimFormat {
        detect(Some((10, "<|fim_prefix|>")), Some((11, "<|fim_suffix|>")), Some((12, "<|fim_middle|>")))
    }

    #[test]
    fn psm_and_spm_layouts() {
        assert_eq!(lay_out(&psm(), Some(1), &[], &[100, 101], 0, &[200]).tokens, vec![1, 10, 100, 101, 11, 200, 12]);
        let spm = detect(Some((10, "[PREFIX]")), Some((11, "[SUFFIX]")), None);
        assert_eq!(lay_out(&spm, Some(1), &[], &[100, 101], 0, &[200]).tokens, vec![1, 11, 200, 10, 100, 101]);
        assert_eq!(lay_out(&FimFormat::PrefixOnly, None, &[], &[100, 101], 0, &[200]).tokens, vec![100, 101]);
        assert_eq!(overhead(&psm(), Some(1)), 4);
        // The cross-file section comes right after BOS, before any marker, in both orders.
        assert_eq!(lay_out(&psm(), Some(1), &[7, 8], &[100], 0, &[200]).tokens, vec![1, 7, 8, 10, 100, 11, 200, 12]);
        assert_eq!(lay_out(&spm, Some(1), &[7, 8], &[100], 0, &[200]).tokens, vec![1, 7, 8, 11, 200, 10, 100]);
        assert_eq!(overhead(&spm, None), 2);
        assert_eq!(overhead(&FimFormat::PrefixOnly, Some(1)), 1);
    }

    #[test]
    fn sections_say_what_each_run_is() {
        let l = lay_out(&psm(), None, &[], &[50, 51, 100], 2, &[]);
        assert_eq!(l.tokens, vec![10, 50, 51, 100, 11, 12]);
        assert_eq!(
            l.sections,
            vec![(Section::Marker, 0..1), (Section::Outline, 1..3), (Section::Prefix, 3..4), (Section::Marker, 4..5), (Section::Marker, 5..6)]
        );
    }
}
