//! The coverage report of a suite run (`gangplank test --coverage`): per policy file, the
//! lines its tests evaluated and those none did; per rule definition, whether any test
//! reached it and which of its lines none evaluated.
//!
//! Entry point: [`CoverageReport::build`], from the suite's sources and the lines a
//! [`CoverageSink`] gathered; [`CoverageReport::render`] is the table `gangplank test`
//! prints, the report's JSON the machine-readable form.
//!
//! Only shipped code counts: the policies and `lib/`, never the test modules.

use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::Path;

use serde::Serialize;

use crate::policy::coverage::{rules_of, CoverageSink, FileLines};
use crate::policy::load::{PolicySources, RegoFile};

#[derive(Debug, Clone, Serialize)]
pub struct CoverageReport {
    /// How many tests ran (and so contributed).
    pub tests: usize,
    pub covered: usize,
    pub counted: usize,
    pub percent: f64,
    pub files: Vec<FileCoverage>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileCoverage {
    /// Relative to the policy directory: `capacity.rego`, `lib/util.rego`.
    pub path: String,
    pub covered: usize,
    pub counted: usize,
    pub percent: f64,
    pub covered_lines: Vec<u32>,
    pub not_covered_lines: Vec<u32>,
    pub rules: Vec<RuleCoverage>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RuleCoverage {
    /// As its head writes it (`violation`, `gpus_of`); incremental rules have one entry
    /// per definition, told apart by `line`.
    pub name: String,
    pub line: u32,
    pub end_line: u32,
    /// Some test evaluated at least one of its lines.
    pub reached: bool,
    /// Tests evaluated every one of its lines.
    pub covered: bool,
    pub not_covered_lines: Vec<u32>,
}

impl CoverageReport {
    /// The report over the policies and libraries of `sources`, from what `sink` gathered
    /// while `tests` tests ran.
    pub fn build(
        sources: &PolicySources,
        sink: &CoverageSink,
        tests: usize,
    ) -> Result<CoverageReport, String> {
        if let Some(why) = sink.failure() {
            return Err(format!("regorus could not report coverage: {why}"));
        }
        let gathered = sink.files();
        let shipped = sources
            .policies
            .iter()
            .map(|p| &p.file)
            .chain(&sources.libraries);
        let mut files = Vec::new();
        for file in shipped {
            let key = file.path.display().to_string();
            let empty = FileLines::default();
            files.push(file_coverage(
                file,
                &sources.dir,
                gathered.get(&key).unwrap_or(&empty),
            )?);
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let covered = files.iter().map(|f| f.covered).sum();
        let counted = files.iter().map(|f| f.counted).sum();
        Ok(CoverageReport {
            tests,
            covered,
            counted,
            percent: percent(covered, counted),
            files,
        })
    }

    /// Rule definitions no test reached, as `file: name (line N)`.
    pub fn unreached_rules(&self) -> Vec<String> {
        self.files
            .iter()
            .flat_map(|f| {
                f.rules
                    .iter()
                    .filter(|r| !r.reached)
                    .map(move |r| format!("{}: {} (line {})", f.path, r.name, r.line))
            })
            .collect()
    }

    /// The table `gangplank test --coverage` prints: one row per file (lines covered of
    /// those counted, rules reached of those defined), and under it each rule definition
    /// some line of which no test evaluated.
    pub fn render(&self) -> String {
        let width = self
            .files
            .iter()
            .map(|f| f.path.len())
            .max()
            .unwrap_or(0)
            .max("file".len());
        let mut out = String::new();
        let _ = writeln!(
            out,
            "coverage (interpreter, {} tests): {}/{} lines, {:.1}%",
            self.tests, self.covered, self.counted, self.percent
        );
        let _ = writeln!(
            out,
            "  {:width$}  {:>11}  {:>6}  rules reached",
            "file", "lines", "%"
        );
        for f in &self.files {
            let reached = f.rules.iter().filter(|r| r.reached).count();
            let _ = writeln!(
                out,
                "  {:width$}  {:>11}  {:>5.1}%  {reached}/{}",
                f.path,
                format!("{}/{}", f.covered, f.counted),
                f.percent,
                f.rules.len()
            );
            for r in f.rules.iter().filter(|r| !r.covered) {
                let what = if r.reached {
                    format!("lines {} not covered", ranges(&r.not_covered_lines))
                } else {
                    "NOT REACHED".to_string()
                };
                let _ = writeln!(out, "      {} (line {}): {what}", r.name, r.line);
            }
        }
        let unreached = self.unreached_rules().len();
        let rules: usize = self.files.iter().map(|f| f.rules.len()).sum();
        let _ = writeln!(
            out,
            "{} of {rules} rule definitions reached",
            rules - unreached
        );
        out
    }
}

fn file_coverage(file: &RegoFile, root: &Path, lines: &FileLines) -> Result<FileCoverage, String> {
    let path = file
        .path
        .strip_prefix(root)
        .unwrap_or(&file.path)
        .display()
        .to_string();
    let rules = rules_of(&path, &file.text)?;
    // regorus counts the same lines; the union guards against either missing one.
    let counted: BTreeSet<u32> = rules
        .iter()
        .flat_map(|r| r.counted.iter().copied())
        .chain(lines.counted.iter().copied())
        .collect();
    let covered: BTreeSet<u32> = lines.covered.intersection(&counted).copied().collect();
    let rules = rules
        .into_iter()
        .filter(|r| !r.counted.is_empty())
        .map(|r| {
            let not_covered: Vec<u32> = r.counted.difference(&covered).copied().collect();
            RuleCoverage {
                reached: not_covered.len() < r.counted.len(),
                covered: not_covered.is_empty(),
                name: r.name,
                line: r.line,
                end_line: r.end_line,
                not_covered_lines: not_covered,
            }
        })
        .collect();
    Ok(FileCoverage {
        path,
        covered: covered.len(),
        counted: counted.len(),
        percent: percent(covered.len(), counted.len()),
        not_covered_lines: counted.difference(&covered).copied().collect(),
        covered_lines: covered.into_iter().collect(),
        rules,
    })
}

fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        100.0
    } else {
        // Line counts are far below 2^52: the conversions are exact.
        (part as f64) * 100.0 / (whole as f64)
    }
}

/// `3-5, 9, 12-13` for lines 3, 4, 5, 9, 12, 13.
pub fn ranges(lines: &[u32]) -> String {
    let mut spans: Vec<(u32, u32)> = Vec::new();
    for &line in lines {
        match spans.last_mut() {
            Some((_, end)) if end.checked_add(1) == Some(line) => *end = line,
            _ => spans.push((line, line)),
        }
    }
    spans
        .iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_join_consecutive_lines() {
        assert_eq!(ranges(&[3, 4, 5, 9, 12, 13]), "3-5, 9, 12-13");
        assert_eq!(ranges(&[]), "");
    }
}
