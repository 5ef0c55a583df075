//! How many threads a decode gets: `model.threads` at most, fewer while other processes keep
//! this machine's cores busy.
//!
//! llama.cpp splits every operation of a decode across its threads and makes them meet at a
//! barrier after each one (hundreds per token). A thread that shares its core with another busy
//! process is descheduled for a time slice now and then, and every other thread waits for it at
//! the next barrier: on 2 cores with one other busy process, 2 threads made a first token 5×
//! slower than 1 thread (README, "Performance"). So before each job the model thread asks
//! [`Load::threads`] how many cores other work leaves free and decodes with that many.
//!
//! What other work uses is read from `/proc/stat` (all processes) less `/proc/self/stat` (this
//! one), sampled every [`SAMPLE`] by a small thread and averaged over [`WINDOW`], and bounded by
//! what runs now: the tasks `/proc/stat` counts as running, less this process's own running
//! threads. A burst that just ended (another server's answer, a save's formatter) then takes no
//! thread away, while a sustained load (a build, a busy loop) is both in the average and running
//! now. A core counts as free while others use at most a quarter of it. Where `/proc` cannot be
//! read (not Linux), the configured count is used as it is.
//!
//! The shared host decodes several windows' jobs at once, each on a context of its own, in one
//! process: their threads are this process's time, which the sampler leaves out. So each
//! decoding context claims the threads it decodes with ([`Claim`]), and a choice counts the
//! threads the process's other contexts claim as cores in use.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How often the load is sampled, and over how long it is averaged.
pub const SAMPLE: Duration = Duration::from_millis(250);
pub const WINDOW: Duration = Duration::from_millis(1000);

/// How often a job chooses its threads again (between batches of its prompt, between tokens).
pub const RECHECK: Duration = Duration::from_millis(50);

/// First prompt batch while a job decodes with fewer threads than it may, doubled with each
/// batch the count stays reduced: on the batch-invariant CPU kernels a batch costs about its
/// tokens, so small batches lose little against 512 and let the count be chosen again soon. A
/// job that began beside a burst that had just ended (another program's threads running down)
/// gets its threads back after ~60 ms on one thread (8 tokens; 32 took ~250 ms, measured: a
/// cold 226-token prompt 1.21× llama-server's time against 1.04× with fixed threads), and one
/// beside a lasting load reaches whole batches after five.
pub const REDUCED_BATCH: usize = 8;

/// Share of a core others may use while it still counts as free.
const FREE_BELOW: f64 = 0.25;

/// CPU time counters at one moment, in clock ticks summed over all CPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Busy time of every process (user, nice, system, irq, softirq, steal).
    pub busy: u64,
    /// All time, idle included.
    pub total: u64,
    /// This process's user and system time.
    pub own: u64,
    pub cpus: usize,
    /// Tasks running or ready to run now (`procs_running`), this process's own included.
    pub running: u32,
}

/// Parses the aggregate `cpu` line of `/proc/stat`, counts its per-CPU lines and reads
/// `procs_running`: (busy, total, cpus, running).
pub fn parse_proc_stat(text: &str) -> Option<(u64, u64, usize, u32)> {
    let mut lines = text.lines();
    let first = lines.next()?;
    let mut fields = first.split_ascii_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest time is already in user/nice).
    let v: Vec<u64> = fields.take(8).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    if v.len() < 4 {
        return None;
    }
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    let total = busy + at(3) + at(4);
    let mut cpus = 0;
    let mut running = 0;
    for line in lines {
        if line.starts_with("cpu") && line.as_bytes().get(3).is_some_and(u8::is_ascii_digit) {
            cpus += 1;
        } else if let Some(n) = line.strip_prefix("procs_running ") {
            running = n.trim().parse().unwrap_or(0);
        }
    }
    Some((busy, total, cpus.max(1), running))
}

/// The state letter of a `/proc/<pid>/task/<tid>/stat` line (after the parenthesised name).
fn task_state(text: &str) -> Option<char> {
    text[text.rfind(')')? + 1..].trim_start().chars().next()
}

/// This process's threads that are running or ready to run (state `R`).
fn own_running() -> u32 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    tasks
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("stat")).ok().and_then(|s| task_state(&s)) == Some('R'))
        .count() as u32
}

/// Parses `utime + stime` (fields 14 and 15) of a `/proc/<pid>/stat` line. The command name
/// (field 2) is in parentheses and may hold spaces: fields are counted after its last `)`.
pub fn parse_own_stat(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    // After the name: state (3), ppid (4), … utime is field 14, the 12th here.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

fn read_sample() -> Option<Sample> {
    let (busy, total, cpus, running) = parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)?;
    let own = parse_own_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
    Some(Sample { busy, total, own, cpus, running })
}

/// Cores other processes kept busy between two samples (0 when no time passed).
pub fn others_busy(from: &Sample, to: &Sample) -> f64 {
    let total = to.total.saturating_sub(from.total);
    if total == 0 {
        return 0.0;
    }
    let others = to.busy.saturating_sub(from.busy).saturating_sub(to.own.saturating_sub(from.own));
    others as f64 / total as f64 * to.cpus as f64
}

/// Threads for a decode: `max` at most, one at least, one per core that others leave free.
pub fn choose(max: u32, cpus: usize, others: f64) -> u32 {
    let free = (cpus as f64 - others + FREE_BELOW).floor();
    if free.is_nan() {
        return max.max(1);
    }
    (free.clamp(1.0, f64::from(max.max(1)))) as u32
}

/// The machine's load as the sampling thread last measured it.
pub struct Load {
    samples: Arc<Mutex<VecDeque<(Instant, Sample)>>>,
}

impl Load {
    /// The process's sampler (started on first use), or `None` where `/proc` cannot be read.
    pub fn shared() -> Option<&'static Load> {
        static LOAD: OnceLock<Option<Load>> = OnceLock::new();
        LOAD.get_or_init(|| {
            let first = read_sample()?;
            let samples = Arc::new(Mutex::new(VecDeque::from([(Instant::now(), first)])));
            let kept = Arc::clone(&samples);
            std::thread::Builder::new()
                .name("ghostline-load".into())
                .spawn(move || loop {
                    std::thread::sleep(SAMPLE);
                    let Some(s) = read_sample() else { continue };
                    let mut q = kept.lock().unwrap_or_else(|e| e.into_inner());
                    let now = Instant::now();
                    q.push_back((now, s));
                    while q.len() > 2 && q.front().is_some_and(|(t, _)| now.duration_since(*t) > WINDOW) {
                        q.pop_front();
                    }
                })
                .ok()?;
            Some(Load { samples })
        })
        .as_ref()
    }

    /// Cores other processes used over the last [`WINDOW`] (up to now: a fresh reading closes
    /// the window), at most as many as other tasks run now; and the machine's CPU count.
    pub fn others(&self) -> Option<(f64, usize)> {
        let now = read_sample()?;
        let running_now = now.running.saturating_sub(own_running());
        let q = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let (_, from) = q.front()?;
        Some((others_busy(from, &now).min(f64::from(running_now)), now.cpus))
    }

    /// Threads for the next job: see [`choose`]; `claim` is the caller's, and the threads the
    /// process's other contexts claim count as cores in use.
    pub fn threads(&self, max: u32, claim: &Claim) -> u32 {
        let here = f64::from(claim.others());
        match self.others() {
            Some((others, cpus)) => choose(max, cpus, others + here),
            None => max,
        }
    }
}

/// Threads this process's decoding contexts hold now, summed over their [`Claim`]s.
static CLAIMED: AtomicU32 = AtomicU32::new(0);

/// The threads one context decodes with while it runs a job (none between jobs): what the
/// process's other contexts see of it. Dropping it gives them back.
#[derive(Debug, Default)]
pub struct Claim(u32);

impl Claim {
    /// Holds `n` threads from now (0: none, between jobs).
    pub fn set(&mut self, n: u32) {
        if n >= self.0 {
            CLAIMED.fetch_add(n - self.0, Ordering::SeqCst);
        } else {
            CLAIMED.fetch_sub(self.0 - n, Ordering::SeqCst);
        }
        self.0 = n;
    }

    /// Threads the process's other contexts hold now.
    pub fn others(&self) -> u32 {
        CLAIMED.load(Ordering::SeqCst).saturating_sub(self.0)
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.set(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_busy_total_and_cpus() {
        let text = "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\ncpu1 50 3 25 500 10 2 1 1 0 0\nintr 1 2 3\nctxt 9\nprocs_running 3\nprocs_blocked 0\n";
        assert_eq!(parse_proc_stat(text), Some((100 + 5 + 50 + 3 + 2 + 1, 161 + 1000 + 20, 2, 3)));
        assert_eq!(task_state("17 (tokio-rt (1)) R 1 2"), Some('R'));
        assert_eq!(parse_proc_stat("intr 1\n"), None);
    }

    #[test]
    fn own_stat_counts_fields_after_the_name() {
        // A name with spaces and a parenthesis: fields are counted from the last ')'.
        let text = "4242 (ghost (line) x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 77 11 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_own_stat(text), Some(88));
    }

    #[test]
    fn others_leave_out_this_process() {
        let a = Sample { busy: 1000, total: 10_000, own: 100, cpus: 2, running: 1 };
        // 200 ticks of 2 CPUs passed (1 s at 100 Hz); all 200 busy, 100 of them ours.
        let b = Sample { busy: 1200, total: 10_200, own: 200, cpus: 2, running: 1 };
        assert!((others_busy(&a, &b) - 1.0).abs() < 1e-9);
        assert_eq!(others_busy(&a, &a), 0.0);
    }

    #[test]
    fn a_core_is_free_while_others_use_at_most_a_quarter_of_it() {
        assert_eq!(choose(2, 2, 0.0), 2);
        assert_eq!(choose(2, 2, 0.2), 2);
        // One other busy process on 2 cores: one thread, not two that wait for each other.
        assert_eq!(choose(2, 2, 0.4), 1);
        assert_eq!(choose(2, 2, 1.0), 1);
        assert_eq!(choose(2, 2, 5.0), 1);
        assert_eq!(choose(8, 16, 9.0), 7);
        assert_eq!(choose(8, 16, 0.0), 8);
        assert_eq!(choose(0, 4, 0.0), 1);
        assert_eq!(choose(4, 4, f64::NAN), 4);
    }

    #[test]
    fn the_sampler_reads_this_machine() {
        let Some(load) = Load::shared() else { return assert!(!cfg!(target_os = "linux"), "/proc is readable on Linux") };
        let (others, cpus) = load.others().expect("a reading");
        assert!(cpus >= 1 && others >= 0.0 && others <= cpus as f64 + 0.5, "{others} of {cpus}");
        let t = load.threads(3, &Claim::default());
        assert!((1..=3).contains(&t));
    }

    #[test]
    fn a_context_sees_the_threads_the_others_claim_not_its_own() {
        // No other unit test decodes: the claims here are the only ones.
        let (mut a, mut b) = (Claim::default(), Claim::default());
        a.set(2);
        assert_eq!((a.others(), b.others()), (0, 2));
        b.set(1);
        assert_eq!((a.others(), b.others()), (1, 2));
        a.set(1);
        assert_eq!(b.others(), 1);
        drop(a);
        assert_eq!(b.others(), 0, "a dropped claim gives its threads back");
        b.set(0);
        assert_eq!(Claim::default().others(), 0);
    }
}
