//! `gangplank check`'s document loading (YAML or JSON, multi-document, `kind: List`,
//! AdmissionReviews): every input yields documents or named errors. Never a panic, never
//! unbounded time on nesting (the flow-depth guard) or aliases.
#![no_main]

use gangplank::review::documents::{parse_text, ReadOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut out = Vec::new();
    parse_text("fuzz.yaml", text, &ReadOptions::default(), &mut out);
    for outcome in &out {
        match outcome {
            Ok(doc) => assert!(doc.source.starts_with("fuzz.yaml#")),
            Err(e) => {
                assert!(e.source.starts_with("fuzz.yaml"), "{}", e.source);
                assert!(!e.message.is_empty());
            }
        }
    }
});
