//! The web UI in a real headless Chromium: runs `tests/browser/test_web.py` (Selenium with
//! Debian's chromium and chromedriver) against the real `svc` binary. Screenshots of the
//! board and a run page go to `target/web-screenshots/`; `tests/browser/test_security.py`
//! attacks the signed-in user from a preview, a hostile `next` and a framed install page;
//! `tests/browser/test_page_loads.py` loads pages in fresh browser contexts and counts stalls;
//! `tests/browser/test_insights.py` drives the insights page as an admin and as a user who
//! is not one; `test_environments.py` drives the environments page and the
//! new-run form's environment chooser.
//!
//! Needs Chromium, chromedriver and Python's selenium: where the build did not find them
//! the test is reported as ignored with the install command; under `SVC_REQUIRE_BROWSER=1`
//! (set by `.ci/run`, which installs them) it runs, and fails when one is missing
//! (`svc::internal::test_tools`). `SVC_CHROMIUM` / `SVC_CHROMEDRIVER` override where they are.

use std::path::Path;
use std::process::Command;
use svc::internal::test_tools::{chromedriver, chromium, require, Tool};

/// Runs `tests/browser/<script>` with Python against the real binary, in the Chromium and
/// chromedriver the build found; answers whether it exited 0 (its checks print as it goes).
fn browser_script(script: &str, args: &[&str]) -> bool {
    browser_script_with_env(script, args, &[])
}

/// [`browser_script`] with more environment for the script and the server it starts.
fn browser_script_with_env(script: &str, args: &[&str], env: &[(&str, String)]) -> bool {
    let (chromium, driver) = (
        chromium().unwrap_or_default(),
        chromedriver().unwrap_or_default(),
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    Command::new("python3")
        .arg(root.join("tests/browser").join(script))
        .args(["--bin", env!("CARGO_BIN_EXE_svc")])
        .args(args)
        .env("SVC_CHROMIUM", &chromium)
        .env("SVC_CHROMEDRIVER", &driver)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .status()
        .expect("run python3")
        .success()
}

#[test]
#[cfg_attr(
    not(has_browser),
    ignore = "needs Chromium, chromedriver and Python's selenium: apt-get install chromium chromium-driver && pip install selenium"
)]
fn web_ui_end_to_end_in_chromium() {
    require(Tool::Browser);
    let out = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("web-screenshots");
    let out_arg = out.to_string_lossy();
    assert!(
        browser_script("test_web.py", &["--out", &out_arg]),
        "the browser test failed (see its output above)"
    );
    for shot in ["board.png", "run-page.png"] {
        assert!(out.join(shot).exists(), "screenshot {shot} missing");
    }
}

/// The threat model's browser half (`tests/browser/test_security.py`): a page served by
/// workflow code through a preview, opened by a signed-in user, tries to read
/// `/api/v1/user`, to POST to the API with the user's cookie, to set cookies on svc's
/// origin (or its parent domain) and to frame the UI, with previews on the UI's origin, on
/// a listener of their own, on a host of their own (`preview.localhost`, where the page
/// keeps its origin) and on a host under the UI's domain: each fails and the session is
/// intact. Also: the sign-in page's script never leaves
/// the site for a hostile `next`, and the install wizard works under its CSP and cannot be
/// framed.
#[test]
#[cfg_attr(
    not(all(has_browser, has_git)),
    ignore = "needs Chromium, chromedriver and Python's selenium and git: apt-get install chromium chromium-driver && pip install selenium; apt-get install git"
)]
fn previews_and_sign_in_cannot_be_turned_against_the_user_in_chromium() {
    require(Tool::Browser);
    require(Tool::Git);
    assert!(
        browser_script("test_security.py", &[]),
        "the browser security test failed (see its output above)"
    );
}

/// Page loads never stall (`tests/browser/test_page_loads.py`): the sign-in page loaded 200
/// times, each in a fresh browser context (its own connections), beside a connected context
/// and 20 open SSE streams; every load completes.
#[test]
#[cfg_attr(
    not(has_browser),
    ignore = "needs Chromium, chromedriver and Python's selenium: apt-get install chromium chromium-driver && pip install selenium"
)]
fn page_loads_in_fresh_browser_contexts_never_stall() {
    require(Tool::Browser);
    assert!(
        browser_script("test_page_loads.py", &["--loads", "200"]),
        "a page load stalled (see the output above)"
    );
}

/// The settings page (`tests/browser/test_settings.py`, issue 29): keys stored through its
/// form, "Test providers" against two scripted local providers (one works, one refuses the
/// key and the page says so in the provider's words), a key removed, integrations and run
/// defaults shown; the board shows today's spend against the daily cap.
#[test]
#[cfg_attr(
    not(has_browser),
    ignore = "needs Chromium, chromedriver and Python's selenium: apt-get install chromium chromium-driver && pip install selenium"
)]
fn settings_page_tests_providers_and_manages_secrets_in_chromium() {
    require(Tool::Browser);
    assert!(
        browser_script("test_settings.py", &[]),
        "the settings browser test failed (see its output above)"
    );
}

/// The insights page (`tests/browser/test_insights.py`, issue 29): the documented example
/// (runs per day by status) over real runs in one click, its table equal to the API's answer
/// and an SVG chart with one bar, then one point, per row; `DELETE FROM runs` refused in the
/// server's words; a query saved, found after a reload, loaded back, replaced and deleted
/// (If-Match); the layout at 1280 px and phone width (screenshots); and `bob`, signed in
/// with a JWT but no admin rights, told that insights are for admins.
#[test]
#[cfg_attr(
    not(has_browser),
    ignore = "needs Chromium, chromedriver and Python's selenium: apt-get install chromium chromium-driver && pip install selenium"
)]
fn insights_page_runs_charts_and_saves_queries_in_chromium() {
    use ed25519_dalek::pkcs8::EncodePublicKey;
    require(Tool::Browser);
    let key = ed25519_dalek::SigningKey::from_bytes(&[29u8; 32]);
    let pem = key
        .verifying_key()
        .to_public_key_pem(Default::default())
        .expect("pem");
    let bob = crate::operator::bearer(&key, "bob");
    let bob = bob.trim_start_matches("Bearer ");
    let out = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("web-screenshots");
    let out_arg = out.to_string_lossy();
    assert!(
        browser_script_with_env(
            "test_insights.py",
            &["--out", &out_arg, "--bob-bearer", bob],
            &[("SVC_JWT_PUBLIC_KEY", pem)],
        ),
        "the insights browser test failed (see its output above)"
    );
    for shot in [
        "insights-1280.png",
        "insights-phone.png",
        "insights-not-admin.png",
    ] {
        assert!(out.join(shot).exists(), "screenshot {shot} missing");
    }
}

/// The environments page and the new-run form's chooser (`tests/browser/test_environments.py`,
/// issue 30): the page linked from the header lists the seeded `default` with each
/// provider's preflight; an environment created through the form is listed with its variable
/// by name only; refusals show beside the fields they name; an edit saves with the revision
/// and a stale one is refused with the 409 in words; a run started from the new-run form with
/// it chosen shows it on its page and its frozen plan names it; `[run] environment` is the
/// one preselected when set; a stale delete is refused, a fresh one leaves the run alone;
/// screenshots at 1280 px and phone width, nothing wider than the screen.
#[test]
#[cfg_attr(
    not(has_browser),
    ignore = "needs Chromium, chromedriver and Python's selenium: apt-get install chromium chromium-driver && pip install selenium"
)]
fn environments_page_and_chooser_in_chromium() {
    require(Tool::Browser);
    let out = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("web-screenshots");
    let out_arg = out.to_string_lossy();
    assert!(
        browser_script("test_environments.py", &["--out", &out_arg]),
        "the environments browser test failed (see its output above)"
    );
    for shot in ["environments.png", "phone-environments.png"] {
        assert!(out.join(shot).exists(), "screenshot {shot} missing");
    }
}
