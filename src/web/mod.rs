//! The web UI (SPEC 1.9 `server.web.*`): the pages and assets the binary serves to browsers,
//! and the workflow graph drawn as SVG ([`graph`]).
//!
//! Plain HTML, CSS and vanilla JavaScript embedded with `include_str!`: no build step, no
//! external asset, no inline script or style, so the strict [`CSP`] holds. Every page is
//! the same shell (header, `<main>`) plus `common.js` and one page script, which fetch the
//! JSON API and follow its SSE streams with the browser's own session cookie (or the
//! `svc-demo=1` cookie, SPEC 1.12).
//!
//! Owns: page markup, assets, their headers, and graph layout. Must not touch: HTTP
//! routing, authentication or run state (the server's `pages` glue serves what this module
//! returns; the pages read everything else through the public API).

pub mod graph;

/// The Content-Security-Policy of every page and asset: only our own scripts, styles and
/// connections; no inline code, no framing, forms post only to us.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// Largest allowed asset (the quality bar).
pub const MAX_ASSET_BYTES: usize = 100 * 1024;

/// One embedded file under `/assets/`.
pub struct Asset {
    pub name: &'static str,
    pub content_type: &'static str,
    pub body: &'static str,
}

pub const ASSETS: &[Asset] = &[
    Asset {
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("assets/app.css"),
    },
    Asset {
        name: "common.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/common.js"),
    },
    Asset {
        name: "board.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/board.js"),
    },
    Asset {
        name: "run.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/run.js"),
    },
    Asset {
        name: "newrun.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/newrun.js"),
    },
    Asset {
        name: "automations.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/automations.js"),
    },
    Asset {
        name: "automation.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/automation.js"),
    },
    Asset {
        name: "settings.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/settings.js"),
    },
    Asset {
        name: "insights.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/insights.js"),
    },
    Asset {
        name: "environments.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/environments.js"),
    },
    Asset {
        name: "signin.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/signin.js"),
    },
];

const SHELL: &str = include_str!("assets/shell.html");

/// An embedded asset by file name.
pub fn asset(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.name == name)
}

/// The pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    Board,
    NewRun,
    Run,
    SignIn,
    SignOut,
    Automations,
    Automation,
    Settings,
    Insights,
    Environments,
}

impl Page {
    pub const ALL: [Page; 10] = [
        Page::Board,
        Page::NewRun,
        Page::Run,
        Page::SignIn,
        Page::SignOut,
        Page::Automations,
        Page::Automation,
        Page::Settings,
        Page::Insights,
        Page::Environments,
    ];

    fn name(self) -> &'static str {
        match self {
            Page::Board => "board",
            Page::NewRun => "new-run",
            Page::Run => "run",
            Page::SignIn => "sign-in",
            Page::SignOut => "sign-out",
            Page::Automations => "automations",
            Page::Automation => "automation",
            Page::Settings => "settings",
            Page::Insights => "insights",
            Page::Environments => "environments",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Page::Board => "Runs",
            Page::NewRun => "New run",
            Page::Run => "Run",
            Page::SignIn => "Sign in",
            Page::SignOut => "Sign out",
            Page::Automations => "Automations",
            Page::Automation => "Automation",
            Page::Settings => "Settings",
            Page::Insights => "Insights",
            Page::Environments => "Environments",
        }
    }

    fn script(self) -> &'static str {
        match self {
            Page::Board => "board.js",
            Page::NewRun => "newrun.js",
            Page::Run => "run.js",
            Page::SignIn | Page::SignOut => "signin.js",
            Page::Automations => "automations.js",
            Page::Automation => "automation.js",
            Page::Settings => "settings.js",
            Page::Insights => "insights.js",
            Page::Environments => "environments.js",
        }
    }
}

/// The shell's sign-out link: not on the sign-in page, where nobody is signed in.
const SIGN_OUT_LINK: &str = "<a href=\"/logout\" id=\"nav-signout\">Sign out</a>";

/// The page's HTML.
pub fn render(page: Page) -> String {
    let html = SHELL
        .replace("{{title}}", page.title())
        .replace("{{page}}", page.name())
        .replace("{{script}}", page.script());
    match page {
        Page::SignIn => html.replace(SIGN_OUT_LINK, ""),
        _ => html,
    }
}

/// Headers every page and asset carries besides its content type.
pub fn security_headers() -> [(&'static str, &'static str); 5] {
    [
        ("Content-Security-Policy", CSP),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "same-origin"),
        ("X-Frame-Options", "DENY"),
        ("Cache-Control", "no-cache"),
    ]
}

/// Bytes a browser downloads for `page` (HTML, stylesheet and scripts, uncompressed).
pub fn page_weight(page: Page) -> usize {
    let html = render(page);
    let linked: usize = ASSETS
        .iter()
        .filter(|a| html.contains(&format!("/assets/{}", a.name)))
        .map(|a| a.body.len())
        .sum();
    html.len() + linked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_asset_over_100_kib_and_no_page_over_150_kib() {
        for a in ASSETS {
            assert!(
                a.body.len() <= MAX_ASSET_BYTES,
                "{} is {} bytes",
                a.name,
                a.body.len()
            );
        }
        for p in Page::ALL {
            assert!(
                page_weight(p) <= 150 * 1024,
                "{p:?} weighs {}",
                page_weight(p)
            );
        }
    }

    #[test]
    fn only_the_sign_in_page_has_no_sign_out_link() {
        for p in Page::ALL {
            assert_eq!(
                render(p).contains("Sign out</a>"),
                p != Page::SignIn,
                "{p:?}"
            );
        }
    }

    #[test]
    fn pages_link_only_embedded_assets_and_nothing_inline() {
        for p in Page::ALL {
            let html = render(p);
            assert!(!html.contains("{{"), "{p:?} has an unfilled slot");
            for part in html.split("/assets/").skip(1) {
                let name: String = part.chars().take_while(|c| *c != '"').collect();
                assert!(asset(&name).is_some(), "{p:?} links missing {name}");
            }
            // The CSP forbids inline code: every script has a src, no style attributes or
            // event-handler attributes, no external URLs.
            assert_eq!(
                html.matches("<script").count(),
                html.matches("<script src=\"/assets/").count()
            );
            for bad in [
                " style=",
                "<style",
                " onclick=",
                " onload=",
                "http://",
                "https://",
            ] {
                assert!(!html.contains(bad), "{p:?} contains {bad}");
            }
        }
        for a in ASSETS {
            for bad in [
                "http://",
                "https://",
                "eval(",
                "new Function",
                "innerHTML",
                "document.write",
            ] {
                let hits = a.body.matches(bad).count()
                    - a.body.matches("http://www.w3.org/2000/svg").count()
                        * usize::from(bad == "http://");
                assert_eq!(hits, 0, "{} uses {bad}", a.name);
            }
        }
    }
}
