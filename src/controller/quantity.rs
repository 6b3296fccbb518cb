//! Just enough Kubernetes quantity arithmetic to sum pod requests into a PodGroup's
//! minResources: parse (`100m`, `10Mi`, `1.5`, `2e3`), add, print.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Nano-units per unit: sums are exact for every suffix Kubernetes prints.
const NANO: i128 = 1_000_000_000;

/// A quantity in nano-units. i128 holds 1Ei in nano-units (1.2e27) with room to spare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Nanos(pub i128);

impl Nanos {
    /// Parses a quantity; `None` for text Kubernetes would reject.
    pub fn parse(q: &Quantity) -> Option<Nanos> {
        let s = q.0.trim();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
            .unwrap_or(s.len());
        let (number, suffix) = s.split_at(split);
        let scale = scale(suffix)?;
        let (int, frac) = number.split_once('.').unwrap_or((number, ""));
        let negative = int.starts_with('-');
        let int: i128 = int
            .trim_start_matches(['+', '-'])
            .parse()
            .ok()
            .or((int.len() <= 1).then_some(0))?;
        let frac_digits = frac.len().min(18);
        let frac_value: i128 = frac.get(..frac_digits)?.parse().unwrap_or(0);
        let frac_scale = 10i128.checked_pow(u32::try_from(frac_digits).ok()?)?;
        let value = int
            .checked_mul(scale)?
            .checked_add(frac_value.checked_mul(scale)? / frac_scale)?;
        Some(Nanos(if negative { -value } else { value }))
    }

    pub fn checked_add(self, other: Nanos) -> Option<Nanos> {
        self.0.checked_add(other.0).map(Nanos)
    }

    pub fn checked_mul(self, n: i128) -> Option<Nanos> {
        self.0.checked_mul(n).map(Nanos)
    }

    /// Plain units when whole, else milli-units, else nano-units: `3`, `1500m`, `5n`.
    pub fn to_quantity(self) -> Quantity {
        let v = self.0;
        Quantity(if v % NANO == 0 {
            (v / NANO).to_string()
        } else if v % 1_000_000 == 0 {
            format!("{}m", v / 1_000_000)
        } else {
            format!("{v}n")
        })
    }
}

/// Nano-units per unit of a suffix.
fn scale(suffix: &str) -> Option<i128> {
    let binary = |p: u32| 1024i128.checked_pow(p)?.checked_mul(NANO);
    match suffix {
        "" => Some(NANO),
        "n" => Some(1),
        "u" => Some(1_000),
        "m" => Some(1_000_000),
        "k" => Some(NANO * 1_000),
        "M" => Some(NANO * 1_000_000),
        "G" => Some(NANO * 1_000_000_000),
        "T" => NANO.checked_mul(10i128.pow(12)),
        "P" => NANO.checked_mul(10i128.pow(15)),
        "E" => NANO.checked_mul(10i128.pow(18)),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        e => {
            let exp: u32 = e.strip_prefix(['e', 'E'])?.parse().ok()?;
            NANO.checked_mul(10i128.checked_pow(exp)?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Option<Nanos> {
        Nanos::parse(&Quantity(s.to_string()))
    }

    #[test]
    fn parses_decimal_binary_and_exponent_suffixes() {
        assert_eq!(q("100m"), Some(Nanos(100_000_000)));
        assert_eq!(q("1.5"), Some(Nanos(1_500_000_000)));
        assert_eq!(q("10Mi"), Some(Nanos(10 * 1024 * 1024 * NANO)));
        assert_eq!(q("2e3"), Some(Nanos(2000 * NANO)));
        assert_eq!(q("abc"), None);
        assert_eq!(q("1Xi"), None);
    }

    #[test]
    fn prints_whole_units_or_millis() {
        assert_eq!(Nanos(3 * NANO).to_quantity().0, "3");
        assert_eq!(Nanos(1_500_000_000).to_quantity().0, "1500m");
        assert_eq!(Nanos(5).to_quantity().0, "5n");
    }
}
