//! RFC 6901 JSON pointers: building them from keys and resolving them into parents.
//!
//! Policies address fields with pointer strings (`/spec/runPolicy/backoffLimit`); JobView hands
//! them ready-made pointers into the object. Keys such as `nvidia.com/gpu` must be escaped.

/// Escapes one reference token (`~` → `~0`, `/` → `~1`).
pub fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Appends escaped tokens to a base pointer.
pub fn join<'a>(base: &str, tokens: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = base.to_string();
    for t in tokens {
        out.push('/');
        out.push_str(&escape(t));
    }
    out
}

/// One reference token as the key it names (`~1` → `/`, `~0` → `~`), copied only when it
/// has escapes.
pub fn unescape(token: &str) -> std::borrow::Cow<'_, str> {
    match token.contains('~') {
        true => token.replace("~1", "/").replace("~0", "~").into(),
        false => token.into(),
    }
}

/// Splits a pointer into unescaped tokens. `""` is the whole document.
pub fn split(pointer: &str) -> Result<Vec<String>, String> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let rest = pointer
        .strip_prefix('/')
        .ok_or_else(|| format!("JSON pointer {pointer:?} must start with '/'"))?;
    Ok(rest.split('/').map(|t| unescape(t).into_owned()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_slashes_and_tildes_and_splits_them_back() {
        let p = join("/spec", ["nvidia.com/gpu", "a~b"]);
        assert_eq!(p, "/spec/nvidia.com~1gpu/a~0b");
        assert_eq!(
            split(&p).ok(),
            Some(vec!["spec".into(), "nvidia.com/gpu".into(), "a~b".into()])
        );
    }

    #[test]
    fn rejects_relative_pointers() {
        assert!(split("spec/x").is_err());
        assert_eq!(split("").ok(), Some(vec![]));
    }
}
