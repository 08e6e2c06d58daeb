//! Bounds on what a Git server can make a fetch read, inflate and write, enforced while the
//! bytes arrive: the pack received (against [`Limits::max_archive_bytes`]), the objects inflated
//! while indexing it (against [`Limits::max_total_bytes`]) and, at checkout, every file and the
//! tree as a whole (sizes read from object headers before any blob is loaded).
//!
//! gitoxide reports the bytes it reads and inflates through its progress interface; a
//! [`Budget`] is such a progress whose counters trip the fetch's interrupt flag when a limit is
//! passed, so the receive stops at its next read. Each pack entry is inflated as a stream (its
//! size is reported once it is through), so an object larger than
//! [`Limits::max_file_bytes`] is refused before anything holds it in memory. Single allocations (one object, one delta
//! result) are bounded by gitoxide itself through `gitoxide.objects.allocLimit`, which the
//! scratch repository sets to [`Limits::max_file_bytes`].

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use gix::progress::{Count, Id, MessageLevel, NestedProgress, Progress, Step, StepShared, Unit};

use crate::artifact::Limits;

/// gitoxide's progress id for the bytes of the pack read from the server
/// (`gix_pack::bundle::write::ProgressId::ReadPackBytes`).
const READ_PACK_BYTES: Id = *b"BWRB";
/// gitoxide's progress id for the bytes inflated while indexing the pack
/// (`gix_pack::index::write::ProgressId::DecompressedBytes`; its `DecodedBytes` shares it).
const INFLATED_BYTES: Id = *b"IWDB";

/// Which limit a fetch passed, and by how much.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Exceeded {
    /// What was measured, with the value reached, e.g. `pack size 536870913`.
    pub what: String,
    /// The limit.
    pub limit: u64,
}

#[derive(Debug)]
struct State {
    limits: Limits,
    pack_bytes: AtomicU64,
    inflated_bytes: AtomicU64,
    exceeded: Mutex<Option<Exceeded>>,
    interrupt: Arc<AtomicBool>,
}

/// A progress for gitoxide's fetch that enforces [`Limits`]; clones share the counters.
#[derive(Clone, Debug)]
pub(crate) struct Budget {
    state: Arc<State>,
    id: Id,
    step: StepShared,
}

impl Budget {
    /// A budget that sets `interrupt` once a limit is passed.
    pub fn new(limits: Limits, interrupt: Arc<AtomicBool>) -> Self {
        Self {
            state: Arc::new(State {
                limits,
                pack_bytes: AtomicU64::new(0),
                inflated_bytes: AtomicU64::new(0),
                exceeded: Mutex::new(None),
                interrupt,
            }),
            id: gix::progress::UNKNOWN,
            step: StepShared::default(),
        }
    }

    /// The first limit passed, if any.
    pub fn exceeded(&self) -> Option<Exceeded> {
        self.state
            .exceeded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Records that `what` passed `limit` (the first record wins) and interrupts the fetch.
    pub fn trip(&self, what: String, limit: u64) {
        let mut exceeded = self
            .state
            .exceeded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        exceeded.get_or_insert(Exceeded { what, limit });
        self.state.interrupt.store(true, Ordering::SeqCst);
    }

    fn count(&self, delta: u64) {
        let (counter, limit, name) = match self.id {
            READ_PACK_BYTES => (
                &self.state.pack_bytes,
                self.state.limits.max_archive_bytes,
                "pack size",
            ),
            INFLATED_BYTES => (
                &self.state.inflated_bytes,
                self.state.limits.max_total_bytes,
                "inflated object size",
            ),
            _ => return,
        };
        let total = counter
            .fetch_add(delta, Ordering::Relaxed)
            .saturating_add(delta);
        if total > limit {
            self.trip(format!("{name} {total}"), limit);
        }
    }

    fn child(&self, id: Id) -> Self {
        Self {
            state: Arc::clone(&self.state),
            id,
            step: StepShared::default(),
        }
    }
}

impl Count for Budget {
    fn set(&self, step: Step) {
        let previous = self.step.swap(step, Ordering::Relaxed);
        self.count(step.saturating_sub(previous) as u64);
    }

    fn step(&self) -> Step {
        self.step.load(Ordering::Relaxed)
    }

    fn inc_by(&self, step: Step) {
        self.step.fetch_add(step, Ordering::Relaxed);
        // gitoxide adds the inflated size of each pack entry at once: one object.
        let object = step as u64;
        if self.id == INFLATED_BYTES && object > self.state.limits.max_file_bytes {
            self.trip(
                format!("object size {object}"),
                self.state.limits.max_file_bytes,
            );
        }
        self.count(object);
    }

    fn counter(&self) -> StepShared {
        // Counted without us (gitoxide adds to it directly); single allocations stay bounded
        // by `allocLimit`.
        Arc::new(AtomicUsize::new(0))
    }
}

impl Progress for Budget {
    fn init(&mut self, _max: Option<Step>, _unit: Option<Unit>) {}

    fn set_name(&mut self, _name: String) {}

    fn name(&self) -> Option<String> {
        None
    }

    fn id(&self) -> Id {
        self.id
    }

    fn message(&self, _level: MessageLevel, _message: String) {}
}

impl NestedProgress for Budget {
    type SubProgress = Budget;

    fn add_child(&mut self, _name: impl Into<String>) -> Self::SubProgress {
        self.child(gix::progress::UNKNOWN)
    }

    fn add_child_with_id(&mut self, _name: impl Into<String>, id: Id) -> Self::SubProgress {
        self.child(id)
    }
}

/// What a checkout wrote so far, against [`Limits`].
#[derive(Debug)]
pub(crate) struct CheckoutBudget {
    limits: Limits,
    entries: u64,
    bytes: u64,
}

impl CheckoutBudget {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            entries: 0,
            bytes: 0,
        }
    }

    /// Accounts for one more entry (file, directory or link) of `size` bytes.
    pub fn add(&mut self, size: u64) -> Result<(), Exceeded> {
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(Exceeded {
                what: format!("entry count {}", self.entries),
                limit: self.limits.max_entries,
            });
        }
        if size > self.limits.max_file_bytes {
            return Err(Exceeded {
                what: format!("file size {size}"),
                limit: self.limits.max_file_bytes,
            });
        }
        self.bytes = self.bytes.saturating_add(size);
        if self.bytes > self.limits.max_total_bytes {
            return Err(Exceeded {
                what: format!("total size {}", self.bytes),
                limit: self.limits.max_total_bytes,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_archive_bytes: 100,
            max_total_bytes: 1_000,
            max_file_bytes: 400,
            max_entries: 3,
            ..Limits::default()
        }
    }

    #[test]
    fn pack_bytes_past_the_limit_interrupt_the_fetch() {
        let interrupt = Arc::new(AtomicBool::new(false));
        let mut budget = Budget::new(limits(), Arc::clone(&interrupt));
        let read = budget.add_child_with_id("read pack", READ_PACK_BYTES);
        let other = budget.add_child_with_id("objects", *b"XXXX");
        other.inc_by(10_000);
        read.inc_by(60);
        assert!(!interrupt.load(Ordering::SeqCst));
        read.inc_by(41);
        assert!(interrupt.load(Ordering::SeqCst));
        assert_eq!(
            budget.exceeded(),
            Some(Exceeded {
                what: "pack size 101".into(),
                limit: 100
            })
        );
    }

    #[test]
    fn inflated_bytes_count_across_children_and_set_counts_the_difference() {
        let interrupt = Arc::new(AtomicBool::new(false));
        let mut budget = Budget::new(limits(), Arc::clone(&interrupt));
        let first = budget.add_child_with_id("decompressing", INFLATED_BYTES);
        let second = budget.add_child_with_id("decoding", INFLATED_BYTES);
        first.set(500);
        first.set(600);
        second.inc_by(200);
        second.inc_by(200);
        assert!(
            !interrupt.load(Ordering::SeqCst),
            "1,000 is within the limit"
        );
        second.inc();
        assert!(interrupt.load(Ordering::SeqCst));
        assert_eq!(budget.exceeded().unwrap().what, "inflated object size 1001");
    }

    #[test]
    fn one_inflated_object_larger_than_a_file_may_be_is_refused() {
        let interrupt = Arc::new(AtomicBool::new(false));
        let mut budget = Budget::new(limits(), Arc::clone(&interrupt));
        let inflated = budget.add_child_with_id("decompressing", INFLATED_BYTES);
        inflated.inc_by(400);
        assert!(!interrupt.load(Ordering::SeqCst));
        inflated.inc_by(401);
        assert_eq!(
            budget.exceeded(),
            Some(Exceeded {
                what: "object size 401".into(),
                limit: 400
            })
        );
    }

    #[test]
    fn the_first_limit_passed_is_reported() {
        let budget = Budget::new(limits(), Arc::new(AtomicBool::new(false)));
        budget.trip("pack size 200".into(), 100);
        budget.trip("inflated object size 2000".into(), 1_000);
        assert_eq!(budget.exceeded().unwrap().what, "pack size 200");
    }

    #[test]
    fn checkout_counts_entries_file_sizes_and_the_total() {
        let mut budget = CheckoutBudget::new(limits());
        assert_eq!(
            budget.add(401),
            Err(Exceeded {
                what: "file size 401".into(),
                limit: 400
            })
        );
        let mut budget = CheckoutBudget::new(limits());
        budget.add(400).unwrap();
        budget.add(400).unwrap();
        assert_eq!(budget.add(201).unwrap_err().what, "total size 1001");
        let mut budget = CheckoutBudget::new(limits());
        for _ in 0..3 {
            budget.add(0).unwrap();
        }
        assert_eq!(budget.add(0).unwrap_err().what, "entry count 4");
    }
}
