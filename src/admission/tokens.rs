//! Counting the JSON values of a body as it arrives, in constant memory, so that a body of
//! many tiny values is refused before it is parsed.
//!
//! Entry point: [`Tokens`], fed the kept body piece by piece by [`super::body`].
//!
//! Why: parsing holds ~200 bytes per value whatever its size on the wire (serde_json's
//! `Value`, maps keeping their order), so a 15 MiB body of `{},{},…` (5 million values)
//! took the server to 989 MiB while it was parsed, before any limit on the parsed review could
//! look at it (RELIABILITY.md 7.5).
//!
//! # Guarantees
//! - [`Tokens::values_at_most`] is never below the number of JSON values in the bytes fed:
//!   every value is the document, or follows a `[`, a `{` (with its key) or a `,` outside a
//!   string. It overcounts empty containers (`[]` counts its `[`), at most twice over.
//! - The result does not depend on how the body is split into pieces.

/// Counts `[`, `{` and `,` outside strings.
#[derive(Debug, Default)]
pub struct Tokens {
    in_string: bool,
    escaped: bool,
    openers_and_commas: u64,
}

impl Tokens {
    /// Reads the next bytes of the body.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
            } else {
                match b {
                    b'"' => self.in_string = true,
                    b'[' | b'{' | b',' => self.openers_and_commas += 1,
                    _ => {}
                }
            }
        }
    }

    /// An upper bound on the JSON values read so far.
    pub fn values_at_most(&self) -> u64 {
        self.openers_and_commas.saturating_add(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(text: &str) -> u64 {
        let mut tokens = Tokens::default();
        tokens.feed(text.as_bytes());
        tokens.values_at_most()
    }

    #[test]
    fn values_are_bounded_from_above_and_strings_are_not_counted() {
        // 5 values: the object, a, the list, 1, 2.
        assert_eq!(count(r#"{"a":[1,2],"b\",{[":"x,y"}"#), 5);
        // 3 values, 4 counted: the empty lists overcount.
        assert_eq!(count("[[],[]]"), 5);
        assert_eq!(count("7"), 1);
    }

    #[test]
    fn the_count_does_not_depend_on_how_the_body_is_split() {
        let text = r#"{"k":"a\"b,[","l":[{},{"m":"\\"},3]}"#;
        let whole = count(text);
        for cut in 0..text.len() {
            let mut tokens = Tokens::default();
            tokens.feed(&text.as_bytes()[..cut]);
            tokens.feed(&text.as_bytes()[cut..]);
            assert_eq!(tokens.values_at_most(), whole, "cut at {cut}");
        }
    }
}
