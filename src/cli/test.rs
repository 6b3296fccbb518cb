//! `gangplank test`: run policy test suites (Rego `test_*` rules and YAML case files).

use std::io::Write;
use std::path::PathBuf;

macro_rules! say {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

use clap::{Args, ValueEnum};

use crate::exit;
use crate::suite::junit::{self, JunitCase};
use crate::suite::{json, Suite};

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Policy directory; its tests/ holds *.rego test modules and *.yaml case files.
    #[arg(default_value = "policies", env = "GANGPLANK_POLICIES")]
    pub dir: PathBuf,
    /// `text`: a line per test and a summary. `json`: one JSON document on stdout, per
    /// suite (file) its cases with status `passed` or `failed` and the failure's message
    /// (the coverage table, if asked for, then goes to stderr). The exit code is the same.
    // Not GANGPLANK_OUTPUT: `check` reads that one, and it also allows `yaml`.
    #[arg(
        short,
        long,
        value_enum,
        default_value = "text",
        env = "GANGPLANK_TEST_OUTPUT"
    )]
    pub output: Output,
    /// Only run tests whose name contains this text.
    #[arg(long, env = "GANGPLANK_TEST_FILTER")]
    pub filter: Option<String>,
    /// Also write a JUnit XML report here.
    #[arg(long, env = "GANGPLANK_JUNIT")]
    pub junit: Option<PathBuf>,
    /// Report which lines and rules of the policies and lib/ the tests run evaluated (on the
    /// interpreter: each case runs once more there), as a table after the results.
    #[arg(long, env = "GANGPLANK_TEST_COVERAGE")]
    pub coverage: bool,
    /// Write the coverage report as JSON here (implies --coverage): per file its covered and
    /// not covered lines, per rule definition whether it was reached and its uncovered lines.
    #[arg(long, value_name = "FILE", env = "GANGPLANK_COVERAGE_JSON")]
    pub coverage_json: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

impl TestArgs {
    pub fn run(self) -> u8 {
        let Self {
            dir,
            output,
            filter,
            junit,
            coverage,
            coverage_json,
        } = self;
        let mut suite = match Suite::discover(&dir) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                return exit::UNREADABLE;
            }
        };
        if coverage || coverage_json.is_some() {
            suite.record_coverage();
        }
        // Output errors (a closed pipe: `gangplank test | head`) must not stop the run or
        // change its exit code, so each line's write result is deliberately ignored.
        // In JSON mode stdout carries the document only; the text lines go nowhere and the
        // coverage table goes to stderr.
        let mut out: Box<dyn Write> = match output {
            Output::Text => Box::new(std::io::stdout().lock()),
            Output::Json => Box::new(std::io::sink()),
        };
        let mut results = Vec::new();
        for test in suite.tests() {
            let name = test.name(suite.root());
            if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
                continue;
            }
            let result = suite.run(test);
            match &result {
                Ok(()) => say!(out, "ok    {name}"),
                Err(why) => say!(out, "FAIL  {name}\n{}", indent(why)),
            }
            results.push((name, result));
        }
        let failed = results.iter().filter(|(_, r)| r.is_err()).count();
        say!(
            out,
            "\n{} tests: {} passed, {failed} failed",
            results.len(),
            results.len() - failed
        );
        let cases: Vec<JunitCase<'_>> = results
            .iter()
            .map(|(name, r)| {
                let (classname, test) = name.split_once(": ").unwrap_or(("policies", name));
                JunitCase {
                    classname,
                    name: test,
                    failure: r.as_ref().err().map(String::as_str),
                }
            })
            .collect();
        if output == Output::Json {
            // Written like the text lines: a closed pipe does not change the exit code.
            if let Ok(doc) = serde_json::to_string_pretty(&json::report(&cases)) {
                say!(std::io::stdout(), "{doc}");
            }
            out = Box::new(std::io::stderr());
        }
        if let Some(path) = junit {
            if let Err(e) = std::fs::write(&path, junit::render("gangplank policies", &cases)) {
                eprintln!("error: cannot write {}: {e}", path.display());
                return exit::UNREADABLE;
            }
        }
        if results.is_empty() {
            eprintln!("error: no tests found under {}/tests", dir.display());
            return exit::FAILED;
        }
        match suite.coverage_report(results.len()) {
            None => {}
            Some(Err(e)) => {
                eprintln!("error: coverage: {e}");
                return exit::UNREADABLE;
            }
            Some(Ok(report)) => {
                say!(out, "\n{}", report.render().trim_end());
                if let Some(path) = coverage_json {
                    let json = serde_json::to_string_pretty(&report).map(|j| j + "\n");
                    if let Err(e) = json
                        .map_err(std::io::Error::other)
                        .and_then(|json| std::fs::write(&path, json))
                    {
                        eprintln!("error: cannot write {}: {e}", path.display());
                        return exit::UNREADABLE;
                    }
                }
            }
        }
        if failed > 0 {
            exit::FAILED
        } else {
            exit::OK
        }
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("      {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
