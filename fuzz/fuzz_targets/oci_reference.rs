//! OCI image reference parsing: any string parses or is refused with a reason, and a parsed
//! reference printed in full parses back to itself (the form digest pinning writes).
#![no_main]

use gangplank::images::reference::Reference;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(image) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(r) = Reference::parse(image) {
        let full = r.to_string();
        match Reference::parse(&full) {
            Ok(again) => assert_eq!(again, r, "{image:?} printed as {full:?}"),
            Err(e) => panic!("{image:?} printed as {full:?} does not parse: {e}"),
        }
        let _ = (r.api_host(), r.manifest_reference());
    }
});
