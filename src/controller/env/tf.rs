//! TensorFlow: `TF_CONFIG`, byte for byte as upstream's Go `json.Marshal` writes it (struct
//! fields in declaration order, map keys sorted).

use serde_json::{json, Map, Value};

use super::{host, port};
use crate::controller::config::Config;
use crate::controller::snapshot::{JobSnapshot, Replica};

/// `TF_CONFIG` of replica `index` of `replica`, or `None` for a job that is not distributed
/// (exactly one replica in total), which upstream leaves without it.
pub fn tf_config(
    job: &JobSnapshot,
    replica: &Replica,
    index: i32,
    config: &Config,
) -> Option<String> {
    if job.total_replicas() == 1 {
        return None;
    }
    let cluster = cluster_spec(job, config);
    let rtype = replica.type_label();
    let task = json!({"type": rtype, "index": index});
    let value = if job.extras.enable_dynamic_worker {
        json!({"cluster": sparse(&cluster, &rtype, index), "task": task})
    } else {
        json!({"cluster": cluster, "task": task, "environment": "cloud"})
    };
    Some(value.to_string())
}

/// Every replica type's addresses, `<job>-<rt>-<i>.<ns>.svc[.<domain>]:<port>`, by
/// lower-cased type; a BTreeMap so keys come out sorted as Go sorts map keys.
fn cluster_spec(
    job: &JobSnapshot,
    config: &Config,
) -> std::collections::BTreeMap<String, Vec<String>> {
    let domain = config.domain_suffix();
    job.replicas
        .iter()
        .map(|r| {
            let p = port(job, r);
            let addrs = (0..r.replicas)
                .map(|i| {
                    format!(
                        "{}.{}.svc{domain}:{p}",
                        host(job, r.rtype.name, i),
                        job.namespace
                    )
                })
                .collect();
            (r.type_label(), addrs)
        })
        .collect()
}

/// enableDynamicWorker: a worker sees only itself and the PS, a PS only itself.
fn sparse(
    cluster: &std::collections::BTreeMap<String, Vec<String>>,
    rtype: &str,
    index: i32,
) -> Value {
    let own = || {
        cluster
            .get(rtype)
            .and_then(|a| a.get(usize::try_from(index).ok()?))
            .cloned()
    };
    let mut worker = Map::new();
    let mut ps: Vec<String> = Vec::new();
    match rtype {
        "ps" => ps.extend(own()),
        "worker" => {
            ps = cluster.get("ps").cloned().unwrap_or_default();
            if let Some(addr) = own() {
                worker.insert(index.to_string(), Value::String(addr));
            }
        }
        _ => {}
    }
    json!({"worker": worker, "ps": ps})
}
