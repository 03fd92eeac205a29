//! Live progress of `svc run --format text` on stderr: one line per stage start and finish
//! (with duration), the tail of each command's output, retries, routing decisions,
//! questions, restarts and parallel branches,
//! read from the store's post-commit event feed.
//! Must not touch: the run (it only reads events).

use crate::base::event_kind;
use crate::store::{Event, RunStore};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub struct Printer {
    done: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Printer {
    pub fn start(store: &dyn RunStore, run_id: &str) -> Printer {
        let sub = store.hub().subscribe(run_id);
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let thread = std::thread::spawn(move || loop {
            match sub.recv_timeout(Duration::from_millis(50)) {
                Ok(e) => {
                    if let Some(line) = describe(&e) {
                        eprintln!("{line}");
                    }
                    if matches!(
                        e.event.as_str(),
                        event_kind::RUN_COMPLETED | event_kind::RUN_FAILED | event_kind::RUN_DEAD
                    ) {
                        break;
                    }
                }
                Err(_) if flag.load(Ordering::SeqCst) => break,
                Err(_) => {}
            }
        });
        Printer { done, thread }
    }

    /// Waits for the printer to show the run's last event.
    pub fn finish(self) {
        self.done.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
    }
}

fn text<'a>(p: &'a Value, key: &str) -> &'a str {
    p.get(key).and_then(Value::as_str).unwrap_or("")
}

fn num(p: &Value, key: &str) -> u64 {
    p.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn secs(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

/// Lines of a command's output shown as its stage finishes: at most this many per stream
/// (the last ones: a failing build says why at the end)...
const OUTPUT_LINES: usize = 10;
/// ...each cut to this many characters.
const OUTPUT_LINE_CHARS: usize = 200;

/// A command stage's stdout and stderr, as the tail of each (`│` and `stderr│` gutters), or
/// None when both are empty. Output moved to a blob (over 100 KB) is named, not fetched.
fn command_output(p: &Value, branch: &str) -> Option<String> {
    let mut lines = Vec::new();
    for (key, gutter) in [("stdout", "│"), ("stderr", "stderr│")] {
        let Some(out) = p.get(key).and_then(Value::as_str) else {
            continue;
        };
        if crate::store::parse_blob_ref(out).is_some() {
            let bytes = num(p, &format!("{key}_bytes"));
            lines.push(format!(
                "{branch}  {gutter} ({bytes} bytes of {key}: `svc events` shows them)"
            ));
            continue;
        }
        let all: Vec<&str> = out.trim_end_matches('\n').lines().collect();
        if all.is_empty() || (all.len() == 1 && all[0].is_empty()) {
            continue;
        }
        let skipped = all.len().saturating_sub(OUTPUT_LINES);
        if skipped > 0 {
            lines.push(format!("{branch}  {gutter} … {skipped} earlier lines"));
        }
        for line in &all[skipped..] {
            lines.push(format!(
                "{branch}  {gutter} {}",
                cut(line, OUTPUT_LINE_CHARS)
            ));
        }
    }
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// `line` cut to `max` characters, with an ellipsis when cut.
fn cut(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// The progress line of an event, if it has one.
pub fn describe(e: &Event) -> Option<String> {
    let p = &e.properties;
    let node = e.node_id.as_deref().unwrap_or("");
    let branch = e
        .parallel_branch_id
        .as_deref()
        .map(|b| format!("  [{b}] "))
        .unwrap_or_default();
    let line = match e.event.as_str() {
        event_kind::STAGE_STARTED => {
            let attempt = num(p, "attempt");
            let of = num(p, "max_attempts");
            let handler = text(p, "handler_type");
            if attempt > 1 {
                format!("▸ {node} ({handler}) attempt {attempt}/{of}")
            } else {
                format!("▸ {node} ({handler})")
            }
        }
        event_kind::STAGE_COMPLETED => {
            let mut l = format!(
                "✓ {node} {} in {}",
                text(p, "status"),
                secs(num(p, "duration_ms"))
            );
            if let Some(n) = p.get("notes").and_then(Value::as_str) {
                l.push_str(&format!(" ({n})"));
            }
            l
        }
        event_kind::STAGE_FAILED => {
            let msg = p
                .pointer("/failure/message")
                .and_then(Value::as_str)
                .unwrap_or("");
            let retry = if p.get("will_retry") == Some(&Value::Bool(true)) {
                " (will retry)"
            } else {
                ""
            };
            format!(
                "✗ {node} failed in {}{retry}: {msg}",
                secs(num(p, "duration_ms"))
            )
        }
        event_kind::STAGE_RETRYING => format!(
            "↻ {node} retrying in {} (attempt {}/{})",
            secs(num(p, "delay_ms")),
            num(p, "attempt"),
            num(p, "max_attempts")
        ),
        event_kind::EDGE_SELECTED => {
            let mut why = text(p, "reason").to_string();
            if let Some(c) = p.get("condition").and_then(Value::as_str) {
                why = format!("condition {c}");
            } else if let Some(l) = p.get("label").and_then(Value::as_str) {
                why = format!("{why}, label \"{l}\"");
            }
            format!(
                "  {} → {} ({why})",
                text(p, "from_node"),
                text(p, "to_node")
            )
        }
        event_kind::LOOP_RESTART => format!(
            "⟲ restart from {} to {}",
            text(p, "from_node"),
            text(p, "to_node")
        ),
        event_kind::INTERVIEW_TIMEOUT => format!("? {node}: question timed out"),
        event_kind::PARALLEL_STARTED => format!(
            "⇉ {node}: {} branches (max {} at once)",
            num(p, "branch_count"),
            num(p, "max_parallel")
        ),
        event_kind::PARALLEL_BRANCH_COMPLETED => {
            format!("  branch {} {}", text(p, "branch"), text(p, "status"))
        }
        event_kind::WATCHDOG_TIMEOUT => {
            "! stall watchdog: no activity, cancelling the run".to_string()
        }
        event_kind::COMMAND_COMPLETED => return command_output(p, &branch),
        _ => return None,
    };
    Some(format!("{branch}{line}"))
}
