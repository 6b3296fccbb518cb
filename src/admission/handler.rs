//! `POST /mutate` and `POST /validate`: decode, evaluate, encode.
//!
//! Entry point: [`admit`]. Policy evaluation is CPU-bound: at most
//! [`Limits::max_evaluations`] run at once, within [`Limits::eval_timeout`] (waiting for a
//! slot included). When no verdict is reached (timeout, a policy fault, no policies) the
//! request is refused: the webhooks fail closed, as `failurePolicy: Fail` would.
//!
//! Where evaluation runs was measured (BENCHMARKS.md, "Where evaluation runs"): on a
//! blocking thread when other reviews are in flight, since evaluating on an async worker
//! stalls TLS and HTTP for every connection on it; inline when the review is the only one in
//! flight, since the hop to the blocking pool then only adds a thread wake-up.

#![deny(
    clippy::unwrap_used,
    reason = "request data must never panic the server"
)]
#![deny(
    clippy::expect_used,
    reason = "request data must never panic the server"
)]
#![deny(
    clippy::indexing_slicing,
    reason = "request data decides lengths; use get()"
)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tracing::{field::Empty, info, warn, Instrument};

use super::budget::{Budget, Reservation};
use super::handoff::Handoff;
use super::metrics::{Decision, Endpoint, Failure, Metrics};
use super::reload::PolicyStore;
use super::review::{self, BadReview, Verdict};
use super::verdict;
use crate::images::{pin, Pinner};
use crate::policy::{EvalError, PolicySet};
use crate::review::decide;
use crate::review::input::Subject;
use crate::review::{Caller, Input};
use crate::trainer::native;

/// Bounds on evaluation.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest a review may wait for a slot and evaluate; below the webhook's
    /// `timeoutSeconds` (5 s) so that our refusal, not the apiserver's timeout, is what
    /// the user sees.
    pub eval_timeout: Duration,
    /// Evaluations running at once; more wait.
    pub max_evaluations: usize,
    /// JSON values a review may hold to be judged ([`review::judged_values`]); more is
    /// refused before judging (413), since judging takes memory per value.
    pub max_values: usize,
}

/// What the admission handlers share.
#[derive(Debug)]
pub struct Context {
    pub policies: Arc<PolicyStore>,
    pub metrics: Arc<Metrics>,
    /// Tag → digest pinning, before evaluation (when params.yaml turns it on).
    pub images: Arc<Pinner>,
    eval_timeout: Duration,
    max_values: usize,
    slots: Arc<Semaphore>,
    /// Reviews between body received and answer, this one included.
    in_flight: AtomicUsize,
    /// Objects `/mutate` produced, so `/validate` need not run the mutation policies again.
    handoff: Arc<Handoff>,
}

impl Context {
    pub fn new(
        policies: Arc<PolicyStore>,
        metrics: Arc<Metrics>,
        images: Arc<Pinner>,
        limits: Limits,
    ) -> Context {
        Context {
            policies,
            metrics,
            images,
            eval_timeout: limits.eval_timeout,
            max_values: limits.max_values,
            slots: Arc::new(Semaphore::new(limits.max_evaluations.max(1))),
            in_flight: AtomicUsize::new(0),
            handoff: Arc::default(),
        }
    }
}

/// An HTTP answer: status and JSON or text body.
#[derive(Debug)]
pub struct Answer {
    pub http_status: u16,
    pub body: Vec<u8>,
    /// `application/json` for reviews, `text/plain` for refusals of the HTTP call.
    pub json: bool,
}

/// Counts a review in flight until dropped, also when the client goes away mid-request and
/// the handler's future is dropped.
struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    fn enter(counter: &'a AtomicUsize) -> Counted<'a> {
        counter.fetch_add(1, Ordering::SeqCst);
        Counted(counter)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a JSON value of a review counts in the memory budget, in the budget's bytes. The
/// budget's bytes stand for about 12 times as much memory while judged (server.rs), and a
/// value takes 0.75 KiB while judged (a 3.3 MB review of 131,000 values: +90–100 MiB;
/// RELIABILITY.md 7.5): 64 bytes each. A review dense in values then takes the budget's share
/// of what judging it holds (131,000 values: all of it, judged alone), where its bytes alone
/// let two such be judged at once (over 230 MiB).
pub const BUDGET_BYTES_PER_VALUE: usize = 64;

/// Label for requests whose kind is not a training kind (or not known yet).
const OTHER_KIND: &str = "other";

/// Answers one review body at `endpoint`, for callers that hold no memory budget (fuzzing).
pub async fn admit(ctx: &Context, endpoint: Endpoint, body: &[u8]) -> Answer {
    let unbounded = Budget::new(usize::MAX, Duration::ZERO);
    let caller = Caller::Authenticated;
    admit_within(ctx, endpoint, body, caller, &mut unbounded.reserve()).await
}

/// Answers one review body at `endpoint` for `caller` (what the messages may name:
/// [`Caller`]); `budget` holds the body's share of the memory budget, and is grown to the
/// share of what judging it holds when the review is dense in values
/// ([`BUDGET_BYTES_PER_VALUE`]).
pub async fn admit_within(
    ctx: &Context,
    endpoint: Endpoint,
    body: &[u8],
    caller: Caller,
    budget: &mut Reservation,
) -> Answer {
    let started = Instant::now();
    // One span per request; fields are declared once here and filled as they become known.
    let span = tracing::info_span!(
        "admission",
        endpoint = endpoint.as_str(),
        uid = Empty,
        kind = Empty,
        namespace = Empty,
        // Not `name`: JSON logs already use that key for the span's own name.
        object_name = Empty,
        operation = Empty,
        dry_run = Empty,
    );
    let _in_flight = ctx.metrics.in_flight();
    let _counted = Counted::enter(&ctx.in_flight);
    let (answer, kind, decision) = handle(ctx, endpoint, body, caller, budget)
        .instrument(span)
        .await;
    ctx.metrics
        .request(endpoint, kind, decision, started.elapsed().as_secs_f64());
    answer
}

async fn handle(
    ctx: &Context,
    endpoint: Endpoint,
    body: &[u8],
    caller: Caller,
    budget: &mut Reservation,
) -> (Answer, &'static str, Decision) {
    let review = match review::parse(body) {
        Ok(r) => r,
        Err(e) => return (bad_request(&e), OTHER_KIND, Decision::Invalid),
    };
    let span = tracing::Span::current();
    span.record("uid", review.uid.as_str());
    let review::Review { value, uid } = review;
    // Counting one past the limit is enough to know it is over.
    let values = review::judged_values(&value, ctx.max_values.saturating_add(1));
    if values > ctx.max_values {
        drop(value);
        let message = too_many_values(ctx.max_values);
        warn!(error = %message, decision = "invalid", "review refused before it was judged");
        let verdict = Verdict::refuse(413, "RequestEntityTooLarge", message);
        return (reply(&verdict, &uid), OTHER_KIND, Decision::Invalid);
    }
    if budget
        .cover(values.saturating_mul(BUDGET_BYTES_PER_VALUE))
        .await
        .is_err()
    {
        drop(value);
        let message = budget.budget().no_room(&format!("{values} JSON values"));
        warn!(error = %message, decision = "failed", "review refused before it was judged");
        let verdict = Verdict::refuse(429, "TooManyRequests", message);
        return (reply(&verdict, &uid), OTHER_KIND, Decision::Failed);
    }
    let input = match Input::from_review(value) {
        Ok(input) => Input { caller, ..input },
        Err(message) => {
            warn!(error = %message, decision = "invalid", "admission request cannot be evaluated");
            let answer = reply(&Verdict::invalid(message), &uid);
            return (answer, OTHER_KIND, Decision::Invalid);
        }
    };
    let (api_version, kind_name) = input.type_meta();
    span.record("kind", format!("{api_version}/{kind_name}"));
    span.record("namespace", input.namespace.as_str());
    span.record("object_name", input.name.as_str());
    span.record("operation", input.operation.as_str());
    span.record("dry_run", input.dry_run);
    let kind = metric_kind(&input);
    let uid = input.uid.clone();

    // A pod of a TrainJob gangplank gave a native gang joins its PodGroup at create (the
    // field is immutable after): no policy runs on pods.
    if endpoint == Endpoint::Mutate {
        if let Some(patch) = native::pod_patch(input.operation.as_str(), &input.object) {
            info!(
                decision = "patched",
                "pod joined its TrainJob's native gang"
            );
            let verdict = Verdict {
                allowed: true,
                patch: Some(patch),
                ..Verdict::default()
            };
            return (reply(&verdict, &uid), kind, Decision::Patched);
        }
    }

    let Some(set) = ctx.policies.current() else {
        return fail(
            ctx,
            &uid,
            kind,
            Failure::NoPolicies,
            "no policy set is loaded".into(),
        );
    };
    if let Some(reason) = decide::skip_reason(&set, &input) {
        info!(decision = "skipped", reason = %reason, "admission decision");
        let mut verdict = Verdict::allow();
        // Passed, but for a kind gangplank would check the user hears nothing was.
        let warnings: Vec<String> = decide::skip_warning(&input, &reason)
            .map(|w| w.render())
            .into_iter()
            .collect();
        verdict.warnings = crate::admission::verdict::bound_warnings(&warnings);
        return (reply(&verdict, &uid), kind, Decision::Skipped);
    }

    // A TrainJob is judged on its runtime's pods: looked up once, from the watch cache.
    let mut input = set.runtimes().attach(&input).into_owned();
    // Digests first: the policies pin what the resolver found (input.images), and failed
    // lookups join the decision as findings of the images policy.
    let pinning = ctx.images.pin(&set, &mut input).await;
    record_lookups(ctx, &pinning);
    let unresolved = pin::failure_violations(&pinning, &input);
    let can_refuse = set.can_refuse();
    match evaluate(ctx, endpoint, set, input).await {
        Ok(mut decision) => {
            decision.add_violations(unresolved);
            answer(ctx, endpoint, &uid, kind, &decision)
        }
        Err((failure, message)) if !can_refuse => {
            ctx.metrics.failure(failure);
            let verdict = admitted_unchecked(failure, &message);
            (reply(&verdict, &uid), kind, Decision::Failed)
        }
        Err((failure, message)) => fail(ctx, &uid, kind, failure, message),
    }
}

/// The `kind` label of a request's metrics: the training kind, the Trainer kind, a Trainer
/// kind of an API version gangplank does not know, or `other`.
fn metric_kind(input: &Input) -> &'static str {
    let (api_version, kind) = input.type_meta();
    if crate::trainer::unknown_version(api_version, kind) {
        return UNKNOWN_TRAINER_VERSION;
    }
    match input.subject_kind() {
        Subject::Kubeflow(spec) => spec.kind,
        Subject::Trainer(kind) => kind.as_str(),
        Subject::Other if kind == "Pod" => "Pod",
        Subject::Other => OTHER_KIND,
    }
}

/// Metrics' `kind` of a Trainer object in an API version gangplank does not know (passed).
const UNKNOWN_TRAINER_VERSION: &str = "trainer-unknown-version";

/// Counts each image looked up by outcome, and logs the ones left unresolved.
fn record_lookups(ctx: &Context, pinning: &crate::images::Pinning) {
    ctx.metrics
        .set_image_caches(ctx.images.resolver.cache_sizes());
    for r in &pinning.resolved {
        match &r.outcome {
            Ok(_) => ctx.metrics.image_lookup("pinned"),
            Err(e) => {
                ctx.metrics.image_lookup(e.metric_label());
                warn!(image = e.image(), error = %e.message(), "image digest not resolved");
            }
        }
    }
}

/// The answer of `endpoint` from its decision: `/validate`'s is the review `check` and `test`
/// make, `/mutate`'s the same without validation ([`decide_for`]).
///
/// `/mutate` answers the patch and never refuses by policy: the apiserver then calls
/// `/validate` with the patched object, whose decision carries every violation (those of
/// intents that could not be applied included, since the broken structure is still there).
/// Answering violations once keeps kubectl from printing each warning twice.
fn answer(
    ctx: &Context,
    endpoint: Endpoint,
    uid: &str,
    kind: &'static str,
    decision: &decide::Decision,
) -> (Answer, &'static str, Decision) {
    match endpoint {
        Endpoint::Mutate => {
            let mut policies: Vec<&str> =
                decision.applied.iter().map(|i| i.policy.as_str()).collect();
            policies.sort_unstable();
            policies.dedup();
            let outcome = if decision.patch.0.is_empty() {
                Decision::Allowed
            } else {
                Decision::Patched
            };
            info!(decision = outcome.as_str(), policies = %policies.join(","), operations = decision.patch.0.len(), "admission decision");
            // The applied intents' notes (something the user wrote was removed, and why):
            // the object /validate sees no longer shows it, so it is said here.
            let verdict = Verdict {
                patch: Some(decision.patch.clone()),
                warnings: verdict::bound_warnings(&decision.warnings()),
                ..Verdict::allow()
            };
            (reply(&verdict, uid), kind, outcome)
        }
        Endpoint::Validate => {
            // Exempted findings refuse nothing: counted, they would read as denials.
            for v in decision.violations.iter().filter(|v| v.exempted.is_none()) {
                ctx.metrics.violation(&v.policy, v.action);
            }
            let verdict = verdict::for_decision(decision);
            let outcome = if verdict.allowed {
                Decision::Allowed
            } else {
                Decision::Denied
            };
            let mut hit: Vec<&str> = decision
                .violations
                .iter()
                .map(|v| v.policy.as_str())
                .collect();
            hit.sort_unstable();
            hit.dedup();
            // Every finding in full: warnings on the wire may be shortened (verdict.rs).
            let findings: Vec<String> = decision
                .violations
                .iter()
                .map(|v| format!("{} {}", v.action, v.render()))
                .collect();
            info!(decision = outcome.as_str(), policies = %hit.join(","), violations = decision.violations.len(), findings = ?findings, "admission decision");
            (reply(&verdict, uid), kind, outcome)
        }
    }
}

/// Runs the policies on a blocking thread within the deadline and concurrency bound.
async fn evaluate(
    ctx: &Context,
    endpoint: Endpoint,
    set: Arc<PolicySet>,
    input: Input,
) -> Result<decide::Decision, (Failure, String)> {
    let deadline = ctx.eval_timeout;
    let timed_out = || {
        (
            Failure::Timeout,
            format!(
                "policy evaluation did not finish within {} ms; refused because no verdict was reached (retry, or ask the platform team to check the gangplank webhook's load)",
                deadline.as_millis()
            ),
        )
    };
    let started = Instant::now();
    let work = async {
        let permit = ctx.slots.clone().acquire_owned().await.map_err(|_| {
            (
                Failure::Crashed,
                "the evaluation pool is closed".to_string(),
            )
        })?;
        if ctx.in_flight.load(Ordering::SeqCst) <= 1 {
            // Alone: nothing waits behind this review, so evaluate here (see module doc).
            // The deadline cannot interrupt it; a late verdict is refused below.
            let _permit = permit;
            return decide_for(endpoint, &set, &input, &ctx.handoff, &ctx.metrics)
                .map_err(evaluation_failed);
        }
        let span = tracing::Span::current();
        let (handoff, metrics) = (ctx.handoff.clone(), ctx.metrics.clone());
        let task = tokio::task::spawn_blocking(move || {
            // The permit lives as long as the evaluation, even if the caller gave up
            // waiting: a timed-out evaluation still counts against the bound.
            let _permit = permit;
            let _entered = span.enter();
            decide_for(endpoint, &set, &input, &handoff, &metrics)
        });
        match task.await {
            Ok(result) => result.map_err(evaluation_failed),
            Err(_) => Err((
                Failure::Crashed,
                "policy evaluation crashed, so the request is refused".to_string(),
            )),
        }
    };
    match tokio::time::timeout(deadline, work).await {
        Ok(_) if started.elapsed() > deadline => Err(timed_out()),
        Ok(result) => result,
        Err(_) => Err(timed_out()),
    }
}

/// What `endpoint` answers from: `/mutate` the patch alone, `/validate` the whole review
/// (see [`decide::patch`]), or the validation alone of an object `/mutate` produced (see
/// [`super::handoff`]).
fn decide_for(
    endpoint: Endpoint,
    set: &Arc<PolicySet>,
    input: &Input,
    handoff: &Handoff,
    metrics: &Metrics,
) -> Result<decide::Decision, EvalError> {
    match endpoint {
        Endpoint::Mutate => {
            let (decision, complete) = decide::patch(set, input)?;
            if complete {
                handoff.remember(set, input, &decision.mutated);
            }
            Ok(decision)
        }
        Endpoint::Validate => {
            let handed_over = handoff.produced(set, input);
            metrics.handoff(handed_over);
            if handed_over {
                decide::review_mutated(set, input)
            } else {
                decide::review(set, input)
            }
        }
    }
}

/// Why a review over [`Limits::max_values`] is not judged, and what to change.
fn too_many_values(max: usize) -> String {
    format!(
        "the AdmissionReview holds more than {max} JSON values (metadata.managedFields not counted), gangplank's limit, so it is not judged and is refused; judging holds 1-2 KiB per value, and more could take the webhook past its memory limit. Split the job's long lists (env, volumes) into a ConfigMap, or raise the gangplank webhook's --max-review-values flag (GANGPLANK_MAX_REVIEW_VALUES) together with its Pod's memory limit"
    )
}

fn evaluation_failed(e: EvalError) -> (Failure, String) {
    (
        Failure::Evaluation,
        format!("policy evaluation failed, so the request is refused: {e}"),
    )
}

fn fail(
    ctx: &Context,
    uid: &str,
    kind: &'static str,
    failure: Failure,
    message: String,
) -> (Answer, &'static str, Decision) {
    ctx.metrics.failure(failure);
    warn!(decision = "failed", reason = failure.as_str(), error = %message, "admission refused: no verdict");
    let (code, reason) = match failure {
        Failure::Timeout => (504, "Timeout"),
        _ => (500, "InternalError"),
    };
    let answer = reply(&Verdict::refuse(code, reason, message), uid);
    (answer, kind, Decision::Failed)
}

/// No verdict, from a set in which no policy denies (audit-first): admitted, with a warning,
/// and logged (the caller counts the failure as any). Refusing would refuse what no verdict
/// of this set could, and audit-first promises that nothing is refused; the request still
/// goes unjudged, which the warning and the log say.
fn admitted_unchecked(failure: Failure, message: &str) -> Verdict {
    warn!(decision = "failed-open", reason = failure.as_str(), error = %message,
        "admitted without a verdict: no policy of the serving set denies");
    let what = match failure {
        Failure::Timeout => "evaluation timed out",
        Failure::Evaluation => "evaluation failed",
        Failure::Crashed => "evaluation crashed",
        Failure::NoPolicies => "no policy set",
    };
    // The message says "refused": the warning names the failure instead (one line, within
    // WARNING_CHARS), the log has the message.
    Verdict {
        warnings: vec![format!(
            "[gangplank] not checked ({what}); admitted: no policy is set to deny (audit-first)"
        )],
        ..Verdict::allow()
    }
}

fn reply(verdict: &Verdict, uid: &str) -> Answer {
    Answer {
        http_status: 200,
        body: verdict.encode(uid),
        json: true,
    }
}

fn bad_request(e: &BadReview) -> Answer {
    warn!(error = %e, decision = "invalid", "not an AdmissionReview v1");
    Answer {
        http_status: 400,
        body: format!("{e}\n").into_bytes(),
        json: false,
    }
}
