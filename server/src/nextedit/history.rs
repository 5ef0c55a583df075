//! The edit history next edits are read from: a document's `didChange`s coalesced into edit
//! events (same document, a few lines apart, no pause of a second or more), the last few kept
//! as small before/after texts of whole lines. Memory only; the server forgets a document's
//! events when it closes, and never records an excluded file.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ropey::Rope;

/// Events kept, oldest dropped first.
pub const CAPACITY: usize = 10;
/// A pause this long ends an event: the next change starts another.
pub const PAUSE: Duration = Duration::from_secs(1);
/// A change this many lines or fewer from the event's lines joins it.
pub const NEAR_LINES: usize = 3;
/// An event whose before or after text grows past this keeps no text (a paste, a reformat):
/// nothing is proposed from it.
pub const MAX_EVENT_BYTES: usize = 16 * 1024;

/// One edit as the user made it: lines `first_line..first_line + after_lines` of the document
/// now were `before` and are `after` (whole lines, line breaks included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditEvent {
    pub uri: String,
    pub first_line: usize,
    pub before_lines: usize,
    pub after_lines: usize,
    pub before: String,
    pub after: String,
    /// Too large to keep: `before` and `after` are empty.
    pub large: bool,
    pub started: Instant,
    pub last: Instant,
}

/// One change as the document applied it: chars `start..old_end` of the text before became
/// `start..new_end` of the text after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub start: usize,
    pub old_end: usize,
    pub new_end: usize,
}

/// The last edit events of every open document, newest last.
#[derive(Debug, Default)]
pub struct History {
    events: VecDeque<EditEvent>,
}

fn lines(rope: &Rope, from: usize, to: usize) -> String {
    let n = rope.len_lines();
    let (from, to) = (from.min(n), to.min(n).max(from.min(n)));
    rope.slice(rope.line_to_char(from)..rope.line_to_char(to)).to_string()
}

impl History {
    /// Records a `didChange` of `uri`: `old` is the text before it, `new` after, and `change`
    /// the one edit when there was one (several, or a whole new text: `None`, compared line
    /// by line).
    pub fn record(&mut self, uri: &str, old: &Rope, new: &Rope, change: Option<Change>, now: Instant) {
        let (a, b_old, b_new) = match change {
            Some(c) => {
                let a = old.char_to_line(c.start.min(old.len_chars()));
                let b_old = old.char_to_line(c.old_end.min(old.len_chars())) + 1;
                let b_new = new.char_to_line(c.new_end.min(new.len_chars())) + 1;
                (a, b_old.min(old.len_lines()), b_new.min(new.len_lines()))
            }
            None => match differing_lines(old, new) {
                Some(span) => span,
                None => return,
            },
        };
        let delta = b_new as isize - b_old as isize;
        // Events of this document below the change move with it.
        for e in self.events.iter_mut().filter(|e| e.uri == uri && e.first_line >= b_old) {
            e.first_line = (e.first_line as isize + delta).max(0) as usize;
        }
        let joins = self.events.back().filter(|e| {
            let end = e.first_line + e.after_lines;
            e.uri == uri && !e.large && now.duration_since(e.last) < PAUSE && a <= end + NEAR_LINES && b_old + NEAR_LINES >= e.first_line
        });
        if joins.is_some() {
            let e = self.events.back_mut().expect("checked");
            let end = e.first_line + e.after_lines;
            let lo = a.min(e.first_line);
            let hi = b_old.max(end);
            let before = format!("{}{}{}", lines(old, lo, e.first_line), e.before, lines(old, end, hi));
            let new_hi = (hi as isize + delta).max(lo as isize) as usize;
            e.before_lines += (e.first_line - lo) + (hi - end);
            e.first_line = lo;
            e.after_lines = new_hi - lo;
            e.after = lines(new, lo, new_hi);
            e.before = before;
            e.last = now;
        } else {
            self.events.push_back(EditEvent {
                uri: uri.to_owned(),
                first_line: a,
                before_lines: b_old - a,
                after_lines: b_new - a,
                before: lines(old, a, b_old),
                after: lines(new, a, b_new),
                large: false,
                started: now,
                last: now,
            });
        }
        let e = self.events.back_mut().expect("just pushed or joined");
        if e.before.len() > MAX_EVENT_BYTES || e.after.len() > MAX_EVENT_BYTES {
            (e.large, e.before, e.after) = (true, String::new(), String::new());
        }
        if !e.large && e.before == e.after {
            // Typed and taken back: nothing happened.
            self.events.pop_back();
        }
        while self.events.len() > CAPACITY {
            self.events.pop_front();
        }
    }

    /// The document closed: its events go.
    pub fn forget(&mut self, uri: &str) {
        self.events.retain(|e| e.uri != uri);
    }

    /// The newest event of `uri`.
    pub fn last_of(&self, uri: &str) -> Option<&EditEvent> {
        self.events.iter().rev().find(|e| e.uri == uri)
    }

    /// The events of `uri`, oldest first.
    pub fn of<'a>(&'a self, uri: &'a str) -> impl Iterator<Item = &'a EditEvent> + 'a {
        self.events.iter().filter(move |e| e.uri == uri)
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

/// The lines that differ between two texts, as `(first, end in old, end in new)`; `None` when
/// they are the same.
fn differing_lines(old: &Rope, new: &Rope) -> Option<(usize, usize, usize)> {
    let (n_old, n_new) = (old.len_lines(), new.len_lines());
    let mut a = 0;
    while a < n_old && a < n_new && old.line(a) == new.line(a) {
        a += 1;
    }
    if a == n_old && a == n_new {
        return None;
    }
    let mut s = 0;
    while s < n_old - a && s < n_new - a && old.line(n_old - 1 - s) == new.line(n_new - 1 - s) {
        s += 1;
    }
    Some((a, n_old - s, n_new - s))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies `text` over chars `start..end` of `rope` and records it at `now`.
    fn type_at(h: &mut History, rope: &mut Rope, uri: &str, start: usize, end: usize, text: &str, now: Instant) {
        let old = rope.clone();
        rope.remove(start..end);
        rope.insert(start, text);
        h.record(uri, &old, rope, Some(Change { start, old_end: end, new_end: start + text.chars().count() }), now);
    }

    #[test]
    fn keystrokes_on_one_line_make_one_event() {
        let mut rope = Rope::from_str("def f(a):\n    return a\n");
        let mut h = History::default();
        let t = Instant::now();
        type_at(&mut h, &mut rope, "u", 6, 7, "", t);
        for (i, c) in "count".chars().enumerate() {
            type_at(&mut h, &mut rope, "u", 6 + i, 6 + i, &c.to_string(), t + Duration::from_millis(100 * i as u64));
        }
        assert_eq!(h.len(), 1);
        let e = h.last_of("u").unwrap();
        assert_eq!((e.first_line, e.before.as_str(), e.after.as_str()), (0, "def f(a):\n", "def f(count):\n"));
    }

    #[test]
    fn a_pause_or_a_far_line_starts_another_event() {
        let mut rope = Rope::from_str(&"x = 1\n".repeat(20));
        let mut h = History::default();
        let t = Instant::now();
        type_at(&mut h, &mut rope, "u", 4, 5, "2", t);
        type_at(&mut h, &mut rope, "u", 10, 11, "3", t + Duration::from_millis(200));
        assert_eq!(h.len(), 1, "the next line joins");
        let far = rope.line_to_char(15) + 4;
        type_at(&mut h, &mut rope, "u", far, far + 1, "4", t + Duration::from_millis(300));
        assert_eq!(h.len(), 2, "twelve lines away");
        type_at(&mut h, &mut rope, "u", far, far + 1, "5", t + Duration::from_millis(1400));
        assert_eq!(h.len(), 3, "after a pause");
        let first = h.of("u").next().unwrap();
        assert_eq!((first.before.as_str(), first.after.as_str()), ("x = 1\nx = 1\n", "x = 2\nx = 3\n"));
    }

    #[test]
    fn an_edit_taken_back_leaves_nothing_and_close_forgets() {
        let mut rope = Rope::from_str("a = 1\n");
        let mut h = History::default();
        let t = Instant::now();
        type_at(&mut h, &mut rope, "u", 4, 5, "2", t);
        type_at(&mut h, &mut rope, "u", 4, 5, "1", t);
        assert!(h.is_empty());
        type_at(&mut h, &mut rope, "u", 4, 5, "2", t);
        type_at(&mut h, &mut rope, "v", 0, 0, "#", t);
        h.forget("u");
        assert_eq!(h.len(), 1);
        assert!(h.last_of("u").is_none());
    }

    #[test]
    fn inserted_lines_above_move_older_events_and_the_cap_holds() {
        let mut rope = Rope::from_str(&"x = 1\n".repeat(40));
        let mut h = History::default();
        let t = Instant::now();
        let at = rope.line_to_char(30) + 4;
        type_at(&mut h, &mut rope, "u", at, at + 1, "2", t);
        type_at(&mut h, &mut rope, "u", 0, 0, "import os\n\n", t + PAUSE);
        assert_eq!(h.of("u").next().unwrap().first_line, 32);
        for i in 0..20 {
            type_at(&mut h, &mut rope, "w", 0, 0, "y", t + PAUSE * (i + 2));
        }
        assert_eq!(h.len(), CAPACITY);
    }

    #[test]
    fn a_whole_text_is_compared_line_by_line() {
        let old = Rope::from_str("a\nb\nc\n");
        let new = Rope::from_str("a\nB\nc\n");
        let mut h = History::default();
        h.record("u", &old, &new, None, Instant::now());
        let e = h.last_of("u").unwrap();
        assert_eq!((e.first_line, e.before.as_str(), e.after.as_str()), (1, "b\n", "B\n"));
    }
}
