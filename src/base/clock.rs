//! Wall-clock timestamps and ULIDs: the one timestamp format the crate writes (RFC 3339, UTC,
//! milliseconds, `Z`), reading it back, and the process-wide monotonic ULID generator.
//!
//! Owns: the timestamp format and the ULID generator used for run and event ids.
//! Must not touch: anything stored; callers decide what the values are used for.

use parking_lot::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};
use ulid::Ulid;

/// The last ULID minted by this process, as (milliseconds, random part).
static LAST_ULID: Mutex<(u64, u128)> = Mutex::new((0, 0));

/// The random part of a ULID is 80 bits.
const RANDOM_BITS: u128 = (1 << 80) - 1;

/// A fresh ULID, strictly greater than every ULID minted earlier by this process (so runs
/// created in the same millisecond still list in creation order): within one millisecond the
/// random part counts up from the previous id, as the ULID spec's monotonic mode says. The
/// kernel is asked for randomness once per new millisecond, not per id.
pub fn new_ulid() -> String {
    let now = unix_millis();
    let mut last = LAST_ULID.lock();
    let (ms, random) = match *last {
        (last_ms, last_random) if now <= last_ms && last_random < RANDOM_BITS => {
            (last_ms, last_random + 1)
        }
        // The clock went back or the random part is used up: move to the next millisecond.
        (last_ms, _) if now <= last_ms => (last_ms + 1, fresh_random()),
        _ => (now, fresh_random()),
    };
    *last = (ms, random);
    drop(last);
    Ulid::from_parts(ms, random).to_string()
}

/// 80 random bits, with room left to count up within a millisecond.
fn fresh_random() -> u128 {
    let mut b = [0u8; 16];
    if super::random::fill_random(&mut b[..10]).is_err() {
        // Ids stay unique without kernel randomness (the counter above orders them); mix in
        // the clock so two processes differ.
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        b[..4].copy_from_slice(&nanos.to_le_bytes());
        b[4..8].copy_from_slice(&std::process::id().to_le_bytes());
    }
    // Clear the top bit so a millisecond's ids have 2^79 increments of room.
    u128::from_le_bytes(b) & (RANDOM_BITS >> 1)
}

fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// True when `s` is a ULID in canonical form (26 characters of uppercase Crockford base32).
pub fn is_canonical_ulid(s: &str) -> bool {
    s.len() == 26 && s.parse::<Ulid>().is_ok_and(|u| u.to_string() == s)
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
    let (h, min, sec) = (sod / 3600, sod % 3600 / 60, sod % 60);
    if !(0..=9999).contains(&y) {
        return format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{sec:02}.{millis:03}Z");
    }
    // Every event gets a timestamp: written digit by digit, as `format!` with seven
    // arguments took a visible share of an append.
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut v: i64| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, y);
    put(5, 2, m);
    put(8, 2, d);
    put(11, 2, h);
    put(14, 2, min);
    put(17, 2, sec);
    put(20, 3, millis);
    out.iter().map(|&b| char::from(b)).collect()
}

/// Milliseconds since the epoch of `2026-11-21T20:58:57.242Z`-style timestamps.
pub fn parse_ts(ts: &str) -> Option<i64> {
    let b = ts.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| ts.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let ms = if b.get(19) == Some(&b'.') {
        let frac: String = ts[20..].chars().take_while(char::is_ascii_digit).collect();
        let f3: String = format!("{frac:0<3}").chars().take(3).collect();
        f3.parse::<i64>().ok()?
    } else {
        0
    };
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + mi) * 60_000 + s * 1000 + ms)
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
        // Outside four-digit years the text is still the same shape as before.
        assert_eq!(
            format_millis(253_402_300_800_000),
            "10000-01-01T00:00:00.000Z"
        );
        assert_eq!(
            format_millis(-62_167_219_200_001),
            "-001-12-31T23:59:59.999Z"
        );
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

    #[test]
    fn a_burst_of_ulids_is_strictly_increasing_and_carries_the_time() {
        let before = unix_millis();
        let ids: Vec<String> = (0..10_000).map(|_| new_ulid()).collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "not strictly increasing"
        );
        let first: Ulid = ids[0].parse().unwrap_or_default();
        assert!(first.timestamp_ms() >= before && first.timestamp_ms() <= unix_millis() + 1);
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_ts("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(parse_ts("1970-01-02T00:00:01.5Z"), Some(86_401_500));
        assert_eq!(parse_ts("2000-03-01T00:00:00Z"), Some(951_868_800_000));
        assert_eq!(parse_ts("nope"), None);
    }
}

/// A source of the current time, injectable where timing decides behaviour (the
/// automations scheduler): [`SystemClock`] in the server, [`ManualClock`] in tests, which
/// never sleep.
pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        i64::try_from(unix_millis()).unwrap_or(i64::MAX)
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Default)]
pub struct ManualClock(std::sync::atomic::AtomicI64);

impl ManualClock {
    pub fn at(ms: i64) -> ManualClock {
        ManualClock(std::sync::atomic::AtomicI64::new(ms))
    }
    pub fn set(&self, ms: i64) {
        self.0.store(ms, std::sync::atomic::Ordering::SeqCst)
    }
    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}
