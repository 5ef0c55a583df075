//! Fault injection for the containment tests: `GHOSTLINE_FAULTS=point,point…` makes each named
//! point panic once per process. Points: `completion` (inside a completion handler), `job`
//! (inside a model job, caught on the model thread), `thread` (kills the model thread).
//! Unset in normal use, where each check is one relaxed atomic load after the first.
//!
//! Holds, for tests that must see work in the middle without racing the clock:
//! `GHOSTLINE_HOLD=point=file,…` stops the thread that reaches a named point until `file`
//! exists (the test creates it), once per process. Points: `index` (the index build, halfway
//! through its files), `host-job` (a window's model thread in the shared host, before the first
//! job any window runs; the host inherits the environment of the language server that starts it).

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

fn armed() -> &'static Mutex<HashSet<String>> {
    static ARMED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    ARMED.get_or_init(|| {
        let points = std::env::var("GHOSTLINE_FAULTS").unwrap_or_default();
        Mutex::new(points.split(',').map(str::trim).filter(|p| !p.is_empty()).map(String::from).collect())
    })
}

/// Panics the first time `point` is reached, if `GHOSTLINE_FAULTS` names it.
pub fn point(point: &str) {
    let fire = armed().lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(point);
    if fire {
        panic!("injected fault at `{point}` (GHOSTLINE_FAULTS)");
    }
}

fn holds() -> &'static Mutex<Vec<(String, std::path::PathBuf)>> {
    static HOLDS: OnceLock<Mutex<Vec<(String, std::path::PathBuf)>>> = OnceLock::new();
    HOLDS.get_or_init(|| {
        let holds = std::env::var("GHOSTLINE_HOLD").unwrap_or_default();
        let parsed = holds.split(',').filter_map(|h| h.split_once('=')).map(|(p, f)| (p.trim().to_owned(), std::path::PathBuf::from(f))).collect();
        Mutex::new(parsed)
    })
}

/// Waits, the first time `point` is reached, until the file `GHOSTLINE_HOLD` names for it
/// exists (at most ten minutes: a test that forgot to release it fails on its own timeout
/// first, and the server goes on).
pub fn hold(point: &str) {
    let file = {
        let mut holds = holds().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match holds.iter().position(|(p, _)| p == point) {
            Some(i) => holds.remove(i).1,
            None => return,
        }
    };
    tracing::info!("held at `{point}` until {} exists (GHOSTLINE_HOLD)", file.display());
    let started = std::time::Instant::now();
    while !file.exists() && started.elapsed() < std::time::Duration::from_secs(600) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    tracing::info!("released at `{point}` after {:.1} s", started.elapsed().as_secs_f64());
}

/// The message of the last panic on any thread, as recorded by [`install_panic_hook`].
pub fn last_panic() -> Option<String> {
    LAST_PANIC.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
}

static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// `message` with every quoted span (between backquotes, single or double quotes) and what
/// follows a line break replaced by `…`: the standard library quotes the string it was slicing
/// (`… is not a char boundary … of `text``), and assertions print their values on the lines
/// after the first — document text, which no log line or error may carry unless
/// `debug.logCode` is on. Where and how the panic happened is kept.
pub fn withhold_quoted(message: &str) -> String {
    let first = message.lines().next().unwrap_or("");
    let mut out = String::with_capacity(first.len());
    let mut open: Option<char> = None;
    for c in first.chars() {
        match open {
            Some(q) if c == q => {
                out.push(c);
                open = None;
            }
            Some(_) => {}
            // An apostrophe inside a word (`can't`) opens nothing.
            None if c == '`' || c == '"' || (c == '\'' && !out.ends_with(|p: char| p.is_alphanumeric())) => {
                out.push(c);
                out.push('…');
                open = Some(c);
            }
            None => out.push(c),
        }
    }
    if open.is_some() {
        out.push(open.unwrap_or('`'));
    }
    if message.contains('\n') {
        out.push_str(" …");
    }
    out
}

/// Panics are logged through `tracing` (stderr or the log file, never stdout) and remembered,
/// so that a request that catches one, or a model thread that dies of one, can say why —
/// without the quoted text of the message unless `debug.logCode` is on ([`withhold_quoted`]).
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let message = match info.payload().downcast_ref::<&str>() {
            Some(s) => (*s).to_owned(),
            None => info.payload().downcast_ref::<String>().cloned().unwrap_or_else(|| "unknown panic".into()),
        };
        let message = if crate::config::log_code() { message } else { withhold_quoted(&message) };
        let at = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        let thread = std::thread::current().name().unwrap_or("unnamed").to_owned();
        tracing::error!(thread, at, "panic: {message}");
        *LAST_PANIC.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(format!("{message} ({at})"));
    }));
}

#[cfg(test)]
mod tests {
    use super::withhold_quoted;

    #[test]
    fn the_sliced_text_of_a_panic_is_withheld() {
        let text = format!("#{}\nsecret = 1", "é".repeat(300));
        let message = std::panic::catch_unwind(|| text[..2].len()).err().map(|p| p.downcast_ref::<String>().cloned().unwrap()).unwrap();
        assert!(message.contains("é"), "the standard library quotes the text: {message}");
        let withheld = withhold_quoted(&message);
        assert!(!withheld.contains('é') && !withheld.contains("secret"), "{withheld}");
        assert!(withheld.starts_with("end byte index 2 is not a char boundary; it is inside '…'"), "{withheld}");
    }

    #[test]
    fn assertion_values_and_quoted_names_are_withheld() {
        let m = "assertion `left == right` failed\n  left: \"def secret()\"\n right: \"x\"";
        assert_eq!(withhold_quoted(m), "assertion `…` failed …");
        assert_eq!(withhold_quoted("injected fault at `job` (GHOSTLINE_FAULTS)"), "injected fault at `…` (GHOSTLINE_FAULTS)");
        assert_eq!(withhold_quoted("can't open 'a.py"), "can't open '…'");
        assert_eq!(withhold_quoted("called `Option::unwrap()` on a `None` value"), "called `…` on a `…` value");
    }
}
