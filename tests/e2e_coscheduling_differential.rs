//! gangplank's capacity verdicts against scheduler-plugins' Coscheduling: 200 generated
//! cluster × job pairs, each job run by `gangplank controller --gang-scheduler
//! scheduler-plugins-scheduler` (its `scheduling.x-k8s.io` PodGroup, minMember and
//! minResources as the controller writes them) and placed, or not, by the Coscheduling
//! kube-scheduler. gangplank's verdict is `gangplank check` with gang_scheduling naming
//! scheduler-plugins' scheduler. See `support::differential` for how a pair is judged on both
//! sides; the counts are in RELIABILITY.md.

mod support;

use std::sync::OnceLock;

use support::controller::Controller;
use support::differential::Backend;
use support::{ControlPlane, Crds, Scheduling};

e2e_suite!(
    "e2e_coscheduling_differential",
    [capacity_verdicts_agree_with_coscheduling],
    support::kueue::coscheduling_requirement
);

async fn capacity_verdicts_agree_with_coscheduling() {
    static CONTROLLER: OnceLock<Controller> = OnceLock::new();
    let assets = support::assets::get();
    let plane = ControlPlane::shared_with(&assets, Crds::TrainingV1, Scheduling::Coscheduling);
    let args = [
        "--leader-elect=false",
        "--gang-scheduler=scheduler-plugins-scheduler",
    ];
    CONTROLLER.get_or_init(|| Controller::start(plane, "controller-coscheduling", &args));
    support::differential::run(plane, Backend::Coscheduling, 200).await;
}
