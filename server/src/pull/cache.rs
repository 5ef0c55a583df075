//! The Hugging Face cache layout, as `huggingface_hub` and `hf-hub` write it, so that one copy
//! of a model serves every tool (and `ghostline models` finds it):
//!
//! ```text
//! {cache}/models--{org}--{repo}/blobs/{sha256}                 the content
//! {cache}/models--{org}--{repo}/blobs/{sha256}.incomplete      while it downloads
//! {cache}/models--{org}--{repo}/snapshots/{commit}/{file}      → ../../blobs/{sha256}
//! {cache}/models--{org}--{repo}/refs/{revision}                the commit, when the revision
//!                                                              is a branch or tag
//! ```
//!
//! The cache is `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub` (the
//! same roots discovery searches).

use std::path::{Path, PathBuf};

/// One repository's folder in the cache.
#[derive(Debug, Clone, PartialEq)]
pub struct RepoDir(pub PathBuf);

impl RepoDir {
    pub fn new(cache: &Path, repo: &str) -> RepoDir {
        RepoDir(cache.join(format!("models--{}", repo.replace('/', "--"))))
    }

    pub fn blob(&self, sha256: &str) -> PathBuf {
        self.0.join("blobs").join(sha256)
    }

    pub fn incomplete(&self, sha256: &str) -> PathBuf {
        self.0.join("blobs").join(format!("{sha256}.incomplete"))
    }

    pub fn snapshot(&self, commit: &str, file: &str) -> PathBuf {
        let mut p = self.0.join("snapshots").join(commit);
        p.extend(file.split('/'));
        p
    }

    /// Links `snapshots/{commit}/{file}` to the blob (relative, as `huggingface_hub` does;
    /// a copy where symbolic links are not allowed) and records `refs/{revision}` when the
    /// revision is not the commit itself.
    pub fn link(&self, commit: &str, file: &str, sha256: &str, revision: &str) -> std::io::Result<PathBuf> {
        let snapshot = self.snapshot(commit, file);
        let parent = snapshot.parent().expect("a snapshot path has a parent");
        std::fs::create_dir_all(parent)?;
        let depth = file.split('/').count() + 1; // {file}'s folders, then {commit}, then snapshots/
        let mut target = PathBuf::new();
        for _ in 0..depth {
            target.push("..");
        }
        target.push("blobs");
        target.push(sha256);
        let _ = std::fs::remove_file(&snapshot);
        #[cfg(unix)]
        std::os::unix::fs::symlink(&target, &snapshot)?;
        #[cfg(not(unix))]
        std::fs::copy(self.blob(sha256), &snapshot).map(|_| ())?;
        if revision != commit {
            let mut r = self.0.join("refs");
            r.extend(revision.split('/'));
            std::fs::create_dir_all(r.parent().expect("a ref path has a parent"))?;
            std::fs::write(r, commit)?;
        }
        Ok(snapshot)
    }
}

/// The Hugging Face cache this process uses: the first root discovery searches.
pub fn hub_cache() -> Option<PathBuf> {
    crate::model::discover::Roots::from_env().hugging_face.into_iter().next()
}

/// Bytes free for this user on the file system holding `path` (or its nearest existing
/// ancestor); `None` where it cannot be told.
pub fn free_space(path: &Path) -> Option<u64> {
    let mut at = path;
    while !at.exists() {
        at = at.parent()?;
    }
    free_space_at(at)
}

#[cfg(unix)]
fn free_space_at(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `s` a properly sized out-parameter.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    Some(s.f_bavail as u64 * s.f_frsize as u64)
}

#[cfg(not(unix))]
fn free_space_at(_: &Path) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_links() {
        let dir = crate::testing::TempDir::new("pull-cache");
        let repo = RepoDir::new(&dir, "org/Some-Repo");
        assert_eq!(repo.0, dir.join("models--org--Some-Repo"));
        let sha = "ab".repeat(32);
        std::fs::create_dir_all(repo.0.join("blobs")).unwrap();
        std::fs::write(repo.blob(&sha), b"GGUF").unwrap();
        let snap = repo.link("c0ffee", "sub/m.gguf", &sha, "main").unwrap();
        assert_eq!(snap, repo.0.join("snapshots/c0ffee/sub/m.gguf"));
        assert_eq!(std::fs::read(&snap).unwrap(), b"GGUF");
        #[cfg(unix)]
        assert_eq!(std::fs::read_link(&snap).unwrap(), PathBuf::from(format!("../../../blobs/{sha}")));
        assert_eq!(std::fs::read_to_string(repo.0.join("refs/main")).unwrap(), "c0ffee");
        // A commit as the revision writes no ref.
        repo.link("c0ffee", "m.gguf", &sha, "c0ffee").unwrap();
        assert!(!repo.0.join("refs/c0ffee").exists());
        assert!(free_space(&dir.join("not/yet")).is_some_and(|b| b > 0));
    }
}
