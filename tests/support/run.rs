//! One finished run of the `gangplank` binary, as the CLI tests read it. Shared by the
//! check, audit and e2e suites (included by path where the rest of tests/support is not).

use std::process::Output;

/// What one run of the binary produced.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The run `out` describes. Every run must end with an exit code (no signal) and
    /// without a panic.
    pub fn finished(out: Output) -> Run {
        let run = Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        assert!(
            out.status.code().is_some() && !run.stderr.contains("panicked"),
            "gangplank crashed:\n{}",
            run.output()
        );
        run
    }

    /// Both streams, for assertion messages.
    pub fn output(&self) -> String {
        format!(
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}
