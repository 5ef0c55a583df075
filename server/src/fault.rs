//! Fault injection for the containment tests: `GHOSTLINE_FAULTS=point,point…` makes each named
//! point panic once per process. Points: `completion` (inside a completion handler), `job`
//! (inside a model job, caught on the model thread), `thread` (kills the model thread).
//! Unset in normal use, where each check is one relaxed atomic load after the first.

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

/// The message of the last panic on any thread, as recorded by [`install_panic_hook`].
pub fn last_panic() -> Option<String> {
    LAST_PANIC.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
}

static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Panics are logged through `tracing` (stderr or the log file, never stdout) and remembered,
/// so that a request that catches one, or a model thread that dies of one, can say why.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let message = match info.payload().downcast_ref::<&str>() {
            Some(s) => (*s).to_owned(),
            None => info.payload().downcast_ref::<String>().cloned().unwrap_or_else(|| "unknown panic".into()),
        };
        let at = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        let thread = std::thread::current().name().unwrap_or("unnamed").to_owned();
        tracing::error!(thread, at, "panic: {message}");
        *LAST_PANIC.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(format!("{message} ({at})"));
    }));
}
