//! A completion session: what the engine keeps for one document between keystrokes, all under
//! one [`Key`] (a text and a cursor in it) — the generation ahead (`completion.generateAhead`)
//! with its cancel flag, the requests in flight for the current text, and the last suggestion
//! shown (for typed-ahead reuse, `completion.typedAhead`).
//!
//! The language server keeps one per open document; the engine keeps one of its own for callers
//! without documents (`ghostline complete`, `eval`, tests). A session is a cheap handle: clones
//! share it.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;

use crate::context::{LaidOut, Strategy};
use crate::engine::Suggestion;
use crate::model::{CancelFlag, GenerateError, Reach};

/// A text and a cursor in it: what a generation ahead is for, and what a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key(u64);

impl Key {
    pub fn of(text: &str, cursor: usize) -> Key {
        use std::hash::{BuildHasher, BuildHasherDefault};
        Key(BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one((text, cursor)))
    }
}

/// The outcome of a generation ahead, once it is made.
pub type Made = Option<Result<Suggestion, GenerateError>>;

/// The generation started ahead on the last keystroke: the text and cursor it is for, and its
/// suggestion once made (`None` while it runs).
struct Ahead {
    key: Key,
    done: watch::Receiver<Made>,
}

/// The last suggestion shown and the text around the cursor it was made for.
#[derive(Debug, Clone)]
pub struct Shown {
    pub before: String,
    pub after: String,
    pub text: String,
    pub strategy: Strategy,
}

#[derive(Default)]
struct Inner {
    /// The work for the current text: the generation ahead and the requests since.
    work: Vec<CancelFlag>,
    ahead: Option<Ahead>,
    shown: Option<Shown>,
    /// The prompt decoded ahead where the cursor rests: its text and cursor, and its cancel
    /// flag (a request for the same key keeps it: it is that request's prompt).
    rest: Option<(Key, CancelFlag)>,
    /// The cross-file section of the last prompt built for the document, as laid out.
    laid_out: LaidOut,
    /// Whether the document's completions may go to `model.endpoint`, and how.
    reach: Reach,
}

/// One document's completion session. See the module's documentation.
#[derive(Clone, Default)]
pub struct Session(Arc<Mutex<Inner>>);

impl Session {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The text changed: whatever was computing for the old text is wasted work, the
    /// generation ahead included. The shown suggestion stays: typing its start is what
    /// typed-ahead reuse is for.
    pub fn text_changed(&self) {
        let mut inner = self.lock();
        inner.work.drain(..).for_each(|f| f.cancel());
        inner.ahead = None;
        if let Some((_, f)) = inner.rest.take() {
            f.cancel();
        }
    }

    /// Everything goes: the document closed, or the server shuts down.
    pub fn close(&self) {
        self.text_changed();
        self.lock().shown = None;
    }

    /// Where the prompts of the document leave their cross-file section as they laid it out
    /// (give it to each [`crate::context::CrossFile`] made for the document): after an answer,
    /// the section of the prompt that made it — the request's own, or the generation ahead's
    /// it waited for.
    pub fn laid_out(&self) -> LaidOut {
        self.lock().laid_out.clone()
    }

    /// Whether the document's completions may go to `model.endpoint`, and how
    /// (`route::completion_endpoint`): kept current by the language server.
    pub fn set_reach(&self, reach: Reach) {
        self.lock().reach = reach;
    }

    pub(crate) fn reach(&self) -> Reach {
        self.lock().reach.clone()
    }

    /// The engine changed (other settings): what it made no longer counts. Work in flight runs
    /// on.
    pub fn reset(&self) {
        let mut inner = self.lock();
        inner.ahead = None;
        inner.shown = None;
    }

    /// A request for `key` starts: work for another text or cursor is cancelled — unless it is
    /// the generation ahead for this very key, which is this request's answer in the making.
    /// Returns the request's own cancel flag.
    pub fn begin_request(&self, key: Key) -> CancelFlag {
        let mut inner = self.lock();
        if inner.ahead.as_ref().map(|a| a.key) != Some(key) {
            inner.work.drain(..).for_each(|f| f.cancel());
            inner.ahead = None;
        }
        if let Some((_, f)) = inner.rest.take_if(|(k, _)| *k != key) {
            f.cancel();
        }
        let cancel = CancelFlag::new();
        inner.work.push(cancel.clone());
        cancel
    }

    /// A generation ahead for `key` started, cancelled by `cancel`; its outcome arrives on
    /// `done`.
    pub(crate) fn set_ahead(&self, key: Key, cancel: CancelFlag, done: watch::Receiver<Made>) {
        let mut inner = self.lock();
        inner.work.push(cancel);
        inner.ahead = Some(Ahead { key, done });
    }

    /// Work ahead of any request (the head of the document's prompts, decoded when it opens):
    /// the next change or request cancels it, so that it never delays what the user asks for.
    pub(crate) fn add_work(&self, cancel: CancelFlag) {
        self.lock().work.push(cancel);
    }

    /// The cursor rests at `key`, and its prompt is to be decoded under `cancel`: true the first
    /// time since the text last changed (the prompt decoded ahead for another cursor is
    /// cancelled), false when it already is (then `cancel` is not kept).
    pub(crate) fn rest_at(&self, key: Key, cancel: CancelFlag) -> bool {
        let mut inner = self.lock();
        if inner.rest.as_ref().is_some_and(|(k, _)| *k == key) {
            return false;
        }
        if let Some((_, f)) = inner.rest.replace((key, cancel)) {
            f.cancel();
        }
        true
    }

    /// What was decoded where the cursor rests may be stale (the workspace changed): the next
    /// rest decodes again.
    pub(crate) fn forget_rest(&self) {
        if let Some((_, f)) = self.lock().rest.take() {
            f.cancel();
        }
    }

    /// The workspace changed (a file saved, left, or changed on disk): a generation ahead was
    /// made with the cross-file section before it, so no request takes it any more (work in
    /// flight runs on; the next request at that key makes its own prompt).
    pub(crate) fn workspace_changed(&self) {
        self.lock().ahead = None;
    }

    /// The generation ahead for `key`, if that is what runs (or ran).
    pub(crate) fn ahead_for(&self, key: Key) -> Option<watch::Receiver<Made>> {
        self.lock().ahead.as_ref().filter(|a| a.key == key).map(|a| a.done.clone())
    }

    pub(crate) fn shown(&self) -> Option<Shown> {
        self.lock().shown.clone()
    }

    pub(crate) fn set_shown(&self, shown: Shown) {
        self.lock().shown = Some(shown);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_keeps_the_generation_ahead_for_its_own_key_only() {
        let session = Session::default();
        let (here, elsewhere) = (Key::of("x = ", 4), Key::of("x = ", 3));
        let ahead = CancelFlag::new();
        let (_tx, done) = watch::channel(None);
        session.set_ahead(here, ahead.clone(), done);
        let first = session.begin_request(here);
        assert!(!ahead.is_cancelled(), "the request for its key waits for it");
        assert!(session.ahead_for(here).is_some() && session.ahead_for(elsewhere).is_none());
        session.begin_request(elsewhere);
        assert!(ahead.is_cancelled() && first.is_cancelled(), "another cursor: all of it is wasted");
        assert!(session.ahead_for(here).is_none());
    }

    #[test]
    fn the_prompt_decoded_where_the_cursor_rests_serves_a_request_there() {
        let session = Session::default();
        let (here, elsewhere) = (Key::of("x = ", 4), Key::of("x = ", 3));
        let rest = CancelFlag::new();
        assert!(session.rest_at(here, rest.clone()));
        assert!(!session.rest_at(here, CancelFlag::new()), "decoded once per text and cursor");
        session.begin_request(here);
        assert!(!rest.is_cancelled(), "a request there keeps it: it is its prompt");
        session.begin_request(elsewhere);
        assert!(rest.is_cancelled(), "a request elsewhere does not");
        let again = CancelFlag::new();
        assert!(session.rest_at(here, again.clone()));
        session.text_changed();
        assert!(again.is_cancelled());
        let third = CancelFlag::new();
        assert!(session.rest_at(here, third.clone()));
        session.forget_rest();
        assert!(third.is_cancelled() && session.rest_at(here, CancelFlag::new()), "the workspace changed: decoded again");
    }

    #[test]
    fn a_workspace_change_drops_the_generation_ahead() {
        let session = Session::default();
        let key = Key::of("total = round(", 14);
        let (_tx, rx) = watch::channel::<Made>(None);
        session.set_ahead(key, CancelFlag::new(), rx);
        assert!(session.ahead_for(key).is_some());
        session.workspace_changed();
        assert!(session.ahead_for(key).is_none(), "made with the old section: a request makes its own prompt");
    }

    #[test]
    fn a_change_cancels_the_work_but_keeps_the_shown_suggestion() {
        let session = Session::default();
        let request = session.begin_request(Key::of("a", 1));
        session.set_shown(Shown { before: "a".into(), after: String::new(), text: "bc".into(), strategy: Strategy::Window });
        session.text_changed();
        assert!(request.is_cancelled());
        assert!(session.shown().is_some());
        session.close();
        assert!(session.shown().is_none());
    }
}
