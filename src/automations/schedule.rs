//! Schedules: a five-field cron expression in an IANA time zone, and the next time it falls
//! due after a given instant.
//!
//! Parsing and stepping are croner's (OCPS rules: a fixed-time schedule whose local time
//! falls in a daylight-saving gap fires at the first valid minute after it; in a repeated
//! hour it fires once; interval schedules (`*/15 * * * *`) step through the real instants).
//! Time zones are chrono-tz's compiled-in IANA database. Only five fields are accepted (no
//! seconds, no year, no `@daily` nicknames), so an expression means the same here as in
//! crontab.
//!
//! Owns: [`Schedule`]. Must not touch: storage or firing.

use chrono::{TimeZone, Utc};
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

/// A parsed schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    tz: chrono_tz::Tz,
}

/// Why an expression or zone was refused, and which of the two.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleError {
    Expression(String),
    Timezone(String),
}

impl Schedule {
    /// Parses `expression` (five fields: minute hour day-of-month month day-of-week) in
    /// `timezone` (an IANA name such as `Europe/Berlin`, or `UTC`).
    pub fn parse(expression: &str, timezone: &str) -> Result<Schedule, ScheduleError> {
        let fields = expression.split_whitespace().count();
        if expression.trim_start().starts_with('@') {
            return Err(ScheduleError::Expression(format!(
                "`{expression}` is a nickname; write the five fields (minute hour day-of-month month day-of-week)"
            )));
        }
        if fields != 5 {
            return Err(ScheduleError::Expression(format!(
                "`{expression}` has {fields} field{}; a schedule has exactly five (minute hour day-of-month month day-of-week), no seconds or year",
                if fields == 1 { "" } else { "s" }
            )));
        }
        let parser = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build();
        let cron = parser.parse(expression).map_err(|e| {
            ScheduleError::Expression(format!(
                "`{expression}` is not a valid cron expression: {e}"
            ))
        })?;
        let tz: chrono_tz::Tz = timezone.parse().map_err(|_| {
            ScheduleError::Timezone(format!(
                "`{timezone}` is not an IANA time zone (e.g. UTC, Europe/Berlin, America/New_York)"
            ))
        })?;
        let s = Schedule { cron, tz };
        // A pattern that never matches (31 February) is refused now, not at the first fire.
        if s.next_after(0).is_none() {
            return Err(ScheduleError::Expression(format!(
                "`{expression}` never falls due"
            )));
        }
        Ok(s)
    }

    /// Whether `timezone` is an IANA time zone (the message says why not).
    pub fn check_timezone(timezone: &str) -> Result<(), String> {
        timezone.parse::<chrono_tz::Tz>().map(|_| ()).map_err(|_| {
            format!(
                "`{timezone}` is not an IANA time zone (e.g. UTC, Europe/Berlin, America/New_York)"
            )
        })
    }

    /// The first due instant strictly after `after_ms` (Unix milliseconds), in Unix
    /// milliseconds; `None` if there is none before the year 5000.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let start = Utc
            .timestamp_millis_opt(after_ms)
            .single()?
            .with_timezone(&self.tz);
        let next = self.cron.find_next_occurrence(&start, false).ok()?;
        Some(next.timestamp_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(s)
            .unwrap()
            .timestamp_millis()
    }

    fn iso(ms: i64) -> String {
        Utc.timestamp_millis_opt(ms)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }

    fn next(expr: &str, tz: &str, after: &str) -> String {
        iso(Schedule::parse(expr, tz)
            .unwrap()
            .next_after(ms(after))
            .unwrap())
    }

    #[test]
    fn refuses_what_is_not_five_fields_in_a_known_zone() {
        assert!(matches!(
            Schedule::parse("0 0 2 * * 2", "UTC"),
            Err(ScheduleError::Expression(m)) if m.contains("6 fields")
        ));
        assert!(matches!(
            Schedule::parse("@daily", "UTC"),
            Err(ScheduleError::Expression(_))
        ));
        assert!(matches!(
            Schedule::parse("61 * * * *", "UTC"),
            Err(ScheduleError::Expression(_))
        ));
        assert!(matches!(
            Schedule::parse("0 0 31 2 *", "UTC"),
            Err(ScheduleError::Expression(m)) if m.contains("never")
        ));
        assert!(matches!(
            Schedule::parse("* * * * *", "Mars/Olympus"),
            Err(ScheduleError::Timezone(_))
        ));
    }

    #[test]
    fn steps_in_its_zone() {
        // Tuesdays at 02:00 in Berlin (UTC+1 in winter).
        assert_eq!(
            next("0 2 * * 2", "Europe/Berlin", "2026-01-05T00:00:00Z"),
            "2026-01-06T01:00:00Z"
        );
        assert_eq!(
            next("*/15 * * * *", "UTC", "2026-01-05T00:07:00Z"),
            "2026-01-05T00:15:00Z"
        );
    }

    #[test]
    fn daylight_saving_changes() {
        // Berlin springs forward on 2026-03-29: 02:00-03:00 local does not exist. A 02:30
        // daily schedule fires once that day, at the first valid time after the gap.
        let spring = next("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z");
        assert_eq!(spring, "2026-03-29T01:00:00Z", "03:00 CEST");
        assert_eq!(
            next("30 2 * * *", "Europe/Berlin", "2026-03-29T01:00:00Z"),
            "2026-03-30T00:30:00Z",
            "then 02:30 CEST the next day"
        );
        // It falls back on 2026-10-25: 02:00-03:00 local happens twice. 02:30 fires once.
        let first = ms(&next("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z"));
        assert_eq!(iso(first), "2026-10-25T00:30:00Z", "02:30 CEST");
        assert_eq!(
            next("30 2 * * *", "Europe/Berlin", &iso(first)),
            "2026-10-26T01:30:00Z",
            "not again at 02:30 CET the same night"
        );
        // Hourly schedules keep stepping through real hours across the change.
        assert_eq!(
            next("0 * * * *", "Europe/Berlin", "2026-03-29T00:30:00Z"),
            "2026-03-29T01:00:00Z"
        );
    }
}
