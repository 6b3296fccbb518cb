//! GPU-like extended resources of a container: whole GPUs (`nvidia.com/gpu`, `amd.com/gpu`)
//! and MIG slices (`nvidia.com/mig-1g.10gb`). Extended resources must be whole numbers and
//! their request must equal their limit; the view records both so policies can check that.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::problem::{type_name, Problem};
use crate::pointer;

/// Prefix of MIG resources under the device plugin's `mixed` strategy.
pub const MIG_PREFIX: &str = "nvidia.com/mig-";

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GpuResource {
    pub name: String,
    pub request: Option<i64>,
    pub limit: Option<i64>,
}

impl GpuResource {
    /// What the container gets: the limit, else the request (the apiserver copies a lone
    /// limit of an extended resource into the request).
    pub fn count(&self) -> i64 {
        self.limit.or(self.request).unwrap_or(0)
    }

    pub fn is_whole_gpu(&self) -> bool {
        is_whole_gpu(&self.name)
    }

    pub fn is_mig(&self) -> bool {
        self.name.starts_with(MIG_PREFIX)
    }
}

fn is_whole_gpu(name: &str) -> bool {
    name.ends_with("/gpu")
}

fn is_gpu_like(name: &str) -> bool {
    is_whole_gpu(name) || name.starts_with(MIG_PREFIX)
}

/// Collects GPU-like resources from a container's `resources`, in name order.
pub fn gpu_resources(
    resources: Option<&Value>,
    path: &str,
    problems: &mut Vec<Problem>,
) -> Vec<GpuResource> {
    let mut found: BTreeMap<&str, GpuResource> = BTreeMap::new();
    for side in ["requests", "limits"] {
        let Some(map) = resources
            .and_then(|r| r.get(side))
            .and_then(Value::as_object)
        else {
            continue;
        };
        for (name, qty) in map.iter().filter(|(n, _)| is_gpu_like(n)) {
            let Some(n) = whole_number(qty) else {
                problems.push(Problem {
                    path: pointer::join(path, [side, name.as_str()]),
                    msg: format!(
                        "{name} must be a whole number of devices, got {} {qty}",
                        type_name(qty)
                    ),
                });
                continue;
            };
            let entry = found.entry(name).or_insert_with(|| GpuResource {
                name: name.clone(),
                request: None,
                limit: None,
            });
            if side == "requests" {
                entry.request = Some(n);
            } else {
                entry.limit = Some(n);
            }
        }
    }
    found.into_values().collect()
}

/// A device count: a whole, non-negative number written as a JSON number or a quantity
/// string ("8", "1.0"); the apiserver normalises "1.0" to "1".
fn whole_number(v: &Value) -> Option<i64> {
    let f = match v {
        Value::Number(n) => match n.as_i64() {
            Some(i) => return (i >= 0).then_some(i),
            None => n.as_f64()?,
        },
        Value::String(s) => match s.parse::<i64>() {
            Ok(i) => return (i >= 0).then_some(i),
            Err(_) => s.parse::<f64>().ok()?,
        },
        _ => return None,
    };
    // `i64::MAX as f64` rounds up to 2^63, which does not fit: strictly below it the cast is
    // exact, at it the cast would saturate and 2^63 devices would read as i64::MAX.
    let whole = f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f < i64::MAX as f64;
    whole.then_some(f as i64)
}
