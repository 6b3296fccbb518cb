//! Time-limited policy exceptions: `exceptions/*.yaml` beside the policies, each excusing
//! some jobs from some policies until a date.
//!
//! ```yaml
//! name: legacy-tags                 # unique among the exceptions
//! policies: [images]                # policy names; each must exist
//! match:                            # every part given must hold; at least one part
//!   namespaces: [research-*]        # exact names or `*` globs
//!   names: [resnet-*]               # the job's metadata.name, same patterns
//!   namespaceSelector: {matchLabels: {team: vision}}
//!   objectSelector: {matchLabels: {legacy: "true"}}
//! reason: migrating to digests, ticket ML-123
//! expires: 2026-12-31               # required: RFC 3339 date-time, or a date (its end, UTC)
//! ```
//!
//! Entry points: [`read_dir`] (the files, at load), [`PolicyException::parse`] (one file,
//! checked against the policy names) and [`PolicyException::check`] (per request, at `now`).
//!
//! # Errors
//! A file that does not parse, lacks `expires`, names an unknown policy or has an invalid
//! pattern or selector is a load error naming the file and the field: the whole set is
//! refused, and `serve` keeps serving the last good one.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::{Date, Month, OffsetDateTime, Time};

use super::error::LoadError;
use super::exemption::{self, NamePatterns, Subject};
use crate::cluster::selector::Selector;

/// The exceptions' directory inside a policy directory.
pub const EXCEPTIONS_DIR: &str = "exceptions";

/// One exception file, read but not checked.
#[derive(Debug, Clone)]
pub struct ExceptionFile {
    pub path: PathBuf,
    pub text: String,
}

/// `dir/exceptions/*.yaml` (and `*.yml`) in name order; none when the directory is absent.
pub fn read_dir(dir: &Path) -> Result<Vec<ExceptionFile>, LoadError> {
    let mut out = Vec::new();
    for path in paths(dir)? {
        let text = std::fs::read_to_string(&path).map_err(|source| LoadError::Io {
            path: path.clone(),
            source,
        })?;
        out.push(ExceptionFile { path, text });
    }
    Ok(out)
}

/// The exception files' paths, for [`read_dir`] and the reload's fingerprint.
pub fn paths(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let dir = dir.join(EXCEPTIONS_DIR);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let io = |source| LoadError::Io {
        path: dir.clone(),
        source,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
        // `..data` and friends: the ConfigMap volume's own bookkeeping.
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if yaml && !hidden && path.is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: Option<String>,
    #[serde(default)]
    policies: Vec<String>,
    #[serde(rename = "match")]
    matches: Option<RawMatch>,
    reason: Option<String>,
    expires: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawMatch {
    namespaces: Option<Vec<String>>,
    names: Option<Vec<String>>,
    namespace_selector: Option<Value>,
    object_selector: Option<Value>,
}

/// Who an exception excuses: every part given must hold.
#[derive(Debug, Clone, Default)]
struct Match {
    namespaces: Option<NamePatterns>,
    names: Option<NamePatterns>,
    namespace_selector: Option<Selector>,
    object_selector: Option<Selector>,
}

/// A checked exception.
#[derive(Debug, Clone)]
pub struct PolicyException {
    pub name: String,
    pub path: PathBuf,
    pub policies: Vec<String>,
    pub reason: String,
    /// The first instant it no longer applies.
    pub expires: OffsetDateTime,
    matches: Match,
}

/// What an exception makes of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// It matches and applies.
    Applies,
    /// It matches, but expired (at [`PolicyException::expires`]).
    Expired,
    /// It would match, if the namespace's labels were known: why they are not.
    Unchecked(String),
    NoMatch,
}

impl PolicyException {
    /// Parses and checks one file; `known` are the policy names of the set.
    pub fn parse(file: &ExceptionFile, known: &[&str]) -> Result<PolicyException, LoadError> {
        let bad = |field: &str, detail: String| LoadError::Exception {
            path: file.path.clone(),
            field: field.to_string(),
            detail,
        };
        let raw: Raw = yaml_serde::from_str(&file.text)
            .map_err(|e| bad("(file)", format!("not an exception: {e}")))?;
        let name = raw
            .name
            .filter(|n| !n.trim().is_empty())
            .ok_or_else(|| bad("name", "required: the name verdicts cite".into()))?;
        if raw.policies.is_empty() {
            return Err(bad(
                "policies",
                "required: the policies this exception excuses".into(),
            ));
        }
        if let Some(unknown) = raw.policies.iter().find(|p| !known.contains(&p.as_str())) {
            return Err(bad(
                "policies",
                format!(
                    "{unknown:?} is not a policy of this set (policies: {})",
                    known.join(", ")
                ),
            ));
        }
        let expires = raw.expires.ok_or_else(|| {
            bad(
                "expires",
                "required: an exception must end (RFC 3339, e.g. 2026-12-31 or 2026-12-31T18:00:00Z)".into(),
            )
        })?;
        let expires = parse_expiry(&expires).map_err(|e| bad("expires", e))?;
        let reason = raw
            .reason
            .filter(|r| !r.trim().is_empty())
            .ok_or_else(|| bad("reason", "required: why these jobs are excused".into()))?;
        let raw_match = raw.matches.unwrap_or_default();
        let patterns = |list: Option<Vec<String>>, field: &str| {
            list.map(|l| NamePatterns::parse(&l))
                .transpose()
                .map_err(|e| bad(field, e))
        };
        let matches = Match {
            namespaces: patterns(raw_match.namespaces, "match.namespaces")?,
            names: patterns(raw_match.names, "match.names")?,
            namespace_selector: exemption::selector(raw_match.namespace_selector.as_ref(), "")
                .map_err(|e| bad("match.namespaceSelector", e.trim_start_matches(": ").into()))?,
            object_selector: exemption::selector(raw_match.object_selector.as_ref(), "")
                .map_err(|e| bad("match.objectSelector", e.trim_start_matches(": ").into()))?,
        };
        if matches.namespaces.is_none()
            && matches.names.is_none()
            && matches.namespace_selector.is_none()
            && matches.object_selector.is_none()
        {
            return Err(bad(
                "match",
                "required: namespaces, names, namespaceSelector or objectSelector (namespaces: [\"*\"] for every job)".into(),
            ));
        }
        Ok(PolicyException {
            name,
            path: file.path.clone(),
            policies: raw.policies,
            reason,
            expires,
            matches,
        })
    }

    /// Whether it excuses `policy` for `subject` at `now`.
    pub fn check(&self, policy: &str, subject: &Subject, now: OffsetDateTime) -> Check {
        if !self.policies.iter().any(|p| p == policy) {
            return Check::NoMatch;
        }
        let m = &self.matches;
        let named = |patterns: &Option<NamePatterns>, name: &str| {
            patterns.as_ref().is_none_or(|p| p.find(name).is_some())
        };
        let objects = m
            .object_selector
            .as_ref()
            .is_none_or(|s| subject.object_selected(s));
        if !named(&m.namespaces, &subject.namespace) || !named(&m.names, &subject.name) || !objects
        {
            return Check::NoMatch;
        }
        if let Some(selector) = &m.namespace_selector {
            match subject.namespace_selected(selector) {
                Ok(true) => {}
                Ok(false) => return Check::NoMatch,
                Err(why) => return Check::Unchecked(why),
            }
        }
        if now >= self.expires {
            Check::Expired
        } else {
            Check::Applies
        }
    }

    /// The expiry as RFC 3339, as verdicts show it.
    pub fn expires_text(&self) -> String {
        self.expires
            .format(&Rfc3339)
            .unwrap_or_else(|_| self.expires.to_string())
    }
}

/// Names must be unique: verdicts cite exceptions by name.
pub fn check_unique(exceptions: &[PolicyException]) -> Result<(), LoadError> {
    for (i, e) in exceptions.iter().enumerate() {
        if let Some(first) = exceptions.iter().take(i).find(|o| o.name == e.name) {
            return Err(LoadError::Exception {
                path: e.path.clone(),
                field: "name".into(),
                detail: format!(
                    "{:?} is also the name of {}; verdicts cite exceptions by name",
                    e.name,
                    first.path.display()
                ),
            });
        }
    }
    Ok(())
}

/// RFC 3339 date-time, or a date `YYYY-MM-DD` meaning the end of that day, UTC (the
/// exception holds on the day written).
fn parse_expiry(text: &str) -> Result<OffsetDateTime, String> {
    let text = text.trim();
    if let Ok(at) = OffsetDateTime::parse(text, &Rfc3339) {
        return Ok(at);
    }
    let date = parse_date(text).ok_or_else(|| {
        format!("{text:?} is neither an RFC 3339 date-time (2026-12-31T18:00:00Z) nor a date (2026-12-31)")
    })?;
    let next = date
        .next_day()
        .ok_or_else(|| format!("{text:?} is past the last date this program can count"))?;
    Ok(next.with_time(Time::MIDNIGHT).assume_utc())
}

fn parse_date(text: &str) -> Option<Date> {
    let mut parts = text.splitn(3, '-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let month = Month::try_from(m.parse::<u8>().ok()?).ok()?;
    Date::from_calendar_date(y.parse().ok()?, month, d.parse().ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    const KNOWN: &[&str] = &["images", "gang_scheduling"];

    fn file(text: &str) -> ExceptionFile {
        ExceptionFile {
            path: PathBuf::from("policies/exceptions/x.yaml"),
            text: text.into(),
        }
    }

    fn parse(text: &str) -> Result<PolicyException, String> {
        PolicyException::parse(&file(text), KNOWN).map_err(|e| e.to_string())
    }

    fn at(text: &str) -> OffsetDateTime {
        OffsetDateTime::parse(text, &Rfc3339).unwrap_or_else(|e| panic!("{e}"))
    }

    fn subject(namespace: &str, name: &str, ns_labels: Option<&[(&str, &str)]>) -> Subject {
        let object = json!({"metadata": {"name": name, "labels": {"legacy": "true"}}});
        let labels = ns_labels.map(|l| {
            l.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        });
        Subject::of(namespace, &object).with_namespace_labels(labels)
    }

    const GOOD: &str = "name: legacy\npolicies: [images]\nmatch: {namespaces: [research-*], names: [resnet-*]}\nreason: migrating\nexpires: 2026-12-31\n";

    /// An exception expiring at `expires` applies until `last` and has expired at `first`.
    fn expiry(expires: &str, last: &str, first: &str) {
        let e = parse(&GOOD.replace("2026-12-31", expires)).unwrap_or_else(|e| panic!("{e}"));
        let s = subject("research-a", "resnet-1", None);
        assert_eq!(e.check("images", &s, at(last)), Check::Applies, "{expires}");
        assert_eq!(
            e.check("images", &s, at(first)),
            Check::Expired,
            "{expires}"
        );
    }

    #[test]
    fn a_date_expires_at_the_end_of_that_day_utc() {
        expiry("2026-12-31", "2026-12-31T23:59:59Z", "2027-01-01T00:00:00Z");
        let e = parse(GOOD).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.expires_text(), "2027-01-01T00:00:00Z");
    }

    #[test]
    fn a_date_time_expires_at_that_instant_in_its_offset() {
        expiry(
            "2026-06-01T12:00:00+02:00",
            "2026-06-01T09:59:59Z",
            "2026-06-01T10:00:00Z",
        );
    }

    #[test]
    fn every_part_of_the_match_must_hold() {
        let e = parse(GOOD).unwrap_or_else(|e| panic!("{e}"));
        let now = at("2026-01-01T00:00:00Z");
        let check = |ns, name, policy| e.check(policy, &subject(ns, name, None), now);
        assert_eq!(check("research-a", "resnet-1", "images"), Check::Applies);
        assert_eq!(check("research-a", "bert", "images"), Check::NoMatch);
        assert_eq!(check("prod", "resnet-1", "images"), Check::NoMatch);
        assert_eq!(
            check("research-a", "resnet-1", "gang_scheduling"),
            Check::NoMatch
        );
    }

    #[test]
    fn a_namespace_selector_needs_known_labels() {
        let text = "name: v\npolicies: [images]\nmatch:\n  namespaceSelector: {matchLabels: {team: vision}}\n  objectSelector: {matchLabels: {legacy: \"true\"}}\nreason: r\nexpires: 2030-01-01\n";
        let e = parse(text).unwrap_or_else(|e| panic!("{e}"));
        let now = at("2026-01-01T00:00:00Z");
        let vision = subject("ml", "j", Some(&[("team", "vision")]));
        assert_eq!(e.check("images", &vision, now), Check::Applies);
        let other = subject("ml", "j", Some(&[("team", "nlp")]));
        assert_eq!(e.check("images", &other, now), Check::NoMatch);
        let unknown = e.check("images", &subject("ml", "j", None), now);
        assert!(matches!(unknown, Check::Unchecked(w) if w.contains("unknown")));
    }

    #[test]
    fn bad_files_name_the_file_and_the_field() {
        let cases = [
            (
                "name: x\npolicies: [images]\nmatch: {namespaces: [a]}\nreason: r\n",
                "expires: required",
            ),
            (
                &GOOD.replace("[images]", "[imagez]"),
                "policies: \"imagez\" is not a policy",
            ),
            (
                &GOOD.replace("2026-12-31", "next tuesday"),
                "expires: \"next tuesday\"",
            ),
            (&GOOD.replace("2026-12-31", "2026-02-30"), "expires:"),
            (&GOOD.replace("research-*", "Research"), "match.namespaces:"),
            (
                "name: x\npolicies: [images]\nreason: r\nexpires: 2030-01-01\n",
                "match: required",
            ),
            (&format!("{GOOD}extra: 1\n"), "(file): not an exception"),
            ("name: [x\n", "(file): not an exception"),
            (
                &GOOD.replace("match: {", "match: {namespaceSelector: {matchLabels: 1}, "),
                "match.namespaceSelector: matchLabels",
            ),
        ];
        for (text, needle) in cases {
            let err = parse(text).err().unwrap_or_default();
            assert!(
                err.starts_with("policies/exceptions/x.yaml: ") && err.contains(needle),
                "{err:?} lacks {needle:?}"
            );
        }
    }

    #[test]
    fn names_must_be_unique() {
        let a = parse(GOOD).unwrap_or_else(|e| panic!("{e}"));
        let mut b = a.clone();
        b.path = PathBuf::from("policies/exceptions/y.yaml");
        let err = check_unique(&[a, b])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("y.yaml: name:") && err.contains("x.yaml"),
            "{err}"
        );
    }
}
