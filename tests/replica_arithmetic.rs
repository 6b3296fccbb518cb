//! No arithmetic bypass: replica counts and GPU quantities at the extremes (i64 max and min,
//! u64 max, negatives, floats, strings, null) never panic the decision and never get a job
//! admitted that a gang could not run. Run in debug (overflow panics) and in release
//! (overflow wraps): `cargo test --test replica_arithmetic [--release]`.

use std::sync::OnceLock;

use gangplank::policy::PolicySet;
use gangplank::review::{self, Input};
use proptest::prelude::*;
use serde_json::{json, Value};

/// The bound of the replicas policy (maxReplicasPerType).
const MAX_REPLICAS: i64 = 10_000;

fn shipped() -> &'static PolicySet {
    static SET: OnceLock<PolicySet> = OnceLock::new();
    SET.get_or_init(|| PolicySet::load(&policies_dir()).expect("shipped policies load"))
}

fn policies_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies")
}

/// The shipped policies with the replica bound lifted, so that only checked arithmetic
/// stands between an overflowing total and an admitted job.
fn unbounded() -> &'static PolicySet {
    static SET: OnceLock<PolicySet> = OnceLock::new();
    SET.get_or_init(|| {
        let mut sources = gangplank::policy::load::PolicySources::read_dir(&policies_dir())
            .expect("shipped policies read");
        let lift: gangplank::policy::ParamsFile = serde_json::from_value(json!({
            "policies": {"replicas": {"params": {"maxReplicasPerType": i64::MAX}}}
        }))
        .expect("overlay");
        sources.params.overlay(&lift);
        PolicySet::compile(sources).expect("policies compile")
    })
}

/// Master is 1 (or unset) often enough for the allowed branch to be explored.
fn master_count() -> impl Strategy<Value = Value> {
    prop_oneof![3 => Just(json!(1)), 1 => Just(Value::Null), 3 => extreme()]
}

/// A GPU quantity: plain most of the time, extreme otherwise.
fn gpu_count() -> impl Strategy<Value = Value> {
    prop_oneof![2 => Just(json!(8)), 1 => Just(json!(0)), 3 => extreme()]
}

/// A replica count or GPU quantity as a manifest could carry it.
fn extreme() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(i64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(u64::MAX)),
        Just(json!(i64::MAX - 1)),
        Just(json!(MAX_REPLICAS)),
        Just(json!(MAX_REPLICAS + 1)),
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(1.5)),
        Just(json!(1e300)),
        Just(json!(-0.0)),
        Just(json!("8")),
        Just(json!("9223372036854775808")),
        Just(json!("nine")),
        Just(Value::Null),
        (1i64..20).prop_map(|n| json!(n)),
        any::<i64>().prop_map(|n| json!(n)),
    ]
}

fn job(master: &Value, worker: &Value, gpus: &Value, sidecar_gpus: &Value) -> Value {
    let image = "registry.example.com/ml/train:1.0@sha256:0000000000000000000000000000000000000000000000000000000000000001";
    let pod = |g: &Value| {
        json!({"spec": {"containers": [
            {"name": "pytorch", "image": image, "resources": {"limits": {"nvidia.com/gpu": g}}},
            {"name": "sidecar", "image": image, "resources": {"limits": {"nvidia.com/gpu": sidecar_gpus}}},
        ]}})
    };
    json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "extreme", "namespace": "team-a"},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": master, "template": pod(gpus)},
            "Worker": {"replicas": worker, "template": pod(gpus)},
        }},
    })
}

/// A replica count the operator would run: a JSON integer, or the default (1) when null.
fn admissible_count(v: &Value) -> Option<i128> {
    match v {
        Value::Null => Some(1),
        Value::Number(n) => n.as_i64().map(i128::from),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn extreme_counts_never_panic_and_never_admit_an_ungangable_job(
        master in master_count(), worker in extreme(), gpus in gpu_count(), sidecar in gpu_count(),
    ) {
        check(shipped(), MAX_REPLICAS, &master, &worker, &gpus, &sidecar)?;
    }

    #[test]
    fn with_the_bound_lifted_overflowing_totals_are_still_refused(
        master in master_count(), worker in extreme(), gpus in gpu_count(), sidecar in gpu_count(),
    ) {
        check(unbounded(), i64::MAX, &master, &worker, &gpus, &sidecar)?;
    }
}

/// The decision on the job with these counts: no panic, no evaluation error, and if
/// admitted, counts the operator can run, every pod gang-scheduled and GPU totals that fit.
fn check(
    set: &PolicySet,
    max_replicas: i64,
    master: &Value,
    worker: &Value,
    gpus: &Value,
    sidecar: &Value,
) -> Result<(), TestCaseError> {
    {
        let object = job(master, worker, gpus, sidecar);
        let decision = review::review(set, &Input::create(object, "default"));
        let decision = match decision {
            Ok(d) => d,
            // Failing closed is not a bypass; the shipped policies should not fail, though.
            Err(e) => return Err(TestCaseError::fail(format!("evaluation failed: {e}"))),
        };
        if !decision.allowed() {
            return Ok(());
        }
        let (m, w) = (admissible_count(master), admissible_count(worker));
        prop_assert!(m == Some(1), "admitted with Master replicas {master}");
        let w = w.ok_or_else(|| {
            TestCaseError::fail(format!("admitted with Worker replicas {worker}"))
        })?;
        prop_assert!(
            (1..=i128::from(max_replicas)).contains(&w),
            "admitted with Worker replicas {w}"
        );
        let pods = 1 + w;
        prop_assert!(
            pods <= i128::from(i64::MAX),
            "admitted {pods} pods, past i64"
        );
        let mutated = &decision.mutated;
        for t in ["Master", "Worker"] {
            let scheduler =
                &mutated["spec"]["pytorchReplicaSpecs"][t]["template"]["spec"]["schedulerName"];
            prop_assert_eq!(scheduler, &json!("volcano"), "{} has no gang scheduler", t);
        }
        let min = mutated["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"].as_i64();
        prop_assert_eq!(
            min.map(i128::from),
            Some(pods),
            "minAvailable is not every pod"
        );
        let count = |g: &Value| -> Option<i128> {
            match g {
                Value::Null => Some(0),
                // A whole float counts as its integer (-0.0 is 0 devices).
                Value::Number(n) => n
                    .as_i64()
                    .map(i128::from)
                    .or_else(|| {
                        n.as_f64()
                            .filter(|f| f.fract() == 0.0 && f.abs() < 1e19)
                            .map(|f| f as i128)
                    })
                    .filter(|n| *n >= 0),
                Value::String(s) => s.parse::<i64>().ok().filter(|n| *n >= 0).map(i128::from),
                _ => None,
            }
        };
        let per_pod = count(gpus).zip(count(sidecar)).map(|(a, b)| a + b);
        prop_assert!(
            per_pod.is_some_and(|n| n <= i128::from(i64::MAX)),
            "admitted with GPU quantities {gpus} and {sidecar}"
        );
        Ok(())
    }
}
