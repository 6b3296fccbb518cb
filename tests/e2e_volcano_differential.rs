//! gangplank's capacity verdicts against Volcano: 200 generated cluster × job pairs, each job
//! run by `gangplank controller --gang-scheduler volcano` (its PodGroup, minMember and
//! minResources as the controller writes them) and placed, or not, by vc-scheduler. See
//! `support::differential` for how a pair is judged on both sides; the counts are in
//! RELIABILITY.md.

mod support;

use std::sync::OnceLock;

use support::controller::Controller;
use support::differential::Backend;
use support::{ControlPlane, Crds, Scheduling};

e2e_suite!(
    "e2e_volcano_differential",
    [capacity_verdicts_agree_with_volcano],
    support::volcano::requirement
);

async fn capacity_verdicts_agree_with_volcano() {
    static CONTROLLER: OnceLock<Controller> = OnceLock::new();
    let assets = support::assets::get();
    let plane = ControlPlane::shared_with(&assets, Crds::TrainingV1, Scheduling::Volcano);
    let args = ["--leader-elect=false", "--gang-scheduler=volcano"];
    CONTROLLER.get_or_init(|| Controller::start(plane, "controller-volcano", &args));
    support::differential::run(plane, Backend::Volcano, 200).await;
}
