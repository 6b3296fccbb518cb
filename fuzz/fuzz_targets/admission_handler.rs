//! The whole `/mutate` and `/validate` handler with the shipped policies: decode, evaluate,
//! encode. Every body gets an answer: HTTP 400 with text, or HTTP 200 with an
//! AdmissionReview response carrying the request's uid. Never a panic.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use gangplank::admission::handler::{self, Context, Limits};
use gangplank::admission::metrics::Endpoint;
use gangplank::admission::{Metrics, PolicyStore};
use libfuzzer_sys::fuzz_target;

struct Fixture {
    rt: tokio::runtime::Runtime,
    ctx: Context,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
        let store = PolicyStore::load(&dir).unwrap_or_else(|e| panic!("policies: {e}"));
        let ctx = Context::new(
            Arc::new(store),
            Arc::new(Metrics::new()),
            Arc::default(),
            Limits {
                eval_timeout: Duration::from_secs(10),
                max_evaluations: 1,
                max_values: gangplank::admission::server::DEFAULT_MAX_REVIEW_VALUES,
            },
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("runtime: {e}"));
        Fixture { rt, ctx }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let endpoint = if selector & 1 == 0 {
        Endpoint::Mutate
    } else {
        Endpoint::Validate
    };
    let f = fixture();
    let answer = f.rt.block_on(handler::admit(&f.ctx, endpoint, body));
    match answer.http_status {
        400 => assert!(!answer.json, "a refused call is answered in text"),
        200 => {
            let v: serde_json::Value =
                serde_json::from_slice(&answer.body).unwrap_or_else(|e| panic!("JSON: {e}"));
            let uid = v.pointer("/response/uid").and_then(|u| u.as_str());
            assert!(uid.is_some_and(|u| !u.is_empty()), "{v}");
            assert!(
                v.pointer("/response/allowed")
                    .is_some_and(|a| a.is_boolean()),
                "{v}"
            );
        }
        other => panic!("unexpected HTTP status {other}"),
    }
});
