//! Where previews are served, and under which browser rules.
//!
//! - **Their own origin** (`[server.preview] url`, a host name the reverse proxy routes to
//!   this server, or `[server.preview] listen`, a second listener): previews are served
//!   only there, and the UI's origin answers 404 for `/preview/`. The UI's cookies are
//!   host-only, so they never go to another host, and the UI's API is cross-origin from a
//!   preview page. When that origin's host differs from the UI's, preview pages keep a
//!   real origin of their own (CSP `sandbox` with `allow-same-origin`), so an app's own
//!   `fetch`, cookies and storage work; on the UI's host with another port (cookies do not
//!   tell ports apart) they do not (below).
//! - **No origin of their own** (neither setting): previews are served under the UI's
//!   origin at `/preview/`, and every response is sandboxed without `allow-same-origin`:
//!   the page runs in an opaque origin, so it cannot read or write svc's cookies, call the
//!   API as the signed-in user, or reach the UI's DOM. What that costs is in
//!   docs/decisions.md "Previews".
//!
//! Owns: the preview base URL and the origin rules. Must not touch: the proxy itself.

use crate::server::http::Incoming;
use crate::settings::Settings;
use std::net::SocketAddr;

/// The addresses this server listens on (TCP only; a Unix socket has no port).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Listeners {
    pub main: Option<SocketAddr>,
    pub preview: Option<SocketAddr>,
}

/// `scheme://host[:port]` of a URL, lowercased; `None` when it has no `://`.
pub fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    Some(format!(
        "{}://{}",
        scheme.to_ascii_lowercase(),
        host.to_ascii_lowercase()
    ))
}

/// The host of an origin or URL, without scheme, port or brackets.
fn host_of(url: &str) -> Option<String> {
    let authority = origin_of(url)?.split_once("://")?.1.to_string();
    let authority = authority
        .rsplit_once('@')
        .map_or(authority.as_str(), |(_, h)| h);
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        authority.split(':').next().unwrap_or("")
    };
    Some(host.to_string())
}

/// The base previews are served at (no trailing slash): `[server.preview] url`, else the
/// preview listener, else `server.web.url`, else `server.api.url` without `/api/v1`, else
/// the main TCP listener; `None` on a Unix socket with no URL configured (the URL is then
/// the path alone). Never the request's `Host`.
pub fn public_base(s: &Settings, l: &Listeners) -> Option<String> {
    let trimmed = |u: &str| u.trim_end_matches('/').to_string();
    if let Some(u) = &s.server.preview.url {
        return Some(trimmed(u));
    }
    if let Some(a) = l.preview {
        return Some(format!("http://{a}"));
    }
    if let Some(u) = &s.server.web.url {
        return Some(trimmed(u));
    }
    if let Some(u) = &s.server.api.url {
        return Some(trimmed(u.trim_end_matches('/').trim_end_matches("/api/v1")));
    }
    l.main.map(|a| format!("http://{a}"))
}

/// The UI's origin: `server.web.url`, else `server.api.url`, else the main listener.
fn ui_origin(s: &Settings, l: &Listeners) -> Option<String> {
    s.server
        .web
        .url
        .as_deref()
        .or(s.server.api.url.as_deref())
        .and_then(origin_of)
        .or_else(|| l.main.map(|a| format!("http://{a}")))
}

/// True when previews have an origin of their own (`[server.preview] url` or `listen`).
pub fn separate(s: &Settings) -> bool {
    s.server.preview.url.is_some() || s.server.preview.listen.is_some()
}

/// True when previews have their own origin on a host that shares no cookies with the
/// UI's: then, and only then, a preview page keeps its origin (`allow-same-origin`).
/// Another port of the UI's host is not enough (browsers share cookies across ports), and
/// neither is a host under the UI's parent domain: a page with an origin there could set a
/// cookie for the shared domain (`document.cookie = "svc-demo=1; domain=example.com"`) that
/// the UI would then receive ([`cookie_related`]).
pub fn has_own_host(s: &Settings, l: &Listeners) -> bool {
    if !separate(s) {
        return false;
    }
    let preview = public_base(s, l).as_deref().and_then(host_of);
    let ui = ui_origin(s, l).as_deref().and_then(host_of);
    match (preview, ui) {
        (Some(p), Some(u)) => !cookie_related(&p, &u),
        // No UI origin known to compare with: assume shared.
        _ => false,
    }
}

/// True when a page on host `a` may set cookies that host `b` receives (or the other way
/// round): the same host, one a subdomain of the other, or siblings under one parent
/// domain. Without the public-suffix list the parent is approximated by the last two
/// labels (so `a.example.co.uk` and `b.other.co.uk` count as related too, which only costs
/// the previews their origin), and every `*.localhost` is related to every other. IP
/// addresses take no domain cookies: one is related only to itself.
pub fn cookie_related(a: &str, b: &str) -> bool {
    let norm = |h: &str| h.trim_end_matches('.').to_ascii_lowercase();
    let (a, b) = (norm(a), norm(b));
    if a == b {
        return true;
    }
    if a.parse::<std::net::IpAddr>().is_ok() || b.parse::<std::net::IpAddr>().is_ok() {
        return false;
    }
    if a.ends_with(&format!(".{b}")) || b.ends_with(&format!(".{a}")) {
        return true;
    }
    let last = |h: &str, n: usize| -> Vec<String> {
        h.rsplit('.').take(n).map(String::from).collect::<Vec<_>>()
    };
    let both_local = last(&a, 1) == ["localhost"] && last(&b, 1) == ["localhost"];
    let (pa, pb) = (last(&a, 2), last(&b, 2));
    both_local || (pa.len() == 2 && pa == pb)
}

/// True when `inc` was sent to the previews' own host name (`[server.preview] url`), which
/// serves previews and nothing else.
pub fn is_preview_host(s: &Settings, inc: &Incoming<'_>) -> bool {
    let Some(url) = s.server.preview.url.as_deref() else {
        return false;
    };
    inc.header("host").is_some_and(|h| host_names(h, url))
}

/// True when a `Host` header names the host of `url`: compared ignoring case, the scheme's
/// default port (80, 443) written or not on either side.
pub fn host_names(host_header: &str, url: &str) -> bool {
    let Some(origin) = origin_of(url) else {
        return false;
    };
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    let default = match scheme {
        "https" => ":443",
        "http" => ":80",
        _ => "",
    };
    let plain = |a: &str| {
        let a = a.trim().to_ascii_lowercase();
        match a.strip_suffix(default) {
            Some(h) if !default.is_empty() => h.to_string(),
            _ => a,
        }
    };
    plain(host_header) == plain(authority)
}

/// The `Content-Security-Policy` of every proxied response: a sandbox with what a dev
/// server's pages need (scripts, forms, pop-ups, modals, downloads), keeping the page's
/// origin only on a host of its own.
pub fn sandbox_policy(own_host: bool) -> &'static str {
    if own_host {
        "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads allow-same-origin"
    } else {
        "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(web: Option<&str>, preview: Option<&str>, listen: Option<&str>) -> Settings {
        let mut s = Settings::default();
        s.server.web.url = web.map(String::from);
        s.server.preview.url = preview.map(String::from);
        s.server.preview.listen = listen.map(String::from);
        s
    }

    #[test]
    fn the_base_is_configured_never_the_host_header() {
        let none = Listeners::default();
        let tcp = Listeners {
            main: Some("127.0.0.1:8080".parse().unwrap()),
            preview: None,
        };
        assert_eq!(public_base(&settings(None, None, None), &none), None);
        assert_eq!(
            public_base(&settings(None, None, None), &tcp).as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            public_base(
                &settings(Some("https://svc.example.com/"), None, None),
                &tcp
            )
            .as_deref(),
            Some("https://svc.example.com")
        );
        let s = settings(
            Some("https://svc.example.com"),
            Some("https://preview.example.net"),
            None,
        );
        assert_eq!(
            public_base(&s, &tcp).as_deref(),
            Some("https://preview.example.net")
        );
        let mut api = Settings::default();
        api.server.api.url = Some("https://api.example.com/api/v1".into());
        assert_eq!(
            public_base(&api, &none).as_deref(),
            Some("https://api.example.com")
        );
    }

    #[test]
    fn only_another_host_keeps_the_pages_origin() {
        let l = Listeners {
            main: Some("127.0.0.1:8080".parse().unwrap()),
            preview: Some("127.0.0.1:8081".parse().unwrap()),
        };
        // Fallback: under the UI's origin.
        assert!(!has_own_host(&settings(None, None, None), &l));
        // Another port of the same host: cookies are shared, so no.
        assert!(!has_own_host(
            &settings(None, None, Some("127.0.0.1:8081")),
            &l
        ));
        // Another host name: yes.
        let s = settings(
            Some("https://svc.example.com"),
            Some("https://preview.example.net"),
            None,
        );
        assert!(has_own_host(&s, &l));
        let same = settings(
            Some("https://svc.example.com"),
            Some("https://SVC.example.com:444"),
            None,
        );
        assert!(!has_own_host(&same, &l));
        // A host sharing the UI's parent domain could toss cookies onto the UI: no.
        for related in [
            "https://preview.example.com",
            "https://p.svc.example.com",
            "https://run-1.preview.example.com",
        ] {
            let s = settings(Some("https://svc.example.com"), Some(related), None);
            assert!(!has_own_host(&s, &l), "{related}");
        }
        let parent = settings(
            Some("https://example.com"),
            Some("https://p.example.com"),
            None,
        );
        assert!(!has_own_host(&parent, &l));
        // The UI on an address, previews on a name (Chromium's `*.localhost`): yes.
        let ip = settings(
            Some("http://127.0.0.1:8080"),
            Some("http://preview.localhost:8080"),
            None,
        );
        assert!(has_own_host(&ip, &l));
    }

    #[test]
    fn the_preview_host_is_told_by_host_with_or_without_the_default_port() {
        let url = "https://Preview.example.net";
        for yes in [
            "preview.example.net",
            "PREVIEW.example.net:443",
            " preview.example.net ",
        ] {
            assert!(host_names(yes, url), "{yes}");
        }
        for no in [
            "preview.example.net:8443",
            "preview.example.net:80",
            "svc.example.com",
            "preview.example.net.evil",
            "",
        ] {
            assert!(!host_names(no, url), "{no}");
        }
        assert!(host_names("p.test", "http://p.test:80/"));
        assert!(host_names("p.test:8080", "http://p.test:8080"));
        assert!(!host_names("p.test", "http://p.test:8080"));
    }

    #[test]
    fn hosts_that_can_share_cookies_are_related() {
        for (a, b) in [
            ("svc.example.com", "svc.example.com"),
            ("svc.example.com", "SVC.example.com."),
            ("example.com", "p.example.com"),
            ("svc.example.com", "p.svc.example.com"),
            ("svc.example.com", "preview.example.com"),
            ("a.example.co.uk", "b.other.co.uk"),
            ("a.localhost", "b.localhost"),
            ("localhost", "p.localhost"),
            ("127.0.0.1", "127.0.0.1"),
        ] {
            assert!(cookie_related(a, b), "{a} {b}");
            assert!(cookie_related(b, a), "{b} {a}");
        }
        for (a, b) in [
            ("svc.example.com", "svc-preview.example.net"),
            ("svc.example.com", "example.net"),
            ("127.0.0.1", "127.0.0.2"),
            ("127.0.0.1", "preview.localhost"),
            ("::1", "preview.localhost"),
            ("svc.internal", "preview.lan"),
        ] {
            assert!(!cookie_related(a, b), "{a} {b}");
            assert!(!cookie_related(b, a), "{b} {a}");
        }
        assert!(sandbox_policy(true).contains("allow-same-origin"));
        assert!(!sandbox_policy(false).contains("allow-same-origin"));
    }
}
