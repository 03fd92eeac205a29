//! Ask's tools: read-only, bound to one run. File tools (`read_file`, `grep`, `glob`,
//! `list_dir`) read the run's workspace inside its sandbox directory (path resolution
//! confined by [`Sandbox`]); run tools (`run_events`, `run_stages`, `run_diff`) read that
//! run's stored events, stage visits and file changes. A `run_id` argument naming another
//! run, a write, a shell command or any tool not listed is refused, and the refusal is the
//! tool's result, so the model reads it. Nothing here starts a process or opens a socket.
//!
//! Owns: the tool specs and their scoping. Must not touch: the workspace (read only), other
//! runs, the network, or a removed sandbox (it is never made again to be read).

use crate::agent::tools::{self, arg_str, arg_u64, ToolOutput, ToolSet};
use crate::agent::truncate;
use crate::base::cancel::CancelToken;
use crate::base::event_kind;
use crate::base::redact::Redact;
use crate::llm::ToolSpec;
use crate::sandbox::Sandbox;
use crate::store::{RunStore, StoreError};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;

/// The names offered, in spec order.
pub const NAMES: [&str; 7] = [
    "read_file",
    "grep",
    "glob",
    "list_dir",
    "run_events",
    "run_stages",
    "run_diff",
];

/// Events one `run_events` call returns at most.
const MAX_EVENTS: u64 = 200;

/// The read-only tools of one Ask session.
pub struct AskTools {
    run_id: String,
    store: Arc<dyn RunStore>,
    /// The live workspace; `None` when retention removed the sandbox.
    workspace: Option<Sandbox>,
    /// The state directory (the workspace's git history for `run_diff`).
    state_dir: PathBuf,
    redactor: Arc<dyn Redact>,
}

impl AskTools {
    pub fn new(
        run_id: &str,
        store: Arc<dyn RunStore>,
        workspace: Option<Sandbox>,
        state_dir: PathBuf,
        redactor: Arc<dyn Redact>,
    ) -> AskTools {
        AskTools {
            run_id: run_id.to_string(),
            store,
            workspace,
            state_dir,
            redactor,
        }
    }

    /// Refuses a `run_id` argument that names another run.
    fn scoped(&self, args: &Value) -> Result<(), String> {
        match arg_str(args, "run_id") {
            Ok(None) => Ok(()),
            Ok(Some(id)) if id == self.run_id => Ok(()),
            Ok(Some(id)) => Err(format!(
                "refused: this session may read run {} only; run {id} is out of its scope",
                self.run_id
            )),
            Err(e) => Err(e.to_string()),
        }
    }

    fn workspace(&self) -> Result<&Sandbox, String> {
        self.workspace.as_ref().ok_or_else(|| {
            "the run's sandbox was removed (retention), so its files cannot be read; answer \
             from run_events, run_stages and run_diff (the stored record) and say so"
                .to_string()
        })
    }

    fn events(&self, args: &Value) -> Result<String, String> {
        let since = arg_u64(args, "since_seq")
            .map_err(|e| e.to_string())?
            .unwrap_or(1)
            .max(1);
        let limit = arg_u64(args, "limit")
            .map_err(|e| e.to_string())?
            .unwrap_or(100)
            .clamp(1, MAX_EVENTS) as usize;
        let kind = arg_str(args, "kind").map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        let mut next = since;
        while out.len() < limit {
            let page = self
                .store
                .events(&self.run_id, next, 500)
                .map_err(store_err)?;
            let n = page.len();
            for e in page {
                next = e.seq + 1;
                // Ask's own conversation is not evidence about the run.
                if e.event.starts_with(super::events::PREFIX)
                    || kind.is_some_and(|k| !e.event.starts_with(k))
                {
                    continue;
                }
                out.push(json!({"seq": e.seq, "ts": e.ts, "event": e.event,
                                "node_id": e.node_id, "properties": e.properties}));
                if out.len() == limit {
                    break;
                }
            }
            if n < 500 {
                break;
            }
        }
        let lines: Vec<String> = out.iter().map(Value::to_string).collect();
        Ok(if lines.is_empty() {
            format!("No events from seq {since}.")
        } else {
            lines.join("\n")
        })
    }

    fn stages(&self) -> Result<String, String> {
        let events = crate::stages::run_events(&*self.store, &self.run_id).map_err(store_err)?;
        let visits = crate::stages::collect(&events);
        if visits.is_empty() {
            return Ok("No stage has run.".into());
        }
        Ok(visits
            .iter()
            .map(|v| {
                let mut s = v.status_json();
                s["response"] = json!(v.response);
                s["command"] = v.command.clone().unwrap_or(Value::Null);
                s.to_string()
            })
            .collect::<Vec<_>>()
            .join("\n"))
    }

    fn diff(&self, args: &Value) -> Result<String, String> {
        let path = arg_str(args, "path").map_err(|e| e.to_string())?;
        let row = self
            .store
            .get_run(&self.run_id)
            .map_err(store_err)?
            .ok_or_else(|| format!("run {} no longer exists", self.run_id))?;
        let live = self
            .workspace
            .as_ref()
            .and_then(|_| crate::sandbox::lifecycle::workspace_git(&row, &self.state_dir));
        let Some((git, base)) = live else {
            return self.stored_diff(&row);
        };
        let changes = crate::workspace::diff::changes(&git, &base, "HEAD")
            .map_err(|e| format!("cannot read the changes: {e}"))?;
        match path {
            None => Ok(if changes.is_empty() {
                "No files changed.".into()
            } else {
                changes
                    .iter()
                    .map(|c| {
                        format!(
                            "{:?} {} (+{} -{})",
                            c.kind, c.path, c.additions, c.deletions
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            }),
            Some(p) => {
                let c = changes
                    .iter()
                    .find(|c| c.path == p)
                    .ok_or_else(|| format!("{p} did not change in this run"))?;
                let blobs = [c.old_blob.as_deref(), c.new_blob.as_deref()];
                let texts = crate::workspace::diff::contents(&git, &blobs)
                    .map_err(|e| format!("cannot read {p}: {e}"))?;
                Ok(format!(
                    "--- {p} (before the run)\n{}\n+++ {p} (now)\n{}",
                    texts.first().map_or("", String::as_str),
                    texts.get(1).map_or("", String::as_str)
                ))
            }
        }
    }

    /// The changes as the events recorded them (the workspace is gone).
    fn stored_diff(&self, row: &crate::store::RunRow) -> Result<String, String> {
        let events = self
            .store
            .events(&self.run_id, 1, usize::MAX)
            .map_err(store_err)?;
        let mut out = vec![format!(
            "The run's sandbox was removed; this is the stored record. Summary: {}",
            row.diff.clone().unwrap_or(Value::Null)
        )];
        for e in events
            .iter()
            .filter(|e| e.event == event_kind::WORKSPACE_CHECKPOINT)
        {
            out.push(format!(
                "after stage {}: {}",
                e.properties.get("stage").cloned().unwrap_or(Value::Null),
                e.properties
                    .get("stage_diff")
                    .cloned()
                    .unwrap_or(Value::Null)
            ));
        }
        Ok(out.join("\n"))
    }
}

fn store_err(e: StoreError) -> String {
    format!("cannot read the run's record: {e}")
}

fn spec(name: &str, description: &str, props: Value, required: &[&str]) -> ToolSpec {
    ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        parameters: json!({"type": "object", "properties": props, "required": required}),
    }
}

impl ToolSet for AskTools {
    fn specs(&self) -> Vec<ToolSpec> {
        let run_id =
            json!({"type": "string", "description": "Must be this session's run (the default)."});
        let coding = tools::specs(crate::llm::ToolProfile::Anthropic);
        let mut v: Vec<ToolSpec> = coding
            .into_iter()
            .filter(|s| NAMES.contains(&s.name.as_str()))
            .collect();
        v.extend([
            spec(
                "run_events",
                "Read the run's event log (JSON lines: seq, ts, event, node_id, properties), oldest first.",
                json!({"run_id": run_id, "since_seq": {"type": "integer", "description": "First seq (default 1)."},
                       "limit": {"type": "integer", "description": "At most this many (default 100, max 200)."},
                       "kind": {"type": "string", "description": "Only events whose kind starts with this, e.g. stage.failed or command."}}),
                &[],
            ),
            spec(
                "run_stages",
                "The run's stage visits: node, outcome, failure reason, attempts, duration, response, last command output.",
                json!({"run_id": run_id}),
                &[],
            ),
            spec(
                "run_diff",
                "Files the run changed (kind, path, +additions -deletions); with path, that file before the run and now.",
                json!({"run_id": run_id, "path": {"type": "string"}}),
                &[],
            ),
        ]);
        v
    }

    fn call(&mut self, name: &str, args: &Value, _cancel: &CancelToken) -> ToolOutput {
        let res: Result<(String, truncate::Limit), String> = if !NAMES.contains(&name) {
            Err(format!(
                "refused: Ask is read-only and bound to run {}: `{name}` is not available (no \
                 writes, commands or network). Available tools: {}",
                self.run_id,
                NAMES.join(", ")
            ))
        } else if !args.is_object() {
            Err("bad arguments: arguments must be a JSON object".into())
        } else {
            self.scoped(args).and_then(|()| match name {
                "read_file" => self.workspace().and_then(|sb| {
                    tools::fs::read_file(sb, args)
                        .map(|o| (o, truncate::READ_FILE))
                        .map_err(|e| e.to_string())
                }),
                "grep" => self.workspace().and_then(|sb| {
                    tools::search::grep(sb, args)
                        .map(|o| (o, truncate::GREP))
                        .map_err(|e| e.to_string())
                }),
                "glob" => self.workspace().and_then(|sb| {
                    tools::search::glob(sb, args)
                        .map(|o| (o, truncate::GLOB))
                        .map_err(|e| e.to_string())
                }),
                "list_dir" => self.workspace().and_then(|sb| {
                    tools::search::list_dir(sb, args)
                        .map(|o| (o, truncate::LIST_DIR))
                        .map_err(|e| e.to_string())
                }),
                "run_events" => self.events(args).map(|o| (o, truncate::READ_FILE)),
                "run_stages" => self.stages().map(|o| (o, truncate::READ_FILE)),
                _ => self.diff(args).map(|o| (o, truncate::READ_FILE)),
            })
        };
        match res {
            Ok((out, limit)) => {
                // Workspace files and stored output may hold a secret a stage wrote.
                let out = self.redactor.redact(&out).into_owned();
                ToolOutput {
                    for_model: truncate::apply(&out, limit),
                    output: out,
                    is_error: false,
                    touched: vec![],
                }
            }
            Err(why) => tools::refused(&why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::redact::NoRedaction;
    use crate::store::{EventDraft, MemoryStore};

    fn tools_over(dir: &std::path::Path) -> (AskTools, String) {
        let store = Arc::new(MemoryStore::new());
        let row = crate::store::test_support::new_run(&*store, "t");
        store
            .append(
                &row.id,
                EventDraft::new("stage.failed", json!({"failure_reason": "boom"})),
            )
            .unwrap();
        let sb = Sandbox::new(dir).unwrap();
        (
            AskTools::new(
                &row.id,
                store,
                Some(sb),
                dir.to_path_buf(),
                Arc::new(NoRedaction),
            ),
            row.id,
        )
    }

    #[test]
    fn reads_are_scoped_and_writes_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
        let (mut t, run) = tools_over(dir.path());
        let c = CancelToken::new();
        let r = t.call("read_file", &json!({"file_path": "a.txt"}), &c);
        assert!(!r.is_error && r.output.contains("hello"), "{r:?}");
        let r = t.call("run_events", &json!({"kind": "stage."}), &c);
        assert!(!r.is_error && r.output.contains("boom"), "{r:?}");
        let r = t.call("run_events", &json!({"run_id": run}), &c);
        assert!(!r.is_error, "{r:?}");
        // Another run's events: refused, and the refusal is the result.
        let r = t.call(
            "run_events",
            &json!({"run_id": "01AAAAAAAAAAAAAAAAAAAAAAAA"}),
            &c,
        );
        assert!(r.is_error && r.output.contains("out of its scope"), "{r:?}");
        // Writes and commands are not tools here.
        for (name, args) in [
            ("write_file", json!({"file_path": "b.txt", "content": "x"})),
            ("shell", json!({"command": "touch b.txt"})),
        ] {
            let r = t.call(name, &args, &c);
            assert!(r.is_error && r.output.contains("read-only"), "{r:?}");
        }
        assert!(!dir.path().join("b.txt").exists());
        // Paths outside the workspace stay out.
        let r = t.call("read_file", &json!({"file_path": "/etc/passwd"}), &c);
        assert!(r.is_error, "{r:?}");
        let names: Vec<String> = t.specs().into_iter().map(|s| s.name).collect();
        assert_eq!(names, NAMES.map(String::from).to_vec());
    }
}
