//! Mutation, then validation on the mutated object: the decision the webhooks make.
//!
//! Entry points: [`mutate`] (what `/mutate` answers), [`validate`] (what `/validate`
//! answers) and [`review`] (both in sequence, what the apiserver's two calls add up to,
//! and what `gangplank check` shows). The webhooks answer both endpoints from [`review`]:
//! `/mutate` its patch, `/validate` its violations (on the already mutated object, where the
//! mutation changes nothing more), so the webhooks, `check` and `test` cannot disagree.

use serde::Serialize;
use serde_json::Value;

use super::input::{Input, Operation};
use super::provenance::Provenance;
use crate::policy::{Action, EvalError, Excuses, Intent, PolicySet, Violation};

/// What the policies make of one request.
#[derive(Debug, Clone, Serialize)]
pub struct Decision {
    /// Why no policy ran (not a training job, DELETE, excluded namespace), if so.
    pub skipped: Option<String>,
    pub violations: Vec<Violation>,
    /// Intents that changed the object, in the order they were applied.
    pub applied: Vec<Intent>,
    /// RFC 6902 patch from the submitted object to the mutated one.
    pub patch: json_patch::Patch,
    /// The object as it will be stored.
    pub mutated: Value,
}

impl Decision {
    fn skip(input: &Input, reason: String) -> Decision {
        Decision {
            violations: skip_warning(input, &reason).into_iter().collect(),
            skipped: Some(reason),
            applied: Vec::new(),
            patch: json_patch::Patch(Vec::new()),
            mutated: input.object.clone(),
        }
    }

    /// Adds findings made outside the policies (image lookups that failed), in the order
    /// every decision lists its violations.
    pub fn add_violations(&mut self, violations: Vec<Violation>) {
        if violations.is_empty() {
            return;
        }
        self.violations.extend(violations);
        crate::policy::eval::sort_violations(&mut self.violations);
    }

    /// Allowed unless a policy with action `deny` found a violation nothing excuses.
    pub fn allowed(&self) -> bool {
        !self.violations.iter().any(|v| v.effective(Action::Deny))
    }

    /// The violations of `action` that nothing excuses.
    pub fn with_action(&self, action: Action) -> impl Iterator<Item = &Violation> {
        self.violations.iter().filter(move |v| v.effective(action))
    }

    /// The violations an exemption or an exception excuses.
    pub fn exempted(&self) -> impl Iterator<Item = &Violation> {
        self.violations.iter().filter(|v| v.exempted.is_some())
    }

    /// What `kubectl` prints: `[policy] path: message` for each warn-action violation, and
    /// for each finding an exception excuses, with the exception and its expiry (the user
    /// should hear that the finding comes back). Findings exempted by params.yaml are
    /// recorded, not warned: see [`crate::admission::verdict`].
    pub fn warnings(&self) -> Vec<String> {
        let excepted = self.exempted().filter_map(|v| {
            let e = v.exempted.as_ref()?;
            e.exception.is_some().then(|| v.render_exempted())
        });
        self.with_action(Action::Warn)
            .map(Violation::render)
            .chain(excepted)
            .collect()
    }

    /// The denial message: every deny violation, one per line.
    pub fn denial_message(&self) -> Option<String> {
        let lines: Vec<String> = self
            .with_action(Action::Deny)
            .map(Violation::render)
            .collect();
        (!lines.is_empty()).then(|| lines.join("\n"))
    }
}

/// A request passed unchecked that the user must hear about: a Trainer object of an API
/// version gangplank does not know (a warning saying so, never a refusal).
pub fn skip_warning(input: &Input, reason: &str) -> Option<Violation> {
    let (api_version, kind) = input.type_meta();
    crate::trainer::unknown_version(api_version, kind)
        .then(|| Violation::new(GANGPLANK, Action::Warn, String::new(), reason.to_string()))
}

/// The policy name of findings gangplank makes itself, outside any policy.
pub const GANGPLANK: &str = "gangplank";

/// Why policies do not look at this request, if they don't.
pub fn skip_reason(set: &PolicySet, input: &Input) -> Option<String> {
    if matches!(input.operation, Operation::Delete | Operation::Connect) {
        return Some(format!(
            "{} requests are not checked",
            input.operation.as_str()
        ));
    }
    if deletion_bookkeeping(input) {
        return Some(
            "the job is being deleted (deletionTimestamp is set) and the update leaves everything but metadata and status as it was; not checked".into(),
        );
    }
    if !input.is_job() {
        let (api_version, kind) = input.type_meta();
        if crate::trainer::unknown_version(api_version, kind) {
            return Some(format!(
                "{api_version} {kind} is an API version gangplank does not know (it knows {}, Trainer v2.2 and v2.3); allowed unchecked",
                crate::trainer::VERSION
            ));
        }
        return Some(format!(
            "not a training job ({api_version}/{kind}); allowed untouched"
        ));
    }
    let subject = set.subject(&input.namespace, &input.object);
    if let Ok(Some(why)) = set.global_exemption(&subject) {
        return Some(format!(
            "excluded from every policy by params.yaml {why}, in namespace {}",
            input.namespace
        ));
    }
    None
}

/// An UPDATE of a job being deleted that changes only its metadata and status: a
/// controller removing its finalizer. Refusing that (say, after a policy was tightened) would
/// keep the job from ever going away, so it is not checked. Anything else it changes (its
/// `spec`, or a field of its own beside it) is checked as any update is: a deletion in
/// progress is no licence to rewrite the job. Without `oldObject` (a hand-written review;
/// the apiserver always sends it) nothing shows the update to be bookkeeping, so it is
/// checked.
fn deletion_bookkeeping(input: &Input) -> bool {
    let deleting = input
        .object
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    if input.operation != Operation::Update || !deleting {
        return false;
    }
    let Some(old) = input.old_object.as_ref() else {
        return false;
    };
    same_beyond_metadata(&input.object, old)
}

/// Whether two objects are equal in every top-level field but `metadata` and `status`.
fn same_beyond_metadata(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let counted = |(key, _): &(&String, &Value)| !matches!(key.as_str(), "metadata" | "status");
    a.iter().filter(counted).count() == b.iter().filter(counted).count()
        && a.iter()
            .filter(counted)
            .all(|(key, value)| b.get(key) == Some(value))
}

/// The mutated object, the intents that changed it and the patch.
pub struct Mutation {
    pub mutated: Value,
    pub applied: Vec<Intent>,
    /// Intents that could not be applied (the object's structure is broken where they point,
    /// e.g. `template: "oops"`), as violations of their policy, and warnings about a garbled
    /// record of derived defaults. The rest still apply, so one malformed field never hides
    /// what the other policies have to say.
    pub failed: Vec<Violation>,
    /// What the applied intents that carry a `msg` tell the user, as warnings of their
    /// policy: `/mutate` answers them with its patch (the object `/validate` then sees no
    /// longer shows what was changed).
    pub notes: Vec<Violation>,
    pub patch: json_patch::Patch,
    /// The Rego input document the mutation policies saw, and the patch from what they saw
    /// to `mutated` (`None`: `patch`): [`Mutation::take_rego_input`] patches the mutated
    /// object's document from them, only when validation follows.
    seen_input: regorus::Value,
    seen_patch: Option<json_patch::Patch>,
    /// The policies this request is excused from: validation uses the same, checked at the
    /// same instant.
    pub excuses: Excuses,
}

impl Mutation {
    /// The Rego input document the mutation policies saw (the submitted object, less the
    /// derived defaults gangplank wrote earlier); `Undefined` once
    /// [`Mutation::take_rego_input`] took it.
    pub fn seen_rego_input(&self) -> &regorus::Value {
        &self.seen_input
    }

    /// The Rego input document of the mutated object (for [`validate_mutated`]): the one the
    /// mutation policies saw, patched, instead of a second conversion. Taken: a second call
    /// converts the object again.
    pub fn take_rego_input(&mut self, input: &Input) -> regorus::Value {
        let seen = std::mem::replace(&mut self.seen_input, regorus::Value::Undefined);
        if matches!(seen, regorus::Value::Undefined) {
            return input.rego_input_for(&self.mutated);
        }
        let patch = self.seen_patch.as_ref().unwrap_or(&self.patch);
        input.rego_input_after(seen, patch, &self.mutated)
    }
}

/// Runs every mutation policy on the submitted object. Policies all see the submitted
/// object, less the derived defaults gangplank wrote earlier (see [`super::provenance`]);
/// their intents are applied in order (see [`PolicySet::mutation_intents`]). On UPDATE,
/// images keep the stored object's digests (see [`super::pinned`]).
pub fn mutate(set: &PolicySet, input: &Input) -> Result<Mutation, EvalError> {
    mutate_excused(set, input, excuses(set, input))
}

/// The policies `input` is excused from now (see [`crate::policy::excuse`]).
pub fn excuses(set: &PolicySet, input: &Input) -> Excuses {
    let subject = set.subject(&input.namespace, &input.object);
    set.excuses(&subject, time::OffsetDateTime::now_utc())
}

/// [`mutate`], policies `excuses` names left out.
fn mutate_excused(set: &PolicySet, input: &Input, excuses: Excuses) -> Result<Mutation, EvalError> {
    let input = set.runtimes().attach(input);
    let input = super::pinned::keep_stored_digests(&input);
    let mut provenance = Provenance::read(&input.object);
    // Every write below goes through an intent's path: the patch looks only along them.
    let mut touched: Vec<String> = provenance.paths().map(str::to_string).collect();
    touched.push(super::provenance::annotation_path());
    let mut mutated = input.object.clone();
    // What the policies saw, when it is not the submitted object.
    let released = (!provenance.is_empty()).then(|| {
        provenance.release(&mut mutated);
        mutated.clone()
    });
    let released_input = input.rego_input_for(&mutated);
    let intents = set.mutation_intents(&released_input, &excuses)?;
    touched.extend(intents.iter().map(|i| i.path.clone()));
    let mut applied = Vec::new();
    let mut failed = Vec::new();
    let mut notes = Vec::new();
    // A TrainJob's pods are its runtime's but for what `spec.trainer` sets: intents that
    // point elsewhere (into the runtime, or at fields a TrainJob does not have) are left to
    // the runtime's own admission, and validation names the runtime field.
    let trainer = input.trainer_kind();
    let intents = intents
        .into_iter()
        .filter(|i| trainer.is_none_or(|kind| crate::trainer::admits_intent(kind, &i.path)));
    for intent in intents {
        match intent.apply(&mut mutated) {
            Ok(true) => {
                provenance.record(&intent);
                notes.extend(note(&intent));
                applied.push(intent);
            }
            Ok(false) => {}
            Err(e) => failed.push(Violation::new(
                &intent.policy,
                set.policy(&intent.policy)
                    .map_or(Action::Deny, |p| p.action),
                intent.path,
                match e {
                    EvalError::Intent { op, detail, .. } => {
                        format!("cannot {op} this field: {detail}")
                    }
                    other => other.to_string(),
                },
            )),
        }
    }
    provenance.write(&mut mutated);
    failed.append(&mut provenance.notes);
    let touched = || touched.iter().map(String::as_str);
    let patch = super::diff::diff_touched(&input.object, &mutated, touched());
    let seen_patch = released.map(|seen| super::diff::diff_touched(&seen, &mutated, touched()));
    Ok(Mutation {
        mutated,
        applied,
        failed,
        notes,
        patch,
        seen_input: released_input,
        seen_patch,
        excuses,
    })
}

/// The warning an applied intent carries, if any: a warning whatever the policy's action,
/// since the change is made and nothing is refused.
fn note(intent: &Intent) -> Option<Violation> {
    let msg = intent.msg.as_ref()?;
    Some(Violation::new(
        &intent.policy,
        Action::Warn,
        intent.path.clone(),
        msg.clone(),
    ))
}

/// Runs every validation policy on `object` (the mutated object, as the apiserver calls
/// validating webhooks after mutating ones).
pub fn validate(
    set: &PolicySet,
    input: &Input,
    object: &Value,
) -> Result<Vec<Violation>, EvalError> {
    set.violations(&input.rego_input_for(object), &excuses(set, input))
}

/// [`validate`] of a [`Mutation`]'s object, on the input document mutation built.
pub fn validate_mutated(
    set: &PolicySet,
    input: &Input,
    mutation: &mut Mutation,
) -> Result<Vec<Violation>, EvalError> {
    let rego_input = mutation.take_rego_input(input);
    set.violations(&rego_input, &mutation.excuses)
}

/// What `/mutate` answers: the patch of the mutation policies and the applied intents'
/// notes ([`Mutation::notes`]), and no validation. The apiserver then calls `/validate` with
/// the patched object, whose [`review`] carries every violation (those of intents that
/// cannot be applied included: they fail again there), so validating here too would only
/// repeat that work. The second value says whether every
/// intent could be applied: only then may `/validate` take the object as final (see
/// [`review_mutated`]).
pub fn patch(set: &PolicySet, input: &Input) -> Result<(Decision, bool), EvalError> {
    if let Some(reason) = skip_reason(set, input) {
        return Ok((Decision::skip(input, reason), false));
    }
    let Mutation {
        mutated,
        applied,
        patch,
        failed,
        notes,
        ..
    } = mutate(set, input)?;
    let decision = Decision {
        skipped: None,
        violations: notes,
        applied,
        patch,
        mutated,
    };
    Ok((decision, failed.is_empty()))
}

/// Mutation, then validation of the result.
pub fn review(set: &PolicySet, input: &Input) -> Result<Decision, EvalError> {
    let input = &*set.runtimes().attach(input);
    if let Some(reason) = skip_reason(set, input) {
        return Ok(Decision::skip(input, reason));
    }
    let mut mutation = mutate(set, input)?;
    let mut violations = validate_mutated(set, input, &mut mutation)?;
    let Mutation {
        mutated,
        applied,
        failed,
        notes,
        patch,
        excuses,
        ..
    } = mutation;
    violations.extend(failed);
    violations.extend(notes);
    let found = Found {
        violations,
        excuses,
    };
    conclude(set, input, found, applied, patch, mutated)
}

/// A review's findings and the excuses they were judged with.
struct Found {
    violations: Vec<Violation>,
    excuses: Excuses,
}

/// [`review`] of an object the mutation policies produced themselves, all of their intents
/// applied: only the validation policies run. Mutating it again would change nothing and
/// find nothing (the policy suites check that for every case), so `/validate` answers from
/// this when `/mutate` handed the object over (see `admission::handoff`).
pub fn review_mutated(set: &PolicySet, input: &Input) -> Result<Decision, EvalError> {
    let input = &*set.runtimes().attach(input);
    if let Some(reason) = skip_reason(set, input) {
        return Ok(Decision::skip(input, reason));
    }
    let excuses = excuses(set, input);
    let violations = set.violations(&input.rego_input_for(&input.object), &excuses)?;
    let found = Found {
        violations,
        excuses,
    };
    let unchanged = json_patch::Patch(Vec::new());
    conclude(
        set,
        input,
        found,
        Vec::new(),
        unchanged,
        input.object.clone(),
    )
}

/// The decision from a review's violations: TrainJob paths named as the user wrote them,
/// violations the stored object already had excused, the notes of exemptions and
/// exceptions that did not apply (see [`exemption_notes`]), sorted.
fn conclude(
    set: &PolicySet,
    input: &Input,
    found: Found,
    applied: Vec<Intent>,
    patch: json_patch::Patch,
    mutated: Value,
) -> Result<Decision, EvalError> {
    let Found {
        mut violations,
        excuses,
    } = found;
    if input.trainer_kind() == Some(crate::trainer::TrainerKind::TrainJob) {
        violations
            .iter_mut()
            .for_each(|v| v.path = crate::trainer::trainjob_field(&v.path));
    }
    super::existing::excuse_existing(set, input, &mutated, &mut violations, &excuses)?;
    let notes = exemption_notes(set, input, &violations, &excuses);
    violations.extend(notes);
    crate::policy::eval::sort_violations(&mut violations);
    Ok(Decision {
        skipped: None,
        violations,
        applied,
        patch,
        mutated,
    })
}

/// Warnings for the exemptions and exceptions that would have excused a finding but did not
/// apply (expired, or namespace labels unknown): only for policies that found something,
/// so that a lapsed exception is heard about exactly when it matters. An expired exception
/// is also logged, for the platform team.
fn exemption_notes(
    set: &PolicySet,
    input: &Input,
    violations: &[Violation],
    excuses: &Excuses,
) -> Vec<Violation> {
    let counted = |v: &&Violation| v.exempted.is_none() && v.policy != GANGPLANK;
    let found: Vec<&str> = violations
        .iter()
        .filter(counted)
        .map(|v| v.policy.as_str())
        .collect();
    let mut out = Vec::new();
    for note in &excuses.notes {
        let concerned = match note.policy {
            None => !found.is_empty(),
            Some(i) => set
                .policies()
                .get(i)
                .is_some_and(|p| found.contains(&p.name.as_str())),
        };
        if !concerned {
            continue;
        }
        if let Some(exception) = &note.expired {
            tracing::warn!(exception = %exception, namespace = %input.namespace, job = %input.name,
                "expired policy exception matched a job; its findings apply again");
        }
        out.push(Violation::new(
            GANGPLANK,
            Action::Warn,
            String::new(),
            note.message.clone(),
        ));
    }
    out
}
