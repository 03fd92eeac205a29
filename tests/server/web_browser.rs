//! The web UI in a real headless Chromium: runs `tests/browser/test_web.py` (Selenium with
//! Debian's chromium and chromedriver) against the real `svc` binary. Screenshots of the
//! board and a run page go to `target/web-screenshots/`.
//!
//! Required when `SVC_REQUIRE_BROWSER=1` (set by `.ci/run`, which installs the browser, the
//! driver and the Python client); otherwise skipped with a note when any of them is missing.

use std::path::Path;
use std::process::Command;

fn have_python_selenium() -> bool {
    Command::new("python3")
        .args(["-c", "import selenium"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn web_ui_end_to_end_in_chromium() {
    let required = std::env::var("SVC_REQUIRE_BROWSER").as_deref() == Ok("1");
    let chromium = std::env::var("SVC_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let driver =
        std::env::var("SVC_CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into());
    let missing: Vec<&str> = [
        (!Path::new(&chromium).exists()).then_some("chromium"),
        (!Path::new(&driver).exists()).then_some("chromedriver"),
        (!have_python_selenium()).then_some("python3 selenium"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !missing.is_empty() {
        assert!(
            !required,
            "SVC_REQUIRE_BROWSER=1 but {} missing",
            missing.join(", ")
        );
        eprintln!(
            "note: skipping the browser test: {} not installed (set SVC_REQUIRE_BROWSER=1 to require it)",
            missing.join(", ")
        );
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = root.join("target").join("web-screenshots");
    let status = Command::new("python3")
        .arg(root.join("tests/browser/test_web.py"))
        .args(["--bin", env!("CARGO_BIN_EXE_svc"), "--out"])
        .arg(&out)
        .status()
        .expect("run python3");
    assert!(
        status.success(),
        "the browser test failed (see its output above)"
    );
    for shot in ["board.png", "run-page.png"] {
        assert!(out.join(shot).exists(), "screenshot {shot} missing");
    }
}
