//! Durations as people write them in flags and params.yaml: `500ms`, `2s`, `1m`.
//!
//! Entry point: [`parse_duration`]. Shared by the command line (`--eval-timeout`, …) and
//! `imageResolution` in params.yaml, so the two accept exactly the same text.

/// `500ms`, `2s`, `1m`: a number and a unit (ms, s, m).
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 500ms, 2s or 1m"))?;
    match unit {
        "ms" => Ok(std::time::Duration::from_millis(n)),
        "s" => Ok(std::time::Duration::from_secs(n)),
        "m" => Ok(std::time::Duration::from_secs(n * 60)),
        _ => Err(format!(
            "{text:?} has no unit: write a number followed by ms, s or m"
        )),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_have_a_number_and_a_unit() {
        use std::time::Duration;
        assert_eq!(
            super::parse_duration("500ms"),
            Ok(Duration::from_millis(500))
        );
        assert_eq!(super::parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(super::parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(super::parse_duration("2").is_err());
        assert!(super::parse_duration("s").is_err());
        assert!(super::parse_duration("2h").is_err());
    }
}
