//! Child processes that cannot outlive the test binary.
//!
//! Each server runs under a small bash guardian whose stdin is a pipe from the test process.
//! When the test process ends — normally, by a panic, by `process::exit` from the test
//! harness (which never runs the destructors of statics, where the shared control plane
//! lives) or killed — the kernel closes the pipe, the guardian reads end-of-file and kills
//! the server. Dropping a [`Process`] does the same at once.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `"$@"` and kills it when stdin reaches end-of-file; exits with its status.
const GUARDIAN: &str = r#"
exec 3<&0 0</dev/null
"$@" 3<&- &
child=$!
{ read -r _ <&3; kill -KILL "$child"; } 2>/dev/null &
watcher=$!
exec 3<&-
wait "$child"
status=$?
kill "$watcher" 2>/dev/null
exit "$status"
"#;

/// A server process; its output goes to `<dir>/<name>.log`.
pub struct Process {
    pub name: String,
    guardian: Child,
    /// Closing this ends the server (see the module doc).
    lifeline: Option<ChildStdin>,
    pub log: PathBuf,
}

impl Process {
    pub fn spawn(name: &str, program: &Path, args: &[String], dir: &Path) -> Process {
        Process::spawn_with_env(name, program, args, &[], dir)
    }

    /// As [`Process::spawn`], with `env` (name, value) set for the server only.
    pub fn spawn_with_env(
        name: &str,
        program: &Path,
        args: &[String],
        env: &[(&str, &str)],
        dir: &Path,
    ) -> Process {
        let log = dir.join(format!("{name}.log"));
        let out = File::create(&log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
        let err = out.try_clone().expect("clone log handle");
        let mut guardian = Command::new("bash")
            .arg("-c")
            .arg(GUARDIAN)
            .arg(format!("guardian-{name}"))
            .arg(program)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({}): {e}", program.display()));
        let lifeline = guardian.stdin.take();
        Process {
            name: name.to_string(),
            guardian,
            lifeline,
            log,
        }
    }

    /// `Err` with the log's tail if the process has exited.
    pub fn check_running(&mut self) -> Result<(), String> {
        match self.guardian.try_wait() {
            Ok(Some(status)) => Err(format!(
                "{} exited ({status}); last lines of {}:\n{}",
                self.name,
                self.log.display(),
                self.tail(40)
            )),
            _ => Ok(()),
        }
    }

    /// Whether the process has ended with status 0 (false while it runs).
    pub fn exit_success(&mut self) -> bool {
        matches!(self.guardian.try_wait(), Ok(Some(status)) if status.success())
    }

    /// The server's own pid (the guardian's child), if it runs.
    pub fn server_pid(&self) -> Option<u32> {
        let guardian = self.guardian.id();
        let entries = std::fs::read_dir("/proc").ok()?;
        entries.flatten().find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `pid (comm) state ppid ...`: comm may hold spaces, so split after its `)`.
            let after = stat.rsplit_once(')')?.1;
            let ppid: u32 = after.split_whitespace().nth(1)?.parse().ok()?;
            let comm = stat.split_once('(')?.1.rsplit_once(')')?.0;
            (ppid == guardian && comm != "bash").then_some(pid)
        })
    }

    /// The server's resident set size in KiB (from /proc), if it runs.
    pub fn server_rss_kib(&self) -> Option<u64> {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.server_pid()?)).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// CPU time the server has used (user + system), from /proc; assumes 100 ticks a second.
    pub fn server_cpu(&self) -> Option<std::time::Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.server_pid()?)).ok()?;
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        // After `)`: state is field 0, so utime (field 14 of stat) is 11 and stime 12.
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(std::time::Duration::from_millis(ticks * 10))
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn tail(&self, lines: usize) -> String {
        let text = self.log_text();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Kills the server and waits for it (at most a few seconds).
    pub fn stop(&mut self) {
        drop(self.lifeline.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.guardian.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // The guardian did not act: kill it and leave the server to its own end-of-file.
        let _ = self.guardian.kill();
        let _ = self.guardian.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Removes `dir` when the test binary ends, however it ends.
///
/// The shared control plane lives in a static, whose destructor (and so its `TempDir`'s)
/// never runs: a `bash` janitor waits for end-of-file on a pipe from this process, gives the
/// killed servers a moment to go, and removes the directory.
pub fn remove_at_exit(dir: &Path) {
    let janitor = Command::new("bash")
        .arg("-c")
        .arg(r#"read -r _; sleep 1; rm -rf -- "$1""#)
        .arg("janitor")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    // Leaked on purpose: the pipe must stay open until this process exits.
    if let Ok(janitor) = janitor {
        std::mem::forget(janitor);
    }
}
