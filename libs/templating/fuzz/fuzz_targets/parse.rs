//! Fuzzes the template parser and validator: any input gives a template or a list of
//! problems, never a panic, a hang or unbounded memory.
#![no_main]

use std::sync::LazyLock;

use cairn_templating::{Library, Limits};
use libfuzzer_sys::fuzz_target;

static LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/modules");
    Library::load_dir(std::path::Path::new(dir)).expect("fixture modules load")
});

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Err(problems) = cairn_templating::check(text, &Limits::default(), &LIBRARY) {
            assert!(!problems.is_empty());
        }
    }
});
