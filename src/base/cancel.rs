//! Cancellation and pause: one token per run, shared by the engine loop, handlers (command,
//! wait, human) and whoever controls the run (CLI signal handler, HTTP server).
//!
//! Handlers never sleep blindly: they wait on the token, which wakes them on cancel.
//!
//! A token can have children ([`CancelToken::child`]): cancelling a parent cancels its
//! children (with the parent's reason), never the reverse, and a child is paused while any
//! ancestor is. The engine gives each stage attempt, parallel branch set and child workflow
//! its own child token, so a node timeout or a manager's stop cancels only that work.
//!
//! Must not: know what a run, a stage or a process is (callers give it reasons as text).

use parking_lot::{Condvar, Mutex};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Called once when the token is cancelled (see [`CancelToken::on_cancel`]).
pub type CancelHook = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct State {
    cancelled: bool,
    paused: bool,
    reason: Option<String>,
    children: Vec<Weak<Inner>>,
    hooks: Vec<Weak<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("cancelled", &self.cancelled)
            .field("paused", &self.paused)
            .field("reason", &self.reason)
            .field("children", &self.children.len())
            .field("hooks", &self.hooks.len())
            .finish()
    }
}

#[derive(Debug, Default)]
struct Inner {
    lock: Mutex<State>,
    cv: Condvar,
    parent: Option<CancelToken>,
}

/// Cancels or pauses a run (or part of one) from another thread; clones share one state.
#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

impl CancelToken {
    /// A token neither cancelled nor paused.
    pub fn new() -> Self {
        Self::default()
    }

    /// A token cancelled whenever this one is (with this one's reason), and paused while
    /// this one is; cancelling the child leaves this one alone.
    pub fn child(&self) -> CancelToken {
        let child = CancelToken {
            inner: Arc::new(Inner {
                parent: Some(self.clone()),
                ..Inner::default()
            }),
        };
        let inherited = {
            let mut s = self.inner.lock.lock();
            s.children.retain(|w| w.strong_count() > 0);
            s.children.push(Arc::downgrade(&child.inner));
            s.cancelled.then(|| s.reason.clone().unwrap_or_default())
        };
        if let Some(reason) = inherited {
            child.cancel(&reason);
        }
        child
    }

    /// Requests cancellation; wakes every waiter, runs every hook and cancels every child.
    pub fn cancel(&self, reason: &str) {
        let (children, hooks) = {
            let mut s = self.inner.lock.lock();
            if !s.cancelled {
                s.cancelled = true;
                s.reason = Some(reason.to_string());
            }
            self.inner.cv.notify_all();
            (
                std::mem::take(&mut s.children),
                std::mem::take(&mut s.hooks),
            )
        };
        for hook in hooks.iter().filter_map(Weak::upgrade) {
            hook();
        }
        let reason = self.reason().unwrap_or_else(|| reason.to_string());
        for inner in children.iter().filter_map(Weak::upgrade) {
            CancelToken { inner }.cancel(&reason);
        }
    }

    /// Runs `hook` when this token is cancelled (at once if it already is), for waits that
    /// cannot sleep on the token itself (a channel receive). The token keeps only a weak
    /// reference: dropping the hook unregisters it.
    pub fn on_cancel(&self, hook: &CancelHook) {
        {
            let mut s = self.inner.lock.lock();
            if !s.cancelled {
                s.hooks.retain(|h| h.strong_count() > 0);
                s.hooks.push(Arc::downgrade(hook));
                return;
            }
        }
        hook();
    }

    /// True once [`CancelToken::cancel`] was called on this token or an ancestor.
    pub fn is_cancelled(&self) -> bool {
        self.inner.lock.lock().cancelled
    }

    /// The reason given to the first [`CancelToken::cancel`] that reached this token.
    pub fn reason(&self) -> Option<String> {
        self.inner.lock.lock().reason.clone()
    }

    /// Holds the run between stages (a running stage finishes first) until
    /// [`CancelToken::unpause`].
    pub fn pause(&self) {
        self.inner.lock.lock().paused = true;
    }

    /// Lets a paused run go on.
    pub fn unpause(&self) {
        self.inner.lock.lock().paused = false;
        self.inner.cv.notify_all();
    }

    /// True when this token or any ancestor is paused.
    pub fn is_paused(&self) -> bool {
        self.inner.lock.lock().paused || self.inner.parent.as_ref().is_some_and(Self::is_paused)
    }

    /// Sleeps up to `dur`; returns true if cancelled before or during the wait.
    pub fn sleep(&self, dur: Duration) -> bool {
        let deadline = Instant::now() + dur;
        let mut s = self.inner.lock.lock();
        while !s.cancelled {
            if self.inner.cv.wait_until(&mut s, deadline).timed_out() {
                break;
            }
        }
        s.cancelled
    }

    /// Blocks while this token or an ancestor is paused (between stages); returns true if
    /// cancelled.
    pub fn wait_while_paused(&self) -> bool {
        if let Some(parent) = &self.inner.parent {
            if parent.wait_while_paused() {
                return true;
            }
        }
        let mut s = self.inner.lock.lock();
        while s.paused && !s.cancelled {
            self.inner.cv.wait(&mut s);
        }
        s.cancelled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_wakes_a_sleeper() {
        let t = CancelToken::new();
        let t2 = t.clone();
        let h = std::thread::spawn(move || t2.sleep(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(20));
        t.cancel("user");
        assert!(h.join().unwrap_or(false));
        assert_eq!(t.reason().as_deref(), Some("user"));
    }

    #[test]
    fn hooks_run_on_cancel_of_the_token_or_an_ancestor_and_not_once_dropped() {
        let parent = CancelToken::new();
        let child = parent.child();
        let fired = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let hook = |n: &Arc<std::sync::atomic::AtomicUsize>| -> CancelHook {
            let n = Arc::clone(n);
            Arc::new(move || {
                n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            })
        };
        let kept = hook(&fired);
        child.on_cancel(&kept);
        let dropped = hook(&fired);
        child.on_cancel(&dropped);
        drop(dropped);
        parent.cancel("stop");
        assert_eq!(fired.load(std::sync::atomic::Ordering::SeqCst), 1);
        // Registered after the cancel: runs at once.
        child.on_cancel(&kept);
        assert_eq!(fired.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[test]
    fn sleep_without_cancel_returns_false() {
        assert!(!CancelToken::new().sleep(Duration::from_millis(5)));
    }

    #[test]
    fn children_follow_parents_not_the_reverse() {
        let parent = CancelToken::new();
        let a = parent.child();
        let b = a.child();
        b.cancel("stop b");
        assert!(b.is_cancelled() && !a.is_cancelled() && !parent.is_cancelled());
        let c = a.child();
        parent.cancel("user");
        assert!(a.is_cancelled() && c.is_cancelled());
        assert_eq!(c.reason().as_deref(), Some("user"));
        assert!(parent.child().is_cancelled());
    }

    #[test]
    fn child_is_paused_with_its_parent() {
        let parent = CancelToken::new();
        let child = parent.child();
        parent.pause();
        assert!(child.is_paused());
        let c2 = child.clone();
        let h = std::thread::spawn(move || c2.wait_while_paused());
        std::thread::sleep(Duration::from_millis(20));
        assert!(!h.is_finished());
        parent.unpause();
        assert!(!h.join().unwrap_or(true));
    }

    #[test]
    fn pause_blocks_until_unpause() {
        let t = CancelToken::new();
        t.pause();
        let t2 = t.clone();
        let h = std::thread::spawn(move || t2.wait_while_paused());
        std::thread::sleep(Duration::from_millis(20));
        assert!(!h.is_finished());
        t.unpause();
        assert!(!h.join().unwrap_or(true));
    }
}
