//! `ghostline pull`: a GGUF model from the Hugging Face Hub into the Hub's own cache layout,
//! resumable, checked against its sha256, refused up front when the disk or the memory budget
//! cannot hold it, and never attempted in offline mode.
//!
//! Why not the `hf-hub` crate (1.0): its cache download writes the `.incomplete` file from byte
//! 0 on every attempt (no `Range` resume) and never checks the sha256 of what it wrote; it also
//! pulls in a second `reqwest` (0.13) and the Xet client. What ghostline needs of it is small
//! — `HEAD` for the metadata, `GET` with `Range`, the cache layout — so it is written here
//! ([`hub`], [`cache`]) on the `reqwest` 0.12 the cloud route already uses; the Hub's Xet
//! bridge serves plain HTTP with `Range` too.

pub mod bar;
pub mod cache;
pub mod catalog;
pub mod first_run;
pub mod hub;
pub mod recommend;

use std::io::{Read, Seek, Write};
use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::model::memory;
use cache::RepoDir;
use hub::{FileMeta, Hub};

/// Interrupted downloads are resumed this many times within one run.
const ATTEMPTS: u32 = 3;
const MIB: f64 = 1024.0 * 1024.0;

/// What to pull.
#[derive(Debug, Clone, Default)]
pub struct PullOptions {
    /// A short name from [`catalog::KNOWN`], or `org/repo`.
    pub target: String,
    pub file: Option<String>,
    pub revision: Option<String>,
    /// `--offline`, or `offline: true` in the settings.
    pub offline: bool,
    /// `model.memoryBudgetMb` (else half of physical memory).
    pub memory_budget_mb: Option<u64>,
}

/// A model in the cache.
#[derive(Debug, Clone, PartialEq)]
pub struct Pulled {
    /// `snapshots/{commit}/{file}`: the path to configure, and the one discovery lists.
    pub path: PathBuf,
    pub repo: String,
    pub file: String,
    pub commit: String,
    pub sha256: String,
    pub size: u64,
    /// Bytes fetched by this run (0: it was in the cache already).
    pub fetched: u64,
    /// Where this run started from (a resumed download: the bytes an earlier run left).
    pub resumed_from: u64,
    /// The cache held a blob of the right size whose sha256 did not match: it was deleted and
    /// downloaded again.
    pub replaced_damaged: bool,
}

/// Told how the download goes (a progress bar on a terminal; `$/progress` in an editor).
pub trait Progress: Send + Sync {
    fn start(&self, file: &str, total: u64, from: u64);
    fn set(&self, done: u64);
    fn finish(&self);
}

/// Reports nothing.
pub struct Quiet;

impl Progress for Quiet {
    fn start(&self, _: &str, _: u64, _: u64) {}
    fn set(&self, _: u64) {}
    fn finish(&self) {}
}

/// Why offline mode refuses, for every entry point.
pub fn offline_message() -> String {
    "offline mode is on (`offline: true` in the settings, --offline or HF_HUB_OFFLINE): ghostline pull opens no connection. Copy a GGUF file onto this machine another way and set model.path to it, or pull without offline mode".into()
}

/// `HF_HUB_OFFLINE=1`, as the Hub's own tools read it.
pub fn hub_offline_env() -> bool {
    std::env::var("HF_HUB_OFFLINE").is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
}

/// The repository and file a target names (`file` is `None`: ask the Hub which GGUF files
/// the repository has).
pub fn resolve_target(target: &str, file: Option<&str>) -> Result<(String, Option<String>), String> {
    if let Some(k) = catalog::lookup(target) {
        return Ok((k.repo.to_owned(), Some(file.unwrap_or(k.file).to_owned())));
    }
    let ok = |s: &str| !s.is_empty() && s != "." && s != ".." && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    match target.split_once('/') {
        Some((org, repo)) if ok(org) && ok(repo) => Ok((target.to_owned(), file.map(str::to_owned))),
        _ => Err(format!(
            "{target:?} is neither a Hugging Face repository (org/repo) nor a known name ({})",
            catalog::KNOWN.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Of a repository's files, the GGUF model to pull: the only one, else the Q4_K_M one;
/// otherwise the user names it.
pub fn choose_file(repo: &str, files: &[String]) -> Result<String, String> {
    let ggufs: Vec<&String> = files
        .iter()
        .filter(|f| {
            let l = f.to_ascii_lowercase();
            let name = l.rsplit('/').next().unwrap_or(&l);
            l.ends_with(".gguf") && !name.starts_with("mmproj") && (!l.contains("-of-") || l.contains("-00001-of-"))
        })
        .collect();
    match ggufs.as_slice() {
        [] => Err(format!("{repo} has no GGUF file")),
        [one] => Ok(one.to_string()),
        many => match many.iter().filter(|f| f.to_ascii_lowercase().contains("q4_k_m")).collect::<Vec<_>>().as_slice() {
            [one] => Ok(one.to_string()),
            _ => Err(format!(
                "{repo} has {} GGUF files; name one with --file: {}",
                many.len(),
                many.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            )),
        },
    }
}

/// Pulls a model into the Hugging Face cache (see the module docs).
pub async fn pull(opts: &PullOptions, progress: &dyn Progress) -> Result<Pulled, String> {
    // Before anything that could touch the network.
    if opts.offline || hub_offline_env() {
        return Err(offline_message());
    }
    let (repo, file) = resolve_target(&opts.target, opts.file.as_deref())?;
    let revision = opts.revision.clone().unwrap_or_else(|| "main".into());
    if revision.is_empty() || revision.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return Err(format!("--revision {revision:?} is not a branch, tag or commit"));
    }
    let cache = cache::hub_cache().ok_or("no Hugging Face cache folder: set HF_HUB_CACHE or HF_HOME")?;
    let hub = Hub::from_env()?;
    let file = match file {
        Some(f) => f,
        None => choose_file(&repo, &hub.list_files(&repo, &revision).await?)?,
    };
    if file.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return Err(format!("--file {file:?} is not a file in a repository"));
    }
    let meta = hub.file_meta(&repo, &revision, &file).await?;
    tracing::info!(repo = %repo, file = %file, commit = %meta.commit, size = meta.size, "resolved on the Hub");
    let dir = RepoDir::new(&cache, &repo);
    let blob = dir.blob(&meta.sha256);
    // A blob of the right size is only a candidate: its sha256 is checked below, before it is
    // reported as in the cache.
    let mut in_cache = std::fs::metadata(&blob).is_ok_and(|m| m.len() == meta.size);

    let (budget, source) = memory::budget(opts.memory_budget_mb);
    if meta.size > budget {
        return Err(format!(
            "not pulled: the memory budget cannot hold this model: its weights alone are {:.0} MiB, the budget is {:.0} MiB ({}). Raise model.memoryBudgetMb (or --memory-budget-mb), or pick a smaller model or quantisation (`ghostline doctor --recommend`)",
            meta.size as f64 / MIB,
            budget as f64 / MIB,
            describe_budget(&source)
        ));
    }
    let mut replaced_damaged = false;
    if in_cache {
        let got = sha256_of(&blob)?;
        if got != meta.sha256 {
            // Damaged in place (a disk error, an edit): it can never become right, so it goes,
            // and the file is downloaded again.
            tracing::warn!("{}: the cached blob has sha256 {got}, the Hub gives {}; downloading it again", blob.display(), meta.sha256);
            std::fs::remove_file(&blob).map_err(|e| format!("the cached {} is damaged and cannot be removed: {e}", blob.display()))?;
            in_cache = false;
            replaced_damaged = true;
        }
    }
    let _lock = if in_cache { None } else { Some(lock(&dir, &meta.sha256)?) };
    let incomplete = dir.incomplete(&meta.sha256);
    let have = if in_cache { meta.size } else { std::fs::metadata(&incomplete).map(|m| m.len()).unwrap_or(0).min(meta.size) };
    let need = meta.size - have;
    if let Some(free) = cache::free_space(&cache) {
        if need > free {
            return Err(format!(
                "not pulled: not enough disk space in {}: the download needs {:.0} MiB more, {:.0} MiB are free",
                cache.display(),
                need as f64 / MIB,
                free as f64 / MIB
            ));
        }
    }
    let fetched = if in_cache { 0 } else { download(&hub, &meta, &incomplete, &file, progress).await? };
    if !in_cache {
        verify(&incomplete, &meta.sha256)?;
        std::fs::rename(&incomplete, &blob).map_err(|e| format!("cannot move the download into {}: {e}", blob.display()))?;
    }
    let path = dir
        .link(&meta.commit, &file, &meta.sha256, &revision)
        .map_err(|e| format!("cannot link the snapshot in {}: {e}", dir.0.display()))?;
    Ok(Pulled { path, repo, file, commit: meta.commit, sha256: meta.sha256, size: meta.size, fetched, resumed_from: have, replaced_damaged })
}

pub(crate) fn describe_budget(source: &memory::BudgetSource) -> String {
    match source {
        memory::BudgetSource::Configured => "model.memoryBudgetMb".into(),
        memory::BudgetSource::HalfOfPhysical { physical_bytes } => {
            format!("half of {:.1} GiB physical memory", *physical_bytes as f64 / MIB / 1024.0)
        }
        memory::BudgetSource::Fallback => "default: physical memory unknown".into(),
    }
}

/// One pull of a blob at a time (held until the returned file is dropped; the system releases
/// it when a killed process exits, so an interrupted pull never blocks the next one).
/// The lock file sits where `huggingface_hub` keeps its own: `{cache}/.locks/models--…/`.
fn lock(dir: &RepoDir, sha256: &str) -> Result<std::fs::File, String> {
    let locks = match (dir.0.parent(), dir.0.file_name()) {
        (Some(cache), Some(name)) => cache.join(".locks").join(name),
        _ => dir.0.join(".locks"),
    };
    let path = locks.join(format!("{sha256}.lock"));
    for d in [&locks, &dir.0.join("blobs")] {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::io::AsRawFd;
        // SAFETY: a valid open descriptor.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(format!("another ghostline pull is downloading this file ({} is locked)", path.display()));
        }
    }
    Ok(file)
}

/// Streams the content into `incomplete`, from where an earlier attempt stopped; returns the
/// bytes fetched. An interrupted transfer is resumed with `Range`, [`ATTEMPTS`] times.
async fn download(hub: &Hub, meta: &FileMeta, incomplete: &std::path::Path, file: &str, progress: &dyn Progress) -> Result<u64, String> {
    let io = |e: std::io::Error| format!("cannot write {}: {e}", incomplete.display());
    let mut out = std::fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(incomplete).map_err(io)?;
    let mut at = out.metadata().map_err(io)?.len();
    if at > meta.size {
        out.set_len(0).map_err(io)?;
        at = 0;
    }
    progress.start(file, meta.size, at);
    let mut fetched = 0;
    let mut failure = String::new();
    for attempt in 1..=ATTEMPTS {
        if at == meta.size {
            break;
        }
        if attempt > 1 {
            tracing::warn!("{failure}; resuming from byte {at} (attempt {attempt} of {ATTEMPTS})");
        }
        let mut response = match hub.get(meta, at).await {
            Ok(r) => r,
            Err(e) => {
                failure = e;
                continue;
            }
        };
        if response.status() == reqwest::StatusCode::OK && at > 0 {
            // The server ignored the range: it sends the whole file.
            tracing::info!("the content host does not resume downloads; starting over");
            at = 0;
            out.set_len(0).map_err(io)?;
        }
        out.seek(std::io::SeekFrom::Start(at)).map_err(io)?;
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if at + chunk.len() as u64 > meta.size {
                        drop(out);
                        let _ = std::fs::remove_file(incomplete);
                        return Err(format!("the content host sent more than the {} bytes the Hub announced; nothing was kept", meta.size));
                    }
                    out.write_all(&chunk).map_err(io)?;
                    at += chunk.len() as u64;
                    fetched += chunk.len() as u64;
                    progress.set(at);
                }
                Ok(None) => {
                    failure = format!("the transfer ended after {at} of {} bytes", meta.size);
                    break;
                }
                Err(e) => {
                    failure = format!("the transfer broke off after {at} of {} bytes: {e}", meta.size);
                    break;
                }
            }
        }
    }
    out.flush().map_err(io)?;
    progress.finish();
    if at < meta.size {
        return Err(format!(
            "{failure}. {} of {} MiB are kept in {}: run the same command again to resume",
            at >> 20,
            meta.size >> 20,
            incomplete.display()
        ));
    }
    Ok(fetched)
}

/// The sha256 of a file, lower-case hex.
fn sha256_of(path: &std::path::Path) -> Result<String, String> {
    let mut f = std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Checks the download's sha256; a mismatch deletes it.
fn verify(incomplete: &std::path::Path, expected: &str) -> Result<(), String> {
    let got = sha256_of(incomplete)?;
    if got != expected {
        let _ = std::fs::remove_file(incomplete);
        return Err(format!(
            "checksum mismatch: the Hub gives sha256 {expected}, the downloaded bytes have {got}. Nothing was kept; run the command again (if it happens again, the network or a proxy is altering the file)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(
            resolve_target("qwen2.5-coder-1.5b", None).unwrap(),
            ("ggml-org/Qwen2.5-Coder-1.5B-Q8_0-GGUF".into(), Some("qwen2.5-coder-1.5b-q8_0.gguf".into()))
        );
        assert_eq!(resolve_target("a/b", Some("x.gguf")).unwrap(), ("a/b".into(), Some("x.gguf".into())));
        assert_eq!(resolve_target("a/b", None).unwrap(), ("a/b".into(), None));
        for bad in ["nope", "a/b/c", "../x", "a/..", "a b/c"] {
            let e = resolve_target(bad, None).unwrap_err();
            assert!(e.contains("qwen2.5-coder-1.5b"), "{e}");
        }
    }

    #[test]
    fn file_choice() {
        let files = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(choose_file("r", &files(&["README.md", "m.gguf", "mmproj-f16.gguf"])).unwrap(), "m.gguf");
        assert_eq!(choose_file("r", &files(&["m-Q8_0.gguf", "m-Q4_K_M.gguf"])).unwrap(), "m-Q4_K_M.gguf");
        assert_eq!(choose_file("r", &files(&["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"])).unwrap(), "m-00001-of-00002.gguf");
        let e = choose_file("r", &files(&["a-Q8_0.gguf", "a-Q6_K.gguf"])).unwrap_err();
        assert!(e.contains("--file") && e.contains("a-Q6_K.gguf"), "{e}");
        assert!(choose_file("r", &files(&["README.md"])).unwrap_err().contains("no GGUF"));
    }
}
