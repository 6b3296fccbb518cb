//! AdmissionReview decoding: any body either is a review with a uid (and then an `Input`
//! or an `invalid` reason) or is refused with a message. Never a panic.
#![no_main]

use gangplank::admission::review;
use gangplank::review::Input;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    if let Ok(r) = review::parse(body) {
        assert!(!r.uid.is_empty(), "a parsed review always has a uid");
        if let Ok(input) = Input::from_review(r.value) {
            // The Rego input document is built for every evaluable request.
            let _ = input.rego_input_for(&input.object);
        }
        // Both answers the server may give encode without a panic.
        let _ = review::Verdict::allow().encode(&r.uid);
        let _ = review::Verdict::invalid("x".into()).encode(&r.uid);
    }
});
