//! [`plan`]: one reconcile of one job, decided without I/O.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::action::{Action, DeleteReason, Event, NewPod, Plan};
use super::config::{Config, StuckAction};
use super::deadlines::{self, Deadline};
use super::observed::{self, phase, Foreign, Observed, SshSecret};
use super::replicas::{self, Slots};
use super::restart::{self, BackoffCount, FailedPod};
use super::snapshot::JobSnapshot;
use super::status::{reason, ConditionType, JobStatus};
use super::watchdog::{self, Verdict};
use crate::job::kinds::Role;

use super::{hpa, mpi, naming, outcome, podgroup, pods, release, services, Timestamp};

mod gang_reason;
mod mpi_objects;
mod terminal;

/// Decides what one reconcile of `job` does, given what the cluster holds (`observed`) and
/// the time (`now`).
///
/// # Guarantees
/// - Pure: no client, no clock, no randomness; the same inputs give the same [`Plan`].
/// - A job whose `runPolicy.managedBy` names another controller, or that is being deleted,
///   gets an empty plan with `status: None`.
/// - A structurally invalid job gets a Failed condition naming every problem and no pods.
/// - See [`Plan`] for the order and idempotency of actions.
pub fn plan(job: &JobSnapshot, observed: &Observed, now: Timestamp, config: &Config) -> Plan {
    if !job.managed_by_us() || job.deleting {
        return Plan::default();
    }
    // A native PodGroup the API server would refuse (an invalid topology key) is not written
    // and is said on the job as a refused one, until the job changes.
    let amended;
    let observed = match podgroup::topology_problem(job, config.gang.as_ref()) {
        Some(why) if observed.pod_group.is_none() && observed.facts.pod_group_refused.is_none() => {
            let mut facts = observed.facts.clone();
            facts.pod_group_refused = Some(why);
            amended = Observed {
                facts,
                ..observed.clone()
            };
            &amended
        }
        _ => observed,
    };
    let mut planner = Planner {
        job,
        observed,
        now,
        config,
        status: job.status.clone(),
        out: Plan::default(),
    };
    planner.run();
    Plan {
        status: Some(planner.status),
        ..planner.out
    }
}

/// How often a Volcano PodGroup that is not admitted is looked at again, for the reasons
/// Volcano records only as Events on it (the controller watches PodGroups, not Events), and
/// a refused PodGroup written again: one Event list per waiting job every 10 s, and the reason on the
/// job within 10 s of Volcano's first cycle (1 s) that gives it.
const GANG_REASON_RECHECK: std::time::Duration = std::time::Duration::from_secs(10);

/// How often a job whose names other objects hold looks again: their deletion is no event of
/// the job's (they are not its own, and mostly not in its caches). Each look is one create
/// and one read per held name.
const FOREIGN_RECHECK: std::time::Duration = std::time::Duration::from_secs(30);

struct Planner<'a> {
    job: &'a JobSnapshot,
    observed: &'a Observed,
    now: Timestamp,
    config: &'a Config,
    /// The status being built; `out.status` stays `None` until the end.
    status: JobStatus,
    out: Plan,
}

/// A Failed pod and what its restart policy makes of it.
struct Failure<'a> {
    pod: &'a Pod,
    replica_type: &'static str,
    verdict: FailedPod,
}

impl<'a> Planner<'a> {
    fn run(&mut self) {
        self.ensure_created();
        if self.status.finished() {
            return self.finish();
        }
        if !self.job.problems.is_empty() {
            return self.fail_invalid();
        }
        if self.job.suspended() {
            return self.suspend();
        }
        self.resume();
        self.reconcile_hpa();
        self.status.start_time.get_or_insert(Time(self.now));
        self.run_gang();
    }

    /// Upstream sets Created in its create-event handler; here the first plan sets it.
    fn ensure_created(&mut self) {
        if self.status.condition(ConditionType::Created).is_none() {
            let msg = format!("{} {} is created.", self.job.kind(), self.job_ref());
            self.set(ConditionType::Created, true, "Created", msg, false);
        }
    }

    fn run_gang(&mut self) {
        let job = self.job;
        let slots = replicas::slots(job, &self.observed.pods);
        self.status.replica_statuses = slots
            .iter()
            .map(|s| (s.replica.rtype.name.to_string(), s.status(job)))
            .collect();
        if let Some(msg) = mpi::evicted_workers(job, &workers(&slots)) {
            return self.fail_now("Evicted", msg);
        }
        let failures = failures(job, &slots);
        let counted = restart::counted_pods(&job.annotations);
        let recreate: Vec<&Failure> = failures
            .iter()
            .filter(|f| matches!(f.verdict, FailedPod::Recreate { .. }))
            .collect();
        let new_uids: Vec<String> = recreate
            .iter()
            .filter_map(|f| f.pod.metadata.uid.clone())
            .filter(|uid| !counted.contains(&uid.as_str()))
            .collect();
        let count = BackoffCount {
            recorded: job.recorded_restarts,
            in_place: in_place_restarts(&slots),
            new: i64::try_from(new_uids.len()).unwrap_or(i64::MAX),
        };
        if self.stopped_by_limits(&count) {
            return;
        }
        if let Some(f) = failures
            .iter()
            .find(|f| matches!(f.verdict, FailedPod::Permanent { .. }))
        {
            return self.fail_permanent(f);
        }
        if let Some(f) = recreate.first() {
            let msg = format!(
                "job {} is restarting because {} replica(s) failed.",
                job.name, f.replica_type
            );
            self.set(ConditionType::Restarting, true, "Restarting", msg, true);
        }
        self.explain_unplaced_gang();
        let worker0 = worker0_succeeded(&slots);
        // Restarting=True lasts until every replica runs again, not until the first pass
        // that no longer sees the failed pod (upstream #1711).
        let recreating = self.status.is(ConditionType::Restarting) && !every_replica_runs(&slots);
        outcome::apply(
            job,
            &mut self.status,
            worker0,
            recreating,
            self.now,
            &mut self.out.events,
        );
        if self.status.finished() {
            return self.finish();
        }
        self.name_recreated(&recreate);
        if let Some(f) = recreate.first() {
            self.explain_restart(f.replica_type, &slots);
        }
        self.exit_code_events(&recreate);
        if !new_uids.is_empty() {
            let total = count.recorded + count.new;
            self.push(Action::PatchJobAnnotations(restart::record(
                total, &new_uids,
            )));
        }
        for f in &recreate {
            self.delete_pod(f.pod, DeleteReason::Restart);
        }
        self.scale_down(&slots);
        self.reconcile_pods(&slots, count);
    }

    /// Appends the pods being recreated, with their exit codes, to a True Restarting
    /// condition: upstream's message names only the replica type. The condition keeps the
    /// message until every replica runs again, after the failed pods are gone.
    fn name_recreated(&mut self, recreate: &[&Failure]) {
        let restarting = self.status.condition(ConditionType::Restarting);
        let Some(c) = restarting.filter(|c| c.status == "True") else {
            return;
        };
        if recreate.is_empty() {
            return;
        }
        let pods: Vec<String> = recreate
            .iter()
            .map(|f| match f.verdict {
                FailedPod::Recreate {
                    exit_code: Some(code),
                } => format!("{} (exit code {code})", observed::name(f.pod)),
                _ => observed::name(f.pod).to_string(),
            })
            .collect();
        let msg = format!("{} Recreating {}.", c.message, pods.join(", "));
        self.set(ConditionType::Restarting, true, "Restarting", msg, false);
    }

    /// MPI: a launcher restarted before any worker ran gets the workers' state appended to
    /// the Restarting message (whichever rule wrote it last).
    fn explain_restart(&mut self, failed_type: &str, slots: &[Slots]) {
        let why =
            watchdog::launcher_failed_early(self.job, failed_type, &workers(slots), self.observed);
        let current = self.status.condition(ConditionType::Restarting);
        if let (Some(why), Some(c)) = (why, current.filter(|c| c.status == "True")) {
            let msg = format!("{}{why}", c.message);
            self.set(ConditionType::Restarting, true, "Restarting", msg, false);
        }
    }

    /// backoffLimit and activeDeadlineSeconds; true when the job failed here.
    fn stopped_by_limits(&mut self, count: &BackoffCount) -> bool {
        let job = self.job;
        if count.exceeded(job.run_policy.backoff_limit) {
            let msg = format!(
                "Job {} has failed because it has reached the specified backoff limit",
                job.name
            );
            self.fail_now("Failed", msg);
            return true;
        }
        let deadline = deadlines::active(
            self.status.start_time.as_ref(),
            job.run_policy.active_deadline_seconds,
            self.now,
        );
        if deadline.passed() {
            let msg = format!(
                "Job {} has failed because it was active longer than specified deadline",
                job.name
            );
            self.fail_now("Failed", msg);
            return true;
        }
        self.requeue(deadline.remaining());
        false
    }

    /// PodGroup first; then, unless Volcano holds the gang back or the watchdog acts, the
    /// missing pods and Services.
    fn reconcile_pods(&mut self, slots: &[Slots], count: BackoffCount) {
        let mut waiting_for_group = false;
        if let Some(gang) = &self.config.gang {
            let existing = self.observed.pod_group.as_ref();
            let refused = self.observed.facts.pod_group_refused.is_some();
            match podgroup::reconcile(self.job, gang, existing) {
                // Said on the job (see `explain_unplaced_gang`); tried again at the requeue.
                Some(_) if refused => {}
                Some(action) => self.push(action),
                None => {}
            }
            waiting_for_group = !podgroup::ready_for_pods(gang, existing);
        }
        match watchdog::check(
            self.job,
            self.observed,
            waiting_for_group,
            self.now,
            self.config,
        ) {
            Verdict::Stuck { message } => return self.stuck(message, count),
            Verdict::Quiet { recheck } => self.requeue(recheck),
        }
        if !waiting_for_group {
            self.create_missing(slots);
        }
        self.release_gated(slots);
    }

    /// Lifts the release gate from the gang's gated pods once it is whole, or at once when
    /// the job no longer asks for an order (see [`release`]).
    fn release_gated(&mut self, slots: &[Slots]) {
        let order = release::order(self.job, self.config.gang.as_ref()).and_then(Result::ok);
        if let Some(action) = release::release(slots, order.as_deref(), self.now) {
            self.push(action);
        }
    }

    /// A release order the job asks for but does not give: said once, when the gang's first
    /// pods are created (ungated: admission refuses such a job, and a pod must never wait for
    /// an order that cannot come).
    fn warn_unordered(&mut self) {
        let order = release::order(self.job, self.config.gang.as_ref());
        if let (Some(Err(why)), true) = (order, self.observed.pods.is_empty()) {
            let msg = format!("{why}; the pods are released to kube-scheduler together");
            self.out
                .events
                .push(Event::warning("InvalidReleaseOrder", msg));
        }
    }

    fn create_missing(&mut self, slots: &[Slots]) {
        if !self.names_free() {
            return;
        }
        let (job, observed) = (self.job, self.observed);
        let is_mpi = mpi::is_mpi(job);
        if is_mpi {
            self.mpi_shared_objects(slots);
        }
        self.warn_unordered();
        for s in slots {
            if is_mpi
                && s.replica.role() == Role::Launcher
                && !mpi::launcher_may_start(job, &workers(slots))
            {
                continue;
            }
            for index in 0..s.replica.replicas {
                let name = naming::replica_name(job, s.replica, index);
                if observed.pod(&name).is_none() && !s.pods.contains_key(&index) {
                    let pod = pods::build(job, s.replica, index, self.config);
                    let scheduling_group =
                        podgroup::scheduling_group(job, self.config.gang.as_ref());
                    self.push(Action::CreatePod(Box::new(NewPod {
                        pod,
                        scheduling_group,
                    })));
                }
                // MPI pods share the job's one Service instead.
                if !is_mpi && !observed.has_service(&name) {
                    let svc = services::build(job, s.replica, index);
                    self.push(Action::CreateService(Box::new(svc)));
                }
            }
        }
    }

    /// Whether every name the job's objects need is free of other owners' objects. If not
    /// (see [`Foreign`]), the Created condition names them (reason `<Kind>ResourceExists`),
    /// each gets the mpi-operator's `ErrResourceExists` Warning when that changes, and nothing
    /// is created until the names are free: no pod may mount someone else's hosts or key or
    /// exec with someone else's rights, and a gang short of a member would only hold its nodes.
    fn names_free(&mut self) -> bool {
        let (kind, foreign) = (self.job.kind(), &self.observed.foreign);
        let held = reason(kind, "ResourceExists");
        if foreign.is_empty() {
            let created = self.status.condition(ConditionType::Created);
            if created.is_some_and(|c| c.reason == held) {
                self.restore_created();
            }
            return true;
        }
        let names: Vec<String> = foreign.iter().map(Foreign::describe).collect();
        let msg = format!(
            "{kind} {} is waiting for names other objects hold: {}; delete those objects or \
             give the job another name",
            self.job_ref(),
            names.join(", ")
        );
        let changed = self
            .status
            .set_condition(ConditionType::Created, true, held, msg, self.now);
        if changed {
            for f in foreign {
                let msg = format!(
                    "Resource {:?} already exists and is not managed by {kind}: {} {}",
                    f.name,
                    f.kind,
                    f.owner()
                );
                self.out
                    .events
                    .push(Event::warning("ErrResourceExists", msg));
            }
        }
        self.requeue(Some(FOREIGN_RECHECK));
        false
    }

    /// Pods and Services whose index is not below `replicas` any more.
    fn scale_down(&mut self, slots: &[Slots]) {
        for s in slots {
            for pod in &s.surplus {
                self.delete_pod(pod, DeleteReason::ScaleDown);
            }
            let type_label = s.replica.type_label();
            for svc in &self.observed.services {
                let labels = svc.metadata.labels.clone().unwrap_or_default();
                let index = labels
                    .get(naming::REPLICA_INDEX)
                    .and_then(|i| i.parse::<i32>().ok());
                let ours = labels.get(naming::REPLICA_TYPE) == Some(&type_label);
                if ours && index.is_none_or(|i| i >= s.replica.replicas) {
                    let name = svc.metadata.name.clone().unwrap_or_default();
                    self.push(Action::DeleteService {
                        name,
                        reason: DeleteReason::ScaleDown,
                    });
                }
            }
        }
    }

    /// Suspended: no pods, Services, PodGroup or HPA, whatever cleanPodPolicy says.
    fn suspend(&mut self) {
        self.reconcile_hpa();
        for pod in &self.observed.pods {
            self.delete_pod(pod, DeleteReason::Suspend);
        }
        for svc in &self.observed.services {
            let name = svc.metadata.name.clone().unwrap_or_default();
            self.push(Action::DeleteService {
                name,
                reason: DeleteReason::Suspend,
            });
        }
        self.delete_pod_group();
        for rs in self.status.replica_statuses.values_mut() {
            rs.active = 0;
        }
        let msg = format!("{} {} is suspended.", self.job.kind(), self.job_ref());
        if self.status.is(ConditionType::Running) {
            self.set(
                ConditionType::Running,
                false,
                "Suspended",
                msg.clone(),
                false,
            );
        }
        self.set(ConditionType::Suspended, true, "Suspended", msg, true);
    }

    /// The elastic HPA: created, updated, or deleted on suspend (see [`hpa`]).
    fn reconcile_hpa(&mut self) {
        if let Some(action) = hpa::reconcile(self.job, self.observed.hpa.as_ref()) {
            self.push(action);
        }
    }

    /// Unsuspended: Suspended turns False and the active deadline starts over.
    fn resume(&mut self) {
        if self.status.is(ConditionType::Suspended) {
            let msg = format!("{} {} is resumed.", self.job.kind(), self.job_ref());
            self.set(ConditionType::Suspended, false, "Resumed", msg, true);
            self.status.start_time = Some(Time(self.now));
        }
    }

    fn exit_code_events(&mut self, failures: &[&Failure]) {
        for f in failures {
            if let FailedPod::Recreate {
                exit_code: Some(code),
            } = f.verdict
            {
                self.exited_with_code(f.pod, code);
            }
        }
    }

    fn exited_with_code(&mut self, pod: &Pod, code: i32) {
        let msg = format!(
            "Pod: {}.{} exited with code {code}",
            self.job.namespace,
            observed::name(pod)
        );
        self.out.events.push(Event::normal("ExitedWithCode", msg));
    }

    /// Deletes a pod unless it is already going. Clean-up takes the Service of the same name
    /// with it (upstream); a restarted pod keeps its Service, and suspend and scale-down
    /// delete Services on their own.
    fn delete_pod(&mut self, pod: &Pod, reason: DeleteReason) {
        if pod.metadata.deletion_timestamp.is_some() {
            return;
        }
        let name = observed::name(pod).to_string();
        let service = reason == DeleteReason::CleanUp && self.observed.has_service(&name);
        self.push(Action::DeletePod {
            name: name.clone(),
            reason,
        });
        if service {
            self.push(Action::DeleteService { name, reason });
        }
    }

    fn delete_pod_group(&mut self) {
        if let (Some(gang), Some(_)) = (&self.config.gang, &self.observed.pod_group) {
            self.push(Action::DeletePodGroup {
                api_version: podgroup::api_version(gang).to_string(),
                name: naming::pod_group_name(self.job),
            });
        }
    }

    /// Sets a condition with reason `<Kind><what>`, recording an Event if asked and changed.
    fn set(&mut self, t: ConditionType, on: bool, what: &str, msg: String, event: bool) {
        let (now, reason) = (self.now, reason(self.job.kind(), what));
        let changed = self
            .status
            .set_condition(t.clone(), on, reason.clone(), msg.clone(), now);
        if changed && event {
            let e = match t {
                ConditionType::Restarting => Event::warning(reason, msg),
                _ => Event::normal(reason, msg),
            };
            self.out.events.push(e);
        }
    }

    /// The job as upstream names it in condition messages: `<name>`, or `<namespace>/<name>`
    /// for the mpi-operator.
    fn job_ref(&self) -> String {
        match mpi::is_v2(self.job) {
            true => format!("{}/{}", self.job.namespace, self.job.name),
            false => self.job.name.clone(),
        }
    }

    fn push(&mut self, action: Action) {
        self.out.actions.push(action);
    }

    fn requeue(&mut self, after: Option<std::time::Duration>) {
        self.out.requeue_after = deadlines::earliest([self.out.requeue_after, after]);
    }
}

/// Every Failed pod of a known type with its verdict.
fn failures<'s>(job: &JobSnapshot, slots: &'s [Slots<'s>]) -> Vec<Failure<'s>> {
    let container = job.spec.default_container.unwrap_or_default();
    slots
        .iter()
        .flat_map(|s| s.pods.values().flatten().map(move |pod| (s, *pod)))
        .filter(|(_, pod)| phase(pod) == "Failed" && pod.metadata.deletion_timestamp.is_none())
        .map(|(s, pod)| Failure {
            pod,
            replica_type: s.replica.rtype.name,
            verdict: restart::on_failed_pod(s.replica.restart_policy, pod, container),
        })
        .collect()
}

/// In-place container restarts of replicas whose pods restart in place (upstream counts
/// ExitCode too, but those pods run with restartPolicy Never, so it adds nothing).
fn in_place_restarts(slots: &[Slots]) -> i64 {
    slots
        .iter()
        .filter(|s| s.replica.restart_policy.restarts_in_place())
        .flat_map(Slots::all)
        .map(restart::in_place_restarts)
        .sum()
}

/// The observed Worker pods (MPI: the hosts of the hostfile).
fn workers<'s>(slots: &[Slots<'s>]) -> Vec<&'s Pod> {
    slots
        .iter()
        .filter(|s| s.replica.role() == Role::Worker)
        .flat_map(|s| s.pods.values().flatten().copied())
        .collect()
}

/// Whether every replica index has a pod that runs (or has succeeded): what ends a restart.
fn every_replica_runs(slots: &[Slots]) -> bool {
    slots.iter().all(|s| {
        (0..s.replica.replicas).all(|index| {
            s.pods.get(&index).is_some_and(|pods| {
                pods.iter().any(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && matches!(phase(p), "Running" | "Succeeded")
                })
            })
        })
    })
}

/// TF's shortcut: worker-0 has succeeded.
fn worker0_succeeded(slots: &[Slots]) -> bool {
    slots
        .iter()
        .filter(|s| s.replica.rtype.name == "Worker")
        .flat_map(|s| s.pods.get(&0).into_iter().flatten())
        .any(|p| phase(p) == "Succeeded")
}
