//! What one pod of a replica type asks the scheduler for: every resource of its requests,
//! as kube-scheduler's NodeResourcesFit adds them up.
//!
//! Entry point: [`pod_requests`]. The rule is Kubernetes' effective request
//! (`resourcehelper.PodRequests`): the regular containers' requests summed, sidecars
//! (init containers with `restartPolicy: Always`) added to that sum, the maximum taken with
//! each ordinary init container (plus the sidecars started before it), then the pod's
//! `overhead` added. A resource a container limits without requesting is requested at its
//! limit, as the apiserver defaults it. Pod-level `resources` (PodLevelResources) replace the
//! containers' cpu and memory.
//!
//! Units: `cpu` in millicores, every other resource in whole units (bytes for memory,
//! ephemeral-storage and hugepages), rounded up as `Quantity.MilliValue()`/`Value()` round.
//! Quantities that do not parse count as nothing: the apiserver refuses such a pod anyway.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Map, Value};

use super::quantity::Nanos;

/// Nano-units per milli-unit and per unit.
const NANO_PER_MILLI: i128 = 1_000_000;
const NANO_PER_UNIT: i128 = 1_000_000_000;

/// Resources pod-level `resources` may set (the others stay per container).
const POD_LEVEL: &[&str] = &["cpu", "memory"];

/// Resource → amount one pod requests, without zero amounts; see the module doc for units.
pub fn pod_requests(pod_spec: Option<&Map<String, Value>>) -> BTreeMap<String, i64> {
    requests_with(pod_spec, &[])
}

/// kube-scheduler's scoring defaults for a container that requests no cpu or no memory
/// (`schedutil.DefaultMilliCPURequest`, `DefaultMemoryRequest`): its LeastAllocated score
/// counts such a container at 100m and 200Mi, so that best-effort pods still spread.
const NON_ZERO_DEFAULTS: [(&str, i64); 2] = [("cpu", 100), ("memory", 200 * 1024 * 1024)];

/// The pod's cpu and memory as kube-scheduler's NodeResourcesFit scores them ("non-zero
/// requests"): [`pod_requests`], with [`NON_ZERO_DEFAULTS`] for each container (init
/// containers included) that leaves one unset. An explicit zero stays zero, as upstream.
pub fn non_zero_requests(pod_spec: Option<&Map<String, Value>>) -> BTreeMap<String, i64> {
    let mut all = requests_with(pod_spec, &NON_ZERO_DEFAULTS);
    all.retain(|name, _| NON_ZERO_DEFAULTS.iter().any(|(n, _)| n == name));
    all
}

/// [`pod_requests`], with `defaults` standing for what a container does not request.
fn requests_with(
    pod_spec: Option<&Map<String, Value>>,
    defaults: &[(&str, i64)],
) -> BTreeMap<String, i64> {
    let Some(spec) = pod_spec else {
        return BTreeMap::new();
    };
    let containers = |field: &str| {
        spec.get(field)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    };
    let mut total: BTreeMap<String, i64> = BTreeMap::new();
    let own = |c: &Value| {
        let mut requests = container_requests(c);
        for (name, n) in defaults {
            requests.entry((*name).to_string()).or_insert(*n);
        }
        requests
    };
    for c in containers("containers") {
        add_into(&mut total, &own(c));
    }
    let mut sidecars: BTreeMap<String, i64> = BTreeMap::new();
    let mut init_peak: BTreeMap<String, i64> = BTreeMap::new();
    for c in containers("initContainers") {
        let own = own(c);
        let running = if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            add_into(&mut total, &own);
            add_into(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut with_sidecars = sidecars.clone();
            add_into(&mut with_sidecars, &own);
            with_sidecars
        };
        for (name, n) in running {
            let peak = init_peak.entry(name).or_insert(0);
            *peak = (*peak).max(n);
        }
    }
    for (name, n) in init_peak {
        let have = total.entry(name).or_insert(0);
        *have = (*have).max(n);
    }
    pod_level(spec, containers("containers"), &mut total);
    if let Some(overhead) = spec.get("overhead").and_then(Value::as_object) {
        add_into(&mut total, &amounts(overhead));
    }
    total.retain(|_, n| *n > 0);
    total
}

/// A container's requests, each resource it only limits requested at the limit.
fn container_requests(c: &Value) -> BTreeMap<String, i64> {
    let side = |name: &str| {
        c.get("resources")
            .and_then(|r| r.get(name))
            .and_then(Value::as_object)
            .map(amounts)
            .unwrap_or_default()
    };
    let mut requests = side("requests");
    for (name, n) in side("limits") {
        requests.entry(name).or_insert(n);
    }
    requests
}

/// Pod-level requests replace the containers' sum of cpu and memory; a pod-level limit
/// stands for the request when no container asks for that resource.
fn pod_level(spec: &Map<String, Value>, containers: &[Value], total: &mut BTreeMap<String, i64>) {
    let Some(resources) = spec.get("resources") else {
        return;
    };
    let side = |name: &str| {
        resources
            .get(name)
            .and_then(Value::as_object)
            .map(amounts)
            .unwrap_or_default()
    };
    let (requests, limits) = (side("requests"), side("limits"));
    for name in POD_LEVEL {
        if let Some(&n) = requests.get(*name) {
            total.insert((*name).to_string(), n);
        } else if let Some(&n) = limits.get(*name) {
            let asked = containers
                .iter()
                .any(|c| container_requests(c).contains_key(*name));
            if !asked {
                total.insert((*name).to_string(), n);
            }
        }
    }
}

fn add_into(total: &mut BTreeMap<String, i64>, more: &BTreeMap<String, i64>) {
    for (name, &n) in more {
        let have = total.entry(name.clone()).or_insert(0);
        *have = have.saturating_add(n);
    }
}

/// A `requests`/`limits` map in the units of the module doc; unparseable amounts left out.
fn amounts(map: &Map<String, Value>) -> BTreeMap<String, i64> {
    map.iter()
        .filter_map(|(name, v)| Some((name.clone(), amount(name, v)?)))
        .collect()
}

/// One amount: millicores for cpu, else whole units, rounded up; `None` when it does not
/// parse or is negative.
pub fn amount(name: &str, v: &Value) -> Option<i64> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let Nanos(n) = Nanos::parse(&Quantity(text))?;
    if n < 0 {
        return None;
    }
    let per = if name == "cpu" {
        NANO_PER_MILLI
    } else {
        NANO_PER_UNIT
    };
    // Rounded up, as Quantity.Value() rounds (n is not negative here).
    i64::try_from(n / per + i128::from(n % per != 0)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn requests(spec: Value) -> BTreeMap<String, i64> {
        pod_requests(spec.as_object())
    }

    fn map(v: Value) -> BTreeMap<String, i64> {
        serde_json::from_value(v).unwrap_or_default()
    }

    #[test]
    fn containers_add_up_and_limits_stand_for_missing_requests() {
        let spec = json!({"containers": [
            {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            {"resources": {"limits": {"cpu": "1", "nvidia.com/gpu": 8}}},
        ]});
        assert_eq!(
            requests(spec),
            map(json!({"cpu": 1500, "memory": 1_073_741_824_i64, "nvidia.com/gpu": 8}))
        );
    }

    #[test]
    fn init_containers_count_at_their_peak_and_sidecars_throughout() {
        let spec = json!({
            "initContainers": [
                {"resources": {"requests": {"cpu": "4"}}},
                {"restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                {"resources": {"requests": {"cpu": "3", "memory": "8Gi"}}},
            ],
            "containers": [{"resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
            "overhead": {"cpu": "250m"},
        });
        // Regular 2 + sidecar 1 = 3; init peaks: 4, then 3 + 1 (the sidecar runs) = 4 cpu
        // and 8Gi; plus the overhead.
        assert_eq!(
            requests(spec),
            map(json!({"cpu": 4250, "memory": 8_589_934_592_i64}))
        );
    }

    #[test]
    fn pod_level_resources_replace_the_containers_cpu_and_memory() {
        let spec = json!({
            "resources": {"requests": {"cpu": "8"}, "limits": {"memory": "4Gi"}},
            "containers": [{"resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}}}],
        });
        assert_eq!(
            requests(spec),
            map(json!({"cpu": 8000, "memory": 4_294_967_296_i64, "nvidia.com/gpu": 1}))
        );
    }

    #[test]
    fn fractions_round_up_and_garbage_counts_as_nothing() {
        let spec = json!({"containers": [{"resources": {"requests": {
            "cpu": "0.0001", "memory": "100m", "example.com/x": "lots"}}}]});
        assert_eq!(requests(spec), map(json!({"cpu": 1, "memory": 1})));
        assert!(requests(json!({"containers": "oops"})).is_empty());
    }

    #[test]
    fn scoring_counts_a_container_without_cpu_or_memory_at_100m_and_200mi() {
        let spec = json!({
            "initContainers": [{"resources": {"requests": {"cpu": "0"}}}],
            "containers": [
                {"resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}}},
                {"resources": {"limits": {"memory": "1Gi"}}},
                {},
            ],
        });
        // cpu: 2 + 100m + 100m (the init container's explicit 0 stays 0); memory: 200Mi
        // + 1Gi + 200Mi; GPUs are not scored.
        assert_eq!(
            non_zero_requests(spec.as_object()),
            map(json!({"cpu": 2200, "memory": 1_493_172_224_i64}))
        );
        assert_eq!(
            non_zero_requests(json!({"containers": [{}]}).as_object()),
            map(json!({"cpu": 100, "memory": 209_715_200}))
        );
    }
}
