//! The annotation `gangplank.dev/release-order`: the order in which `gangplank controller`
//! releases a native gang's pods to kube-scheduler, one replica type after the other.
//!
//! Entry point: [`parse`].
//!
//! Why: kube-scheduler 1.36's pod group cycle takes a gang's pods by priority, then by the
//! time each first entered its active queue (`schedule_one_podgroup.go`), and places them one
//! at a time on the node it scores highest. When a gang's pods are released together by its
//! PreEnqueue gate, that time follows Go's map order: random, drawn once per gang and kept
//! across retries. Some gangs are placed in one order and deadlock in another (a Master
//! without nodeSelector taking the node a Worker needs). The controller creates such a gang's
//! pods with the scheduling gate [`RELEASE_GATE`] and lifts it type by type in this order
//! once every pod exists: each pod then enters the queue in that order and the cycle takes
//! them so. The capacity policy searches that order only (src/placement).
//!
//! # Value
//! The job's replica types as its replicaSpecs name them, each once, comma-separated, first
//! released first: `Worker,Master`. Matched without regard to case; spaces are ignored.
//!
//! # Errors
//! [`parse`] says which name is unknown, repeated or missing, and lists the job's types.

/// The job annotation naming the order.
pub const RELEASE_ORDER_ANNOTATION: &str = "gangplank.dev/release-order";

/// The scheduling gate the controller puts on such a gang's pods and lifts in that order.
pub const RELEASE_GATE: &str = "gangplank.dev/release-order";

/// The replica types of `types` (replicaSpecs keys as written) in the order `value` names
/// them, or why `value` is not such an order.
pub fn parse(value: &str, types: &[&str]) -> Result<Vec<String>, String> {
    let listed = || types.join(", ");
    let mut order: Vec<String> = Vec::with_capacity(types.len());
    for name in value.split(',').map(str::trim) {
        if name.is_empty() {
            return Err(format!(
                "{RELEASE_ORDER_ANNOTATION} is {value:?}, which has an empty name; name every \
                 replica type once, comma-separated ({})",
                listed()
            ));
        }
        let Some(key) = types.iter().find(|t| t.eq_ignore_ascii_case(name)) else {
            return Err(format!(
                "{RELEASE_ORDER_ANNOTATION} names {name:?}, which is not a replica type of this \
                 job ({})",
                listed()
            ));
        };
        if order.iter().any(|o| o == key) {
            return Err(format!(
                "{RELEASE_ORDER_ANNOTATION} names {key} twice; name every replica type once"
            ));
        }
        order.push((*key).to_string());
    }
    if let Some(missing) = types.iter().find(|t| !order.iter().any(|o| o == *t)) {
        return Err(format!(
            "{RELEASE_ORDER_ANNOTATION} does not name {missing}; name every replica type once, \
             first released first ({})",
            listed()
        ));
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPES: [&str; 2] = ["Master", "Worker"];

    #[test]
    fn every_type_once_in_the_order_written_matched_without_case() {
        assert_eq!(
            parse(" worker , MASTER", &TYPES),
            Ok(vec!["Worker".to_string(), "Master".to_string()])
        );
        assert_eq!(
            parse("Master,Worker", &TYPES),
            Ok(vec!["Master".to_string(), "Worker".to_string()])
        );
    }

    #[test]
    fn unknown_repeated_missing_and_empty_names_are_refused_saying_which() {
        let unknown = parse("Worker,Chief", &TYPES).err().unwrap_or_default();
        assert!(
            unknown.contains("\"Chief\"") && unknown.contains("Master, Worker"),
            "{unknown}"
        );
        let twice = parse("Worker,worker,Master", &TYPES)
            .err()
            .unwrap_or_default();
        assert!(twice.contains("Worker twice"), "{twice}");
        let missing = parse("Worker", &TYPES).err().unwrap_or_default();
        assert!(missing.contains("does not name Master"), "{missing}");
        let empty = parse("", &TYPES).err().unwrap_or_default();
        assert!(empty.contains("empty name"), "{empty}");
        let trailing = parse("Worker,Master,", &TYPES).err().unwrap_or_default();
        assert!(trailing.contains("empty name"), "{trailing}");
    }
}
