//! On a real node whose cluster domain is not `cluster.local` (the kubelet's clusterDomain and
//! the cluster DNS both `gangplank.test`): with `--cluster-domain=gangplank.test`, a
//! PyTorchJob's Worker waits for the Master under that domain and the job succeeds.

mod support;

use support::realnode::{self, node};

const DOMAIN: &str = "gangplank.test";

fn main() {
    let tests: Vec<(&'static str, support::harness::Test)> = vec![(
        "pytorch_worker_waits_for_the_master_under_the_clusters_own_domain",
        || Box::pin(pytorch_worker_waits_for_the_master_under_the_clusters_own_domain()),
    )];
    realnode::run_suite("e2e_realnode_domain", DOMAIN, tests)
}

async fn pytorch_worker_waits_for_the_master_under_the_clusters_own_domain() {
    support::realnode_jobs::rendezvous_succeeds(node(), "rn-domain", realnode::BUSYBOX).await;
}
