//! Jobs from files: what `kubectl get pytorchjobs,tfjobs,mpijobs,... -A -o yaml` prints
//! (a `List`), single objects, multi-document YAML or JSON, in a file or a directory tree.
//!
//! Entry point: [`read`]. Reading is [`crate::review::read_documents`], the reader of
//! `gangplank check`, so the two accept the same files and name a broken document alike.

use std::path::Path;

use serde_json::Value;

use super::{judge, Audit};
use crate::cluster::Inventory;
use crate::policy::PolicySet;
use crate::review::documents::ReadOptions;
use crate::review::{read_documents, DocumentError};
use crate::trainer::RuntimeCatalog;

/// Judges every training job under `path` (in `namespace` only, when given). Objects of
/// other kinds are counted as ignored; unreadable documents are kept with their location.
/// TrainJobs are judged on the runtimes among the documents and in `inventory`.
pub fn read(
    set: &PolicySet,
    path: &Path,
    namespace: Option<&str>,
    inventory: Option<&Inventory>,
) -> Audit {
    let mut audit = Audit {
        source: path.display().to_string(),
        ..Audit::default()
    };
    let documents = read_documents(&[path.to_path_buf()], &ReadOptions::default());
    if documents.is_empty() {
        // An empty directory is almost always a wrong path, not a cluster without jobs.
        audit.unreadable.push(DocumentError {
            source: path.display().to_string(),
            message: "no YAML or JSON objects found".into(),
        });
    }
    let set = &set.clone().with_runtimes(RuntimeCatalog::offline(
        inventory,
        documents.iter().flatten().map(|d| &d.input.object),
    ));
    for document in documents {
        let document = match document {
            Ok(document) => document,
            Err(e) => {
                audit.unreadable.push(e);
                continue;
            }
        };
        if !document.input.is_job() {
            audit.ignored += 1;
            continue;
        }
        if namespace.is_some_and(|ns| ns != document.input.namespace) {
            continue;
        }
        let object: Value = document.input.subject().clone();
        audit.jobs.push(judge(set, object, document.source));
    }
    if audit.ignored > 0 {
        audit.notes.push(format!(
            "objects that are not training jobs, ignored: {}",
            audit.ignored
        ));
    }
    audit.sort();
    audit
}
