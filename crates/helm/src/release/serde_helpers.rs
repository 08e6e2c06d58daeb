//! Go's `encoding/json` habits, for serde: `null` for empty slices and maps, `[]byte` as
//! base64, `time.Time` as RFC 3339 with nanoseconds (the zero time meaning "unset").

use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serializer};

/// Go's zero `time.Time` as `encoding/json` writes it.
const GO_ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// Reads `null` as the type's default (Go decodes `null` into a nil slice or map).
pub(super) fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
pub(super) fn is_zero(value: &i64) -> bool {
    *value == 0
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
pub(super) fn is_false(value: &bool) -> bool {
    !*value
}

/// A time as Go's `time.Time.MarshalJSON` writes it in UTC: RFC 3339, fractional seconds
/// without trailing zeros, `Z`.
pub(super) fn format_time(time: jiff::Timestamp) -> String {
    let seconds = time.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = time.as_nanosecond().rem_euclid(1_000_000_000);
    if nanos == 0 {
        return format!("{seconds}Z");
    }
    let fraction = format!("{nanos:09}");
    format!("{seconds}.{}Z", fraction.trim_end_matches('0'))
}

/// Reads a Go time; `None` for `null`, `""` and Go's zero time.
fn parse_time<E: serde::de::Error>(text: Option<&str>) -> Result<Option<jiff::Timestamp>, E> {
    match text {
        None | Some("" | GO_ZERO_TIME) => Ok(None),
        Some(text) => text
            .parse::<jiff::Timestamp>()
            .map(Some)
            .map_err(|_| E::custom("not an RFC 3339 time")),
    }
}

/// `time.Time` with `omitzero` (the field is skipped when `None`).
pub(super) mod go_time {
    use super::{Deserialize, Deserializer, Serializer, format_time, parse_time};

    #[expect(
        clippy::ref_option,
        reason = "serde's `with` passes the field by reference"
    )]
    pub(crate) fn serialize<S: Serializer>(
        time: &Option<jiff::Timestamp>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match time {
            Some(time) => serializer.serialize_str(&format_time(*time)),
            None => serializer.serialize_str(super::GO_ZERO_TIME),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<jiff::Timestamp>, D::Error> {
        parse_time(Option::<String>::deserialize(deserializer)?.as_deref())
    }
}

/// `time.Time` without `omitzero`: `None` is written as Go's zero time.
pub(super) mod go_time_required {
    pub(crate) use super::go_time::{deserialize, serialize};
}

/// `[]byte`: base64, `null` read as empty.
pub(super) mod base64_bytes {
    use super::{Deserialize, Deserializer, STANDARD, Serializer};
    use base64::Engine as _;

    pub(crate) fn serialize<S: Serializer>(data: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&STANDARD.encode(data))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<u8>, D::Error> {
        match Option::<String>::deserialize(deserializer)? {
            None => Ok(Vec::new()),
            Some(text) => STANDARD
                .decode(text)
                .map_err(|_| serde::de::Error::custom("not base64")),
        }
    }
}

/// `[]byte` that may be nil: `None` is `null`.
pub(super) mod base64_option {
    use super::{Deserialize, Deserializer, STANDARD, Serializer};
    use base64::Engine as _;

    #[expect(
        clippy::ref_option,
        reason = "serde's `with` passes the field by reference"
    )]
    pub(crate) fn serialize<S: Serializer>(
        data: &Option<Vec<u8>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match data {
            Some(data) => serializer.serialize_str(&STANDARD.encode(data)),
            None => serializer.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Vec<u8>>, D::Error> {
        match Option::<String>::deserialize(deserializer)? {
            None => Ok(None),
            Some(text) => STANDARD
                .decode(text)
                .map(Some)
                .map_err(|_| serde::de::Error::custom("not base64")),
        }
    }
}

/// Hook events as Helm writes them (`pre-install`).
pub(super) mod hook_events {
    use super::{Deserialize, Deserializer, Serializer};
    use crate::output::HookEvent;
    use serde::ser::SerializeSeq as _;

    pub(crate) fn serialize<S: Serializer>(
        events: &[HookEvent],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(events.len()))?;
        for event in events {
            seq.serialize_element(event.as_str())?;
        }
        seq.end()
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<HookEvent>, D::Error> {
        Option::<Vec<String>>::deserialize(deserializer)?
            .unwrap_or_default()
            .iter()
            .map(|text| {
                HookEvent::parse(text).ok_or_else(|| serde::de::Error::custom("unknown hook event"))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::format_time;

    #[test]
    fn times_are_written_as_go_writes_them() {
        let at = |text: &str| text.parse::<jiff::Timestamp>().unwrap();
        assert_eq!(
            format_time(at("2026-11-24T13:05:22Z")),
            "2026-11-24T13:05:22Z"
        );
        assert_eq!(
            format_time(at("2026-11-24T13:05:22.120000000Z")),
            "2026-11-24T13:05:22.12Z"
        );
        assert_eq!(
            format_time(at("2026-11-24T14:05:22.123456789+01:00")),
            "2026-11-24T13:05:22.123456789Z"
        );
    }
}
