//! Kubernetes quantities, the one module that reads them for the job view, the controller and
//! the cluster inventory:
//!
//! - [`Nanos`]: just enough quantity arithmetic to sum requests (a pod's effective request, a
//!   PodGroup's minResources, a Node's allocatable): parse (`100m`, `10Mi`, `1.5`, `2e3`),
//!   add, print.
//! - [`gpu_resources`]: GPU-like extended resources of a container: whole GPUs
//!   (`nvidia.com/gpu`, `amd.com/gpu`, time-sliced `nvidia.com/gpu.shared`) and MIG slices
//!   (`nvidia.com/mig-1g.10gb`). Extended
//!   resources must be whole numbers and their request must equal their limit; the view
//!   records both so policies can check that.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
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

/// Whole GPUs, exclusive (`nvidia.com/gpu`) or shared by time-slicing/MPS under the device
/// plugin's renameByDefault (`nvidia.com/gpu.shared`): a pod's process still gets one card.
fn is_whole_gpu(name: &str) -> bool {
    name.ends_with("/gpu") || name.ends_with("/gpu.shared")
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

/// Nano-units per unit: sums are exact for every suffix Kubernetes prints.
pub const NANO: i128 = 1_000_000_000;

/// A quantity in nano-units. i128 holds 1Ei in nano-units (1.2e27) with room to spare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Nanos(pub i128);

impl Nanos {
    /// Parses a quantity; `None` for text Kubernetes would reject.
    pub fn parse(q: &Quantity) -> Option<Nanos> {
        let s = q.0.trim();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
            .unwrap_or(s.len());
        let (number, suffix) = s.split_at(split);
        let scale = scale(suffix)?;
        let (int, frac) = number.split_once('.').unwrap_or((number, ""));
        let negative = int.starts_with('-');
        let int: i128 = int
            .trim_start_matches(['+', '-'])
            .parse()
            .ok()
            .or((int.len() <= 1).then_some(0))?;
        let frac_digits = frac.len().min(18);
        let frac_value: i128 = frac.get(..frac_digits)?.parse().unwrap_or(0);
        let frac_scale = 10i128.checked_pow(u32::try_from(frac_digits).ok()?)?;
        let value = int
            .checked_mul(scale)?
            .checked_add(frac_value.checked_mul(scale)? / frac_scale)?;
        Some(Nanos(if negative { -value } else { value }))
    }

    pub fn checked_add(self, other: Nanos) -> Option<Nanos> {
        self.0.checked_add(other.0).map(Nanos)
    }

    pub fn checked_mul(self, n: i128) -> Option<Nanos> {
        self.0.checked_mul(n).map(Nanos)
    }

    /// Plain units when whole, else milli-units, else nano-units: `3`, `1500m`, `5n`.
    pub fn to_quantity(self) -> Quantity {
        let v = self.0;
        Quantity(if v % NANO == 0 {
            (v / NANO).to_string()
        } else if v % 1_000_000 == 0 {
            format!("{}m", v / 1_000_000)
        } else {
            format!("{v}n")
        })
    }
}

/// Nano-units per unit of a suffix.
fn scale(suffix: &str) -> Option<i128> {
    let binary = |p: u32| 1024i128.checked_pow(p)?.checked_mul(NANO);
    match suffix {
        "" => Some(NANO),
        "n" => Some(1),
        "u" => Some(1_000),
        "m" => Some(1_000_000),
        "k" => Some(NANO * 1_000),
        "M" => Some(NANO * 1_000_000),
        "G" => Some(NANO * 1_000_000_000),
        "T" => NANO.checked_mul(10i128.pow(12)),
        "P" => NANO.checked_mul(10i128.pow(15)),
        "E" => NANO.checked_mul(10i128.pow(18)),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        e => {
            let exp: u32 = e.strip_prefix(['e', 'E'])?.parse().ok()?;
            NANO.checked_mul(10i128.checked_pow(exp)?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Option<Nanos> {
        Nanos::parse(&Quantity(s.to_string()))
    }

    #[test]
    fn parses_decimal_binary_and_exponent_suffixes() {
        assert_eq!(q("100m"), Some(Nanos(100_000_000)));
        assert_eq!(q("1.5"), Some(Nanos(1_500_000_000)));
        assert_eq!(q("10Mi"), Some(Nanos(10 * 1024 * 1024 * NANO)));
        assert_eq!(q("2e3"), Some(Nanos(2000 * NANO)));
        assert_eq!(q("abc"), None);
        assert_eq!(q("1Xi"), None);
    }

    #[test]
    fn prints_whole_units_or_millis() {
        assert_eq!(Nanos(3 * NANO).to_quantity().0, "3");
        assert_eq!(Nanos(1_500_000_000).to_quantity().0, "1500m");
        assert_eq!(Nanos(5).to_quantity().0, "5n");
    }
}
