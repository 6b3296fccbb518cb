//! Where a job ends: stuck past its limits, failed (permanently, invalid, now), finished.

use super::*;

impl Planner<'_> {
    /// The watchdog fired: fail the job, or recreate the whole gang as one restart.
    pub(super) fn stuck(&mut self, message: String, count: BackoffCount) {
        let gang_restart = BackoffCount { new: 1, ..count };
        if self.config.on_stuck == StuckAction::Fail
            || gang_restart.exceeded(self.job.run_policy.backoff_limit)
        {
            return self.fail_now("StartDeadlineExceeded", message);
        }
        self.set(
            ConditionType::Restarting,
            true,
            "StartDeadlineExceeded",
            message,
            true,
        );
        let live: Vec<&Pod> = self
            .observed
            .pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let uids: Vec<String> = live.iter().filter_map(|p| p.metadata.uid.clone()).collect();
        self.push(Action::PatchJobAnnotations(restart::record(
            count.recorded + 1,
            &uids,
        )));
        for pod in live {
            self.delete_pod(pod, DeleteReason::GangRestart);
        }
    }

    /// ExitCode with a permanent code: upstream's message, quotes included.
    pub(super) fn fail_permanent(&mut self, f: &Failure) {
        if let FailedPod::Permanent { exit_code } = f.verdict {
            self.exited_with_code(f.pod, exit_code);
        }
        let msg = format!(
            "job {:?} is failing because {:?} replica(s) failed.",
            self.job.name, f.replica_type
        );
        self.out.events.push(Event::warning(
            reason(self.job.kind(), "Failed"),
            msg.clone(),
        ));
        self.status.complete_at(self.now);
        self.set(ConditionType::Failed, true, "Failed", msg, false);
        self.finish();
    }

    pub(super) fn fail_invalid(&mut self) {
        let problems: Vec<String> = self
            .job
            .problems
            .iter()
            .map(|p| format!("{}: {}", p.path, p.msg))
            .collect();
        let msg = format!(
            "{} {} is invalid: {}",
            self.job.kind(),
            self.job.name,
            problems.join("; ")
        );
        self.fail_now("FailedValidation", msg);
    }

    /// Marks the job Failed now (reason `<Kind><what>`) and cleans up.
    pub(super) fn fail_now(&mut self, what: &str, msg: String) {
        self.status.complete_at(self.now);
        self.set(ConditionType::Failed, true, what, msg, true);
        self.finish();
    }

    /// A finished job: fold active into succeeded (Succeeded only), apply cleanPodPolicy,
    /// delete the PodGroup, and delete the job once its TTL has passed.
    pub(super) fn finish(&mut self) {
        if self.status.is(ConditionType::Succeeded) {
            for rs in self.status.replica_statuses.values_mut() {
                rs.succeeded += rs.active;
                rs.active = 0;
            }
        }
        let policy = self
            .job
            .run_policy
            .clean_pod_policy
            .as_deref()
            .unwrap_or("None");
        for pod in &self.observed.pods {
            let clean = match policy {
                "All" => true,
                "Running" => matches!(phase(pod), "Running" | "Pending"),
                _ => false,
            };
            if clean {
                self.delete_pod(pod, DeleteReason::CleanUp);
            }
        }
        self.delete_pod_group();
        let ttl = deadlines::ttl(
            self.status.completion_time.as_ref(),
            self.job.run_policy.ttl_seconds_after_finished,
            self.now,
        );
        match ttl {
            Deadline::Passed => self.push(Action::DeleteJob),
            other => self.requeue(other.remaining()),
        }
    }
}
