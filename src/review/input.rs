//! One admission request as the policies see it, from a bare manifest or an AdmissionReview.
//!
//! Entry points: [`Input::create`] (a manifest, treated as CREATE) and [`Input::from_review`]
//! (`admission.k8s.io/v1` AdmissionReview). [`Input::rego_input`] builds the Rego input
//! document: `request`, `object`, `oldObject`, `job` (JobView), `oldJob`, `images`,
//! `caller`.

use std::collections::BTreeMap;

use regorus::Value as RegoValue;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::job::{self, JobView, KindSpec};
use crate::policy::set::to_rego;
use crate::trainer::{Lookup, TrainerKind};

/// A small serializable value (request fields, JobView) as a Rego value.
fn serialized(v: &impl Serialize) -> RegoValue {
    crate::policy::to_rego::serialize(v).unwrap_or(RegoValue::Undefined)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub fn parse(s: &str) -> Option<Operation> {
        match s {
            "CREATE" => Some(Operation::Create),
            "UPDATE" => Some(Operation::Update),
            "DELETE" => Some(Operation::Delete),
            "CONNECT" => Some(Operation::Connect),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// Who asked, as far as what the answer may tell goes: the policies name objects of the
/// request's namespace that the job itself does not name (a claim's modes and class, a
/// NetworkPolicy and its ports) only to an authenticated caller. Anyone who reaches the
/// webhook port can post a review naming any namespace; the verdict is theirs to know, the
/// namespace's contents are not (`lib.names_shown`, policies/lib/util.rego).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Caller {
    /// A local run (`check`, `audit`, `test`: the operator's own files and credentials), or
    /// the apiserver, authenticated by a client certificate `--client-ca` signed.
    #[default]
    Authenticated,
    /// A connection without such a certificate: every caller of a server without
    /// `--client-ca`.
    Anonymous,
}

/// `input.caller`.
#[derive(Serialize)]
struct CallerView {
    authenticated: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub uid: String,
    pub operation: Operation,
    pub namespace: String,
    pub name: String,
    pub dry_run: bool,
    pub user_info: Value,
    /// The object as submitted; `null` on DELETE.
    pub object: Value,
    pub old_object: Option<Value>,
    /// Image reference → resolved digest, when a resolver (or a test fixture) supplied them.
    pub images: Map<String, Value>,
    /// TrainJobs: the runtime the job names, once looked up ([`RuntimeCatalog::attach`]);
    /// `None` until then (the view then says the runtime is not known).
    ///
    /// [`RuntimeCatalog::attach`]: crate::trainer::RuntimeCatalog::attach
    pub runtime: Option<Lookup>,
    /// Who asked: what the policies' messages may name ([`Caller`]).
    pub caller: Caller,
}

/// What kind of object a request is about, as far as policies go.
#[derive(Debug, Clone, Copy)]
pub enum Subject {
    /// A kubeflow.org training job (v1 kinds, MPIJob v2beta1).
    Kubeflow(&'static KindSpec),
    /// A Trainer v2 TrainJob or runtime.
    Trainer(TrainerKind),
    /// Anything else: allowed untouched.
    Other,
}

/// Drops `metadata.managedFields`, as `audit` does: the apiserver's bookkeeping, which no
/// policy reads, and for a large object about as large as the rest of it. Judged with it, a
/// 4.4 MB review (a 1.4 MB job applied with kubectl) took the server from 39 to 153 MiB;
/// without it, to 92 MiB (RELIABILITY.md "Large reviews"). The patch `/mutate` answers is
/// computed on the object without it and never touches it, so the stored object keeps it.
fn without_managed_fields(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
}

/// `Err` naming `field` and what it is when `value` is present but not a JSON object.
fn not_an_object(field: &str, value: &Value) -> Result<(), String> {
    let what = match value {
        Value::Object(_) | Value::Null => return Ok(()),
        Value::Array(_) => "a JSON array",
        Value::String(_) => "a JSON string",
        Value::Number(_) => "a JSON number",
        Value::Bool(_) => "a JSON boolean",
    };
    Err(format!(
        "AdmissionReview.request.{field} is {what}, not an object: it cannot be judged, so it is refused"
    ))
}

/// At most 100 characters of a string from the request, for messages.
fn short(s: &str) -> String {
    const MAX: usize = 100;
    match s.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}…", s.get(..end).unwrap_or_default()),
        None => s.to_string(),
    }
}

/// `request.kind` (a GroupVersionKind) as `apiVersion` and `kind`.
fn claimed_kind(gvk: &Value) -> Result<(String, String), String> {
    let text = |k: &str| gvk.get(k).and_then(Value::as_str);
    match (text("group"), text("version"), text("kind")) {
        (group, Some(version), Some(kind)) => {
            let api_version = match group.unwrap_or_default() {
                "" => version.to_string(),
                group => format!("{group}/{version}"),
            };
            Ok((api_version, kind.to_string()))
        }
        _ => Err(
            "AdmissionReview.request.kind must be a GroupVersionKind with a version and a kind"
                .into(),
        ),
    }
}

/// Request fields policies may read as `input.request`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RequestView<'a> {
    uid: &'a str,
    operation: Operation,
    namespace: &'a str,
    name: &'a str,
    dry_run: bool,
    user_info: &'a Value,
}

impl Input {
    /// A bare manifest, as `kubectl apply` would create it. Objects without a namespace go
    /// to `default_namespace`, as kubectl does.
    pub fn create(object: Value, default_namespace: &str) -> Input {
        let meta = object.get("metadata");
        let text = |k: &str| {
            meta.and_then(|m| m.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let namespace = Some(text("namespace"))
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| default_namespace.to_string());
        Input {
            uid: String::new(),
            operation: Operation::Create,
            namespace,
            name: text("name"),
            dry_run: false,
            user_info: Value::Object(Map::new()),
            object,
            old_object: None,
            images: Map::new(),
            runtime: None,
            caller: Caller::Authenticated,
        }
    }

    /// The `request` of an AdmissionReview. Errors say which field is wrong.
    pub fn from_review(review: Value) -> Result<Input, String> {
        // Taken apart, not copied: the object is most of a review's bytes.
        let mut request = match review {
            Value::Object(mut envelope) => match envelope.remove("request") {
                Some(Value::Object(r)) => r,
                Some(_) => return Err("AdmissionReview.request must be an object".into()),
                None => return Err("AdmissionReview has no request".into()),
            },
            _ => return Err("AdmissionReview has no request".into()),
        };
        let text = |k: &str| {
            request
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let operation = request
            .get("operation")
            .and_then(Value::as_str)
            .unwrap_or("CREATE");
        let operation = Operation::parse(operation)
            .ok_or_else(|| format!("AdmissionReview.request.operation {operation:?} is not CREATE, UPDATE, DELETE or CONNECT"))?;
        let (uid, namespace, name) = (text("uid"), text("namespace"), text("name"));
        let dry_run = request
            .get("dryRun")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let mut object = request.remove("object").unwrap_or(Value::Null);
        let mut old_object = request.remove("oldObject").filter(|o| !o.is_null());
        without_managed_fields(&mut object);
        if let Some(old) = old_object.as_mut() {
            without_managed_fields(old);
        }
        if object.is_null() && old_object.is_none() {
            return Err("AdmissionReview.request has neither object nor oldObject".into());
        }
        // Policies read fields of an object; anything else would have no kind, be taken for
        // "not a training job" and pass unjudged.
        not_an_object("object", &object)?;
        if let Some(old) = &old_object {
            not_an_object("oldObject", old)?;
        }
        let claimed = request
            .get("kind")
            .filter(|k| !k.is_null())
            .map(claimed_kind);
        let input = Input {
            uid,
            operation,
            namespace,
            name,
            dry_run,
            user_info: request
                .remove("userInfo")
                .unwrap_or(Value::Object(Map::new())),
            object,
            old_object,
            images: Map::new(),
            runtime: None,
            // The server says otherwise for a connection it did not authenticate.
            caller: Caller::Authenticated,
        };
        if let Some(claimed) = claimed {
            input.same_kind_as(&claimed?)?;
        }
        Ok(input)
    }

    /// Refuses a request whose `request.kind` and subject disagree when either is a kind
    /// policies judge: judged as the subject's kind, a request the apiserver routes as a
    /// PyTorchJob could pass as a ConfigMap (or a kindless object) unjudged. The apiserver
    /// encodes the object in the version `request.kind` names, so the two agree in every
    /// review it sends.
    fn same_kind_as(&self, claimed: &(String, String)) -> Result<(), String> {
        let (api_version, kind) = self.type_meta();
        let (claimed_version, claimed_kind) = (claimed.0.as_str(), claimed.1.as_str());
        if (api_version, kind) == (claimed_version, claimed_kind) {
            return Ok(());
        }
        let judged = |v: &str, k: &str| {
            job::lookup(v, k).is_some()
                || TrainerKind::lookup(v, k).is_some()
                || crate::trainer::unknown_version(v, k)
        };
        if !judged(claimed_version, claimed_kind) && !judged(api_version, kind) {
            return Ok(());
        }
        let which = match self.object.is_null() {
            true => "oldObject",
            false => "object",
        };
        Err(format!(
            "AdmissionReview.request.kind is {} {} but request.{which} is apiVersion {:?} kind {:?}: it cannot be judged as the kind the request names, so it is refused",
            short(claimed_version),
            short(claimed_kind),
            short(api_version),
            short(kind),
        ))
    }

    /// The object the request is about: the new one, or the old one on DELETE.
    pub fn subject(&self) -> &Value {
        match (&self.object, &self.old_object) {
            (Value::Null, Some(old)) => old,
            (obj, _) => obj,
        }
    }

    /// `apiVersion` and `kind` of the subject.
    pub fn type_meta(&self) -> (&str, &str) {
        let s = self.subject();
        let field = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or_default();
        (field("apiVersion"), field("kind"))
    }

    /// The kind table row, when the subject is a kubeflow.org training job gangplank knows.
    pub fn kind(&self) -> Option<&'static KindSpec> {
        let (api_version, kind) = self.type_meta();
        job::lookup(api_version, kind)
    }

    pub fn subject_kind(&self) -> Subject {
        let (api_version, kind) = self.type_meta();
        if let Some(spec) = job::lookup(api_version, kind) {
            return Subject::Kubeflow(spec);
        }
        TrainerKind::lookup(api_version, kind).map_or(Subject::Other, Subject::Trainer)
    }

    /// Whether policies judge this kind of object.
    pub fn is_job(&self) -> bool {
        !matches!(self.subject_kind(), Subject::Other)
    }

    /// The Trainer kind of the subject, if it is one.
    pub fn trainer_kind(&self) -> Option<TrainerKind> {
        match self.subject_kind() {
            Subject::Trainer(kind) => Some(kind),
            _ => None,
        }
    }

    /// The JobView of `object` (the subject's kind), when policies judge that kind.
    pub fn view_of(&self, object: &Value) -> Option<JobView> {
        match self.subject_kind() {
            Subject::Kubeflow(spec) => Some(JobView::build(spec, object)),
            Subject::Trainer(TrainerKind::TrainJob) => {
                let (runtime, stale) = match &self.runtime {
                    Some(Lookup::Found(r, stale)) => (Ok(r.as_ref()), stale.clone()),
                    Some(Lookup::Missing(reason)) => (Err(reason.as_str()), None),
                    None => (
                        Err("the runtime was not looked up (no runtime catalog)"),
                        None,
                    ),
                };
                let mut view = crate::trainer::view::trainjob_view(object, runtime);
                if let Some(trainer) = view.trainer.as_mut() {
                    trainer.runtime.stale = stale;
                }
                Some(view)
            }
            Subject::Trainer(kind) => {
                Some(crate::trainer::view::runtime_view(kind.as_str(), object))
            }
            Subject::Other => None,
        }
    }

    /// The Rego input with `object` as the subject (the submitted object, or the mutated one
    /// when validating after mutation). Objects are converted straight into Rego values,
    /// never cloned as JSON first.
    pub fn rego_input_for(&self, object: &Value) -> RegoValue {
        let request = RequestView {
            uid: &self.uid,
            operation: self.operation,
            namespace: &self.namespace,
            name: &self.name,
            dry_run: self.dry_run,
            user_info: &self.user_info,
        };
        let mut doc = BTreeMap::new();
        let mut put = |k: &str, v: RegoValue| doc.insert(RegoValue::String(k.into()), v);
        put("request", serialized(&request));
        put("object", to_rego(object));
        put("images", serialized(&self.images));
        let authenticated = self.caller == Caller::Authenticated;
        put("caller", serialized(&CallerView { authenticated }));
        if let Some(view) = self.view_of(object) {
            put("job", serialized(&view));
        }
        if let Some(old) = &self.old_object {
            put("oldObject", to_rego(old));
            if let Some(view) = self.view_of(old) {
                put("oldJob", serialized(&view));
            }
        }
        RegoValue::from(doc)
    }

    /// [`Self::rego_input_for`] `after`, given the document `before_input` built for an
    /// object that `patch` turns into `after`: the object's value is patched, the JobView
    /// rebuilt.
    pub fn rego_input_after(
        &self,
        before_input: RegoValue,
        patch: &json_patch::Patch,
        after: &Value,
    ) -> RegoValue {
        if patch.0.is_empty() {
            // Nothing changed (an object mutated before, as /validate gets it): the
            // document, JobView included, is already the one of `after`.
            return before_input;
        }
        let patched = (|| {
            let mut doc = before_input;
            let map = doc.as_object_mut().ok()?;
            let object = map.remove(&RegoValue::String("object".into()))?;
            let object = super::diff::patch_rego(object, patch)?;
            map.insert(RegoValue::String("object".into()), object);
            if let Some(view) = self.view_of(after) {
                map.insert(RegoValue::String("job".into()), serialized(&view));
            }
            Some(doc)
        })();
        patched.unwrap_or_else(|| self.rego_input_for(after))
    }

    pub fn build_rego_input(&self) -> RegoValue {
        self.rego_input_for(&self.object)
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::expect_used)] // fixed test documents
mod tests {
    use serde_json::json;

    use super::*;

    fn review(kind: Value, object: Value, old: Value) -> Value {
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": kind,
                "operation": "UPDATE",
                "object": object,
                "oldObject": old,
            }
        })
    }

    fn pytorch_kind() -> Value {
        json!({"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"})
    }

    fn pytorch_job() -> Value {
        json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j"}})
    }

    #[test]
    fn an_object_that_is_not_a_json_object_cannot_be_judged() {
        let cases = [
            (json!([pytorch_job()]), "a JSON array"),
            (json!("PyTorchJob"), "a JSON string"),
            (json!(7), "a JSON number"),
            (json!(true), "a JSON boolean"),
        ];
        for (object, what) in cases {
            for (new, old, field) in [
                (object.clone(), pytorch_job(), "object"),
                (pytorch_job(), object.clone(), "oldObject"),
            ] {
                let message =
                    Input::from_review(review(pytorch_kind(), new, old)).expect_err("refused");
                assert!(
                    message.contains(&format!("request.{field} is {what}, not an object")),
                    "{message}"
                );
            }
        }
    }

    #[test]
    fn a_request_kind_naming_a_training_job_must_match_the_object() {
        let kindless = json!({"metadata": {"name": "j"}});
        let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}});
        for object in [kindless, configmap] {
            let message = Input::from_review(review(pytorch_kind(), object, Value::Null))
                .expect_err("refused");
            assert!(
                message.contains("request.kind is kubeflow.org/v1 PyTorchJob but request.object"),
                "{message}"
            );
        }
        // The other way round: a job the request calls a ConfigMap.
        let configmap_kind = json!({"group": "", "version": "v1", "kind": "ConfigMap"});
        let message = Input::from_review(review(configmap_kind, pytorch_job(), Value::Null))
            .expect_err("refused");
        assert!(
            message.contains("request.kind is v1 ConfigMap"),
            "{message}"
        );
    }

    #[test]
    fn matching_kinds_and_other_kinds_are_read() {
        let input = Input::from_review(review(pytorch_kind(), pytorch_job(), pytorch_job()))
            .expect("a job read as the job it is");
        assert!(input.is_job());
        // Neither side a judged kind: a mismatch is not gangplank's to refuse.
        let secret_kind = json!({"group": "", "version": "v1", "kind": "Secret"});
        let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        assert!(Input::from_review(review(secret_kind, configmap, Value::Null)).is_ok());
        // DELETE: the old object is the subject.
        let mut delete = review(pytorch_kind(), Value::Null, pytorch_job());
        delete["request"]["operation"] = json!("DELETE");
        assert!(Input::from_review(delete).is_ok());
    }

    #[test]
    fn managed_fields_are_not_judged() {
        let mut job = pytorch_job();
        job["metadata"]["managedFields"] = json!([{"manager": "kubectl", "fieldsV1": {}}]);
        let input = Input::from_review(review(pytorch_kind(), job.clone(), job)).expect("read");
        for object in [Some(&input.object), input.old_object.as_ref()] {
            let meta = object.and_then(|o| o.get("metadata"));
            assert_eq!(meta.and_then(|m| m.get("name")), Some(&json!("j")));
            assert!(meta.is_some_and(|m| m.get("managedFields").is_none()));
        }
    }

    #[test]
    fn a_request_kind_without_version_or_kind_is_refused() {
        let message = Input::from_review(review(
            json!({"group": "kubeflow.org"}),
            pytorch_job(),
            Value::Null,
        ))
        .expect_err("refused");
        assert!(message.contains("GroupVersionKind"), "{message}");
    }
}
