//! One resident model shared by the editor windows of one user (`model.shared`).
//!
//! The first language server that finds no host starts one — `ghostline host`, detached, its
//! log in the cache folder — and every language server of the same model and backend settings
//! (the [`Spec`], hashed into the socket's name) sends it its model jobs over a Unix socket
//! instead of loading the model itself. The host owns the model ([`serve`]); each window keeps
//! its documents, prompts and post-processing, and builds its prompts with the GGUF's
//! vocabulary alone, as the endpoint's client does ([`client`]).
//!
//! Only this user reaches the host: the socket sits in `$XDG_RUNTIME_DIR/ghostline` (else a
//! private folder under the cache folder), a folder of mode 0700 owned by us; the socket has
//! mode 0600; both ends check the other's uid (`SO_PEERCRED`, `getpeereid` on macOS) on every
//! connection. A folder or socket that is not ours, or open to others, is never used.

#[cfg(unix)]
pub(super) mod client;
#[cfg(unix)]
pub mod serve;
pub mod wire;

#[cfg(not(unix))]
pub(super) mod client {
    //! No shared host off Unix: the model runs in the language server's process.
    pub fn run(
        config: crate::config::ModelConfig,
        sampling: crate::model::Sampling,
        status: tokio::sync::watch::Sender<crate::model::ModelStatus>,
        jobs: std::sync::mpsc::Receiver<crate::model::Job>,
    ) {
        let Some(path) = config.path.clone() else { return };
        super::super::llama::run(path, config, sampling, status, jobs)
    }
}

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::ModelConfig;
use crate::model::Sampling;

/// How long a host lingers after its last window left when `model.keepAlive` is not set (an
/// editor reloading its window comes back within it).
pub const LINGER: Duration = Duration::from_secs(30);

/// What a host is started with: the model and every setting that changes what its worker
/// computes or how it runs. Two windows share a host when their specs (less `keep_alive_ms`)
/// are equal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    pub path: PathBuf,
    pub threads: u32,
    pub context_size: u32,
    pub batch_size: u32,
    pub gpu_layers: Option<u32>,
    pub memory_budget_mb: Option<u64>,
    pub prefill_chunk: Option<u32>,
    pub adaptive_threads: bool,
    pub draft: Option<bool>,
    pub repeat_penalty: f32,
    pub repeat_last_n: u32,
    /// How long the host stays after the last window left (not part of the key).
    pub keep_alive_ms: Option<u64>,
}

impl Spec {
    /// The spec of `config`'s model; `None` without a model path.
    pub fn of(config: &ModelConfig, sampling: Sampling) -> Option<Spec> {
        Some(Spec {
            path: config.path.clone()?,
            threads: config.threads,
            context_size: config.context_size,
            batch_size: config.batch_size,
            gpu_layers: config.gpu_layers,
            memory_budget_mb: config.memory_budget_mb,
            prefill_chunk: config.prefill_chunk,
            adaptive_threads: config.adaptive_threads,
            draft: config.draft,
            repeat_penalty: sampling.repeat_penalty,
            repeat_last_n: sampling.repeat_last_n,
            keep_alive_ms: config.keep_alive.map(|d| d.as_millis() as u64),
        })
    }

    /// The host's model configuration (in its own process, no endpoint, not shared again).
    pub fn model_config(&self) -> ModelConfig {
        ModelConfig {
            path: Some(self.path.clone()),
            threads: self.threads,
            context_size: self.context_size,
            batch_size: self.batch_size,
            gpu_layers: self.gpu_layers,
            memory_budget_mb: self.memory_budget_mb,
            keep_alive: None,
            prefill_chunk: self.prefill_chunk,
            adaptive_threads: self.adaptive_threads,
            draft: self.draft,
            discovered: None,
            endpoint: None,
            shared: false,
        }
    }

    pub fn sampling(&self) -> Sampling {
        Sampling { repeat_penalty: self.repeat_penalty, repeat_last_n: self.repeat_last_n }
    }

    /// How long the host stays after its last window left.
    pub fn linger(&self) -> Duration {
        self.keep_alive_ms.map_or(LINGER, Duration::from_millis)
    }

    /// The host's name: a hash of the spec (less `keep_alive_ms`), ghostline's version and the
    /// protocol's, so that another model, setting or build gets a host of its own.
    pub fn key(&self) -> String {
        let mut keyed = self.clone();
        keyed.keep_alive_ms = None;
        let text = format!("{}|{}|{}", env!("CARGO_PKG_VERSION"), wire::PROTOCOL, serde_json::to_string(&keyed).unwrap_or_default());
        // FNV-1a: stable across builds and platforms (std's hasher promises neither).
        let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
        format!("{hash:016x}")
    }
}

/// The folder of the sockets: `$XDG_RUNTIME_DIR/ghostline`, else `ghostline/run` under the
/// cache folder (`$XDG_CACHE_HOME`, else `~/.cache`).
pub fn socket_dir() -> Option<PathBuf> {
    let absolute = |v: &str| std::env::var_os(v).map(PathBuf::from).filter(|p| p.is_absolute());
    match absolute("XDG_RUNTIME_DIR") {
        Some(runtime) => Some(runtime.join("ghostline")),
        None => Some(cache_dir()?.join("run")),
    }
}

/// `ghostline` under the cache folder: the hosts' logs (`host-<key>.log`).
pub fn cache_dir() -> Option<PathBuf> {
    let absolute = |v: &str| std::env::var_os(v).map(PathBuf::from).filter(|p| p.is_absolute());
    Some(absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|h| h.join(".cache")))?.join("ghostline"))
}

/// Where a host's socket, lock and log are.
#[derive(Debug, Clone)]
pub struct Place {
    pub key: String,
    pub socket: PathBuf,
    pub lock: PathBuf,
    pub log: PathBuf,
}

impl Place {
    pub fn of(spec: &Spec) -> Result<Place, String> {
        let dir = socket_dir().ok_or("neither XDG_RUNTIME_DIR, XDG_CACHE_HOME nor HOME is set")?;
        let logs = cache_dir().ok_or("neither XDG_CACHE_HOME nor HOME is set")?;
        let key = spec.key();
        Ok(Place {
            socket: dir.join(format!("{key}.sock")),
            lock: dir.join(format!("{key}.lock")),
            log: logs.join(format!("host-{key}.log")),
            key,
        })
    }

    pub fn dir(&self) -> &Path {
        self.socket.parent().unwrap_or(Path::new("."))
    }
}

/// What `ghostline doctor` says of the host of `spec` (see `client::status`).
#[cfg(unix)]
pub fn client_status(spec: &Spec) -> Result<Option<wire::HostInfo>, String> {
    client::status(spec)
}

#[cfg(unix)]
pub use private::{check_dir, check_socket, make_dir, our_uid, peer_uid};

#[cfg(unix)]
mod private {
    //! Ownership and permission checks of the socket's folder, the socket and its peer.

    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    use std::os::unix::io::AsRawFd;
    use std::path::Path;

    pub fn our_uid() -> u32 {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() }
    }

    /// Creates the socket's folder (mode 0700) if need be, then checks it.
    pub fn make_dir(dir: &Path) -> Result<(), String> {
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
        }
        check_dir(dir)
    }

    /// The folder is a real folder (not a link), ours, and closed to group and others.
    pub fn check_dir(dir: &Path) -> Result<(), String> {
        let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if !meta.is_dir() {
            return Err(format!("{} is not a folder", dir.display()));
        }
        check_owner_and_mode(dir, &meta, 0o077)
    }

    /// The socket is a socket (not a link), ours, and closed to group and others (mode 0600).
    pub fn check_socket(socket: &Path) -> Result<(), String> {
        use std::os::unix::fs::FileTypeExt;
        let meta = std::fs::symlink_metadata(socket).map_err(|e| format!("{}: {e}", socket.display()))?;
        if !meta.file_type().is_socket() {
            return Err(format!("{} is not a socket", socket.display()));
        }
        check_owner_and_mode(socket, &meta, 0o077)
    }

    fn check_owner_and_mode(path: &Path, meta: &std::fs::Metadata, forbidden: u32) -> Result<(), String> {
        if meta.uid() != our_uid() {
            return Err(format!("{} belongs to uid {}, not to us (uid {})", path.display(), meta.uid(), our_uid()));
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & forbidden != 0 {
            return Err(format!("{} has mode {mode:04o}: others may reach it", path.display()));
        }
        Ok(())
    }

    /// The uid of the process at the other end of a Unix socket.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub fn peer_uid(socket: &impl AsRawFd) -> std::io::Result<u32> {
        let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: `cred` and `len` are valid for writes of the sizes given; the fd is open.
        let r = unsafe { libc::getsockopt(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut cred as *mut libc::ucred).cast(), &mut len) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(cred.uid)
    }

    /// The uid of the process at the other end of a Unix socket (macOS and the BSDs).
    #[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd", target_os = "openbsd", target_os = "netbsd", target_os = "dragonfly"))]
    pub fn peer_uid(socket: &impl AsRawFd) -> std::io::Result<u32> {
        let (mut uid, mut gid) = (0, 0);
        // SAFETY: `uid` and `gid` are valid for writes; the fd is open.
        if unsafe { libc::getpeereid(socket.as_raw_fd(), &mut uid, &mut gid) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(uid)
    }

    /// Elsewhere the peer cannot be known: every host is refused, and the window loads its own
    /// model (never a connection whose other end is unchecked).
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "macos", target_os = "ios", target_os = "freebsd", target_os = "openbsd", target_os = "netbsd", target_os = "dragonfly")))]
    pub fn peer_uid(_socket: &impl AsRawFd) -> std::io::Result<u32> {
        Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "no peer credentials on this system"))
    }
}

/// The resident memory of this process (VmRSS), 0 where unknown.
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("VmRSS:").and_then(|v| v.trim().strip_suffix("kB")).and_then(|v| v.trim().parse::<u64>().ok())))
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        let config = crate::config::Options::default().resolve(Some("/models/a.gguf".into())).model;
        Spec::of(&config, Sampling { repeat_penalty: 1.1, repeat_last_n: 64 }).unwrap()
    }

    #[test]
    fn the_key_follows_the_model_and_backend_settings_not_keep_alive() {
        let a = spec();
        assert_eq!(a.key().len(), 16);
        assert_eq!(a.key(), spec().key(), "stable");
        let mut b = a.clone();
        b.keep_alive_ms = Some(5);
        assert_eq!(a.key(), b.key());
        for change in [
            |s: &mut Spec| s.path = "/models/b.gguf".into(),
            |s: &mut Spec| s.gpu_layers = Some(3),
            |s: &mut Spec| s.context_size += 256,
            |s: &mut Spec| s.repeat_penalty = 1.0,
        ] {
            let mut c = a.clone();
            change(&mut c);
            assert_ne!(a.key(), c.key(), "{c:?}");
        }
        assert_eq!(a.model_config().path, Some("/models/a.gguf".into()));
    }

    #[cfg(unix)]
    #[test]
    fn a_folder_or_socket_open_to_others_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = crate::testing::TempDir::new("host-perm");
        let run = dir.join("run");
        make_dir(&run).unwrap();
        assert_eq!(std::fs::metadata(&run).unwrap().permissions().mode() & 0o777, 0o700);
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(check_dir(&run).unwrap_err().contains("mode 0755"));
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
        let socket = run.join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600)).unwrap();
        check_socket(&socket).unwrap();
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(check_socket(&socket).unwrap_err().contains("mode 0666"));
        let file = run.join("plain");
        std::fs::write(&file, "").unwrap();
        assert!(check_socket(&file).unwrap_err().contains("not a socket"));
    }
}
