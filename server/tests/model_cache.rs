//! The model thread on the real test model: KV-cache reuse gives the same suggestion as a cold
//! start, and reuses what it should.

mod common;

use common::*;
use ghostline::config::Options;
use ghostline::engine::{Engine, Input, OwnedInput};
use ghostline::session::Session;
use ghostline::context::{ContextParts, CrossFile, OutlineItem, Related, Strategy};
use ghostline::model::{CancelFlag, GenerateError, GenerateRequest, ModelHandle, ModelStatus, Progress, Sampling, Tokenize, VocabFacts};
use ghostline::postprocess::StopRule;
use ghostline::prompt::{Draft, PromptPlan, Purpose, Section, TokenMemo};
use ghostline::syntax;

fn engine() -> Engine {
    let mut options = Options::default();
    options.model.path = Some(model());
    // Compare model outputs: no answers from the previous suggestion.
    options.completion.typed_ahead = Some(false);
    let config = options.resolve(None);
    Engine::new(ModelHandle::spawn(&config.model, Sampling::from(&config.completion)), config.completion)
}

/// The model thread on the FIM test model, loaded.
fn fim_model_thread() -> ModelHandle {
    let mut options = Options::default();
    options.model.path = Some(fim_model());
    let config = options.resolve(None);
    let handle = ModelHandle::spawn(&config.model, Sampling::from(&config.completion));
    assert!(matches!(rt().block_on(handle.wait_loaded()), ModelStatus::Ready(_)));
    handle
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Every prefix of a typing session inside one function, completed warm (one engine, cache
/// kept from keystroke to keystroke) and cold (a fresh engine per keystroke): same text.
#[test]
fn warm_and_cold_caches_give_the_same_suggestions() {
    let (text, line, _) = fixture_with_cursor("e2e/shapes.py");
    let spec = syntax::by_language_id("python").unwrap();
    let line_start: usize = text.split('\n').take(line as usize).map(|l| l.len() + 1).sum();
    let typed = "        return 2 * math.pi * self.";
    let rt = rt();
    let warm = engine();
    assert!(matches!(rt.block_on(warm.model.wait_loaded()), ModelStatus::Ready(_)));
    let mut reused_any = false;
    for n in [9, 16, 21, 26, typed.len()] {
        let doc = format!("{}{}{}", &text[..line_start], &typed[..n], &text[line_start..]);
        let tree = spec.parse(&doc);
        let input = Input { cross_file: None, text: &doc, cursor: line_start + n, syntax: Some((spec, &tree)) };
        let w = rt.block_on(warm.complete(input, CancelFlag::new())).unwrap();
        let cold = engine();
        let c = rt.block_on(cold.complete(input, CancelFlag::new())).unwrap();
        assert_eq!(w.text, c.text, "warm vs cold after typing {:?}", &typed[..n]);
        assert_eq!(c.timings.reused_tokens, 0);
        reused_any |= w.timings.reused_tokens > 0;
        assert!(w.timings.prefill_tokens <= c.timings.prefill_tokens);
    }
    assert!(reused_any, "the warm engine never reused its KV cache");
}

/// Typing what was suggested, one character at a time: each key's answer comes from the
/// logits kept with the KV cache for the tokens the last generation decoded (no decode where
/// the picks are certain), and is the answer a fresh engine decodes for the same text. The
/// default repetition penalty is on, so the picks apply it as the sampler does.
#[test]
fn typing_the_suggestion_is_answered_from_the_kept_logits_as_a_cold_start_answers() {
    let (text, line, _) = fixture_with_cursor("e2e/shapes.py");
    let spec = syntax::by_language_id("python").unwrap();
    let line_start: usize = text.split('\n').take(line as usize).map(|l| l.len() + 1).sum();
    let typed = "        return ";
    let rt = rt();
    let warm = engine();
    assert!(matches!(rt.block_on(warm.model.wait_loaded()), ModelStatus::Ready(_)));
    let at = |extra: &str| {
        let doc = format!("{}{typed}{extra}{}", &text[..line_start], &text[line_start..]);
        (doc, line_start + typed.len() + extra.len())
    };
    let (doc, cursor) = at("");
    let tree = spec.parse(&doc);
    let first = rt.block_on(warm.complete(Input { cross_file: None, text: &doc, cursor, syntax: Some((spec, &tree)) }, CancelFlag::new())).unwrap();
    let suggestion: Vec<char> = first.text.chars().collect();
    assert!(suggestion.len() >= 8, "a suggestion long enough to type: {:?}", first.text);
    assert_eq!(first.timings.replayed_tokens, 0, "nothing was cached after the prompt yet");
    let (mut replayed, mut without_decoding) = (0, 0);
    for n in 1..=8 {
        let extra: String = suggestion[..n].iter().collect();
        let (doc, cursor) = at(&extra);
        let tree = spec.parse(&doc);
        let input = Input { cross_file: None, text: &doc, cursor, syntax: Some((spec, &tree)) };
        let w = rt.block_on(warm.complete(input, CancelFlag::new())).unwrap();
        let cold = engine();
        let c = rt.block_on(cold.complete(input, CancelFlag::new())).unwrap();
        assert_eq!(w.text, c.text, "warm vs cold after typing {extra:?}");
        assert_eq!(c.timings.replayed_tokens, 0);
        replayed += w.timings.replayed_tokens;
        without_decoding += usize::from(w.timings.decode_passes == 0 && w.timings.prefill_tokens == 0);
    }
    // Then other text than the suggestion, where the lead masks the kept tokens it shares no
    // start with: the pick must follow the mask (or decode again), as a cold start does.
    for other in ["m", "self", "abs("] {
        let (doc, cursor) = at(other);
        let tree = spec.parse(&doc);
        let input = Input { cross_file: None, text: &doc, cursor, syntax: Some((spec, &tree)) };
        let w = rt.block_on(warm.complete(input, CancelFlag::new())).unwrap();
        let c = rt.block_on(engine().complete(input, CancelFlag::new())).unwrap();
        assert_eq!(w.text, c.text, "warm vs cold after typing {other:?}");
        // And the suggestion's start again, after the other text was decoded.
        let (doc, cursor) = at(&suggestion[..1].iter().collect::<String>());
        let tree = spec.parse(&doc);
        let input = Input { cross_file: None, text: &doc, cursor, syntax: Some((spec, &tree)) };
        let w = rt.block_on(warm.complete(input, CancelFlag::new())).unwrap();
        let c = rt.block_on(engine().complete(input, CancelFlag::new())).unwrap();
        assert_eq!(w.text, c.text, "warm vs cold after typing {other:?}, then the suggestion's start");
    }
    assert!(replayed >= 8, "typing the suggestion replayed {replayed} tokens in 8 keys");
    assert!(without_decoding >= 4, "{without_decoding} of 8 keys answered without a decode");
}

/// A request cancelled before the model thread takes it is not run, and the next one still
/// works from a consistent cache.
#[test]
fn cancellation_leaves_a_usable_cache() {
    let (text, line, col) = fixture_with_cursor("e2e/shapes.py");
    let spec = syntax::by_language_id("python").unwrap();
    let line_start: usize = text.split('\n').take(line as usize).map(|l| l.len() + 1).sum();
    let cursor = line_start + col as usize;
    let tree = spec.parse(&text);
    let input = Input { cross_file: None, text: &text, cursor, syntax: Some((spec, &tree)) };
    let rt = rt();
    let e = engine();
    let cancel = CancelFlag::new();
    cancel.cancel();
    assert!(rt.block_on(e.complete(input, cancel)).is_err());
    let a = rt.block_on(e.complete(input, CancelFlag::new())).unwrap();
    let b = rt.block_on(engine().complete(input, CancelFlag::new())).unwrap();
    assert_eq!(a.text, b.text);
}

/// A prompt decoded ahead that the KV cache already holds as the start of a longer one (the
/// file's head, coming after the whole prompt decoded where the cursor rests) decodes nothing
/// and drops nothing: the request at that cursor then re-decodes less than an aligned chunk,
/// with no saved state to restore.
#[test]
fn decoding_ahead_what_the_cache_holds_keeps_the_rest() {
    let (text, line, col) = fixture_with_cursor("e2e/shapes.py");
    let spec = syntax::by_language_id("python").unwrap();
    let line_start: usize = text.split('\n').take(line as usize).map(|l| l.len() + 1).sum();
    let tree = spec.parse(&text);
    let cross = CrossFile {
        path: "shapes.py".into(),
        comment: "#",
        snippets: vec![Related { path: "geometry.py".into(), text: "def circle_area(r: float) -> float: ...".into(), line: 3, recent: false }],
        ..Default::default()
    };
    let input = Input { cross_file: Some(&cross), text: &text, cursor: line_start + col as usize, syntax: Some((spec, &tree)) };
    let rt = rt();
    let e = engine();
    let decode = |purpose: Purpose| {
        let mut draft = e.draft(input);
        draft.purpose = purpose;
        rt.block_on(e.run(input, draft, CancelFlag::new())).unwrap().timings
    };
    let whole = decode(Purpose::Prompt);
    assert!(whole.prefill_tokens > 32 && whole.generated_tokens == 0, "{whole:?}");
    let head = decode(Purpose::Head);
    assert!(head.prompt_tokens > 1 && head.prefill_tokens == 0, "the head was decoded again: {head:?}");
    let asked = rt.block_on(e.complete(input, CancelFlag::new())).unwrap().timings;
    assert_eq!(asked.prompt_tokens, whole.prompt_tokens);
    assert!(asked.prefill_tokens < 32 && asked.restored_tokens == 0, "{asked:?}");
}

/// What is decoded ahead answers nobody (the head of a file on open, the prompt where the
/// cursor rests): it leaves the session's cross-file section as the last answer laid it out,
/// which the server reports with that answer (`ghostline/lastTimings`).
#[test]
fn decoding_ahead_leaves_the_answers_section_alone() {
    let (text, line, col) = fixture_with_cursor("e2e/shapes.py");
    let spec = syntax::by_language_id("python").unwrap();
    let line_start: usize = text.split('\n').take(line as usize).map(|l| l.len() + 1).sum();
    let cursor = line_start + col as usize;
    let tree = spec.parse(&text);
    let session = Session::default();
    let section = |name: &str, sig: &str| CrossFile {
        path: "shapes.py".into(),
        comment: "#",
        snippets: vec![Related { path: name.into(), text: sig.into(), line: 3, recent: false }],
        laid_out: session.laid_out(),
    };
    let asked = section("geometry.py", "def circle_area(r: float) -> float: ...");
    let rt = rt();
    let e = engine();
    assert!(matches!(rt.block_on(e.model.wait_loaded()), ModelStatus::Ready(_)));
    let input = Input { cross_file: Some(&asked), text: &text, cursor, syntax: Some((spec, &tree)) };
    rt.block_on(e.complete_in(&session, input, CancelFlag::new())).unwrap();
    let answered = session.laid_out().get();
    assert!(answered.contains("def circle_area("), "{answered}");
    let ahead = section("units.py", "def to_meters(feet: float) -> float: ...");
    {
        let _runtime = rt.enter();
        assert!(e.prefill_head(&session, ahead.clone()));
        let rest = OwnedInput { text: text.clone(), cursor: line_start, syntax: Some((spec, tree.clone())), cross_file: Some(ahead) };
        assert!(e.prefill_at(&session, rest));
    }
    // A request of another session, queued behind both: once it is answered, both prompts
    // were laid out (the model thread takes its jobs in order).
    let behind = Input { cross_file: None, text: &text, cursor, syntax: Some((spec, &tree)) };
    rt.block_on(e.complete(behind, CancelFlag::new())).unwrap();
    assert_eq!(session.laid_out().get(), answered, "a prompt decoded ahead replaced the answer's section");
}

/// Cancelling while the prompt is being decoded, and again while tokens are being generated,
/// stops the model's work there: the prompt is left part-decoded in the KV cache (the next
/// request decodes only the rest of it), and fewer tokens come out than the same request makes
/// when it is not cancelled.
#[test]
fn cancelling_during_prefill_and_during_decoding_stops_the_work() {
    let mut options = Options::default();
    options.model.path = Some(model());
    // The prompt is decoded 16 tokens at a time (in batches aligned to position 0): a
    // cancellation check between each.
    const CHUNK: usize = 16;
    options.model.batch_size = Some(CHUNK as u32);
    options.model.prefill_chunk = Some(CHUNK as u32);
    let config = options.resolve(None);
    let handle = ModelHandle::spawn(&config.model, Sampling::from(&config.completion));
    assert!(matches!(rt().block_on(handle.wait_loaded()), ModelStatus::Ready(_)));
    let text = code_to_read();
    const MAX_TOKENS: usize = 64;
    let draft = Draft {
        context: ContextParts { strategy: Strategy::Window, outline: Vec::new(), prefix_start: 0, prefix: text.clone(), suffix: String::new() },
        max_prompt_tokens: 2048, // the whole text
        stop: StopRule::unbounded(), // only the token limit ends it
        cross_file: None,
        purpose: Purpose::Complete,
        max_tokens: MAX_TOKENS as u32,
        fim: true,
    };
    let request = |cancel: &CancelFlag| draft.clone().into_request(Default::default(), cancel.clone());
    // Runs the request on another thread and cancels it as soon as its progress satisfies
    // `now`; returns the progress seen then, the result, and the progress at the end.
    let cancel_when = |now: &dyn Fn(Progress) -> bool| {
        let cancel = CancelFlag::new();
        std::thread::scope(|s| {
            let worker = s.spawn(|| rt().block_on(handle.generate(request(&cancel))));
            let seen = loop {
                let p = cancel.progress();
                if now(p) {
                    cancel.cancel();
                    break p;
                }
                assert!(!worker.is_finished(), "the request ended before it could be cancelled: {p:?}");
                std::thread::sleep(std::time::Duration::from_micros(200));
            };
            (seen, worker.join().unwrap(), cancel.progress())
        })
    };

    // During the prefill: after its first chunk.
    let (seen, result, prefill) = cancel_when(&|p| p.prefilled > 0);
    assert_eq!(result.unwrap_err(), GenerateError::Cancelled);
    assert!(prefill.prefilled >= seen.prefilled && prefill.generated == 0, "{seen:?} then {prefill:?}");
    // During decoding: after a few tokens. The prompt's first part is in the KV cache already.
    let (seen, result, decode) = cancel_when(&|p| p.generated >= 3);
    assert_eq!(result.unwrap_err(), GenerateError::Cancelled);
    assert!(decode.generated >= seen.generated && decode.generated < MAX_TOKENS, "{seen:?} then {decode:?}");
    // Not cancelled, the same request generates all its tokens.
    let full = rt().block_on(handle.generate(request(&CancelFlag::new()))).unwrap();
    let prompt = full.timings.prompt_tokens;
    let (reused, generated) = (full.timings.reused_tokens, full.timings.generated_tokens);
    eprintln!("prompt {prompt} tokens; cancelled after {prefill:?}, then after {decode:?}; uncancelled: {reused} reused, {generated} generated");
    assert_eq!(generated, MAX_TOKENS);
    // The prefill stopped before the prompt's end, and what it had decoded stayed in the cache:
    // the second request decoded only the rest.
    assert!(prefill.prefilled < prompt, "the cancelled prefill went on to the end: {prefill:?} of {prompt}");
    assert_eq!(prefill.prefilled + decode.prefilled, prompt, "{prefill:?} then {decode:?}");
    // A warm request keeps whole aligned chunks of the cached prompt (its last token is always
    // decoded again: its logits start the generation).
    assert_eq!(reused, (prompt - 1) / CHUNK * CHUNK);
}

/// On the CPU a prompt is decoded 128 tokens at a time, whatever the batch size: a cancellation
/// stops the prefill after the 128 tokens being decoded (not after a whole batch of 512, which
/// held a key 1.7-2.7 s on two cores), what was decoded stays in the KV cache, and the same
/// prompt then decodes to the same text as a cold start.
#[test]
fn a_cancelled_prefill_stops_within_its_step_and_keeps_it() {
    let mut options = Options::default();
    options.model.path = Some(model());
    let config = options.resolve(None);
    assert_eq!(config.model.batch_size, 512);
    let handle = ModelHandle::spawn(&config.model, Sampling::from(&config.completion));
    assert!(matches!(rt().block_on(handle.wait_loaded()), ModelStatus::Ready(_)));
    let text = code_to_read();
    let draft = Draft {
        context: ContextParts { strategy: Strategy::Window, outline: Vec::new(), prefix_start: 0, prefix: text, suffix: String::new() },
        max_prompt_tokens: 2048,
        stop: StopRule::unbounded(),
        cross_file: None,
        purpose: Purpose::Complete,
        max_tokens: 8,
        fim: true,
    };
    let request = |cancel: &CancelFlag| draft.clone().into_request(Default::default(), cancel.clone());
    let cancel = CancelFlag::new();
    let result = std::thread::scope(|s| {
        let worker = s.spawn(|| rt().block_on(handle.generate(request(&cancel))));
        // The model thread takes the job at once; this is well inside its first step.
        std::thread::sleep(std::time::Duration::from_millis(60));
        assert!(!worker.is_finished(), "the request ended before it could be cancelled");
        cancel.cancel();
        worker.join().unwrap()
    });
    let stopped = cancel.progress();
    assert_eq!(result.unwrap_err(), GenerateError::Cancelled);
    assert!(stopped.prefilled > 0 && stopped.prefilled < 512 && stopped.generated == 0, "{stopped:?}");
    // The same prompt again: it decodes only what the cancelled one had not, to a cold start's
    // text.
    let warm = rt().block_on(handle.generate(request(&CancelFlag::new()))).unwrap();
    eprintln!("cancelled at {stopped:?}; then {} of {} tokens reused", warm.timings.reused_tokens, warm.timings.prompt_tokens);
    assert!(warm.timings.prompt_tokens > 512, "the prompt fits one batch: {}", warm.timings.prompt_tokens);
    // (One more where the prompt begins with the BOS that the warm-up's tokens began with too.)
    assert!((stopped.prefilled..=stopped.prefilled + 1).contains(&warm.timings.reused_tokens), "{}", warm.timings.reused_tokens);
    let cold = ModelHandle::spawn(&config.model, Sampling::from(&config.completion));
    let cold = rt().block_on(cold.generate(request(&CancelFlag::new()))).unwrap();
    assert_eq!(cold.timings.reused_tokens, 0);
    assert_eq!(warm.text, cold.text);
}

/// Typing the start of a suggestion answers with its rest at once; the same prompt again is
/// answered from the suggestion cache.
#[test]
fn typed_ahead_and_prompt_cache_answer_without_the_model() {
    let (text, line, _) = fixture_with_cursor("e2e/shapes.py");
    let spec = syntax::by_language_id("python").unwrap();
    let line_start: usize = text.split('\n').take(line as usize).map(|l| l.len() + 1).sum();
    let mut options = Options::default();
    options.model.path = Some(model());
    let config = options.resolve(None);
    let e = Engine::new(ModelHandle::spawn(&config.model, Sampling::from(&config.completion)), config.completion);
    let rt = rt();
    let typed = "        return 2 * ";
    let doc = format!("{}{}{}", &text[..line_start], typed, &text[line_start..]);
    let tree = spec.parse(&doc);
    let cursor = line_start + typed.len();
    let first = rt.block_on(e.complete(Input { cross_file: None, text: &doc, cursor, syntax: Some((spec, &tree)) }, CancelFlag::new())).unwrap();
    assert!(first.text.len() > 2, "{first:?}");
    assert_eq!(first.timings.cache, None);

    let again = rt.block_on(e.complete(Input { cross_file: None, text: &doc, cursor, syntax: Some((spec, &tree)) }, CancelFlag::new())).unwrap();
    assert_eq!(again.text, first.text);
    assert_eq!(again.timings.cache, Some(ghostline::model::CacheHit::Prompt));

    let head: String = first.text.chars().take(2).collect();
    let doc2 = format!("{}{}{}{}", &text[..line_start], typed, head, &text[line_start..]);
    let tree2 = spec.parse(&doc2);
    let next = rt
        .block_on(e.complete(Input { cross_file: None, text: &doc2, cursor: cursor + head.len(), syntax: Some((spec, &tree2)) }, CancelFlag::new()))
        .unwrap();
    assert_eq!(next.timings.cache, Some(ghostline::model::CacheHit::ShownSuggestion));
    assert_eq!(format!("{head}{}", next.text), first.text);
}

/// Completing elsewhere (another function: another prompt layout) and coming back: the prompt
/// of the first place is restored from the KV state saved when the context moved away, not
/// decoded again, and the suggestion is the one a cold start gives.
#[test]
fn coming_back_restores_the_saved_kv_state() {
    let (text, line, _) = fixture_with_cursor("e2e/shapes.py");
    let spec = syntax::by_language_id("python").unwrap();
    let line_start: usize = text.split('\n').take(line as usize).map(|l| l.len() + 1).sum();
    let rt = rt();
    let warm = engine();
    let complete = |e: &Engine, doc: &str, cursor: usize| {
        let tree = spec.parse(doc);
        rt.block_on(e.complete(Input { cross_file: None, text: doc, cursor, syntax: Some((spec, &tree)) }, CancelFlag::new())).unwrap()
    };
    let typed = "        return 2 * math.pi * self.";
    let here = |n: usize| format!("{}{}{}", &text[..line_start], &typed[..n], &text[line_start..]);
    let first = complete(&warm, &here(20), line_start + 20);
    assert_eq!(first.timings.restored_tokens, 0);
    // Elsewhere: the end of `describe`, a prompt with another scope after a short common head.
    let doc = here(20);
    let away = complete(&warm, &doc, doc.trim_end().len());
    assert!(away.timings.reused_tokens + 64 <= first.timings.prompt_tokens, "{:?} then {:?}", first.timings, away.timings);
    // Back, two keys further.
    let back = complete(&warm, &here(22), line_start + 22);
    let cold = complete(&engine(), &here(22), line_start + 22);
    assert_eq!(back.text, cold.text);
    assert!(back.timings.restored_tokens > away.timings.reused_tokens, "{:?}", back.timings);
    assert_eq!(back.timings.reused_tokens, back.timings.restored_tokens);
    assert!(back.timings.prefill_tokens < 8, "{:?}", back.timings);
}

/// The prompt plan with the real tokenizer, where the model thread makes it: for the FIM test
/// model (StarCoder's markers, the format it was trained on), the cross-file section with a
/// `<file_sep>` token before each path, then `<fim_prefix>` outline and prefix `<fim_suffix>`
/// suffix `<fim_middle>`, no BOS; each section's tokens read back as its text, and the model
/// runs exactly the plan's tokens.
#[test]
fn the_prompt_plan_with_the_real_tokenizer() {
    let handle = fim_model_thread();
    let outline = vec![OutlineItem { text: "import math".into(), start: 0, order: 0, full: None, pinned: false }];
    let (prefix, suffix) = ("def area(r):\n    return math.", "\n\nprint(area(2))\n");
    let context = ContextParts { strategy: Strategy::Scope, outline, prefix_start: 13, prefix: prefix.into(), suffix: suffix.into() };
    let related = Related { path: "geo/units.py".into(), text: "def to_metres(feet: float) -> float: ...".into(), line: 3, recent: false };
    let cross_file = CrossFile { path: "geo/shapes.py".into(), comment: "#", snippets: vec![related], ..Default::default() };
    let draft = Draft { context, stop: StopRule::unbounded(), cross_file: Some(cross_file), purpose: Purpose::Complete, max_prompt_tokens: 1024, max_tokens: 4, fim: true };
    type Seen = (PromptPlan, Vec<(Section, String)>, VocabFacts);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None::<Seen>));
    let build = {
        let seen = seen.clone();
        move |tokenizer: &dyn Tokenize, model: &VocabFacts| {
            let plan = PromptPlan::build(&draft, tokenizer, model, &TokenMemo::default());
            let text = |r: &std::ops::Range<usize>| -> String { plan.tokens[r.clone()].iter().map(|&t| tokenizer.token_text(t)).collect() };
            let texts = plan.sections.iter().map(|(s, r)| (*s, text(r))).collect();
            *seen.lock().unwrap() = Some((plan.clone(), texts, model.clone()));
            plan.into_prompt()
        }
    };
    let generated = rt().block_on(handle.generate(GenerateRequest { prompt: Box::new(build), cancel: CancelFlag::new() })).unwrap();
    let (plan, texts, model) = seen.lock().unwrap().take().expect("the model thread built the plan");
    assert_eq!(model.fim.to_string(), "FIM StarCoder (PSM)", "{model:?}");
    assert_eq!(model.bos, None, "add_bos_token is false");
    assert_eq!(generated.timings.prompt, plan.tokens);
    let kinds: Vec<Section> = texts.iter().map(|(s, _)| *s).collect();
    assert_eq!(kinds, [Section::CrossFile, Section::Marker, Section::Outline, Section::Prefix, Section::Marker, Section::Suffix, Section::Marker]);
    let text_of = |which: Section| texts.iter().find(|(s, _)| *s == which).map(|(_, t)| t.as_str()).unwrap();
    // `<file_sep>` is the vocabulary's separator token (id 5, a control token, so it reads back
    // as no text) before each path, not its text tokenized.
    assert_eq!(text_of(Section::CrossFile), "geo/units.py\ndef to_metres(feet: float) -> float: ...\ngeo/shapes.py\n");
    assert_eq!(plan.tokens[0], 5);
    assert_eq!(plan.tokens.iter().filter(|&&t| t == 5).count(), 2);
    assert_eq!(text_of(Section::Outline), "import math\n");
    assert_eq!(text_of(Section::Prefix), prefix);
    assert_eq!(text_of(Section::Suffix), suffix);
    // The markers are the ids the model was trained with (shared/models/README.md).
    let markers: Vec<i32> = plan.sections.iter().filter(|(s, _)| *s == Section::Marker).flat_map(|(_, r)| plan.tokens[r.clone()].to_vec()).collect();
    assert_eq!(markers, [11, 12, 13], "<fim_prefix> <fim_suffix> <fim_middle>");
}

/// While a prompt says its text may not end (`Prompt::unfinished`), the model thread takes the
/// most likely token that is not an end token: the answer goes on past where the model would
/// have ended it, and up to there it is the model's own.
#[test]
fn the_model_thread_does_not_end_an_unfinished_answer() {
    let handle = fim_model_thread();
    const AT_LEAST: usize = 48;
    let generate = |constrained: bool| {
        let build = move |tokenizer: &dyn Tokenize, _: &VocabFacts| {
            let mut tokens = vec![11];
            tokens.extend(tokenizer.tokenize("def greet(name):\n    \"\"\"Say hello.\"\"\"\n    message = "));
            tokens.push(12);
            tokens.extend(tokenizer.tokenize("\n    return message\n"));
            tokens.push(13);
            let unfinished: Box<dyn Fn(&str) -> bool + Send> = if constrained { Box::new(|text: &str| text.len() < AT_LEAST) } else { Box::new(|_: &str| false) };
            ghostline::model::Prompt { tokens, stop: Box::new(|_| None), stop_key: u64::from(constrained), max_tokens: 48, unfinished, lead: String::new(), blank_enders: String::new() }
        };
        rt().block_on(handle.generate(GenerateRequest { prompt: Box::new(build), cancel: CancelFlag::new() })).unwrap().text
    };
    let free = generate(false);
    assert!(!free.is_empty() && free.len() < AT_LEAST, "the model must end early by itself for this test to mean something: {free:?}");
    let kept = generate(true);
    assert!(kept.len() >= AT_LEAST, "ended while unfinished: {kept:?}");
    assert!(kept.starts_with(&free), "the model's own answer first: {free:?} then {kept:?}");
}

/// With a lead (`Prompt::lead`, a word begun that the prompt left out), the model thread takes
/// only tokens that agree with it until the text has it, whatever the model would have written
/// there, and goes on freely after it.
#[test]
fn the_model_thread_writes_the_lead_first() {
    let handle = fim_model_thread();
    const LEAD: &str = "f\"Goodb";
    let generate = |lead: &str| {
        let lead = lead.to_owned();
        let build = move |tokenizer: &dyn Tokenize, _: &VocabFacts| {
            let mut tokens = vec![11];
            tokens.extend(tokenizer.tokenize("def greet(name):\n    \"\"\"Say hello.\"\"\"\n    message ="));
            tokens.push(12);
            tokens.extend(tokenizer.tokenize("\n    return message\n"));
            tokens.push(13);
            ghostline::model::Prompt { tokens, stop: Box::new(|_| None), stop_key: lead.len() as u64, max_tokens: 24, unfinished: Box::new(|_| false), lead: lead.clone(), blank_enders: String::new() }
        };
        rt().block_on(handle.generate(GenerateRequest { prompt: Box::new(build), cancel: CancelFlag::new() })).unwrap().text
    };
    let free = generate("");
    assert!(!free.trim_start().starts_with("f\"Good"), "the model must not write the lead by itself for this test to mean something: {free:?}");
    let led = generate(&format!(" {LEAD}"));
    assert!(led.starts_with(&format!(" {LEAD}")) && led.len() > LEAD.len() + 1, "the lead first, then the model's own text: {led:?}");
}

/// In a hole between a call's parentheses (`Prompt::blank_enders`: a next edit's new
/// argument), a token that ends the text while it is still blank — the call's `)`, a comma, a
/// line break — is refused as an end token is: the FIM test model's own first token here is one
/// of them, which the argument's stop rule would cut to nothing.
#[test]
fn the_model_thread_does_not_end_an_argument_hole_blank() {
    let handle = fim_model_thread();
    const CASES: &[(&str, &str)] = &[
        // The hole of a parameter added after `proxy_ip`.
        ("def is_valid_cidr(value, strict):\n    return '/' in value\n\n\ndef check(proxy_ip):\n    if is_valid_cidr(proxy_ip, ", "):\n        return True\n"),
        ("def load(path, mode):\n    return open(path, mode)\n\n\ndef main(name):\n    data = load(name, ", ")\n    return data\n"),
    ];
    const ENDERS: &str = "\n,)]}";
    let generate = |case: usize, enders: &str| {
        let enders = enders.to_owned();
        let build = move |tokenizer: &dyn Tokenize, _: &VocabFacts| {
            let (prefix, suffix) = CASES[case];
            let mut tokens = vec![11];
            tokens.extend(tokenizer.tokenize(prefix));
            tokens.push(12);
            tokens.extend(tokenizer.tokenize(suffix));
            tokens.push(13);
            ghostline::model::Prompt { tokens, stop: Box::new(|_| None), stop_key: enders.len() as u64, max_tokens: 12, unfinished: Box::new(|_| false), lead: String::new(), blank_enders: enders.clone() }
        };
        rt().block_on(handle.generate(GenerateRequest { prompt: Box::new(build), cancel: CancelFlag::new() })).unwrap().text
    };
    let first = |text: &str| text.trim_start_matches([' ', '\t']).chars().next();
    let free = generate(0, "");
    assert_eq!(first(&free), Some(','), "the model must end the argument blank by itself for this test to mean something: {free:?}");
    let guarded = generate(0, ENDERS);
    assert!(first(&guarded).is_some_and(|c| !ENDERS.contains(c)), "the argument still ends blank: {guarded:?}");
    // Where the model's first token writes something, the guard changes nothing.
    let free = generate(1, "");
    assert!(first(&free).is_some_and(|c| !ENDERS.contains(c)), "{free:?}");
    assert_eq!(generate(1, ENDERS), free);
}

/// About a thousand tokens of code: every context fixture, one after the other, under a first
/// line that the KV cache (holding the warm-up's tokens) does not begin with.
fn code_to_read() -> String {
    let mut files: Vec<_> = std::fs::read_dir(fixture("context")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e != "raw" && e != "md"))
        .fold("# Code to read.\n".to_owned(), |text, p| text + &std::fs::read_to_string(p).unwrap().replace("<CURSOR>", ""))
}
