//! AdmissionReview `admission.k8s.io/v1` on the wire: the request body in, the response out.
//!
//! Entry points: [`parse`] (body → review, or why it is not one) and [`Verdict`] (what to
//! answer, encoded by [`Verdict::encode`]). Reviews stay `serde_json::Value`s: the object is
//! never round-tripped through typed structs, so unknown and newer fields survive.
//!
//! # Errors
//! Two layers, as the apiserver sees them:
//! - A body that is not an AdmissionReview v1 with a `request` and a `uid` cannot be
//!   answered at all: [`BadReview`] becomes HTTP 400 with a message.
//! - A review whose request is malformed in other ways is answered with
//!   [`Verdict::invalid`]: HTTP 200, `allowed: false`, status code 400.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{json, Map, Value};

/// The only AdmissionReview version served; webhook configurations list it in
/// `admissionReviewVersions`.
pub const API_VERSION: &str = "admission.k8s.io/v1";
pub const KIND: &str = "AdmissionReview";

/// Why a body cannot be answered as an AdmissionReview.
#[derive(Debug, thiserror::Error)]
pub enum BadReview {
    #[error("request body is not valid JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("request body is not a JSON object")]
    NotAnObject,
    #[error("expected apiVersion {API_VERSION:?} and kind {KIND:?}, got apiVersion {api_version:?} and kind {kind:?}")]
    WrongType { api_version: String, kind: String },
    #[error("AdmissionReview has no request object")]
    NoRequest,
    #[error("AdmissionReview.request has no uid, so no response can refer to it")]
    NoUid,
}

/// A body that is an AdmissionReview v1 with a request and its uid.
#[derive(Debug)]
pub struct Review {
    pub value: Value,
    pub uid: String,
}

/// Parses and checks the envelope; the request's content is [`Input::from_review`]'s job.
///
/// [`Input::from_review`]: crate::review::Input::from_review
pub fn parse(body: &[u8]) -> Result<Review, BadReview> {
    let value: Value = serde_json::from_slice(body).map_err(BadReview::Json)?;
    let Some(obj) = value.as_object() else {
        return Err(BadReview::NotAnObject);
    };
    let text = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    if api_version != API_VERSION || kind != KIND {
        return Err(BadReview::WrongType {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        });
    }
    let Some(request) = obj.get("request").and_then(Value::as_object) else {
        return Err(BadReview::NoRequest);
    };
    let uid = match request.get("uid").and_then(Value::as_str) {
        Some(uid) if !uid.is_empty() => uid.to_string(),
        _ => return Err(BadReview::NoUid),
    };
    Ok(Review { value, uid })
}

/// JSON values of a review that judging builds on, counted up to `cap` (counting stops
/// there): every value but those under an object's `metadata.managedFields`, which is dropped
/// before judging. Judging holds about 1–2 KiB per such value (RELIABILITY.md 7.5), far more
/// than the bytes that wrote it, so this, not the body's size, is what bounds its memory.
pub fn judged_values(review: &Value, cap: usize) -> usize {
    let mut counted = 0;
    count_values(review, false, cap, &mut counted);
    counted
}

/// Counts `value` and what it holds into `counted`, up to `cap`; `in_metadata`: `value` is
/// a `metadata` object.
fn count_values(value: &Value, in_metadata: bool, cap: usize, counted: &mut usize) {
    if *counted >= cap {
        return;
    }
    *counted += 1;
    match value {
        Value::Array(items) => {
            for item in items {
                count_values(item, false, cap, counted);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                if in_metadata && key == "managedFields" {
                    continue;
                }
                count_values(item, key == "metadata", cap, counted);
            }
        }
        _ => {}
    }
}

/// `metav1.Status` of a refusal.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub code: u16,
    /// A `metav1.StatusReason`: Forbidden, BadRequest, InternalError, Timeout.
    pub reason: &'static str,
    pub message: String,
}

/// The `response` of an AdmissionReview, before encoding.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    pub allowed: bool,
    pub status: Option<Status>,
    /// Shown by kubectl as `Warning: ...`.
    pub warnings: Vec<String>,
    /// A JSONPatch (RFC 6902) to apply; `None` or empty means no change.
    pub patch: Option<json_patch::Patch>,
    /// Recorded in the audit log under `<webhook name>/<key>`.
    pub audit_annotations: BTreeMap<String, String>,
}

impl Verdict {
    pub fn allow() -> Verdict {
        Verdict {
            allowed: true,
            ..Verdict::default()
        }
    }

    /// Refused by policy: HTTP status code 403, as kubectl shows it.
    pub fn deny(message: String) -> Verdict {
        Verdict::refuse(403, "Forbidden", message)
    }

    /// The request cannot be evaluated as sent.
    pub fn invalid(message: String) -> Verdict {
        Verdict::refuse(400, "BadRequest", message)
    }

    pub fn refuse(code: u16, reason: &'static str, message: String) -> Verdict {
        Verdict {
            allowed: false,
            status: Some(Status {
                code,
                reason,
                message,
            }),
            ..Verdict::default()
        }
    }

    /// The whole AdmissionReview answering `uid`, as JSON bytes.
    pub fn encode(&self, uid: &str) -> Vec<u8> {
        let mut response = Map::new();
        response.insert("uid".into(), Value::String(uid.to_string()));
        response.insert("allowed".into(), Value::Bool(self.allowed));
        if let Some(s) = &self.status {
            response.insert(
                "status".into(),
                json!({
                    "status": if self.allowed { "Success" } else { "Failure" },
                    "code": s.code,
                    "reason": s.reason,
                    "message": s.message,
                }),
            );
        }
        if !self.warnings.is_empty() {
            response.insert("warnings".into(), json!(self.warnings));
        }
        if let Some(patch) = self.patch.as_ref().filter(|p| !p.0.is_empty()) {
            // A Patch is a list of plain operations; serializing it cannot fail.
            let bytes = serde_json::to_vec(patch).unwrap_or_default();
            let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
            response.insert("patchType".into(), Value::String("JSONPatch".into()));
            response.insert("patch".into(), Value::String(encoded));
        }
        if !self.audit_annotations.is_empty() {
            response.insert("auditAnnotations".into(), json!(self.audit_annotations));
        }
        let review = json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "response": Value::Object(response),
        });
        serde_json::to_vec(&review).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).expect("valid JSON")
    }

    #[test]
    fn parse_accepts_a_v1_review_with_a_uid() {
        let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1"}}"#;
        assert_eq!(parse(body).expect("parses").uid, "u1");
    }

    #[test]
    fn parse_names_what_is_wrong() {
        let cases: [(&[u8], &str); 5] = [
            (b"{not json", "not valid JSON"),
            (b"[]", "not a JSON object"),
            (
                br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u"}}"#,
                "admission.k8s.io/v1beta1",
            ),
            (
                br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
                "no request",
            ),
            (
                br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}"#,
                "no uid",
            ),
        ];
        for (body, needle) in cases {
            let message = parse(body).expect_err("refused").to_string();
            assert!(message.contains(needle), "{message:?} lacks {needle:?}");
        }
    }

    #[test]
    fn a_denial_carries_code_403_and_the_message() {
        let out = decode(&Verdict::deny("[p] /spec: no".into()).encode("u2"));
        assert_eq!(out["apiVersion"], API_VERSION);
        assert_eq!(out["kind"], KIND);
        assert_eq!(out["response"]["uid"], "u2");
        assert_eq!(out["response"]["allowed"], false);
        assert_eq!(out["response"]["status"]["code"], 403);
        assert_eq!(out["response"]["status"]["message"], "[p] /spec: no");
        assert!(out["response"].get("patch").is_none());
    }

    #[test]
    fn a_patch_is_base64_json_patch() {
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/a", "value": 1}]))
                .expect("patch");
        let verdict = Verdict {
            patch: Some(patch.clone()),
            ..Verdict::allow()
        };
        let out = decode(&verdict.encode("u3"));
        assert_eq!(out["response"]["patchType"], "JSONPatch");
        let raw = base64::engine::general_purpose::STANDARD
            .decode(out["response"]["patch"].as_str().expect("string"))
            .expect("base64");
        let back: json_patch::Patch = serde_json::from_slice(&raw).expect("patch JSON");
        assert_eq!(back, patch);
    }

    #[test]
    fn an_empty_patch_is_left_out() {
        let verdict = Verdict {
            patch: Some(json_patch::Patch(Vec::new())),
            ..Verdict::allow()
        };
        let out = decode(&verdict.encode("u4"));
        assert!(out["response"].get("patch").is_none());
        assert!(out["response"].get("patchType").is_none());
        assert!(out["response"].get("status").is_none());
    }

    #[test]
    fn judged_values_leave_out_managed_fields_and_stop_at_the_cap() {
        let review = json!({"request": {"object": {
            "metadata": {"name": "a", "managedFields": [{"f:spec": {}}, {}, {}]},
            "spec": {"env": [{"name": "A"}, {"name": "B"}]},
        }}});
        // review, request, object, metadata, name, spec, env, 2 × (entry, name)
        assert_eq!(judged_values(&review, usize::MAX), 11);
        assert_eq!(judged_values(&review, 5), 5);
        // Only metadata's managedFields is left out.
        let elsewhere = json!({"spec": {"managedFields": [1, 2, 3]}});
        assert_eq!(judged_values(&elsewhere, usize::MAX), 6);
    }
}
