//! The auto-merge watch: the open pull requests svc is to merge on its own (`auto_merge`)
//! are asked about on a timer, so they merge once their checks pass even when the host's
//! webhooks never reach svc (the token strategy without a webhook, a firewall, a lost
//! delivery). Each is fetched at most every [`super::pulls::REFRESH_SECS`] (the kept copy's
//! own limit), whatever else reads it; the fetch that finds every check passed starts the
//! merge ([`Integrations::after_change`]).
//!
//! The watched set lives in memory: filled from the kept records at startup
//! ([`Integrations::start_watch`]) and kept current as records are stored or removed.
//!
//! Owns: which runs are watched and the watch thread. Must not touch: the merge itself
//! (`pulls`), SQL.

use super::pulls::{kept_of, Kept, REFRESH_SECS};
use super::Integrations;
use std::time::{Duration, Instant};

/// How often the watch thread looks at its set (each pull request is still fetched at most
/// every `REFRESH_SECS`).
const TICK: Duration = Duration::from_secs(5);
/// Kept records read per page at startup.
const PAGE: usize = 500;

/// Whether svc still has to merge this pull request itself.
pub fn awaits_auto_merge(kept: &Kept) -> bool {
    kept.options.auto_merge && matches!(kept.state_name(), "open" | "draft" | "unknown")
}

impl Integrations {
    /// Watches the run's pull request, or stops watching it, as `kept` says.
    pub(super) fn note_watch(&self, run_id: &str, kept: Option<&Kept>) {
        let mut w = self.watched.lock();
        if kept.is_some_and(awaits_auto_merge) {
            w.entry(run_id.to_string()).or_insert(None);
        } else {
            w.remove(run_id);
        }
    }

    /// The runs watched now (tests).
    pub fn watched(&self) -> Vec<String> {
        let mut v: Vec<String> = self.watched.lock().keys().cloned().collect();
        v.sort();
        v
    }

    /// Fills the watched set from the kept records and starts the watch thread (once).
    pub fn start_watch(&self) -> std::io::Result<usize> {
        if self
            .watch_started
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return Ok(self.watched.lock().len());
        }
        let mut after = String::new();
        loop {
            let page = match self.table.pull_requests_after(&after, PAGE) {
                Ok(p) => p,
                Err(e) => {
                    log::error!("cannot read the kept pull requests to watch: {e}");
                    break;
                }
            };
            for r in &page {
                self.note_watch(&r.run_id, kept_of(r).as_ref());
            }
            match page.last() {
                Some(last) if page.len() == PAGE => after = last.run_id.clone(),
                _ => break,
            }
        }
        let Some(me) = self.arc() else {
            return Ok(0);
        };
        let me = std::sync::Arc::downgrade(&me);
        std::thread::Builder::new()
            .name("pr-watch".into())
            .spawn(move || loop {
                std::thread::sleep(TICK);
                let Some(me) = me.upgrade() else { return };
                me.watch_once();
            })?;
        Ok(self.watched.lock().len())
    }

    /// One pass: every watched pull request whose kept copy is stale, and that this watch
    /// did not try within `REFRESH_SECS` (a host that is down is not asked more often), is
    /// fetched.
    pub fn watch_once(&self) {
        let every = Duration::from_secs(REFRESH_SECS.unsigned_abs());
        for id in self.watched() {
            let refreshed_at = match self.kept(&id) {
                Ok(Some((_, _, at))) => at,
                Ok(None) => {
                    self.note_watch(&id, None);
                    continue;
                }
                Err(e) => {
                    log::warn!("run {id}: cannot read its pull request: {e}");
                    continue;
                }
            };
            if now_ms().saturating_sub(refreshed_at) < REFRESH_SECS * 1000 {
                continue;
            }
            {
                let mut w = self.watched.lock();
                let Some(tried) = w.get_mut(&id) else {
                    continue;
                };
                let now = Instant::now();
                if tried.is_some_and(|t| now.duration_since(t) < every) {
                    continue;
                }
                *tried = Some(now);
            }
            if let Err(e) = self.refresh(&id, false) {
                log::warn!("run {id}: cannot refresh its pull request: {e}");
            }
        }
    }
}

fn now_ms() -> i64 {
    crate::base::clock::parse_ts(&crate::base::clock::now()).unwrap_or(0)
}
