//! The first run without a model, with no LSP in it: what to offer (the model `doctor
//! --recommend` picks for this machine, its size from the Hub's metadata or else the catalog),
//! the in-process pull of it (the same [`super::pull`] as `ghostline pull`: resumable,
//! sha256-checked, refused up front by the disk or the memory budget), and its progress as
//! percent and MB/s. `lsp/first_run.rs` asks the user and reports.

use std::time::{Duration, Instant};

use super::catalog::{self, Known};
use super::hub::Hub;
use super::{Progress, PullOptions, Pulled};
use crate::config::Config;
use crate::model::memory;

/// How long the offer waits for the Hub's size before it uses the catalog's.
const SIZE_TIMEOUT: Duration = Duration::from_secs(5);

/// The download the first run offers.
#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    pub known: &'static Known,
    /// Bytes: the Hub's `X-Linked-Size` when it answered, else the catalog's estimate.
    pub size: u64,
    pub size_from_hub: bool,
}

impl Offer {
    /// The choice's title: `Download qwen2.5-coder-1.5b (1.6 GB)`.
    pub fn title(&self) -> String {
        format!("Download {} ({})", self.known.name, size_text(self.size))
    }
}

/// `1.6 GB`, `140 MB`.
pub fn size_text(bytes: u64) -> String {
    if bytes >= 1_000_000_000 {
        format!("{:.1} GB", bytes as f64 / 1e9)
    } else {
        format!("{:.0} MB", bytes as f64 / 1e6)
    }
}

/// Whether the first run may offer a download: not in offline mode (`offline: true` or
/// `HF_HUB_OFFLINE`), where it only says how to configure a path.
pub fn may_download(config: &Config) -> bool {
    !config.offline && !super::hub_offline_env()
}

/// The catalog model [`super::recommend`] picks for `config`'s memory budget, context and this
/// build's backend (`None`: none fits the budget).
pub fn recommended(config: &Config) -> Option<&'static Known> {
    let m = &config.model;
    let r = super::recommend::recommend(memory::budget(m.memory_budget_mb), m.context_size, m.batch_size, crate::model::backend::gpu_backend());
    r.name.and_then(catalog::lookup)
}

/// The offer for this machine: the recommended model, its size asked of the Hub (`HEAD`, a few
/// seconds at most; the catalog's estimate otherwise). `None` offline or when nothing fits —
/// and then nothing is sent. The question says that this one request was made.
pub async fn offer(config: &Config) -> Option<Offer> {
    offer_from(config, Hub::from_env()).await
}

/// [`offer`] with the Hub given (`Err`: no usable endpoint; the catalog's estimate is used).
pub async fn offer_from(config: &Config, hub: Result<Hub, String>) -> Option<Offer> {
    if !may_download(config) {
        return None;
    }
    let known = recommended(config)?;
    let from_hub = match hub {
        Ok(hub) => match tokio::time::timeout(SIZE_TIMEOUT, hub.file_meta(known.repo, "main", known.file)).await {
            Ok(Ok(meta)) => Some(meta.size),
            Ok(Err(e)) => {
                tracing::info!("the Hub's size of {} is unknown ({e}); the catalog's estimate is shown", known.name);
                None
            }
            Err(_) => None,
        },
        Err(_) => None,
    };
    Some(Offer { known, size: from_hub.unwrap_or(known.approx_bytes), size_from_hub: from_hub.is_some() })
}

/// Pulls the offered model into the Hugging Face cache, where discovery finds it.
pub async fn pull(offer: &Offer, config: &Config, progress: &dyn Progress) -> Result<Pulled, String> {
    let opts = PullOptions {
        target: offer.known.name.to_owned(),
        file: None,
        revision: None,
        offline: config.offline,
        memory_budget_mb: config.model.memory_budget_mb,
    };
    super::pull(&opts, progress).await
}

/// Where a download stands, as [`Watched`] publishes it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Step {
    pub total: u64,
    /// Where this run started (an earlier run's bytes).
    pub from: u64,
    pub done: u64,
    pub started: Option<Instant>,
    pub finished: bool,
}

impl Step {
    pub fn percent(&self) -> u32 {
        if self.total == 0 {
            return 0;
        }
        ((self.done.min(self.total) as f64 / self.total as f64) * 100.0) as u32
    }

    /// MB/s over what this run fetched.
    pub fn rate(&self, now: Instant) -> f64 {
        let secs = self.started.map_or(0.0, |s| now.duration_since(s).as_secs_f64());
        if secs <= 0.0 {
            return 0.0;
        }
        self.done.saturating_sub(self.from) as f64 / 1e6 / secs
    }

    /// `412 of 1650 MB, 38.2 MB/s`.
    pub fn describe(&self, now: Instant) -> String {
        format!("{:.0} of {:.0} MB, {:.1} MB/s", self.done as f64 / 1e6, self.total as f64 / 1e6, self.rate(now))
    }
}

/// A [`Progress`] that publishes each [`Step`] on a watch channel: the reporter reads the latest
/// at its own pace, and the download never waits for it.
pub struct Watched(pub tokio::sync::watch::Sender<Step>);

impl Watched {
    pub fn channel() -> (Watched, tokio::sync::watch::Receiver<Step>) {
        let (tx, rx) = tokio::sync::watch::channel(Step::default());
        (Watched(tx), rx)
    }
}

impl Progress for Watched {
    fn start(&self, _file: &str, total: u64, from: u64) {
        self.0.send_replace(Step { total, from, done: from, started: Some(Instant::now()), finished: false });
    }
    fn set(&self, done: u64) {
        self.0.send_modify(|s| s.done = done);
    }
    fn finish(&self) {
        self.0.send_modify(|s| s.finished = true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_say_percent_and_rate() {
        let t0 = Instant::now();
        let s = Step { total: 2_000_000_000, from: 500_000_000, done: 1_000_000_000, started: Some(t0), finished: false };
        assert_eq!(s.percent(), 50);
        // 500 MB fetched by this run in 10 s.
        let now = t0 + Duration::from_secs(10);
        assert!((s.rate(now) - 50.0).abs() < 1e-9);
        assert_eq!(s.describe(now), "1000 of 2000 MB, 50.0 MB/s");
        assert_eq!(Step::default().percent(), 0);
        assert_eq!(Step::default().rate(now), 0.0);
    }

    #[test]
    fn the_offer_is_the_recommendation_with_its_size() {
        let mut config = crate::config::Options::default().resolve(None);
        config.model.memory_budget_mb = Some(4096);
        let known = recommended(&config).unwrap();
        let expected = if crate::model::backend::gpu_backend().is_some() { "qwen2.5-coder-3b" } else { "qwen2.5-coder-1.5b" };
        assert_eq!(known.name, expected);
        let offer = Offer { known: catalog::lookup("qwen2.5-coder-1.5b").unwrap(), size: 1_646_572_000, size_from_hub: true };
        assert_eq!(offer.title(), "Download qwen2.5-coder-1.5b (1.6 GB)");
        assert_eq!(size_text(140_000_000), "140 MB");
        config.model.memory_budget_mb = Some(100);
        assert_eq!(recommended(&config), None);
        config.offline = true;
        assert!(!may_download(&config));
    }
}
