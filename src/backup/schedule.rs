//! The server's backup schedule: a thread that takes a snapshot whenever the newest one in
//! the object store is older than `[server.backup] every` (read again on every round, so a
//! settings reload changes it), then applies `keep`.
//!
//! Owns: when a scheduled snapshot is taken. Must not touch: how (see the module above).

use super::{due_in, list, store_of, take};
use crate::settings::SettingsHandle;
use std::path::PathBuf;
use std::time::Duration;

/// The longest sleep between two looks at the settings and the store.
const ROUND: Duration = Duration::from_secs(60);

/// Starts the `backups` thread (it lives as long as the process).
pub fn start(settings: SettingsHandle, state_dir: PathBuf) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("backups".into())
        .spawn(move || {
            super::lower_priority();
            loop {
                let sleep = round(&settings, &state_dir);
                std::thread::sleep(sleep);
            }
        })
        .map(drop)
}

/// One round: a snapshot when one is due; how long to sleep before the next round.
fn round(settings: &SettingsHandle, state_dir: &std::path::Path) -> Duration {
    let s = settings.get();
    if s.server.backup.every_duration().is_none() {
        return ROUND;
    }
    let store = match store_of(&s, state_dir) {
        Ok(store) => store,
        Err(e) => {
            log::error!("scheduled backup: {e}");
            return ROUND;
        }
    };
    let newest_age = match list(&store) {
        Ok(all) => all.last().and_then(|n| age_of(&n.taken_at)),
        Err(e) => {
            log::error!("scheduled backup: cannot list {}: {e}", store.describe());
            return ROUND;
        }
    };
    match due_in(&s.server.backup, newest_age) {
        Some(d) if d.is_zero() => {
            match take(state_dir, &store, s.server.backup.keep) {
                Ok(t) => log::info!(
                    "backup {} taken ({} bytes, {} runs); {} old one(s) removed",
                    t.key,
                    t.size,
                    t.runs,
                    t.pruned.len()
                ),
                Err(e) => log::error!("scheduled backup failed: {e}"),
            }
            ROUND.min(Duration::from_secs(1))
        }
        Some(d) => d.min(ROUND),
        None => ROUND,
    }
}

/// How long ago an RFC 3339 time was (`None`: unreadable or in the future).
fn age_of(rfc3339: &str) -> Option<Duration> {
    let t = chrono::DateTime::parse_from_rfc3339(rfc3339).ok()?;
    let secs = chrono::Utc::now().timestamp() - t.timestamp();
    u64::try_from(secs).ok().map(Duration::from_secs)
}
