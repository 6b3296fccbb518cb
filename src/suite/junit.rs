//! JUnit XML for CI systems that render test reports.

use std::fmt::Write as _;

/// One finished test for the report.
pub struct JunitCase<'a> {
    pub classname: &'a str,
    pub name: &'a str,
    pub failure: Option<&'a str>,
}

/// A `<testsuites>` document with one `<testsuite>`.
pub fn render(suite: &str, cases: &[JunitCase<'_>]) -> String {
    let failures = cases.iter().filter(|c| c.failure.is_some()).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites tests=\"{}\" failures=\"{failures}\">",
        cases.len()
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\">",
        escape(suite),
        cases.len()
    );
    for c in cases {
        let _ = write!(
            out,
            "    <testcase classname=\"{}\" name=\"{}\"",
            escape(c.classname),
            escape(c.name)
        );
        match c.failure {
            Some(f) => {
                let first = f.lines().next().unwrap_or_default();
                let _ = writeln!(
                    out,
                    ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>",
                    escape(first),
                    escape(f)
                );
            }
            None => out.push_str("/>\n"),
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_counts_failures() {
        let xml = render(
            "policies",
            &[
                JunitCase {
                    classname: "a.yaml",
                    name: "x < y",
                    failure: None,
                },
                JunitCase {
                    classname: "a.yaml",
                    name: "z",
                    failure: Some("got \"1\"\nmore"),
                },
            ],
        );
        assert!(xml.contains("tests=\"2\" failures=\"1\""));
        assert!(xml.contains("name=\"x &lt; y\""));
        assert!(xml.contains("message=\"got &quot;1&quot;\""));
    }
}
