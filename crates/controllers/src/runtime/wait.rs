//! Waits that outlive one reconcile pass, so that no wait holds a worker.
//!
//! A step that waits for something outside its control (objects becoming healthy after an
//! apply) does not sleep: it looks once, and when the answer is "not yet" it begins (or
//! resumes) a [`Wait`] and returns [`StepOutcome::pending`](super::StepOutcome::pending). The
//! runtime then requeues the object after [`Wait::next_poll`], freeing the worker for other
//! objects, and the next pass resumes the wait with the same deadline.
//!
//! # Guarantees
//! - A wait belongs to one object and one `key` (e.g. generation, revision and digest of what
//!   was applied): a pass with another key begins a new wait, with a new deadline.
//! - The deadline is fixed when the wait begins (`timeout` from then) and never moves.
//! - A wait lives only while the object's reconcile is pending: the runtime ends it when a pass
//!   finishes (success or failure), when the object is suspended and when it is deleted, so a
//!   suspend or a deletion cancels a wait in flight.
//! - Looks are spaced by a short backoff ([`FIRST_POLL`] doubling up to [`MAX_POLL`]), never
//!   past the deadline, so a timeout is reported when it passes.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use capstan_apply::ObjectRef;

/// The delay before the second look of a wait.
pub const FIRST_POLL: Duration = Duration::from_millis(250);

/// The longest delay between two looks of a wait.
pub const MAX_POLL: Duration = Duration::from_secs(5);

/// A wait in flight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wait {
    /// What is awaited (e.g. `generation|revision|digest`); another key is another wait.
    pub key: String,
    /// When the wait began.
    pub started: Instant,
    /// When it gives up.
    pub deadline: Instant,
    /// The looks taken so far, this one included.
    pub looks: u32,
    /// The objects awaited, as the pass that began the wait chose them.
    pub objects: Vec<ObjectRef>,
}

impl Wait {
    /// The timeout the wait began with.
    pub fn timeout(&self) -> Duration {
        self.deadline.saturating_duration_since(self.started)
    }

    /// Whether the deadline has passed at `now`.
    pub fn expired(&self, now: Instant) -> bool {
        now >= self.deadline
    }

    /// The delay before the next look: [`FIRST_POLL`] doubled per look, up to [`MAX_POLL`],
    /// and never past the deadline.
    pub fn next_poll(&self, now: Instant) -> Duration {
        let exponent = self.looks.saturating_sub(1).min(16);
        let delay = FIRST_POLL.saturating_mul(1u32 << exponent).min(MAX_POLL);
        delay.min(self.deadline.saturating_duration_since(now))
    }
}

/// `now + timeout`; a timeout past what an `Instant` holds is a year.
fn deadline(now: Instant, timeout: Duration) -> Instant {
    const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
    now.checked_add(timeout)
        .or_else(|| now.checked_add(YEAR))
        .unwrap_or(now)
}

/// The waits in flight of one controller, one per object.
#[derive(Debug)]
pub(crate) struct Waits<K> {
    waits: Mutex<HashMap<K, Wait>>,
}

impl<K> Default for Waits<K> {
    fn default() -> Self {
        Self {
            waits: Mutex::default(),
        }
    }
}

impl<K: Eq + Hash + Clone> Waits<K> {
    /// Resumes the wait of `object` for `key`, counting one more look, or begins one at `now`
    /// with `timeout` awaiting `objects` (replacing a wait for another key).
    pub(crate) fn look(
        &self,
        object: &K,
        key: &str,
        timeout: Duration,
        objects: impl FnOnce() -> Vec<ObjectRef>,
        now: Instant,
    ) -> Wait {
        let mut waits = self.waits.lock().unwrap_or_else(PoisonError::into_inner);
        match waits.get_mut(object) {
            Some(wait) if wait.key == key => {
                wait.looks = wait.looks.saturating_add(1);
                wait.clone()
            }
            _ => {
                let wait = Wait {
                    key: key.to_owned(),
                    started: now,
                    deadline: deadline(now, timeout),
                    looks: 1,
                    objects: objects(),
                };
                waits.insert(object.clone(), wait.clone());
                wait
            }
        }
    }

    /// The wait of `object` for `key`, if one is in flight.
    pub(crate) fn get(&self, object: &K, key: &str) -> Option<Wait> {
        self.waits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(object)
            .filter(|wait| wait.key == key)
            .cloned()
    }

    /// Ends the wait of `object`, if any; true when there was one.
    pub(crate) fn end(&self, object: &K) -> bool {
        self.waits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(object)
            .is_some()
    }

    /// The number of waits in flight.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.waits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn web() -> Vec<ObjectRef> {
        vec![ObjectRef::new("apps/v1", "Deployment", "apps", "web")]
    }

    #[test]
    fn a_wait_keeps_its_deadline_across_looks_and_a_new_key_starts_over() {
        let waits = Waits::default();
        let start = Instant::now();
        let timeout = Duration::from_secs(60);
        let first = waits.look(&"a", "1|rev1", timeout, web, start);
        assert_eq!((first.looks, first.timeout()), (1, timeout));
        assert_eq!(first.objects, web());
        let later = start + Duration::from_secs(10);
        let again = waits.look(&"a", "1|rev1", timeout, Vec::new, later);
        assert_eq!(again.looks, 2);
        assert_eq!(again.deadline, first.deadline, "the deadline never moves");
        assert_eq!(again.objects, web(), "the objects of the first look");
        assert_eq!(waits.get(&"a", "1|rev1"), Some(again));
        assert_eq!(waits.get(&"a", "1|rev2"), None);
        let other = waits.look(&"a", "1|rev2", timeout, Vec::new, later);
        assert_eq!(other.looks, 1);
        assert_eq!(other.deadline, later + timeout, "a new revision waits anew");
        assert_eq!(waits.len(), 1, "one wait per object");
        waits.look(&"b", "1|rev1", timeout, web, later);
        assert!(waits.end(&"a"));
        assert!(!waits.end(&"a"));
        assert_eq!(waits.get(&"a", "1|rev2"), None);
        assert_eq!(waits.len(), 1);
    }

    #[test]
    fn looks_back_off_up_to_the_cap_and_never_past_the_deadline() {
        let waits = Waits::default();
        let start = Instant::now();
        let timeout = Duration::from_secs(600);
        let mut delays = Vec::new();
        for _ in 0..8 {
            let wait = waits.look(&"a", "k", timeout, Vec::new, start);
            delays.push(wait.next_poll(start));
        }
        assert_eq!(
            delays,
            [250, 500, 1000, 2000, 4000, 5000, 5000, 5000].map(Duration::from_millis)
        );
        let wait = waits.look(&"a", "k", timeout, Vec::new, start);
        let near_the_end = wait
            .deadline
            .checked_sub(Duration::from_millis(100))
            .unwrap();
        assert_eq!(wait.next_poll(near_the_end), Duration::from_millis(100));
        assert!(!wait.expired(near_the_end));
        assert!(wait.expired(wait.deadline));
        assert_eq!(wait.next_poll(wait.deadline), Duration::ZERO);
    }

    #[test]
    fn a_zero_timeout_expires_at_once() {
        let waits = Waits::default();
        let now = Instant::now();
        let wait = waits.look(&"a", "k", Duration::ZERO, Vec::new, now);
        assert!(wait.expired(now));
    }
}
