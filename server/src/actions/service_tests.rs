//! Unit tests of the action service's decisions (route, fallback, breaker, budget, cache), with
//! the cloud and the local model scripted through [`Peers`]: no server, no model.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::config::Options;
use crate::testing::TempDir;

const SOURCE: &str = "def add(a, b):\n    result = a\n    result += b\n    return result\n";
const GOOD: &str = "```python\ndef add(a, b):\n    return a + b\n```\n";

/// The cloud and the local model answer what the test scripted, in order, and count the calls.
#[derive(Default)]
struct Scripted {
    cloud: Mutex<VecDeque<Result<CloudAnswer, CloudError>>>,
    local: Mutex<VecDeque<Result<String, String>>>,
    no_local_model: bool,
    cloud_calls: AtomicUsize,
    local_calls: AtomicUsize,
    reports: Mutex<Vec<String>>,
}

impl Scripted {
    fn with_cloud(self, answers: impl IntoIterator<Item = Result<CloudAnswer, CloudError>>) -> Self {
        self.cloud.lock().unwrap().extend(answers);
        self
    }
    fn with_local(self, answers: impl IntoIterator<Item = Result<String, String>>) -> Self {
        self.local.lock().unwrap().extend(answers);
        self
    }
    fn calls(&self) -> (usize, usize) {
        (self.cloud_calls.load(Ordering::SeqCst), self.local_calls.load(Ordering::SeqCst))
    }
}

impl Peers for Scripted {
    async fn cloud(&self, _: &CloudConfig, _: &[(String, String)], _: u32, _: &ChatStop, _: &CancelFlag) -> Result<CloudAnswer, CloudError> {
        self.cloud_calls.fetch_add(1, Ordering::SeqCst);
        self.cloud.lock().unwrap().pop_front().expect("a scripted cloud answer")
    }
    async fn local(&self, _: ChatRequest) -> Result<String, String> {
        self.local_calls.fetch_add(1, Ordering::SeqCst);
        self.local.lock().unwrap().pop_front().expect("a scripted local answer")
    }
    fn local_context(&self) -> Option<u64> {
        (!self.no_local_model).then_some(8192)
    }
    async fn report(&self, message: String) {
        self.reports.lock().unwrap().push(message);
    }
}

fn answer(text: &str, tokens: u64) -> Result<CloudAnswer, CloudError> {
    Ok(CloudAnswer { text: text.into(), prompt_tokens: tokens, completion_tokens: 0, attempts: 1, total_ms: 1.0 })
}

fn refused() -> Result<CloudAnswer, CloudError> {
    Err(CloudError::Connect("connection refused".into()))
}

/// Refactors may go to the cloud (privacy `allow`, an endpoint); no answer cache. The cache's
/// folder (made even when it holds nothing) is a fresh one: keep its guard while the config is
/// used.
fn config(edit: impl FnOnce(&mut Config)) -> (Config, TempDir) {
    let cache = TempDir::new("service-test");
    let mut c = Options::default().resolve(None);
    c.privacy = Privacy::Allow;
    c.cloud.endpoint = Some("http://127.0.0.1:9/v1".into());
    c.cloud.cache_entries = 0;
    c.cloud.cache_dir = Some(cache.to_path_buf());
    c.cloud.breaker_failures = 2;
    c.cloud.breaker_cooldown_s = 600;
    edit(&mut c);
    (c, cache)
}

fn request() -> Request {
    let spec = crate::syntax::by_language_id("python").unwrap();
    Request {
        kind: Kind::Refactor,
        title: None,
        spec,
        tree: spec.parse(SOURCE),
        text: SOURCE.into(),
        cursor: SOURCE.find("result").unwrap(),
        path: None,
        root: None,
    }
}

/// Prepares and answers one refactor: its decision and its answer (or error).
fn run(service: &ActionService, config: &Config, peers: &Scripted) -> (Decision, Result<Answered, String>) {
    let prepared = match service.prepare(request(), config, peers, &|_| None) {
        Ok(p) => p,
        Err(e) => return (Decision { route: Route::Unavailable, reason: e.route.unwrap_or_default() }, Err(e.message)),
    };
    let answered = futures::executor::block_on(service.answer(&prepared, config, peers));
    if let Ok(a) = &answered {
        service.conclude(&prepared, a);
    }
    (prepared.decision.clone(), answered)
}

#[test]
fn a_failing_cloud_falls_back_to_the_local_model_until_the_breaker_keeps_actions_local() {
    let service = ActionService::default();
    let (config, _cache) = config(|_| {});
    let peers = Scripted::default().with_cloud([refused(), refused()]).with_local([Ok(GOOD.into()), Ok(GOOD.into()), Ok(GOOD.into())]);
    for n in 1..=2 {
        let (decision, answered) = run(&service, &config, &peers);
        assert_eq!(decision.route, Route::Cloud, "{decision:?}");
        let answered = answered.unwrap();
        assert_eq!(answered.route, Route::Local);
        let why = answered.fallback.as_deref().unwrap();
        assert!(why.starts_with("the cloud failed: cannot connect"), "{why}");
        assert_eq!(peers.calls(), (n, n));
        assert!(service.last_route().unwrap().ends_with("; ran locally instead"), "{:?}", service.last_route());
    }
    assert_eq!(peers.reports.lock().unwrap().len(), 2, "each fallback is reported");
    // Two failures in a row: the breaker is open, the next action stays local without asking.
    let (decision, answered) = run(&service, &config, &peers);
    assert_eq!(decision.route, Route::Local, "{decision:?}");
    assert!(decision.reason.contains("failed 2 times in a row"), "{}", decision.reason);
    assert!(answered.unwrap().fallback.is_none());
    assert_eq!(peers.calls(), (2, 3), "the cloud was not asked");
    // Other breaker settings start a new count.
    let (config, _cache) = self::config(|c| c.cloud.breaker_failures = 3);
    let peers = Scripted::default().with_cloud([answer(GOOD, 10)]);
    assert_eq!(run(&service, &config, &peers).0.route, Route::Cloud);
}

#[test]
fn after_the_cooldown_one_success_closes_the_breaker() {
    let service = ActionService::default();
    let (config, _cache) = config(|c| {
        c.cloud.breaker_failures = 1;
        c.cloud.breaker_cooldown_s = 0;
    });
    let peers = Scripted::default().with_cloud([refused(), answer(GOOD, 10), answer(GOOD, 10)]).with_local([Ok(GOOD.into())]);
    assert!(run(&service, &config, &peers).1.unwrap().fallback.is_some());
    let (decision, answered) = run(&service, &config, &peers);
    assert!(decision.reason.contains("trying the cloud again"), "half-open: {}", decision.reason);
    assert_eq!(answered.unwrap().route, Route::Cloud);
    let (decision, _) = run(&service, &config, &peers);
    assert!(!decision.reason.contains("trying the cloud again"), "closed again: {}", decision.reason);
    assert_eq!(peers.calls(), (3, 1));
}

#[test]
fn an_unusable_cloud_answer_falls_back_but_is_no_breaker_failure() {
    let service = ActionService::default();
    let (config, _cache) = config(|c| c.cloud.breaker_failures = 1);
    let peers = Scripted::default().with_cloud([answer("Sorry, I can't.", 10), answer(GOOD, 10)]).with_local([Ok(GOOD.into())]);
    let answered = run(&service, &config, &peers).1.unwrap();
    assert_eq!(answered.route, Route::Local);
    assert!(answered.fallback.as_deref().unwrap().starts_with("the cloud's answer was unusable"), "{answered:?}");
    // The endpoint answered: the breaker (threshold 1) stays closed.
    let (decision, answered) = run(&service, &config, &peers);
    assert_eq!((decision.route, answered.unwrap().route), (Route::Cloud, Route::Cloud));
}

#[test]
fn a_cancelled_cloud_request_is_no_breaker_failure() {
    let service = ActionService::default();
    let (config, _cache) = config(|c| c.cloud.breaker_failures = 1);
    let peers = Scripted::default().with_cloud([Err(CloudError::Cancelled), answer(GOOD, 10)]).with_local([Ok(GOOD.into())]);
    assert_eq!(run(&service, &config, &peers).1.unwrap().route, Route::Local);
    assert_eq!(run(&service, &config, &peers).0.route, Route::Cloud);
}

#[test]
fn cloud_answers_spend_the_daily_budget_until_actions_stay_local() {
    let service = ActionService::default();
    let (config, _cache) = config(|c| c.cloud.daily_token_budget = 1_000);
    // The first answer reports 900 tokens; the second action needs more than is left.
    let peers = Scripted::default().with_cloud([answer(GOOD, 900)]).with_local([Ok(GOOD.into())]);
    let (decision, answered) = run(&service, &config, &peers);
    assert_eq!((decision.route, answered.unwrap().route), (Route::Cloud, Route::Cloud));
    let (decision, answered) = run(&service, &config, &peers);
    assert_eq!(decision.route, Route::Local);
    assert!(decision.reason.starts_with("the daily cloud budget would be exceeded (900 of 1000 tokens used"), "{}", decision.reason);
    assert_eq!(answered.unwrap().route, Route::Local);
    assert_eq!(peers.calls(), (1, 1));
}

#[test]
fn an_answer_without_token_counts_spends_an_estimate() {
    let service = ActionService::default();
    let (config, _cache) = config(|c| c.cloud.daily_token_budget = 1_000_000);
    let peers = Scripted::default().with_cloud([answer(GOOD, 0)]);
    assert_eq!(run(&service, &config, &peers).1.unwrap().route, Route::Cloud);
    let used = service.budget.lock().unwrap().used_on(route::today());
    assert!(used > route::estimate_tokens(GOOD), "prompt and answer estimated: {used}");
}

#[test]
fn when_both_routes_fail_the_error_names_both_and_nothing_is_concluded() {
    let service = ActionService::default();
    let (config, _cache) = config(|_| {});
    let peers = Scripted::default().with_cloud([refused()]).with_local([Err("the model thread stopped".into())]);
    let error = run(&service, &config, &peers).1.unwrap_err();
    assert!(error.contains("the cloud failed: cannot connect"), "{error}");
    assert!(error.ends_with("; the local model then failed too: the model thread stopped"), "{error}");
    // `lastRoute` is the route the action was given, not a conclusion it never reached.
    assert!(service.last_route().unwrap().contains("— cloud: refactors prefer the cloud"), "{:?}", service.last_route());
    // With no local model, the fallback has nothing to run on.
    let peers = Scripted { no_local_model: true, ..Scripted::default() }.with_cloud([refused()]);
    let error = run(&service, &config, &peers).1.unwrap_err();
    assert!(error.ends_with("; the local model then failed too: no local model is loaded"), "{error}");
    assert_eq!(peers.calls(), (1, 0));
}

#[test]
fn a_local_answer_that_does_not_parse_is_an_error_not_an_edit() {
    let service = ActionService::default();
    let (config, _cache) = config(|c| c.privacy = Privacy::LocalOnly);
    let peers = Scripted::default().with_local([Ok("```python\ndef add(a, b:\n```\n".into())]);
    let (decision, answered) = run(&service, &config, &peers);
    assert_eq!(decision.route, Route::Local);
    assert!(answered.is_err(), "{answered:?}");
    assert_eq!(peers.calls(), (0, 1));
}

#[test]
fn with_no_route_the_action_fails_before_generating_and_says_why() {
    let service = ActionService::default();
    let (config, _cache) = config(|c| c.offline = true);
    let peers = Scripted { no_local_model: true, ..Scripted::default() };
    let error = run(&service, &config, &peers).1.unwrap_err();
    assert!(error.ends_with("offline mode: nothing leaves the machine, and no local model is loaded"), "{error}");
    assert!(service.last_route().unwrap().contains("— unavailable: offline mode"), "{:?}", service.last_route());
    assert_eq!(peers.calls(), (0, 0));
    // A failure before routing replaces an earlier action's route in `lastRoute`.
    service.failed("Simplify `add`", "no function under the cursor any more", false);
    assert_eq!(service.last_route().unwrap(), "Simplify `add` — not run: no function under the cursor any more");
}

#[test]
fn the_answer_cache_answers_the_same_prompt_without_the_endpoint() {
    let dir = TempDir::new("service-cache");
    let (config, _cache) = config(|c| {
        c.cloud.cache_entries = 8;
        c.cloud.cache_dir = Some(dir.to_path_buf());
    });
    let service = ActionService::default();
    let peers = Scripted::default().with_cloud([answer(GOOD, 10)]);
    assert!(!run(&service, &config, &peers).1.unwrap().cached);
    let answered = run(&service, &config, &peers).1.unwrap();
    assert!(answered.cached && answered.route == Route::Cloud, "{answered:?}");
    assert!(service.last_route().unwrap().ends_with("(cached answer)"), "{:?}", service.last_route());
    assert_eq!(peers.calls(), (1, 0));
}

#[test]
fn token_caps_follow_the_task_and_the_region() {
    assert_eq!(max_tokens(&Kind::Docstring, 1024, 10_000), 64);
    assert_eq!(max_tokens(&Kind::Tests, 1024, 10), 384);
    assert_eq!(max_tokens(&Kind::Tests, 200, 10), 200);
    assert_eq!(max_tokens(&Kind::Refactor, 1024, 140), 40 * 2 + 96);
    assert_eq!(max_tokens(&Kind::Refactor, 100, 70_000), 100);
}
