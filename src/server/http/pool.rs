//! The request threads: an elastic pool (model: tiny_http's `util/task_pool.rs`) and the
//! scheduling policy a thread takes while it streams a response.
//!
//! Owns: request threads. Must not touch: sockets or what a request means.

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// While a thread streams a response it runs under `SCHED_BATCH`: woken threads of that
/// policy never preempt the thread that woke them. One committed event wakes every SSE
/// thread of its run; without this the committing thread (an engine worker, holding the
/// store's writer lock) was preempted by the threads it woke and a hand-off to 1,000
/// subscribers took 17 ms instead of about one (server_bench). Restored on drop, because the
/// thread goes back to the pool.
pub(super) struct BatchScheduling {
    entered: bool,
}

impl BatchScheduling {
    pub(super) fn enter() -> BatchScheduling {
        BatchScheduling {
            entered: set_policy(libc::SCHED_BATCH),
        }
    }
}

impl Drop for BatchScheduling {
    fn drop(&mut self) {
        if self.entered {
            set_policy(libc::SCHED_OTHER);
        }
    }
}

/// Sets the calling thread's scheduling policy (priority 0); false when refused.
fn set_policy(policy: libc::c_int) -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param. Moving between
    // SCHED_OTHER and SCHED_BATCH needs no privilege.
    unsafe { libc::sched_setscheduler(0, policy, &param) == 0 }
}

type Job = Box<dyn FnOnce() + Send>;

/// An elastic thread pool: a job runs on an idle worker, or on a new one when none is idle;
/// workers beyond `min` exit after 30 s idle. The queue and the idle count share one lock,
/// so a job is never left waiting for a worker that is about to exit.
pub(super) struct Pool {
    shared: Arc<(Mutex<PoolState>, Condvar)>,
    min: usize,
}

struct PoolState {
    queue: VecDeque<Job>,
    idle: usize,
    total: usize,
}

impl Pool {
    pub(super) fn new(min: usize) -> Pool {
        Pool {
            shared: Arc::new((
                Mutex::new(PoolState {
                    queue: VecDeque::new(),
                    idle: 0,
                    total: 0,
                }),
                Condvar::new(),
            )),
            min,
        }
    }

    pub(super) fn execute(&self, job: Job) {
        let (lock, cv) = &*self.shared;
        let mut st = lock.lock();
        if st.idle > st.queue.len() {
            st.queue.push_back(job);
            cv.notify_one();
            return;
        }
        st.total += 1;
        drop(st);
        let shared = Arc::clone(&self.shared);
        let min = self.min;
        let spawned = std::thread::Builder::new()
            .name("http-worker".into())
            .spawn(move || worker(shared, min, job));
        if let Err(e) = spawned {
            log::error!("could not start a request thread: {e}");
            self.shared.0.lock().total -= 1;
        }
    }
}

fn worker(shared: Arc<(Mutex<PoolState>, Condvar)>, min: usize, first: Job) {
    first();
    let (lock, cv) = &*shared;
    let mut st = lock.lock();
    loop {
        if let Some(job) = st.queue.pop_front() {
            drop(st);
            job();
            st = lock.lock();
            continue;
        }
        st.idle += 1;
        let timed_out = cv.wait_for(&mut st, Duration::from_secs(30)).timed_out();
        st.idle -= 1;
        if timed_out && st.queue.is_empty() && st.total > min {
            st.total -= 1;
            return;
        }
    }
}
