//! The wizard's HTML pages: one self-contained page per step (inline CSS and script, no
//! external assets, works offline). Each page's form calls the step's JSON API with the
//! install token taken from the page URL (`?token=`), so the pages and a script drive the
//! same code.
//!
//! Owns: the page markup. Must not touch: wizard state (the pages only call the API).

use crate::server::http::Reply;

/// The wizard's steps, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    Server,
    ObjectStore,
    Llm,
    Codehost,
    Finish,
}

const STEPS: [(Page, &str, &str); 5] = [
    (Page::Server, "/install", "1. Server"),
    (
        Page::ObjectStore,
        "/install/object-store",
        "2. Object store",
    ),
    (Page::Llm, "/install/llm", "3. LLM provider"),
    (Page::Codehost, "/install/codehost", "4. Code host"),
    (Page::Finish, "/install/finish", "5. Finish"),
];

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:44rem;margin:2rem auto;padding:0 1rem;color:#222}\
nav a{margin-right:1rem}nav a.on{font-weight:bold}label{display:block;margin:.6rem 0 .2rem}\
input,select{width:100%;padding:.4rem;box-sizing:border-box}button{margin:1rem .5rem 0 0;padding:.5rem 1rem}\
#out{margin-top:1rem;white-space:pre-wrap}.err{color:#a00}.ok{color:#070}";

/// Shared script: the token from the URL, `call(method, path, body)`, `show(text, ok)`.
const SCRIPT: &str = r#"
const token = new URLSearchParams(location.search).get('token') || sessionStorage.getItem('svc-install-token') || '';
sessionStorage.setItem('svc-install-token', token);
function fixLinks() { for (const a of document.querySelectorAll('nav a, a.next')) { a.href += '?token=' + encodeURIComponent(token); } }
function show(text, ok) { const o = document.getElementById('out'); o.textContent = text; o.className = ok ? 'ok' : 'err'; }
async function call(method, path, body) {
  const r = await fetch(path, {method, headers: {'Content-Type': 'application/json', 'X-Install-Token': token}, body: body === undefined ? undefined : JSON.stringify(body)});
  const text = await r.text();
  let json = null; try { json = JSON.parse(text); } catch (e) {}
  if (!r.ok) { throw new Error(json && json.errors ? json.errors[0].detail : (r.status + ' ' + text)); }
  return json;
}
async function run(f) { try { show(await f(), true); } catch (e) { show(e.message, false); } }
function val(id) { const e = document.getElementById(id); return e ? e.value.trim() : ''; }
"#;

fn body_of(p: Page) -> &'static str {
    match p {
        Page::Server => {
            r#"<h2>Server</h2>
<p>The public URL people use to reach this server (the reverse proxy's address), and how they sign in.</p>
<label for=url>Public URL</label><input id=url placeholder="https://svc.example.com">
<label for=methods>Sign-in methods</label>
<select id=methods><option value="dev-token">Dev token</option><option value="dev-token,codehost">Dev token and code host</option><option value="codehost">Code host only</option></select>
<button onclick="run(async () => { await call('PUT', '/install/server', {canonical_url: val('url'), auth_methods: val('methods').split(',')}); return 'Saved.'; })">Save</button>
<a class=next href="/install/object-store">Next</a>
<script>call('GET', '/install/session').then(s => { const e = document.getElementById('url'); e.value = (s.server && s.server.canonical_url) || s.prefill.canonical_url || ''; });</script>"#
        }
        Page::ObjectStore => {
            r#"<h2>Object store</h2>
<label for=provider>Where to keep objects</label>
<select id=provider><option value="local">Local disk</option><option value="s3">Shared S3-compatible bucket</option></select>
<label for=root>Local root (local disk)</label><input id=root>
<label for=bucket>Bucket (S3)</label><input id=bucket>
<label for=region>Region (S3)</label><input id=region placeholder="us-east-1">
<label for=endpoint>Endpoint (S3-compatible stores; empty for AWS)</label><input id=endpoint>
<label for=path_style>Addressing (S3)</label><select id=path_style><option value="false">Virtual-hosted</option><option value="true">Path style</option></select>
<label for=akid>Access key id (S3)</label><input id=akid>
<label for=secret>Secret access key (S3)</label><input id=secret type=password>
<button onclick="run(async () => { await call('POST', '/install/object-store/test', store()); return 'The object store works.'; })">Test</button>
<button onclick="run(async () => { await call('PUT', '/install/object-store', store()); return 'Tested and saved.'; })">Save</button>
<a class=next href="/install/llm">Next</a>
<script>
function store() { return val('provider') === 'local' ? {provider: 'local', root: val('root') || undefined} :
  {provider: 's3', bucket: val('bucket'), region: val('region'), endpoint: val('endpoint') || undefined, path_style: val('path_style') === 'true', access_key_id: val('akid'), secret_access_key: val('secret')}; }
call('GET', '/install/session').then(s => { document.getElementById('root').value = s.prefill.object_store_local_root || ''; });
</script>"#
        }
        Page::Llm => {
            r#"<h2>LLM provider</h2>
<p>Optional. Without a key, workflows that call a model fail with "provider not configured" until one is added.</p>
<label for=provider>Provider</label>
<select id=provider><option>anthropic</option><option>openai</option><option>gemini</option><option>kimi</option><option>zai</option><option>minimax</option><option>inception</option><option>openai_compatible</option></select>
<label for=key>API key</label><input id=key type=password>
<label for=base>Endpoint (optional: a gateway or proxy)</label><input id=base>
<button onclick="run(async () => { const r = await call('POST', '/install/llm/test', key()); return 'The key works (' + r.model + ').'; })">Test</button>
<button onclick="run(async () => { await call('PUT', '/install/llm', {providers: [key()]}); return 'Saved.'; })">Save</button>
<button onclick="run(async () => { await call('PUT', '/install/llm', {skip: true}); return 'Skipped: no LLM credentials will be stored.'; })">Skip</button>
<a class=next href="/install/codehost">Next</a>
<script>function key() { return {provider: val('provider'), api_key: val('key'), base_url: val('base') || undefined}; }</script>"#
        }
        Page::Codehost => {
            r#"<h2>Code host</h2>
<p>Optional. <b>Sign-in</b>: an OAuth app lets your team sign in with their accounts; its callback URL is <code>&lt;public URL&gt;/auth/callback</code>. <b>Pull requests</b>: a token or an app lets runs push their branch, open pull requests and follow their checks; point the host's webhook at <code>&lt;public URL&gt;/api/v1/webhooks/codehost</code> with the webhook secret.</p>
<label for=web>Code host URL (empty for github.com)</label><input id=web>
<label for=api>Code host API URL (empty for api.github.com)</label><input id=api>
<h3>Sign-in</h3>
<label for=cid>OAuth client id</label><input id=cid>
<label for=csecret>OAuth client secret</label><input id=csecret type=password>
<label for=users>Allowed usernames (comma-separated)</label><input id=users>
<h3>Pull requests</h3>
<label for=strategy>Credentials</label><select id=strategy><option value="">none</option><option value=token>personal access token</option><option value=app>app (id and private key)</option></select>
<label for=pat>Personal access token</label><input id=pat type=password>
<label for=appid>App id</label><input id=appid inputmode=numeric>
<label for=appkey>App private key (PEM)</label><textarea id=appkey rows=4 style="width:100%"></textarea>
<label for=appurl>App page (where people install it on a repository; optional)</label><input id=appurl>
<label for=whsec>Webhook secret</label><input id=whsec type=password>
<button onclick="run(async () => { const st = val('strategy'); const integration = st ? {strategy: st, token: val('pat') || undefined, app_id: val('appid') ? Number(val('appid')) : undefined, private_key: val('appkey') || undefined, app_url: val('appurl') || undefined, webhook_secret: val('whsec') || undefined} : undefined; await call('PUT', '/install/codehost', {client_id: val('cid') || undefined, client_secret: val('csecret') || undefined, allowed_usernames: val('users').split(',').map(s => s.trim()).filter(s => s), web_url: val('web') || undefined, api_url: val('api') || undefined, integration}); return 'Saved.'; })">Save</button>
<button onclick="run(async () => { await call('PUT', '/install/codehost', {skip: true}); return 'Skipped.'; })">Skip</button>
<a class=next href="/install/finish">Next</a>"#
        }
        Page::Finish => {
            r#"<h2>Finish</h2>
<p>Writes the settings, stores the secrets in the vault and stops the server. Start it again to boot configured.</p>
<pre id=summary></pre>
<button onclick="run(async () => { const r = await call('POST', '/install/finish'); return 'Done. Start the server again, then open ' + r.restart_url + (r.dev_token ? '\nDev token: ' + r.dev_token : ''); })">Finish</button>
<script>call('GET', '/install/session').then(s => { document.getElementById('summary').textContent = 'Completed steps: ' + s.completed_steps.join(', '); });</script>"#
        }
    }
}

/// The HTML of one step's page.
pub fn html(p: Page) -> String {
    let nav: String = STEPS
        .iter()
        .map(|(q, href, label)| {
            let on = if *q == p { " class=on" } else { "" };
            format!("<a{on} href=\"{href}\">{label}</a>")
        })
        .collect();
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport content=\"width=device-width\">\
<title>svc install</title><style>{STYLE}</style></head><body><h1>Install svc</h1><nav>{nav}</nav>\
<script>{SCRIPT}</script>{}<div id=out></div><script>fixLinks();</script></body></html>",
        body_of(p)
    )
}

/// The Content-Security-Policy of a page: nothing but the page's own inline scripts, event
/// handlers and style, each allowed by its SHA-256 (no `'unsafe-inline'`), requests only to
/// this origin, no framing, no `<base>`, no form posts.
pub fn csp(html: &str) -> String {
    let scripts: Vec<String> = between(html, "<script>", "</script>")
        .chain(between(html, "onclick=\"", "\""))
        .map(sha256_source)
        .collect();
    let styles: Vec<String> = between(html, "<style>", "</style>")
        .map(sha256_source)
        .collect();
    format!(
        "default-src 'none'; script-src 'unsafe-hashes' {}; style-src {}; connect-src 'self'; \
         img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        scripts.join(" "),
        styles.join(" ")
    )
}

/// Every text between `open` and the next `close`.
fn between<'h>(html: &'h str, open: &'h str, close: &'h str) -> impl Iterator<Item = &'h str> {
    html.split(open)
        .skip(1)
        .filter_map(move |rest| rest.split_once(close).map(|(inside, _)| inside))
}

/// A CSP hash source for `text`: `'sha256-<base64>'`.
fn sha256_source(text: &str) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(text.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

pub fn page(p: Page) -> Reply {
    let body = html(p);
    let policy = csp(&body);
    Reply::Full(rouille::Response {
        status_code: 200,
        headers: vec![
            ("Content-Type".into(), "text/html; charset=utf-8".into()),
            ("Cache-Control".into(), "no-store".into()),
            ("Referrer-Policy".into(), "no-referrer".into()),
            ("Content-Security-Policy".into(), policy.into()),
            ("X-Frame-Options".into(), "DENY".into()),
            ("X-Content-Type-Options".into(), "nosniff".into()),
            ("Cross-Origin-Opener-Policy".into(), "same-origin".into()),
        ],
        data: rouille::ResponseBody::from_string(body),
        upgrade: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_inline_script_handler_and_style_is_hashed_and_nothing_else_allowed() {
        for p in STEPS.iter().map(|(p, _, _)| *p) {
            let h = html(p);
            let policy = csp(&h);
            let scripts = h.matches("<script>").count() + h.matches("onclick=\"").count();
            assert_eq!(policy.matches("'sha256-").count(), scripts + 1, "{policy}");
            assert!(!policy.contains("unsafe-inline"), "{policy}");
            assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
            // No other kind of inline handler that the policy would block.
            for attr in [
                "onchange=",
                "oninput=",
                "onload=",
                "onsubmit=",
                "javascript:",
            ] {
                assert!(!h.contains(attr), "{attr} in {p:?}");
            }
        }
    }
}
