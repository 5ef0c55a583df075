//! The cloud route for code actions: an OpenAI-compatible `/v1/chat/completions` client with
//! SSE streaming (reqwest over rustls), connect and total timeouts, retries with backoff on 429
//! and 5xx honouring `Retry-After`, and the API key read from an environment variable whose
//! *name* is configured. The key is never stored in settings, logged, or put in an error.
//!
//! The privacy guard ([`redact`]) and the answer cache ([`cache`]) sit in front of it; the
//! language server only builds a client when the router has picked the cloud, so in offline
//! mode none exists and no socket is ever opened ([`clients_built`] counts them).

pub mod cache;
pub mod redact;
pub mod sse;

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::config::CloudConfig;
use crate::model::{CancelFlag, ChatStop};

static CLIENTS_BUILT: AtomicUsize = AtomicUsize::new(0);

/// How many cloud clients (and so HTTP connection pools) this process has built.
pub fn clients_built() -> usize {
    CLIENTS_BUILT.load(Ordering::SeqCst)
}

/// Why a cloud request failed. Messages name the endpoint and the problem, never the key.
#[derive(Debug, Clone, PartialEq)]
pub enum CloudError {
    /// The key's environment variable is not set (its name is shown, not its value).
    NoKey(String),
    /// Could not connect (refused, unreachable, TLS, DNS).
    Connect(String),
    /// No complete answer within the total timeout.
    Timeout(Duration),
    /// An HTTP error status after the retries allowed.
    Status { code: u16, detail: String, attempts: u32 },
    /// The stream broke off, or carried something that is not a chat chunk.
    Malformed(String),
    Cancelled,
}

impl fmt::Display for CloudError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloudError::NoKey(var) => write!(f, "the API key variable {var} is not set"),
            CloudError::Connect(m) => write!(f, "cannot connect to the cloud endpoint: {m}"),
            CloudError::Timeout(d) => write!(f, "the cloud endpoint did not answer within {:.1} s", d.as_secs_f64()),
            CloudError::Status { code, detail, attempts } => {
                write!(f, "the cloud endpoint answered HTTP {code}")?;
                if *attempts > 1 {
                    write!(f, " ({attempts} attempts)")?;
                }
                if !detail.is_empty() {
                    write!(f, ": {detail}")?;
                }
                Ok(())
            }
            CloudError::Malformed(m) => write!(f, "the cloud stream was malformed: {m}"),
            CloudError::Cancelled => f.write_str("cancelled"),
        }
    }
}

impl std::error::Error for CloudError {}

/// A complete answer.
#[derive(Debug, Clone, PartialEq)]
pub struct CloudAnswer {
    pub text: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// HTTP requests made (1 without retries).
    pub attempts: u32,
    pub total_ms: f64,
}

pub struct CloudClient {
    http: reqwest::Client,
    url: String,
    model: String,
    key: Option<String>,
    timeout: Duration,
    max_retries: u32,
}

impl fmt::Debug for CloudClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key.
        f.debug_struct("CloudClient").field("url", &self.url).field("model", &self.model).finish_non_exhaustive()
    }
}

/// The first retry waits this long; each next one twice as long.
const BACKOFF: Duration = Duration::from_millis(500);
/// A `Retry-After` longer than this is not waited for.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

impl CloudClient {
    /// Builds the client (no connection is made yet). Fails when no endpoint is configured or
    /// the key's variable is named but unset.
    pub fn new(config: &CloudConfig) -> Result<CloudClient, CloudError> {
        let endpoint = config.endpoint.as_deref().ok_or_else(|| CloudError::Connect("no endpoint configured".into()))?;
        let key = match &config.api_key_env {
            Some(var) => Some(std::env::var(var).ok().filter(|k| !k.is_empty()).ok_or_else(|| CloudError::NoKey(var.clone()))?),
            None => None,
        };
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
            .user_agent(concat!("ghostline/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| CloudError::Connect(format!("cannot set up the HTTP client: {e}")))?;
        CLIENTS_BUILT.fetch_add(1, Ordering::SeqCst);
        Ok(CloudClient {
            http,
            url: format!("{}/chat/completions", endpoint.trim_end_matches('/')),
            model: config.model.clone(),
            key,
            timeout: Duration::from_millis(config.timeout_ms),
            max_retries: config.max_retries,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Streams a chat completion. `stop` may end the answer early (the rest of the stream is
    /// dropped); otherwise it ends at `[DONE]` or a finish reason. A stream that ends without
    /// either is an error, never a partial answer.
    pub async fn chat(
        &self,
        messages: &[(String, String)],
        max_tokens: u32,
        stop: &ChatStop,
        cancel: &CancelFlag,
    ) -> Result<CloudAnswer, CloudError> {
        let start = Instant::now();
        let deadline = start + self.timeout;
        let body = json!({
            "model": self.model,
            "messages": messages.iter().map(|(role, content)| json!({"role": role, "content": content})).collect::<Vec<_>>(),
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": max_tokens,
            "temperature": 0,
        });
        let mut attempts = 0;
        loop {
            attempts += 1;
            let left = deadline.saturating_duration_since(Instant::now());
            let mut request = self
                .http
                .post(&self.url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string())
                .timeout(left);
            if let Some(key) = &self.key {
                let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}"))
                    .map_err(|_| CloudError::Connect("the API key holds characters not allowed in a header".into()))?;
                value.set_sensitive(true);
                request = request.header(reqwest::header::AUTHORIZATION, value);
            }
            let response = match request.send().await {
                Ok(r) => r,
                Err(e) if e.is_timeout() => return Err(CloudError::Timeout(self.timeout)),
                Err(e) => return Err(CloudError::Connect(describe(&e))),
            };
            let status = response.status();
            if status.is_success() {
                return self.read_stream(response, deadline, stop, cancel, attempts, start).await;
            }
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(parse_retry_after);
            let detail = error_detail(response).await;
            let retryable = status.as_u16() == 429 || status.is_server_error();
            let wait = retry_after.unwrap_or(BACKOFF * 2u32.pow(attempts - 1));
            let fits = Instant::now() + wait < deadline && wait <= MAX_RETRY_AFTER;
            if !retryable || attempts > self.max_retries || !fits {
                return Err(CloudError::Status { code: status.as_u16(), detail, attempts });
            }
            tracing::info!(status = status.as_u16(), wait_ms = wait.as_millis() as u64, attempt = attempts, "cloud: retrying");
            tokio::time::sleep(wait).await;
            if cancel.is_cancelled() {
                return Err(CloudError::Cancelled);
            }
        }
    }

    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        deadline: Instant,
        stop: &ChatStop,
        cancel: &CancelFlag,
        attempts: u32,
        start: Instant,
    ) -> Result<CloudAnswer, CloudError> {
        let mut parser = sse::SseParser::new();
        let mut text = String::new();
        let mut usage = None;
        let mut finished = false;
        let answer = |text: String, usage: Option<(u64, u64)>| {
            let (p, c) = usage.unwrap_or((0, 0));
            CloudAnswer { text, prompt_tokens: p, completion_tokens: c, attempts, total_ms: start.elapsed().as_secs_f64() * 1e3 }
        };
        loop {
            if cancel.is_cancelled() {
                return Err(CloudError::Cancelled);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let chunk = match tokio::time::timeout(left, response.chunk()).await {
                Err(_) => return Err(CloudError::Timeout(self.timeout)),
                Ok(Err(e)) if e.is_timeout() => return Err(CloudError::Timeout(self.timeout)),
                Ok(Err(e)) => return Err(CloudError::Malformed(format!("the stream broke off: {}", describe(&e)))),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(bytes))) => bytes,
            };
            for data in parser.feed(&chunk) {
                match sse::parse_event(&data).map_err(CloudError::Malformed)? {
                    sse::Event::Done => return Ok(answer(text, usage)),
                    sse::Event::Chunk(c) => {
                        text.push_str(&c.content);
                        usage = c.usage.or(usage);
                        if c.finish_reason.is_some() {
                            finished = true;
                        }
                    }
                }
                if let Some(cut) = stop(&text) {
                    text.truncate(cut);
                    return Ok(answer(text, usage));
                }
            }
        }
        if finished && !parser.pending() {
            return Ok(answer(text, usage));
        }
        Err(CloudError::Malformed(format!("the stream ended before the answer was complete (after {} characters)", text.len())))
    }
}

/// A reqwest error in words, with its causes (e.g. "Connection refused"), without the URL's
/// query (none is used) and never a header.
fn describe(e: &reqwest::Error) -> String {
    let mut parts = Vec::new();
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    let kind = if e.is_connect() { "connection failed" } else { "request failed" };
    match parts.last() {
        Some(cause) => format!("{kind} ({cause})"),
        None => kind.to_string(),
    }
}

/// The first 200 characters of an error body's message.
async fn error_detail(response: reqwest::Response) -> String {
    let body = response.text().await.unwrap_or_default();
    let message = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.pointer("/error/message").and_then(|m| m.as_str()).map(str::to_owned))
        .unwrap_or(body);
    message.trim().chars().take(200).collect()
}

/// `Retry-After`: seconds, or an HTTP date.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(std::time::SystemTime::now()).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(parse_retry_after("soon"), None);
        let later = std::time::SystemTime::now() + Duration::from_secs(60);
        let d = parse_retry_after(&httpdate::fmt_http_date(later)).unwrap();
        assert!(d > Duration::from_secs(55) && d <= Duration::from_secs(60), "{d:?}");
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO));
    }

    #[test]
    fn a_missing_key_names_the_variable_and_builds_nothing() {
        let mut config = crate::config::Config::default().cloud;
        config.endpoint = Some("http://127.0.0.1:9/v1".into());
        config.api_key_env = Some("GHOSTLINE_TEST_KEY_THAT_IS_NOT_SET".into());
        let before = clients_built();
        let e = CloudClient::new(&config).unwrap_err();
        assert_eq!(e.to_string(), "the API key variable GHOSTLINE_TEST_KEY_THAT_IS_NOT_SET is not set");
        assert_eq!(clients_built(), before);
    }

    #[test]
    fn errors_never_show_the_key() {
        let mut config = crate::config::Config::default().cloud;
        config.endpoint = Some("http://127.0.0.1:9/v1/".into());
        // A variable only this test reads.
        std::env::set_var("GHOSTLINE_TEST_KEY_SHOWN", "sk-test-SHOULD-NOT-APPEAR-1234567890");
        config.api_key_env = Some("GHOSTLINE_TEST_KEY_SHOWN".into());
        let client = CloudClient::new(&config).unwrap();
        assert_eq!(client.url(), "http://127.0.0.1:9/v1/chat/completions");
        assert!(!format!("{client:?}").contains("SHOULD-NOT-APPEAR"));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let stop: ChatStop = std::sync::Arc::new(|_: &str| None);
        let e = rt.block_on(client.chat(&[("user".into(), "hi".into())], 8, &stop, &CancelFlag::new())).unwrap_err();
        assert!(matches!(e, CloudError::Connect(_)), "{e:?}");
        assert!(!e.to_string().contains("SHOULD-NOT-APPEAR") && !format!("{e:?}").contains("SHOULD-NOT-APPEAR"));
    }
}
