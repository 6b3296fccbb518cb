//! gangplank's capacity verdicts against kube-scheduler's native gang: 300 generated cluster ×
//! job pairs (see `support::differential` for how a pair is judged on both sides; the counts
//! are in RELIABILITY.md).

mod support;

use support::differential::Backend;
use support::{ControlPlane, Crds, Scheduling};

e2e_suite!(
    "e2e_scheduler_differential",
    [capacity_verdicts_agree_with_kube_scheduler],
    support::scheduler::requirement
);

async fn capacity_verdicts_agree_with_kube_scheduler() {
    let assets = support::assets::get();
    let plane = ControlPlane::shared_with(&assets, Crds::TrainingV1, Scheduling::NativeGang);
    support::differential::run(plane, Backend::NativeGang, 300).await;
}
