//! Local acceptance and retention statistics, in SQLite under the user's data directory:
//! suggestions shown, accepted (with the accepted length), how much of the accepted text is
//! still there after 30 s and after 5 minutes (Copilot's "accepted and retained" measure), and
//! keystroke-to-suggestion latency, per model, language and route.
//!
//! Only counts, lengths, latencies and the names of the model, the language and the route are
//! stored: **never code, never file names**, and nothing is ever sent anywhere. The table is
//! bounded ([`MAX_ROWS`]). `ghostline stats` reads it ([`report`]). The language server feeds
//! it through [`track`]: each item it shows carries an accept command, and the accepted text is
//! followed through the document's edits to the two retention checks.

pub mod report;
pub mod track;

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};

/// Rows kept; older ones are deleted as new ones come.
pub const MAX_ROWS: i64 = 100_000;

/// How a suggestion was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Generated ahead on the keystroke.
    Ahead,
    /// The rest of the previous suggestion, as the user typed its start.
    TypedAhead,
    /// The model, when asked.
    Model,
}

impl Route {
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Ahead => "ahead",
            Route::TypedAhead => "typed-ahead",
            Route::Model => "model",
        }
    }
}

/// A suggestion shown to the user: no text, only its length.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown<'a> {
    /// The model's name (its file's stem or the GGUF's `general.name`).
    pub model: &'a str,
    /// The LSP language id.
    pub language: &'a str,
    pub route: Route,
    /// From the keystroke to the suggestion.
    pub latency_ms: f64,
    pub chars: usize,
}

/// The two retention checks after an accept: 30 s and 5 minutes (`stats.retentionSeconds`
/// shortens them for tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Seconds30,
    Minutes5,
}

/// The statistics database.
pub struct Stats {
    db: Connection,
}

fn sql(e: rusqlite::Error) -> String {
    format!("statistics database: {e}")
}

fn now_s() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

impl Stats {
    /// `$XDG_DATA_HOME/ghostline/stats.sqlite` (else `~/.local/share/…`; on macOS
    /// `~/Library/Application Support/ghostline/`).
    pub fn default_path() -> Option<PathBuf> {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = var("HOME");
        let dir = if cfg!(target_os = "macos") {
            home.map(|h| h.join("Library/Application Support"))
        } else {
            var("XDG_DATA_HOME").or_else(|| home.map(|h| h.join(".local/share")))
        };
        dir.map(|d| d.join("ghostline").join("stats.sqlite"))
    }

    /// Opens (creating it, readable by this user only) the database at `path`.
    pub fn open(path: &Path) -> Result<Stats, String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let db = Connection::open(path).map_err(sql)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        }
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS suggestions (
                 id INTEGER PRIMARY KEY,
                 at_s INTEGER NOT NULL,
                 model TEXT NOT NULL,
                 language TEXT NOT NULL,
                 route TEXT NOT NULL,
                 latency_ms REAL NOT NULL,
                 shown_chars INTEGER NOT NULL,
                 accepted_chars INTEGER,
                 retained_30s REAL,
                 retained_5m REAL
             );
             CREATE INDEX IF NOT EXISTS suggestions_at ON suggestions(at_s);",
        )
        .map_err(sql)?;
        Ok(Stats { db })
    }

    /// Records a suggestion shown; returns its id (for [`Stats::accepted`]).
    pub fn shown(&self, s: &Shown<'_>) -> Result<i64, String> {
        self.shown_at(s, now_s())
    }

    pub(crate) fn shown_at(&self, s: &Shown<'_>, at_s: i64) -> Result<i64, String> {
        self.db
            .execute(
                "INSERT INTO suggestions (at_s, model, language, route, latency_ms, shown_chars) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![at_s, s.model, s.language, s.route.as_str(), s.latency_ms, s.chars as i64],
            )
            .map_err(sql)?;
        let id = self.db.last_insert_rowid();
        if id % 1000 == 0 {
            self.db.execute("DELETE FROM suggestions WHERE id <= ?1", params![id - MAX_ROWS]).map_err(sql)?;
        }
        Ok(id)
    }

    /// The user accepted the first `chars` characters of suggestion `id` (all of it, or a word
    /// or line of it). A later accept of the same suggestion counts what was accepted so far (as
    /// VS Code reports partial accepts): the larger length stays.
    pub fn accepted(&self, id: i64, chars: usize) -> Result<(), String> {
        self.db
            .execute("UPDATE suggestions SET accepted_chars = MAX(COALESCE(accepted_chars, 0), ?2) WHERE id = ?1", params![id, chars as i64])
            .map(|_| ())
            .map_err(sql)
    }

    /// How much of suggestion `id`'s accepted text was still there after `window` (0 to 1).
    pub fn retained(&self, id: i64, window: Window, share: f64) -> Result<(), String> {
        let column = match window {
            Window::Seconds30 => "retained_30s",
            Window::Minutes5 => "retained_5m",
        };
        self.db
            .execute(&format!("UPDATE suggestions SET {column} = ?2 WHERE id = ?1"), params![id, share.clamp(0.0, 1.0)])
            .map(|_| ())
            .map_err(sql)
    }

    /// Rows recorded.
    pub fn count(&self) -> Result<i64, String> {
        self.db.query_row("SELECT COUNT(*) FROM suggestions", [], |r| r.get(0)).map_err(sql)
    }

    /// The accepted length of suggestion `id` (`None`: not accepted, or no such row).
    pub fn accepted_chars(&self, id: i64) -> Result<Option<i64>, String> {
        self.db
            .query_row("SELECT accepted_chars FROM suggestions WHERE id = ?1", params![id], |r| r.get::<_, Option<i64>>(0))
            .optional()
            .map(Option::flatten)
            .map_err(sql)
    }
}

/// How much of `accepted` survives in `now` (the same region of the document now): 1 − the
/// character edit distance between them ÷ the accepted length, within 0 and 1. Texts are
/// compared up to 2,000 characters.
pub fn retained_share(accepted: &str, now: &str) -> f64 {
    let cap = |s: &str| s.chars().take(2000).collect::<String>();
    let (a, b) = (cap(accepted), cap(now));
    let (la, lb) = (a.chars().count(), b.chars().count());
    if la == 0 {
        return 1.0;
    }
    // `edit_similarity` is 1 − distance ÷ the longer length.
    let distance = ((1.0 - crate::eval::edit_similarity(&a, &b)) * la.max(lb) as f64).round();
    (1.0 - distance / la as f64).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_is_edit_distance_over_the_accepted_length() {
        assert_eq!(retained_share("return x", "return x"), 1.0);
        assert_eq!(retained_share("return x", ""), 0.0);
        assert!((retained_share("return x + 1", "return x + 2") - (1.0 - 1.0 / 12.0)).abs() < 1e-9);
        assert_eq!(retained_share("", "anything"), 1.0);
        assert_eq!(retained_share("ab", "completely different and longer"), 0.0);
    }
}
