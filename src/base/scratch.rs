//! Reusable per-thread byte buffers for hot paths that need a large scratch area for a short
//! while: a command's read chunk (16 KiB) and a spawned child's stack (64 KiB). Allocated and
//! zeroed afresh for every command stage, they cost page faults each time (freeing them let
//! the allocator return the pages to the kernel): about 30 µs a stage, a fifth of the stage
//! thread's time around a `true` command.
//! Owns: the per-thread free list. Must not touch: anything else in the crate.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

/// Buffers kept per thread; a stage thread holds at most a read chunk and a stack at once.
const KEEP: usize = 4;

thread_local! {
    static FREE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A byte buffer of a fixed length, taken from this thread's free list (or allocated) and
/// given back to the list of the thread that drops it. Its bytes are initialized but
/// unspecified: zeros, or what its last user left.
pub struct Scratch {
    buf: Vec<u8>,
}

impl Scratch {
    /// A buffer of exactly `len` bytes.
    pub fn take(len: usize) -> Scratch {
        let reused = FREE
            .try_with(|free| {
                let mut free = free.try_borrow_mut().ok()?;
                let at = free.iter().position(|b| b.len() == len)?;
                Some(free.swap_remove(at))
            })
            .ok()
            .flatten();
        Scratch {
            buf: reused.unwrap_or_else(|| vec![0; len]),
        }
    }
}

impl Deref for Scratch {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        // A thread that is exiting (its list already gone) just frees it.
        let _ = FREE.try_with(|free| {
            if let Ok(mut free) = free.try_borrow_mut() {
                if free.len() < KEEP {
                    free.push(buf);
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test harness may run several tests on one thread.
    fn empty_list() {
        FREE.with(|f| f.borrow_mut().clear());
    }

    #[test]
    fn a_buffer_given_back_is_taken_again_with_its_bytes() {
        empty_list();
        let mut first = Scratch::take(4096);
        assert_eq!(first.len(), 4096);
        first[0] = 7;
        let at = first.as_ptr();
        drop(first);
        let again = Scratch::take(4096);
        assert_eq!(again.as_ptr(), at, "the same allocation comes back");
        assert_eq!(again[0], 7);
        // Another length is another buffer.
        let other = Scratch::take(100);
        assert_eq!(other.len(), 100);
        assert_ne!(other.as_ptr(), at);
    }

    #[test]
    fn a_thread_keeps_a_bounded_number() {
        empty_list();
        let held: Vec<Scratch> = (0..KEEP + 3).map(|_| Scratch::take(64)).collect();
        drop(held);
        let kept = FREE.with(|f| f.borrow().len());
        assert_eq!(kept, KEEP);
    }
}
