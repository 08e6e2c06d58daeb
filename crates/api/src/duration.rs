//! Go duration strings (`"10m"`, `"1h30m"`, `"1.5s"`), as used by every Flux interval and timeout.
//!
//! Flux stores durations as Go `metav1.Duration` values, serialised with Go's `time.Duration`
//! syntax. [`parse_go_duration`] accepts exactly what Go's `time.ParseDuration` accepts for
//! non-negative values; [`format_go_duration`] prints what Go's `Duration.String` prints.

use std::time::Duration;

use crate::error::DurationError;

/// The largest duration Go can represent (`math.MaxInt64` nanoseconds, about 292 years).
pub const MAX_GO_DURATION: Duration = Duration::from_nanos(i64::MAX as u64);

/// The schema pattern Flux puts on interval fields (`ms`, `s`, `m`, `h` units).
pub const INTERVAL_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$";

/// The schema pattern Flux puts on source timeout fields (no `h` unit).
pub const TIMEOUT_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ms|s|m))+$";

const NANOS_PER_MICRO: u128 = 1_000;
const NANOS_PER_MILLI: u128 = 1_000_000;
const NANOS_PER_SECOND: u128 = 1_000_000_000;
const NANOS_PER_MINUTE: u128 = 60 * NANOS_PER_SECOND;
const NANOS_PER_HOUR: u128 = 60 * NANOS_PER_MINUTE;

fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => NANOS_PER_MICRO,
        "ms" => NANOS_PER_MILLI,
        "s" => NANOS_PER_SECOND,
        "m" => NANOS_PER_MINUTE,
        "h" => NANOS_PER_HOUR,
        _ => return None,
    })
}

/// Parses a Go duration string such as `"90s"`, `"1h30m"` or `"1.5m"`.
///
/// A leading `+` is accepted; a leading `-` is rejected with [`DurationError::Negative`]
/// because no Flux duration may be negative. Values above [`MAX_GO_DURATION`] are rejected
/// with [`DurationError::Overflow`]. Fractions finer than a nanosecond are truncated, as in Go.
///
/// ```
/// use std::time::Duration;
/// use capstan_api::parse_go_duration;
///
/// assert_eq!(parse_go_duration("1h30m").unwrap(), Duration::from_secs(5400));
/// assert_eq!(parse_go_duration("1.5s").unwrap(), Duration::from_millis(1500));
/// assert!(parse_go_duration("10").is_err());
/// ```
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
    let rest = match input.as_bytes().first() {
        None => return Err(DurationError::Empty),
        Some(b'-') => return Err(DurationError::Negative(input.to_owned())),
        Some(b'+') => &input[1..],
        Some(_) => input,
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(DurationError::ExpectedNumber {
            input: input.to_owned(),
            offset: input.len(),
        });
    }
    let overflow = || DurationError::Overflow(input.to_owned());
    let base = input.len() - rest.len();
    let bytes = rest.as_bytes();
    let mut total: u128 = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Integer part.
        let int_start = i;
        let mut whole: u128 = 0;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            whole = whole
                .checked_mul(10)
                .and_then(|w| w.checked_add(u128::from(bytes[i] - b'0')))
                .filter(|w| *w <= u128::from(u64::MAX))
                .ok_or_else(overflow)?;
            i += 1;
        }
        let has_int = i > int_start;
        // Fraction part.
        let mut fraction: u128 = 0;
        let mut scale: u128 = 1;
        let mut has_fraction = false;
        if i < bytes.len() && bytes[i] == b'.' {
            i += 1;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                has_fraction = true;
                // Digits beyond nanosecond precision of an hour cannot matter; stop scaling.
                if scale < 10u128.pow(20) {
                    fraction = fraction * 10 + u128::from(bytes[i] - b'0');
                    scale *= 10;
                }
                i += 1;
            }
        }
        if !has_int && !has_fraction {
            return Err(DurationError::ExpectedNumber {
                input: input.to_owned(),
                offset: base + i,
            });
        }
        // Unit: everything up to the next digit or dot.
        let unit_start = i;
        while i < bytes.len() && bytes[i] != b'.' && !bytes[i].is_ascii_digit() {
            i += 1;
        }
        if i == unit_start {
            return Err(DurationError::MissingUnit(input.to_owned()));
        }
        let unit = &rest[unit_start..i];
        let nanos = unit_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
            input: input.to_owned(),
            unit: unit.to_owned(),
        })?;
        let value = whole
            .checked_mul(nanos)
            .and_then(|v| v.checked_add(fraction * nanos / scale))
            .ok_or_else(overflow)?;
        total = total.checked_add(value).ok_or_else(overflow)?;
        if total > MAX_GO_DURATION.as_nanos() {
            return Err(overflow());
        }
    }
    Ok(Duration::from_nanos(
        u64::try_from(total).map_err(|_| overflow())?,
    ))
}

/// Formats a duration the way Go's `time.Duration.String` does (`"1h0m0s"`, `"1m30s"`,
/// `"500ms"`, `"0s"`), so that values written back into Flux objects read as Flux writes them.
///
/// Durations above [`MAX_GO_DURATION`] are clamped to it.
///
/// ```
/// use std::time::Duration;
/// use capstan_api::format_go_duration;
///
/// assert_eq!(format_go_duration(Duration::from_secs(90)), "1m30s");
/// assert_eq!(format_go_duration(Duration::from_millis(1500)), "1.5s");
/// ```
pub fn format_go_duration(duration: Duration) -> String {
    let nanos = duration.min(MAX_GO_DURATION).as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < NANOS_PER_MICRO {
        return format!("{nanos}ns");
    }
    if nanos < NANOS_PER_MILLI {
        return format!("{}\u{b5}s", fraction(nanos, NANOS_PER_MICRO));
    }
    if nanos < NANOS_PER_SECOND {
        return format!("{}ms", fraction(nanos, NANOS_PER_MILLI));
    }
    let hours = nanos / NANOS_PER_HOUR;
    let minutes = (nanos % NANOS_PER_HOUR) / NANOS_PER_MINUTE;
    let seconds = fraction(nanos % NANOS_PER_MINUTE, NANOS_PER_SECOND);
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// `value / unit` as a decimal with trailing zeros removed (`1500, 1000` → `"1.5"`).
fn fraction(value: u128, unit: u128) -> String {
    let whole = value / unit;
    let rest = value % unit;
    if rest == 0 {
        return whole.to_string();
    }
    let width = unit.ilog10() as usize;
    let digits = format!("{rest:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// Parses a required duration field, naming `field` in the error.
pub(crate) fn field(field: &'static str, value: &str) -> Result<Duration, crate::Error> {
    parse_go_duration(value).map_err(|source| crate::Error::InvalidDuration { field, source })
}

/// Parses an optional duration field, falling back to `default` when absent.
pub(crate) fn field_or(
    field: &'static str,
    value: Option<&str>,
    default: Duration,
) -> Result<Duration, crate::Error> {
    value.map_or(Ok(default), |v| self::field(field, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flux_intervals() {
        let cases = [
            ("0", 0),
            ("0s", 0),
            ("60s", 60_000),
            ("10m", 600_000),
            ("1h30m", 5_400_000),
            ("1h30m15s", 5_415_000),
            ("24h", 86_400_000),
            ("1.5m", 90_000),
            ("500ms", 500),
            (".5s", 500),
            ("1.s", 1000),
            ("+2s", 2000),
            ("2m0s", 120_000),
        ];
        for (input, millis) in cases {
            assert_eq!(
                parse_go_duration(input),
                Ok(Duration::from_millis(millis)),
                "{input}"
            );
        }
    }

    #[test]
    fn parses_sub_millisecond_units() {
        assert_eq!(parse_go_duration("10ns"), Ok(Duration::from_nanos(10)));
        assert_eq!(parse_go_duration("3us"), Ok(Duration::from_micros(3)));
        assert_eq!(parse_go_duration("3\u{b5}s"), Ok(Duration::from_micros(3)));
        assert_eq!(parse_go_duration("3\u{3bc}s"), Ok(Duration::from_micros(3)));
        assert_eq!(
            parse_go_duration("1.000000001s"),
            Ok(Duration::from_nanos(1_000_000_001))
        );
    }

    #[test]
    fn rejects_malformed_input() {
        assert_eq!(parse_go_duration(""), Err(DurationError::Empty));
        assert_eq!(
            parse_go_duration("-5s"),
            Err(DurationError::Negative("-5s".into()))
        );
        assert_eq!(
            parse_go_duration("10"),
            Err(DurationError::MissingUnit("10".into()))
        );
        assert_eq!(
            parse_go_duration("1h5"),
            Err(DurationError::MissingUnit("1h5".into()))
        );
        assert_eq!(
            parse_go_duration("5d"),
            Err(DurationError::UnknownUnit {
                input: "5d".into(),
                unit: "d".into()
            })
        );
        assert_eq!(
            parse_go_duration("s"),
            Err(DurationError::ExpectedNumber {
                input: "s".into(),
                offset: 0
            })
        );
        assert_eq!(
            parse_go_duration("+"),
            Err(DurationError::ExpectedNumber {
                input: "+".into(),
                offset: 1
            })
        );
        assert_eq!(
            parse_go_duration("1h.m"),
            Err(DurationError::ExpectedNumber {
                input: "1h.m".into(),
                offset: 3
            })
        );
        assert!(matches!(
            parse_go_duration("1 h"),
            Err(DurationError::UnknownUnit { .. })
        ));
    }

    #[test]
    fn enforces_go_bounds() {
        // Go's maximum, 2562047h47m16.854775807s, is accepted; one nanosecond more is not.
        assert_eq!(
            parse_go_duration("2562047h47m16.854775807s"),
            Ok(MAX_GO_DURATION)
        );
        assert_eq!(
            parse_go_duration("2562047h47m16.854775808s"),
            Err(DurationError::Overflow("2562047h47m16.854775808s".into()))
        );
        assert!(matches!(
            parse_go_duration("9999999999999999999999h"),
            Err(DurationError::Overflow(_))
        ));
        assert!(matches!(
            parse_go_duration("3000000h"),
            Err(DurationError::Overflow(_))
        ));
    }

    #[test]
    fn formats_like_go() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(7), "7ns"),
            (Duration::from_nanos(1500), "1.5\u{b5}s"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_secs(60), "1m0s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_secs(5415), "1h30m15s"),
            (MAX_GO_DURATION, "2562047h47m16.854775807s"),
        ];
        for (duration, text) in cases {
            assert_eq!(format_go_duration(duration), text);
            assert_eq!(
                parse_go_duration(text),
                Ok(duration),
                "round trip of {text}"
            );
        }
    }
}
