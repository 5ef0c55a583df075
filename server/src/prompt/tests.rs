//! The plan with a unit-test tokenizer (one token per byte): layout, budget and stop rule
//! together, without a model. `tests/model_cache.rs` runs plans with the real tokenizer.

use std::cell::Cell;

use super::*;
use crate::context::{OutlineItem, Strategy};
use crate::model::fim::detect;
use crate::model::FimFormat;

/// One token per byte (ids from 1000, clear of the markers'), counting its calls.
#[derive(Default)]
struct Bytes {
    calls: Cell<usize>,
}

impl Tokenize for Bytes {
    fn tokenize(&self, text: &str) -> Vec<Token> {
        self.calls.set(self.calls.get() + 1);
        text.bytes().map(|b| 1000 + Token::from(b)).collect()
    }
    fn token_text(&self, token: Token) -> String {
        char::from((token - 1000) as u8).to_string()
    }
}

fn text_of(t: &Bytes, tokens: &[Token]) -> String {
    tokens.iter().map(|&id| t.token_text(id)).collect()
}

fn qwen(n_ctx: usize) -> VocabFacts {
    let fim = detect(Some((10, "<|fim_prefix|>")), Some((11, "<|fim_suffix|>")), Some((12, "<|fim_middle|>")));
    VocabFacts { fim, bos: Some(1), n_ctx, file_sep: None }
}

fn draft(max_prompt_tokens: u32) -> Draft {
    let item = |text: &str, start| OutlineItem { text: text.into(), start, order: start, full: None, pinned: false };
    Draft {
        context: ContextParts {
            strategy: Strategy::Scope,
            outline: vec![item("import os", 0), item("def helper(): ...", 20)],
            prefix_start: 40,
            prefix: "def f(x):\n    y = x + 1\n    return ".into(),
            suffix: "\n\ndef g():\n    pass\n".into(),
        },
        stop: StopRule::for_cursor("    return ", "\n\ndef g():\n    pass\n"),
        cross_file: None,
        purpose: Purpose::Complete,
        max_prompt_tokens,
        max_tokens: 64,
        fim: true,
    }
}

#[test]
fn fim_layout_with_sections() {
    let t = Bytes::default();
    let plan = PromptPlan::build(&draft(1024), &t, &qwen(4096), &TokenMemo::default());
    assert_eq!(plan.tokens[..2], [1, 10]);
    assert_eq!(*plan.tokens.last().unwrap(), 12);
    let kinds: Vec<Section> = plan.sections.iter().map(|(s, _)| *s).collect();
    use Section::*;
    assert_eq!(kinds, [Bos, Marker, Outline, Prefix, Marker, Suffix, Marker]);
    assert_eq!(text_of(&t, &plan.section(Outline)), "import os\ndef helper(): ...\n");
    assert_eq!(text_of(&t, &plan.section(Prefix)), "def f(x):\n    y = x + 1\n    return ");
    assert_eq!(text_of(&t, &plan.section(Suffix)), "\n\ndef g():\n    pass\n");
    assert_eq!(plan.max_tokens, 64);
}

#[test]
fn prefix_only_leaves_the_suffix_out() {
    let t = Bytes::default();
    let facts = VocabFacts { fim: FimFormat::PrefixOnly, bos: None, n_ctx: 4096, file_sep: None };
    let plan = PromptPlan::build(&draft(1024), &t, &facts, &TokenMemo::default());
    assert_eq!(plan.text.suffix, "");
    assert!(plan.section(Section::Suffix).is_empty() && plan.section(Section::Marker).is_empty());
    assert_eq!(text_of(&t, &plan.tokens), "import os\ndef helper(): ...\ndef f(x):\n    y = x + 1\n    return ");
}

/// `completion.fim: false` on a FIM model: the same tokens a prefix-only model gets (BOS
/// kept), no marker, no suffix.
#[test]
fn fim_off_lays_a_fim_model_out_prefix_only() {
    let t = Bytes::default();
    let mut off = draft(1024);
    off.fim = false;
    let plan = PromptPlan::build(&off, &t, &qwen(4096), &TokenMemo::default());
    assert!(plan.section(Section::Suffix).is_empty() && plan.section(Section::Marker).is_empty());
    assert_eq!(plan.tokens[0], 1);
    assert_eq!(text_of(&t, &plan.tokens[1..]), "import os\ndef helper(): ...\ndef f(x):\n    y = x + 1\n    return ");
}

/// The budget, once: the answer fits after the prompt in the context, the suffix keeps its
/// first tokens within its share, the prefix its last ones (the cursor's end), and a prompt
/// over the room after the line cut is cut in tokens.
#[test]
fn a_small_context_cuts_the_far_ends() {
    let t = Bytes::default();
    for n_ctx in [100, 120, 160] {
        let plan = PromptPlan::build(&draft(1024), &t, &qwen(n_ctx), &TokenMemo::default());
        assert_eq!(plan.max_tokens, (n_ctx / 2).min(64));
        assert!(plan.tokens.len() + plan.max_tokens < n_ctx, "{n_ctx}: {} + {}", plan.tokens.len(), plan.max_tokens);
        let prefix = text_of(&t, &plan.section(Section::Prefix));
        assert!(draft(0).context.prefix.ends_with(&prefix), "{n_ctx}: {prefix:?}");
        assert_eq!(n_ctx == 100, prefix.len() < draft(0).context.prefix.len(), "{n_ctx}: {prefix:?}");
        let suffix = text_of(&t, &plan.section(Section::Suffix));
        assert!(suffix.len() <= budget::limits(n_ctx, 1024, 64).text * 15 / 100, "{n_ctx}: {suffix:?}");
        assert!("\n\ndef g():\n    pass\n".starts_with(&suffix), "{n_ctx}: {suffix:?}");
    }
    // One long line before the cursor: the line cut keeps it whole, the token cut its end.
    let mut long = draft(1024);
    long.context.prefix = format!("x = [{}", "1, ".repeat(200));
    let plan = PromptPlan::build(&long, &t, &qwen(256), &TokenMemo::default());
    assert_eq!(plan.tokens.len(), 256 - 64 - 1); // the context less the answer and one token
    assert!(text_of(&t, &plan.section(Section::Prefix)).ends_with("1, 1, "));
}

#[test]
fn the_stop_predicate_is_the_stop_rule_and_its_key_tells_rules_apart() {
    let t = Bytes::default();
    let facts = qwen(4096);
    let memo = TokenMemo::default();
    let a = PromptPlan::build(&draft(1024), &t, &facts, &memo).into_prompt();
    let b = PromptPlan::build(&draft(1024), &t, &facts, &memo).into_prompt();
    let mut single = draft(1024);
    single.stop = single.stop.single_line();
    let c = PromptPlan::build(&single, &t, &facts, &memo).into_prompt();
    assert_eq!(a.tokens, c.tokens);
    assert_eq!(a.stop_key, b.stop_key);
    assert_ne!(a.stop_key, c.stop_key);
    let generated = "x + 1\n";
    assert_eq!((a.stop)(generated), None);
    assert_eq!((a.stop)(generated), draft(0).stop.check(generated));
    assert_eq!((c.stop)(generated), Some(5));
}

/// Lines are tokenized once and remembered; the outline is tokenized again only when it
/// changes; counts from the memo are the tokenizer's.
#[test]
fn the_memo_tokenizes_each_line_once() {
    let t = Bytes::default();
    let memo = TokenMemo::default();
    let first = PromptPlan::build(&draft(1024), &t, &qwen(4096), &memo);
    let calls = t.calls.get();
    let mut typed = draft(1024);
    typed.context.prefix.push('y');
    let second = PromptPlan::build(&typed, &t, &qwen(4096), &memo);
    // The cursor's changed line counted, the prefix and suffix tokenized: three calls.
    assert_eq!(t.calls.get() - calls, 3);
    assert_eq!(first.section(Section::Outline), second.section(Section::Outline));
    let mut m = memo.0.lock().unwrap();
    assert_eq!(m.count(&t, "a\nbc\n"), 5);
}

/// Through the trait object the model thread gets: the closure builds the same tokens.
#[test]
fn the_request_builds_the_plan_when_the_model_runs_it() {
    let t = Bytes::default();
    let facts = qwen(4096);
    let want = PromptPlan::build(&draft(1024), &t, &facts, &TokenMemo::default());
    let request = draft(1024).into_request(Arc::default(), CancelFlag::new());
    let got = (request.prompt)(&t as &dyn Tokenize, &facts);
    assert_eq!(got.tokens, want.tokens);
    assert_eq!(got.max_tokens, want.max_tokens);
}

fn cross_file() -> CrossFile {
    use crate::context::Related;
    let def = |path: &str, line, text: &str| Related { path: path.into(), text: text.into(), line, recent: false };
    CrossFile {
        path: "pkg/app.py".into(),
        comment: "#",
        snippets: vec![
            def("pkg/util.py", 4, "def slug(text: str, sep: str = '-') -> str: ..."),
            def("pkg/models.py", 1, "class User:\n    def name(self) -> str: ..."),
            def("pkg/util.py", 1, "def clean(x): ..."),
        ],
        laid_out: Default::default(),
    }
}

/// The cross-file section comes right after BOS, before the FIM prefix marker and the outline,
/// within its share of the budget; the same draft without it lays out what it always did.
#[test]
fn the_cross_file_section_comes_first_within_its_share() {
    let t = Bytes::default();
    let mut with = draft(1024);
    with.cross_file = Some(cross_file());
    let plan = PromptPlan::build(&with, &t, &qwen(4096), &TokenMemo::default());
    use Section::*;
    let kinds: Vec<Section> = plan.sections.iter().map(|(s, _)| *s).collect();
    assert_eq!(kinds, [Bos, CrossFile, Marker, Outline, Prefix, Marker, Suffix, Marker]);
    assert_eq!(
        text_of(&t, &plan.section(CrossFile)),
        "# path: pkg/models.py\nclass User:\n    def name(self) -> str: ...\n\
         # path: pkg/util.py\ndef clean(x): ...\ndef slug(text: str, sep: str = '-') -> str: ...\n\
         # path: pkg/app.py\n"
    );
    assert_eq!(plan.cross_file, text_of(&t, &plan.section(CrossFile)));
    let without = PromptPlan::build(&draft(1024), &t, &qwen(4096), &TokenMemo::default());
    assert_eq!(plan.tokens[plan.tokens.len() - without.tokens.len() + 1..], without.tokens[1..]);
    // A small budget keeps the most wanted snippets only; a tiny one none (it goes first).
    let mut small = with.clone();
    small.max_prompt_tokens = 500;
    let kept = PromptPlan::build(&small, &t, &qwen(4096), &TokenMemo::default());
    assert!(kept.section(CrossFile).len() <= budget::cross_file_room(496), "{}", kept.cross_file);
    assert!(kept.cross_file.contains("def slug") && !kept.cross_file.contains("class User"), "{}", kept.cross_file);
    // The draft's section is told what the plan laid out: the budget's cut, not what it offered.
    assert_eq!(small.cross_file.as_ref().unwrap().laid_out.get(), kept.cross_file);
    let mut tiny = with.clone();
    tiny.max_prompt_tokens = 300;
    assert!(PromptPlan::build(&tiny, &t, &qwen(4096), &TokenMemo::default()).section(CrossFile).is_empty());
}

/// Typing inside the scope changes the prefix only: the section's tokens stay the same, so
/// their KV entries are reused; the head-only plan is exactly the start of every full plan.
#[test]
fn the_section_stays_while_typing_and_the_head_is_its_start() {
    let t = Bytes::default();
    let memo = TokenMemo::default();
    let mut a = draft(1024);
    a.cross_file = Some(cross_file());
    let mut b = a.clone();
    b.context.prefix.push_str("y +");
    let (pa, pb) = (PromptPlan::build(&a, &t, &qwen(4096), &memo), PromptPlan::build(&b, &t, &qwen(4096), &memo));
    assert_eq!(pa.section(Section::CrossFile), pb.section(Section::CrossFile));
    let mut head = a.clone();
    head.purpose = Purpose::Head;
    let h = PromptPlan::build(&head, &t, &qwen(4096), &memo);
    assert_eq!(h.max_tokens, 0);
    assert!(h.tokens.len() > 1 && pa.tokens.starts_with(&h.tokens) && pb.tokens.starts_with(&h.tokens));
    // Where the cursor rests: the whole prompt, no answer.
    let mut whole = a.clone();
    whole.purpose = Purpose::Prompt;
    let w = PromptPlan::build(&whole, &t, &qwen(4096), &memo);
    assert_eq!((w.tokens, w.max_tokens), (pa.tokens.clone(), 0));
    let mut nothing = draft(1024);
    nothing.purpose = Purpose::Head;
    assert!(PromptPlan::build(&nothing, &t, &qwen(4096), &memo).tokens.is_empty());
}

/// [`Bytes`] read through another view, as the endpoint's redacting tokenizer is: `x` becomes
/// `#` before tokenizing.
struct Masked;

impl Tokenize for Masked {
    fn tokenize(&self, text: &str) -> Vec<Token> {
        Bytes::default().tokenize(&text.replace('x', "#"))
    }
    fn token_text(&self, token: Token) -> String {
        Bytes::default().token_text(token)
    }
    fn view(&self) -> u64 {
        crate::model::REDACTED_VIEW
    }
}

#[test]
fn tokens_remembered_under_one_view_are_not_reused_under_another() {
    let mut d = draft(1024);
    d.context.outline[0].text = "import x".into();
    let memo = TokenMemo::default();
    let plain = PromptPlan::build(&d, &Bytes::default(), &qwen(4096), &memo);
    assert!(text_of(&Bytes::default(), &plain.tokens).contains("import x"));
    // The same memo, the masking view: no token of the plain text's outline comes back.
    let masked = PromptPlan::build(&d, &Masked, &qwen(4096), &memo);
    assert_eq!(masked, PromptPlan::build(&d, &Masked, &qwen(4096), &TokenMemo::default()), "as with a memo of its own");
    let text = text_of(&Bytes::default(), &masked.tokens);
    assert!(!text.contains('x') && text.contains("import #"), "{text}");
}
