//! The MCP servers catalog (`/api/v1/mcp-servers`): the rules of its entries on the shared
//! catalog piece (`crate::catalog`): a definition is `{display_name, description,
//! transport, startup_timeout_secs, tool_timeout_secs, required}` (a [`ServerDef`] without
//! its id), `transport.env` and `transport.headers` are write-only (read back as `env_keys`
//! and `header_keys`), and every problem names its field (422).
//! Must not start or connect to servers (the `test` route and agent stages do).

use serde_json::{Map, Value};

use super::spec::{
    HttpProtocol, ServerDef, Transport, DEFAULT_STARTUP_TIMEOUT_SECS, DEFAULT_TOOL_TIMEOUT_SECS,
    MAX_TIMEOUT_SECS,
};
use crate::catalog::fields::type_name;
use crate::catalog::{Errors, Invalid, Kind, Obj, Secret, Shape};
use crate::store::CatalogTable;

/// The catalog's rules (no state: every check is about the definition itself).
#[derive(Debug, Default)]
pub struct McpServers;

impl Kind for McpServers {
    const TABLE: &'static CatalogTable = &crate::store::catalog::MCP_SERVERS;
    const NOUN: &'static str = "MCP server";
    const SECRETS: &'static [Secret] = &[
        Secret {
            path: "transport/env",
            shape: Shape::Map,
        },
        Secret {
            path: "transport/headers",
            shape: Shape::Map,
        },
    ];

    fn validate(&self, id: &str, def: &Map<String, Value>) -> Result<Map<String, Value>, Errors> {
        let server = parse(id, def)?;
        let mut out = match serde_json::to_value(&server) {
            Ok(Value::Object(m)) => m,
            _ => return Err(vec![Invalid::new("", "cannot be stored")]),
        };
        out.remove("id");
        // Written out, so readers see the defaults the server will use.
        out.insert(
            "display_name".into(),
            Value::String(server.name().to_string()),
        );
        out.entry("description").or_insert(Value::Null);
        Ok(out)
    }
}

fn timeout(o: &Obj<'_>, key: &str, default: u64, errs: &mut Errors) -> u64 {
    match o.get(key) {
        None => default,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MAX_TIMEOUT_SECS).contains(&n) => n,
            _ => {
                errs.push(Invalid::new(
                    o.field(key),
                    format!("must be a whole number of seconds from 1 to {MAX_TIMEOUT_SECS}"),
                ));
                default
            }
        },
    }
}

/// A catalog definition (without `id`) as a server, or every problem found.
pub fn parse(id: &str, def: &Map<String, Value>) -> Result<ServerDef, Errors> {
    let o = Obj::root(def);
    let mut errs = Vec::new();
    o.only(
        &[
            "display_name",
            "description",
            "transport",
            "startup_timeout_secs",
            "tool_timeout_secs",
            "required",
        ],
        &mut errs,
    );
    let display_name = o.opt_string("display_name", &mut errs).map(str::to_string);
    let description = o.opt_string("description", &mut errs).map(str::to_string);
    let startup_timeout_secs = timeout(
        &o,
        "startup_timeout_secs",
        DEFAULT_STARTUP_TIMEOUT_SECS,
        &mut errs,
    );
    let tool_timeout_secs = timeout(
        &o,
        "tool_timeout_secs",
        DEFAULT_TOOL_TIMEOUT_SECS,
        &mut errs,
    );
    let required = o.opt_bool("required", &mut errs).unwrap_or(false);
    let transport = o
        .object("transport", &mut errs)
        .and_then(|t| transport(&Obj::at(t, "transport"), &mut errs));
    let Some(transport) = transport else {
        return Err(errs);
    };
    if !errs.is_empty() {
        return Err(errs);
    }
    let server = ServerDef {
        id: id.to_string(),
        display_name,
        description,
        transport,
        startup_timeout_secs,
        tool_timeout_secs,
        required,
    };
    server
        .validate()
        .map_err(|e| vec![Invalid::new(e.field, e.message)])?;
    Ok(server)
}

fn transport(t: &Obj<'_>, errs: &mut Errors) -> Option<Transport> {
    match t.string("type", errs)? {
        "stdio" => {
            t.only(&["type", "command", "env"], errs);
            let command = t.array("command", errs).map(|a| {
                a.iter()
                    .enumerate()
                    .filter_map(|(i, w)| match w.as_str() {
                        Some(s) => Some(s.to_string()),
                        None => {
                            errs.push(Invalid::new(
                                format!("{}[{i}]", t.field("command")),
                                format!("must be a string, not {}", type_name(w)),
                            ));
                            None
                        }
                    })
                    .collect::<Vec<_>>()
            });
            let env = t.string_map("env", errs).unwrap_or_default();
            Some(Transport::Stdio {
                command: command?,
                env,
            })
        }
        "http" => {
            t.only(&["type", "url", "protocol", "headers"], errs);
            let url = t.string("url", errs).map(str::to_string);
            let protocol = match t.opt_string("protocol", errs) {
                None | Some("streamable_http") => HttpProtocol::StreamableHttp,
                Some("sse") => HttpProtocol::Sse,
                Some(other) => {
                    errs.push(Invalid::new(
                        t.field("protocol"),
                        format!("`{other}` is not streamable_http or sse"),
                    ));
                    HttpProtocol::StreamableHttp
                }
            };
            let headers = t.string_map("headers", errs).unwrap_or_default();
            Some(Transport::Http {
                url: url?,
                protocol,
                headers,
            })
        }
        other => {
            errs.push(Invalid::new(
                t.field("type"),
                format!("`{other}` is not a transport svc knows (stdio or http)"),
            ));
            None
        }
    }
}

/// A stored catalog entry (its full definition, secrets included) as a server.
pub fn server_of(id: &str, definition: &Map<String, Value>) -> Result<ServerDef, String> {
    parse(id, definition).map_err(|errs| {
        errs.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    })
}

/// A run's servers from its references (the create body's `mcp_servers`, else `[run.agent]
/// mcp_servers`): a string is a catalog id (`catalog` finds it), an object an inline
/// definition with its `id`. Every problem names its field (`<field>[i]...`); an id may
/// appear once.
pub fn resolve(
    refs: &[Value],
    field: &str,
    catalog: &dyn Fn(&str) -> Option<ServerDef>,
) -> Result<Vec<ServerDef>, Errors> {
    let mut out: Vec<ServerDef> = Vec::with_capacity(refs.len());
    let mut errs = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let server = match r {
            Value::String(id) => match catalog(id) {
                Some(s) => s,
                None => {
                    errs.push(Invalid::new(
                        at,
                        format!("no MCP server with id `{id}` in the catalog"),
                    ));
                    continue;
                }
            },
            Value::Object(m) => {
                let mut def = m.clone();
                let id = match def.remove("id") {
                    Some(Value::String(id)) if super::spec::is_slug(&id) => id,
                    Some(other) => {
                        errs.push(Invalid::new(
                            format!("{at}.id"),
                            format!("{other} is not a valid MCP server id"),
                        ));
                        continue;
                    }
                    None => {
                        errs.push(Invalid::new(format!("{at}.id"), "is required"));
                        continue;
                    }
                };
                match parse(&id, &def) {
                    Ok(s) => s,
                    Err(e) => {
                        errs.extend(e.into_iter().map(|x| {
                            Invalid::new(crate::catalog::fields::join(&at, &x.field), x.message)
                        }));
                        continue;
                    }
                }
            }
            other => {
                errs.push(Invalid::new(
                    at,
                    format!(
                        "must be a catalog id (a string) or a definition (an object), not {}",
                        type_name(other)
                    ),
                ));
                continue;
            }
        };
        if out.iter().any(|s| s.id == server.id) {
            errs.push(Invalid::new(
                at,
                format!("the server `{}` is listed twice", server.id),
            ));
            continue;
        }
        out.push(server);
    }
    if errs.is_empty() {
        Ok(out)
    } else {
        Err(errs)
    }
}

/// Freezes a run's servers: their views (no `env`/`headers` values) for `run.created`
/// `mcp_servers`, and the full definitions (secret references unexpanded) stored as a blob,
/// whose reference goes in `run.created` `mcp_definitions`.
pub fn freeze(
    servers: &[ServerDef],
    store: &dyn crate::store::RunStore,
) -> Result<(Value, String), String> {
    let views: Vec<Value> = servers.iter().map(ServerDef::view).collect();
    let text = serde_json::to_string(servers)
        .map_err(|e| format!("cannot freeze the MCP servers: {e}"))?;
    let id = store
        .put_blob(text.as_bytes())
        .map_err(|e| format!("cannot store the MCP servers: {e}"))?;
    Ok((Value::Array(views), crate::store::blob_ref(&id)))
}

/// The servers [`freeze`] stored for a run (`created_meta` of its row); none: empty.
pub fn thaw(
    created_meta: &Map<String, Value>,
    store: &dyn crate::store::RunStore,
) -> Result<Vec<ServerDef>, String> {
    let Some(reference) = created_meta.get("mcp_definitions").and_then(Value::as_str) else {
        return Ok(Vec::new());
    };
    let id = crate::store::parse_blob_ref(reference)
        .ok_or_else(|| format!("its MCP servers are recorded as `{reference}`, not a blob"))?;
    let bytes = store
        .get_blob(id)
        .map_err(|e| format!("cannot read its MCP servers: {e}"))?
        .ok_or_else(|| "its MCP servers' definitions are missing from the store".to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| format!("its MCP servers do not parse: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn definitions_are_normalised_with_defaults() {
        let out = McpServers
            .validate(
                "time",
                &obj(json!({"transport": {"type": "stdio", "command": ["mcp-server-time"]}})),
            )
            .unwrap();
        assert_eq!(out["display_name"], "time");
        assert_eq!(out["startup_timeout_secs"], 10);
        assert_eq!(out["tool_timeout_secs"], 60);
        assert_eq!(out["required"], false);
        assert_eq!(out["transport"]["env"], json!({}));
        assert!(out.get("id").is_none());
        // What was stored reads back as the same server.
        let s = server_of("time", &out).unwrap();
        assert_eq!(s.id, "time");
    }

    #[test]
    fn run_references_resolve_ids_and_inline_definitions() {
        let time = server_of(
            "time",
            &obj(json!({"transport": {"type": "stdio", "command": ["t"]}})),
        )
        .unwrap();
        let catalog = |id: &str| (id == "time").then(|| time.clone());
        let got = resolve(
            &[
                json!("time"),
                json!({"id": "web", "transport": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}),
            ],
            "mcp_servers",
            &catalog,
        )
        .unwrap();
        assert_eq!(got[0], time);
        assert_eq!(got[1].id, "web");
        let errs = resolve(
            &[
                json!("nope"),
                json!(3),
                json!({"transport": {}}),
                json!({"id": "w", "transport": {"type": "http"}}),
                json!("time"),
                json!("time"),
            ],
            "mcp_servers",
            &catalog,
        )
        .unwrap_err();
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "mcp_servers[0]",
                "mcp_servers[1]",
                "mcp_servers[2].id",
                "mcp_servers[3].transport.url",
                "mcp_servers[5]"
            ],
            "{errs:?}"
        );
    }

    #[test]
    fn every_problem_names_its_field() {
        let errs = McpServers
            .validate(
                "x",
                &obj(json!({
                    "transport": {"type": "stdio", "command": ["a", 3], "env": {"A": 1}},
                    "tool_timeout_secs": 0,
                    "colour": "red",
                })),
            )
            .unwrap_err();
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "colour",
                "tool_timeout_secs",
                "transport.command[1]",
                "transport.env.A"
            ],
            "{errs:?}"
        );
        let errs = McpServers
            .validate("x", &obj(json!({"transport": {"type": "grpc"}})))
            .unwrap_err();
        assert_eq!(errs[0].field, "transport.type");
        let errs = McpServers
            .validate(
                "x",
                &obj(json!({"transport": {"type": "http", "url": "https://h/mcp",
                    "headers": {"Authorization": "Bearer {{ secrets.bad-name }}"}}})),
            )
            .unwrap_err();
        assert_eq!(errs[0].field, "transport.headers.Authorization");
        let errs = McpServers
            .validate(
                "x",
                &obj(json!({"transport": {"type": "stdio", "command": []}})),
            )
            .unwrap_err();
        assert_eq!(errs[0].field, "transport.command");
    }
}
