//! The router: decides whether a task runs on the local model or the cloud endpoint, and says
//! why in words a user can read. Pure: every input (privacy, availability, budget, breaker,
//! clock) is passed in, so each rule is a unit test.
//!
//! Completion goes no further than `model.endpoint` (a team's server, when set), and there only
//! for the files [`completion_endpoint`] allows; the cloud route never sees it. For code actions the order is: offline, privacy,
//! excluded files, no endpoint, local preference, the circuit breaker, the daily budget — each
//! of those keeps the task local — then a prompt too big for the local context, no local
//! model, or a cloud preference send it to the cloud; everything else stays local.

use std::time::{Duration, Instant};

use crate::config::{Prefer, Privacy};
use crate::model::Reach;

/// What is being asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    Completion,
    Tests,
    Docstring,
    Refactor,
    Fix,
}

impl Task {
    /// Plural, for reasons ("tests prefer the cloud…").
    pub fn name(self) -> &'static str {
        match self {
            Task::Completion => "completion",
            Task::Tests => "tests",
            Task::Docstring => "docstrings",
            Task::Refactor => "refactors",
            Task::Fix => "fixes",
        }
    }

    /// Where `auto` sends a task when privacy allows the cloud: the heavier tasks (whole test
    /// files, rewrites) gain most from a bigger model; a one-line docstring does not.
    pub fn prefers_cloud(self) -> bool {
        matches!(self, Task::Tests | Task::Refactor | Task::Fix)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Local,
    Cloud,
    /// Neither can run it (e.g. offline with no local model); the reason says what is needed.
    Unavailable,
}

impl Route {
    pub fn name(self) -> &'static str {
        match self {
            Route::Local => "local",
            Route::Cloud => "cloud",
            Route::Unavailable => "unavailable",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub route: Route,
    pub reason: String,
}

impl Decision {
    fn local(reason: impl Into<String>) -> Self {
        Decision { route: Route::Local, reason: reason.into() }
    }
    fn cloud(reason: impl Into<String>) -> Self {
        Decision { route: Route::Cloud, reason: reason.into() }
    }
}

/// Everything the router looks at.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    pub task: Task,
    /// Estimated prompt tokens plus the answer's token cap.
    pub tokens_needed: u64,
    /// Tokens the local model's context holds; `None` when no local model is available.
    pub local_context: Option<u64>,
    pub privacy: Privacy,
    pub offline: bool,
    /// An exclusion glob the file (or a file the prompt would include) matches.
    pub excluded_by: Option<&'a str>,
    pub cloud_configured: bool,
    pub prefer: Prefer,
    pub budget: BudgetState,
    pub breaker: BreakerState,
}

/// Today's cloud tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetState {
    pub used: u64,
    pub limit: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    /// Tripped after `failures` failures in a row; tries again after `retry_in`.
    Open { failures: u32, retry_in: Duration },
    /// The cool-down is over: one request may try the cloud again.
    HalfOpen,
}

/// Picks the route for one request.
pub fn route(i: &Inputs<'_>) -> Decision {
    let task = i.task.name();
    let stay_local = |reason: String| match i.local_context {
        Some(_) => Decision::local(reason),
        None => Decision { route: Route::Unavailable, reason: format!("{reason}, and no local model is loaded") },
    };
    if i.task == Task::Completion {
        return Decision::local("completion never leaves the machine");
    }
    if i.offline {
        return stay_local("offline mode: nothing leaves the machine".into());
    }
    match i.privacy {
        Privacy::LocalOnly => return stay_local("privacy is local-only".into()),
        Privacy::Redact | Privacy::Allow => {}
    }
    if let Some(glob) = i.excluded_by {
        return stay_local(format!("the file matches the exclusion `{glob}`, so it is never sent"));
    }
    if !i.cloud_configured {
        return stay_local("no cloud endpoint is configured".into());
    }
    if i.prefer == Prefer::Local {
        return stay_local(format!("{task} prefer the local model (settings)"));
    }
    if let BreakerState::Open { failures, retry_in } = i.breaker {
        return stay_local(format!(
            "the cloud failed {failures} times in a row; paused for {} s more",
            retry_in.as_secs().max(1)
        ));
    }
    if i.budget.used.saturating_add(i.tokens_needed) > i.budget.limit {
        return stay_local(format!(
            "the daily cloud budget would be exceeded ({} of {} tokens used, {} needed)",
            i.budget.used, i.budget.limit, i.tokens_needed
        ));
    }
    let half_open = if i.breaker == BreakerState::HalfOpen { " (trying the cloud again after a pause)" } else { "" };
    match i.local_context {
        None => return Decision::cloud(format!("no local model is loaded{half_open}")),
        Some(n) if i.tokens_needed > n => {
            return Decision::cloud(format!(
                "the prompt and answer (~{} tokens) exceed the local context ({n}){half_open}",
                i.tokens_needed
            ))
        }
        Some(_) => {}
    }
    match i.prefer {
        Prefer::Cloud => Decision::cloud(format!("{task} prefer the cloud (settings){half_open}")),
        Prefer::Auto if i.task.prefers_cloud() => Decision::cloud(format!("{task} prefer the cloud model when privacy allows{half_open}")),
        _ => Decision::local("the prompt fits the local context"),
    }
}

/// Whether a file's completions may go to `model.endpoint`, and how (else they run on this
/// machine's model, or get no suggestion). Offline, nothing goes; a trusted endpoint (a team's
/// own box, or loopback) sees what the local model would; an untrusted one what the cloud route
/// would: nothing with `privacy: "local-only"` (the default), never a file `cloud.exclude`
/// names, the prompt with its secrets replaced with `"redact"` ([`Reach::Redacted`]), and as it
/// is with `"allow"`.
pub fn completion_endpoint(trusted: bool, offline: bool, privacy: Privacy, excluded_by: Option<&str>) -> Reach {
    if offline {
        return Reach::Local("offline mode: nothing leaves the machine".into());
    }
    if trusted {
        return Reach::Endpoint;
    }
    if privacy == Privacy::LocalOnly {
        return Reach::Local("privacy is local-only and the endpoint is not trusted (`model.endpointTrusted`)".into());
    }
    if let Some(glob) = excluded_by {
        return Reach::Local(format!("the file matches the exclusion `{glob}`, so it is never sent to an untrusted endpoint"));
    }
    match privacy {
        Privacy::Redact => Reach::Redacted,
        _ => Reach::Endpoint,
    }
}

/// Opens after `threshold` cloud failures in a row, stays open for `cooldown`, then lets one
/// request through (half-open); a success closes it, a failure opens it again.
#[derive(Debug, Clone)]
pub struct Breaker {
    pub threshold: u32,
    pub cooldown: Duration,
    failures: u32,
    opened_at: Option<Instant>,
}

impl Breaker {
    pub fn new(threshold: u32, cooldown: Duration) -> Self {
        Breaker { threshold: threshold.max(1), cooldown, failures: 0, opened_at: None }
    }

    pub fn state(&self, now: Instant) -> BreakerState {
        match self.opened_at {
            None => BreakerState::Closed,
            Some(at) => {
                let elapsed = now.saturating_duration_since(at);
                if elapsed >= self.cooldown {
                    BreakerState::HalfOpen
                } else {
                    BreakerState::Open { failures: self.failures, retry_in: self.cooldown - elapsed }
                }
            }
        }
    }

    pub fn success(&mut self) {
        self.failures = 0;
        self.opened_at = None;
    }

    pub fn failure(&mut self, now: Instant) {
        self.failures += 1;
        if self.failures >= self.threshold {
            self.opened_at = Some(now);
        }
    }
}

/// Cloud tokens spent per day (days since the Unix epoch, UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Budget {
    pub day: u64,
    pub used: u64,
}

impl Budget {
    /// Today's usage; a new day starts from zero.
    pub fn used_on(&self, day: u64) -> u64 {
        if self.day == day {
            self.used
        } else {
            0
        }
    }

    pub fn spend(&mut self, day: u64, tokens: u64) {
        if self.day != day {
            *self = Budget { day, used: 0 };
        }
        self.used = self.used.saturating_add(tokens);
    }
}

/// Today as days since the Unix epoch (UTC).
pub fn today() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400)
}

/// A rough token count for routing (about 3.5 bytes a token for code and English with BPE
/// vocabularies; rounded up so a prompt is never judged smaller than it is by much).
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64 * 2).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Inputs<'static> {
        Inputs {
            task: Task::Tests,
            tokens_needed: 500,
            local_context: Some(4096),
            privacy: Privacy::Allow,
            offline: false,
            excluded_by: None,
            cloud_configured: true,
            prefer: Prefer::Auto,
            budget: BudgetState { used: 0, limit: 100_000 },
            breaker: BreakerState::Closed,
        }
    }

    fn check(i: Inputs<'_>, route: Route, reason_has: &str) {
        let d = super::route(&i);
        assert_eq!(d.route, route, "{d:?}");
        assert!(d.reason.contains(reason_has), "{:?} lacks {reason_has:?}", d.reason);
    }

    #[test]
    fn completion_never_leaves_the_machine() {
        check(Inputs { task: Task::Completion, tokens_needed: 1 << 40, ..base() }, Route::Local, "never leaves");
        check(Inputs { task: Task::Completion, local_context: None, ..base() }, Route::Local, "never leaves");
    }

    #[test]
    fn offline_and_local_only_never_pick_the_cloud() {
        for privacy in [Privacy::LocalOnly, Privacy::Redact, Privacy::Allow] {
            for task in [Task::Tests, Task::Docstring, Task::Refactor, Task::Fix] {
                for prefer in [Prefer::Auto, Prefer::Cloud, Prefer::Local] {
                    let i = Inputs { offline: true, privacy, task, prefer, tokens_needed: 1 << 20, ..base() };
                    assert_ne!(super::route(&i).route, Route::Cloud);
                    let i = Inputs { privacy: Privacy::LocalOnly, task, prefer, tokens_needed: 1 << 20, ..base() };
                    assert_ne!(super::route(&i).route, Route::Cloud);
                }
            }
        }
        check(Inputs { offline: true, ..base() }, Route::Local, "offline mode");
        check(Inputs { offline: true, local_context: None, ..base() }, Route::Unavailable, "no local model");
        check(Inputs { privacy: Privacy::LocalOnly, ..base() }, Route::Local, "local-only");
    }

    #[test]
    fn exclusions_endpoint_and_preference_keep_it_local() {
        check(Inputs { excluded_by: Some(".env"), ..base() }, Route::Local, "exclusion `.env`");
        check(Inputs { cloud_configured: false, ..base() }, Route::Local, "no cloud endpoint");
        check(Inputs { prefer: Prefer::Local, ..base() }, Route::Local, "tests prefer the local model");
        check(Inputs { prefer: Prefer::Local, tokens_needed: 9000, ..base() }, Route::Local, "prefer the local");
    }

    #[test]
    fn breaker_and_budget_keep_it_local() {
        let open = BreakerState::Open { failures: 3, retry_in: Duration::from_secs(42) };
        check(Inputs { breaker: open, ..base() }, Route::Local, "failed 3 times in a row; paused for 42 s");
        check(Inputs { budget: BudgetState { used: 99_800, limit: 100_000 }, ..base() }, Route::Local, "daily cloud budget");
        check(Inputs { budget: BudgetState { used: 0, limit: 0 }, ..base() }, Route::Local, "budget");
        check(Inputs { breaker: BreakerState::HalfOpen, ..base() }, Route::Cloud, "trying the cloud again");
    }

    #[test]
    fn size_availability_and_preference_pick_the_cloud() {
        check(Inputs { task: Task::Docstring, tokens_needed: 5000, ..base() }, Route::Cloud, "exceed the local context (4096)");
        check(Inputs { task: Task::Docstring, local_context: None, ..base() }, Route::Cloud, "no local model");
        check(Inputs { task: Task::Docstring, prefer: Prefer::Cloud, ..base() }, Route::Cloud, "docstrings prefer the cloud (settings)");
        check(Inputs { task: Task::Docstring, ..base() }, Route::Local, "fits the local context");
        check(base(), Route::Cloud, "tests prefer the cloud model when privacy allows");
        check(Inputs { task: Task::Fix, privacy: Privacy::Redact, ..base() }, Route::Cloud, "fixes prefer");
    }

    #[test]
    fn breaker_opens_after_repeated_failures_and_half_opens_after_the_cooldown() {
        let t0 = Instant::now();
        let mut b = Breaker::new(2, Duration::from_secs(10));
        b.failure(t0);
        assert_eq!(b.state(t0), BreakerState::Closed);
        b.failure(t0);
        assert_eq!(b.state(t0 + Duration::from_secs(4)), BreakerState::Open { failures: 2, retry_in: Duration::from_secs(6) });
        assert_eq!(b.state(t0 + Duration::from_secs(10)), BreakerState::HalfOpen);
        b.failure(t0 + Duration::from_secs(11)); // the half-open try failed: open again
        assert!(matches!(b.state(t0 + Duration::from_secs(12)), BreakerState::Open { failures: 3, .. }));
        b.success();
        assert_eq!(b.state(t0 + Duration::from_secs(12)), BreakerState::Closed);
    }

    #[test]
    fn budget_resets_each_day() {
        let mut b = Budget::default();
        b.spend(100, 700);
        b.spend(100, 300);
        assert_eq!(b.used_on(100), 1000);
        assert_eq!(b.used_on(101), 0);
        b.spend(101, 5);
        assert_eq!(b, Budget { day: 101, used: 5 });
        assert_eq!(estimate_tokens(&"x".repeat(700)), 200);
    }

    #[test]
    fn completions_go_to_an_untrusted_endpoint_only_where_the_cloud_route_would_go() {
        let local = |r: Reach, what: &str| matches!(&r, Reach::Local(why) if why.contains(what));
        assert_eq!(completion_endpoint(true, false, Privacy::LocalOnly, Some(".env")), Reach::Endpoint, "trusted: as the local model");
        assert!(local(completion_endpoint(true, true, Privacy::Allow, None), "offline"));
        assert!(local(completion_endpoint(false, true, Privacy::Allow, None), "offline"));
        assert!(local(completion_endpoint(false, false, Privacy::LocalOnly, None), "local-only"));
        assert_eq!(completion_endpoint(false, false, Privacy::Redact, None), Reach::Redacted, "redacted, as the cloud route");
        assert!(local(completion_endpoint(false, false, Privacy::Redact, Some("*.pem")), "*.pem"));
        assert!(local(completion_endpoint(false, false, Privacy::Allow, Some("*.pem")), "*.pem"));
        assert_eq!(completion_endpoint(false, false, Privacy::Allow, None), Reach::Endpoint);
    }
}
