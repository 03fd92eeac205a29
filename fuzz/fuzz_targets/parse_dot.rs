//! DOT text: the parser never panics; a parsed graph printed with `to_dot` parses again to
//! the same model; loading (transforms + lint) never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use svc::dot;
use svc::workflow::{self, NoFiles};

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(g) = dot::parse(src) {
        let printed = dot::to_dot(&g);
        let again = match dot::parse(&printed) {
            Ok(a) => a,
            Err(e) => panic!("printed graph does not parse: {e}\n--- printed ---\n{printed}"),
        };
        assert!(
            g.same_model(&again),
            "printed graph parses to a different model\n--- printed ---\n{printed}"
        );
    }
    // NoFiles: `@path` references must not make the fuzzer read the disk.
    let _ = workflow::load(src, &NoFiles);
});
