//! `ghostline host`: the process that owns the shared model. It takes the host's lock (a second
//! host of the same key exits at once), loads the model on its model thread
//! (`llama::serve_windows`), listens on its socket, serves each window's connection on a thread
//! of its own, and exits once no window has been connected for its linger time.

use std::collections::HashMap;
use std::io::BufReader;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};

use super::wire::{self, FromHost, HostInfo, ToHost};
use super::{Place, Spec};
use crate::model::llama::{serve_windows, HostWork};
use crate::model::{CancelFlag, ChatRequest, GenerateError, GenerateRequest, Job, ModelInfo, ModelStatus, Prompt, Tokenize, VocabFacts};

/// How long the host waits for a window's verdict on a piece before it takes the window as gone.
const VERDICT_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the host for `spec` (JSON, as the starting window wrote it).
pub fn main(spec: &str) -> ExitCode {
    let spec: Spec = match serde_json::from_str(spec) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("ghostline host: cannot read its spec: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(&spec) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("shared host: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(spec: &Spec) -> Result<(), String> {
    let place = Place::of(spec)?;
    super::make_dir(place.dir())?;
    let Some(mut lock) = take_lock_patiently(&place.lock)? else {
        tracing::info!(key = %place.key, "another host holds the lock: exiting");
        return Ok(());
    };
    // The lock file names the host holding it, for people and tests.
    let _ = lock.set_len(0).and_then(|()| std::io::Write::write_all(&mut lock, format!("{}\n", std::process::id()).as_bytes()));
    tracing::info!(pid = std::process::id(), key = %place.key, model = %spec.path.display(), "shared host starting");
    let (status_tx, mut status) = watch::channel(ModelStatus::Loading { progress: 0.0 });
    let (work, work_rx) = mpsc::channel();
    let (path, config, sampling) = (spec.path.clone(), spec.model_config(), spec.sampling());
    std::thread::Builder::new()
        .name("ghostline-model".into())
        .spawn(move || serve_windows(path, config, sampling, status_tx, work_rx))
        .map_err(|e| format!("cannot start the model thread: {e}"))?;
    let info = loop {
        let now = status.borrow_and_update().clone();
        match now {
            ModelStatus::Ready(info) => break info,
            ModelStatus::Failed(e) => return Err(e),
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    // Holding the lock, we own the socket's name: a socket left there is a dead host's, and the
    // rename below replaces it. The socket is bound under a name of its own and given its mode
    // before it takes that name: bound in place, a window looking for it between the bind and
    // the mode saw it open to others, refused it and loaded its own model.
    let fresh = place.socket.with_extension(format!("sock.{}", std::process::id()));
    let _ = std::fs::remove_file(&fresh);
    let listener = UnixListener::bind(&fresh).map_err(|e| format!("cannot listen on {}: {e}", fresh.display()))?;
    let placed = std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o600)).and_then(|()| std::fs::rename(&fresh, &place.socket));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&fresh);
        return Err(format!("cannot listen on {}: {e}", place.socket.display()));
    }
    tracing::info!(socket = %place.socket.display(), "listening");
    let host = Arc::new(Host { info, work, windows: AtomicUsize::new(0), left: Mutex::new(Instant::now()), next: AtomicU64::new(1) });
    watch_linger(Arc::clone(&host), spec.linger(), place.socket.clone());
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accepting a connection: {e}");
                continue;
            }
        };
        match super::peer_uid(&stream) {
            Ok(uid) if uid == super::our_uid() => {}
            Ok(uid) => {
                tracing::warn!(uid, "refused a connection from another user");
                continue;
            }
            Err(e) => {
                tracing::warn!("refused a connection whose peer cannot be known: {e}");
                continue;
            }
        }
        let host = Arc::clone(&host);
        let _ = std::thread::Builder::new().name("ghostline-host-conn".into()).spawn(move || host.serve(stream));
    }
    Ok(())
}

/// The host's lock, held for its life (released by the kernel when it exits, however it
/// exits); `None` when another process holds it.
fn take_lock(path: &std::path::Path) -> Result<Option<std::fs::File>, String> {
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: flock on an open descriptor; no memory is passed.
    let locked = || unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    Ok(locked().then_some(file))
}

/// [`take_lock`] for a starting host: a window checking whether a host runs holds the lock for
/// an instant ([`lock_held`]), so the host tries for a while before it leaves the place to the
/// one that holds it.
fn take_lock_patiently(path: &std::path::Path) -> Result<Option<std::fs::File>, String> {
    for _ in 0..20 {
        if let Some(file) = take_lock(path)? {
            return Ok(Some(file));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    Ok(None)
}

/// Whether a host holds `path`'s lock now (a window checks before starting one).
pub fn lock_held(path: &std::path::Path) -> bool {
    match take_lock(path) {
        Ok(Some(file)) => {
            drop(file);
            false
        }
        Ok(None) => true,
        Err(_) => false,
    }
}

/// Exits the process once no window has been connected for `linger`.
fn watch_linger(host: Arc<Host>, linger: Duration, socket: std::path::PathBuf) {
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(100));
        let idle = host.left.lock().unwrap_or_else(|e| e.into_inner()).elapsed();
        if host.windows.load(Ordering::SeqCst) == 0 && idle >= linger {
            tracing::info!(linger_s = linger.as_secs_f64(), "no window connected: the host exits");
            let _ = std::fs::remove_file(&socket);
            std::process::exit(0);
        }
    });
}

struct Host {
    info: ModelInfo,
    work: mpsc::Sender<HostWork>,
    windows: AtomicUsize,
    /// When the last window left (or the host started).
    left: Mutex<Instant>,
    next: AtomicU64,
}

/// A job of a connection: its cancel flag and where the window's verdicts go.
struct Running {
    cancel: CancelFlag,
    verdicts: mpsc::Sender<(Option<usize>, bool)>,
}

type Writer = Arc<Mutex<UnixStream>>;

fn send(writer: &Writer, frame: &FromHost) -> std::io::Result<()> {
    wire::write(&mut *writer.lock().unwrap_or_else(|e| e.into_inner()), frame)
}

impl Host {
    fn describe(&self) -> HostInfo {
        HostInfo {
            pid: std::process::id(),
            model: self.info.clone(),
            windows: self.windows.load(Ordering::SeqCst),
            rss_bytes: super::rss_bytes(),
        }
    }

    /// Serves one connection until it closes.
    fn serve(self: Arc<Self>, stream: UnixStream) {
        let window = self.next.fetch_add(1, Ordering::SeqCst);
        let writer: Writer = match stream.try_clone() {
            Ok(s) => Arc::new(Mutex::new(s)),
            Err(e) => return tracing::warn!("a connection: {e}"),
        };
        let running: Arc<Mutex<HashMap<u64, Running>>> = Arc::default();
        let mut reader = BufReader::new(stream);
        let mut is_window = false;
        loop {
            let frame = match wire::read::<ToHost>(&mut reader) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(window, "a window's connection broke: {e}");
                    break;
                }
            };
            match frame {
                ToHost::Hello => {
                    if !is_window {
                        is_window = true;
                        let now = self.windows.fetch_add(1, Ordering::SeqCst) + 1;
                        tracing::info!(window, windows = now, "a window connected");
                    }
                    let _ = send(&writer, &FromHost::Ready(self.describe()));
                }
                ToHost::Status => {
                    let _ = send(&writer, &FromHost::Ready(self.describe()));
                }
                ToHost::Complete { id, tokens, stop_key, max_tokens, unfinished, lead, blank_enders } => {
                    let (cancel, stop) = self.start_job(id, &writer, &running);
                    stop.unfinished.store(unfinished, Ordering::SeqCst);
                    let request = GenerateRequest {
                        prompt: Box::new(move |_: &dyn Tokenize, _: &VocabFacts| {
                            let (ask, open) = (Arc::clone(&stop), Arc::clone(&stop));
                            // The model thread asks before each token, of the text the last
                            // verdict was about: the window's answer came with it.
                            let unfinished = Box::new(move |_: &str| open.unfinished.load(Ordering::SeqCst));
                            Prompt { tokens: tokens.clone(), stop: Box::new(move |text| ask.check(text)), stop_key, max_tokens, unfinished, lead: lead.clone(), blank_enders: blank_enders.clone() }
                        }),
                        cancel,
                    };
                    self.run_job(window, id, &writer, &running, |reply| Job::Complete { request, reply, reach: Default::default() });
                }
                ToHost::Chat { id, messages, max_tokens } => {
                    let (cancel, stop) = self.start_job(id, &writer, &running);
                    let request = ChatRequest { messages, max_tokens, stop: Arc::new(move |text: &str| stop.check(text)), cancel };
                    self.run_job(window, id, &writer, &running, |reply| Job::Chat { request, reply });
                }
                ToHost::Verdict { id, stop, unfinished } => {
                    if let Some(job) = running.lock().unwrap_or_else(|e| e.into_inner()).get(&id) {
                        let _ = job.verdicts.send((stop, unfinished));
                    }
                }
                ToHost::Cancel { id } => {
                    // Its verdict channel closes with it: a piece waiting for one goes on, and
                    // the worker sees the flag at the next token.
                    if let Some(job) = running.lock().unwrap_or_else(|e| e.into_inner()).remove(&id) {
                        job.cancel.cancel();
                    }
                }
            }
        }
        for (_, job) in running.lock().unwrap_or_else(|e| e.into_inner()).drain() {
            job.cancel.cancel();
        }
        let _ = self.work.send(HostWork::Gone { window });
        if is_window {
            let now = self.windows.fetch_sub(1, Ordering::SeqCst) - 1;
            *self.left.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
            tracing::info!(window, windows = now, "a window left");
        }
    }

    /// Registers job `id`: its cancel flag, and the stop rule that asks the window.
    fn start_job(&self, id: u64, writer: &Writer, running: &Mutex<HashMap<u64, Running>>) -> (CancelFlag, Arc<AskWindow>) {
        let cancel = CancelFlag::new();
        let (verdicts, answers) = mpsc::channel();
        running.lock().unwrap_or_else(|e| e.into_inner()).insert(id, Running { cancel: cancel.clone(), verdicts });
        let ask = AskWindow { id, writer: Arc::clone(writer), answers: Mutex::new(answers), sent: AtomicUsize::new(0), unfinished: Default::default(), cancel: cancel.clone() };
        (cancel, Arc::new(ask))
    }

    /// Queues the job for the model thread; a thread of its own sends the answer when it comes.
    fn run_job(&self, window: u64, id: u64, writer: &Writer, running: &Arc<Mutex<HashMap<u64, Running>>>, job: impl FnOnce(oneshot::Sender<Result<crate::model::Generation, GenerateError>>) -> Job) {
        let (reply, answer) = oneshot::channel();
        let sent = self.work.send(HostWork::Job { window, job: job(reply) });
        let (writer, running) = (Arc::clone(writer), Arc::clone(running));
        std::thread::spawn(move || {
            let result = match sent {
                Ok(()) => answer.blocking_recv().unwrap_or_else(|_| Err(GenerateError::Unavailable(crate::model::THREAD_STOPPED.into()))),
                Err(_) => Err(GenerateError::Unavailable(crate::model::THREAD_STOPPED.into())),
            };
            running.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            let _ = send(&writer, &FromHost::Done { id, result: result.map(|g| (g.text, g.timings)) });
        });
    }
}

/// The stop rule of a window's job, run on the host's model thread: sends each token's new
/// text to the window and waits for the window's own rule's verdict on the text so far.
struct AskWindow {
    id: u64,
    writer: Writer,
    answers: Mutex<mpsc::Receiver<(Option<usize>, bool)>>,
    /// Bytes of the text already sent.
    sent: AtomicUsize,
    /// The window's last word on whether the text may end where it is.
    unfinished: std::sync::atomic::AtomicBool,
    cancel: CancelFlag,
}

impl AskWindow {
    /// The window's verdict on `text`; `None` (go on) once the job is cancelled, so that a
    /// cancelled job ends as cancelled (and is never kept as a suggestion).
    fn check(&self, text: &str) -> Option<usize> {
        if self.cancel.is_cancelled() {
            return None;
        }
        let from = self.sent.swap(text.len(), Ordering::SeqCst).min(text.len());
        let piece = text.get(from..).unwrap_or_default().to_owned();
        if send(&self.writer, &FromHost::Piece { id: self.id, text: piece }).is_err() {
            self.cancel.cancel();
            return None;
        }
        match self.answers.lock().unwrap_or_else(|e| e.into_inner()).recv_timeout(VERDICT_TIMEOUT) {
            Ok((verdict, unfinished)) => {
                self.unfinished.store(unfinished, Ordering::SeqCst);
                verdict
            }
            Err(_) => {
                self.cancel.cancel();
                None
            }
        }
    }
}
