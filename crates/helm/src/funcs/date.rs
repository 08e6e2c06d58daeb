//! Template functions: date — `now`, `date`, `dateInZone`, `htmlDate`, `htmlDateInZone`,
//! `dateModify`, `mustDateModify`, `ago`, `duration`, `durationRound`, `toDate`, `mustToDate`,
//! `unixEpoch`.
//!
//! Times are Go `time.Time` values ([`Time`]): an instant plus a location, printed with Go's
//! `String()` and formatted with Go's reference layouts (`2006-01-02T15:04:05Z07:00`), which
//! [`format`] and [`parse`] implement. Go's "Local" zone is the zone of the render's clock
//! ([`Env::now`](crate::template::Env)), so a fixed clock fixes it too.

use std::fmt::Write as _;
use std::rc::Rc;
use std::sync::LazyLock;

use jiff::Timestamp;
use jiff::tz::{Offset, TimeZone};

use super::crypto::{str_arg, want_args};
use crate::template::{Call, FuncMap};
use crate::value::{Object, Value};

/// Adds this module's functions to `map`.
pub fn register(map: &mut FuncMap) {
    map.insert("now", now);
    map.insert("date", date);
    map.insert("dateInZone", date_in_zone);
    map.insert("date_in_zone", date_in_zone);
    map.insert("htmlDate", html_date);
    map.insert("htmlDateInZone", html_date_in_zone);
    map.insert("dateModify", date_modify);
    map.insert("date_modify", date_modify);
    map.insert("mustDateModify", must_date_modify);
    map.insert("must_date_modify", must_date_modify);
    map.insert("ago", ago);
    map.insert("duration", duration);
    map.insert("durationRound", duration_round);
    map.insert("toDate", to_date);
    map.insert("mustToDate", must_to_date);
    map.insert("unixEpoch", unix_epoch);
}

/// A time's location: a named zone from the database (or UTC, or "Local"), or a fixed offset
/// with a possibly empty name (what Go fabricates when parsing `+0100` or an unknown `PST`).
#[derive(Debug, Clone)]
pub enum Zone {
    /// A time zone with rules.
    Tz(TimeZone),
    /// A fixed offset in seconds east of UTC, with its abbreviation.
    Fixed(String, i32),
}

/// Go's `time.Time`.
#[derive(Debug, Clone)]
pub struct Time {
    /// The instant.
    pub instant: Timestamp,
    /// Where it is shown.
    pub zone: Zone,
    /// Go's monotonic clock reading (seconds since the process started), which only `now`
    /// carries and `String()` prints as `m=+0.001`.
    pub monotonic: Option<std::time::Duration>,
}

/// The broken-down fields of a time in its zone.
struct Civil {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    nanos: i64,
    weekday: usize,
    yday: i64,
    offset: i32,
    abbreviation: String,
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

static PROCESS_START: LazyLock<std::time::Instant> = LazyLock::new(std::time::Instant::now);

impl Time {
    /// A time without a monotonic reading.
    pub fn new(instant: Timestamp, zone: Zone) -> Self {
        Time {
            instant,
            zone,
            monotonic: None,
        }
    }

    fn offset_and_name(&self) -> (i32, String) {
        match &self.zone {
            Zone::Fixed(name, offset) => (*offset, name.clone()),
            Zone::Tz(tz) => {
                let info = tz.to_offset_info(self.instant);
                let name = info.abbreviation().to_owned();
                // Go names zones without an abbreviation by their offset ("+0530"); so does
                // jiff, except for UTC which both call "UTC".
                (info.offset().seconds(), name)
            }
        }
    }

    fn civil(&self) -> Civil {
        let (offset, abbreviation) = self.offset_and_name();
        let local = Offset::from_seconds(offset)
            .unwrap_or(Offset::UTC)
            .to_datetime(self.instant);
        Civil {
            year: i64::from(local.year()),
            month: i64::from(local.month()),
            day: i64::from(local.day()),
            hour: i64::from(local.hour()),
            minute: i64::from(local.minute()),
            second: i64::from(local.second()),
            nanos: i64::from(local.subsec_nanosecond()),
            weekday: usize::from(local.weekday().to_sunday_zero_offset().unsigned_abs()),
            yday: i64::from(local.day_of_year()),
            offset,
            abbreviation,
        }
    }

    /// The same instant in `zone` (Go's `In`), without the monotonic reading.
    fn in_zone(&self, zone: Zone) -> Time {
        Time::new(self.instant, zone)
    }

    /// Go's `Add`.
    fn add(&self, nanos: i128) -> Time {
        let instant = Timestamp::from_nanosecond(self.instant.as_nanosecond() + nanos)
            .unwrap_or(self.instant);
        Time {
            instant,
            zone: self.zone.clone(),
            monotonic: self.monotonic.map(|m| {
                let shifted = i128::try_from(m.as_nanos()).unwrap_or(i128::MAX) + nanos;
                std::time::Duration::from_nanos(u64::try_from(shifted.max(0)).unwrap_or(u64::MAX))
            }),
        }
    }

    /// Go's `String()`.
    pub fn go_string(&self) -> String {
        let mut text = format(self, "2006-01-02 15:04:05.999999999 -0700 MST");
        if let Some(m) = self.monotonic {
            let _ = write!(text, " m=+{}.{:09}", m.as_secs(), m.subsec_nanos());
        }
        text
    }
}

impl Object for Time {
    fn type_name(&self) -> String {
        "time.Time".into()
    }

    fn field(&self, _name: &str) -> Option<Value> {
        None
    }

    fn method(&self, name: &str, args: &[Value]) -> Option<Result<Value, String>> {
        let c = || self.civil();
        let niladic = |v: Value| {
            if args.is_empty() {
                Ok(v)
            } else {
                Err(format!(
                    "wrong number of args for {name}: want 0 got {}",
                    args.len()
                ))
            }
        };
        Some(match name {
            "String" => niladic(Value::str(self.go_string())),
            "Unix" => niladic(Value::Int64(self.instant.as_second())),
            "UnixMilli" => niladic(Value::Int64(self.instant.as_millisecond())),
            "UnixNano" => niladic(Value::Int64(
                i64::try_from(self.instant.as_nanosecond()).unwrap_or(i64::MAX),
            )),
            "Year" => niladic(Value::Int(c().year)),
            "Month" => niladic(Value::str(MONTHS[(c().month - 1) as usize % 12])),
            "Day" => niladic(Value::Int(c().day)),
            "Hour" => niladic(Value::Int(c().hour)),
            "Minute" => niladic(Value::Int(c().minute)),
            "Second" => niladic(Value::Int(c().second)),
            "Nanosecond" => niladic(Value::Int(c().nanos)),
            "YearDay" => niladic(Value::Int(c().yday)),
            "Weekday" => niladic(Value::str(DAYS[c().weekday % 7])),
            "UTC" => niladic(Value::Object(Rc::new(
                self.in_zone(Zone::Tz(TimeZone::UTC)),
            ))),
            "Format" => match args {
                [Value::String(layout)] => Ok(Value::str(format(self, layout))),
                [other] => Err(format!(
                    "wrong type for value; expected string; got {}",
                    other.type_name()
                )),
                _ => Err(format!(
                    "wrong number of args for Format: want 1 got {}",
                    args.len()
                )),
            },
            _ => return None,
        })
    }

    fn format(&self) -> String {
        self.go_string()
    }

    fn to_data(&self) -> Value {
        // encoding/json writes times in RFC 3339 with nanoseconds.
        Value::str(format(self, "2006-01-02T15:04:05.999999999Z07:00"))
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

// ---- Layouts.

/// One element of a Go layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Std {
    Month,
    LongMonth,
    NumMonth,
    ZeroMonth,
    WeekDay,
    LongWeekDay,
    Day,
    UnderDay,
    ZeroDay,
    UnderYearDay,
    ZeroYearDay,
    Hour,
    Hour12,
    ZeroHour12,
    Minute,
    ZeroMinute,
    Second,
    ZeroSecond,
    LongYear,
    Year,
    Pm,
    PmLower,
    Tz,
    Iso8601Tz,
    Iso8601SecondsTz,
    Iso8601ShortTz,
    Iso8601ColonTz,
    Iso8601ColonSecondsTz,
    NumTz,
    NumSecondsTz,
    NumShortTz,
    NumColonTz,
    NumColonSecondsTz,
    /// Fixed fractional seconds (`.000`): separator, digit count.
    Frac0(u8, usize),
    /// Trimmed fractional seconds (`.999`): separator, digit count.
    Frac9(u8, usize),
}

/// Splits `layout` at its first element: the literal text before it, the element and its text,
/// and the rest.
fn next_chunk(layout: &str) -> (&str, Option<(Std, &str)>, &str) {
    let b = layout.as_bytes();
    let at = |i: usize, s: &str| layout.get(i..).is_some_and(|r| r.starts_with(s));
    for i in 0..b.len() {
        let found: Option<(Std, usize)> = match b[i] {
            b'J' if at(i, "January") => Some((Std::LongMonth, 7)),
            b'J' if at(i, "Jan") => Some((Std::Month, 3)),
            b'M' if at(i, "Monday") => Some((Std::LongWeekDay, 6)),
            b'M' if at(i, "Mon") => Some((Std::WeekDay, 3)),
            b'M' if at(i, "MST") => Some((Std::Tz, 3)),
            b'0' if b.get(i + 1).is_some_and(|c| (b'1'..=b'6').contains(c)) => Some((
                [
                    Std::ZeroMonth,
                    Std::ZeroDay,
                    Std::ZeroHour12,
                    Std::ZeroMinute,
                    Std::ZeroSecond,
                    Std::Year,
                ][usize::from(b[i + 1] - b'1')],
                2,
            )),
            b'0' if at(i, "002") => Some((Std::ZeroYearDay, 3)),
            b'1' if at(i, "15") => Some((Std::Hour, 2)),
            b'1' => Some((Std::NumMonth, 1)),
            b'2' if at(i, "2006") => Some((Std::LongYear, 4)),
            b'2' => Some((Std::Day, 1)),
            b'_' if at(i, "_2006") => {
                // A literal `_` before a long year.
                return (
                    &layout[..=i],
                    Some((Std::LongYear, "2006")),
                    &layout[i + 5..],
                );
            }
            b'_' if at(i, "_2") => Some((Std::UnderDay, 2)),
            b'_' if at(i, "__2") => Some((Std::UnderYearDay, 3)),
            b'3' => Some((Std::Hour12, 1)),
            b'4' => Some((Std::Minute, 1)),
            b'5' => Some((Std::Second, 1)),
            b'P' if at(i, "PM") => Some((Std::Pm, 2)),
            b'p' if at(i, "pm") => Some((Std::PmLower, 2)),
            b'-' if at(i, "-070000") => Some((Std::NumSecondsTz, 7)),
            b'-' if at(i, "-07:00:00") => Some((Std::NumColonSecondsTz, 9)),
            b'-' if at(i, "-0700") => Some((Std::NumTz, 5)),
            b'-' if at(i, "-07:00") => Some((Std::NumColonTz, 6)),
            b'-' if at(i, "-07") => Some((Std::NumShortTz, 3)),
            b'Z' if at(i, "Z070000") => Some((Std::Iso8601SecondsTz, 7)),
            b'Z' if at(i, "Z07:00:00") => Some((Std::Iso8601ColonSecondsTz, 9)),
            b'Z' if at(i, "Z0700") => Some((Std::Iso8601Tz, 5)),
            b'Z' if at(i, "Z07:00") => Some((Std::Iso8601ColonTz, 6)),
            b'Z' if at(i, "Z07") => Some((Std::Iso8601ShortTz, 3)),
            b'.' | b',' if matches!(b.get(i + 1), Some(b'0' | b'9')) => {
                let digit = b[i + 1];
                let mut j = i + 1;
                while j < b.len() && b[j] == digit {
                    j += 1;
                }
                // Only a fraction when the digits end the number.
                if b.get(j).is_some_and(u8::is_ascii_digit) {
                    None
                } else if digit == b'0' {
                    Some((Std::Frac0(b[i], j - i - 1), j - i))
                } else {
                    Some((Std::Frac9(b[i], j - i - 1), j - i))
                }
            }
            _ => None,
        };
        if let Some((std, len)) = found {
            return (
                &layout[..i],
                Some((std, &layout[i..i + len])),
                &layout[i + len..],
            );
        }
    }
    (layout, None, "")
}

fn pad(out: &mut String, n: i64, width: usize) {
    if n < 0 {
        out.push('-');
    }
    let _ = write!(out, "{:0width$}", n.unsigned_abs());
}

/// Go's `Time.Format`.
pub fn format(t: &Time, layout: &str) -> String {
    let c = t.civil();
    let mut out = String::with_capacity(layout.len() + 10);
    let mut rest = layout;
    loop {
        let (prefix, chunk, after) = next_chunk(rest);
        out.push_str(prefix);
        let Some((std, _)) = chunk else { break };
        rest = after;
        let hour12 = match c.hour % 12 {
            0 => 12,
            h => h,
        };
        match std {
            Std::Year => pad(&mut out, c.year.rem_euclid(100), 2),
            Std::LongYear => pad(&mut out, c.year, 4),
            Std::Month => out.push_str(&MONTHS[(c.month - 1) as usize % 12][..3]),
            Std::LongMonth => out.push_str(MONTHS[(c.month - 1) as usize % 12]),
            Std::NumMonth => pad(&mut out, c.month, 1),
            Std::ZeroMonth => pad(&mut out, c.month, 2),
            Std::WeekDay => out.push_str(&DAYS[c.weekday % 7][..3]),
            Std::LongWeekDay => out.push_str(DAYS[c.weekday % 7]),
            Std::Day => pad(&mut out, c.day, 1),
            Std::UnderDay => {
                if c.day < 10 {
                    out.push(' ');
                }
                pad(&mut out, c.day, 1);
            }
            Std::ZeroDay => pad(&mut out, c.day, 2),
            Std::UnderYearDay => {
                let _ = write!(out, "{:>3}", c.yday);
            }
            Std::ZeroYearDay => pad(&mut out, c.yday, 3),
            Std::Hour => pad(&mut out, c.hour, 2),
            Std::Hour12 => pad(&mut out, hour12, 1),
            Std::ZeroHour12 => pad(&mut out, hour12, 2),
            Std::Minute => pad(&mut out, c.minute, 1),
            Std::ZeroMinute => pad(&mut out, c.minute, 2),
            Std::Second => pad(&mut out, c.second, 1),
            Std::ZeroSecond => pad(&mut out, c.second, 2),
            Std::Pm => out.push_str(if c.hour >= 12 { "PM" } else { "AM" }),
            Std::PmLower => out.push_str(if c.hour >= 12 { "pm" } else { "am" }),
            Std::Iso8601Tz
            | Std::Iso8601SecondsTz
            | Std::Iso8601ShortTz
            | Std::Iso8601ColonTz
            | Std::Iso8601ColonSecondsTz
            | Std::NumTz
            | Std::NumSecondsTz
            | Std::NumShortTz
            | Std::NumColonTz
            | Std::NumColonSecondsTz => format_offset(&mut out, std, c.offset),
            Std::Tz => {
                if c.abbreviation.is_empty() {
                    format_offset(&mut out, Std::NumTz, c.offset);
                } else {
                    out.push_str(&c.abbreviation);
                }
            }
            Std::Frac0(sep, digits) | Std::Frac9(sep, digits) => {
                let all = format!("{:09}", c.nanos);
                let mut shown = &all[..digits.min(9)];
                if matches!(std, Std::Frac9(..)) {
                    shown = shown.trim_end_matches('0');
                    if shown.is_empty() {
                        continue;
                    }
                }
                out.push(char::from(sep));
                out.push_str(shown);
            }
        }
    }
    out
}

fn format_offset(out: &mut String, std: Std, offset: i32) {
    let iso = matches!(
        std,
        Std::Iso8601Tz
            | Std::Iso8601SecondsTz
            | Std::Iso8601ShortTz
            | Std::Iso8601ColonTz
            | Std::Iso8601ColonSecondsTz
    );
    if iso && offset == 0 {
        out.push('Z');
        return;
    }
    let colon = matches!(
        std,
        Std::Iso8601ColonTz | Std::Iso8601ColonSecondsTz | Std::NumColonTz | Std::NumColonSecondsTz
    );
    let seconds = matches!(
        std,
        Std::Iso8601SecondsTz
            | Std::Iso8601ColonSecondsTz
            | Std::NumSecondsTz
            | Std::NumColonSecondsTz
    );
    let short = matches!(std, Std::Iso8601ShortTz | Std::NumShortTz);
    out.push(if offset < 0 { '-' } else { '+' });
    let abs = offset.unsigned_abs();
    let _ = write!(out, "{:02}", abs / 3600);
    if !short {
        if colon {
            out.push(':');
        }
        let _ = write!(out, "{:02}", abs / 60 % 60);
    }
    if seconds {
        if colon {
            out.push(':');
        }
        let _ = write!(out, "{:02}", abs % 60);
    }
}

// ---- Parsing.

/// Go's `skip`: the layout's literal text at the start of `value`, where a space in the layout
/// matches any run of spaces (at least one, unless the value has ended).
fn skip<'v>(mut value: &'v str, mut prefix: &str) -> Option<&'v str> {
    while let Some(p) = prefix.chars().next() {
        if p == ' ' {
            if value.chars().next().is_some_and(|v| v != ' ') {
                return None;
            }
            prefix = prefix.trim_start_matches(' ');
            value = value.trim_start_matches(' ');
            continue;
        }
        value = value.strip_prefix(p)?;
        prefix = &prefix[p.len_utf8()..];
    }
    Some(value)
}

/// Leading digits as a number: one or two digits (exactly two when `fixed`).
fn getnum(value: &str, fixed: bool) -> Option<(i64, &str)> {
    let b = value.as_bytes();
    if !b.first()?.is_ascii_digit() {
        return None;
    }
    if !b.get(1).is_some_and(u8::is_ascii_digit) {
        if fixed {
            return None;
        }
        return Some((i64::from(b[0] - b'0'), &value[1..]));
    }
    Some((
        i64::from(b[0] - b'0') * 10 + i64::from(b[1] - b'0'),
        &value[2..],
    ))
}

/// Up to three leading digits (exactly three when `fixed`).
fn getnum3(value: &str, fixed: bool) -> Option<(i64, &str)> {
    let digits = value.bytes().take(3).take_while(u8::is_ascii_digit).count();
    if digits == 0 || (fixed && digits != 3) {
        return None;
    }
    Some((value[..digits].parse().ok()?, &value[digits..]))
}

fn lookup_name<'v>(names: &[&str], value: &'v str, len: Option<usize>) -> Option<(usize, &'v str)> {
    names.iter().enumerate().find_map(|(i, name)| {
        let name = len.map_or(*name, |l| &name[..l]);
        let head = value.get(..name.len())?;
        head.eq_ignore_ascii_case(name)
            .then(|| (i, &value[name.len()..]))
    })
}

/// A time zone abbreviation at the start of `value` as Go accepts one: `UTC`, `GMT±h`, three to
/// five capitals (a few mixed-case exceptions), or `ChST`/`MeST`.
fn zone_name_len(value: &str) -> Option<usize> {
    let b = value.as_bytes();
    if b.len() < 3 {
        return None;
    }
    if value.starts_with("ChST") || value.starts_with("MeST") {
        return Some(4);
    }
    if value.starts_with("GMT") {
        let mut n = 3;
        if let Some(sign @ (b'+' | b'-')) = b.get(3) {
            let _ = sign;
            let digits = b[4..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits > 0 {
                n = 4 + digits;
            }
        }
        return Some(n);
    }
    let upper = b.iter().take_while(|c| c.is_ascii_uppercase()).count();
    match upper {
        3 => Some(3),
        4 if b[3] == b'T' => Some(4),
        5 if b[4] == b'T' => Some(5),
        _ => None,
    }
}

/// Go's `time.ParseInLocation(layout, value, local)`.
// One loop over the layout's elements, as Go's own parser: splitting it would scatter the state.
#[allow(clippy::too_many_lines)]
pub fn parse(layout: &str, value: &str, local: &TimeZone) -> Result<Time, String> {
    let original_value = value;
    let err_as = |rest: &str, elem: &str| {
        format!(
            "parsing time {} as {}: cannot parse {} as {}",
            time_quote(original_value),
            time_quote(layout),
            time_quote(rest),
            time_quote(elem)
        )
    };
    let range = |what: &str| {
        format!(
            "parsing time {}: {what} out of range",
            time_quote(original_value)
        )
    };
    // Go's parse starts from year 0 (not the zero time's year 1).
    let (mut year, mut month, mut day, mut yday) = (0_i64, -1_i64, -1_i64, -1_i64);
    let (mut hour, mut minute, mut second, mut nanos) = (0_i64, 0_i64, 0_i64, 0_i64);
    let (mut pm, mut am) = (false, false);
    let mut utc = false;
    let mut zone_offset: Option<i32> = None;
    let mut zone_name: Option<String> = None;
    let mut layout_rest = layout;
    let mut value = value;
    loop {
        let (prefix, chunk, after) = next_chunk(layout_rest);
        let Some(stripped) = skip(value, prefix) else {
            return Err(err_as(value, prefix));
        };
        value = stripped;
        let Some((std, elem)) = chunk else {
            if !value.is_empty() {
                return Err(format!(
                    "parsing time {}: extra text: {}",
                    time_quote(original_value),
                    time_quote(value)
                ));
            }
            break;
        };
        layout_rest = after;
        let here = value;
        let fail = || err_as(here, elem);
        match std {
            Std::Year => {
                let digits = value
                    .get(..2)
                    .filter(|d| d.bytes().all(|b| b.is_ascii_digit()));
                let Some(d) = digits else { return Err(fail()) };
                let y: i64 = d.parse().map_err(|_| fail())?;
                year = if y >= 69 { 1900 + y } else { 2000 + y };
                value = &value[2..];
            }
            Std::LongYear => {
                let digits = value
                    .get(..4)
                    .filter(|d| d.bytes().all(|b| b.is_ascii_digit()));
                let Some(d) = digits else { return Err(fail()) };
                year = d.parse().map_err(|_| fail())?;
                value = &value[4..];
            }
            Std::Month | Std::LongMonth => {
                let (i, rest) = lookup_name(
                    &MONTHS,
                    value,
                    if std == Std::Month { Some(3) } else { None },
                )
                .ok_or_else(fail)?;
                month = i64::try_from(i).unwrap_or(0) + 1;
                value = rest;
            }
            Std::NumMonth | Std::ZeroMonth => {
                let (m, rest) = getnum(value, std == Std::ZeroMonth).ok_or_else(fail)?;
                if !(1..=12).contains(&m) {
                    return Err(range("month"));
                }
                month = m;
                value = rest;
            }
            Std::WeekDay | Std::LongWeekDay => {
                let (_, rest) = lookup_name(
                    &DAYS,
                    value,
                    if std == Std::WeekDay { Some(3) } else { None },
                )
                .ok_or_else(fail)?;
                value = rest;
            }
            Std::Day | Std::UnderDay | Std::ZeroDay => {
                if std == Std::UnderDay && value.starts_with(' ') {
                    value = &value[1..];
                }
                let (d, rest) = getnum(value, std == Std::ZeroDay).ok_or_else(fail)?;
                day = d;
                value = rest;
            }
            Std::UnderYearDay | Std::ZeroYearDay => {
                let mut v = value;
                if std == Std::UnderYearDay {
                    for _ in 0..2 {
                        v = v.strip_prefix(' ').unwrap_or(v);
                    }
                }
                let (d, rest) = getnum3(v, std == Std::ZeroYearDay).ok_or_else(fail)?;
                yday = d;
                value = rest;
            }
            Std::Hour => {
                let (h, rest) = getnum(value, false).ok_or_else(fail)?;
                if !(0..24).contains(&h) {
                    return Err(range("hour"));
                }
                hour = h;
                value = rest;
            }
            Std::Hour12 | Std::ZeroHour12 => {
                let (h, rest) = getnum(value, std == Std::ZeroHour12).ok_or_else(fail)?;
                if !(0..=12).contains(&h) {
                    return Err(range("hour"));
                }
                hour = h;
                value = rest;
            }
            Std::Minute | Std::ZeroMinute => {
                let (m, rest) = getnum(value, std == Std::ZeroMinute).ok_or_else(fail)?;
                if !(0..60).contains(&m) {
                    return Err(range("minute"));
                }
                minute = m;
                value = rest;
            }
            Std::Second | Std::ZeroSecond => {
                let (s, rest) = getnum(value, std == Std::ZeroSecond).ok_or_else(fail)?;
                if !(0..60).contains(&s) {
                    return Err(range("second"));
                }
                second = s;
                value = rest;
                // A fraction the layout does not mention is read anyway.
                let (_, next, _) = next_chunk(layout_rest);
                let layout_has_fraction = next_chunk(layout_rest).0.is_empty()
                    && matches!(next, Some((Std::Frac0(..) | Std::Frac9(..), _)));
                let b = value.as_bytes();
                if !layout_has_fraction
                    && b.len() >= 2
                    && matches!(b[0], b'.' | b',')
                    && b[1].is_ascii_digit()
                {
                    let n = 1 + b[1..].iter().take_while(|c| c.is_ascii_digit()).count();
                    nanos = parse_nanos(&value[1..n]);
                    value = &value[n..];
                }
            }
            Std::Pm | Std::PmLower => {
                let Some(p) = value.get(..2) else {
                    return Err(fail());
                };
                let (pm_text, am_text) = if std == Std::Pm {
                    ("PM", "AM")
                } else {
                    ("pm", "am")
                };
                if p == pm_text {
                    pm = true;
                } else if p == am_text {
                    am = true;
                } else {
                    return Err(fail());
                }
                value = &value[2..];
            }
            Std::Iso8601Tz
            | Std::Iso8601SecondsTz
            | Std::Iso8601ShortTz
            | Std::Iso8601ColonTz
            | Std::Iso8601ColonSecondsTz
            | Std::NumTz
            | Std::NumSecondsTz
            | Std::NumShortTz
            | Std::NumColonTz
            | Std::NumColonSecondsTz => {
                let iso = matches!(
                    std,
                    Std::Iso8601Tz
                        | Std::Iso8601SecondsTz
                        | Std::Iso8601ShortTz
                        | Std::Iso8601ColonTz
                        | Std::Iso8601ColonSecondsTz
                );
                if iso && value.starts_with('Z') {
                    value = &value[1..];
                    utc = true;
                    continue;
                }
                let (offset, rest) = parse_offset(value, std).ok_or_else(fail)?;
                zone_offset = Some(offset);
                value = rest;
            }
            Std::Tz => {
                if value.starts_with("UTC") {
                    value = &value[3..];
                    utc = true;
                    continue;
                }
                let n = zone_name_len(value).ok_or_else(fail)?;
                zone_name = Some(value[..n].to_owned());
                value = &value[n..];
            }
            Std::Frac0(sep, digits) => {
                let b = value.as_bytes();
                let ok =
                    b.len() > digits && b[0] == sep && b[1..=digits].iter().all(u8::is_ascii_digit);
                if !ok {
                    return Err(fail());
                }
                nanos = parse_nanos(&value[1..=digits]);
                value = &value[1 + digits..];
            }
            Std::Frac9(..) => {
                let b = value.as_bytes();
                if b.len() < 2 || !matches!(b[0], b'.' | b',') || !b[1].is_ascii_digit() {
                    continue;
                }
                let n = 1 + b[1..].iter().take_while(|c| c.is_ascii_digit()).count();
                nanos = parse_nanos(&value[1..n]);
                value = &value[n..];
            }
        }
    }
    if pm && hour < 12 {
        hour += 12;
    } else if am && hour == 12 {
        hour = 0;
    }
    if yday >= 0 {
        // Month and day from the day of the year; they must agree with any given.
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        let mut count = yday;
        let mut from_leap_day = None;
        if leap {
            if count == 31 + 29 {
                from_leap_day = Some((2, 29));
            } else if count > 31 + 29 {
                count -= 1;
            }
        }
        if !(1..=365).contains(&count) {
            return Err(format!(
                "parsing time {}: day-of-year out of range",
                time_quote(original_value)
            ));
        }
        let (m, d) = from_leap_day.unwrap_or_else(|| {
            const BEFORE: [i64; 13] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365];
            let mut m = count / 31 + 1;
            if BEFORE[m as usize] < count {
                m += 1;
            }
            (m, count - BEFORE[m as usize - 1])
        });
        let mismatch = |what: &str| {
            format!(
                "parsing time {}: day-of-year does not match {what}",
                time_quote(original_value)
            )
        };
        if month >= 0 && month != m {
            return Err(mismatch("month"));
        }
        if day >= 0 && day != d {
            return Err(mismatch("day"));
        }
        month = m;
        day = d;
    }
    if month < 0 {
        month = 1;
    }
    if day < 0 {
        day = 1;
    }
    let year16 = i16::try_from(year).map_err(|_| range("year"))?;
    let date = jiff::civil::Date::new(year16, month as i8, day as i8).map_err(|_| range("day"))?;
    let civil = date.to_datetime(
        jiff::civil::Time::new(hour as i8, minute as i8, second as i8, nanos as i32)
            .map_err(|_| range("hour"))?,
    );
    let as_utc = civil
        .to_zoned(TimeZone::UTC)
        .map_err(|e| e.to_string())?
        .timestamp();
    let shift = |offset: i32| {
        Timestamp::from_second(as_utc.as_second() - i64::from(offset))
            .and_then(|t| Timestamp::new(t.as_second(), as_utc.subsec_nanosecond()))
            .map_err(|e| e.to_string())
    };
    if utc {
        return Ok(Time::new(as_utc, Zone::Tz(TimeZone::UTC)));
    }
    if let Some(offset) = zone_offset {
        let instant = shift(offset)?;
        if local.to_offset(instant).seconds() == offset {
            return Ok(Time::new(instant, Zone::Tz(local.clone())));
        }
        // Go names the made-up zone after an abbreviation parsed alongside, if any.
        return Ok(Time::new(
            instant,
            Zone::Fixed(zone_name.unwrap_or_default(), offset),
        ));
    }
    if let Some(name) = zone_name {
        // The local zone's own abbreviation at that time, else a made-up zone of that name.
        let guess = local.to_offset_info(as_utc);
        if guess.abbreviation() == name {
            let instant = shift(guess.offset().seconds())?;
            return Ok(Time::new(instant, Zone::Tz(local.clone())));
        }
        let offset = name
            .strip_prefix("GMT")
            .and_then(|h| h.parse::<i32>().ok())
            .map_or(0, |h| h * 3600);
        // Go keeps the fields as UTC here and only labels the zone (GMT+3 moves the clock).
        return Ok(Time::new(as_utc, Zone::Fixed(name, offset)));
    }
    let zoned = civil.to_zoned(local.clone()).map_err(|e| e.to_string())?;
    Ok(Time::new(zoned.timestamp(), Zone::Tz(local.clone())))
}

fn parse_nanos(digits: &str) -> i64 {
    let mut nanos = 0_i64;
    for (i, d) in digits.bytes().take(9).enumerate() {
        nanos += i64::from(d - b'0') * 10_i64.pow(8 - i as u32);
    }
    nanos
}

fn parse_offset(value: &str, std: Std) -> Option<(i32, &str)> {
    let b = value.as_bytes();
    let sign = match b.first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
    let num = |s: &str| s.parse::<i32>().ok();
    let (h, m, s, len) = match std {
        Std::Iso8601ShortTz | Std::NumShortTz => (value.get(1..3)?, "00", "00", 3),
        Std::Iso8601Tz | Std::NumTz => (value.get(1..3)?, value.get(3..5)?, "00", 5),
        Std::Iso8601ColonTz | Std::NumColonTz => {
            if b.get(3) != Some(&b':') {
                return None;
            }
            (value.get(1..3)?, value.get(4..6)?, "00", 6)
        }
        Std::Iso8601SecondsTz | Std::NumSecondsTz => {
            (value.get(1..3)?, value.get(3..5)?, value.get(5..7)?, 7)
        }
        _ => {
            if b.get(3) != Some(&b':') || b.get(6) != Some(&b':') {
                return None;
            }
            (value.get(1..3)?, value.get(4..6)?, value.get(7..9)?, 9)
        }
    };
    if !digits(h.as_bytes()) || !digits(m.as_bytes()) || !digits(s.as_bytes()) {
        return None;
    }
    let offset = sign * (num(h)? * 3600 + num(m)? * 60 + num(s)?);
    Some((offset, &value[len..]))
}

/// How Go's time package quotes text in its errors: `"…"` with `"` and `\` escaped and every
/// byte outside printable ASCII as `\xNN`.
fn time_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if (' '..'\u{80}').contains(&c) {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        } else {
            let mut buffer = [0_u8; 4];
            for byte in c.encode_utf8(&mut buffer).bytes() {
                let _ = write!(out, "\\x{byte:02x}");
            }
        }
    }
    out.push('"');
    out
}

// ---- Durations.

/// Go's `Duration.String()` of `nanos`.
pub fn duration_string(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let negative = nanos < 0;
    let u = nanos.unsigned_abs();
    let mut out = String::new();
    if u < 1_000_000_000 {
        // Below a second: the largest unit that keeps a digit before the point.
        let (unit, scale) = if u < 1_000 {
            ("ns", 1)
        } else if u < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        out.push_str(&fraction(u, scale));
        out.push_str(unit);
    } else {
        let hours = u / 3_600_000_000_000;
        let minutes = u / 60_000_000_000 % 60;
        let rest = u % 60_000_000_000;
        if hours > 0 {
            let _ = write!(out, "{hours}h");
        }
        if hours > 0 || minutes > 0 {
            let _ = write!(out, "{minutes}m");
        }
        out.push_str(&fraction(rest, 1_000_000_000));
        out.push('s');
    }
    if negative {
        out.insert(0, '-');
    }
    out
}

/// `value / scale` with the remainder as trimmed decimals.
fn fraction(value: u64, scale: u64) -> String {
    let whole = value / scale;
    let rest = value % scale;
    if rest == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    let decimals = format!("{rest:0width$}");
    format!("{whole}.{}", decimals.trim_end_matches('0'))
}

/// Go's `time.ParseDuration`, in nanoseconds.
pub fn parse_duration(text: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", time_quote(text));
    let mut s = text;
    let negative = s.starts_with('-');
    if s.starts_with(['-', '+']) {
        s = &s[1..];
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !s.is_empty() {
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &s[..int_len];
        s = &s[int_len..];
        let mut frac_part = "";
        if s.starts_with('.') {
            s = &s[1..];
            let frac_len = s.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &s[..frac_len];
            s = &s[frac_len..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid());
        }
        let unit_len = s
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(s.len(), |(i, _)| i);
        let unit = &s[..unit_len];
        s = &s[unit_len..];
        let scale: u128 = match unit {
            "" => {
                return Err(format!(
                    "time: missing unit in duration {}",
                    time_quote(text)
                ));
            }
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            other => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    time_quote(other),
                    time_quote(text)
                ));
            }
        };
        let whole: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| invalid())?
        };
        let mut value = whole.checked_mul(scale).ok_or_else(invalid)?;
        if !frac_part.is_empty() {
            // Go keeps the fraction's first digits that fit; 30 digits is far past a nanosecond.
            let digits = &frac_part[..frac_part.len().min(30)];
            let numerator: u128 = digits.parse().map_err(|_| invalid())?;
            let denominator = 10_u128.pow(digits.len() as u32);
            value += numerator * scale / denominator;
        }
        total = total.checked_add(value).ok_or_else(invalid)?;
        if total > 1 << 63 {
            return Err(invalid());
        }
    }
    if negative {
        // Down to i64::MIN, which the bound above lets through.
        i64::try_from(-i128::try_from(total).map_err(|_| invalid())?).map_err(|_| invalid())
    } else {
        i64::try_from(total).map_err(|_| invalid())
    }
}

// ---- The functions.

fn local_zone(call: &Call<'_>) -> TimeZone {
    call.env.now.time_zone().clone()
}

/// Go's `time.LoadLocation`, with Sprig's fallback to UTC for unknown names.
fn load_location(call: &Call<'_>, name: &str) -> TimeZone {
    match name {
        "" | "UTC" => TimeZone::UTC,
        "Local" => local_zone(call),
        name => jiff::tz::db().get(name).unwrap_or(TimeZone::UTC),
    }
}

fn now_time(call: &Call<'_>) -> Time {
    Time {
        instant: call.env.now.timestamp(),
        zone: Zone::Tz(local_zone(call)),
        monotonic: Some(PROCESS_START.elapsed()),
    }
}

/// A time argument as Sprig's date functions accept it: a time, or Unix seconds as `int` or
/// `int64`; anything else means now.
fn time_arg(call: &Call<'_>, value: &Value) -> Time {
    match value {
        Value::Object(o) if o.type_name() == "time.Time" => {
            object_time(o).unwrap_or_else(|| now_time(call))
        }
        Value::Int(secs) | Value::Int64(secs) => Time::new(
            Timestamp::from_second(*secs).unwrap_or(Timestamp::UNIX_EPOCH),
            Zone::Tz(local_zone(call)),
        ),
        _ => now_time(call),
    }
}

/// The time inside a `time.Time` object.
fn object_time(o: &Rc<dyn Object>) -> Option<Time> {
    o.as_any()?.downcast_ref::<Time>().cloned()
}

fn time_value(t: Time) -> Value {
    Value::Object(Rc::new(t))
}

fn typed_time(value: &Value) -> Result<Time, String> {
    match value {
        Value::Object(o) if o.type_name() == "time.Time" => {
            object_time(o).ok_or_else(|| "wrong type for value; expected time.Time".to_owned())
        }
        Value::Nil => Err("wrong type for value; expected time.Time; got interface {}".into()),
        other => Err(format!(
            "wrong type for value; expected time.Time; got {}",
            other.type_name()
        )),
    }
}

fn now(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 0)?;
    Ok(time_value(now_time(call)))
}

fn format_in(call: &Call<'_>, layout: &str, date: &Value, zone: &str) -> String {
    let t = time_arg(call, date);
    format(&t.in_zone(Zone::Tz(load_location(call, zone))), layout)
}

fn date(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let layout = str_arg(&args[0])?;
    Ok(Value::str(format_in(call, layout, &args[1], "Local")))
}

fn date_in_zone(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 3)?;
    let layout = str_arg(&args[0])?;
    let zone = str_arg(&args[2])?;
    Ok(Value::str(format_in(call, layout, &args[1], zone)))
}

fn html_date(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    Ok(Value::str(format_in(call, "2006-01-02", &args[0], "Local")))
}

fn html_date_in_zone(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let zone = str_arg(&args[1])?;
    Ok(Value::str(format_in(call, "2006-01-02", &args[0], zone)))
}

fn modify(args: &[Value]) -> Result<Result<Value, String>, String> {
    let spec = str_arg(&args[0])?;
    let t = typed_time(&args[1])?;
    Ok(parse_duration(spec).map(|nanos| time_value(t.add(i128::from(nanos)))))
}

fn date_modify(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    // A bad duration leaves the time as it was.
    match modify(args)? {
        Ok(v) => Ok(v),
        Err(_) => Ok(args[1].clone()),
    }
}

fn must_date_modify(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    modify(args)?
}

fn since(call: &Call<'_>, t: &Time) -> i64 {
    let now = call.env.now.timestamp().as_nanosecond();
    i64::try_from(now - t.instant.as_nanosecond()).unwrap_or(i64::MAX)
}

fn ago(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let t = time_arg(call, &args[0]);
    // Rounded to the second, halves away from zero.
    let d = since(call, &t);
    let second = 1_000_000_000_i64;
    let rounded = (d / second) * second
        + if (d % second).abs() * 2 >= second {
            d.signum() * second
        } else {
            0
        };
    Ok(Value::str(duration_string(rounded)))
}

fn duration(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    // Seconds as an `int64` or a decimal string; anything else (even `int`) is zero.
    let seconds = match &args[0] {
        Value::Int64(n) => *n,
        Value::String(s) => s.parse().unwrap_or(0),
        _ => 0,
    };
    Ok(Value::str(duration_string(
        seconds.wrapping_mul(1_000_000_000),
    )))
}

fn duration_round(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let nanos = match &args[0] {
        Value::String(s) => parse_duration(s).unwrap_or(0),
        Value::Int64(n) => *n,
        Value::Object(o) if o.type_name() == "time.Time" => {
            object_time(o).map_or(0, |t| since(call, &t))
        }
        _ => 0,
    };
    let u = nanos.unsigned_abs();
    let hour: u64 = 3_600_000_000_000;
    let units: [(u64, &str); 6] = [
        (hour * 24 * 365, "y"),
        (hour * 24 * 30, "mo"),
        (hour * 24, "d"),
        (hour, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
    ];
    let text = units.iter().find(|(size, _)| u > *size).map_or_else(
        || "0s".to_owned(),
        |(size, unit)| format!("{}{unit}", u / size),
    );
    Ok(Value::str(text))
}

fn parse_with(call: &Call<'_>, args: &[Value]) -> Result<Result<Time, String>, String> {
    let layout = str_arg(&args[0])?;
    let text = str_arg(&args[1])?;
    Ok(parse(layout, text, &local_zone(call)))
}

fn to_date(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    // A failed parse gives Go's zero time.
    Ok(time_value(parse_with(call, args)?.unwrap_or_else(|_| {
        Time::new(
            Timestamp::new(-62_135_596_800, 0).unwrap_or(Timestamp::UNIX_EPOCH),
            Zone::Tz(TimeZone::UTC),
        )
    })))
}

fn must_to_date(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    parse_with(call, args)?.map(time_value)
}

fn unix_epoch(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let t = typed_time(&args[0])?;
    Ok(Value::str(t.instant.as_second().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::funcs::crypto::test_call;

    fn s(text: &str) -> Value {
        Value::str(text)
    }

    fn run(f: crate::template::Function, args: &[Value]) -> String {
        match test_call(f, args) {
            Ok(v) => v.to_string(),
            Err(e) => format!("ERR {e}"),
        }
    }

    fn time(layout: &str, text: &str) -> Value {
        test_call(must_to_date, &[s(layout), s(text)]).unwrap()
    }

    #[test]
    fn formats_go_layouts() {
        let layout = "2006-01-02T15:04:05Z07:00 Mon Monday Jan January 1 01 2 _2 02 3 03 15 4 04 5 05 PM pm .000 .999 MST -0700 -07:00 Z0700 ,000 06 002 __2";
        assert_eq!(
            run(date, &[s(layout), Value::Int(0)]),
            "1970-01-01T00:00:00Z Thu Thursday Jan January 1 01 1  1 01 12 12 00 0 00 0 00 AM am .000  UTC +0000 +00:00 Z ,000 70 001   1"
        );
        let t = Value::Int(1_700_000_000);
        for (layout, want) in [
            (
                "2006-01-02 15:04:05.000000 .999999999 MST",
                "2023-11-14 22:13:20.000000  UTC",
            ),
            (
                "Mon Jan _2 15:04:05 MST 2006 .00 ,999 999 .9",
                "Tue Nov 14 22:13:20 UTC 2023 .00  999 ",
            ),
        ] {
            assert_eq!(run(date, &[s(layout), t.clone()]), want);
        }
        assert_eq!(
            run(
                date_in_zone,
                &[
                    s("2006-01-02 15:04 MST -07:00"),
                    t.clone(),
                    s("America/New_York")
                ]
            ),
            "2023-11-14 17:13 EST -05:00"
        );
        assert_eq!(
            run(
                date_in_zone,
                &[s("2006-01-02 15:04 MST"), t.clone(), s("Bogus/Zone")]
            ),
            "2023-11-14 22:13 UTC"
        );
        assert_eq!(run(html_date, std::slice::from_ref(&t)), "2023-11-14");
        assert_eq!(
            run(
                date_in_zone,
                &[
                    s("Z07:00 -07 -070000 Z070000"),
                    Value::Int(0),
                    s("Asia/Kolkata")
                ]
            ),
            "+05:30 +05 +053000 +053000"
        );
        assert_eq!(
            run(date, &[s("2006-01-02"), Value::Int64(1_700_000_000)]),
            "2023-11-14"
        );
        let noon = test_call(to_date, &[s("2006-01-02 15:04"), s("2020-06-01 12:00")]).unwrap();
        assert_eq!(
            run(
                date_in_zone,
                &[s("2006-01-02 15:04:05 MST"), noon, s("Europe/Berlin")]
            ),
            "2020-06-01 14:00:00 CEST"
        );
        assert_eq!(run(html_date_in_zone, &[t, s("Asia/Tokyo")]), "2023-11-15");
        // Not a time: now (the fixed clock).
        assert_eq!(run(date, &[s("2006"), s("2023-01-01")]), "2024");
        assert_eq!(run(date, &[s("2006"), Value::Float(1.5)]), "2024");
    }

    #[test]
    #[allow(clippy::too_many_lines)] // Tables of Helm's answers.
    fn parses_go_layouts() {
        for (layout, text, want) in [
            ("2006-01-02", "2020-02-03", "2020-02-03 00:00:00 +0000 UTC"),
            (
                "2006-01-02 15:04 MST",
                "2020-02-03 10:11 PST",
                "2020-02-03 10:11:00 +0000 PST",
            ),
            (
                "2006-01-02T15:04:05Z07:00",
                "2020-02-03T10:11:12+05:30",
                "2020-02-03 10:11:12 +0530 +0530",
            ),
            (
                "Jan 2, 2006 at 3:04pm (MST)",
                "Feb 3, 2013 at 7:54pm (PST)",
                "2013-02-03 19:54:00 +0000 PST",
            ),
            (
                "2006-01-02T15:04:05.000Z",
                "2020-02-03T10:11:12.345Z",
                "2020-02-03 10:11:12.345 +0000 UTC",
            ),
            (
                "2006-01-02T15:04:05Z",
                "2020-02-03T10:11:12.345Z",
                "2020-02-03 10:11:12.345 +0000 UTC",
            ),
            (
                "02 Jan 06 15:04 -0700",
                "03 Feb 20 10:11 +0100",
                "2020-02-03 10:11:00 +0100 +0100",
            ),
            (
                "2006-01-02 MST",
                "2020-01-02 UTC",
                "2020-01-02 00:00:00 +0000 UTC",
            ),
            (
                "2006-01-02 MST",
                "2020-01-02 GMT+3",
                "2020-01-02 03:00:00 +0300 GMT+3",
            ),
            (
                "2006-01-02 MST",
                "2020-01-02 CEST",
                "2020-01-02 00:00:00 +0000 CEST",
            ),
            (
                "2006-01-02 -07",
                "2020-01-02 +03",
                "2020-01-02 00:00:00 +0300 +0300",
            ),
            (
                "2006-01-02 Z07:00",
                "2020-01-02 Z",
                "2020-01-02 00:00:00 +0000 UTC",
            ),
            (
                "2006-01-02 -07:00:00",
                "2020-01-02 +01:02:03",
                "2020-01-02 00:00:00 +0102 +0102",
            ),
            ("3:04PM", "9:05AM", "0000-01-01 09:05:00 +0000 UTC"),
            (
                "Monday, 02-Jan-06",
                "Tuesday, 04-Feb-20",
                "2020-02-04 00:00:00 +0000 UTC",
            ),
            ("2006-002", "2020-060", "2020-02-29 00:00:00 +0000 UTC"),
            ("Jan _2", "Feb  3", "0000-02-03 00:00:00 +0000 UTC"),
            (
                "2006.01.02 15:04:05.999",
                "2020.01.02 10:11:12",
                "2020-01-02 10:11:12 +0000 UTC",
            ),
        ] {
            assert_eq!(time(layout, text).to_string(), want, "{layout}");
        }
        for (layout, text, want) in [
            (
                "2006-01-02",
                "bogus",
                r#"parsing time "bogus" as "2006-01-02": cannot parse "bogus" as "2006""#,
            ),
            (
                "2006-01-02 15:04:05",
                "2020-02-03 25:00:00",
                r#"parsing time "2020-02-03 25:00:00": hour out of range"#,
            ),
            (
                "2006-01-02",
                "2020-02-30",
                r#"parsing time "2020-02-30": day out of range"#,
            ),
            (
                "2006-01-02",
                "2020-02-03x",
                r#"parsing time "2020-02-03x": extra text: "x""#,
            ),
        ] {
            assert_eq!(
                run(must_to_date, &[s(layout), s(text)]),
                format!("ERR {want}")
            );
        }
        assert_eq!(
            run(to_date, &[s("2006-01-02"), s("bogus")]),
            "0001-01-01 00:00:00 +0000 UTC"
        );
        let t = time("2006-01-02", "2020-02-03");
        assert_eq!(t.type_name(), "time.Time");
        assert_eq!(t.to_json(), serde_json::json!("2020-02-03T00:00:00Z"));
        assert_eq!(run(unix_epoch, std::slice::from_ref(&t)), "1580688000");
        assert_eq!(run(date, &[s("2006-01-02"), t.clone()]), "2020-02-03");
        let Value::Object(o) = &t else { panic!() };
        assert_eq!(
            o.method("Unix", &[]).unwrap().unwrap().to_string(),
            "1580688000"
        );
        assert_eq!(
            o.method("Format", &[s("Jan 2")])
                .unwrap()
                .unwrap()
                .to_string(),
            "Feb 3"
        );
    }

    #[test]
    fn modifies_and_measures() {
        let t = time("2006-01-02", "2020-02-03");
        for (spec, want) in [
            ("1h30m", "2020-02-03 01:30:00 +0000 UTC"),
            ("bogus", "2020-02-03 00:00:00 +0000 UTC"),
            ("-1.5h", "2020-02-02 22:30:00 +0000 UTC"),
            ("1d", "2020-02-03 00:00:00 +0000 UTC"),
        ] {
            assert_eq!(run(date_modify, &[s(spec), t.clone()]), want);
        }
        assert_eq!(
            run(must_date_modify, &[s("+300ms"), t.clone()]),
            "2020-02-03 00:00:00.3 +0000 UTC"
        );
        assert_eq!(
            run(must_date_modify, &[s("bogus"), t.clone()]),
            r#"ERR time: invalid duration "bogus""#
        );
        let n = Value::Int64;
        for (arg, want) in [
            (Value::Int(3661), "0s"),
            (s("90"), "1m30s"),
            (Value::Float(0.5), "0s"),
            (s("x"), "0s"),
            (n(3661), "1h1m1s"),
            (s("-90"), "-1m30s"),
            (s("1e3"), "0s"),
        ] {
            assert_eq!(run(duration, &[arg]), want);
        }
        for (arg, want) in [
            (s("2h10m5s"), "2h"),
            (Value::Int(3661), "0s"),
            (s("400h"), "16d"),
            (s("9000h"), "1y"),
            (s("1.5s"), "1s"),
            (s("x"), "0s"),
            (s("-3h"), "3h"),
            (n(3_600_000_000_001), "1h"),
            (s("1h"), "60m"),
            (s("61s"), "1m"),
            (t.clone(), "4y"),
        ] {
            assert_eq!(run(duration_round, &[arg]), want);
        }
        // The fixed clock is 2024-05-06T07:08:09.123456789Z.
        assert_eq!(run(ago, &[Value::Int(0)]), "476383h8m9s");
        assert_eq!(run(ago, &[t]), "37303h8m9s");
    }

    #[test]
    fn durations_print_as_go() {
        for (nanos, want) in [
            (0, "0s"),
            (1, "1ns"),
            (1_500, "1.5µs"),
            (2_000_000, "2ms"),
            (1_500_000_000, "1.5s"),
            (3_661_000_000_000, "1h1m1s"),
            (-90_000_000_000, "-1m30s"),
            (3_600_000_000_000, "1h0m0s"),
        ] {
            assert_eq!(duration_string(nanos), want);
        }
        assert_eq!(parse_duration("1h2m3.5s"), Ok(3_723_500_000_000));
        assert_eq!(
            parse_duration("1"),
            Err(r#"time: missing unit in duration "1""#.into())
        );
        assert_eq!(
            parse_duration("1d"),
            Err(r#"time: unknown unit "d" in duration "1d""#.into())
        );
    }

    #[test]
    fn now_is_the_fixed_clock() {
        let v = run(now, &[]);
        assert!(
            v.starts_with("2024-05-06 07:08:09.123456789 +0000 UTC m=+"),
            "{v}"
        );
    }

    /// Random layouts, times and zones with the answers Helm v4.2.3 gave.
    #[test]
    #[allow(clippy::too_many_lines)] // One table of Helm's answers.
    fn random_cases_match_helm() {
        let mut map = crate::template::FuncMap::new();
        register(&mut map);
        for (name, args, want) in [
            (
                "dateInZone",
                "[\"MonT02 .000000000.06:.000/03\", 1583067661, \"UTC\"]",
                "SunT01 .000000000.20:.000/01",
            ),
            (
                "dateInZone",
                "[\"5.-0700TZ07:00, -0700,000-\", 951782400, \"Local\"]",
                "0.+0000TZ, +0000,000-",
            ),
            ("dateInZone", "[\"JanT\", -630720000, \"\"]", "JanT"),
            (
                "dateInZone",
                "[\"-0700:.000 Monday2/Jan, Z0700\", 1700000000, \"Australia/Lord_Howe\"]",
                "+1100:.000 Wednesday15/Nov, +1100",
            ),
            (
                "dateInZone",
                "[\"2/-070000-074-Z07,\", -630720000, \"America/New_York\"]",
                "5/-050000-050--05,",
            ),
            (
                "dateInZone",
                "[\"5-07:00:Z0700 Z07:00 at\", 2000000000, \"\"]",
                "20+00:00:Z Z at",
            ),
            (
                "dateInZone",
                "[\".9 at -0700 2-\", 1583067661, \"UTC\"]",
                " at +0000 1-",
            ),
            ("dateInZone", "[\"_2 at\", 0, \"Asia/Kolkata\"]", " 1 at"),
            (
                "dateInZone",
                "[\"2-04,\", 1700000000, \"Australia/Lord_Howe\"]",
                "15-13,",
            ),
            (
                "dateInZone",
                "[\"_2\", 951782400, \"America/New_York\"]",
                "28",
            ),
            (
                "dateInZone",
                "[\"200601/\", 1700000000, \"Bogus/Zone\"]",
                "202311/",
            ),
            (
                "dateInZone",
                "[\".000 Z0700:01 at\", -630720000, \"Europe/Berlin\"]",
                ".000 +0100:01 at",
            ),
            (
                "dateInZone",
                "[\"-07Monday.04T\", -630720000, \"Asia/Kolkata\"]",
                "+05Friday.30T",
            ),
            (
                "dateInZone",
                "[\".999.9 -07:00-2006:5\", 4102444800, \"Asia/Kolkata\"]",
                " +05:30-2100:0",
            ),
            (
                "dateInZone",
                "[\"Monday, Z07:00 3TPM/03.1T\", 4102444800, \"Local\"]",
                "Friday, Z 12TAM/12.1T",
            ),
            (
                "dateInZone",
                "[\"Z07:00:0001 at Z0702 at .000T.000000000/\", 2000000000, \"Australia/Lord_Howe\"]",
                "+10:30:0005 at +1018 at .000T.000000000/",
            ),
            (
                "dateInZone",
                "[\".9-MST.Jan.MondayTZ0700.\", -630720000, \"Bogus/Zone\"]",
                "-UTC.Jan.FridayTZ.",
            ),
            (
                "dateInZone",
                "[\"PM at MonZ07MST:\", 2000000000, \"Local\"]",
                "AM at WedZUTC:",
            ),
            (
                "dateInZone",
                "[\"Z07:00-002.Z07:00:00 at .000\", 1234567890, \"Asia/Kolkata\"]",
                "+05:30-045.+05:30:00 at .000",
            ),
            (
                "dateInZone",
                "[\".000000000 January\", 1234567890, \"\"]",
                ".000000000 February",
            ),
            (
                "dateInZone",
                "[\"002 05, -07:00-,000\", 1700000000, \"Bogus/Zone\"]",
                "318 20, +00:00-,000",
            ),
            (
                "dateInZone",
                "[\"02/Z07:00:0005\", 2000000000, \"Asia/Kolkata\"]",
                "18/+05:30:0020",
            ),
            (
                "dateInZone",
                "[\"04/\", 1234567890, \"Australia/Lord_Howe\"]",
                "31/",
            ),
            (
                "dateInZone",
                "[\"-07:.000000000.January __2,\", -630720000, \"Local\"]",
                "+00:.000000000.January   6,",
            ),
            (
                "dateInZone",
                "[\".000T__203.04.002,\", 4102444800, \"UTC\"]",
                ".000T  112.00.001,",
            ),
            (
                "mustToDate",
                "[\"1:1 at 2pm/\", \"2:2 at 28pm/\"]",
                "0000-02-28 12:00:00 +0000 UTC",
            ),
            (
                "mustToDate",
                "[\"3, Z07:00:00 at JanT\", \"8, -05:00:00 at MarT\"]",
                "0000-03-01 08:00:00 -0500 -0500",
            ),
            (
                "mustToDate",
                "[\"-070000.-0700--0700.PMTMon-\", \"-050000.-0500--0500.PMTFri-\"]",
                "0000-01-01 12:00:00 -0500 -0500",
            ),
            (
                "mustToDate",
                "[\".000000000.9T\", \".000000000T\"]",
                "0000-01-01 00:00:00 +0000 UTC",
            ),
            (
                "mustToDate",
                "[\"_2 at\", \"31 at\"]",
                "0000-01-31 00:00:00 +0000 UTC",
            ),
            (
                "mustToDate",
                "[\"Z07:00:00.\", \"-05:00:00.\"]",
                "0000-01-01 00:00:00 -0500 -0500",
            ),
            (
                "mustToDate",
                "[\"pmT,000T.000000000:\", \"pmT,000T.000000000:\"]",
                "0000-01-01 12:00:00 +0000 UTC",
            ),
            (
                "mustToDate",
                "[\"-07T__2.05Z07:00:00 15 01\", \"-04T137.20-04:00:00 23 05\"]",
                "0000-05-16 23:00:20 -0400 -0400",
            ),
            (
                "mustToDate",
                "[\"January/Mon/Z070005Z07:00/\", \"February/Mon/-050000-05:00/\"]",
                "0000-02-01 00:00:00 -0500 -0500",
            ),
            (
                "mustToDate",
                "[\"1-Z07:00:00pm, 06, .000000000, pm:\", \"2--05:00:00pm, 00, .000000000, pm:\"]",
                "2000-02-01 12:00:00 -0500 -0500",
            ),
            (
                "mustToDate",
                "[\"Z07:00 at 2T\", \"-05:00 at 28T\"]",
                "0000-01-28 00:00:00 -0500 -0500",
            ),
            (
                "mustToDate",
                "[\",000--0700/.999/\", \",000--0500//\"]",
                "0000-01-01 00:00:00 -0500 -0500",
            ),
            (
                "mustToDate",
                "[\"-070000 3-\", \"-050000 7-\"]",
                "0000-01-01 07:00:00 -0500 -0500",
            ),
            (
                "mustToDate",
                "[\"02T.000 at Z07:00:00:4, Z07/.000:\", \"28T.000 at -05:00:00:0, -05/.000:\"]",
                "0000-01-28 00:00:00 -0500 -0500",
            ),
            (
                "mustToDate",
                "[\"Z07:00,000 at 2--07-5-0700 at\", \"-05:00,000 at 14--05-20-0500 at\"]",
                "0000-01-14 00:00:20 -0500 -0500",
            ),
            (
                "mustToDate",
                "[\"1,000, 3, PM at .9 at\", \"2,000, 6, PM at  at\"]",
                "ERR parsing time \"2,000, 6, PM at  at\" as \"1,000, 3, PM at .9 at\": cannot parse \"at\" as \" at\"",
            ),
            (
                "mustToDate",
                "[\"03/__2 at 002-0700, -07T_2\", \"05/318 at 318-0500, -05T14\"]",
                "ERR parsing time \"05/318 at 318-0500, -05T14\": day-of-year does not match day",
            ),
            (
                "mustToDate",
                "[\"15Mon--070000:MSTMonday\", \"18Fri--050000:ESTFriday\"]",
                "ERR parsing time \"18Fri--050000:ESTFriday\" as \"15Mon--070000:MSTMonday\": cannot parse \"ESTFriday\" as \"MST\"",
            ),
            (
                "mustToDate",
                "[\"05TJanuary.Monday506.\", \"00TDecember.Wednesday069.\"]",
                "ERR parsing time \"00TDecember.Wednesday069.\" as \"05TJanuary.Monday506.\": cannot parse \"9.\" as \"06\"",
            ),
            (
                "mustToDate",
                "[\"02.Z07, 5, 02-MSTT\", \"13.-05, 30, 13-ESTT\"]",
                "ERR parsing time \"13.-05, 30, 13-ESTT\" as \"02.Z07, 5, 02-MSTT\": cannot parse \"\" as \"T\"",
            ),
            (
                "mustToDate",
                "[\".9._2/2006 at -0700:04 at\", \".17/2033 at -0400:33 at\"]",
                "ERR parsing time \".17/2033 at -0400:33 at\" as \".9._2/2006 at -0700:04 at\": cannot parse \"/2033 at -0400:33 at\" as \".\"",
            ),
            (
                "mustToDate",
                "[\"06.999.01:-07:00\", \"09.02:-05:00\"]",
                "ERR parsing time \"09.02:-05:00\" as \"06.999.01:-07:00\": cannot parse \":-05:00\" as \".\"",
            ),
            (
                "mustToDate",
                "[\"-070000, Monday:MST-002.000/_2T\", \"-040000, Tuesday:EDT-137.000/17T\"]",
                "ERR parsing time \"-040000, Tuesday:EDT-137.000/17T\": day-of-year does not match day",
            ),
            (
                "mustToDate",
                "[\"02MSTJanuary:.999-.000 at\", \"31ESTDecember:-.000 at\"]",
                "ERR parsing time \"31ESTDecember:-.000 at\" as \"02MSTJanuary:.999-.000 at\": cannot parse \"ESTDecember:-.000 at\" as \"MST\"",
            ),
            (
                "mustToDate",
                "[\"5._2:.9 at 15\", \"0.28: at 19\"]",
                "ERR parsing time \"0.28: at 19\" as \"5._2:.9 at 15\": cannot parse \": at 19\" as \".\"",
            ),
        ] {
            let args: Vec<serde_json::Value> = serde_json::from_str(args).unwrap();
            let values: Vec<Value> = args
                .iter()
                .map(|a| match a.as_i64() {
                    Some(n) => Value::Int(n),
                    None => Value::from_json(a),
                })
                .collect();
            assert_eq!(run(map[name], &values), want, "{name} {args:?}");
        }
    }

    /// Random duration texts with the answers Helm v4.2.3 gave (`mustDateModify` applies them
    /// to 2020-02-03).
    #[test]
    #[allow(clippy::too_many_lines)] // One table of Helm's answers.
    fn random_durations_match_helm() {
        let mut map = crate::template::FuncMap::new();
        register(&mut map);
        let base = time("2006-01-02", "2020-02-03");
        for (name, arg, want) in [
            ("durationRound", "-0h15ns1.5h", "1h"),
            (
                "mustDateModify",
                "0µs3.ms",
                "2020-02-03 00:00:00.003 +0000 UTC",
            ),
            (
                "mustDateModify",
                "+1d",
                "ERR time: unknown unit \"d\" in duration \"+1d\"",
            ),
            ("durationRound", "+99999999x99999999s", "0s"),
            (
                "mustDateModify",
                "+.5d",
                "ERR time: unknown unit \"d\" in duration \"+.5d\"",
            ),
            ("duration", "99999999999", "2157299h53m50.45224192s"),
            (
                "mustDateModify",
                "-3.d1µs",
                "ERR time: unknown unit \"d\" in duration \"-3.d1\\xc2\\xb5s\"",
            ),
            (
                "mustDateModify",
                "+2ms.5h3.",
                "ERR time: missing unit in duration \"+2ms.5h3.\"",
            ),
            ("durationRound", "2s", "2s"),
            ("duration", "-90", "-1m30s"),
            ("durationRound", "+3.us", "0s"),
            (
                "mustDateModify",
                "2",
                "ERR time: missing unit in duration \"2\"",
            ),
            (
                "mustDateModify",
                "-3.15h3.m",
                "2020-02-02 20:48:00 +0000 UTC",
            ),
            (
                "mustDateModify",
                ".5s.5x",
                "ERR time: unknown unit \"x\" in duration \".5s.5x\"",
            ),
            ("mustDateModify", "-3.m", "2020-02-02 23:57:00 +0000 UTC"),
            ("durationRound", "+.5ns15h0s", "15h"),
            (
                "mustDateModify",
                "-0ns3.d",
                "ERR time: unknown unit \"d\" in duration \"-0ns3.d\"",
            ),
            (
                "mustDateModify",
                "-99999999m",
                "1829-12-16 13:21:00 +0000 UTC",
            ),
            ("mustDateModify", "-.50h", "2020-02-02 23:30:00 +0000 UTC"),
            (
                "mustDateModify",
                ".5h99999999ms",
                "2020-02-04 04:16:39.999 +0000 UTC",
            ),
            (
                "mustDateModify",
                "15h3.d",
                "ERR time: unknown unit \"d\" in duration \"15h3.d\"",
            ),
            (
                "mustDateModify",
                "-3.x",
                "ERR time: unknown unit \"x\" in duration \"-3.x\"",
            ),
            ("durationRound", "+0µs", "0s"),
            (
                "mustDateModify",
                "1.5us0µs",
                "2020-02-03 00:00:00.0000015 +0000 UTC",
            ),
            (
                "mustDateModify",
                "1.5µs1h0ns",
                "2020-02-03 01:00:00.0000015 +0000 UTC",
            ),
            (
                "mustDateModify",
                "-.5h1x",
                "ERR time: unknown unit \"x\" in duration \"-.5h1x\"",
            ),
            ("durationRound", "+99999999ns15m0m", "15m"),
            (
                "mustDateModify",
                "2ms.5s.5ns",
                "2020-02-03 00:00:00.502 +0000 UTC",
            ),
            (
                "mustDateModify",
                "-0µs99999999ns",
                "2020-02-02 23:59:59.900000001 +0000 UTC",
            ),
            ("durationRound", "-3.m", "3m"),
            ("durationRound", "1m0ns.5", "0s"),
            ("duration", "86400", "24h0m0s"),
            (
                "mustDateModify",
                "-99999999ms1d0us",
                "ERR time: unknown unit \"d\" in duration \"-99999999ms1d0us\"",
            ),
            ("durationRound", ".51.5d", "0s"),
            ("durationRound", "+2s2m1.5", "0s"),
            ("durationRound", "-99999999us0h15m", "16m"),
            (
                "mustDateModify",
                ".5d",
                "ERR time: unknown unit \"d\" in duration \".5d\"",
            ),
            ("durationRound", "15ns", "0s"),
            ("durationRound", "-1.5h", "1h"),
            (
                "mustDateModify",
                "-1x",
                "ERR time: unknown unit \"x\" in duration \"-1x\"",
            ),
            ("durationRound", ".5h99999999ms", "1d"),
            (
                "mustDateModify",
                "+1.5ms1",
                "ERR time: missing unit in duration \"+1.5ms1\"",
            ),
            ("duration", "1", "1s"),
            ("duration", "59", "59s"),
            ("durationRound", "-99999999ms0x15x", "0s"),
            (
                "mustDateModify",
                "-3.d1µs",
                "ERR time: unknown unit \"d\" in duration \"-3.d1\\xc2\\xb5s\"",
            ),
        ] {
            let mut args = vec![s(arg)];
            if name == "mustDateModify" {
                args.push(base.clone());
            }
            assert_eq!(run(map[name], &args), want, "{name} {arg:?}");
        }
    }

    #[test]
    fn odd_input_never_panics() {
        use crate::funcs::crypto::random_texts;
        let layouts = random_texts(
            "2006-01-02T15:04:05.999Z07:00 MST PM pm Jan _2 __2 002 ,.é☺",
            2000,
            16,
        );
        let values = random_texts("0123456789 -+:.,TZ APMESTJanuary é☺", 2000, 16);
        let utc = TimeZone::UTC;
        for (layout, value) in layouts.iter().zip(&values) {
            let _ = parse(layout, value, &utc);
            let t = Time::new(Timestamp::UNIX_EPOCH, Zone::Tz(TimeZone::UTC));
            let _ = format(&t, layout);
            let _ = parse_duration(value);
        }
    }
}
