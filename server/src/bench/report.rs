//! The bench report as a table on stdout, and as an SVG chart of key-to-suggestion time per
//! request.

use super::stats::{Side, Stat};
use super::Report;

pub fn print_text(report: &Report) {
    let c = &report.conditions;
    println!("ghostline bench");
    println!("  {}, {}", model_line(&c.model, &c.prompt_format, c.threads, (c.context_size, c.batch_size, c.max_tokens)), c.sampling);
    println!("  machine: {}", c.machine);
    println!("  {}", c.ghostline_version);
    if let (Some(peer), Some(endpoint)) = (&c.peer, &c.peer_endpoint) {
        println!("  peer: {peer}, the same GGUF, threads, context and batch, one slot; {endpoint}");
    }
    let peer_kernels = c.peer_kernels.as_ref().map_or(String::new(), |k| format!("; llama-server: {k}"));
    println!("  kernels: ghostline: {}{peer_kernels}", if c.ghostline_kernels.is_empty() { "unknown" } else { &c.ghostline_kernels });
    println!("  replay: {}", c.replay);
    println!("  clock: {}", c.clock);
    println!("  ghostline got: {}", c.ghostline_got);
    if let Some(remote) = &c.remote {
        println!("  ghostline generated through: {remote}");
    }
    println!(
        "  after didOpen: {}; completion.crossFile {}; nextEdit.enabled {}",
        match c.open_pause_ms {
            0 => "the trace's first event at once".to_owned(),
            ms => format!("a code-action request at the cursor, then {ms} ms before the trace's first event"),
        },
        if c.cross_file { "on" } else { "off" },
        if c.next_edit { "on" } else { "off" }
    );
    if let Some(got) = &c.peer_got {
        println!("  llama-server got: {got}");
    }
    println!(
        "  load average (1 min) at start {:.2}, at end {:.2} on {}",
        c.load_average.0,
        c.load_average.1,
        c.machine.split(", ").nth(1).unwrap_or("the cores")
    );
    for t in &report.traces {
        println!();
        println!(
            "trace {} ({}): {} keys, {} completion requests, {} run(s); prompt {} tokens (median; p95 {}), {} generated (median)",
            t.name,
            t.file,
            t.keys,
            t.requests,
            t.runs,
            fmt0(t.prompt_tokens.map(|s| s.p50)),
            fmt0(t.prompt_tokens.map(|s| s.p95)),
            fmt0(t.generated_tokens.map(|s| s.p50)),
        );
        if !t.description.is_empty() {
            println!("  {}", t.description);
        }
        let g = &t.ghostline;
        let p = t.peer.as_ref();
        let r = t.ratios.as_ref();
        println!("  {:<56} {:>15} {:>15} {:>13}", "", "ghostline", if p.is_some() { "llama-server" } else { "" }, if p.is_some() { "ratio" } else { "" });
        let row = |label: String, mine: String, theirs: Option<String>, ratio: Option<String>| {
            println!("  {:<56} {:>15} {:>15} {:>13}", label, mine, theirs.unwrap_or_default(), ratio.unwrap_or_default());
        };
        let pair = |s: Option<Stat>| s.map_or("-".into(), |s| format!("{} / {}", fmt0(Some(s.p50)), fmt0(Some(s.p95))));
        row(
            "KEY-TO-SUGGESTION ms, p50 / p95 (from the key)".into(),
            pair(g.key_ms),
            p.map(|p| pair(p.key_ms)),
            r.map(|r| format!("{} / {}", fmt2(r.key_p50), fmt2(r.key_p95))),
        );
        row(
            format!("  of which key to request (debounce) ms, p50 {}", fmt0(t.debounce_ms.map(|s| s.p50))),
            String::new(),
            None,
            None,
        );
        row(
            "request-to-answer ms, p50 / p95 (from the request)".into(),
            pair(g.request_ms),
            p.map(|p| pair(p.request_ms)),
            r.map(|r| format!("{} / {}", fmt2(r.request_p50), fmt2(r.request_p95))),
        );
        row("TTFT after keystrokes ms, p50 / p95 (server)".into(), pair(g.warm_ttft_ms), p.map(|p| pair(p.warm_ttft_ms)), r.map(|r| fmt2(r.warm_ttft_p50)));
        row("prompt tokens re-decoded per request, p50 / p95".into(), pair(g.redecoded_tokens), p.map(|p| pair(p.redecoded_tokens)), None);
        let large = |s: &Side| format!("{} ({} tok)", s.large_redecodes, s.redecoded_total);
        row("requests re-decoding ≥ half the prompt (all tokens)".into(), large(g), p.map(large), None);
        row("requests restoring a saved KV state (tokens)".into(), format!("{} ({} tok)", g.restores, g.restored_total), p.map(|_| "-".into()), None);
        row(
            "first request after didOpen, key to suggestion ms, median".into(),
            fmt0(g.first_key_ms.map(|s| s.p50)),
            p.map(|p| fmt0(p.first_key_ms.map(|s| s.p50))),
            None,
        );
        row(
            format!("cold TTFT ms at {} prompt tokens, median", fmt0(g.cold_prompt_tokens.map(|s| s.p50))),
            fmt0(g.cold_ttft_ms.map(|s| s.p50)),
            p.map(|p| fmt0(p.cold_ttft_ms.map(|s| s.p50))),
            r.map(|r| fmt2(r.cold_ttft)),
        );
        row(
            "prefill tokens/s (cold request), median".into(),
            fmt0(g.prefill_tokens_per_s.map(|s| s.p50)),
            p.map(|p| fmt0(p.prefill_tokens_per_s.map(|s| s.p50))),
            None,
        );
        row(
            format!("decode tokens/s at ~{} tokens of context, median", fmt0(t.prompt_tokens.map(|s| s.p50))),
            format!("{} (n={})", fmt0(g.decode_tokens_per_s.map(|s| s.p50)), g.decode_tokens_per_s.map_or(0, |s| s.n)),
            p.map(|p| format!("{} (n={})", fmt0(p.decode_tokens_per_s.map(|s| s.p50)), p.decode_tokens_per_s.map_or(0, |s| s.n))),
            r.map(|r| fmt2(r.decode)),
        );
        row("peak RSS MB (VmHWM)".into(), format!("{:.0}", g.peak_rss_mb), p.map(|p| format!("{:.0}", p.peak_rss_mb)), None);
        row("start-up to ready ms, median".into(), fmt0(g.load_ms.map(|s| s.p50)), p.map(|p| fmt0(p.load_ms.map(|s| s.p50))), None);
        println!(
            "  not in the figures above: {} request(s) answered from ghostline's suggestion cache (not sent to llama-server; \
             from the key p50 / p95 {}), {} answered without timings of their own",
            t.cached,
            pair(t.cached_key_ms),
            t.unmatched
        );
        match &t.floor {
            Some(f) => println!("  floor: one forward pass of one token at this context ≈ {:.1} ms (1 / {}'s decode rate)", f.ms, f.from),
            None => println!("  floor: - (no request decoded enough tokens)"),
        }
        let b = &t.breakdown;
        println!(
            "  ghostline's time, medians of requests with a model call: context {} ms, then on the model thread prompt build {} ms, \
             to first token {} ms (build included), whole generation {} ms; post-processing {} ms; LSP and the rest {} ms",
            fmt1(b.context_ms),
            fmt1(b.build_ms),
            fmt1(b.ttft_ms),
            fmt1(b.model_total_ms),
            fmt1(b.postprocess_ms),
            fmt1(b.outside_ms)
        );
        let r = &t.replayed;
        println!(
            "  replayed from the logits kept with the KV cache: {} of {} generated tokens; {} of {} requests decoded nothing (the others from the key p50/p95 {})",
            r.replayed_tokens,
            r.generated_tokens,
            r.requests_without_decode,
            r.requests,
            pair(r.key_decoding_ms),
        );
        match &t.ahead {
            Some(a) => println!(
                "  generated ahead on keystrokes: {} started, {} completed ({} tokens decoded), {} cancelled by the next keystroke; \
                 {} of {} requests answered by one (from the key p50/p95 {}), {} called the model themselves ({})",
                a.started,
                a.completed,
                a.tokens,
                a.cancelled,
                t.key_answered_ahead_ms.map_or(0, |s| s.n),
                t.requests * t.runs,
                pair(t.key_answered_ahead_ms),
                t.key_model_call_ms.map_or(0, |s| s.n),
                pair(t.key_model_call_ms),
            ),
            None => println!("  generating ahead off (completion.generateAhead false): every request called the model itself"),
        }
        if let Some((same, of)) = t.same_text {
            println!("  same output: llama-server's text contains ghostline's suggestion in {same} of {of} requests");
        }
        println!("  targets (issue 4, timed from the key; measured, not asserted):");
        for target in &t.targets {
            let verdict = match target.met {
                Some(true) => "met",
                Some(false) => "NOT met",
                None => "not measured (needs --peer llama-server)",
            };
            let sign = if target.at_most { "≤" } else { "≥" };
            println!("    {:<56} {:>6} {sign} {:<5} {verdict}", target.what, fmt2(target.value), target.limit);
        }
    }
}

/// `model NAME (FORMAT), N threads, context C, batch B, at most M generated tokens`.
pub(super) fn model_line(model: &std::path::Path, format: &str, threads: u32, (context, batch, max_tokens): (u32, u32, u32)) -> String {
    let name = model.file_name().map_or_else(|| model.display().to_string(), |n| n.to_string_lossy().into_owned());
    format!("model {name} ({format}), {threads} threads, context {context}, batch {batch}, at most {max_tokens} generated tokens")
}

fn fmt0(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.0}"))
}
fn fmt1(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}
fn fmt2(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

/// An SVG chart: key-to-suggestion time per request (median over runs), one panel per
/// trace, ghostline and the peer.
pub fn chart(report: &Report) -> String {
    let (w, h, pad) = (720.0, 240.0, 48.0);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n",
        h * report.traces.len() as f64
    );
    for (i, t) in report.traces.iter().enumerate() {
        let y0 = h * i as f64;
        let per_request = |peer: bool| -> Vec<f64> {
            (0..t.requests)
                .filter_map(|r| {
                    Stat::of(t.samples.iter().filter(|s| s.request == r).filter_map(|s| {
                        if peer {
                            s.peer.as_ref().map(|p| p.key_ms)
                        } else {
                            Some(s.key_ms)
                        }
                    }))
                    .map(|s| s.p50)
                })
                .collect()
        };
        let series = [("ghostline", per_request(false), "#1f77b4"), ("llama-server", per_request(true), "#d62728")];
        let max = series.iter().flat_map(|s| s.1.iter().copied()).fold(1.0, f64::max);
        out += &format!(
            "<text x=\"{pad}\" y=\"{}\">{}: key-to-suggestion ms per request, from the key (median of {} runs)</text>\n",
            y0 + 18.0,
            t.name,
            t.runs
        );
        let (x_of, y_of) = (
            |k: usize| pad + (w - 2.0 * pad) * k as f64 / (t.requests.max(2) - 1) as f64,
            |v: f64| y0 + h - pad + (v / max) * -(h - 2.0 * pad - 10.0),
        );
        out += &format!(
            "<line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/><text x=\"4\" y=\"{}\">{max:.0}</text><text x=\"4\" y=\"{}\">0</text>\n",
            y0 + h - pad,
            w - pad,
            y0 + h - pad,
            y_of(max) + 4.0,
            y0 + h - pad
        );
        for (j, (name, values, colour)) in series.iter().enumerate() {
            if values.is_empty() {
                continue;
            }
            let points: Vec<String> = values.iter().enumerate().map(|(k, v)| format!("{:.1},{:.1}", x_of(k), y_of(*v))).collect();
            out += &format!("<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"/>\n", points.join(" "));
            out += &format!(
                "<text x=\"{}\" y=\"{}\" fill=\"{colour}\">{name}</text>\n",
                w - pad - 100.0,
                y0 + 36.0 + 14.0 * j as f64
            );
        }
    }
    out + "</svg>\n"
}
