//! Model stylesheets: parsing never panics, and the canonical text (Display) parses back to
//! the same stylesheet.
#![no_main]

use libfuzzer_sys::fuzz_target;
use svc::workflow::stylesheet::Stylesheet;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(sheet) = Stylesheet::parse(src) else {
        return;
    };
    let text = sheet.to_string();
    let again = match Stylesheet::parse(&text) {
        Ok(a) => a,
        Err(e) => panic!("printed stylesheet does not parse: {e}\n--- printed ---\n{text}"),
    };
    assert_eq!(again, sheet, "--- printed ---\n{text}");
    // Resolving never panics either.
    let _ = sheet.resolve("n", "box", &["c".to_string()]);
});
