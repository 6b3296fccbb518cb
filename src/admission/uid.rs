//! Finding `request.uid` in an AdmissionReview that is not parsed whole: a review over the
//! body limit, or one refused before it is judged. The answer must carry the request's uid
//! (the apiserver rejects an answer whose uid differs, and its message then reaches no one).
//!
//! Entry points: [`UidScanner`], fed the body piece by piece as it is read, and [`uid_in`]
//! for bytes already in memory.
//!
//! The apiserver writes `request.uid` before anything else of the request (Go encodes struct
//! fields in order, and `UID` is `AdmissionRequest`'s first), so for its reviews the scan ends
//! within the first few hundred bytes. A hand-written review may put it anywhere, after a
//! large `object` say; a fixed prefix (64 KiB, before) then missed it and the answer could
//! not name the request. So the scanner reads JSON structure as it streams by and keeps no
//! bytes of the body: only the nesting depth, the keys of the two outer levels, and the uid
//! itself while it is read.
//!
//! # Guarantees
//! - Memory is constant: at most [`MAX_UID_BYTES`] of uid and a few words of state, however
//!   large the body or deep its nesting.
//! - Only a string at exactly `request.uid` of the top-level object counts; a `uid` elsewhere
//!   (the object's own `metadata.uid`, an owner reference) does not.
//! - The result does not depend on how the body is split into pieces.
//! - Once the uid is found (or cannot be: an empty or non-string uid, a closing bracket
//!   that closes nothing) further input is not looked at, so feeding the rest costs nothing.

#![deny(
    clippy::indexing_slicing,
    reason = "request data decides lengths; use get()"
)]

/// The longest uid kept, as written (escapes included). Kubernetes uids are 36-character
/// UUIDs; a string longer than this is not one, and is not echoed.
pub const MAX_UID_BYTES: usize = 4096;

/// Key bytes kept to compare: enough for `request` and to tell it from a longer key.
const KEY_BYTES: usize = 8;

/// What the key being read, or last read, at an outer level is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    None,
    Request,
    Uid,
    Other,
}

/// One of the two outer containers (the review, its `request`).
#[derive(Debug, Clone, Copy)]
enum Level {
    /// An object: the key whose value comes next, and whether a key is expected (after `{`
    /// or `,`) rather than a value (after `:`).
    Object {
        key: Key,
        want_key: bool,
    },
    Array,
}

/// What the string being read is for.
#[derive(Debug)]
enum Capture {
    /// A key at the outer level `0` or `1`: its first bytes.
    Key { level: usize, bytes: Vec<u8> },
    /// The value of `request.uid`, as written.
    Uid(Vec<u8>),
    /// Anything else: read past.
    Skip,
}

#[derive(Debug)]
enum State {
    /// Between tokens.
    Structure,
    /// Inside a string; `escaped` after a backslash.
    InString { capture: Capture, escaped: bool },
    /// Found, or known not to be found: the rest is not read.
    Done(Option<String>),
}

/// Reads an AdmissionReview's bytes as they arrive and finds its `request.uid`, in constant
/// memory (see the module doc).
#[derive(Debug)]
pub struct UidScanner {
    /// Containers open.
    depth: usize,
    /// The two outer levels (the review object, its `request`), when open.
    outer: [Level; 2],
    state: State,
}

impl Default for UidScanner {
    fn default() -> UidScanner {
        UidScanner {
            depth: 0,
            outer: [Level::Array; 2],
            state: State::Structure,
        }
    }
}

impl UidScanner {
    /// Reads the next bytes of the body.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            match &mut self.state {
                State::Done(_) => return,
                State::InString { capture, escaped } => {
                    if *escaped {
                        *escaped = false;
                    } else if b == b'\\' {
                        *escaped = true;
                    } else if b == b'"' {
                        let capture = std::mem::replace(capture, Capture::Skip);
                        self.state = State::Structure;
                        self.string_read(capture);
                        continue;
                    }
                    match capture {
                        Capture::Key { bytes, .. } if bytes.len() < KEY_BYTES => bytes.push(b),
                        Capture::Uid(bytes) if bytes.len() < MAX_UID_BYTES => bytes.push(b),
                        // Longer than any uid: not one to echo.
                        Capture::Uid(_) => self.state = State::Done(None),
                        Capture::Key { .. } | Capture::Skip => {}
                    }
                }
                State::Structure => self.structure(b),
            }
        }
    }

    /// Whether the result is settled: more input changes nothing.
    pub fn done(&self) -> bool {
        matches!(self.state, State::Done(_))
    }

    /// The uid, if the bytes read so far hold it.
    pub fn uid(&self) -> Option<&str> {
        match &self.state {
            State::Done(uid) => uid.as_deref(),
            _ => None,
        }
    }

    pub fn into_uid(self) -> Option<String> {
        match self.state {
            State::Done(uid) => uid,
            _ => None,
        }
    }

    /// The outer level `depth` levels in, if it is one of the two tracked.
    fn level(&mut self, depth: usize) -> Option<&mut Level> {
        self.outer.get_mut(depth.checked_sub(1)?)
    }

    fn structure(&mut self, b: u8) {
        match b {
            b'{' | b'[' => {
                self.depth = self.depth.saturating_add(1);
                let opened = match b {
                    b'{' => Level::Object {
                        key: Key::None,
                        want_key: true,
                    },
                    _ => Level::Array,
                };
                if let Some(level) = self.level(self.depth) {
                    *level = opened;
                }
            }
            b'}' | b']' => match self.depth.checked_sub(1) {
                Some(depth) => self.depth = depth,
                // Closes nothing: not JSON, and no uid to be read from it.
                None => self.state = State::Done(None),
            },
            b',' | b':' => {
                if let Some(Level::Object { want_key, .. }) = self.level(self.depth) {
                    *want_key = b == b',';
                }
            }
            b'"' => {
                let capture = self.capture();
                self.state = State::InString {
                    capture,
                    escaped: false,
                };
            }
            _ => {} // whitespace, numbers, true, false, null
        }
    }

    /// What a string starting here is: a key of an outer level, `request.uid`'s value, or
    /// neither.
    fn capture(&mut self) -> Capture {
        let depth = self.depth;
        if let Some(Level::Object { want_key: true, .. }) = self.level(depth) {
            return Capture::Key {
                level: depth.saturating_sub(1),
                bytes: Vec::with_capacity(KEY_BYTES),
            };
        }
        let at = |level: Level, wanted: Key| matches!(level, Level::Object { key, want_key: false } if key == wanted);
        let [review, request] = self.outer;
        if depth == 2 && at(review, Key::Request) && at(request, Key::Uid) {
            return Capture::Uid(Vec::new());
        }
        Capture::Skip
    }

    fn string_read(&mut self, capture: Capture) {
        match capture {
            Capture::Key { level, bytes } => {
                let read = match bytes.as_slice() {
                    b"request" => Key::Request,
                    b"uid" => Key::Uid,
                    _ => Key::Other,
                };
                if let Some(Level::Object { key, .. }) = self.outer.get_mut(level) {
                    *key = read;
                }
            }
            Capture::Uid(raw) => {
                let mut quoted = Vec::with_capacity(raw.len() + 2);
                quoted.push(b'"');
                quoted.extend_from_slice(&raw);
                quoted.push(b'"');
                let uid = serde_json::from_slice::<String>(&quoted)
                    .ok()
                    .filter(|uid| !uid.is_empty());
                self.state = State::Done(uid);
            }
            Capture::Skip => {}
        }
    }
}

/// The `request.uid` of the review in `bytes` (the whole body, or its first bytes): `None`
/// when they end before one, or are not JSON as far as they go.
pub fn uid_in(bytes: &[u8]) -> Option<String> {
    let mut scanner = UidScanner::default();
    scanner.feed(bytes);
    scanner.into_uid()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The uid of `body` fed whole, and fed in pieces of every size up to 7 bytes: the same.
    fn uid_of(body: &[u8]) -> Option<String> {
        let whole = uid_in(body);
        for size in 1..8 {
            let mut scanner = UidScanner::default();
            for piece in body.chunks(size) {
                scanner.feed(piece);
            }
            assert_eq!(
                scanner.into_uid(),
                whole,
                "in pieces of {size}: {}",
                String::from_utf8_lossy(body)
            );
        }
        whole
    }

    #[test]
    fn the_uid_is_read_from_a_prefix_of_the_review() {
        let full = br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","kind":{"group":"kubeflow.org","version":"v1","kind":"PyTorchJob"},"object":{"metadata":{"uid":"not-this"}"#;
        assert_eq!(
            uid_of(full).as_deref(),
            Some("705ab4f5-6393-11e8-b7cc-42010a800002")
        );
        // Cut anywhere before the uid's closing quote: not found.
        let cut = full
            .windows(4)
            .position(|w| w == b"6393")
            .expect("uid in the text");
        assert_eq!(uid_of(full.get(..cut).expect("prefix")), None);
    }

    #[test]
    fn only_request_uid_counts_as_the_uid() {
        let cases: [(&[u8], Option<&str>); 10] = [
            (
                br#"{"request":{"object":{"uid":"inner"},"uid":"outer"}}"#,
                Some("outer"),
            ),
            (br#"{"uid":"top","request":{"uid":"r"}}"#, Some("r")),
            (br#"{"response":{"uid":"x"}}"#, None),
            (
                br#"{"request":{"names":["uid","x"],"uid":"a\"b"}}"#,
                Some("a\"b"),
            ),
            (br#"{"request":{"uid":""}}"#, None),
            (br#"{"request":{"uid":7}}"#, None),
            (br#"{"request":{"requestX":1,"uid":"u\u0031"}}"#, Some("u1")),
            (br#"{"requests":{"uid":"no"}}"#, None),
            (br#"[{"request":{"uid":"no"}}]"#, None),
            (br#"}{"request":{"uid":"no"}}"#, None),
        ];
        for (body, want) in cases {
            assert_eq!(
                uid_of(body).as_deref(),
                want,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn a_uid_after_a_large_object_is_found_without_keeping_the_object() {
        let body = format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","request":{{"object":{{"data":{{"blob":"{}","nested":[[{{"uid":"not-this"}}]]}}}},"uid":"late"}}}}"#,
            "x\\\"".repeat(1 << 18)
        );
        assert_eq!(uid_of(body.as_bytes()).as_deref(), Some("late"));
    }

    #[test]
    fn a_uid_longer_than_any_is_not_echoed() {
        let long = "u".repeat(MAX_UID_BYTES + 1);
        let body = format!(r#"{{"request":{{"uid":"{long}"}}}}"#);
        assert_eq!(uid_in(body.as_bytes()), None);
        let fits = "u".repeat(MAX_UID_BYTES);
        let body = format!(r#"{{"request":{{"uid":"{fits}"}}}}"#);
        assert_eq!(uid_in(body.as_bytes()), Some(fits));
    }

    #[test]
    fn scanning_stops_at_the_uid() {
        let mut scanner = UidScanner::default();
        scanner.feed(br#"{"request":{"uid":"first"#);
        assert!(!scanner.done());
        scanner.feed(br#"","uid":"second"}}"#);
        assert!(scanner.done());
        scanner.feed(b"{{{{ not looked at");
        assert_eq!(scanner.uid(), Some("first"));
    }
}
