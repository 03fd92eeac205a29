//! How an agent node with `backend=acp` starts its agent (engine.md §12.7): exactly one of
//! `acp.command` (a shell command line) or `acp.config` (an ACP agent description: a JSON
//! file named by a path relative to the workflow file, with or without a leading `@`, or
//! the JSON inline), resolved into an [`AcpLaunch`].
//!
//! Owns: reading and checking these attributes, with the messages validation and the engine
//! share. Must not start processes or read files other than through a [`FileSource`].

use super::attrs::View;
use super::FileSource;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The agent process of a `backend=acp` stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcpLaunch {
    /// A shell command line (`sh -c`), run in the run's working directory.
    pub command: String,
    /// Extra environment variables for the agent.
    pub env: Vec<(String, String)>,
}

/// The `acp.config` document: `{"command": "...", "args": [...], "env": {...}}` (the shape
/// ACP clients use to describe an agent server).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigDoc {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

/// True when the node asks for the ACP backend.
pub fn is_acp(v: &View<'_>) -> bool {
    v.nonempty("backend") == Some("acp")
}

/// The launch of a node with `backend=acp`; `Ok(None)` for any other backend.
pub fn launch(v: &View<'_>, files: &dyn FileSource) -> Result<Option<AcpLaunch>, String> {
    if !is_acp(v) {
        return Ok(None);
    }
    match (v.nonempty("acp.command"), v.nonempty("acp.config")) {
        (Some(_), Some(_)) => Err("set either acp.command or acp.config, not both".into()),
        (None, None) => {
            Err("backend=acp needs acp.command or acp.config to say which agent to run".into())
        }
        (Some(cmd), None) => Ok(Some(AcpLaunch {
            command: cmd.to_string(),
            env: Vec::new(),
        })),
        (None, Some(cfg)) => config(cfg, files).map(Some),
    }
}

/// Reads and checks an `acp.config` value.
pub fn config(value: &str, files: &dyn FileSource) -> Result<AcpLaunch, String> {
    let value = value.trim();
    let (text, from) = if value.starts_with('{') {
        (value.to_string(), "the inline acp.config".to_string())
    } else {
        let path = value.strip_prefix('@').unwrap_or(value).trim();
        let text = files.read(path).ok_or_else(|| {
            format!(
                "acp.config refers to `{path}`, which cannot be read ({})",
                files.describe(path)
            )
        })?;
        (text, format!("acp.config `{path}`"))
    };
    let doc: ConfigDoc = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{from} is not a valid ACP agent description ({{\"command\", \"args\", \"env\"}}): {e}"
        )
    })?;
    if doc.command.trim().is_empty() {
        return Err(format!("{from} has an empty `command`"));
    }
    let mut command = shell_quote(doc.command.trim());
    for a in &doc.args {
        command.push(' ');
        command.push_str(&shell_quote(a));
    }
    Ok(AcpLaunch {
        command,
        env: doc.env.into_iter().collect(),
    })
}

/// One word for `sh -c`: kept as is when it has no special characters, else single-quoted.
fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dot::{Attrs, Value};
    use crate::workflow::attrs::Scope;

    struct Files;
    impl FileSource for Files {
        fn read(&self, rel: &str) -> Option<String> {
            (rel == "agents/echo.json").then(|| {
                r#"{"command": "npx", "args": ["-y", "my agent", "it's"], "env": {"MODE": "ci"}}"#
                    .to_string()
            })
        }
    }

    fn view_of(pairs: &[(&str, &str)]) -> Attrs {
        let mut a = Attrs::default();
        for (k, v) in pairs {
            a.set(k, Value::Str((*v).into()));
        }
        a
    }

    fn launch_of(pairs: &[(&str, &str)]) -> Result<Option<AcpLaunch>, String> {
        let attrs = view_of(pairs);
        launch(
            &View {
                scope: Scope::Node,
                attrs: &attrs,
            },
            &Files,
        )
    }

    #[test]
    fn command_config_file_and_inline_config() {
        assert_eq!(launch_of(&[("acp.command", "agent")]), Ok(None));
        assert_eq!(
            launch_of(&[("backend", "acp"), ("acp.command", "my-agent --acp")]),
            Ok(Some(AcpLaunch {
                command: "my-agent --acp".into(),
                env: vec![]
            }))
        );
        let expected = Ok(Some(AcpLaunch {
            command: r"npx -y 'my agent' 'it'\''s'".into(),
            env: vec![("MODE".into(), "ci".into())],
        }));
        assert_eq!(
            launch_of(&[("backend", "acp"), ("acp.config", "agents/echo.json")]),
            expected
        );
        assert_eq!(
            launch_of(&[("backend", "acp"), ("acp.config", "@agents/echo.json")]),
            expected
        );
        assert_eq!(
            launch_of(&[("backend", "acp"), ("acp.config", r#"{"command": "a b"}"#)]),
            Ok(Some(AcpLaunch {
                command: "'a b'".into(),
                env: vec![]
            }))
        );
    }

    #[test]
    fn refusals_say_what_is_wrong() {
        let err = |pairs: &[(&str, &str)]| launch_of(pairs).expect_err("refused");
        assert!(err(&[("backend", "acp")]).contains("needs acp.command or acp.config"));
        assert!(err(&[
            ("backend", "acp"),
            ("acp.command", "x"),
            ("acp.config", "y")
        ])
        .contains("not both"));
        assert!(err(&[("backend", "acp"), ("acp.config", "missing.json")])
            .contains("`missing.json`, which cannot be read"));
        assert!(
            err(&[("backend", "acp"), ("acp.config", r#"{"cmd": "x"}"#)])
                .contains("not a valid ACP agent description")
        );
        assert!(
            err(&[("backend", "acp"), ("acp.config", r#"{"command": " "}"#)])
                .contains("empty `command`")
        );
    }
}
