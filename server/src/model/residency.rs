//! One model resident at a time: a model thread that replaces another waits until the previous
//! thread has let its model go before loading its own.

use std::sync::{Arc, Condvar, Mutex};

/// Whether a model thread still holds (or may still load) its model.
#[derive(Debug, Clone, Default)]
pub struct Residency(Arc<(Mutex<bool>, Condvar)>);

impl Residency {
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks the thread gone when dropped: held by the model thread for its whole life.
    pub fn guard(&self) -> ResidencyGuard {
        ResidencyGuard(self.clone())
    }

    /// Blocks until the thread that holds this residency has ended.
    pub fn wait_gone(&self) {
        let (gone, changed) = &*self.0;
        let mut g = gone.lock().unwrap_or_else(|e| e.into_inner());
        while !*g {
            g = changed.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    pub fn is_gone(&self) -> bool {
        *self.0 .0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub struct ResidencyGuard(Residency);

impl Drop for ResidencyGuard {
    fn drop(&mut self) {
        let (gone, changed) = &*self.0 .0;
        *gone.lock().unwrap_or_else(|e| e.into_inner()) = true;
        changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_the_guard() {
        let r = Residency::new();
        let guard = r.guard();
        let waiter = {
            let r = r.clone();
            std::thread::spawn(move || r.wait_gone())
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!waiter.is_finished() && !r.is_gone());
        drop(guard);
        waiter.join().unwrap();
        assert!(r.is_gone());
    }
}
