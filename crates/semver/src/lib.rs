//! Version constraints in the syntax Flux and Helm use (Masterminds `semver` v3).
//!
//! The `semver` crate only reads Cargo's syntax; Flux's `spec.ref.semver` accepts forms such as
//! `>=1.2.0 <2.0.0`, `^1.2 || ^2.0`, `~1.2.3`, `1.2.x` and `1.2 - 1.4`. [`Constraint`] parses
//! those and matches [`semver::Version`]s with the same rules:
//!
//! - `||` separates alternatives; inside one, comparators separated by spaces or commas must all
//!   hold.
//! - Missing or wildcard (`x`, `X`, `*`) components widen the comparator: `1.2` and `1.2.x` mean
//!   `>=1.2.0 <1.3.0`, `<=1.2` means `<1.3.0`, `>1.2` means `>=1.3.0`.
//! - `~1.2.3` is `>=1.2.3 <1.3.0`; `^1.2.3` is `>=1.2.3 <2.0.0`, `^0.2.3` is `>=0.2.3 <0.3.0`,
//!   `^0.0.3` is `>=0.0.3 <0.0.4`.
//! - `a - b` is `>=a <=b`.
//! - Pre-releases only match an alternative that mentions a pre-release itself.
//! - Build metadata never takes part in comparisons.

use std::cmp::Ordering;
use std::fmt;

use semver::{BuildMetadata, Prerelease, Version};

/// A parse failure of a constraint, naming the offending text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid semver constraint {constraint:?}: {reason}")]
pub struct ConstraintError {
    /// The whole constraint string.
    pub constraint: String,
    /// What is wrong with it.
    #[source]
    pub reason: ConstraintReason,
}

/// What is wrong with a constraint (the reason of a [`ConstraintError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConstraintReason {
    /// An alternative between `||` holds no comparator.
    #[error("empty alternative")]
    EmptyAlternative,
    /// Two operators in a row (`>= <1`).
    #[error("operator {0:?} follows another operator")]
    OperatorFollowsOperator(String),
    /// An operator ends the alternative.
    #[error("operator {0:?} without a version")]
    OperatorWithoutVersion(String),
    /// `a -` with nothing after.
    #[error("range {0:?} - has no upper bound")]
    RangeWithoutUpperBound(String),
    /// `- b` with nothing before.
    #[error("range without a lower bound")]
    RangeWithoutLowerBound,
    /// `>=a - b`: a range's bounds are versions.
    #[error("range {low:?} - {high:?} cannot have operators")]
    RangeWithOperators {
        /// The lower bound as written.
        low: String,
        /// The upper bound as written.
        high: String,
    },
    /// An operator Masterminds does not know.
    #[error("unknown operator {0:?}")]
    UnknownOperator(String),
    /// A comparator's version does not read as one.
    #[error("invalid version {version:?}")]
    InvalidVersion {
        /// The version as written.
        version: String,
        /// The number that does not fit, when that is why.
        #[source]
        source: Option<std::num::ParseIntError>,
    },
}

/// A parsed version constraint; see the [module docs](self) for the syntax.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    original: String,
    alternatives: Vec<Alternative>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Alternative {
    comparators: Vec<Comparator>,
    allows_prerelease: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Exact,
    NotEqual,
    Greater,
    Less,
    GreaterEqual,
    LessEqual,
    Tilde,
    Caret,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Comparator {
    op: Op,
    version: Version,
    /// Some component was missing or a wildcard.
    wildcard: bool,
    /// The minor (and so the patch) component was missing or a wildcard.
    minor_wildcard: bool,
    /// Only the patch component was missing or a wildcard.
    patch_wildcard: bool,
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.original)
    }
}

impl std::str::FromStr for Constraint {
    type Err = ConstraintError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl Constraint {
    /// Parses a constraint such as `>=1.2.0 <2.0.0 || ^3`.
    pub fn parse(text: &str) -> Result<Self, ConstraintError> {
        let error = |reason: ConstraintReason| ConstraintError {
            constraint: text.to_owned(),
            reason,
        };
        let mut alternatives = Vec::new();
        for part in text.split("||") {
            let comparators = parse_alternative(part).map_err(error)?;
            let allows_prerelease = comparators.iter().any(|c| !c.version.pre.is_empty());
            alternatives.push(Alternative {
                comparators,
                allows_prerelease,
            });
        }
        Ok(Self {
            original: text.to_owned(),
            alternatives,
        })
    }

    /// Whether `version` satisfies the constraint.
    pub fn matches(&self, version: &Version) -> bool {
        self.alternatives.iter().any(|alternative| {
            (version.pre.is_empty() || alternative.allows_prerelease)
                && alternative.comparators.iter().all(|c| c.matches(version))
        })
    }
}

/// Reads a version as Masterminds' lenient parser does: an optional `v`, one to three numeric
/// components (missing ones are zero), then optional `-prerelease` and `+build`.
///
/// Returns `None` for anything else, e.g. a tag that is not a version.
pub fn parse_version(text: &str) -> Option<Version> {
    let body = text.strip_prefix('v').unwrap_or(text);
    let (core, build) = match body.split_once('+') {
        Some((core, build)) => (core, Some(build)),
        None => (body, None),
    };
    let (core, pre) = match core.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (core, None),
    };
    let mut numbers = [0_u64; 3];
    let parts: Vec<&str> = core.split('.').collect();
    if parts.is_empty() || parts.len() > 3 {
        return None;
    }
    for (slot, part) in numbers.iter_mut().zip(&parts) {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *slot = part.parse().ok()?;
    }
    let mut version = Version::new(numbers[0], numbers[1], numbers[2]);
    if let Some(pre) = pre {
        version.pre = Prerelease::new(pre).ok().filter(|p| !p.is_empty())?;
    }
    if let Some(build) = build {
        version.build = BuildMetadata::new(build).ok().filter(|b| !b.is_empty())?;
    }
    Some(version)
}

/// Compares as semver precedence does: build metadata is ignored.
fn compare(a: &Version, b: &Version) -> Ordering {
    (a.major, a.minor, a.patch)
        .cmp(&(b.major, b.minor, b.patch))
        .then_with(|| a.pre.cmp(&b.pre))
}

fn parse_alternative(text: &str) -> Result<Vec<Comparator>, ConstraintReason> {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    if words.is_empty() {
        return Err(ConstraintReason::EmptyAlternative);
    }
    // Join operators written apart from their version (`>= 1.2`).
    let mut terms: Vec<String> = Vec::new();
    let mut pending_op: Option<&str> = None;
    for word in words {
        if word != "-" && word.chars().all(|c| "=!<>~^".contains(c)) {
            if pending_op.is_some() {
                return Err(ConstraintReason::OperatorFollowsOperator(word.to_owned()));
            }
            pending_op = Some(word);
        } else {
            terms.push(format!("{}{word}", pending_op.take().unwrap_or("")));
        }
    }
    if let Some(op) = pending_op {
        return Err(ConstraintReason::OperatorWithoutVersion(op.to_owned()));
    }
    let mut comparators = Vec::new();
    let mut index = 0;
    while index < terms.len() {
        if terms.get(index + 1).is_some_and(|t| t == "-") {
            let low = &terms[index];
            let high = terms
                .get(index + 2)
                .ok_or_else(|| ConstraintReason::RangeWithoutUpperBound(low.clone()))?;
            if has_operator(low) || has_operator(high) {
                return Err(ConstraintReason::RangeWithOperators {
                    low: low.clone(),
                    high: high.clone(),
                });
            }
            comparators.push(parse_comparator(&format!(">={low}"))?);
            comparators.push(parse_comparator(&format!("<={high}"))?);
            index += 3;
        } else if terms[index] == "-" {
            return Err(ConstraintReason::RangeWithoutLowerBound);
        } else {
            comparators.push(parse_comparator(&terms[index])?);
            index += 1;
        }
    }
    Ok(comparators)
}

fn has_operator(term: &str) -> bool {
    term.starts_with(|c: char| "=!<>~^".contains(c))
}

fn parse_comparator(term: &str) -> Result<Comparator, ConstraintReason> {
    let split = term
        .find(|c: char| !"=!<>~^".contains(c))
        .unwrap_or(term.len());
    let (op_text, version_text) = term.split_at(split);
    let op = match op_text {
        "" | "=" => Op::Exact,
        "!=" => Op::NotEqual,
        ">" => Op::Greater,
        "<" => Op::Less,
        ">=" | "=>" => Op::GreaterEqual,
        "<=" | "=<" => Op::LessEqual,
        "~" | "~>" => Op::Tilde,
        "^" => Op::Caret,
        other => return Err(ConstraintReason::UnknownOperator(other.to_owned())),
    };
    let invalid = || ConstraintReason::InvalidVersion {
        version: version_text.to_owned(),
        source: None,
    };
    let body = version_text.strip_prefix('v').unwrap_or(version_text);
    let core_end = body.find(['-', '+']).unwrap_or(body.len());
    let (core, suffix) = body.split_at(core_end);
    let parts: Vec<&str> = core.split('.').collect();
    if core.is_empty() || parts.len() > 3 {
        return Err(invalid());
    }
    let is_wild = |p: &str| matches!(p, "x" | "X" | "*");
    let mut numbers = [0_u64; 3];
    let mut first_wild = None;
    for (position, part) in parts.iter().enumerate() {
        if is_wild(part) {
            first_wild.get_or_insert(position);
        } else if first_wild.is_some() {
            // `1.x.3`: Masterminds ignores what follows a wildcard; so do we.
        } else if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
            numbers[position] =
                part.parse()
                    .map_err(|source| ConstraintReason::InvalidVersion {
                        version: version_text.to_owned(),
                        source: Some(source),
                    })?;
        } else {
            return Err(invalid());
        }
    }
    let first_wild = first_wild.unwrap_or(parts.len());
    let (wildcard, minor_wildcard, patch_wildcard) = match first_wild {
        0 => {
            numbers = [0; 3];
            (true, false, false)
        }
        1 => (true, true, false),
        2 => (true, false, true),
        _ => (false, false, false),
    };
    let mut version = Version::new(numbers[0], numbers[1], numbers[2]);
    let (pre, build) = match suffix.split_once('+') {
        Some((pre, build)) => (pre, build),
        None => (suffix, ""),
    };
    if let Some(pre) = pre.strip_prefix('-') {
        version.pre = Prerelease::new(pre)
            .ok()
            .filter(|p| !p.is_empty())
            .ok_or_else(invalid)?;
    } else if !pre.is_empty() {
        return Err(invalid());
    }
    if suffix.contains('+') {
        version.build = BuildMetadata::new(build)
            .ok()
            .filter(|b| !b.is_empty())
            .ok_or_else(invalid)?;
    }
    Ok(Comparator {
        op,
        version,
        wildcard,
        minor_wildcard,
        patch_wildcard,
    })
}

impl Comparator {
    fn matches(&self, v: &Version) -> bool {
        let c = &self.version;
        match self.op {
            Op::Exact if self.wildcard => self.tilde(v),
            Op::Exact => compare(v, c).is_eq(),
            Op::NotEqual => self.not_equal(v),
            Op::Greater => self.greater(v),
            Op::Less => compare(v, c).is_lt(),
            Op::GreaterEqual => compare(v, c).is_ge(),
            Op::LessEqual => self.less_equal(v),
            Op::Tilde => self.tilde(v),
            Op::Caret => self.caret(v),
        }
    }

    fn not_equal(&self, v: &Version) -> bool {
        let c = &self.version;
        if self.wildcard {
            if c.major != v.major {
                return true;
            }
            if self.minor_wildcard {
                return false;
            }
            if c.minor != v.minor {
                return true;
            }
            if self.patch_wildcard {
                return !(v.pre.is_empty() && c.pre.is_empty()) && v.pre != c.pre;
            }
        }
        !compare(v, c).is_eq()
    }

    fn greater(&self, v: &Version) -> bool {
        let c = &self.version;
        if !self.wildcard {
            return compare(v, c).is_gt();
        }
        match v.major.cmp(&c.major) {
            Ordering::Greater => true,
            Ordering::Less => false,
            Ordering::Equal if self.minor_wildcard => false,
            Ordering::Equal if self.patch_wildcard => v.minor > c.minor,
            Ordering::Equal => compare(v, c).is_gt(),
        }
    }

    fn less_equal(&self, v: &Version) -> bool {
        let c = &self.version;
        if !self.wildcard {
            return compare(v, c).is_le();
        }
        if v.major > c.major {
            return false;
        }
        !(v.major == c.major && v.minor > c.minor && !self.minor_wildcard)
    }

    fn tilde(&self, v: &Version) -> bool {
        let c = &self.version;
        if compare(v, c).is_lt() {
            return false;
        }
        if c.major == 0
            && c.minor == 0
            && c.patch == 0
            && !self.minor_wildcard
            && !self.patch_wildcard
        {
            return true;
        }
        v.major == c.major && (v.minor == c.minor || self.minor_wildcard)
    }

    fn caret(&self, v: &Version) -> bool {
        let c = &self.version;
        if compare(v, c).is_lt() {
            return false;
        }
        if c.major > 0 || self.minor_wildcard {
            return v.major == c.major;
        }
        if v.major > 0 {
            return false;
        }
        if c.minor > 0 || self.patch_wildcard {
            return v.minor == c.minor;
        }
        v.minor == 0 && v.patch == c.patch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error and its causes, joined as the source crate's logs print them.
    fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            let text = cause.to_string();
            if !message.contains(&text) {
                message.push_str(": ");
                message.push_str(&text);
            }
            source = cause.source();
        }
        message
    }

    #[track_caller]
    fn check(constraint: &str, version: &str, expected: bool) {
        let parsed = Constraint::parse(constraint).unwrap();
        let version = parse_version(version).unwrap();
        assert_eq!(
            parsed.matches(&version),
            expected,
            "{constraint:?} against {version}"
        );
    }

    #[test]
    fn matches_like_masterminds() {
        let table: &[(&str, &str, bool)] = &[
            // Exact and partial.
            ("1.2.3", "1.2.3", true),
            ("=1.2.3", "1.2.4", false),
            ("1.2", "1.2.9", true),
            ("1.2", "1.3.0", false),
            ("1.2.x", "1.2.0", true),
            ("1.2.x", "1.3.0", false),
            ("1", "1.9.9", true),
            ("1", "2.0.0", false),
            ("*", "9.9.9", true),
            ("x", "0.0.1", true),
            // Plain comparisons, separated by spaces or commas.
            (">=1.2.0 <2.0.0", "1.2.0", true),
            (">=1.2.0 <2.0.0", "1.9.9", true),
            (">=1.2.0 <2.0.0", "2.0.0", false),
            (">=1.2.0, <2.0.0", "1.1.9", false),
            (">= 1.2.0 < 2.0.0", "1.5.0", true),
            (">1.2.3", "1.2.3", false),
            (">1.2.3", "1.2.4", true),
            (">1.2", "1.2.9", false),
            (">1.2", "1.3.0", true),
            (">1", "1.9.0", false),
            (">1", "2.0.0", true),
            ("<1.2.3", "1.2.2", true),
            ("<1.2.3", "1.2.3", false),
            ("<=1.2.3", "1.2.3", true),
            ("<=1.2", "1.2.9", true),
            ("<=1.2", "1.3.0", false),
            ("<=1.x", "1.9.0", true),
            ("<=1.x", "2.0.0", false),
            ("!=1.2.3", "1.2.3", false),
            ("!=1.2.3", "1.2.4", true),
            ("!=1.2.x", "1.2.7", false),
            ("!=1.2.x", "1.3.0", true),
            ("!=1.x", "1.3.0", false),
            ("!=1.x", "2.0.0", true),
            // Tilde.
            ("~1.2.3", "1.2.3", true),
            ("~1.2.3", "1.2.9", true),
            ("~1.2.3", "1.3.0", false),
            ("~1.2.3", "1.2.2", false),
            ("~1.2", "1.2.0", true),
            ("~1", "1.9.0", true),
            ("~1", "2.0.0", false),
            ("~>1.2", "1.2.5", true),
            ("~0.0.0", "3.0.0", true),
            // Caret.
            ("^1.2.3", "1.2.3", true),
            ("^1.2.3", "1.9.0", true),
            ("^1.2.3", "2.0.0", false),
            ("^1.2.3", "1.2.2", false),
            ("^1.2", "1.2.0", true),
            ("^1.2", "1.1.0", false),
            ("^0.2.3", "0.2.9", true),
            ("^0.2.3", "0.3.0", false),
            ("^0.0.3", "0.0.3", true),
            ("^0.0.3", "0.0.4", false),
            ("^0.0", "0.0.9", true),
            ("^0.0", "0.1.0", false),
            ("^0", "0.9.0", true),
            ("^0", "1.0.0", false),
            // Ranges and alternatives.
            ("1.2 - 1.4", "1.2.0", true),
            ("1.2 - 1.4", "1.4.9", true),
            ("1.2 - 1.4", "1.5.0", false),
            ("1.2 - 1.4", "1.1.9", false),
            ("1.2.3 - 1.4.5", "1.4.6", false),
            ("^1.2 || ^2.0", "2.5.0", true),
            ("^1.2 || ^2.0", "3.0.0", false),
            ("<1.0.0 || >=3.0.0", "2.0.0", false),
            ("<1.0.0 || >=3.0.0", "3.1.0", true),
            // Pre-releases only match when the alternative asks for one.
            (">=1.0.0", "1.1.0-rc.1", false),
            (">=1.0.0-0", "1.1.0-rc.1", true),
            ("1.2.3-beta.1", "1.2.3-beta.1", true),
            (">=1.2.3-alpha <1.2.3", "1.2.3-beta", true),
            ("^1.0.0 || >=2.0.0-0", "1.5.0-rc.1", false),
            ("^1.0.0 || >=1.0.0-0", "1.5.0-rc.1", true),
            // Build metadata is ignored; `v` prefixes are accepted on both sides.
            ("1.2.3", "1.2.3+build.5", true),
            ("v1.2.3", "v1.2.3", true),
            (">=1.0.0", "v2", true),
        ];
        for (constraint, version, expected) in table {
            check(constraint, version, *expected);
        }
    }

    #[test]
    fn rejects_malformed_constraints() {
        for bad in [
            "",
            "abc",
            ">=",
            "1.2.3.4",
            ">>1.0",
            "1.2 -",
            "- 1.2",
            ">=1.0 - 2.0",
            "1.0 ||",
            "1.0-",
            "1.a.0",
        ] {
            let error = Constraint::parse(bad).unwrap_err();
            assert_eq!(error.constraint, bad);
            assert!(
                error.to_string().starts_with("invalid semver constraint"),
                "{error}"
            );
        }
        let overflow = Constraint::parse(">=1.99999999999999999999").unwrap_err();
        assert_eq!(
            error_chain(&overflow),
            "invalid semver constraint \">=1.99999999999999999999\": invalid version \"1.99999999999999999999\": number too large to fit in target type"
        );
    }

    #[test]
    fn parses_versions_leniently() {
        assert_eq!(parse_version("v1.2.3"), Some(Version::new(1, 2, 3)));
        assert_eq!(parse_version("1.2"), Some(Version::new(1, 2, 0)));
        assert_eq!(parse_version("7"), Some(Version::new(7, 0, 0)));
        assert_eq!(
            parse_version("1.0.0-rc.1+abc").map(|v| v.to_string()),
            Some("1.0.0-rc.1+abc".to_owned())
        );
        for bad in [
            "",
            "latest",
            "v",
            "1.2.3.4",
            "1..2",
            "1.2.3-",
            "release-1.0",
            "1.x",
        ] {
            assert_eq!(parse_version(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn displays_the_original_text() {
        let constraint: Constraint = ">= 1.2, < 2".parse().unwrap();
        assert_eq!(constraint.to_string(), ">= 1.2, < 2");
    }
}
