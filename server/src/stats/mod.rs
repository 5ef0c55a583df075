//! Local acceptance and retention statistics, in SQLite under the user's data directory:
//! suggestions shown, accepted (with the accepted length), how much of the accepted text is
//! still there after 30 s and after 5 minutes (Copilot's "accepted and retained" measure), and
//! keystroke-to-suggestion latency, per model, language and route.
//!
//! Only counts, lengths, latencies and the names of the model, the language and the route are
//! stored: **never code, never file names**, and nothing is ever sent anywhere. The table is
//! bounded ([`MAX_ROWS`]). `ghostline stats` and `doctor` read it ([`report`]) through a
//! read-only connection ([`Stats::open_read`]): they never create, write or re-permission the
//! file. The language server feeds
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
    /// A next edit (`ghostline/nextEdit`): a proposal of edits, accepted with its command.
    NextEdit,
}

impl Route {
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Ahead => "ahead",
            Route::TypedAhead => "typed-ahead",
            Route::Model => "model",
            Route::NextEdit => "next-edit",
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

/// Why the database could not be used.
#[derive(Debug, Clone, PartialEq)]
pub enum DbError {
    /// Another connection holds a lock past the busy timeout: worth trying again later.
    Busy(String),
    /// Anything else (not a database, read-only, no such folder…): trying again will not help.
    Fatal(String),
}

impl DbError {
    pub fn message(&self) -> &str {
        match self {
            DbError::Busy(m) | DbError::Fatal(m) => m,
        }
    }
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode::{DatabaseBusy, DatabaseLocked};
        match e.sqlite_error_code() {
            Some(DatabaseBusy | DatabaseLocked) => DbError::Busy(sql(e)),
            _ => DbError::Fatal(sql(e)),
        }
    }
}

impl From<DbError> for String {
    fn from(e: DbError) -> String {
        e.message().to_owned()
    }
}

fn sql(e: rusqlite::Error) -> String {
    format!("statistics database: {e}")
}

fn now_s() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// How long one statement waits for another connection's lock before it reports `Busy`. The
/// writing thread keeps what it could not write and tries again ([`track`]); a reader gives up.
pub const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);
/// How long `ghostline stats` and `doctor` wait for a lock before saying the database is locked.
pub const READ_BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS suggestions (
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
     CREATE INDEX IF NOT EXISTS suggestions_at ON suggestions(at_s);
     CREATE TABLE IF NOT EXISTS lost (at_s INTEGER NOT NULL, rows INTEGER NOT NULL);";

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

    /// Opens the database at `path` for writing (the language server), creating it — readable
    /// by this user only — and its tables when missing. An existing file's permissions are left
    /// as they are. A file that is not a database, or that this user cannot write, is `Fatal`;
    /// another connection's lock past [`BUSY_TIMEOUT`] is `Busy`.
    pub fn open(path: &Path) -> Result<Stats, DbError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| DbError::Fatal(format!("cannot create {}: {e}", dir.display())))?;
        }
        let existed = path.exists();
        let db = Connection::open(path)?;
        if !existed {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
            }
        }
        db.busy_timeout(BUSY_TIMEOUT)?;
        // SQLite opens a file this user may not write read-only without saying so.
        if db.is_readonly(rusqlite::MAIN_DB)? {
            return Err(DbError::Fatal(format!("statistics database: {} is read-only for this user", path.display())));
        }
        db.execute_batch(SCHEMA)?;
        Ok(Stats { db })
    }

    /// Opens the database at `path` for reading only (`ghostline stats`, `doctor`): nothing is
    /// created, written or re-permissioned. `Ok(None)`: no statistics yet (no file, or a file
    /// without the table, such as an empty one). A file that is not a database is an error.
    pub fn open_read(path: &Path) -> Result<Option<Stats>, DbError> {
        if !path.exists() {
            return Ok(None);
        }
        use rusqlite::OpenFlags;
        let db = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        db.busy_timeout(READ_BUSY_TIMEOUT)?;
        let has_table: bool = db.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'suggestions')",
            [],
            |r| r.get(0),
        )?;
        Ok(has_table.then_some(Stats { db }))
    }

    /// Records a suggestion shown; returns its id (for [`Stats::accepted`]).
    pub fn shown(&self, s: &Shown<'_>) -> Result<i64, DbError> {
        self.shown_at(s, now_s())
    }

    pub(crate) fn shown_at(&self, s: &Shown<'_>, at_s: i64) -> Result<i64, DbError> {
        self.db.execute(
            "INSERT INTO suggestions (at_s, model, language, route, latency_ms, shown_chars) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![at_s, s.model, s.language, s.route.as_str(), s.latency_ms, s.chars as i64],
        )?;
        let id = self.db.last_insert_rowid();
        if id % 1000 == 0 {
            self.db.execute("DELETE FROM suggestions WHERE id <= ?1", params![id - MAX_ROWS])?;
        }
        Ok(id)
    }

    /// The user accepted the first `chars` characters of suggestion `id` (all of it, or a word
    /// or line of it). A later accept of the same suggestion counts what was accepted so far (as
    /// VS Code reports partial accepts): the larger length stays.
    pub fn accepted(&self, id: i64, chars: usize) -> Result<(), DbError> {
        self.db.execute("UPDATE suggestions SET accepted_chars = MAX(COALESCE(accepted_chars, 0), ?2) WHERE id = ?1", params![id, chars as i64])?;
        Ok(())
    }

    /// How much of suggestion `id`'s accepted text was still there after `window` (0 to 1).
    pub fn retained(&self, id: i64, window: Window, share: f64) -> Result<(), DbError> {
        let column = match window {
            Window::Seconds30 => "retained_30s",
            Window::Minutes5 => "retained_5m",
        };
        self.db.execute(&format!("UPDATE suggestions SET {column} = ?2 WHERE id = ?1"), params![id, share.clamp(0.0, 1.0)])?;
        Ok(())
    }

    /// `rows` writes (suggestions, accepts, retention checks) were dropped: the database stayed
    /// locked past the writing thread's bound. `ghostline stats` and `doctor` report the sum.
    pub fn lost(&self, rows: u64) -> Result<(), DbError> {
        self.db.execute("INSERT INTO lost (at_s, rows) VALUES (?1, ?2)", params![now_s(), rows as i64])?;
        Ok(())
    }

    /// Writes dropped since `since_s` (0 in a database made before the table existed).
    pub fn lost_since(&self, since_s: i64) -> Result<u64, DbError> {
        let has: bool = self.db.query_row("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'lost')", [], |r| r.get(0))?;
        if !has {
            return Ok(0);
        }
        let n: i64 = self.db.query_row("SELECT COALESCE(SUM(rows), 0) FROM lost WHERE at_s >= ?1", [since_s], |r| r.get(0))?;
        Ok(n.max(0) as u64)
    }

    /// Rows recorded.
    pub fn count(&self) -> Result<i64, DbError> {
        Ok(self.db.query_row("SELECT COUNT(*) FROM suggestions", [], |r| r.get(0))?)
    }

    /// The accepted length of suggestion `id` (`None`: not accepted, or no such row).
    pub fn accepted_chars(&self, id: i64) -> Result<Option<i64>, DbError> {
        Ok(self
            .db
            .query_row("SELECT accepted_chars FROM suggestions WHERE id = ?1", params![id], |r| r.get::<_, Option<i64>>(0))
            .optional()
            .map(Option::flatten)?)
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
