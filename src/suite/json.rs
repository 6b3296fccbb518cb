//! `gangplank test -o json`: the results as one JSON document, grouped by suite (the file a
//! test comes from), for CI systems and scripts that read JSON rather than JUnit XML.
//!
//! ```json
//! {"tests": 2, "passed": 1, "failed": 1, "suites": [
//!   {"name": "tests/coordinator.yaml", "tests": 2, "passed": 1, "failed": 1, "cases": [
//!     {"name": "one master is allowed", "status": "passed"},
//!     {"name": "two masters are refused", "status": "failed", "message": "..."}]}]}
//! ```

use serde::Serialize;

use super::junit::JunitCase;

/// The whole report.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    #[serde(flatten)]
    pub counts: Counts,
    pub suites: Vec<SuiteReport<'a>>,
}

/// The tests of one file, in the order they ran.
#[derive(Debug, Serialize)]
pub struct SuiteReport<'a> {
    pub name: &'a str,
    #[serde(flatten)]
    pub counts: Counts,
    pub cases: Vec<CaseReport<'a>>,
}

/// How many tests ran, passed and failed (of a suite or of them all).
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct Counts {
    pub tests: usize,
    pub passed: usize,
    pub failed: usize,
}

impl Counts {
    fn add(&mut self, status: Status) {
        self.tests += 1;
        match status {
            Status::Passed => self.passed += 1,
            Status::Failed => self.failed += 1,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct CaseReport<'a> {
    pub name: &'a str,
    pub status: Status,
    /// Why it failed; absent for a test that passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<&'a str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Passed,
    Failed,
}

/// The report of `cases`, suites in order of their first test.
pub fn report<'a>(cases: &[JunitCase<'a>]) -> Report<'a> {
    let mut report = Report {
        counts: Counts::default(),
        suites: Vec::new(),
    };
    for case in cases {
        let status = match case.failure {
            Some(_) => Status::Failed,
            None => Status::Passed,
        };
        report.counts.add(status);
        let index = match report.suites.iter().position(|s| s.name == case.classname) {
            Some(i) => i,
            None => {
                report.suites.push(SuiteReport {
                    name: case.classname,
                    counts: Counts::default(),
                    cases: Vec::new(),
                });
                report.suites.len() - 1
            }
        };
        if let Some(suite) = report.suites.get_mut(index) {
            suite.counts.add(status);
            suite.cases.push(CaseReport {
                name: case.name,
                status,
                message: case.failure,
            });
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_cases_by_suite_and_counts_failures() {
        let case = |classname, name, failure| JunitCase {
            classname,
            name,
            failure,
        };
        let cases = [
            case("a.yaml", "x", None),
            case("b.rego", "test_y", Some("undefined")),
            case("a.yaml", "z", Some("got 1")),
        ];
        let json = serde_json::to_value(report(&cases)).unwrap_or_default();
        assert_eq!(json["tests"], 3);
        assert_eq!(json["failed"], 2);
        assert_eq!(json["suites"][0]["name"], "a.yaml");
        assert_eq!(json["suites"][0]["passed"], 1);
        assert_eq!(json["suites"][0]["cases"][1]["status"], "failed");
        assert_eq!(json["suites"][0]["cases"][1]["message"], "got 1");
        assert!(json["suites"][0]["cases"][0].get("message").is_none());
        assert_eq!(json["suites"][1]["cases"][0]["name"], "test_y");
    }
}
