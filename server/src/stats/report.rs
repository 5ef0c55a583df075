//! `ghostline stats [--since 7d] [--json]`: per model and language, suggestions shown and
//! accepted, the acceptance rate, accepted characters, the share of them retained after 30 s and
//! 5 minutes, keystroke-to-suggestion p50/p95, and how the suggestions were answered.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;

use super::{sql, Stats};

/// One model and language.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub model: String,
    pub language: String,
    pub shown: u64,
    pub accepted: u64,
    pub acceptance_rate: f64,
    pub accepted_chars: u64,
    /// Of the accepted characters measured at 30 s, the share still there.
    pub retained_30s: Option<f64>,
    pub retained_5m: Option<f64>,
    pub latency_p50_ms: Option<f64>,
    pub latency_p95_ms: Option<f64>,
    /// Shares of the suggestions shown: generated ahead, typed-ahead, the model when asked.
    pub share_ahead: f64,
    pub share_typed_ahead: f64,
    pub share_model: f64,
}

#[derive(Default)]
struct Acc {
    shown: u64,
    accepted: u64,
    accepted_chars: u64,
    retained: [(f64, f64); 2],
    latencies: Vec<f64>,
    routes: [u64; 3],
}

fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * (sorted.len() - 1) as f64).round() as usize;
    Some(sorted[rank.min(sorted.len() - 1)])
}

/// The figures for suggestions shown since `since_s` (Unix seconds).
pub fn summary(stats: &Stats, since_s: i64) -> Result<Vec<Row>, String> {
    let mut st = stats
        .db
        .prepare("SELECT model, language, route, latency_ms, accepted_chars, retained_30s, retained_5m FROM suggestions WHERE at_s >= ?1")
        .map_err(sql)?;
    let rows = st
        .query_map([since_s], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, f64>(3)?,
                r.get::<_, Option<i64>>(4)?,
                r.get::<_, Option<f64>>(5)?,
                r.get::<_, Option<f64>>(6)?,
            ))
        })
        .map_err(sql)?;
    let mut groups: BTreeMap<(String, String), Acc> = BTreeMap::new();
    for row in rows {
        let (model, language, route, latency, accepted, r30, r5) = row.map_err(sql)?;
        let a = groups.entry((model, language)).or_default();
        a.shown += 1;
        a.latencies.push(latency);
        a.routes[match route.as_str() {
            "ahead" => 0,
            "typed-ahead" => 1,
            _ => 2,
        }] += 1;
        if let Some(chars) = accepted.filter(|&c| c > 0) {
            a.accepted += 1;
            a.accepted_chars += chars as u64;
            for (slot, share) in a.retained.iter_mut().zip([r30, r5]) {
                if let Some(s) = share {
                    slot.0 += s * chars as f64;
                    slot.1 += chars as f64;
                }
            }
        }
    }
    Ok(groups
        .into_iter()
        .map(|((model, language), mut a)| {
            a.latencies.sort_by(f64::total_cmp);
            let share = |n: u64| n as f64 / a.shown.max(1) as f64;
            let retained = |(kept, of): (f64, f64)| (of > 0.0).then(|| kept / of);
            Row {
                model,
                language,
                shown: a.shown,
                accepted: a.accepted,
                acceptance_rate: share(a.accepted),
                accepted_chars: a.accepted_chars,
                retained_30s: retained(a.retained[0]),
                retained_5m: retained(a.retained[1]),
                latency_p50_ms: percentile(&a.latencies, 0.5),
                latency_p95_ms: percentile(&a.latencies, 0.95),
                share_ahead: share(a.routes[0]),
                share_typed_ahead: share(a.routes[1]),
                share_model: share(a.routes[2]),
            }
        })
        .collect())
}

/// The longest `--since` read: a hundred years (longer is out of range; `all` means everything).
pub const MAX_SINCE: std::time::Duration = std::time::Duration::from_secs(36_500 * 86_400);

/// `7d`, `12h`, `30m`, `90s` (or any duration `model.keepAlive` reads); `all`: everything.
/// Longer than [`MAX_SINCE`] is an error, not a panic.
pub fn parse_since(text: &str) -> Result<Option<std::time::Duration>, String> {
    let t = text.trim().to_ascii_lowercase();
    if t == "all" {
        return Ok(None);
    }
    let bad = || format!("cannot read --since {text:?}: use e.g. 7d, 12h, 30m or all");
    let window = if let Some(days) = t.strip_suffix('d') {
        let days = days.parse::<f64>().ok().filter(|d| d.is_finite() && *d > 0.0).ok_or_else(bad)?;
        std::time::Duration::try_from_secs_f64(days * 86_400.0).ok()
    } else {
        match crate::config::parse_duration(&t) {
            Ok(Some(d)) => Some(d),
            Err(e) if e.ends_with("out of range as a duration") => None,
            _ => return Err(bad()),
        }
    };
    match window {
        Some(d) if d <= MAX_SINCE => Ok(Some(d)),
        _ => Err(format!("--since {text:?} is out of range: at most {}d (or all)", MAX_SINCE.as_secs() / 86_400)),
    }
}

/// `--since` as clap reads it: the text as given (for the report) and the window.
#[derive(Debug, Clone, PartialEq)]
pub struct Since {
    pub text: String,
    pub window: Option<std::time::Duration>,
}

/// clap's value parser for `--since`: a bad or out-of-range value is a usage error.
pub fn since_arg(text: &str) -> Result<Since, String> {
    parse_since(text).map(|window| Since { text: text.to_owned(), window })
}

fn pct(x: f64) -> String {
    format!("{:.0} %", x * 100.0)
}

fn print_text(rows: &[Row], since: &str) {
    if rows.is_empty() {
        println!("no suggestions recorded in the last {since}");
        return;
    }
    println!("since {since}:");
    for r in rows {
        let opt = |x: Option<f64>, f: fn(f64) -> String| x.map(f).unwrap_or_else(|| "–".into());
        println!("{} · {}", r.model, r.language);
        println!(
            "  shown {}, accepted {} ({}), {} characters accepted; retained at 30 s {}, at 5 min {}",
            r.shown,
            r.accepted,
            pct(r.acceptance_rate),
            r.accepted_chars,
            opt(r.retained_30s, pct),
            opt(r.retained_5m, pct)
        );
        println!(
            "  keystroke to suggestion p50 {} ms, p95 {} ms; answered ahead {}, typed-ahead {}, by the model when asked {}",
            opt(r.latency_p50_ms, |x| format!("{x:.0}")),
            opt(r.latency_p95_ms, |x| format!("{x:.0}")),
            pct(r.share_ahead),
            pct(r.share_typed_ahead),
            pct(r.share_model)
        );
    }
}

/// `doctor`'s line: the last 7 days in one sentence (shown, accepted, rate, retained at 5
/// minutes), or why there is nothing. Makes no database file.
pub fn doctor_line(settings: &crate::config::StatsConfig) -> String {
    if !settings.enabled {
        return "off (stats.enabled: false): nothing is recorded".into();
    }
    let Some(path) = settings.path.clone().or_else(Stats::default_path) else {
        return "no data directory (HOME, XDG_DATA_HOME unset) and no stats.path: nothing is recorded".into();
    };
    if !path.exists() {
        return format!("nothing recorded yet ({})", path.display());
    }
    let week = super::now_s() - 7 * 86_400;
    let figures = Stats::open(&path).and_then(|s| {
        s.db.query_row(
            "SELECT COUNT(*), COALESCE(SUM(accepted_chars > 0), 0),
                    SUM(CASE WHEN accepted_chars > 0 AND retained_5m IS NOT NULL THEN retained_5m * accepted_chars END),
                    SUM(CASE WHEN accepted_chars > 0 AND retained_5m IS NOT NULL THEN accepted_chars END)
             FROM suggestions WHERE at_s >= ?1",
            [week],
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, Option<f64>>(2)?, r.get::<_, Option<f64>>(3)?)),
        )
        .map_err(sql)
    });
    match figures {
        Ok((shown, accepted, kept, of)) => {
            let rate = if shown > 0 { pct(accepted as f64 / shown as f64) } else { "–".into() };
            let retained = match (kept, of) {
                (Some(k), Some(o)) if o > 0.0 => pct(k / o),
                _ => "–".into(),
            };
            format!("last 7 days: {shown} shown, {accepted} accepted ({rate}), retained at 5 min {retained} (`ghostline stats` for more; {})", path.display())
        }
        Err(e) => e,
    }
}

/// Runs `ghostline stats`.
pub fn run(since: &Since, json: bool, db: Option<PathBuf>) -> ExitCode {
    let fail = |m: String| {
        eprintln!("ghostline stats: {m}");
        ExitCode::FAILURE
    };
    let (since, window) = (since.text.as_str(), since.window);
    let Some(path) = db.or_else(Stats::default_path) else {
        return fail("no data directory: set HOME or XDG_DATA_HOME, or pass --db".into());
    };
    let rows = if path.exists() {
        let since_s = window.map_or(0, |w| (super::now_s() - w.as_secs() as i64).max(0));
        match Stats::open(&path).and_then(|s| summary(&s, since_s)) {
            Ok(rows) => rows,
            Err(e) => return fail(e),
        }
    } else {
        Vec::new()
    };
    if json {
        let out = serde_json::json!({"database": path, "since": since, "rows": rows});
        println!("{}", serde_json::to_string_pretty(&out).expect("serializable rows"));
    } else {
        print_text(&rows, since);
        eprintln!("({})", path.display());
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::super::{retained_share, Route, Shown, Window};
    use super::*;

    #[test]
    fn figures_per_model_and_language_and_no_code_stored() {
        let path = std::env::temp_dir().join(format!("ghostline-stats-{}.sqlite", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let stats = Stats::open(&path).unwrap();
        let shown = |language, route, latency_ms, chars| {
            stats.shown(&Shown { model: "qwen2.5-coder-1.5b", language, route, latency_ms, chars }).unwrap()
        };
        let a = shown("python", Route::Ahead, 40.0, 20);
        let b = shown("python", Route::Model, 200.0, 10);
        let _c = shown("python", Route::TypedAhead, 1.0, 5);
        let d = shown("rust", Route::Model, 90.0, 8);
        // A whole accept, and partial (word) accepts counted by the length accepted so far.
        let code = "let secret_code_marker = 42;";
        stats.accepted(a, code.len()).unwrap();
        stats.accepted(b, 4).unwrap();
        stats.accepted(b, 7).unwrap();
        stats.accepted(b, 5).unwrap();
        assert_eq!(stats.accepted_chars(b).unwrap(), Some(7));
        stats.retained(a, Window::Seconds30, retained_share(code, code)).unwrap();
        stats.retained(a, Window::Minutes5, retained_share(code, "let secret_code_marker = 43;")).unwrap();
        stats.retained(b, Window::Seconds30, 0.0).unwrap();
        let _ = d;
        let rows = summary(&stats, 0).unwrap();
        assert_eq!(rows.len(), 2);
        let py = &rows[0];
        assert_eq!((py.language.as_str(), py.shown, py.accepted, py.accepted_chars), ("python", 3, 2, code.len() as u64 + 7));
        assert!((py.acceptance_rate - 2.0 / 3.0).abs() < 1e-9);
        // Weighted by accepted characters: a kept all 28 at 30 s, b kept none of its 7.
        let r30 = py.retained_30s.unwrap();
        assert!((r30 - 28.0 / 35.0).abs() < 1e-9, "{r30}");
        assert!((py.retained_5m.unwrap() - (1.0 - 1.0 / 28.0)).abs() < 1e-9);
        assert_eq!((py.latency_p50_ms, py.latency_p95_ms), (Some(40.0), Some(200.0)));
        assert!((py.share_ahead - 1.0 / 3.0).abs() < 1e-9 && (py.share_typed_ahead - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!((rows[1].language.as_str(), rows[1].accepted, rows[1].retained_30s), ("rust", 0, None));
        // Later than everything: nothing.
        assert!(summary(&stats, super::super::now_s() + 10).unwrap().is_empty());
        drop(stats);
        // The database holds numbers and names of models, languages and routes: never the code
        // whose retention was measured.
        let bytes = std::fs::read(&path).unwrap();
        assert!(!bytes.windows(code.len()).any(|w| w == code.as_bytes()));
        assert!(bytes.windows(6).any(|w| w == b"python"), "the control: text columns are readable in the file");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn the_table_is_bounded() {
        let path = std::env::temp_dir().join(format!("ghostline-stats-bound-{}.sqlite", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let stats = Stats::open(&path).unwrap();
        let s = Shown { model: "m", language: "python", route: Route::Model, latency_ms: 1.0, chars: 1 };
        stats.db.execute_batch("BEGIN").unwrap();
        for _ in 0..super::super::MAX_ROWS + 1000 {
            stats.shown_at(&s, 1).unwrap();
        }
        stats.db.execute_batch("COMMIT").unwrap();
        assert_eq!(stats.count().unwrap(), super::super::MAX_ROWS);
        drop(stats);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn since() {
        assert_eq!(parse_since("7d").unwrap(), Some(std::time::Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_since("12h").unwrap(), Some(std::time::Duration::from_secs(12 * 3600)));
        assert_eq!(parse_since("all").unwrap(), None);
        assert!(parse_since("soon").is_err() && parse_since("-1d").is_err());
        assert_eq!(parse_since("36500d").unwrap(), Some(MAX_SINCE));
        // Out of range: an error that says so, not a panic.
        for text in ["1e18d", "18446744073709551615s", "36501d", "1e300d", "99999999999999999999h"] {
            let e = parse_since(text).unwrap_err();
            assert!(e.contains("out of range"), "{text}: {e}");
        }
    }

}
