//! Wall-clock timestamps and identifiers minted by the store.
//!
//! Owns: the one timestamp format the store writes (RFC 3339, UTC, milliseconds, `Z`) and the
//! process-wide monotonic ULID generator used for run and event ids.
//! Must not touch: anything stored; callers decide what the values are used for.

use parking_lot::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};
use ulid::{Generator, Ulid};

static ULIDS: Mutex<Generator> = Mutex::new(Generator::new());

/// A fresh ULID, strictly greater than every ULID minted earlier by this process (so runs
/// created in the same millisecond still list in creation order).
pub fn new_ulid() -> String {
    let mut generator = ULIDS.lock();
    match generator.generate() {
        Ok(id) => id.to_string(),
        // The random part overflowed within one millisecond (2^80 ids): fall back to a plain one.
        Err(_) => Ulid::new().to_string(),
    }
}

/// True when `s` is a ULID in canonical form (26 characters of uppercase Crockford base32).
pub fn is_canonical_ulid(s: &str) -> bool {
    s.len() == 26 && Ulid::from_string(s).is_ok_and(|u| u.to_string() == s)
}

/// The current time, e.g. `2026-11-21T20:05:46.123Z`.
pub fn now() -> String {
    let ms = match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    };
    format_millis(ms)
}

/// Formats milliseconds since the Unix epoch as RFC 3339 UTC with milliseconds.
pub fn format_millis(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (H. Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_millis(1_795_291_546_123), "2026-11-21T20:05:46.123Z");
        assert_eq!(format_millis(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(format_millis(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn ulids_are_canonical_and_increasing() {
        let a = new_ulid();
        let b = new_ulid();
        assert!(is_canonical_ulid(&a) && is_canonical_ulid(&b));
        assert!(a < b);
        assert!(!is_canonical_ulid(&a.to_lowercase()));
        assert!(!is_canonical_ulid("not-a-ulid"));
    }
}
