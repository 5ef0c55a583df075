//! The cloud answer cache on disk: one JSON file per answer, keyed by a SHA-256 of the redacted
//! request (so secrets never reach the key or the file), readable by the user only (folder
//! 0700, files 0600), bounded by entry count (oldest dropped first).

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The answer as the endpoint sent it (with placeholders, never restored secrets).
    pub text: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

pub struct DiskCache {
    dir: PathBuf,
    max_entries: usize,
}

/// The default folder: `$XDG_CACHE_HOME/ghostline/cloud`, else `~/.cache/ghostline/cloud`.
pub fn default_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("ghostline").join("cloud"))
}

/// The key of a request: everything that shapes the answer, already redacted.
pub fn key(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

impl DiskCache {
    /// Opens (creating) the folder with mode 0700, tightening it if it existed looser.
    pub fn open(dir: &Path, max_entries: usize) -> std::io::Result<DiskCache> {
        fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        let mode = fs::metadata(dir)?.permissions().mode() & 0o777;
        if mode != 0o700 {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
        }
        Ok(DiskCache { dir: dir.to_owned(), max_entries })
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }

    pub fn get(&self, key: &str) -> Option<Entry> {
        if self.max_entries == 0 {
            return None;
        }
        let bytes = fs::read(self.path(key)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Writes atomically (temporary file, then rename), mode 0600; then trims to the bound.
    pub fn put(&self, key: &str, entry: &Entry) -> std::io::Result<()> {
        if self.max_entries == 0 {
            return Ok(());
        }
        let tmp = self.dir.join(format!(".{key}.{}.tmp", std::process::id()));
        {
            let mut f = fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
            f.write_all(&serde_json::to_vec(entry).map_err(std::io::Error::other)?)?;
        }
        fs::rename(&tmp, self.path(key))?;
        self.trim()
    }

    fn trim(&self) -> std::io::Result<()> {
        let mut entries: Vec<(std::time::SystemTime, PathBuf)> = fs::read_dir(&self.dir)?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        if entries.len() <= self.max_entries {
            return Ok(());
        }
        entries.sort();
        for (_, path) in &entries[..entries.len() - self.max_entries] {
            let _ = fs::remove_file(path);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_only_permissions_bounded_and_keyed_by_content() {
        let dir = crate::testing::TempDir::new("cache-test");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let cache = DiskCache::open(&dir, 2).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);

        let (k1, k2, k3) = (key(&["m", "a"]), key(&["m", "b"]), key(&["ma", ""]));
        assert_ne!(key(&["m", "a"]), key(&["ma"]), "parts are length-prefixed");
        assert_ne!(k1, k3);
        let e = |t: &str| Entry { text: t.into(), prompt_tokens: 3, completion_tokens: 4 };
        assert_eq!(cache.get(&k1), None);
        cache.put(&k1, &e("one")).unwrap();
        assert_eq!(cache.get(&k1), Some(e("one")));
        let mode = fs::metadata(dir.join(format!("{k1}.json"))).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::thread::sleep(std::time::Duration::from_millis(20));
        cache.put(&k2, &e("two")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        cache.put(&k3, &e("three")).unwrap();
        assert_eq!(cache.get(&k1), None, "the oldest entry is dropped past the bound");
        assert_eq!(cache.get(&k3), Some(e("three")));
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 2);
    }
}
