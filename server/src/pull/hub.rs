//! The Hugging Face Hub's file protocol, as `huggingface_hub` speaks it: `HEAD` on the resolve
//! URL for a file's commit, hash and size, then `GET` of its content, resumed with `Range`.
//!
//! `HEAD {endpoint}/{repo}/resolve/{revision}/{file}` answers for a large (LFS or Xet) file with
//! a redirect to a content host, and that redirect itself carries the metadata: `X-Repo-Commit`,
//! `X-Linked-Etag` (the sha256 of the content; else `ETag`) and `X-Linked-Size`. A redirect is
//! followed for metadata only while it stays on the Hub's own host (a renamed repository answers
//! with one); the content is then fetched from the redirect's `Location`. The token goes only to
//! the Hub's own host, never to a content host.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, LOCATION, RANGE};
use reqwest::{Client, StatusCode, Url};

/// The Hub when `HF_ENDPOINT` is not set.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// Redirects followed on the Hub's own host before giving up.
const MAX_REDIRECTS: usize = 5;

/// Where to talk to and as whom.
#[derive(Clone)]
pub struct Hub {
    pub endpoint: Url,
    token: Option<String>,
    client: Client,
}

/// What the Hub says about one file at one revision.
#[derive(Debug, Clone, PartialEq)]
pub struct FileMeta {
    /// The commit the revision resolved to (`X-Repo-Commit`).
    pub commit: String,
    /// The content's sha256, lower-case hex (`X-Linked-Etag`, else `ETag`).
    pub sha256: String,
    /// Bytes (`X-Linked-Size`, else `Content-Length`).
    pub size: u64,
    /// Where the content is fetched from.
    pub content_url: Url,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("Hub").field("endpoint", &self.endpoint.as_str()).field("token", &self.token.is_some()).finish()
    }
}

impl Hub {
    /// `endpoint` (else `HF_ENDPOINT`, else the public Hub) and `token` (else `HF_TOKEN`, else
    /// the token file `huggingface-cli login` writes under `HF_HOME`).
    pub fn from_env() -> Result<Hub, String> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let endpoint = var("HF_ENDPOINT").unwrap_or_else(|| DEFAULT_ENDPOINT.into());
        let token = var("HF_TOKEN").or_else(|| {
            let home = var("HF_HOME")
                .map(std::path::PathBuf::from)
                .or_else(|| var("XDG_CACHE_HOME").map(|c| std::path::Path::new(&c).join("huggingface")))
                .or_else(|| var("HOME").map(|h| std::path::Path::new(&h).join(".cache/huggingface")))?;
            std::fs::read_to_string(home.join("token")).ok().map(|t| t.trim().to_owned()).filter(|t| !t.is_empty())
        });
        Hub::new(&endpoint, token)
    }

    pub fn new(endpoint: &str, token: Option<String>) -> Result<Hub, String> {
        let endpoint = Url::parse(endpoint.trim_end_matches('/'))
            .map_err(|e| format!("HF_ENDPOINT {endpoint:?} is not a URL: {e}"))?;
        if !matches!(endpoint.scheme(), "http" | "https") {
            return Err(format!("HF_ENDPOINT {endpoint} is not an http(s) URL"));
        }
        let client = Client::builder()
            // Redirects are followed by hand: the metadata sits on the redirect itself, and the
            // token must not follow one to another host.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(20))
            .read_timeout(Duration::from_secs(60))
            .user_agent(concat!("ghostline/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot start an HTTP client: {e}"))?;
        Ok(Hub { endpoint, token, client })
    }

    /// The Hub's own host (scheme, host and port): the only one the token is sent to.
    fn is_hub(&self, url: &Url) -> bool {
        url.scheme() == self.endpoint.scheme()
            && url.host_str() == self.endpoint.host_str()
            && url.port_or_known_default() == self.endpoint.port_or_known_default()
    }

    fn headers_for(&self, url: &Url) -> HeaderMap {
        let mut h = HeaderMap::new();
        // The size and hash are those of the stored bytes: no compression in between.
        h.insert(reqwest::header::ACCEPT_ENCODING, HeaderValue::from_static("identity"));
        if let (Some(token), true) = (&self.token, self.is_hub(url)) {
            if let Ok(v) = HeaderValue::from_str(&format!("Bearer {token}")) {
                h.insert(AUTHORIZATION, v);
            }
        }
        h
    }

    /// `{endpoint}/{repo}/resolve/{revision}/{file}`; the revision is one path segment (a
    /// branch such as `refs/pr/1` has its slashes escaped), the file keeps its folders.
    pub fn resolve_url(&self, repo: &str, revision: &str, file: &str) -> Result<Url, String> {
        let mut url = self.endpoint.clone();
        {
            let mut segments =
                url.path_segments_mut().map_err(|_| format!("HF_ENDPOINT {} cannot take a path", self.endpoint))?;
            segments.pop_if_empty();
            segments.extend(repo.split('/'));
            segments.push("resolve");
            segments.push(revision);
            segments.extend(file.split('/'));
        }
        Ok(url)
    }

    /// One request to the Hub (its answer whatever the status; an error when it cannot be reached).
    async fn on_hub(&self, method: reqwest::Method, url: &Url) -> Result<reqwest::Response, String> {
        self.client
            .request(method, url.clone())
            .headers(self.headers_for(url))
            .send()
            .await
            .map_err(|e| format!("cannot reach {}: {}", self.endpoint, error_chain(&e)))
    }

    /// HEAD on the resolve URL: the file's commit, sha256, size and content URL.
    pub async fn file_meta(&self, repo: &str, revision: &str, file: &str) -> Result<FileMeta, String> {
        let mut url = self.resolve_url(repo, revision, file)?;
        for _ in 0..=MAX_REDIRECTS {
            let response = self.on_hub(reqwest::Method::HEAD, &url).await?;
            let status = response.status();
            let headers = response.headers();
            if status.is_redirection() {
                let location = headers
                    .get(LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|l| url.join(l).ok())
                    .ok_or_else(|| format!("{url} answered {status} without a usable Location"))?;
                if self.is_hub(&location) && headers.get("x-linked-etag").is_none() {
                    // Still on the Hub (a renamed repository, a revision alias): follow.
                    url = location;
                    continue;
                }
                return meta_from(headers, location, &url);
            }
            if status.is_success() {
                return meta_from(headers, url.clone(), &url);
            }
            return Err(match status {
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => format!(
                    "{repo}: access denied ({status}): the repository is gated or private; accept its terms on the Hub and set HF_TOKEN"
                ),
                StatusCode::NOT_FOUND => {
                    let why = headers.get("x-error-message").and_then(|v| v.to_str().ok()).unwrap_or("");
                    format!("{repo}: no file {file:?} at revision {revision:?} ({status}{}{why})", if why.is_empty() { "" } else { ": " })
                }
                _ => format!("{url} answered {status}"),
            });
        }
        Err(format!("{repo}: more than {MAX_REDIRECTS} redirects on the Hub"))
    }

    /// The GGUF files of a repository at a revision (`/api/models/{repo}/revision/{rev}`).
    pub async fn list_files(&self, repo: &str, revision: &str) -> Result<Vec<String>, String> {
        let mut url = self.endpoint.clone();
        url.path_segments_mut()
            .map_err(|_| format!("HF_ENDPOINT {} cannot take a path", self.endpoint))?
            .pop_if_empty()
            .extend(["api", "models"])
            .extend(repo.split('/'))
            .extend(["revision", revision]);
        let response = self.on_hub(reqwest::Method::GET, &url).await?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("{repo}: cannot list its files ({status}); name one with --file"));
        }
        let text = response.text().await.map_err(|e| format!("{repo}: cannot read its file list: {e}"))?;
        let info: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{repo}: unreadable file list: {e}"))?;
        Ok(info["siblings"]
            .as_array()
            .map(|s| s.iter().filter_map(|f| f["rfilename"].as_str().map(str::to_owned)).collect())
            .unwrap_or_default())
    }

    /// GET the content from byte `from` on. The answer is 206 with the rest, or 200 with the
    /// whole file when the server ignores `Range` (the caller then starts over).
    pub async fn get(&self, meta: &FileMeta, from: u64) -> Result<reqwest::Response, String> {
        let url = &meta.content_url;
        let mut headers = self.headers_for(url);
        if from > 0 {
            headers.insert(RANGE, HeaderValue::from_str(&format!("bytes={from}-")).expect("ASCII header"));
        }
        let response = self
            .client
            .get(url.clone())
            .headers(headers)
            .send()
            .await
            .map_err(|e| format!("cannot reach the content host {}: {}", host(url), error_chain(&e)))?;
        let status = response.status();
        if status == StatusCode::PARTIAL_CONTENT {
            let start = response
                .headers()
                .get(reqwest::header::CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("bytes "))
                .and_then(|v| v.split('-').next())
                .and_then(|v| v.trim().parse::<u64>().ok());
            if start != Some(from) {
                return Err(format!("the content host answered a range from {start:?}, not from byte {from}"));
            }
        } else if status != StatusCode::OK {
            return Err(format!("the content host {} answered {status}", host(url)));
        }
        Ok(response)
    }
}

fn host(url: &Url) -> String {
    match url.port() {
        Some(p) => format!("{}:{p}", url.host_str().unwrap_or("?")),
        None => url.host_str().unwrap_or("?").to_owned(),
    }
}

/// The error and its causes, one line ("error sending request: connection refused").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

fn meta_from(headers: &HeaderMap, content_url: Url, asked: &Url) -> Result<FileMeta, String> {
    let get = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty());
    let commit = get("x-repo-commit").ok_or_else(|| format!("{asked}: no X-Repo-Commit header: is HF_ENDPOINT a Hub?"))?;
    if !commit.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!("{asked}: unusable X-Repo-Commit {commit:?}"));
    }
    let etag = get("x-linked-etag").or_else(|| get("etag")).ok_or_else(|| format!("{asked}: no ETag"))?;
    let sha256 = etag.trim_start_matches("W/").trim_matches('"').to_ascii_lowercase();
    if sha256.len() != 64 || !sha256.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "{asked}: the Hub gave no sha256 for this file (ETag {etag}); only large (LFS) files such as GGUF models can be pulled and checked"
        ));
    }
    let size = get("x-linked-size")
        .or_else(|| get("content-length"))
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| format!("{asked}: no X-Linked-Size"))?;
    Ok(FileMeta { commit: commit.to_owned(), sha256, size, content_url })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_urls_escape_the_revision_but_not_the_file_path() {
        let hub = Hub::new("http://127.0.0.1:9/mirror/", None).unwrap();
        let url = hub.resolve_url("org/repo", "refs/pr/1", "sub/m q.gguf").unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:9/mirror/org/repo/resolve/refs%2Fpr%2F1/sub/m%20q.gguf");
    }

    #[test]
    fn the_token_goes_to_the_hub_host_only() {
        let hub = Hub::new("https://huggingface.co", Some("hf_x".into())).unwrap();
        let on = |u: &str| hub.headers_for(&Url::parse(u).unwrap()).contains_key(AUTHORIZATION);
        assert!(on("https://huggingface.co/a/b/resolve/main/f"));
        assert!(!on("https://cas-bridge.xethub.hf.co/x"));
        assert!(!on("http://huggingface.co/a"));
        assert!(!on("https://huggingface.co:8443/a"));
        assert!(!format!("{hub:?}").contains("hf_x"));
    }

    #[test]
    fn metadata_comes_from_the_linked_headers() {
        let mut h = HeaderMap::new();
        let sha = "a".repeat(64);
        h.insert("x-repo-commit", HeaderValue::from_static("0123abcd"));
        h.insert("x-linked-etag", HeaderValue::from_str(&format!("\"{sha}\"")).unwrap());
        h.insert("etag", HeaderValue::from_static("\"sha1-of-the-pointer\""));
        h.insert("x-linked-size", HeaderValue::from_static("1234"));
        h.insert("content-length", HeaderValue::from_static("0"));
        let url = Url::parse("http://cdn/x").unwrap();
        let m = meta_from(&h, url.clone(), &url).unwrap();
        assert_eq!((m.commit.as_str(), m.sha256.as_str(), m.size), ("0123abcd", sha.as_str(), 1234));
        h.remove("x-linked-etag");
        let e = meta_from(&h, url.clone(), &url).unwrap_err();
        assert!(e.contains("no sha256"), "{e}");
    }
}
