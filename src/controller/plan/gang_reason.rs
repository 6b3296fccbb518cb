//! Why a gang is not placed yet, on the job's Created condition (and back when it is).

use super::*;

impl Planner<'_> {
    /// Until the job first runs, the gang scheduler's reason for not placing its gang (see
    /// [`watchdog::gang_reason`]) goes on the Created condition (reason `<Kind>Unschedulable`)
    /// and into a Warning Event as soon as the scheduler gives it, instead of only in the
    /// start deadline's message; so does a PodGroup the API server refused (reason
    /// `<Kind>PodGroupRefused`). Created gets its own reason back once the gang is placed.
    pub(super) fn explain_unplaced_gang(&mut self) {
        let status = &self.status;
        let first_start = status.condition(ConditionType::Running).is_none()
            && !status.is(ConditionType::Restarting);
        if self.config.gang.is_none() || !first_start {
            return;
        }
        let kind = self.job.kind();
        let group = naming::pod_group_name(self.job);
        let ours = [
            reason(kind, "Unschedulable"),
            reason(kind, "PodGroupRefused"),
        ];
        let shown = status
            .condition(ConditionType::Created)
            .is_some_and(|c| ours.contains(&c.reason));
        let pod_group = self.observed.pod_group.as_ref();
        let held_back = self
            .config
            .gang
            .as_ref()
            .is_some_and(|g| pod_group.is_some() && !podgroup::ready_for_pods(g, pod_group));
        let refused = self.observed.facts.pod_group_refused.as_ref();
        if held_back || refused.is_some() {
            // Volcano's reasons for a PodGroup it has not admitted are Events, which are
            // not watched, and a refused PodGroup is written again: look again.
            self.requeue(Some(GANG_REASON_RECHECK));
        }
        let unplaced = self.observed.pods.iter().all(|p| phase(p) == "Pending");
        let why = match refused {
            Some(r) => Some((
                "PodGroupRefused",
                format!("PodGroup {group} was refused: {r}"),
            )),
            None => watchdog::gang_reason(self.observed)
                .filter(|_| unplaced)
                .map(|r| {
                    (
                        "Unschedulable",
                        format!("PodGroup {group} is unschedulable: {r}"),
                    )
                }),
        };
        match why {
            Some((what, why)) => {
                let reason = reason(kind, what);
                let msg = format!("{kind} {} is waiting for its gang: {why}", self.job_ref());
                let changed = self.status.set_condition(
                    ConditionType::Created,
                    true,
                    reason.clone(),
                    msg.clone(),
                    self.now,
                );
                if changed {
                    self.out.events.push(Event::warning(reason, msg));
                }
            }
            None if shown => self.restore_created(),
            None => {}
        }
    }

    /// Created gets its own reason and message back, after a wait it explained is over.
    pub(super) fn restore_created(&mut self) {
        let msg = format!("{} {} is created.", self.job.kind(), self.job_ref());
        self.set(ConditionType::Created, true, "Created", msg, false);
    }
}
