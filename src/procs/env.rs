//! The environment every workflow process starts from: never the server's own. Command
//! stages, the agent's shell tool and tool hooks, ACP agents and MCP servers all start from
//! [`EnvSnapshot::for_stages`]: the variables of [`ALLOWED`] (and every `LC_*`) as the
//! server has them, the extra names an operator passes on (`[run] pass_env`), and the
//! secrets the run is given (`[run] secrets`); the run's own `SVC_*` variables go on top.
//! Nothing else of the server's environment reaches workflow code: not `SESSION_SECRET`,
//! not `SVC_JWT_PUBLIC_KEY`, not a provider key an operator exported, not whatever the
//! service manager put there.
//!
//! Owns: the allowlist and building the snapshot from it. Must not touch: where given
//! secrets come from (the vault, read by the caller) or what a process does.

use super::spawn::{pair, EnvSnapshot};
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::process::Command;

/// Variables of the server's environment every workflow process gets (when the server has
/// them), besides every `LC_*` locale variable. Locale, time zone, terminal, the search
/// path, who and where the user is, and where certificates and temporary files live: what
/// ordinary programs need to behave, and nothing that grants anything.
pub const ALLOWED: [&str; 12] = [
    "HOME",
    "LANG",
    "LANGUAGE",
    "LOGNAME",
    "PATH",
    "SHELL",
    "SSL_CERT_DIR",
    "SSL_CERT_FILE",
    "TERM",
    "TMPDIR",
    "TZ",
    "USER",
];

/// Names that are never passed on or given, whatever the settings say: the server's own
/// credentials.
pub const NEVER: [&str; 2] = ["SESSION_SECRET", "SVC_JWT_PUBLIC_KEY"];

/// True for a variable of [`ALLOWED`] or a locale variable (`LC_*`).
pub fn allowed(name: &str) -> bool {
    ALLOWED.contains(&name) || name.starts_with("LC_")
}

impl EnvSnapshot {
    /// The environment workflow processes start from (see the module documentation): the
    /// allowed variables of this process's environment now, the variables named in `pass`
    /// (when set), then `given` (name, value) pairs, which win. Names in [`NEVER`] are left
    /// out of all three.
    pub fn for_stages(pass: &[String], given: &[(String, String)]) -> io::Result<EnvSnapshot> {
        let mut vars = Vec::new();
        let never = |k: &[u8]| NEVER.iter().any(|n| n.as_bytes() == k);
        for (k, v) in std::env::vars_os() {
            let name = k.to_string_lossy();
            let wanted = allowed(&name) || pass.iter().any(|p| *p == name);
            let is_given = given.iter().any(|(g, _)| *g == name);
            if wanted && !is_given && !never(k.as_bytes()) {
                vars.push((k.len(), pair(&k, &v)?));
            }
        }
        for (k, v) in given {
            if !never(k.as_bytes()) {
                vars.push((k.len(), pair(OsStr::new(k), OsStr::new(v))?));
            }
        }
        Ok(EnvSnapshot::from_pairs(vars))
    }

    /// Makes `cmd` start from exactly this environment (for processes started with
    /// `Command::spawn`, like ACP agents and MCP servers): clears what it would inherit from
    /// the server, then sets every variable of the snapshot under the command's own `env`
    /// settings, made before or after, which win (as for command stages, `procs::spawn`):
    /// the container's `HOME=/tmp` that `sandbox::Isolation::command` sets stays.
    pub fn apply_to(&self, cmd: &mut Command) {
        let own: Vec<(std::ffi::OsString, Option<std::ffi::OsString>)> = cmd
            .get_envs()
            .map(|(k, v)| (k.to_os_string(), v.map(OsStr::to_os_string)))
            .collect();
        cmd.env_clear();
        for (k, kv) in self.iter() {
            let value = OsStr::from_bytes(&kv.as_bytes()[k.len() + 1..]);
            cmd.env(k, value);
        }
        for (k, v) in own {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
    }
}

/// A [`Command`] for a workflow process that is not a stage's own (an MCP server, an ACP
/// agent): the clean environment of [`EnvSnapshot::for_stages`] without passed or given
/// variables, applied to `cmd`. The one call for callers that have no run snapshot at hand.
pub fn clean_command_env(cmd: &mut Command) -> io::Result<()> {
    EnvSnapshot::for_stages(&[], &[])?.apply_to(cmd);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowed_passed_and_given_variables_and_never_the_servers_secrets() {
        // The test process's own environment stands in for the server's.
        let snap = EnvSnapshot::for_stages(
            &["CARGO".to_string(), "SESSION_SECRET".to_string()],
            &[
                ("SVC_GIVEN".to_string(), "g".to_string()),
                ("SESSION_SECRET".to_string(), "forged".to_string()),
            ],
        )
        .unwrap();
        for (k, _) in snap.iter() {
            let k = k.to_string_lossy();
            assert!(
                allowed(&k) || k == "CARGO" || k == "SVC_GIVEN",
                "{k} must not be inherited"
            );
        }
        assert_eq!(snap.get(OsStr::new("SVC_GIVEN")), Some(OsStr::new("g")));
        assert_eq!(snap.get(OsStr::new("SESSION_SECRET")), None);
        // Cargo sets CARGO for tests: passed by name.
        assert!(snap.get(OsStr::new("CARGO")).is_some());
        if std::env::var_os("PATH").is_some() {
            assert!(snap.get(OsStr::new("PATH")).is_some());
        }
    }

    #[test]
    fn a_command_gets_exactly_the_snapshot() {
        let snap = EnvSnapshot::for_stages(&[], &[("SVC_X".into(), "x y".into())]).unwrap();
        let mut cmd = Command::new("/usr/bin/env");
        // Set before the snapshot (as the container's isolation does): it stays.
        cmd.env("HOME", "/tmp");
        snap.apply_to(&mut cmd);
        cmd.env("SVC_OWN", "own");
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let names: Vec<&str> = text.lines().filter_map(|l| l.split('=').next()).collect();
        assert!(
            names.contains(&"SVC_X") && names.contains(&"SVC_OWN"),
            "{text}"
        );
        for n in names {
            assert!(
                allowed(n) || n == "SVC_X" || n == "SVC_OWN",
                "{n} leaked: {text}"
            );
        }
        assert!(text.lines().any(|l| l == "HOME=/tmp"), "{text}");
    }
}
