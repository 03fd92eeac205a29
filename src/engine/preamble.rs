//! Preambles (engine.md 5.3): the run's history as text, put in front of an LLM stage's
//! prompt, at the stage's fidelity: the goal, the completed stages with each node's latest
//! details ([`StageNote`]s from the run state), and the context.
//!
//! Must not touch: which fidelity a stage has (`fidelity`), providers, the store.

use super::checkpoint::RunState;
use super::context::{self, COMMAND_OUTPUT, COMMAND_STDERR};
use super::failure::StageStatus;
use super::outcome::{clip, tail, StageNote, HIGH_TAIL_LINES};
use crate::workflow::attrs::Fidelity;
use crate::workflow::{HandlerKind, Workflow};
use std::fmt::Write as _;

/// Stages listed by `summary:low` and `summary:medium` (the most recent ones).
pub const SUMMARY_LOW_STAGES: usize = 2;
pub const SUMMARY_MEDIUM_STAGES: usize = 5;
/// Output lines shown per stream of a command stage in compact-style entries.
pub const COMPACT_TAIL_LINES: usize = 25;
/// Characters shown of one context value (list form / summary:high table).
pub const CONTEXT_VALUE_CHARS: usize = 1000;
pub const CONTEXT_TABLE_CHARS: usize = 2000;
/// Characters shown of a command's script.
const SCRIPT_CHARS: usize = 2000;

/// Context key holding a manager's preamble inside its child workflow (engine.md 5.3).
pub const PARENT_PREAMBLE: &str = "internal.parent_preamble";
/// What a preamble is built from.
pub struct History<'a> {
    pub wf: &'a Workflow,
    pub goal: &'a str,
    pub run_id: &'a str,
    pub state: &'a RunState,
}

/// How much of one stage an entry shows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Detail {
    /// summary:low: status, notes, failure, handler, script or model.
    Brief,
    /// compact and summary:medium: plus the last 25 output lines, tokens and files.
    Compact,
    /// summary:high: plus 50 output lines and the full response.
    Full,
}

/// The preamble of `mode` (`full` gives the `summary:high` text, see [`StagePlan`](super::fidelity::StagePlan)).
/// Sections: the goal, the run id (all but compact), the completed stages (start and exit
/// skipped, revisits repeated, each with its node's latest details), then the context
/// (compact, summary:medium and summary:high) without engine keys, responses and command
/// output (stage entries show those).
pub fn preamble(mode: Fidelity, h: &History<'_>) -> String {
    let mut out = String::new();
    if !h.goal.trim().is_empty() {
        let _ = writeln!(out, "Goal: {}", h.goal.trim());
    }
    if mode != Fidelity::Compact {
        let _ = writeln!(out, "Run ID: {}", h.run_id);
    }
    let stages = h.stages();
    match mode {
        Fidelity::Truncate => {}
        Fidelity::Compact => {
            if !stages.is_empty() {
                h.list_stages(&mut out, "Completed stages:", &stages, Detail::Compact);
            }
            h.context_list(&mut out);
        }
        Fidelity::SummaryLow | Fidelity::SummaryMedium => {
            let (shown, detail) = if mode == Fidelity::SummaryLow {
                (SUMMARY_LOW_STAGES, Detail::Brief)
            } else {
                (SUMMARY_MEDIUM_STAGES, Detail::Compact)
            };
            let last = &stages[stages.len().saturating_sub(shown)..];
            let title = format!(
                "Completed {} stage{}{}",
                stages.len(),
                plural(stages.len()),
                if last.len() < stages.len() {
                    format!("; the last {}:", last.len())
                } else if stages.is_empty() {
                    ".".to_string()
                } else {
                    ":".to_string()
                }
            );
            h.list_stages(&mut out, &title, last, detail);
            if mode == Fidelity::SummaryMedium {
                h.context_list(&mut out);
            }
        }
        Fidelity::SummaryHigh | Fidelity::Full => {
            let total = (0..h.wf.graph.nodes.len())
                .filter(|&i| !is_bookend(h.wf.handler(i)))
                .count();
            let title = format!(
                "Progress: {} stage{} completed of {total} in the workflow{}",
                stages.len(),
                plural(stages.len()),
                if stages.is_empty() { "." } else { ":" }
            );
            h.list_stages(&mut out, &title, &stages, Detail::Full);
            h.context_table(&mut out);
        }
    }
    out.trim_end().to_string()
}

impl History<'_> {
    /// Completed stage visits in order, without start and exit.
    fn stages(&self) -> Vec<&str> {
        self.state
            .completed
            .iter()
            .map(String::as_str)
            .filter(|id| !is_bookend(self.handler(id)))
            .collect()
    }

    fn handler(&self, id: &str) -> Option<HandlerKind> {
        self.wf.node_index(id).and_then(|i| self.wf.handler(i))
    }

    fn list_stages(&self, out: &mut String, title: &str, ids: &[&str], detail: Detail) {
        let _ = write!(out, "\n{title}\n");
        for id in ids {
            self.entry(out, id, detail);
        }
    }

    fn entry(&self, out: &mut String, id: &str, detail: Detail) {
        let kind = self.handler(id);
        let status = self
            .state
            .outcomes
            .get(id)
            .map_or("unknown", |s: &StageStatus| s.as_str());
        let handler = kind.map_or("unknown", HandlerKind::name);
        let _ = writeln!(out, "- {id} ({handler}): {status}");
        let empty = StageNote::default();
        let note = self.state.notes.get(id).unwrap_or(&empty);
        if let Some(n) = &note.notes {
            field(out, "notes", n);
        }
        if let Some(f) = &note.failure {
            field(out, "failure", f);
        }
        let script = self
            .wf
            .node_index(id)
            .filter(|_| kind == Some(HandlerKind::Command))
            .and_then(|i| self.wf.node_view(i).nonempty("script"));
        if let Some(s) = script {
            field(out, "script", &clip(s, SCRIPT_CHARS));
        }
        if let Some(m) = &note.model {
            if detail == Detail::Brief || note.tokens_in.is_none() {
                field(out, "model", m);
            } else {
                let line = format!(
                    "{m}, tokens {} in / {} out",
                    note.tokens_in.unwrap_or(0),
                    note.tokens_out.unwrap_or(0)
                );
                field(out, "model", &line);
            }
        }
        if detail == Detail::Brief {
            return;
        }
        if !note.files.is_empty() {
            field(out, "files touched", &note.files.join(", "));
        }
        let lines = if detail == Detail::Full {
            HIGH_TAIL_LINES
        } else {
            COMPACT_TAIL_LINES
        };
        for (name, text) in [("stdout", &note.stdout), ("stderr", &note.stderr)] {
            if let Some(t) = text.as_deref().map(|t| tail(t, lines)) {
                if !t.trim().is_empty() {
                    block(out, &format!("{name} (last {lines} lines)"), t);
                }
            }
        }
        if detail == Detail::Full && kind.is_some_and(HandlerKind::is_llm) {
            let key = format!("{}{id}", context::RESPONSE_PREFIX);
            if let Some(r) = self.state.context.get(&key).map(context::value_text) {
                if !r.trim().is_empty() {
                    let _ = writeln!(out, "  response:");
                    for line in r.trim_end().lines() {
                        let _ = writeln!(out, "  > {line}");
                    }
                }
            }
        }
    }

    /// The context keys a preamble shows, sorted, with their text.
    fn shown_context(&self) -> Vec<(&str, String)> {
        let mut keys: Vec<(&str, String)> = self
            .state
            .context
            .iter()
            .filter(|(k, _)| shows_in_preamble(k))
            .map(|(k, v)| (k.as_str(), context::value_text(v)))
            .filter(|(_, v)| !v.trim().is_empty())
            .collect();
        keys.sort_by(|a, b| a.0.cmp(b.0));
        keys
    }

    fn context_list(&self, out: &mut String) {
        let keys = self.shown_context();
        if keys.is_empty() {
            return;
        }
        out.push_str("\nContext:\n");
        for (k, v) in keys {
            field(out, k, &clip(&v, CONTEXT_VALUE_CHARS));
        }
    }

    fn context_table(&self, out: &mut String) {
        let keys = self.shown_context();
        if keys.is_empty() {
            return;
        }
        out.push_str("\nContext:\n| key | value |\n|---|---|\n");
        for (k, v) in keys {
            let cell = clip(&v, CONTEXT_TABLE_CHARS)
                .replace('|', "\\|")
                .replace('\n', "<br>");
            let _ = writeln!(out, "| {k} | {cell} |");
        }
    }
}

/// Context keys left out of every preamble: engine keys, responses (the stage entries
/// show them under summary:high), and command output (entries show its tail).
pub fn shows_in_preamble(key: &str) -> bool {
    !(context::is_engine_key(key)
        || key.starts_with(context::RESPONSE_PREFIX)
        || key == context::LAST_RESPONSE
        || key == COMMAND_OUTPUT
        || key == COMMAND_STDERR)
}

fn is_bookend(kind: Option<HandlerKind>) -> bool {
    matches!(kind, Some(HandlerKind::Start | HandlerKind::Exit))
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `  name: value`, continuation lines indented under it.
fn field(out: &mut String, name: &str, value: &str) {
    let mut lines = value.trim_end().lines();
    let _ = writeln!(out, "  {name}: {}", lines.next().unwrap_or(""));
    for line in lines {
        let _ = writeln!(out, "    {line}");
    }
}

/// `  name:` then the text indented.
fn block(out: &mut String, name: &str, text: &str) {
    let _ = writeln!(out, "  {name}:");
    for line in text.trim_end().lines() {
        let _ = writeln!(out, "    {line}");
    }
}

/// The preamble text of a stage under `fidelity`, or `None` when there is nothing to say.
pub fn preamble_for(fidelity: Fidelity, h: &History<'_>, parent: Option<&str>) -> Option<String> {
    let own = preamble(fidelity, h);
    let parts: Vec<&str> = [parent.unwrap_or(""), own.as_str()]
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::outcome::{Failure, StageNote, StageOutcome, TAIL_BYTES};
    use serde_json::json;

    use crate::engine::tests::workflow as wf;

    /// plan (agent) → build (command, 60 output lines) → review (prompt, failed) → plan again.
    fn history() -> (Workflow, RunState) {
        let w = wf(r#"digraph f {
            goal="Ship the parser"
            start [shape=Mdiamond]; exit [shape=Msquare]
            plan [prompt="Plan"]
            build [shape=parallelogram, script="make all"]
            review [shape=tab, prompt="Review"]
            later [prompt="Later"]
            start -> plan -> build -> review -> plan
            review -> later -> exit
        }"#);
        let mut st = RunState::default();
        crate::engine::context::seed(&mut st.context, &w, "run-1", "/tmp/w");
        st.complete("start", StageStatus::Succeeded, 0);

        let mut plan = StageOutcome::succeeded();
        plan.usage = Some(json!({"model": "claude-sonnet-4-6",
                                 "tokens": {"input": 1200, "output": 340}}));
        plan.files_touched = vec!["src/lib.rs".into()];
        plan.write(
            "response.plan",
            "Step 1: write the lexer.\nStep 2: the parser.",
        );
        st.complete("plan", StageStatus::Succeeded, 0);
        st.note("plan", StageNote::of(HandlerKind::Agent, &plan));
        for (k, v) in &plan.context_updates {
            st.set(k.clone(), v.clone());
        }

        let mut build = StageOutcome::succeeded();
        let out: String = (1..=60).map(|i| format!("out line {i}\n")).collect();
        build.write(COMMAND_OUTPUT, out);
        build.write(COMMAND_STDERR, "warning: unused\n");
        st.complete("build", StageStatus::Succeeded, 0);
        st.note("build", StageNote::of(HandlerKind::Command, &build));
        for (k, v) in &build.context_updates {
            st.set(k.clone(), v.clone());
        }

        let review = StageOutcome::failed(Failure::deterministic("tests are missing"));
        st.complete("review", StageStatus::Failed, 0);
        st.note("review", StageNote::of(HandlerKind::Prompt, &review));
        st.complete("plan", StageStatus::Succeeded, 0);

        st.set("ticket", json!("PARSE-7"));
        st.set("blank", json!("  "));
        st.set("internal.thread_id", json!("start"));
        st.set("outcome", json!("succeeded"));
        st.set("last_response", json!("Step 1"));
        (w, st)
    }

    fn text(mode: Fidelity) -> String {
        let (w, st) = history();
        let h = History {
            wf: &w,
            goal: "Ship the parser",
            run_id: "run-1",
            state: &st,
        };
        preamble(mode, &h)
    }

    #[test]
    fn truncate_is_goal_and_run_id_only() {
        let t = text(Fidelity::Truncate);
        assert_eq!(t, "Goal: Ship the parser\nRun ID: run-1");
    }

    #[test]
    fn compact_lists_every_stage_with_its_details_then_the_context() {
        let t = text(Fidelity::Compact);
        assert!(t.starts_with("Goal: Ship the parser\n"), "{t}");
        assert!(!t.contains("run-1"), "compact has no run id: {t}");
        // Every visit in order, start skipped, the revisit repeated.
        let order: Vec<&str> = t.lines().filter(|l| l.starts_with("- ")).collect();
        assert_eq!(
            order,
            [
                "- plan (agent): succeeded",
                "- build (command): succeeded",
                "- review (prompt): failed",
                "- plan (agent): succeeded"
            ]
        );
        assert!(
            t.contains("model: claude-sonnet-4-6, tokens 1200 in / 340 out"),
            "{t}"
        );
        assert!(t.contains("files touched: src/lib.rs"), "{t}");
        assert!(t.contains("script: make all"), "{t}");
        assert!(t.contains("failure: tests are missing"), "{t}");
        // The last 25 lines of stdout: 36..=60.
        assert!(
            t.contains("out line 36\n") && t.contains("out line 60"),
            "{t}"
        );
        assert!(!t.contains("out line 35\n"), "{t}");
        assert!(t.contains("warning: unused"), "{t}");
        // Compact does not quote responses.
        assert!(!t.contains("Step 2"), "{t}");
        // Context: user keys only, sorted; engine keys, responses, command output and
        // blank values left out.
        let ctx = t.split("\nContext:\n").nth(1).unwrap_or("");
        assert_eq!(ctx, "  ticket: PARSE-7", "{t}");
    }

    #[test]
    fn summary_low_shows_the_last_two_stages_briefly_and_no_context() {
        let t = text(Fidelity::SummaryLow);
        assert!(t.contains("Goal: Ship the parser\nRun ID: run-1\n"), "{t}");
        assert!(t.contains("Completed 4 stages; the last 2:"), "{t}");
        let order: Vec<&str> = t.lines().filter(|l| l.starts_with("- ")).collect();
        assert_eq!(
            order,
            ["- review (prompt): failed", "- plan (agent): succeeded"]
        );
        assert!(t.contains("failure: tests are missing"), "{t}");
        assert!(t.contains("model: claude-sonnet-4-6"), "{t}");
        assert!(!t.contains("tokens"), "{t}");
        assert!(!t.contains("files touched"), "{t}");
        assert!(!t.contains("Context:"), "{t}");
    }

    #[test]
    fn summary_medium_shows_the_last_five_with_details_and_the_context() {
        let t = text(Fidelity::SummaryMedium);
        assert!(t.contains("Run ID: run-1"), "{t}");
        assert!(
            t.contains("Completed 4 stages:"),
            "all four fit in five: {t}"
        );
        assert_eq!(t.lines().filter(|l| l.starts_with("- ")).count(), 4);
        assert!(
            t.contains("out line 36\n") && !t.contains("out line 35\n"),
            "{t}"
        );
        assert!(t.contains("tokens 1200 in / 340 out"), "{t}");
        assert!(t.contains("\nContext:\n  ticket: PARSE-7"), "{t}");
    }

    #[test]
    fn summary_high_shows_everything_with_responses_and_a_context_table() {
        let t = text(Fidelity::SummaryHigh);
        assert!(t.contains("Run ID: run-1"), "{t}");
        assert!(
            t.contains("Progress: 4 stages completed of 4 in the workflow:"),
            "{t}"
        );
        // 50 lines of output: 11..=60.
        assert!(
            t.contains("out line 11\n") && !t.contains("out line 10\n"),
            "{t}"
        );
        assert!(
            t.contains("  > Step 1: write the lexer.\n  > Step 2: the parser."),
            "{t}"
        );
        assert!(
            t.contains("| key | value |\n|---|---|\n| ticket | PARSE-7 |"),
            "{t}"
        );
        // `full` falls back to the same text.
        assert_eq!(text(Fidelity::Full), t);
    }

    #[test]
    fn preambles_grow_with_the_mode() {
        let len = |m| text(m).len();
        assert!(len(Fidelity::Truncate) < len(Fidelity::SummaryLow));
        assert!(len(Fidelity::SummaryLow) < len(Fidelity::SummaryMedium));
        assert!(len(Fidelity::SummaryMedium) < len(Fidelity::SummaryHigh));
        assert!(len(Fidelity::Compact) < len(Fidelity::SummaryHigh));
    }

    #[test]
    fn a_parent_preamble_comes_first() {
        let (w, st) = history();
        let h = History {
            wf: &w,
            goal: "",
            run_id: "run-1",
            state: &st,
        };
        let p = preamble_for(Fidelity::Truncate, &h, Some("Parent says hi"));
        assert_eq!(p.as_deref(), Some("Parent says hi\n\nRun ID: run-1"));
        let empty = RunState::default();
        let h = History { state: &empty, ..h };
        assert_eq!(
            preamble_for(Fidelity::Compact, &h, None),
            None,
            "nothing to say"
        );
    }

    #[test]
    fn long_values_are_clipped_and_tails_bounded() {
        assert_eq!(clip("abcdef", 3), "abc… [3 more characters]");
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("a\nb", 5), "a\nb");
        let long = "é".repeat(TAIL_BYTES);
        let t = tail(&long, 1);
        assert!(t.len() <= TAIL_BYTES && t.chars().all(|c| c == 'é'));
    }

    #[test]
    fn notes_keep_what_the_preamble_needs() {
        let mut o = StageOutcome::failed(Failure::deterministic("exit code 2"));
        o.write(COMMAND_OUTPUT, "x\n".repeat(80));
        let n = StageNote::of(HandlerKind::Command, &o);
        assert_eq!(n.failure.as_deref(), Some("exit code 2"));
        assert_eq!(
            n.stdout.as_deref().map(|s| s.lines().count()),
            Some(HIGH_TAIL_LINES)
        );
        // Only commands have output; an empty outcome leaves nothing to keep.
        assert!(StageNote::of(HandlerKind::Agent, &StageOutcome::succeeded()).is_empty());
        let n = StageNote::of(HandlerKind::Agent, &o);
        assert_eq!(n.stdout, None);
    }
}
