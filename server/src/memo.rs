//! One value kept for the last key it was made for: the one-entry caches of the keystroke path,
//! where typing inside one scope keeps asking the same question. Imports nothing from the crate.

use std::collections::hash_map::DefaultHasher;
use std::hash::{BuildHasher, BuildHasherDefault, Hash};
use std::sync::{Mutex, PoisonError};

pub struct Last<T>(Mutex<Option<(u64, T)>>);

impl<T: Clone> Last<T> {
    pub const fn new() -> Self {
        Last(Mutex::new(None))
    }

    /// The value kept for `key` (by its hash), else `make()`'s, kept in its place. Callers
    /// asking at once wait for one `make`.
    pub fn get_or(&self, key: impl Hash, make: impl FnOnce() -> T) -> T {
        let key = BuildHasherDefault::<DefaultHasher>::default().hash_one(key);
        let mut last = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((k, value)) = last.as_ref() {
            if *k == key {
                return value.clone();
            }
        }
        let value = make();
        *last = Some((key, value.clone()));
        value
    }
}

impl<T: Clone> Default for Last<T> {
    fn default() -> Self {
        Last::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_per_key_and_only_the_last_is_kept() {
        let last = Last::new();
        let mut made = 0;
        let mut ask = |key: &str| last.get_or(key, || { made += 1; key.len() });
        assert_eq!((ask("ab"), ask("ab")), (2, 2));
        assert_eq!(ask("abc"), 3);
        assert_eq!(ask("ab"), 2);
        assert_eq!(made, 3);
    }
}
