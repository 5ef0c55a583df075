//! The figures of a trace over all its runs: medians and p95s per side, the ghostline / peer
//! ratios, the floor, the targets (met / not met) and where ghostline's time goes.

use std::path::Path;

use serde::Serialize;

use super::replay::{Answer, Sample};
use super::trace::Trace;
use crate::engine::AheadCounts;
use crate::model::Timings;

/// Requests generating fewer tokens say little about the decode rate.
pub const MIN_DECODE_TOKENS: usize = 4;

/// A statistic over several values.
#[derive(Debug, Clone, Copy, Serialize, Default, PartialEq)]
pub struct Stat {
    pub p50: f64,
    pub p95: f64,
    pub n: usize,
}

impl Stat {
    /// The median (of an even count: the mean of the middle two) and the nearest-rank p95 of
    /// the finite values; `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Stat> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        let p50 = if v.len() % 2 == 0 { (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0 } else { v[v.len() / 2] };
        Some(Stat { p50, p95: rank(0.95), n: v.len() })
    }
}

/// `a / b` when both are known and `b` is positive.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// One side's figures over all runs of a trace. The latency figures are over the requests
/// answered by a generation (ghostline's suggestion-cache hits are counted apart).
#[derive(Debug, Clone, Serialize, Default)]
pub struct Side {
    /// The key to the suggestion, client side: the headline figure.
    pub key_ms: Option<Stat>,
    /// The request to its answer, client side (secondary: the clock starts after the debounce).
    pub request_ms: Option<Stat>,
    /// Time to the first token of requests after the first of each run (KV cache warm).
    pub warm_ttft_ms: Option<Stat>,
    /// Prompt tokens decoded per request after the first of each run.
    pub redecoded_tokens: Option<Stat>,
    /// Requests after the first of each run that re-decoded at least half of their prompt (the
    /// KV cache held little of it), and the prompt tokens re-decoded over all of them.
    pub large_redecodes: usize,
    pub redecoded_total: usize,
    /// Requests after the first of each run whose prompt came back, in part, from a KV state
    /// saved in host memory (ghostline) and those tokens.
    pub restores: usize,
    pub restored_total: usize,
    /// The first request of each run, key (or request) to suggestion: the cold one, or with
    /// `--open-pause` the one that found what was decoded ahead.
    pub first_key_ms: Option<Stat>,
    /// First request of each run, on a freshly started server.
    pub cold_ttft_ms: Option<Stat>,
    pub cold_prompt_tokens: Option<Stat>,
    pub prefill_tokens_per_s: Option<Stat>,
    /// Over requests that generated at least MIN_DECODE_TOKENS tokens.
    pub decode_tokens_per_s: Option<Stat>,
    pub peak_rss_mb: f64,
    pub load_ms: Option<Stat>,
}

/// ghostline / llama-server, over the requests both answered (paired).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Ratios {
    pub key_p50: Option<f64>,
    pub key_p95: Option<f64>,
    pub request_p50: Option<f64>,
    pub request_p95: Option<f64>,
    pub warm_ttft_p50: Option<f64>,
    pub cold_ttft: Option<f64>,
    pub decode: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Target {
    pub what: String,
    pub value: Option<f64>,
    pub limit: f64,
    /// The value must be at most the limit (else at least).
    pub at_most: bool,
    /// `None` when it could not be measured (no peer).
    pub met: Option<bool>,
}

impl Target {
    pub fn new(what: &str, value: Option<f64>, limit: f64, at_most: bool) -> Target {
        let met = value.map(|v| if at_most { v <= limit } else { v >= limit });
        Target { what: what.into(), value, limit, at_most, met }
    }
}

/// The floor: one forward pass of one token at the trace's context, from llama-server's decode
/// rate there when it ran (else ghostline's).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Floor {
    pub ms: f64,
    /// Whose decode rate: `llama-server` or `ghostline`.
    pub from: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct TraceReport {
    pub name: String,
    pub description: String,
    pub file: String,
    pub runs: usize,
    pub keys: usize,
    /// Completion requests per run.
    pub requests: usize,
    /// Prompt tokens of the requests, median over all runs.
    pub prompt_tokens: Option<Stat>,
    pub generated_tokens: Option<Stat>,
    /// The key to the request (the debounce), over the requests that followed a key.
    pub debounce_ms: Option<Stat>,
    pub ghostline: Side,
    pub peer: Option<Side>,
    pub ratios: Option<Ratios>,
    pub floor: Option<Floor>,
    pub targets: Vec<Target>,
    /// Requests of the peer whose text contained ghostline's suggestion, of those compared.
    pub same_text: Option<(usize, usize)>,
    /// Requests answered from ghostline's suggestion cache (or typed-ahead), not sent to the
    /// peer and in none of the figures above; their key-to-suggestion time.
    pub cached: usize,
    pub cached_key_ms: Option<Stat>,
    /// Requests with no timings of their own (answered without the model), likewise apart.
    pub unmatched: usize,
    /// Where ghostline's time goes, medians over the requests after the first that called the
    /// model (milliseconds).
    pub breakdown: Breakdown,
    /// With `completion.generateAhead`: the generations started on keystrokes and their fate.
    pub ahead: Option<AheadCounts>,
    /// From the key: the requests answered by a generation made ahead, and those that called the
    /// model themselves.
    pub key_answered_ahead_ms: Option<Stat>,
    pub key_model_call_ms: Option<Stat>,
    /// Over ghostline's generations: tokens generated, of them replayed from the logits kept
    /// with the KV cache (no decode), and the requests that decoded nothing at all.
    pub replayed: Replayed,
    pub samples: Vec<Sample>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Replayed {
    pub generated_tokens: usize,
    pub replayed_tokens: usize,
    pub requests_without_decode: usize,
    pub requests: usize,
    /// From the key, the requests that decoded something (prompt or generation).
    pub key_decoding_ms: Option<Stat>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Breakdown {
    /// The engine's context building (scope, outline, stop rule), before the model thread.
    pub context_ms: Option<f64>,
    /// On the model thread: the prompt (fit, tokenize, assemble), then to the first token
    /// (prefill of the changed tail, first sample), then the whole generation.
    pub build_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub model_total_ms: Option<f64>,
    pub postprocess_ms: Option<f64>,
    /// The rest of the request-to-answer time: LSP transport, (de)serialisation, scheduling.
    pub outside_ms: Option<f64>,
}

pub fn summarize(
    trace: &Trace,
    path: &Path,
    runs: usize,
    samples: Vec<Sample>,
    rss: (u64, u64),
    loads: (Vec<f64>, Vec<f64>),
    with_peer: bool,
) -> TraceReport {
    let keys = trace.events.iter().filter(|e| e.key.is_some()).count();
    let requests = samples.iter().filter(|s| s.run == samples.first().map_or(0, |f| f.run)).count();
    let generated: Vec<&Sample> = samples.iter().filter(|s| s.answer() == Answer::Generated).collect();
    let server = |s: &&Sample| s.server.clone();
    let cold = |s: &&&Sample| s.request == 0;
    let warm = |s: &&&Sample| s.request > 0;
    // Decode rates over the requests whose tokens ghostline decoded (not replayed from kept
    // logits), on both sides.
    let decoding = |s: &&&Sample| s.server.as_ref().is_some_and(|f| f.generated_tokens.saturating_sub(f.replayed_tokens) >= MIN_DECODE_TOKENS);
    let no_decode = |f: &Timings| f.prefill_tokens == 0 && f.decode_passes == 0;
    let g = || generated.iter();

    let ghostline = Side {
        key_ms: Stat::of(g().map(|s| s.key_ms)),
        request_ms: Stat::of(g().map(|s| s.request_ms)),
        warm_ttft_ms: Stat::of(g().filter(warm).filter_map(server).map(|f| f.ttft_ms)),
        redecoded_tokens: Stat::of(g().filter(warm).filter_map(server).map(|f| f.prefill_tokens as f64)),
        large_redecodes: g().filter(warm).filter_map(server).filter(|f| 2 * f.prefill_tokens >= f.prompt_tokens).count(),
        redecoded_total: g().filter(warm).filter_map(server).map(|f| f.prefill_tokens).sum(),
        restores: g().filter(warm).filter_map(server).filter(|f| f.restored_tokens > 0).count(),
        restored_total: g().filter(warm).filter_map(server).map(|f| f.restored_tokens).sum(),
        first_key_ms: Stat::of(g().filter(cold).map(|s| s.key_ms)),
        cold_ttft_ms: Stat::of(g().filter(cold).filter_map(server).map(|f| f.ttft_ms)),
        cold_prompt_tokens: Stat::of(g().filter(cold).filter_map(server).map(|f| f.prompt_tokens as f64)),
        prefill_tokens_per_s: Stat::of(g().filter(cold).filter_map(server).map(|f| f.prefill_tokens as f64 / f.ttft_ms * 1e3)),
        decode_tokens_per_s: Stat::of(g().filter(decoding).filter_map(server).map(|f| f.decode_tokens_per_s)),
        peak_rss_mb: rss.0 as f64 / 1024.0,
        load_ms: Stat::of(loads.0),
    };
    let peer = with_peer.then(|| {
        let p = |s: &&Sample| s.peer.clone();
        let peer_decoding = |s: &&&Sample| decoding(s) && s.peer.as_ref().is_some_and(|f| f.generated_tokens >= MIN_DECODE_TOKENS);
        Side {
            key_ms: Stat::of(g().filter_map(p).map(|f| f.key_ms)),
            request_ms: Stat::of(g().filter_map(p).map(|f| f.request_ms)),
            warm_ttft_ms: Stat::of(g().filter(warm).filter_map(p).map(|f| f.prompt_ms)),
            redecoded_tokens: Stat::of(g().filter(warm).filter_map(p).map(|f| f.prefill_tokens as f64)),
            large_redecodes: g().filter(warm).filter_map(p).filter(|f| 2 * f.prefill_tokens >= f.prompt_tokens).count(),
            redecoded_total: g().filter(warm).filter_map(p).map(|f| f.prefill_tokens).sum(),
            // llama-server reports no such figure (its prompt cache restores are in its log).
            restores: 0,
            restored_total: 0,
            first_key_ms: Stat::of(g().filter(cold).filter_map(p).map(|f| f.key_ms)),
            cold_ttft_ms: Stat::of(g().filter(cold).filter_map(p).map(|f| f.prompt_ms)),
            cold_prompt_tokens: Stat::of(g().filter(cold).filter_map(p).map(|f| f.prompt_tokens as f64)),
            prefill_tokens_per_s: Stat::of(g().filter(cold).filter_map(p).map(|f| f.prefill_tokens as f64 / f.prompt_ms * 1e3)),
            decode_tokens_per_s: Stat::of(g().filter(peer_decoding).filter_map(p).map(|f| f.decode_tokens_per_s)),
            peak_rss_mb: rss.1 as f64 / 1024.0,
            load_ms: Stat::of(loads.1),
        }
    });
    let p50 = |s: Option<Stat>| s.map(|s| s.p50);
    let p95 = |s: Option<Stat>| s.map(|s| s.p95);
    let ratios = peer.as_ref().map(|peer| {
        // Paired: the requests both sides answered.
        let paired: Vec<&&Sample> = g().filter(|s| s.peer.is_some()).collect();
        let theirs = || paired.iter().filter_map(|s| s.peer.as_ref());
        let (key, their_key) = (Stat::of(paired.iter().map(|s| s.key_ms)), Stat::of(theirs().map(|f| f.key_ms)));
        let (req, their_req) = (Stat::of(paired.iter().map(|s| s.request_ms)), Stat::of(theirs().map(|f| f.request_ms)));
        Ratios {
            key_p50: ratio(p50(key), p50(their_key)),
            key_p95: ratio(p95(key), p95(their_key)),
            request_p50: ratio(p50(req), p50(their_req)),
            request_p95: ratio(p95(req), p95(their_req)),
            warm_ttft_p50: ratio(p50(ghostline.warm_ttft_ms), p50(peer.warm_ttft_ms)),
            cold_ttft: ratio(p50(ghostline.cold_ttft_ms), p50(peer.cold_ttft_ms)),
            decode: ratio(p50(ghostline.decode_tokens_per_s), p50(peer.decode_tokens_per_s)),
        }
    });
    let floor_of = |side: &Side, from: &str| {
        p50(side.decode_tokens_per_s).filter(|&r| r > 0.0).map(|r| Floor { ms: 1e3 / r, from: from.into() })
    };
    let floor = peer.as_ref().and_then(|p| floor_of(p, "llama-server")).or_else(|| floor_of(&ghostline, "ghostline"));
    let debounce_ms = Stat::of(samples.iter().filter(|s| s.keys > 0).map(|s| s.debounce_ms));
    let targets = targets(ratios.as_ref(), p50(ghostline.key_ms), p50(debounce_ms).unwrap_or(0.0), floor.as_ref().map(|f| f.ms));
    let compared: Vec<bool> = g().filter(|s| !s.suggestion.trim().is_empty()).filter_map(|s| s.peer.as_ref().map(|p| p.same_text)).collect();
    let same_text = with_peer.then(|| (compared.iter().filter(|&&b| b).count(), compared.len()));
    let model_calls: Vec<(&Sample, &Timings)> = g().filter(warm).filter_map(|s| s.server.as_ref().map(|f| (*s, f))).collect();
    let median = |f: &dyn Fn(&(&Sample, &Timings)) -> f64| p50(Stat::of(model_calls.iter().map(f)));
    let breakdown = Breakdown {
        context_ms: median(&|(_, f)| f.context_ms),
        build_ms: median(&|(_, f)| f.build_ms),
        ttft_ms: median(&|(_, f)| f.ttft_ms),
        model_total_ms: median(&|(_, f)| f.total_ms),
        postprocess_ms: median(&|(_, f)| f.postprocess_ms),
        // A generation made ahead ran before the request: the request did not wait for it.
        outside_ms: p50(Stat::of(
            model_calls.iter().filter(|(s, _)| !s.ahead()).map(|(s, f)| s.request_ms - f.context_ms - f.total_ms - f.postprocess_ms),
        )),
    };
    let cached: Vec<&Sample> = samples.iter().filter(|s| s.answer() == Answer::Cached).collect();
    TraceReport {
        name: trace.name.clone(),
        description: trace.description.clone(),
        file: path.display().to_string(),
        runs,
        keys,
        requests,
        prompt_tokens: Stat::of(g().filter_map(server).map(|f| f.prompt_tokens as f64)),
        generated_tokens: Stat::of(g().filter_map(server).map(|f| f.generated_tokens as f64)),
        debounce_ms,
        ghostline,
        peer,
        ratios,
        floor,
        targets,
        same_text,
        cached: cached.len(),
        cached_key_ms: Stat::of(cached.iter().map(|s| s.key_ms)),
        unmatched: samples.iter().filter(|s| s.answer() == Answer::Unmatched).count(),
        breakdown,
        ahead: None,
        key_answered_ahead_ms: Stat::of(g().filter(|s| s.ahead()).map(|s| s.key_ms)),
        key_model_call_ms: Stat::of(g().filter(|s| !s.ahead()).map(|s| s.key_ms)),
        replayed: Replayed {
            generated_tokens: g().filter_map(server).map(|f| f.generated_tokens).sum(),
            replayed_tokens: g().filter_map(server).map(|f| f.replayed_tokens).sum(),
            requests_without_decode: g().filter_map(server).filter(|f| no_decode(f)).count(),
            requests: g().filter(|s| s.server.is_some()).count(),
            key_decoding_ms: Stat::of(g().filter(|s| s.server.as_ref().is_some_and(|f| !no_decode(f))).map(|s| s.key_ms)),
        },
        samples,
    }
}

/// The targets, all timed from the key: against llama-server (p50 and p95 ≤ 0.5×), against
/// the floor (p50 ≤ 1.5× the debounce plus one forward pass), cold TTFT (≤ 1.1×) and decode rate
/// (≥ 0.95×).
pub fn targets(ratios: Option<&Ratios>, key_p50: Option<f64>, debounce_ms: f64, floor_ms: Option<f64>) -> Vec<Target> {
    let r = |f: fn(&Ratios) -> Option<f64>| ratios.and_then(f);
    vec![
        Target::new("key-to-suggestion p50 / llama-server's", r(|r| r.key_p50), 0.5, true),
        Target::new("key-to-suggestion p95 / llama-server's", r(|r| r.key_p95), 0.5, true),
        Target::new("key-to-suggestion p50 / (debounce + floor)", ratio(key_p50, floor_ms.map(|f| debounce_ms + f)), 1.5, true),
        Target::new("cold TTFT / llama.cpp's prefill time for that prompt", r(|r| r.cold_ttft), 1.1, true),
        Target::new("decode tokens/s / llama.cpp's at that context", r(|r| r.decode), 0.95, false),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::replay::PeerFigures;
    use crate::bench::trace::Event;
    use crate::model::CacheHit;

    #[test]
    fn stat_median_and_p95() {
        assert_eq!(Stat::of([]), None);
        assert_eq!(Stat::of([f64::NAN, f64::INFINITY]), None, "only finite values count");
        assert_eq!(Stat::of([3.0, 1.0, 2.0]), Some(Stat { p50: 2.0, p95: 3.0, n: 3 }));
        assert_eq!(Stat::of([4.0, 1.0, 3.0, 2.0]).unwrap().p50, 2.5, "an even count: the mean of the middle two");
        let hundred = Stat::of((1..=100).map(f64::from)).unwrap();
        assert_eq!((hundred.p50, hundred.p95, hundred.n), (50.5, 95.0, 100), "nearest rank");
        let twenty = Stat::of((1..=20).map(f64::from)).unwrap();
        assert_eq!(twenty.p95, 19.0);
        assert_eq!(Stat::of([7.0, f64::NAN]).unwrap(), Stat { p50: 7.0, p95: 7.0, n: 1 });
    }

    #[test]
    fn ratios_need_both_sides_and_a_positive_divisor() {
        assert_eq!(ratio(Some(1.0), Some(4.0)), Some(0.25));
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(4.0)), None);
        assert_eq!(ratio(Some(1.0), None), None);
    }

    #[test]
    fn targets_met_not_met_and_unmeasured() {
        assert_eq!(Target::new("x", Some(0.5), 0.5, true).met, Some(true), "at the limit is met");
        assert_eq!(Target::new("x", Some(0.51), 0.5, true).met, Some(false));
        assert_eq!(Target::new("x", Some(0.95), 0.95, false).met, Some(true));
        assert_eq!(Target::new("x", Some(0.94), 0.95, false).met, Some(false));
        assert_eq!(Target::new("x", None, 0.5, true).met, None);

        let unmeasured = targets(None, Some(160.0), 150.0, Some(10.0));
        assert_eq!(unmeasured.iter().map(|t| t.met).collect::<Vec<_>>(), [None, None, Some(true), None, None]);
        assert!((unmeasured[2].value.unwrap() - 1.0).abs() < 1e-9, "160 ms from the key = the 150 ms debounce + a 10 ms pass");
        let r = Ratios {
            key_p50: Some(0.4),
            key_p95: Some(0.9),
            request_p50: Some(0.1),
            request_p95: Some(0.1),
            warm_ttft_p50: None,
            cold_ttft: Some(1.2),
            decode: Some(1.0),
        };
        let measured = targets(Some(&r), Some(400.0), 0.0, Some(10.0));
        assert_eq!(measured.iter().map(|t| t.met).collect::<Vec<_>>(), [Some(true), Some(false), Some(false), Some(false), Some(true)]);
    }

    fn timings(cache: Option<CacheHit>, generated: usize, rate: f64) -> Timings {
        Timings {
            prompt_tokens: 100,
            reused_tokens: 90,
            prefill_tokens: 10,
            ttft_ms: 5.0,
            generated_tokens: generated,
            decode_tokens_per_s: rate,
            total_ms: 20.0,
            cache,
            ..Timings::default()
        }
    }

    fn sample(request: usize, key_ms: f64, debounce_ms: f64, server: Option<Timings>, peer_key_ms: Option<f64>) -> Sample {
        Sample {
            run: 0,
            request,
            keys: 1,
            key_ms,
            debounce_ms,
            request_ms: key_ms - debounce_ms,
            suggestion: "x".into(),
            server,
            peer: peer_key_ms.map(|k| PeerFigures {
                key_ms: k,
                request_ms: k - debounce_ms,
                prompt_tokens: 100,
                prefill_tokens: 10,
                prompt_ms: 4.0,
                generated_tokens: 8,
                decode_tokens_per_s: 50.0,
                same_text: true,
            }),
        }
    }

    #[test]
    fn summarize_times_from_the_key_and_keeps_cache_hits_apart() {
        let trace = Trace {
            name: "t".into(),
            description: String::new(),
            file: "t.py".into(),
            language_id: "python".into(),
            cursor_marker: "<CURSOR>".into(),
            workspace: None,
            events: vec![Event { gap_ms: 0, key: Some("a".into()), complete: false }, Event { gap_ms: 150, key: None, complete: true }],
        };
        let samples = vec![
            // Answered by the generation started on the key: ready at the debounce's end.
            sample(0, 151.0, 150.0, Some(timings(Some(CacheHit::GeneratedAhead), 8, 100.0)), Some(170.0)),
            sample(1, 152.0, 150.0, Some(timings(None, 8, 100.0)), Some(180.0)),
            sample(2, 153.0, 150.0, Some(timings(None, 8, 100.0)), Some(190.0)),
            // A suggestion-cache hit: no generation, not paired, not in the decode median.
            sample(3, 150.5, 150.0, Some(timings(Some(CacheHit::Prompt), 8, 9999.0)), None),
            sample(4, 150.2, 150.0, None, None),
        ];
        let r = summarize(&trace, Path::new("t.json"), 1, samples, (0, 0), (vec![], vec![]), true);
        assert_eq!(r.requests, 5);
        assert_eq!((r.cached, r.unmatched), (1, 1));
        assert_eq!(r.cached_key_ms.unwrap().p50, 150.5);
        let (g, p) = (&r.ghostline, r.peer.as_ref().unwrap());
        assert_eq!(g.key_ms.unwrap(), Stat { p50: 152.0, p95: 153.0, n: 3 }, "the generated requests only");
        assert_eq!(g.request_ms.unwrap().p50, 2.0);
        assert_eq!(p.key_ms.unwrap(), Stat { p50: 180.0, p95: 190.0, n: 3 });
        assert_eq!(g.decode_tokens_per_s.unwrap().p50, 100.0, "the cache hit's rate is left out");
        let ratios = r.ratios.as_ref().unwrap();
        assert!((ratios.key_p50.unwrap() - 152.0 / 180.0).abs() < 1e-9);
        assert!((ratios.request_p50.unwrap() - 2.0 / 30.0).abs() < 1e-9);
        assert_eq!(ratios.decode, Some(2.0));
        assert_eq!(r.floor, Some(Floor { ms: 20.0, from: "llama-server".into() }), "the peer's decode rate gives the floor");
        assert_eq!(r.debounce_ms.unwrap().p50, 150.0);
        assert_eq!(r.key_answered_ahead_ms.unwrap().n, 1);
        assert_eq!(r.key_model_call_ms.unwrap().n, 2);
        let met: Vec<Option<bool>> = r.targets.iter().map(|t| t.met).collect();
        // 0.84× the peer from the key (not met); 152 / (150 + 20) ≤ 1.5 (met); cold 5 / 4 ms (not
        // met); decode 2× (met).
        assert_eq!(met, [Some(false), Some(false), Some(true), Some(false), Some(true)]);
        assert_eq!(r.same_text, Some((3, 3)));

        let alone = summarize(&trace, Path::new("t.json"), 1, r.samples.clone(), (0, 0), (vec![], vec![]), false);
        assert!(alone.peer.is_none() && alone.ratios.is_none());
        assert_eq!(alone.floor, Some(Floor { ms: 10.0, from: "ghostline".into() }), "without a peer, ghostline's own rate");
    }
}
