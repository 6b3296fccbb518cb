//! [`Problem`]: what is wrong with a job object, at a JSON pointer into it.
//!
//! Every reader of a job (the [`JobView`](super::JobView), its GPU resources and requests,
//! the Trainer's views, the controller's snapshot) reports what it cannot read as problems,
//! and says what it found with [`type_name`]. A leaf: it reads no other module of the job.

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Problem {
    pub path: String,
    pub msg: String,
}

pub(crate) fn problem(path: &str, msg: String) -> Problem {
    Problem {
        path: path.to_string(),
        msg,
    }
}

/// The JSON type name of a value, for messages like "got string".
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}
