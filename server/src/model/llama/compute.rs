//! The shared host's compute thread: the windows' decodes (`llama_decode`) with more than one
//! thread run on it, one at a time, while each window's thread does the rest of its job.
//!
//! Why one thread: llama.cpp is built with OpenMP here, and each thread that starts a parallel
//! decode gets a pool of OpenMP threads of its own. Once the process holds more OpenMP threads
//! than the machine has CPUs, libgomp stops spinning at its barriers (hundreds per token) and
//! puts waiting threads to sleep: with a context per window each decoding on its own thread, a
//! token took ~28 ms on two cores where it takes ~11 (measured, README "One model for every
//! window"). Decodes shipped to one thread keep one pool. (A decode with one thread starts no
//! pool: the window's own thread runs it, beside the others. Where layers are on a GPU every
//! decode comes here.)
//!
//! Which decode goes next: the smallest waiting (a generated token before a prompt batch of up
//! to 128 tokens), the oldest among equals, so the windows' jobs interleave and a key in one
//! window does not wait for another window's whole prompt. A caller that just had a small decode
//! (a generation, token after token) has its next one ready a moment later: a big decode of
//! another caller waits [`GRACE`] for it first, so a generation is not cut by prompt batches.

use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// Decodes of at most this many tokens are small: a generated token and its drafts, a few typed
/// characters' tokens.
const SMALL: usize = 16;

/// How long a big decode waits for the next small one of the caller that just had one (its
/// thread samples the token and asks the window's stop rule in between: ~1-3 ms).
const GRACE: Duration = Duration::from_millis(5);

struct Call {
    caller: u64,
    tokens: usize,
    run: Box<dyn FnOnce() + Send + 'static>,
}

/// A caller's handle on the compute thread (one per context); the thread ends when every handle
/// is dropped.
pub struct Compute {
    calls: mpsc::Sender<Call>,
    caller: u64,
}

/// Callers' ids, unique in the process.
static CALLERS: AtomicU64 = AtomicU64::new(0);

impl Compute {
    pub fn start() -> Result<Compute, String> {
        let (calls, queue) = mpsc::channel::<Call>();
        std::thread::Builder::new().name("ghostline-compute".into()).spawn(move || serve(&queue)).map_err(|e| format!("cannot start the compute thread: {e}"))?;
        Ok(Compute { calls, caller: CALLERS.fetch_add(1, Ordering::Relaxed) })
    }

    /// Another caller's handle on the same thread.
    pub fn handle(&self) -> Compute {
        Compute { calls: self.calls.clone(), caller: CALLERS.fetch_add(1, Ordering::Relaxed) }
    }

    /// Runs `f`, a decode of `tokens` tokens, on the compute thread and returns what it returns
    /// (a panic in it is resumed here). The caller waits until `f` has run, so `f` may borrow
    /// what the caller holds, `Send` or not: it is used by one thread at a time, the caller's
    /// thread waiting.
    pub fn run<R: 'static>(&self, tokens: usize, f: impl FnOnce() -> R) -> R {
        let (done, answer) = mpsc::sync_channel(1);
        let call: Box<dyn FnOnce() + '_> = Box::new(move || {
            let _ = done.send(catch_unwind(AssertUnwindSafe(f)));
        });
        // SAFETY: the call is run (or dropped unrun, when the thread has gone) before `answer`
        // yields or disconnects, and this function returns only after that, so what `f`
        // borrows outlives its use; and it is used by the compute thread alone meanwhile, this
        // thread blocked on `answer` (llama.cpp's context and batch are not tied to a thread).
        let run = unsafe { std::mem::transmute::<Box<dyn FnOnce() + '_>, Box<dyn FnOnce() + Send + 'static>>(call) };
        if let Err(mpsc::SendError(unrun)) = self.calls.send(Call { caller: self.caller, tokens, run }) {
            drop(unrun);
            panic!("the compute thread has stopped");
        }
        match answer.recv() {
            Ok(Ok(r)) => r,
            Ok(Err(panic)) => resume_unwind(panic),
            Err(_) => panic!("the compute thread dropped a call"),
        }
    }
}

/// The compute thread: runs the calls in the order [`next`] chooses until every handle is gone.
fn serve(queue: &mpsc::Receiver<Call>) {
    let mut waiting: VecDeque<Call> = VecDeque::new();
    // The caller of the last call, if it was small.
    let mut generating: Option<u64> = None;
    loop {
        if waiting.is_empty() {
            match queue.recv() {
                Ok(c) => waiting.push_back(c),
                Err(_) => return,
            }
        }
        waiting.extend(queue.try_iter());
        let mut at = next(&waiting);
        // A big decode while the caller that had the last (small) one has none waiting yet.
        if generating.is_some_and(|g| waiting[at].tokens > SMALL && !waiting.iter().any(|c| c.caller == g)) {
            if let Ok(c) = queue.recv_timeout(GRACE) {
                waiting.push_back(c);
                waiting.extend(queue.try_iter());
                at = next(&waiting);
            }
        }
        let Some(call) = waiting.remove(at) else { continue };
        generating = (call.tokens <= SMALL).then_some(call.caller);
        (call.run)();
    }
}

/// The waiting call to run next: the smallest, the oldest among equals.
fn next(waiting: &VecDeque<Call>) -> usize {
    waiting.iter().enumerate().min_by_key(|(i, c)| (c.tokens.min(SMALL + 1), *i)).map_or(0, |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_run_on_the_compute_thread_with_borrows_and_panics_come_back() {
        let compute = Compute::start().unwrap();
        let mut seen = Vec::new();
        let here = std::thread::current().id();
        let (name, other) = compute.run(1, || {
            seen.push(1);
            (std::thread::current().name().map(str::to_owned), std::thread::current().id() != here)
        });
        assert_eq!((name.as_deref(), other, seen), (Some("ghostline-compute"), true, vec![1]));
        let panicked = catch_unwind(AssertUnwindSafe(|| compute.run(1, || panic!("in a call"))));
        assert!(panicked.is_err());
        assert_eq!(compute.handle().run(1, || 2 + 2), 4, "the thread goes on after a call panicked");
    }

    #[test]
    fn a_generation_goes_before_prompt_batches_and_keeps_its_turn() {
        let compute = Compute::start().unwrap();
        let (big, small) = (compute.handle(), compute.handle());
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        // The compute thread is held by a first call while a prompt batch and a token queue.
        let (hold, held) = mpsc::channel::<()>();
        let log = |what: &'static str| {
            let order = std::sync::Arc::clone(&order);
            move || order.lock().unwrap().push(what)
        };
        std::thread::scope(|s| {
            let first = s.spawn(move || compute.run(1, move || held.recv().unwrap()));
            std::thread::sleep(Duration::from_millis(50));
            let batches = s.spawn(|| {
                for _ in 0..2 {
                    big.run(128, log("batch"));
                }
            });
            std::thread::sleep(Duration::from_millis(50));
            let tokens = s.spawn(|| {
                for _ in 0..3 {
                    small.run(1, log("token"));
                    // Sampling and the stop rule between tokens.
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
            std::thread::sleep(Duration::from_millis(50));
            hold.send(()).unwrap();
            first.join().unwrap();
            tokens.join().unwrap();
            batches.join().unwrap();
        });
        assert_eq!(*order.lock().unwrap(), ["token", "token", "token", "batch", "batch"]);
    }
}
