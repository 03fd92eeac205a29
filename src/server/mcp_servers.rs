//! The MCP servers API: the catalog routes (through [`super::catalog`]) and
//! `POST /api/v1/mcp-servers/{id}/test`, which starts or connects to the server (stdio ones
//! on this host, in a scratch directory, secrets from the vault), handshakes and lists its
//! tools, and answers what happened and how long each step took.
//!
//! Owns: the HTTP side of `mcp::catalog`. Must not touch: the protocol (`crate::mcp`) or how
//! servers start (`agent::mcp`).

use super::catalog::Served;
use super::error::ApiError;
use super::http::Reply;
use super::router::Ctx;
use super::App;
use crate::catalog::Catalog;
use crate::mcp::catalog::McpServers;

impl Served for McpServers {
    fn catalog(app: &App) -> &Catalog<McpServers> {
        &app.mcp_servers
    }
}

/// `POST /api/v1/mcp-servers/{id}/test`: 200 with `{ok: true, server, protocol_version,
/// tools, timings_ms}` or `{ok: false, step, error, stderr, timings_ms}`.
pub fn test(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let item = app
        .mcp_servers
        .get(ctx.param("id"))
        .map_err(super::catalog::error)?;
    let def = crate::mcp::catalog::server_of(&item.id, &item.definition)
        .map_err(|e| ApiError::internal(format!("the stored definition does not parse: {e}")))?;
    let mut nonce = [0u8; 8];
    let _ = crate::base::random::fill_random(&mut nonce);
    let scratch = app.state_dir.join("tmp").join(format!(
        "mcp-test-{}-{}",
        item.id,
        crate::base::hex(&nonce)
    ));
    crate::base::perms::private_dir(&scratch)
        .map_err(|e| ApiError::internal(format!("cannot make a scratch directory: {e}")))?;
    let vault = crate::settings::vault::Vault::in_state_dir(&app.state_dir);
    let lookup = |name: &str| vault.get(name).ok().flatten();
    let isolation = crate::sandbox::Isolation::Local;
    let cx = crate::agent::mcp::StartContext {
        isolation: &isolation,
        workdir: &scratch,
        env: None,
        secrets: &lookup,
    };
    let report = crate::agent::mcp::probe(&def, &cx, &crate::base::cancel::CancelToken::new());
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(Reply::json(200, &report))
}
