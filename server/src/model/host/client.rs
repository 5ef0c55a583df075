//! A window's side of the shared host: finds the host of its [`Spec`] (starting one if there is
//! none), then serves the model thread's jobs through it. Prompts are built here with the GGUF's
//! vocabulary alone (`vocab_only`, as the endpoint's client does), sent as token ids; each
//! generated token's text comes back and this window's stop rule answers whether it is complete.
//!
//! A host that cannot be reached, is refused (a socket not ours or open to others) or dies
//! mid-request leaves the window on its own in-process model (`far::Fallback`): the log and
//! `Timings::backend` (`local: …`) say why. The window does not stay there: at its next job
//! after a back-off ([`Away`]) it looks for the host again — starting one in the background
//! when none runs or starts, while it answers from its own model — and once one answers, its
//! jobs go there again and its in-process model is unloaded (said in the log and the model's
//! status). The next window to start finds no host and starts a new one.

use std::io::BufReader;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::wire::{self, FromHost, HostInfo, ToHost};
use super::{Place, Spec};
use crate::config::ModelConfig;
use crate::model::far::Fallback;
use crate::model::llama::VocabOnly;
use crate::model::{CancelFlag, GenerateError, Generation, Job, ModelInfo, ModelStatus, Prompt, Sampling, Timings, VocabFacts};

/// How long a window waits for a host it started (or found starting) to listen: the model's
/// load included.
const START_WITHIN: Duration = Duration::from_secs(120);
/// How often the cancel flag is looked at while waiting for the host.
const POLL: Duration = Duration::from_millis(5);
/// After the host was lost (or never found), how long the window answers from its own model
/// before it looks for a host again; doubled at each look that finds none, up to [`BACK_OFF_MAX`].
const BACK_OFF: Duration = Duration::from_secs(2);
const BACK_OFF_MAX: Duration = Duration::from_secs(300);
/// How often a host that is starting (its lock held) is looked for.
const STARTING_POLL: Duration = Duration::from_millis(250);

/// Entry point of the model thread of a language server with `model.shared`.
pub(in crate::model) fn run(config: ModelConfig, sampling: Sampling, status: watch::Sender<ModelStatus>, jobs: mpsc::Receiver<Job>) {
    let mut fallback = Fallback::new(&config, sampling);
    let Some(spec) = Spec::of(&config, sampling) else { return };
    let vocab = match VocabOnly::load(&spec.path) {
        Ok(v) => v,
        Err(e) => {
            // The in-process model reports the same file's problem in its own words; without the
            // vocabulary no prompt can be built for a host, so the window stays on its own model.
            let why = format!("the model's vocabulary cannot be read ({e})");
            go_local(&mut fallback, &why, &status);
            while let Ok(job) = jobs.recv() {
                fallback.run(job, why.clone(), true);
            }
            return;
        }
    };
    let mut window = Window { spec, discovered: config.discovered.clone(), host: None, vocab, away: None, next: 0 };
    match connect_or_start(&window.spec) {
        Ok(host) => window.joined(host, &status),
        Err(why) => window.leave(format!("no shared model host ({why})"), &mut fallback, &status),
    }
    while let Ok(job) = jobs.recv() {
        window.serve(job, &mut fallback, &status);
    }
    tracing::debug!("host client thread exits");
}

/// Starts the in-process model (if it is not running yet) and mirrors its status (load
/// progress, then ready or failed) until it settles.
fn go_local(fallback: &mut Fallback, why: &str, status: &watch::Sender<ModelStatus>) {
    fallback.start(why);
    if let Some(mut local) = fallback.status() {
        loop {
            let now = local.borrow_and_update().clone();
            let settled = !matches!(now, ModelStatus::Loading { .. });
            status.send_replace(now);
            if settled {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A connection to the host.
struct Host {
    info: HostInfo,
    writer: UnixStream,
    /// Frames from the host, read on a thread of their own; closed when the host is gone.
    frames: mpsc::Receiver<FromHost>,
}

impl Drop for Host {
    /// Ends the connection for both ends at once (the reader thread holds a clone of the socket,
    /// which would keep it open): the host sees the window leave when its model thread ends, on
    /// a settings change as when the server exits.
    fn drop(&mut self) {
        let _ = self.writer.shutdown(std::net::Shutdown::Both);
    }
}

impl Host {
    fn send(&mut self, frame: &ToHost) -> Result<(), String> {
        wire::write(&mut self.writer, frame).map_err(|e| format!("the shared host cannot be written to ({e})"))
    }
}

struct Window {
    spec: Spec,
    /// How the model was found, for the status.
    discovered: Option<String>,
    host: Option<Host>,
    vocab: VocabOnly,
    /// Without a host: why, and when to look for one again.
    away: Option<Away>,
    next: u64,
}

/// A window on its own model: why, and its next look for a host.
struct Away {
    why: String,
    /// When the next job looks for the host again.
    look_at: Instant,
    /// The wait after a look that finds none (doubled each time, up to [`BACK_OFF_MAX`]).
    back_off: Duration,
    /// The host this window started, if any: set once that process has exited.
    started: Option<Arc<AtomicBool>>,
}

/// Why a job got no answer from the host.
enum HostError {
    /// The host stopped (the connection closed or broke).
    Gone(String),
}

impl Window {
    fn serve(&mut self, job: Job, fallback: &mut Fallback, status: &watch::Sender<ModelStatus>) {
        if self.host.is_none() {
            self.look_for_host(fallback, status);
        }
        if let Some(away) = &self.away {
            return fallback.run(job, away.why.clone(), true);
        }
        let answered = match &job {
            Job::Complete { request, .. } => self.complete(&request.prompt, &request.cancel),
            Job::Chat { request, .. } => {
                let frame = |id| ToHost::Chat { id, messages: request.messages.clone(), max_tokens: request.max_tokens };
                self.exchange(frame, &*request.stop, None, &request.cancel).map(|r| r.map(|(text, timings)| Generation { text, timings }))
            }
        };
        match answered {
            Ok(result) => job.reply(result),
            Err(HostError::Gone(why)) => {
                self.leave(why.clone(), fallback, status);
                fallback.run(job, why, true);
            }
        }
    }

    /// Jobs go to `host` from now on; the in-process model, if one was loaded, is unloaded.
    fn joined(&mut self, host: Host, status: &watch::Sender<ModelStatus>) {
        let info = &host.info;
        tracing::info!(pid = info.pid, windows = info.windows, "connected to the shared model host");
        status.send_replace(ModelStatus::Ready(ModelInfo {
            backend: format!("shared host (pid {}): {}", info.pid, info.model.backend),
            discovered: self.discovered.clone(),
            ..info.model.clone()
        }));
        self.host = Some(host);
        self.away = None;
    }

    /// The host is gone or was never found: jobs run on the in-process model (loaded now) until
    /// a look for the host after the back-off finds one.
    fn leave(&mut self, why: String, fallback: &mut Fallback, status: &watch::Sender<ModelStatus>) {
        tracing::warn!("{why}: loading the model in this process; looking for a shared host again in {} s", BACK_OFF.as_secs());
        self.host = None;
        self.away = Some(Away { why: why.clone(), look_at: Instant::now() + BACK_OFF, back_off: BACK_OFF, started: None });
        go_local(fallback, &why, status);
    }

    /// Once the back-off has passed: connects to the host if one listens (and unloads the
    /// in-process model), or starts one in the background when none runs or starts. Never
    /// waits for a host to load: the job at hand runs on the in-process model meanwhile.
    fn look_for_host(&mut self, fallback: &mut Fallback, status: &watch::Sender<ModelStatus>) {
        let Some(away) = self.away.as_mut() else { return };
        let now = Instant::now();
        if now < away.look_at {
            return;
        }
        let place = match Place::of(&self.spec) {
            Ok(p) => p,
            Err(e) => {
                away.back_off = (away.back_off * 2).min(BACK_OFF_MAX);
                away.look_at = now + away.back_off;
                return tracing::debug!("no place for a shared host: {e}");
            }
        };
        let found = super::make_dir(place.dir()).and_then(|()| connect(&place.socket, ToHost::Hello));
        match found {
            Ok(Some(host)) => {
                tracing::info!(pid = host.info.pid, "rejoined the shared model host: unloading the model in this process ({})", away.why);
                fallback.stop();
                self.joined(host, status);
            }
            Ok(None) => {
                if let Some(exited) = &away.started {
                    if !exited.load(Ordering::SeqCst) {
                        // The host this window started is loading: look again soon, without
                        // waiting for it here.
                        away.look_at = now + STARTING_POLL;
                        return;
                    }
                    // It exited without listening: wait longer before the next one.
                    away.started = None;
                    away.back_off = (away.back_off * 2).min(BACK_OFF_MAX);
                    away.look_at = now + away.back_off;
                    return;
                }
                if super::serve::lock_held(&place.lock) {
                    // Another window's host is starting.
                    away.look_at = now + STARTING_POLL;
                    return;
                }
                match start(&self.spec, &place) {
                    Ok(exited) => {
                        away.started = Some(exited);
                        away.look_at = now + STARTING_POLL;
                    }
                    Err(e) => {
                        tracing::warn!("cannot start the shared model host again: {e}");
                        away.back_off = (away.back_off * 2).min(BACK_OFF_MAX);
                        away.look_at = now + away.back_off;
                    }
                }
            }
            Err(refused) => {
                tracing::debug!("still no shared model host: {refused}");
                away.why = format!("no shared model host ({refused})");
                away.back_off = (away.back_off * 2).min(BACK_OFF_MAX);
                away.look_at = now + away.back_off;
            }
        }
    }

    /// Builds the prompt with the vocabulary and has the host generate it.
    fn complete(&mut self, build: &crate::model::BuildPrompt, cancel: &CancelFlag) -> Result<Result<Generation, GenerateError>, HostError> {
        if cancel.is_cancelled() {
            return Ok(Err(GenerateError::Cancelled));
        }
        let start = Instant::now();
        let n_ctx = self.host.as_ref().map_or(0, |h| h.info.model.n_ctx as usize);
        let v = &self.vocab;
        let facts = VocabFacts { fim: v.info.format.clone(), bos: v.info.bos, n_ctx, file_sep: v.info.file_sep };
        let Prompt { tokens, stop, stop_key, max_tokens, unfinished, lead, blank_enders } = build(&v.tokenizer(), &facts);
        let build_ms = start.elapsed().as_secs_f64() * 1e3;
        if tokens.is_empty() {
            return Ok(Ok(Generation { text: String::new(), timings: Timings { backend: Some("host".into()), ..Timings::default() } }));
        }
        let frame = |id| ToHost::Complete { id, tokens: tokens.clone(), stop_key, max_tokens, unfinished: unfinished(""), lead: lead.clone(), blank_enders: blank_enders.clone() };
        let answer = self.exchange(frame, &*stop, Some(&*unfinished), cancel)?;
        Ok(answer.map(|(text, mut timings)| {
            timings.build_ms += build_ms;
            timings.ttft_ms += build_ms;
            timings.total_ms += build_ms;
            timings.prompt = tokens;
            Generation { text, timings }
        }))
    }

    /// Sends a job, answers each piece with `stop`'s (and `unfinished`'s) verdict on the text so
    /// far, sends a cancel when the flag is set, and returns the host's answer.
    fn exchange(&mut self, frame: impl Fn(u64) -> ToHost, stop: &dyn Fn(&str) -> Option<usize>, unfinished: Option<&(dyn Fn(&str) -> bool + Send)>, cancel: &CancelFlag) -> Result<Result<(String, Timings), GenerateError>, HostError> {
        self.next += 1;
        let id = self.next;
        let host = self.host.as_mut().ok_or_else(|| HostError::Gone("no shared host".into()))?;
        host.send(&frame(id)).map_err(HostError::Gone)?;
        let mut text = String::new();
        let mut cancelled = false;
        loop {
            if cancel.is_cancelled() && !cancelled {
                cancelled = true;
                host.send(&ToHost::Cancel { id }).map_err(HostError::Gone)?;
            }
            match host.frames.recv_timeout(POLL) {
                Ok(FromHost::Piece { id: of, text: piece }) if of == id => {
                    text.push_str(&piece);
                    cancel.add_generated();
                    if !cancelled {
                        let verdict = ToHost::Verdict { id, stop: stop(&text), unfinished: unfinished.is_some_and(|u| u(&text)) };
                        host.send(&verdict).map_err(HostError::Gone)?;
                    }
                }
                Ok(FromHost::Done { id: of, result }) if of == id => {
                    return Ok(result.map(|(text, mut timings)| {
                        timings.backend = Some("host".into());
                        (text, timings)
                    }));
                }
                Ok(_) => {} // an earlier job's frame
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(HostError::Gone("the shared model host stopped mid-request".into()));
                }
            }
        }
    }
}

/// Connects to the host of `spec`, starting it first if none runs (or none is starting).
fn connect_or_start(spec: &Spec) -> Result<Host, String> {
    let place = Place::of(spec)?;
    super::make_dir(place.dir())?;
    let deadline = Instant::now() + START_WITHIN;
    // The host this window started, if any, and how many it started: a host that exits
    // without a lock holder left (it lost a race for the lock) is started again, twice at most.
    let mut started: Option<Arc<AtomicBool>> = None;
    let mut starts = 0;
    loop {
        match connect(&place.socket, ToHost::Hello) {
            Ok(Some(host)) => return Ok(host),
            Ok(None) => {}
            Err(refused) => return Err(refused),
        }
        let exited = started.as_ref().is_none_or(|e| e.load(Ordering::SeqCst));
        if exited && !super::serve::lock_held(&place.lock) {
            if starts == 3 {
                return Err(format!("the host it started exited (its log: {})", place.log.display()));
            }
            starts += 1;
            started = Some(start(spec, &place)?);
        }
        if Instant::now() > deadline {
            return Err(format!("the host did not listen within {} s (its log: {})", START_WITHIN.as_secs(), place.log.display()));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Connects and says `hello` (a window) or asks for the status (the doctor). `Ok(None)`: no
/// host listens there; `Err`: the socket or its peer is refused (never connected to, or
/// dropped at once), or the host did not answer.
fn connect(socket: &Path, hello: ToHost) -> Result<Option<Host>, String> {
    if let Some(dir) = socket.parent() {
        if std::fs::symlink_metadata(dir).is_err() {
            return Ok(None); // no folder yet: no host has run
        }
        super::check_dir(dir).map_err(|e| format!("refused the socket's folder: {e}"))?;
    }
    match std::fs::symlink_metadata(socket) {
        Ok(_) => super::check_socket(socket).map_err(|e| format!("refused the socket: {e}"))?,
        Err(_) => return Ok(None),
    }
    let mut stream = match UnixStream::connect(socket) {
        Ok(s) => s,
        // A socket with no host behind it: a host that died; the next host replaces it.
        Err(_) => return Ok(None),
    };
    match super::peer_uid(&stream) {
        Ok(uid) if uid == super::our_uid() => {}
        Ok(uid) => return Err(format!("refused the host at {}: it runs as uid {uid}", socket.display())),
        Err(e) => return Err(format!("refused the host at {}: its uid cannot be known ({e})", socket.display())),
    }
    wire::write(&mut stream, &hello).map_err(|e| format!("the host at {}: {e}", socket.display()))?;
    let mut reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    let info = match wire::read::<FromHost>(&mut reader) {
        Ok(Some(FromHost::Ready(info))) => info,
        Ok(_) => return Ok(None),
        Err(e) => return Err(format!("the host at {} did not answer: {e}", socket.display())),
    };
    stream.set_read_timeout(None).map_err(|e| e.to_string())?;
    let (tx, frames) = mpsc::channel();
    std::thread::Builder::new()
        .name("ghostline-host-reader".into())
        .spawn(move || {
            while let Ok(Some(frame)) = wire::read::<FromHost>(&mut reader) {
                if tx.send(frame).is_err() {
                    break;
                }
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(Some(Host { info, writer: stream, frames }))
}

/// What `ghostline doctor` says of the host of `spec`: its facts, none, or why it is refused.
pub fn status(spec: &Spec) -> Result<Option<HostInfo>, String> {
    let place = Place::of(spec)?;
    Ok(connect(&place.socket, ToHost::Status)?.map(|h| h.info.clone()))
}

/// Starts `ghostline host` detached (its own session, no stdin/stdout, stderr to its log);
/// returns a flag set once it has exited (a thread waits for it, so it leaves no zombie).
fn start(spec: &Spec, place: &Place) -> Result<Arc<AtomicBool>, String> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find ghostline's own binary: {e}"))?;
    if let Some(dir) = place.log.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let log = std::fs::OpenOptions::new().create(true).append(true).open(&place.log).map_err(|e| format!("{}: {e}", place.log.display()))?;
    let spec_json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
    let mut command = Command::new(exe);
    command.args(["host", "--spec", &spec_json]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::from(log));
    // SAFETY: setsid is async-signal-safe; called in the child between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|e| format!("cannot start the shared host: {e}"))?;
    tracing::info!(pid = child.id(), log = %place.log.display(), "started the shared model host");
    let exited = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&exited);
    std::thread::spawn(move || {
        let _ = child.wait();
        flag.store(true, Ordering::SeqCst);
    });
    Ok(exited)
}
