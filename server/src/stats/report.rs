//! `ghostline stats [--since 7d] [--json]`: per model and language, suggestions shown and
//! accepted, the acceptance rate, accepted characters, the share of them retained after 30 s and
//! 5 minutes, keystroke-to-suggestion p50/p95, and how the suggestions were answered.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;

use super::{sql, DbError, Stats};

/// One model and language.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub model: String,
    pub language: String,
    /// Next edits (route `next-edit`), counted apart from completions.
    pub next_edits: bool,
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
    let mut groups: BTreeMap<(String, String, bool), Acc> = BTreeMap::new();
    for row in rows {
        let (model, language, route, latency, accepted, r30, r5) = row.map_err(sql)?;
        let a = groups.entry((model, language, route == "next-edit")).or_default();
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
        .map(|((model, language, next_edits), mut a)| {
            a.latencies.sort_by(f64::total_cmp);
            let share = |n: u64| n as f64 / a.shown.max(1) as f64;
            let retained = |(kept, of): (f64, f64)| (of > 0.0).then(|| kept / of);
            Row {
                model,
                language,
                next_edits,
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
        println!("{} · {}{}", r.model, r.language, if r.next_edits { " · next edits" } else { "" });
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

/// `doctor`'s verdict on the statistics: `Ok`, or a warning or failure with what to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Health {
    Ok(String),
    Warn { detail: String, fix: String },
    Fail { detail: String, fix: String },
}

/// What to do about a database that cannot be used.
fn unusable(path: &std::path::Path, e: &DbError) -> Health {
    match e {
        DbError::Busy(m) => Health::Warn {
            detail: format!("{}: {m} (another process holds a lock)", path.display()),
            fix: "try again; the server keeps what it shows meanwhile and writes it when the lock goes".into(),
        },
        DbError::Fatal(m) => Health::Fail {
            detail: format!("{}: {m}; the server records no statistics", path.display()),
            fix: format!(
                "move {} away or delete it (a new one is made at the next suggestion), or set stats.path to another file, or stats.enabled to false",
                path.display()
            ),
        },
    }
}

/// `doctor`'s line: the last 7 days in one sentence (shown, accepted, rate, retained at 5
/// minutes), or why there is nothing. Reads only: makes, writes and re-permissions no file. A
/// file that is not a statistics database fails; one this user cannot write warns (the server
/// would record nothing).
pub fn doctor_line(settings: &crate::config::StatsConfig) -> Health {
    if !settings.enabled {
        return Health::Ok("off (stats.enabled: false): nothing is recorded".into());
    }
    let Some(path) = settings.path.clone().or_else(Stats::default_path) else {
        return Health::Ok("no data directory (HOME, XDG_DATA_HOME unset) and no stats.path: nothing is recorded".into());
    };
    let stats = match Stats::open_read(&path) {
        Ok(Some(stats)) => stats,
        Ok(None) => return Health::Ok(format!("nothing recorded yet ({})", path.display())),
        Err(e) => return unusable(&path, &e),
    };
    let week = super::now_s() - 7 * 86_400;
    let figures = stats
        .db
        .query_row(
            "SELECT COUNT(*), COALESCE(SUM(accepted_chars > 0), 0),
                    SUM(CASE WHEN accepted_chars > 0 AND retained_5m IS NOT NULL THEN retained_5m * accepted_chars END),
                    SUM(CASE WHEN accepted_chars > 0 AND retained_5m IS NOT NULL THEN accepted_chars END)
             FROM suggestions WHERE at_s >= ?1",
            [week],
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, Option<f64>>(2)?, r.get::<_, Option<f64>>(3)?)),
        )
        .map_err(DbError::from)
        .and_then(|f| Ok((f, stats.lost_since(week)?)));
    let ((shown, accepted, kept, of), lost) = match figures {
        Ok(f) => f,
        Err(e) => return unusable(&path, &e),
    };
    let rate = if shown > 0 { pct(accepted as f64 / shown as f64) } else { "–".into() };
    let retained = match (kept, of) {
        (Some(k), Some(o)) if o > 0.0 => pct(k / o),
        _ => "–".into(),
    };
    let lost = if lost > 0 { format!(", {lost} writes lost while the database was locked") } else { String::new() };
    let detail = format!(
        "last 7 days: {shown} shown, {accepted} accepted ({rate}), retained at 5 min {retained}{lost} (`ghostline stats` for more; {})",
        path.display()
    );
    // Writable? Opening for writing (no truncation, no write) changes nothing in the file.
    match std::fs::OpenOptions::new().write(true).open(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Health::Warn {
            detail: format!("{detail}; but the file is read-only for this user: the server records nothing"),
            fix: format!("make {} writable (chmod u+w), or set stats.path to another file", path.display()),
        },
        _ => Health::Ok(detail),
    }
}

/// Runs `ghostline stats`: reads the database only (a missing one is "no statistics yet" and
/// is not made).
pub fn run(since: &Since, json: bool, db: Option<PathBuf>) -> ExitCode {
    let fail = |m: String| {
        eprintln!("ghostline stats: {m}");
        ExitCode::FAILURE
    };
    let Some(path) = db.or_else(Stats::default_path) else {
        return fail("no data directory: set HOME or XDG_DATA_HOME, or pass --db".into());
    };
    let since_s = since.window.map_or(0, |w| (super::now_s() - w.as_secs() as i64).max(0));
    let read = Stats::open_read(&path).and_then(|stats| match stats {
        Some(s) => Ok(Some((summary(&s, since_s).map_err(DbError::Fatal)?, s.lost_since(since_s)?))),
        None => Ok(None),
    });
    let (rows, lost, recorded) = match read {
        Ok(Some((rows, lost))) => (rows, lost, true),
        Ok(None) => (Vec::new(), 0, false),
        Err(e) => {
            return match unusable(&path, &e) {
                Health::Warn { detail, fix } | Health::Fail { detail, fix } => fail(format!("{detail}\n  fix: {fix}")),
                Health::Ok(detail) => fail(detail),
            }
        }
    };
    if json {
        let out = serde_json::json!({"database": path, "since": since.text, "rows": rows, "lost": lost});
        println!("{}", serde_json::to_string_pretty(&out).expect("serializable rows"));
    } else {
        if recorded {
            print_text(&rows, &since.text);
        } else {
            println!("no statistics yet");
        }
        if lost > 0 {
            println!("{lost} writes (suggestions, accepts, retention checks) were lost while the database stayed locked");
        }
        eprintln!("({})", path.display());
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::super::{retained_share, Route, Shown, Window};
    use super::*;

    #[test]
    fn next_edits_are_counted_apart_from_completions() {
        let dir = temp("next");
        let path = dir.join("stats.sqlite");
        let stats = Stats::open(&path).unwrap();
        let shown = |route| stats.shown(&Shown { model: "m", language: "python", route, latency_ms: 5.0, chars: 6 }).unwrap();
        let (completion, next) = (shown(Route::Model), shown(Route::NextEdit));
        shown(Route::NextEdit);
        stats.accepted(next, 6).unwrap();
        let _ = completion;
        let rows = summary(&stats, 0).unwrap();
        let view: Vec<(bool, u64, u64)> = rows.iter().map(|r| (r.next_edits, r.shown, r.accepted)).collect();
        assert_eq!(view, [(false, 1, 0), (true, 2, 1)], "one completion, two next edits (one accepted)");
    }

    #[test]
    fn figures_per_model_and_language() {
        let dir = temp("figures");
        let path = dir.join("stats.sqlite");
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
    }

    /// The code goes in where the server hands it over (the tracker: the suggestion's text, the
    /// document around it, its file's name, through an accept and both retention checks) and
    /// none of it comes out in the database's file.
    #[test]
    fn no_code_or_file_name_is_stored() {
        use super::super::track::{Edit, Offer, Tracker};
        let dir = temp("nocode");
        let path = dir.join("stats.sqlite");
        let settings = crate::config::StatsConfig {
            enabled: true,
            path: Some(path.clone()),
            retention: [std::time::Duration::from_millis(20), std::time::Duration::from_millis(40)],
        };
        let code = "secret_code_marker = compute_the_answer(42)";
        let uri = "file:///project/confidential_module_name.py";
        let before = "import os\nvalue = ";
        let doc = ropey::Rope::from_str(&format!("{before}{code}\n"));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let tracker = Tracker::default();
        runtime.block_on(async {
            let offer = Offer {
                uri: uri.into(),
                anchor: before.chars().count(),
                text: code.into(),
                model: "m".into(),
                language: "python".into(),
                route: Route::Model,
                requested: std::time::Instant::now(),
            };
            let id = tracker.shown(&settings, offer).expect("statistics are on");
            assert!(tracker.accepted(id, None, &doc));
            // An edit inside the accepted text: the retention checks measure something below 1.
            let at = before.chars().count() + 7;
            tracker.edited(uri, &[Edit { start: at, end: at + 4, text: "other_words" }]);
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        });
        assert_eq!(tracker.flush(std::time::Duration::from_secs(30)).map(|f| f.pending), Some(0));
        let stats = Stats::open_read(&path).unwrap().unwrap();
        let rows = summary(&stats, 0).unwrap();
        assert_eq!((rows.len(), rows[0].accepted_chars), (1, code.chars().count() as u64), "{rows:?}");
        assert!(rows[0].retained_5m.is_some_and(|r| r > 0.0 && r < 1.0), "both checks recorded: {rows:?}");
        drop(stats);
        let mut bytes = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            bytes.extend(std::fs::read(entry.unwrap().path()).unwrap());
        }
        let contains = |needle: &str| bytes.windows(needle.len()).any(|w| w == needle.as_bytes());
        assert!(contains("python"), "the control: text columns are readable in the file");
        for needle in ["secret_code_marker", "compute_the_answer", "other_words", "confidential_module_name", "/project/", "import os"] {
            assert!(!contains(needle), "the database holds {needle:?}");
        }
    }

    #[test]
    fn the_table_is_bounded() {
        let dir = temp("bound");
        let path = dir.join("stats.sqlite");
        let stats = Stats::open(&path).unwrap();
        let s = Shown { model: "m", language: "python", route: Route::Model, latency_ms: 1.0, chars: 1 };
        stats.db.execute_batch("BEGIN").unwrap();
        for _ in 0..super::super::MAX_ROWS + 1000 {
            stats.shown_at(&s, 1).unwrap();
        }
        stats.db.execute_batch("COMMIT").unwrap();
        assert_eq!(stats.count().unwrap(), super::super::MAX_ROWS);
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

    fn temp(name: &str) -> crate::testing::TempDir {
        crate::testing::TempDir::new(&format!("stats-{name}"))
    }

    fn on(path: &std::path::Path) -> crate::config::StatsConfig {
        crate::config::StatsConfig { enabled: true, path: Some(path.to_owned()), retention: [std::time::Duration::from_secs(1); 2] }
    }

    /// Reading makes nothing: a missing file stays missing, an empty one stays empty (and is
    /// "nothing yet"), a file's permissions stay as they are.
    #[test]
    fn reading_writes_nothing() {
        let dir = temp("read");
        let missing = dir.join("missing.sqlite");
        assert!(Stats::open_read(&missing).unwrap().is_none());
        assert!(doctor_line(&on(&missing)) == Health::Ok(format!("nothing recorded yet ({})", missing.display())));
        assert!(!missing.exists());
        let empty = dir.join("empty.sqlite");
        std::fs::write(&empty, b"").unwrap();
        assert!(Stats::open_read(&empty).unwrap().is_none());
        assert!(matches!(doctor_line(&on(&empty)), Health::Ok(_)));
        assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0, "an empty file was given a schema");
        // A database with a row, read-only for everyone.
        let full = dir.join("full.sqlite");
        let s = Stats::open(&full).unwrap();
        s.shown(&Shown { model: "m", language: "python", route: Route::Model, latency_ms: 1.0, chars: 3 }).unwrap();
        drop(s);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&full, std::fs::Permissions::from_mode(0o444)).unwrap();
            let bytes = std::fs::read(&full).unwrap();
            let stats = Stats::open_read(&full).unwrap().unwrap();
            assert_eq!(summary(&stats, 0).unwrap()[0].shown, 1);
            drop(stats);
            let _ = doctor_line(&on(&full));
            assert_eq!(std::fs::metadata(&full).unwrap().permissions().mode() & 0o777, 0o444, "permissions changed by a read");
            assert_eq!(std::fs::read(&full).unwrap(), bytes);
        }
    }

    /// A file that is not a database fails doctor's check, with what to do; a locked one warns.
    #[test]
    fn doctor_fails_a_broken_database_and_warns_on_a_locked_one() {
        let dir = temp("doctor");
        let bad = dir.join("bad.sqlite");
        std::fs::write(&bad, "this is not a database, only text that fills a page and more: ".repeat(20)).unwrap();
        match doctor_line(&on(&bad)) {
            Health::Fail { detail, fix } => {
                assert!(detail.contains("not a database") && detail.contains("bad.sqlite"), "{detail}");
                assert!(fix.contains("delete it"), "{fix}");
            }
            other => panic!("a broken database passed: {other:?}"),
        }
        let locked = dir.join("locked.sqlite");
        drop(Stats::open(&locked).unwrap());
        let holder = rusqlite::Connection::open(&locked).unwrap();
        holder.execute_batch("BEGIN EXCLUSIVE; INSERT INTO lost VALUES (0, 0);").unwrap();
        match doctor_line(&on(&locked)) {
            Health::Warn { detail, .. } => assert!(detail.contains("locked"), "{detail}"),
            other => panic!("a locked database: {other:?}"),
        }
        holder.execute_batch("COMMIT").unwrap();
        assert!(matches!(doctor_line(&on(&locked)), Health::Ok(_)));
    }
}
