//! Reading fields of a manifest that may be malformed: a wrong type is a [`Problem`] at its
//! JSON pointer, never a panic; totals that would overflow are problems too.

use serde_json::{Map, Value};

use super::problem::{problem, type_name, Problem};
use crate::pointer;

/// A string field that may be absent; any other type is recorded as a problem.
pub(super) fn optional_text<'a>(
    obj: &'a Map<String, Value>,
    field: &str,
    path: &str,
    problems: &mut Vec<Problem>,
) -> Option<&'a str> {
    match obj.get(field) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            problems.push(problem(
                &pointer::join(path, [field]),
                format!("must be a string, got {} {other}", type_name(other)),
            ));
            None
        }
    }
}

/// The sum of `values`, or, when it does not fit in an i64, i64::MAX and a problem at
/// `path`: a total that wrapped around would look small (a 2-pod job needing no gang).
pub(crate) fn checked_total(
    values: impl Iterator<Item = i64>,
    path: &str,
    what: &str,
    problems: &mut Vec<Problem>,
) -> i64 {
    let mut total: i64 = 0;
    for v in values {
        let Some(t) = total.checked_add(v) else {
            problems.push(problem(
                path,
                format!(
                    "{what} add up to more than {}, which cannot be right",
                    i64::MAX
                ),
            ));
            return i64::MAX;
        };
        total = t;
    }
    total
}

pub(super) fn object_at<'a>(
    v: Option<&'a Value>,
    path: &str,
    problems: &mut Vec<Problem>,
) -> Option<&'a Map<String, Value>> {
    match v {
        Some(Value::Object(m)) => Some(m),
        None | Some(Value::Null) => None,
        Some(other) => {
            problems.push(problem(
                path,
                format!("must be an object, got {}", type_name(other)),
            ));
            None
        }
    }
}

pub(super) fn map_at(v: Option<&Value>) -> Map<String, Value> {
    v.and_then(Value::as_object).cloned().unwrap_or_default()
}

pub(super) fn str_at(v: Option<&Value>, key: &str) -> Option<String> {
    v?.get(key)?.as_str().map(str::to_string)
}
