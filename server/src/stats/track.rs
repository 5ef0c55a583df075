//! The statistics service the language server feeds: it numbers the suggestions shown (the id
//! their accept command carries), records accepts, follows each accepted region through the
//! document's later edits, and measures at the two retention checks (30 s and 5 minutes) how
//! much of the accepted text is still there. Writes go to a thread of their own, so a keystroke
//! or an answer never waits for SQLite.
//!
//! **How the accepted text is found and followed.** At the accept, the accepted text is looked
//! for in the document nearest to the cursor it was shown at (the user may have typed its start
//! meanwhile, or the client may have moved it by a few characters); where it is not there as it
//! was shown, the region is the same length from that cursor. From then on the region follows
//! every edit (`didChange`) like a marker: edits before it move it, edits inside or across it
//! change its text, text typed right after it is not part of it. At each check the region's
//! text is compared with the accepted text ([`super::retained_share`]). A closed document keeps
//! what the region last held. Only lengths and shares reach the database, never the text.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use ropey::Rope;

use super::{retained_share, DbError, Route, Shown, Stats, Window};
use crate::config::StatsConfig;

/// Suggestions shown that can still be accepted (older ones are forgotten).
const OFFERS: usize = 64;
/// Accepted regions followed until their last check.
const REGIONS: usize = 256;
/// How far from the cursor it was shown at the accepted text is looked for, in characters.
const SEARCH: usize = 4000;
/// A request that came this soon after the document's last edit was that keystroke's: its
/// latency counts from the keystroke. Later (asked by hand after a pause): from the request.
const KEY_WINDOW: Duration = Duration::from_secs(1);
/// Writes kept in memory while another connection keeps the database locked; past this many
/// the oldest are dropped and counted (see [`write`]).
pub const QUEUE: usize = 500;
/// How often kept writes are tried again while the database is locked.
const RETRY: Duration = Duration::from_millis(250);

/// How the writing thread tells the user something (the language server: a
/// `window/showMessage` warning).
pub type Notify = Arc<dyn Fn(String) + Send + Sync>;

/// One edit of a document, in characters of the text before it: `start..end` became `text`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edit<'a> {
    pub start: usize,
    pub end: usize,
    pub text: &'a str,
}

/// A suggestion about to be shown, as the language server knows it.
#[derive(Debug, Clone)]
pub struct Offer {
    /// The document (kept in memory only, to follow edits; never stored).
    pub uri: String,
    /// The character index in the document where the suggestion starts.
    pub anchor: usize,
    /// The suggestion (kept in memory only).
    pub text: String,
    pub model: String,
    pub language: String,
    pub route: Route,
    /// When the request arrived.
    pub requested: Instant,
}

struct Offered {
    id: u64,
    offer: Offer,
    retention: [Duration; 2],
}

/// An accepted region, followed through the edits of its document.
#[derive(Debug, Clone, PartialEq)]
struct Region {
    id: u64,
    /// `None` once the document closed: the region keeps what it last held.
    uri: Option<String>,
    start: usize,
    accepted: String,
    /// The region's text now.
    now: String,
}

impl Region {
    fn len(&self) -> usize {
        self.now.chars().count()
    }

    /// It holds a proper start of the accepted text: text inserted at its end continues it.
    fn arriving(&self) -> bool {
        self.now.len() < self.accepted.len() && self.accepted.starts_with(&self.now)
    }

    /// Follows one edit of the region's document.
    fn follow(&mut self, e: &Edit<'_>) {
        let end = self.start + self.len();
        let delta = e.text.chars().count() as isize - (e.end - e.start) as isize;
        if e.start == end && e.end == end && self.arriving() {
            // Inserted at its end while it holds only the start of what was accepted: the rest
            // of it arriving (Neovim puts a plain-text item in by parts).
            self.now.push_str(e.text);
        } else if e.end <= self.start {
            // Before the region (or touching its start): it moves.
            self.start = (self.start as isize + delta).max(0) as usize;
        } else if e.start >= end {
            // After it (text typed right after it included): nothing.
        } else {
            // Inside or across: the region's text changes, and it takes in the new text.
            let at = |chars: usize| self.now.char_indices().nth(chars).map_or(self.now.len(), |(b, _)| b);
            let keep_before = at(e.start.saturating_sub(self.start));
            let keep_after = at(e.end.min(end) - self.start);
            let now = format!("{}{}{}", &self.now[..keep_before], e.text, &self.now[keep_after..]);
            self.start = self.start.min(e.start);
            self.now = now;
        }
    }
}

/// What goes to the writing thread.
enum Msg {
    Shown { id: u64, path: PathBuf, model: String, language: String, route: Route, latency_ms: f64, chars: usize },
    Accepted { id: u64, chars: usize },
    Retained { id: u64, window: Window, share: f64 },
    /// Answered once what came before it was written, or kept (tests and `flush`).
    Flush(mpsc::Sender<Flushed>),
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    offers: VecDeque<Offered>,
    regions: VecDeque<Region>,
    last_edit: HashMap<String, Instant>,
    writer: Option<mpsc::Sender<Msg>>,
    warned: bool,
    notify: Option<Notify>,
}

/// The statistics service. A cheap handle: clones share it.
#[derive(Clone, Default)]
pub struct Tracker(Arc<Mutex<Inner>>);

impl Tracker {
    /// A tracker whose writing thread tells the user through `notify` when statistics cannot
    /// be recorded (once per cause).
    pub fn with_notify(notify: Notify) -> Tracker {
        Tracker(Arc::new(Mutex::new(Inner { notify: Some(notify), ..Inner::default() })))
    }

    /// Waits (at most `timeout`) until the writing thread has handled everything sent before;
    /// `None`: no thread (nothing was ever sent) or no answer in time.
    pub fn flush(&self, timeout: Duration) -> Option<Flushed> {
        let (tx, rx) = mpsc::channel();
        let writer = self.lock().writer.clone()?;
        writer.send(Msg::Flush(tx)).ok()?;
        rx.recv_timeout(timeout).ok()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A suggestion is being shown: records it (with statistics on) and returns the id its
    /// accept command carries; `None` with statistics off (nothing is written then, and no
    /// database file is made).
    pub fn shown(&self, settings: &StatsConfig, offer: Offer) -> Option<u64> {
        if !settings.enabled {
            return None;
        }
        let mut inner = self.lock();
        let Some(path) = settings.path.clone().or_else(Stats::default_path) else {
            if !std::mem::replace(&mut inner.warned, true) {
                tracing::warn!("no data directory (HOME, XDG_DATA_HOME unset) and no stats.path: statistics are not recorded");
            }
            return None;
        };
        inner.next_id += 1;
        let id = inner.next_id;
        // From the keystroke when this request followed one, else from the request.
        let since = match inner.last_edit.get(&offer.uri) {
            Some(&key) if offer.requested.saturating_duration_since(key) <= KEY_WINDOW => key,
            _ => offer.requested,
        };
        let msg = Msg::Shown {
            id,
            path,
            model: offer.model.clone(),
            language: offer.language.clone(),
            route: offer.route,
            latency_ms: since.elapsed().as_secs_f64() * 1000.0,
            chars: offer.text.chars().count(),
        };
        inner.send(msg);
        if inner.offers.len() >= OFFERS {
            inner.offers.pop_front();
        }
        inner.offers.push_back(Offered { id, offer, retention: settings.retention });
        Some(id)
    }

    /// The document and the text of suggestion `id`, while it can still be accepted.
    pub fn offered(&self, id: u64) -> Option<(String, String)> {
        self.lock().offers.iter().find(|o| o.id == id).map(|o| (o.offer.uri.clone(), o.offer.text.clone()))
    }

    /// The user accepted suggestion `id`: all of it, or its first `chars` characters so far (a
    /// word or line accept). `doc` is its document now, with the accepted text in it. Starts
    /// the retention checks (once per suggestion). `false`: no such suggestion (too old, or
    /// shown with statistics off).
    pub fn accepted(&self, id: u64, chars: Option<usize>, doc: &Rope) -> bool {
        let mut inner = self.lock();
        let Some(offered) = inner.offers.iter().find(|o| o.id == id) else { return false };
        let total = offered.offer.text.chars().count();
        let chars = chars.unwrap_or(total).min(total);
        let accepted: String = offered.offer.text.chars().take(chars).collect();
        let (start, now) = locate(doc, offered.offer.anchor, &accepted);
        let (uri, retention) = (offered.offer.uri.clone(), offered.retention);
        inner.send(Msg::Accepted { id, chars });
        let region = Region { id, uri: Some(uri), start, accepted, now };
        if let Some(existing) = inner.regions.iter_mut().find(|r| r.id == id) {
            // A longer part of the same suggestion: its checks are already timed.
            *existing = region;
            return true;
        }
        if inner.regions.len() >= REGIONS {
            inner.regions.pop_front();
        }
        inner.regions.push_back(region);
        drop(inner);
        let tracker = self.clone();
        let started = tokio::time::Instant::now();
        tokio::spawn(async move {
            for (window, after) in [(Window::Seconds30, retention[0]), (Window::Minutes5, retention[1])] {
                tokio::time::sleep_until(started + after).await;
                tracker.check(id, window);
            }
        });
        true
    }

    /// One retention check of region `id`; the last one lets it go.
    fn check(&self, id: u64, window: Window) {
        let mut inner = self.lock();
        let Some(i) = inner.regions.iter().position(|r| r.id == id) else { return };
        let share = retained_share(&inner.regions[i].accepted, &inner.regions[i].now);
        inner.send(Msg::Retained { id, window, share });
        if window == Window::Minutes5 {
            inner.regions.remove(i);
        }
    }

    /// The document `uri` changed (edits in order, each in the text after the previous one).
    pub fn edited(&self, uri: &str, edits: &[Edit<'_>]) {
        let mut guard = self.lock();
        let inner = &mut *guard;
        match inner.last_edit.get_mut(uri) {
            Some(at) => *at = Instant::now(),
            None => {
                inner.last_edit.insert(uri.to_owned(), Instant::now());
            }
        }
        for region in inner.regions.iter_mut().filter(|r| r.uri.as_deref() == Some(uri)) {
            for e in edits {
                region.follow(e);
            }
        }
    }

    /// The document closed: its regions keep what they hold now.
    pub fn closed(&self, uri: &str) {
        let mut inner = self.lock();
        inner.last_edit.remove(uri);
        for region in inner.regions.iter_mut().filter(|r| r.uri.as_deref() == Some(uri)) {
            region.uri = None;
        }
    }
}

impl Inner {
    fn send(&mut self, msg: Msg) {
        let notify = self.notify.clone();
        let writer = self.writer.get_or_insert_with(|| {
            let (tx, rx) = mpsc::channel();
            let spawned = std::thread::Builder::new().name("ghostline-stats".into()).spawn(move || write(rx, notify));
            if let Err(e) = spawned {
                tracing::warn!("statistics are not recorded: cannot start their thread ({e})");
            }
            tx
        });
        let _ = writer.send(msg);
    }
}

/// Where `accepted` is in `doc`: the occurrence nearest to `anchor` within [`SEARCH`]
/// characters, else as much of its start as is at `anchor` (the rest may still arrive, see
/// [`Region::follow`]). Returns its start and its text now.
fn locate(doc: &Rope, anchor: usize, accepted: &str) -> (usize, String) {
    let len = accepted.chars().count();
    let anchor = anchor.min(doc.len_chars());
    let from = anchor.saturating_sub(SEARCH);
    let to = (anchor + len + SEARCH).min(doc.len_chars());
    let window = doc.slice(from..to).to_string();
    let nearest = window
        .match_indices(accepted)
        .map(|(byte, _)| from + window[..byte].chars().count())
        .min_by_key(|&start| start.abs_diff(anchor));
    match nearest {
        Some(start) if len > 0 => (start, accepted.to_owned()),
        _ => (anchor, doc.chars_at(anchor).zip(accepted.chars()).take_while(|(a, b)| a == b).map(|(a, _)| a).collect()),
    }
}

/// The writing thread: opens the database at the first row (so that none is made while nothing
/// is shown), maps the server's ids to rows, and keeps what it cannot write yet.
///
/// **Nothing is lost silently.** A database another connection keeps locked (past
/// [`super::BUSY_TIMEOUT`] a statement) is tried again every [`RETRY`], its writes kept in order
/// meanwhile, at most [`QUEUE`]; past that the oldest are dropped, counted, logged, told to the
/// user once, and their number recorded (`lost`, which `ghostline stats` and `doctor` report)
/// once the database can be written again. A database that cannot be used at all (not a
/// database, read-only) turns statistics off for that file, said once in the log and to the
/// user ([`Notify`]).
fn write(rx: mpsc::Receiver<Msg>, notify: Option<Notify>) {
    let mut w = Writer { notify, ..Writer::default() };
    let mut flushes: Vec<mpsc::Sender<Flushed>> = Vec::new();
    loop {
        let first = if w.queue.is_empty() {
            match rx.recv() {
                Ok(m) => Some(m),
                Err(_) => break,
            }
        } else {
            match rx.recv_timeout(RETRY) {
                Ok(m) => Some(m),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        };
        for msg in first.into_iter().chain(std::iter::from_fn(|| rx.try_recv().ok())) {
            match msg {
                Msg::Flush(reply) => flushes.push(reply),
                msg => w.keep(msg),
            }
        }
        w.drain();
        for reply in flushes.drain(..) {
            let _ = reply.send(Flushed { pending: w.queue.len(), dropped: w.dropped_total });
        }
    }
    w.drain();
    if !w.queue.is_empty() || w.dropped > 0 {
        tracing::warn!("statistics: {} writes not recorded at exit (the database stayed locked)", w.queue.len() as u64 + w.dropped);
    }
}

/// What the writing thread has not written: for [`Tracker::flush`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flushed {
    /// Writes kept, waiting for a lock to go.
    pub pending: usize,
    /// Writes dropped since the start (past [`QUEUE`]).
    pub dropped: u64,
}

#[derive(Default)]
struct Writer {
    db: Option<(PathBuf, Stats)>,
    /// The file that cannot be used (the user was told); its writes are not attempted.
    broken: Option<PathBuf>,
    rows: HashMap<u64, i64>,
    order: VecDeque<u64>,
    queue: VecDeque<Msg>,
    /// Dropped writes not yet recorded in the database.
    dropped: u64,
    dropped_total: u64,
    /// The current lock episode was logged; the drops were told to the user.
    said_busy: bool,
    told_dropped: bool,
    notify: Option<Notify>,
}

impl Writer {
    fn tell(&self, message: String) {
        tracing::warn!("{message}");
        if let Some(notify) = &self.notify {
            notify(format!("ghostline: {message}"));
        }
    }

    /// Queues a write; past [`QUEUE`] the oldest is dropped and counted.
    fn keep(&mut self, msg: Msg) {
        self.queue.push_back(msg);
        if self.queue.len() > QUEUE {
            self.queue.pop_front();
            self.dropped += 1;
            self.dropped_total += 1;
            if !std::mem::replace(&mut self.told_dropped, true) {
                let path = self.db.as_ref().map_or_else(String::new, |(p, _)| format!(" {}", p.display()));
                self.tell(format!(
                    "statistics: the database{path} stays locked by another process; more than {QUEUE} writes are waiting, the oldest are dropped and counted (`ghostline stats` reports them)"
                ));
            }
        }
    }

    /// Writes what is queued, in order, until the database is busy.
    fn drain(&mut self) {
        while let Some(msg) = self.queue.pop_front() {
            match self.apply(&msg) {
                Ok(()) => {}
                Err(DbError::Busy(e)) => {
                    self.queue.push_front(msg);
                    if !std::mem::replace(&mut self.said_busy, true) {
                        tracing::warn!("statistics: {e}; keeping {} writes and trying again", self.queue.len());
                    }
                    return;
                }
                // This write cannot be made (the database is open and usable otherwise).
                Err(DbError::Fatal(e)) => tracing::warn!("statistics: a write failed: {e}"),
            }
        }
        if self.said_busy {
            tracing::info!("statistics: the database is writable again; the kept writes are recorded");
            self.said_busy = false;
        }
        if self.dropped > 0 {
            if let Some((path, stats)) = &self.db {
                match stats.lost(self.dropped) {
                    Ok(()) => {
                        tracing::warn!("statistics: {} writes were lost while {} stayed locked", self.dropped, path.display());
                        self.dropped = 0;
                        self.told_dropped = false;
                    }
                    Err(e) => tracing::debug!("statistics: cannot record the lost writes yet: {e}"),
                }
            }
        }
    }

    fn apply(&mut self, msg: &Msg) -> Result<(), DbError> {
        match msg {
            Msg::Shown { id, path, model, language, route, latency_ms, chars } => {
                if self.broken.as_ref() == Some(path) {
                    return Ok(());
                }
                if self.db.as_ref().map(|(p, _)| p) != Some(path) {
                    self.rows.clear();
                    self.order.clear();
                    self.db = None;
                    match Stats::open(path) {
                        Ok(stats) => self.db = Some((path.clone(), stats)),
                        Err(DbError::Busy(e)) => return Err(DbError::Busy(e)),
                        Err(DbError::Fatal(e)) => {
                            self.broken = Some(path.clone());
                            self.tell(format!(
                                "statistics are off: {} cannot be used ({e}); move it away or delete it (a new one is made at the next suggestion), or set stats.path to another file",
                                path.display()
                            ));
                            return Ok(());
                        }
                    }
                }
                let Some((_, stats)) = &self.db else { return Ok(()) };
                let row = stats.shown(&Shown { model, language, route: *route, latency_ms: *latency_ms, chars: *chars })?;
                self.rows.insert(*id, row);
                self.order.push_back(*id);
                if self.order.len() > 4 * REGIONS {
                    if let Some(old) = self.order.pop_front() {
                        self.rows.remove(&old);
                    }
                }
                Ok(())
            }
            Msg::Accepted { id, chars } => match (&self.db, self.rows.get(id)) {
                (Some((_, stats)), Some(&row)) => stats.accepted(row, *chars),
                _ => Ok(()),
            },
            Msg::Retained { id, window, share } => match (&self.db, self.rows.get(id)) {
                (Some((_, stats)), Some(&row)) => stats.retained(row, *window, *share),
                _ => Ok(()),
            },
            Msg::Flush(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(start: usize, text: &str) -> Region {
        Region { id: 1, uri: Some("u".into()), start, accepted: text.into(), now: text.into() }
    }

    fn edit(start: usize, end: usize, text: &str) -> Edit<'_> {
        Edit { start, end, text }
    }

    /// The region follows edits like a marker: moved by edits before it, changed by edits in
    /// it, not grown by text typed right after it.
    #[test]
    fn a_region_follows_the_edits_of_its_document() {
        // "x = " then the accepted "foo(a, b)" at 4..13.
        let mut r = region(4, "foo(a, b)");
        r.follow(&edit(0, 0, "# c\n")); // a line above
        assert_eq!((r.start, r.now.as_str()), (8, "foo(a, b)"));
        r.follow(&edit(17, 17, "\n")); // typed right after it
        assert_eq!((r.start, r.now.as_str()), (8, "foo(a, b)"));
        r.follow(&edit(8, 8, "  ")); // typed right before it
        assert_eq!((r.start, r.now.as_str()), (10, "foo(a, b)"));
        r.follow(&edit(14, 18, "x")); // "a, b" → "x"
        assert_eq!((r.start, r.now.as_str()), (10, "foo(x)"));
        r.follow(&edit(5, 12, "bar")); // across its start: "  fo" and what was before it
        assert_eq!((r.start, r.now.as_str()), (5, "baro(x)"));
        r.follow(&edit(11, 13, "")); // across its end: ")" and one more
        assert_eq!((r.start, r.now.as_str()), (5, "baro(x"));
        r.follow(&edit(0, 20, "")); // all of it gone
        assert_eq!((r.start, r.now.as_str()), (0, ""));
        assert_eq!(retained_share(&r.accepted, &r.now), 0.0);
        // Non-ASCII text: positions are characters.
        let mut r = region(2, "é🦀ü");
        r.follow(&edit(3, 4, "ab"));
        assert_eq!((r.start, r.now.as_str()), (2, "éabü"));
    }

    #[test]
    fn the_accepted_text_is_found_nearest_to_where_it_was_shown() {
        let doc = Rope::from_str("return x\nreturn x\nreturn x\n");
        assert_eq!(locate(&doc, 10, "return x"), (9, "return x".to_owned()));
        assert_eq!(locate(&doc, 17, "return x"), (18, "return x".to_owned()));
        // Not there as shown (in by parts, or changed before the accept): what of its start is
        // at the anchor; the rest, inserted at its end, joins it.
        assert_eq!(locate(&doc, 9, "return y"), (9, "return ".to_owned()));
        assert_eq!(locate(&doc, 25, "return y"), (25, String::new()));
        let (start, now) = locate(&Rope::from_str("x = sq\n"), 4, "sqrt(2) + 1");
        let mut r = Region { id: 1, uri: None, start, accepted: "sqrt(2) + 1".into(), now };
        assert_eq!((r.start, r.now.as_str()), (4, "sq"));
        r.follow(&edit(6, 6, "rt(2) + 1"));
        assert_eq!(r.now, "sqrt(2) + 1");
        r.follow(&edit(15, 15, " # typed after it"));
        assert_eq!(r.now, "sqrt(2) + 1");
    }

    fn offer(text: &str) -> Offer {
        Offer {
            uri: "file:///a.py".into(),
            anchor: 0,
            text: text.into(),
            model: "m".into(),
            language: "python".into(),
            route: Route::Model,
            requested: Instant::now(),
        }
    }

    fn settings(enabled: bool, path: &std::path::Path) -> StatsConfig {
        StatsConfig { enabled, path: Some(path.to_owned()), retention: [Duration::from_secs(60); 2] }
    }

    fn temp(name: &str) -> crate::testing::TempDir {
        crate::testing::TempDir::new(&format!("track-{name}"))
    }

    const WAIT: Duration = Duration::from_secs(60);

    fn rows(path: &std::path::Path) -> i64 {
        Stats::open_read(path).unwrap().map_or(0, |s| s.count().unwrap())
    }

    /// Off: no id, nothing sent, no file; the same tracker switched on records (the control:
    /// the flush waits for the writing thread, so a write would have been seen).
    #[test]
    fn statistics_off_records_nothing_and_makes_no_file() {
        let dir = temp("off");
        let path = dir.join("stats.sqlite");
        let tracker = Tracker::default();
        assert_eq!(tracker.shown(&settings(false, &path), offer("x")), None);
        assert!(!tracker.accepted(1, None, &Rope::from_str("x")));
        let on = tracker.shown(&settings(true, &dir.join("on.sqlite")), offer("y")).expect("on: an id");
        assert_eq!(tracker.flush(WAIT).map(|f| f.pending), Some(0));
        assert_eq!(tracker.shown(&settings(false, &path), offer("z")), None);
        assert_eq!(tracker.flush(WAIT).map(|f| f.pending), Some(0));
        assert!(!path.exists(), "statistics off made the file");
        assert_eq!(rows(&dir.join("on.sqlite")), 1, "the control: on records ({on})");
    }

    /// A file that is not a database: statistics are off for it, and the user is told once,
    /// with the file and what to do; the file is left as it was.
    #[test]
    fn a_broken_database_is_told_to_the_user_once() {
        let dir = temp("broken");
        let path = dir.join("stats.sqlite");
        let junk = "not a database at all, only text: ".repeat(200);
        std::fs::write(&path, &junk).unwrap();
        let told = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = told.clone();
        let tracker = Tracker::with_notify(Arc::new(move |m| sink.lock().unwrap().push(m)));
        for text in ["a", "b", "c"] {
            tracker.shown(&settings(true, &path), offer(text));
        }
        assert_eq!(tracker.flush(WAIT).map(|f| f.pending), Some(0));
        let told = told.lock().unwrap().clone();
        assert_eq!(told.len(), 1, "{told:?}");
        assert!(told[0].contains("statistics are off") && told[0].contains(&path.display().to_string()) && told[0].contains("delete it"), "{told:?}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), junk);
    }

    /// Another connection holds `BEGIN EXCLUSIVE`: what is shown meanwhile is kept and written
    /// once the lock goes, accepts included; nothing is told (nothing was lost).
    #[test]
    fn writes_wait_for_a_lock_and_none_is_lost() {
        let dir = temp("locked");
        let path = dir.join("stats.sqlite");
        drop(Stats::open(&path).unwrap());
        let told = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = told.clone();
        let tracker = Tracker::with_notify(Arc::new(move |m| sink.lock().unwrap().push(m)));
        let holder = rusqlite::Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
        let doc = Rope::from_str("abc");
        // `accepted` times its retention checks on the runtime (60 s: not reached here).
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let _entered = runtime.enter();
        for _ in 0..7 {
            let id = tracker.shown(&settings(true, &path), offer("abc")).unwrap();
            assert!(tracker.accepted(id, None, &doc));
        }
        let kept = tracker.flush(WAIT).unwrap();
        assert_eq!(kept, Flushed { pending: 14, dropped: 0 }, "7 suggestions and 7 accepts kept");
        holder.execute_batch("COMMIT").unwrap();
        // The writing thread tries again by itself every RETRY.
        let deadline = Instant::now() + WAIT;
        while rows(&path) < 7 && Instant::now() < deadline {
            std::thread::sleep(RETRY);
        }
        assert_eq!(tracker.flush(WAIT).unwrap(), Flushed { pending: 0, dropped: 0 });
        let stats = Stats::open_read(&path).unwrap().unwrap();
        let summary = super::super::report::summary(&stats, 0).unwrap();
        assert_eq!((summary[0].shown, summary[0].accepted), (7, 7));
        assert!(told.lock().unwrap().is_empty(), "{:?}", told.lock().unwrap());
    }

    /// Past the bound the oldest writes are dropped: counted, told once, and recorded in the
    /// database once it can be written (`ghostline stats` reports them).
    #[test]
    fn writes_past_the_bound_are_counted_and_told() {
        let dir = temp("bound");
        let path = dir.join("stats.sqlite");
        drop(Stats::open(&path).unwrap());
        let told = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = told.clone();
        let tracker = Tracker::with_notify(Arc::new(move |m| sink.lock().unwrap().push(m)));
        let holder = rusqlite::Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
        for _ in 0..QUEUE + 5 {
            tracker.shown(&settings(true, &path), offer("x"));
        }
        assert_eq!(tracker.flush(WAIT).unwrap(), Flushed { pending: QUEUE, dropped: 5 });
        holder.execute_batch("COMMIT").unwrap();
        drop(holder);
        let deadline = Instant::now() + WAIT;
        while tracker.flush(WAIT).is_some_and(|f| f.pending > 0) && Instant::now() < deadline {
            std::thread::sleep(RETRY);
        }
        let stats = Stats::open_read(&path).unwrap().unwrap();
        assert_eq!((stats.count().unwrap(), stats.lost_since(0).unwrap()), (QUEUE as i64, 5));
        let told = told.lock().unwrap().clone();
        assert_eq!(told.len(), 1, "{told:?}");
        assert!(told[0].contains("locked") && told[0].contains("dropped"), "{told:?}");
    }
}
