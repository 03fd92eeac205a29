//! Which port a preview reaches, and connecting to it: only the run's sandbox.
//!
//! A `container` run without network has a loopback of its own: the proxy connects from
//! inside the container's network namespace (a short-lived thread joins it with `setns`),
//! so the port is reached there and never exposed on the host, and nothing of the host is
//! reachable. Every other run (`local`, or a container sharing the host's network) is
//! reached on the host's loopback, where svc's own listeners and `[server.preview]
//! deny_ports` are refused (403 `port_not_previewable`): a signed preview URL needs no
//! credentials, so it must not become a way into svc itself or another host service.
//!
//! Owns: the target rule and the connection. Must not touch: HTTP framing (`proxy`).

use crate::server::error::ApiError;
use crate::settings::Settings;
use serde_json::{json, Value};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long connecting to the sandbox's port may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a preview connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The host's loopback (a `local` run, or a container sharing the host's network).
    Host { port: u16 },
    /// The loopback of the container whose workspace is `workdir`.
    Container { workdir: PathBuf, port: u16 },
}

impl Target {
    pub fn port(&self) -> u16 {
        match self {
            Target::Host { port } | Target::Container { port, .. } => *port,
        }
    }
}

/// The target of `port` in a ready sandbox (`instance`, `Run.sandbox.instance`); 403 for a
/// host port no preview may reach: svc's own (`own_ports`) or one of `[server.preview]
/// deny_ports`.
pub fn target(
    instance: Option<&Value>,
    port: u16,
    s: &Settings,
    own_ports: &[u16],
) -> Result<Target, ApiError> {
    let runtime = instance.and_then(|i| i.get("runtime"));
    let isolated = instance.and_then(|i| i.get("provider")) == Some(&json!("container"))
        && runtime.and_then(|r| r.get("network")) != Some(&json!(true));
    if isolated {
        if let Some(dir) = runtime
            .and_then(|r| r.get("working_directory"))
            .and_then(|d| d.as_str())
        {
            return Ok(Target::Container {
                workdir: PathBuf::from(dir),
                port,
            });
        }
    }
    if own_ports.contains(&port) {
        return Err(ApiError::forbidden(format!(
            "Port {port} is svc's own listener; a preview never reaches it."
        ))
        .with_code("port_not_previewable"));
    }
    if s.server.preview.deny_ports.contains(&port) {
        return Err(ApiError::forbidden(format!(
            "Port {port} is in server.preview.deny_ports; a preview never reaches it."
        ))
        .with_code("port_not_previewable"));
    }
    Ok(Target::Host { port })
}

/// Connects to the target.
pub fn connect(t: &Target) -> std::io::Result<TcpStream> {
    match t {
        Target::Host { port } => connect_loopback(*port),
        Target::Container { workdir, port } => connect_in_container(workdir, *port),
    }
}

/// A process of the container whose workspace is `workdir`: one whose working directory is
/// inside it and whose network namespace is not ours.
fn sandbox_pid(workdir: &Path) -> Option<u32> {
    let own = std::fs::read_link("/proc/self/ns/net").ok()?;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let inside =
            std::fs::read_link(entry.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(workdir));
        if inside && std::fs::read_link(entry.path().join("ns/net")).is_ok_and(|ns| ns != own) {
            return Some(pid);
        }
    }
    None
}

/// Connects to `port` on the loopback of the container running in `workdir`: a short-lived
/// thread joins the container's network namespace (`setns`), connects, and ends; the
/// socket stays in that namespace.
fn connect_in_container(workdir: &Path, port: u16) -> std::io::Result<TcpStream> {
    use std::os::fd::AsRawFd;
    let pid = sandbox_pid(workdir)
        .ok_or_else(|| std::io::Error::other("no process is running in the container"))?;
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
    std::thread::spawn(move || {
        // SAFETY: setns changes only this thread's network namespace; the thread ends
        // right after connecting.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        connect_loopback(port)
    })
    .join()
    .map_err(|_| std::io::Error::other("the connecting thread panicked"))?
}

fn connect_loopback(port: u16) -> std::io::Result<TcpStream> {
    TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        CONNECT_TIMEOUT,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(provider: &str, network: bool) -> Value {
        json!({"provider": provider, "runtime": {"working_directory": "/w", "network": network}})
    }

    #[test]
    fn svc_and_denied_ports_are_refused_on_the_host_only() {
        let mut s = Settings::default();
        s.server.preview.deny_ports = vec![22];
        let own = [8080];
        for (provider, network) in [("local", false), ("container", true)] {
            let r = instance(provider, network);
            assert_eq!(target(Some(&r), 8080, &s, &own).unwrap_err().status, 403);
            assert_eq!(target(Some(&r), 22, &s, &own).unwrap_err().status, 403);
            assert_eq!(
                target(Some(&r), 3000, &s, &own).unwrap(),
                Target::Host { port: 3000 }
            );
        }
        // A container's own loopback holds nothing of the host's.
        let c = instance("container", false);
        assert_eq!(
            target(Some(&c), 8080, &s, &own).unwrap(),
            Target::Container {
                workdir: "/w".into(),
                port: 8080
            }
        );
    }
}
