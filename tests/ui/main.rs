//! The dashboard in a real browser: `tests/ui/browser.py` drives Debian's
//! Chromium with Playwright against the `tartan` binary (docs/ui.md, "The
//! browser test"). Without Chromium or the Python packages it says
//! SKIPPED, and with `CI` set it fails: `.ci/run` installs them.

use std::path::Path;
use std::process::Command;

fn chromium() -> String {
    std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into())
}

/// Why the browser test cannot run here, if it cannot.
fn missing() -> Option<String> {
    if !Path::new(&chromium()).exists() {
        return Some(format!(
            "no Chromium at {} (apt-get install chromium)",
            chromium()
        ));
    }
    let python = Command::new("python3")
        .args(["-c", "import playwright, axe_playwright_python"])
        .output();
    match python {
        Ok(out) if out.status.success() => None,
        _ => Some("no Playwright for python3 (pip install -r tests/ui/requirements.txt)".into()),
    }
}

#[test]
fn the_dashboard_works_in_a_real_browser() {
    if let Some(why) = missing() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the browser test cannot run: {why}"
        );
        eprintln!("SKIPPED: {why}");
        return;
    }
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui");
    let status = Command::new("python3")
        .arg("browser.py")
        .arg(env!("CARGO_BIN_EXE_tartan"))
        .current_dir(&folder)
        .env_remove("UI_SCREENSHOTS")
        .status();
    match status {
        Ok(s) => assert!(s.success(), "tests/ui/browser.py failed: {s}"),
        Err(e) => panic!("python3 tests/ui/browser.py: {e}"),
    }
}
