//! Pinned digests hold on UPDATE: an image reference the update leaves as it was keeps the
//! digest the stored job has, whatever the tag points to now.
//!
//! Entry point: [`keep_stored_digests`]. Every pod of a job must run the same bytes; a pod
//! re-created after an edit must not pick up a tag that was re-pushed in between. Only a
//! reference that changed (or is new) is resolved again.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::input::{Input, Operation};
use crate::job::JobView;

/// `input` with `images` overlaid by the stored object's digests, on UPDATE; unchanged
/// (borrowed) otherwise.
pub fn keep_stored_digests(input: &Input) -> Cow<'_, Input> {
    let (Operation::Update, Some(old)) = (input.operation, input.old_object.as_ref()) else {
        return Cow::Borrowed(input);
    };
    let Some(old_view) = input.view_of(old) else {
        return Cow::Borrowed(input);
    };
    let stored = stored_digests(&old_view);
    if stored.iter().all(|(r, d)| input.images.get(r) == Some(d)) {
        return Cow::Borrowed(input);
    }
    let mut input = input.clone();
    input.images.extend(stored);
    Cow::Owned(input)
}

/// Reference → digest of every image of `view` written as `<reference>@sha256:<hex>`.
fn stored_digests(view: &JobView) -> Map<String, Value> {
    view.replicas
        .iter()
        .flat_map(|r| r.containers.iter().chain(&r.init_containers))
        .filter_map(|c| {
            let (reference, digest) = c.image.rsplit_once('@')?;
            digest
                .starts_with("sha256:")
                .then(|| (reference.to_string(), Value::String(digest.to_string())))
        })
        .collect()
}
