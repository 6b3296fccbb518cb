//! Names the operator derives from a job: pods and Services are `<job>-<type>-<index>`.

/// Kubernetes names of pods and Services must fit a DNS-1035 label: 63 characters.
pub const MAX_LABEL_LEN: usize = 63;

/// The name of replica `index` of type `replica_type`, as the upstream operator builds it:
/// lower-cased type, `/` replaced by `-`.
pub fn pod_name(job: &str, replica_type: &str, index: i64) -> String {
    format!("{job}-{}-{index}", replica_type.to_lowercase()).replace('/', "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_names_follow_upstream() {
        assert_eq!(pod_name("mnist", "Worker", 7), "mnist-worker-7");
        assert_eq!(pod_name("mnist", "PS", 0), "mnist-ps-0");
    }
}
