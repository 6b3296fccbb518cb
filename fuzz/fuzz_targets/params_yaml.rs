//! `params.yaml` loading: a parameters file or an error naming the file. Never a panic.
#![no_main]

use gangplank::policy::ParamsFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ParamsFile::parse(text, "params.yaml") {
        Ok(mut params) => {
            let other = params.clone();
            params.overlay(&other);
        }
        Err(e) => assert!(e.starts_with("params.yaml"), "{e}"),
    }
});
