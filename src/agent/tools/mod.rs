//! The agent's coding tools: their specs per provider profile (engine.md §12.6), argument
//! checking, dispatch, and per-tool truncation for the model. Failures of any kind (unknown
//! tool, bad arguments, refused paths, I/O errors) become error results for the model, never
//! session failures. Must not call models or emit events.

pub mod fs;
pub mod patch;
pub mod search;
pub mod shell;

use std::time::Duration;

use serde_json::{json, Value};

use super::truncate::{self, Limit};
use crate::base::cancel::CancelToken;
use crate::llm::{ToolProfile, ToolSpec};
use crate::sandbox::{Sandbox, SandboxError};

/// Why a tool call failed (reported to the model as an error result).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    #[error("unknown tool `{0}`")]
    Unknown(String),
    #[error("missing required argument `{0}`")]
    Missing(&'static str),
    #[error("bad arguments: {0}")]
    BadArgs(String),
    #[error("{0}")]
    Sandbox(#[from] SandboxError),
    #[error("{0}")]
    Failed(String),
}

/// Shell limits.
#[derive(Debug, Clone, Copy)]
pub struct ShellLimits {
    pub default_timeout: Duration,
    pub max_timeout: Duration,
}

impl Default for ShellLimits {
    fn default() -> Self {
        Self {
            default_timeout: Duration::from_secs(10),
            max_timeout: Duration::from_secs(600),
        }
    }
}

/// What a tool call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The full output (for events).
    pub output: String,
    /// The output the model sees (truncated per tool).
    pub for_model: String,
    pub is_error: bool,
    /// Files written, edited, added, moved or deleted (relative to the sandbox root).
    pub touched: Vec<String>,
}

fn obj_arg<'a>(args: &'a Value, key: &str) -> Option<&'a Value> {
    args.get(key).filter(|v| !v.is_null())
}

/// An optional string argument.
pub fn arg_str<'a>(args: &'a Value, key: &'static str) -> Result<Option<&'a str>, ToolError> {
    match obj_arg(args, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ToolError::BadArgs(format!("`{key}` must be a string"))),
    }
}

/// An optional non-negative integer argument (numeric strings accepted).
pub fn arg_u64(args: &Value, key: &'static str) -> Result<Option<u64>, ToolError> {
    match obj_arg(args, key) {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .map(Some)
            .ok_or_else(|| ToolError::BadArgs(format!("`{key}` must be a non-negative integer"))),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| ToolError::BadArgs(format!("`{key}` must be a non-negative integer"))),
        Some(_) => Err(ToolError::BadArgs(format!(
            "`{key}` must be a non-negative integer"
        ))),
    }
}

/// An optional boolean argument (`"true"`/`"false"` accepted).
pub fn arg_bool(args: &Value, key: &'static str) -> Result<Option<bool>, ToolError> {
    match obj_arg(args, key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s == "true" || s == "false" => Ok(Some(s == "true")),
        Some(_) => Err(ToolError::BadArgs(format!("`{key}` must be a boolean"))),
    }
}

fn spec(name: &str, description: &str, props: Value, required: &[&str]) -> ToolSpec {
    ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        parameters: json!({"type": "object", "properties": props, "required": required}),
    }
}

/// The tools offered for a profile: everyone gets read_file, write_file, shell, grep, glob
/// and list_dir; OpenAI-style models get apply_patch, the others edit_file.
pub fn specs(profile: ToolProfile) -> Vec<ToolSpec> {
    let mut v = vec![
        spec(
            "read_file",
            "Read a text file. Returns numbered lines (like `cat -n`). Use offset/limit for large files.",
            json!({
                "file_path": {"type": "string", "description": "Path relative to the working directory (or absolute inside it)."},
                "offset": {"type": "integer", "description": "1-based line to start at."},
                "limit": {"type": "integer", "description": "Maximum lines to return (default 2000)."}
            }),
            &["file_path"],
        ),
        spec(
            "write_file",
            "Create or overwrite a file with the given content. Parent directories are created.",
            json!({
                "file_path": {"type": "string"},
                "content": {"type": "string"}
            }),
            &["file_path", "content"],
        ),
    ];
    match profile {
        ToolProfile::OpenAi => v.push(spec(
            "apply_patch",
            "Edit files with a patch in this format:\n*** Begin Patch\n*** Add File: path\n+line\n*** Update File: path\n@@ optional line near the change\n context line\n-removed line\n+added line\n*** Delete File: path\n*** End Patch\nContext lines start with a space. Give about 3 lines of context around each change.",
            json!({"patch": {"type": "string", "description": "The whole patch text."}}),
            &["patch"],
        )),
        ToolProfile::Anthropic | ToolProfile::Gemini => v.push(spec(
            "edit_file",
            "Replace text in a file. old_string must match the file exactly (whitespace included) and be unique unless replace_all is true.",
            json!({
                "file_path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."}
            }),
            &["file_path", "old_string", "new_string"],
        )),
    }
    v.extend([
        spec(
            "shell",
            "Run a shell command (sh -c) in the working directory. Returns the exit code, stdout and stderr. Default timeout 10 s, maximum 600 s.",
            json!({
                "command": {"type": "string"},
                "timeout_ms": {"type": "integer", "description": "Timeout in milliseconds."},
                "description": {"type": "string", "description": "What the command does, in a few words."}
            }),
            &["command"],
        ),
        spec(
            "grep",
            "Search file contents with a regular expression. Returns path:line:text.",
            json!({
                "pattern": {"type": "string", "description": "Regular expression (Rust regex syntax)."},
                "path": {"type": "string", "description": "File or directory to search (default: working directory)."},
                "glob_filter": {"type": "string", "description": "Only files matching this glob, e.g. *.rs or src/**/*.ts."},
                "case_insensitive": {"type": "boolean"},
                "max_results": {"type": "integer", "description": "Default 100."}
            }),
            &["pattern"],
        ),
        spec(
            "glob",
            "Find files by path pattern (*, **, ?, [abc], {a,b}), relative to path.",
            json!({
                "pattern": {"type": "string"},
                "path": {"type": "string", "description": "Directory to search (default: working directory)."}
            }),
            &["pattern"],
        ),
        spec(
            "list_dir",
            "List a directory as an indented tree; directories end with /.",
            json!({
                "path": {"type": "string", "description": "Directory (default: working directory)."},
                "depth": {"type": "integer", "description": "Levels to show (default 1)."}
            }),
            &[],
        ),
    ]);
    v
}

/// Runs one tool call. Never fails: every failure is an error result.
pub fn execute(
    name: &str,
    args: &Value,
    sb: &Sandbox,
    limits: &ShellLimits,
    profile: ToolProfile,
    cancel: &CancelToken,
) -> ToolOutput {
    let offered = specs_has(profile, name);
    let res: Result<(String, Vec<String>, bool, Limit), ToolError> = (|| {
        if !offered {
            return Err(ToolError::Unknown(name.to_string()));
        }
        if !args.is_object() {
            return Err(ToolError::BadArgs(
                "arguments must be a JSON object".to_string(),
            ));
        }
        Ok(match name {
            "read_file" => (fs::read_file(sb, args)?, vec![], false, truncate::READ_FILE),
            "write_file" => {
                let (o, p) = fs::write_file(sb, args)?;
                (o, vec![p], false, truncate::WRITE)
            }
            "edit_file" => {
                let (o, p) = fs::edit_file(sb, args)?;
                (o, vec![p], false, truncate::EDIT)
            }
            "apply_patch" => {
                let patch = arg_str(args, "patch")?.ok_or(ToolError::Missing("patch"))?;
                let r = patch::apply_patch(sb, patch)?;
                (r.summary, r.touched, false, truncate::EDIT)
            }
            "shell" => {
                let command = arg_str(args, "command")?.ok_or(ToolError::Missing("command"))?;
                let timeout = arg_u64(args, "timeout_ms")?
                    .map(Duration::from_millis)
                    .unwrap_or(limits.default_timeout)
                    .min(limits.max_timeout)
                    .max(Duration::from_millis(1));
                let o = shell::run(sb, command, timeout, cancel).map_err(ToolError::Failed)?;
                (o.render(timeout), vec![], o.is_error(), truncate::SHELL)
            }
            "grep" => (search::grep(sb, args)?, vec![], false, truncate::GREP),
            "glob" => (search::glob(sb, args)?, vec![], false, truncate::GLOB),
            "list_dir" => (
                search::list_dir(sb, args)?,
                vec![],
                false,
                truncate::LIST_DIR,
            ),
            other => return Err(ToolError::Unknown(other.to_string())),
        })
    })();
    match res {
        Ok((output, touched, is_error, limit)) => ToolOutput {
            for_model: truncate::apply(&output, limit),
            output,
            is_error,
            touched,
        },
        Err(e) => {
            let mut msg = format!("Error: {e}");
            if let ToolError::Unknown(_) = e {
                msg.push_str(". Available tools: ");
                msg.push_str(&tool_names(profile).join(", "));
            }
            ToolOutput {
                for_model: msg.clone(),
                output: msg,
                is_error: true,
                touched: vec![],
            }
        }
    }
}

/// A tool set that replaces the coding tools in a [`crate::agent::Session`] (Ask's read-only
/// analyst tools): what is offered, and how a call runs. A call to anything else is the
/// set's to refuse; nothing outside it runs.
pub trait ToolSet: Send {
    /// The tools offered to the model.
    fn specs(&self) -> Vec<ToolSpec>;
    /// Runs one call. Never fails: every failure or refusal is an error result.
    fn call(&mut self, name: &str, args: &Value, cancel: &CancelToken) -> ToolOutput;
}

/// An error result for a call that was not run, saying `why`.
pub fn refused(why: &str) -> ToolOutput {
    let msg = format!("Error: {why}");
    ToolOutput {
        for_model: msg.clone(),
        output: msg,
        is_error: true,
        touched: vec![],
    }
}

/// The tool names offered for a profile, in [`specs`] order.
pub fn tool_names(profile: ToolProfile) -> [&'static str; 7] {
    let edit = match profile {
        ToolProfile::OpenAi => "apply_patch",
        ToolProfile::Anthropic | ToolProfile::Gemini => "edit_file",
    };
    [
        "read_file",
        "write_file",
        edit,
        "shell",
        "grep",
        "glob",
        "list_dir",
    ]
}

fn specs_has(profile: ToolProfile, name: &str) -> bool {
    tool_names(profile).contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_specs() {
        for p in [
            ToolProfile::Anthropic,
            ToolProfile::OpenAi,
            ToolProfile::Gemini,
        ] {
            let from_specs: Vec<String> = specs(p).into_iter().map(|s| s.name).collect();
            assert_eq!(from_specs, tool_names(p).map(String::from).to_vec());
        }
    }
}
