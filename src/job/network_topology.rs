//! The annotation `gangplank.dev/network-topology`: which network domain (Volcano HyperNode)
//! must hold a Volcano gang, as the PodGroup's `spec.networkTopology`.
//!
//! Entry point: [`parse`].
//!
//! # Values
//! - `hard:N` — every pod inside one HyperNode of tier ≤ N (`highestTierAllowed: N`, N ≥ 1);
//! - `hard:NAME` — the same up to the tier named NAME (`highestTierName`);
//! - `soft`, `soft:N`, `soft:NAME` — Volcano prefers one domain but may cross it;
//! - a JSON object as Volcano spells it: `{"mode":"hard","highestTierAllowed":2}`.
//!
//! `hard` alone is refused: Volcano would keep the gang inside a tier the job never named.
//!
//! # Errors
//! [`parse`] says what is wrong with a value and what a right one looks like.

use serde_json::{json, Map, Value};

pub const NETWORK_TOPOLOGY_ANNOTATION: &str = "gangplank.dev/network-topology";

/// What a good value looks like, for the refusals.
const FORMS: &str = "hard:N (N a tier ≥ 1), hard:TIER-NAME, soft, soft:N, or JSON such as \
    {\"mode\":\"hard\",\"highestTierAllowed\":2}";

/// The most a tier name may have (the CRD's `highestTierName` maxLength).
const MAX_TIER_NAME: usize = 253;

/// Volcano's `networkTopology` for `value`, or why it is not one.
pub fn parse(value: &str) -> Result<Value, String> {
    let value = value.trim();
    if value.starts_with('{') {
        return from_json(value);
    }
    let (mode, tier) = match value.split_once(':') {
        Some((mode, tier)) => (mode, Some(tier)),
        None => (value, None),
    };
    let mode = mode_of(mode)?;
    let mut out = Map::new();
    out.insert("mode".into(), json!(mode));
    match tier.map(str::trim) {
        None if mode == "hard" => {
            return Err(format!(
                "{value:?} names no tier: hard mode keeps the gang inside one HyperNode of a tier you name; use {FORMS}"
            ))
        }
        None => {}
        Some(t) => match t.parse::<i64>() {
            Ok(n) => {
                out.insert("highestTierAllowed".into(), json!(tier_number(n)?));
            }
            Err(_) => {
                out.insert("highestTierName".into(), json!(tier_name(t)?));
            }
        },
    }
    Ok(Value::Object(out))
}

fn mode_of(mode: &str) -> Result<&'static str, String> {
    match mode.trim() {
        "hard" => Ok("hard"),
        "soft" => Ok("soft"),
        other => Err(format!(
            "mode {other:?} is neither hard nor soft; use {FORMS}"
        )),
    }
}

fn tier_number(n: i64) -> Result<i64, String> {
    if n < 1 {
        return Err(format!(
            "tier {n} holds no HyperNode (tier 1 is the one closest to the nodes); use {FORMS}"
        ));
    }
    Ok(n)
}

fn tier_name(name: &str) -> Result<&str, String> {
    if name.is_empty() || name.len() > MAX_TIER_NAME {
        return Err(format!(
            "the tier name must have 1 to {MAX_TIER_NAME} characters; use {FORMS}"
        ));
    }
    Ok(name)
}

fn from_json(value: &str) -> Result<Value, String> {
    let doc: Value =
        serde_json::from_str(value).map_err(|e| format!("not JSON ({e}); use {FORMS}"))?;
    let Some(fields) = doc.as_object() else {
        return Err(format!("not a JSON object; use {FORMS}"));
    };
    let mut out = Map::new();
    for (k, v) in fields {
        match k.as_str() {
            "mode" => {
                let mode = v
                    .as_str()
                    .ok_or_else(|| format!("mode is {v}, not a string; use {FORMS}"))?;
                out.insert("mode".into(), json!(mode_of(mode)?));
            }
            "highestTierAllowed" => {
                let n = v
                    .as_i64()
                    .ok_or_else(|| format!("highestTierAllowed is {v}, not a whole number; use {FORMS}"))?;
                out.insert(k.clone(), json!(tier_number(n)?));
            }
            "highestTierName" => {
                let name = v
                    .as_str()
                    .ok_or_else(|| format!("highestTierName is {v}, not a string; use {FORMS}"))?;
                out.insert(k.clone(), json!(tier_name(name)?));
            }
            other => {
                return Err(format!(
                    "{other:?} is not a field of Volcano's networkTopology (mode, highestTierAllowed, highestTierName)"
                ))
            }
        }
    }
    if out.contains_key("highestTierAllowed") && out.contains_key("highestTierName") {
        return Err("highestTierAllowed and highestTierName cannot be set together (Volcano refuses it); keep one".into());
    }
    // Volcano's default mode is hard.
    let mode = out.get("mode").and_then(Value::as_str).unwrap_or("hard");
    let tiered = out.contains_key("highestTierAllowed") || out.contains_key("highestTierName");
    if mode == "hard" && !tiered {
        return Err(format!(
            "hard mode names no tier (highestTierAllowed or highestTierName); use {FORMS}"
        ));
    }
    out.insert("mode".into(), json!(mode));
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_forms_become_volcanos_fields() {
        assert_eq!(
            parse("hard:2"),
            Ok(json!({"mode": "hard", "highestTierAllowed": 2}))
        );
        assert_eq!(
            parse("hard:spine"),
            Ok(json!({"mode": "hard", "highestTierName": "spine"}))
        );
        assert_eq!(parse("soft"), Ok(json!({"mode": "soft"})));
        assert_eq!(
            parse(" soft:1 "),
            Ok(json!({"mode": "soft", "highestTierAllowed": 1}))
        );
    }

    #[test]
    fn json_is_read_as_volcano_spells_it() {
        assert_eq!(
            parse(r#"{"mode":"hard","highestTierAllowed":2}"#),
            Ok(json!({"mode": "hard", "highestTierAllowed": 2}))
        );
        assert_eq!(
            parse(r#"{"highestTierAllowed":1}"#),
            Ok(json!({"mode": "hard", "highestTierAllowed": 1})),
            "Volcano's default mode is hard"
        );
    }

    #[test]
    fn bad_values_are_refused_with_the_forms() {
        for bad in [
            "",
            "hard",
            "hrad:2",
            "hard:0",
            "hard:-1",
            "{",
            "[1]",
            r#"{"mode":"hard"}"#,
            r#"{"mode":"hard","highestTierAllowed":"2"}"#,
            r#"{"mode":"hard","highestTierAllowed":2,"highestTierName":"x"}"#,
            r#"{"mode":"hard","tier":2}"#,
        ] {
            let Err(err) = parse(bad) else {
                panic!("{bad}: read as a network topology");
            };
            assert!(
                err.contains("use hard:N")
                    || err.contains("highestTierAllowed")
                    || err.contains("field"),
                "{bad}: {err}"
            );
        }
    }
}
