//! Template functions: semver (`semver`, `semverCompare`), as Sprig builds them on Masterminds
//! semver v3.
//!
//! `semver` parses a version the lenient way Masterminds' `NewVersion` does (`v` prefix, missing
//! minor and patch) and returns a `*semver.Version` whose methods charts call (`.Major`,
//! `.Prerelease`, `.Compare`, `.IncMinor`, …). `semverCompare CONSTRAINT VERSION` checks a
//! version against a constraint with [`capstan_semver::Constraint`], reporting errors in
//! Masterminds' words.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

use capstan_semver::Constraint;

use super::crypto::{go_quote, str_arg, want_args};
use crate::template::{Call, FuncMap};
use crate::value::{Object, Value};

/// Adds this module's functions to `map`.
pub fn register(map: &mut FuncMap) {
    map.insert("semver", semver);
    map.insert("semverCompare", semver_compare);
}

fn semver(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let text = str_arg(&args[0])?;
    let version = Version::parse(text)?;
    Ok(Value::Object(Rc::new(version)))
}

fn semver_compare(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let constraint = str_arg(&args[0])?;
    let version = str_arg(&args[1])?;
    let constraint = cached_constraint(constraint)?;
    let version = Version::parse(version)?;
    Ok(Value::Bool(constraint.matches(&version.to_semver())))
}

/// How many parsed constraints to keep: charts such as kube-prometheus-stack check the same
/// few dozen constraints hundreds of times per render.
const CONSTRAINT_CACHE_LIMIT: usize = 512;

thread_local! {
    static CONSTRAINTS: RefCell<HashMap<String, Result<Rc<Constraint>, String>>> =
        RefCell::new(HashMap::new());
}

fn cached_constraint(text: &str) -> Result<Rc<Constraint>, String> {
    if let Some(hit) = CONSTRAINTS.with(|cache| cache.borrow().get(text).cloned()) {
        return hit;
    }
    let parsed = parse_constraint(text).map(Rc::new);
    CONSTRAINTS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() >= CONSTRAINT_CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(text.to_owned(), parsed.clone());
    });
    parsed
}

/// Parses a constraint, wording failures as Masterminds' `NewConstraint` does: hyphen ranges
/// are rewritten first, then each `||` alternative must have Masterminds' shape (else
/// "improper constraint: <alternative>") and read as comparators (else "constraint parser
/// error").
pub fn parse_constraint(text: &str) -> Result<Constraint, String> {
    let rewritten = rewrite_ranges(text);
    for segment in rewritten.split("||") {
        if !valid_alternative(segment) {
            return Err(format!("improper constraint: {}", go_quote(segment)));
        }
        if Constraint::parse(segment).is_err() {
            return Err("constraint parser error".to_owned());
        }
    }
    Constraint::parse(text).map_err(|_| "constraint parser error".to_owned())
}

/// Masterminds' shape of one alternative: comparators (an optional operator and a version whose
/// numbers may be wildcards) separated by spaces or commas. Its version pattern lets `|` stand
/// among the digits; such texts pass here and fail to parse after, as in Masterminds.
fn valid_alternative(segment: &str) -> bool {
    use std::sync::LazyLock;
    static VALID: LazyLock<regex::Regex> = LazyLock::new(|| {
        let space = r"[\t\n\f\r ]";
        let ops = r"=|!=|>|<|>=|=>|<=|=<|~|~>|\^|";
        let version = r"v?[0-9|xX*]+(?:\.[0-9|xX*]+)?(?:\.[0-9|xX*]+)?(?:-[0-9A-Za-z\-]+(?:\.[0-9A-Za-z\-]+)*)?(?:\+[0-9A-Za-z\-]+(?:\.[0-9A-Za-z\-]+)*)?";
        let comparator = format!("(?:{ops}){space}*{version}{space}*");
        regex::Regex::new(&format!(
            "^{space}*{comparator}(?:(?:{space}+|,{space}*){comparator})*$"
        ))
        .expect("the constraint pattern is valid")
    });
    VALID.is_match(segment)
}

fn leading_zero_prerelease(version: &str) -> bool {
    let Some((_, rest)) = version.split_once('-') else {
        return false;
    };
    let pre = rest.split('+').next().unwrap_or_default();
    pre.split('.')
        .any(|p| p.len() > 1 && p.starts_with('0') && p.bytes().all(|b| b.is_ascii_digit()))
}

fn rewrite_ranges(text: &str) -> String {
    use std::sync::LazyLock;
    static RANGE: LazyLock<regex::Regex> = LazyLock::new(|| {
        let version = r"v?[0-9xX*]+(?:\.[0-9xX*]+)?(?:\.[0-9xX*]+)?(?:-[0-9A-Za-z\-]+(?:\.[0-9A-Za-z\-]+)*)?(?:\+[0-9A-Za-z\-]+(?:\.[0-9A-Za-z\-]+)*)?";
        regex::Regex::new(&format!(r"\s*({version})\s+-\s+({version})\s*"))
            .expect("the range pattern is valid")
    });
    RANGE.replace_all(text, ">= ${1}, <= ${2} ").into_owned()
}

/// A version as Masterminds' `*semver.Version` holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    pre: String,
    metadata: String,
    original: String,
}

impl Version {
    /// Parses `text` as Masterminds' lenient `NewVersion`: an optional `v`, one to three
    /// numbers (leading zeros allowed), then optional `-pre.release` and `+build.metadata`.
    pub fn parse(text: &str) -> Result<Version, String> {
        const INVALID: &str = "invalid semantic version";
        let body = text.strip_prefix('v').unwrap_or(text);
        let (rest, metadata) = match body.split_once('+') {
            Some((rest, metadata)) => (rest, Some(metadata)),
            None => (body, None),
        };
        let (core, pre) = match rest.split_once('-') {
            Some((core, pre)) => (core, Some(pre)),
            None => (rest, None),
        };
        let parts: Vec<&str> = core.split('.').collect();
        if parts.len() > 3
            || parts
                .iter()
                .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(INVALID.into());
        }
        let identifiers_ok = |s: &str| {
            s.split('.').all(|id| {
                !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            })
        };
        if pre.is_some_and(|p| !identifiers_ok(p)) || metadata.is_some_and(|m| !identifiers_ok(m)) {
            return Err(INVALID.into());
        }
        let mut numbers = [0_u64; 3];
        for (slot, part) in numbers.iter_mut().zip(&parts) {
            *slot = part.parse().map_err(|_| {
                format!(
                    "error parsing version segment: strconv.ParseUint: parsing {}: value out of range",
                    go_quote(part)
                )
            })?;
        }
        let pre = pre.unwrap_or_default();
        if leading_zero_prerelease(&format!("0-{pre}")) {
            return Err("version segment starts with 0".into());
        }
        Ok(Version {
            major: numbers[0],
            minor: numbers[1],
            patch: numbers[2],
            pre: pre.to_owned(),
            metadata: metadata.unwrap_or_default().to_owned(),
            original: text.to_owned(),
        })
    }

    /// The version for [`Constraint::matches`] (build metadata plays no part there).
    fn to_semver(&self) -> semver::Version {
        let mut version = semver::Version::new(self.major, self.minor, self.patch);
        if !self.pre.is_empty() {
            // Identifiers were checked above; the semver crate agrees on what is valid.
            version.pre = semver::Prerelease::new(&self.pre).unwrap_or(semver::Prerelease::EMPTY);
        }
        version
    }

    /// Masterminds' `Compare`: numbers, then pre-releases (a release sorts after its
    /// pre-releases); metadata is ignored.
    pub fn compare(&self, other: &Version) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| compare_prerelease(&self.pre, &other.pre))
    }

    fn with_numbers(&self, major: u64, minor: u64, patch: u64) -> Version {
        let mut next = Version {
            major,
            minor,
            patch,
            pre: String::new(),
            metadata: String::new(),
            original: String::new(),
        };
        next.original = self.renamed(&next);
        next
    }

    /// The `Original` of a derived version: its text, keeping a `v` prefix the source had.
    fn renamed(&self, next: &Version) -> String {
        let prefix = if self.original.starts_with('v') {
            "v"
        } else {
            ""
        };
        format!("{prefix}{next}")
    }
}

fn compare_prerelease(a: &str, b: &str) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        (false, false) => {}
    }
    let mut left = a.split('.');
    let mut right = b.split('.');
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let numeric = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
                let order = match (numeric(x), numeric(y)) {
                    (true, true) => x.len().cmp(&y.len()).then_with(|| x.cmp(y)),
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    (false, false) => x.cmp(y),
                };
                if order != Ordering::Equal {
                    return order;
                }
            }
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        if !self.metadata.is_empty() {
            write!(f, "+{}", self.metadata)?;
        }
        Ok(())
    }
}

/// A Go `uint64` as templates see it; [`Value`] has no unsigned kind, so the (absurd) versions
/// beyond `i64::MAX` saturate.
fn uint64(n: u64) -> Value {
    Value::Int64(i64::try_from(n).unwrap_or(i64::MAX))
}

fn version_arg(name: &str, args: &[Value]) -> Result<Version, String> {
    match args {
        [Value::Object(o)] => o
            .as_any()
            .and_then(|a| a.downcast_ref::<Version>())
            .cloned()
            .ok_or_else(|| {
                format!(
                    "wrong type for value; expected *semver.Version; got {}",
                    o.type_name()
                )
            }),
        [other] => Err(format!(
            "wrong type for value; expected *semver.Version; got {}",
            other.type_name()
        )),
        _ => Err(format!(
            "wrong number of args for {name}: want 1 got {}",
            args.len()
        )),
    }
}

impl Object for Version {
    fn type_name(&self) -> String {
        "*semver.Version".into()
    }

    fn kind_name(&self) -> &'static str {
        "ptr"
    }

    fn field(&self, _name: &str) -> Option<Value> {
        // Masterminds' fields are unexported; charts reach everything through methods.
        None
    }

    fn method(&self, name: &str, args: &[Value]) -> Option<Result<Value, String>> {
        let niladic = |value: Value| {
            if args.is_empty() {
                Ok(value)
            } else {
                Err(format!(
                    "wrong number of args for {name}: want 0 got {}",
                    args.len()
                ))
            }
        };
        let object = |v: Version| Value::Object(Rc::new(v));
        let compare_with =
            |f: fn(Ordering) -> Value| version_arg(name, args).map(|other| f(self.compare(&other)));
        Some(match name {
            "Major" => niladic(uint64(self.major)),
            "Minor" => niladic(uint64(self.minor)),
            "Patch" => niladic(uint64(self.patch)),
            "Prerelease" => niladic(Value::str(&self.pre)),
            "Metadata" => niladic(Value::str(&self.metadata)),
            "Original" => niladic(Value::str(&self.original)),
            "String" => niladic(Value::str(self.to_string())),
            "IncMajor" => niladic(object(self.with_numbers(self.major + 1, 0, 0))),
            "IncMinor" => niladic(object(self.with_numbers(self.major, self.minor + 1, 0))),
            "IncPatch" => {
                // A pre-release or build is dropped first: 1.2.3-rc.1 → 1.2.3.
                let patch = if self.pre.is_empty() && self.metadata.is_empty() {
                    self.patch + 1
                } else {
                    self.patch
                };
                niladic(object(self.with_numbers(self.major, self.minor, patch)))
            }
            "SetPrerelease" | "SetMetadata" => match args {
                [Value::String(s)] => {
                    let mut next = self.clone();
                    let valid = s.is_empty()
                        || s.split('.').all(|id| {
                            !id.is_empty()
                                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                        });
                    if name == "SetPrerelease" {
                        if !valid {
                            return Some(Err("invalid prerelease string".into()));
                        }
                        next.pre = s.to_string();
                    } else {
                        if !valid {
                            return Some(Err("invalid metadata string".into()));
                        }
                        next.metadata = s.to_string();
                    }
                    next.original = self.renamed(&next);
                    Ok(object(next))
                }
                [other] => Err(format!(
                    "wrong type for value; expected string; got {}",
                    other.type_name()
                )),
                _ => Err(format!(
                    "wrong number of args for {name}: want 1 got {}",
                    args.len()
                )),
            },
            "Compare" => compare_with(|o| {
                Value::Int(match o {
                    Ordering::Less => -1,
                    Ordering::Equal => 0,
                    Ordering::Greater => 1,
                })
            }),
            "LessThan" => compare_with(|o| Value::Bool(o.is_lt())),
            "GreaterThan" => compare_with(|o| Value::Bool(o.is_gt())),
            "Equal" => compare_with(|o| Value::Bool(o.is_eq())),
            _ => return None,
        })
    }

    fn format(&self) -> String {
        self.to_string()
    }

    fn to_data(&self) -> Value {
        // Masterminds marshals a version to JSON as its string.
        Value::str(self.to_string())
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::funcs::crypto::test_call;

    fn compare(constraint: &str, version: &str) -> Result<Value, String> {
        test_call(
            semver_compare,
            &[Value::str(constraint), Value::str(version)],
        )
    }

    #[test]
    fn compares_as_helm_does() {
        // Answers of Helm v4.2.3 (Sprig v3, Masterminds semver v3).
        for (constraint, version, want) in [
            (">=1.2.3-alpha <1.2.3", "1.2.3-beta", true),
            (">=1.0.0", "1.1.0-rc.1", false),
            ("^1.2", "1.3.0-0", false),
            (">1.2.3-0", "1.3.0-0", true),
            (">= 1.2", "1.3.0", true),
            (">=1.2 <1.x", "1.3.0", false),
            (">=1.21-0", "v1.30.0-gke.1", true),
            ("1.2 - 1.4", "1.3.0", true),
            ("=>1.2", "1.3.0", true),
            (">=1.0.0", "01.0.0", true),
            (">=1.0.0", "1.0.0-0a", false),
            (">=1.0.0", "1.0.0+00", true),
            ("~1.x.3", "1.5.0", true),
            (" >= 1.2 , < 2 ", "1.5.0", true),
            (">=1.2||<1", "0.5.0", true),
            ("=1.2.3+build", "1.2.3", true),
            ("!=1.2.3-rc.1", "1.2.3-rc.2", true),
            ("*", "1.0.0-rc1", false),
            (">=0.0.0-0", "1.0.0-rc1", true),
            ("<=1.2.3", "1.2.3-rc1", false),
            ("1.2.3 1.2.4", "1.2.3", false),
            ("x.1.2", "3.0.0", true),
            (">x", "3.0.0", true),
            ("<=x", "3.0.0", false),
            ("1.2.3 - 2.x", "2.5.0", true),
        ] {
            let got = compare(constraint, version).unwrap();
            assert_eq!(got.to_string(), want.to_string(), "{constraint} {version}");
        }
    }

    #[test]
    fn errors_are_masterminds_words() {
        for (constraint, version, want) in [
            ("foo", "1.2.3", r#"improper constraint: "foo""#),
            (">=1", "x", "invalid semantic version"),
            ("", "1.3.0", r#"improper constraint: """#),
            ("1.2.3.4", "1.3.0", r#"improper constraint: "1.2.3.4""#),
            (
                ">=1.0 - 2.0",
                "1.0.0",
                r#"improper constraint: ">=>= 1.0, <= 2.0 ""#,
            ),
            ("1.0 || >>1", "1.0.0", r#"improper constraint: " >>1""#),
            (
                "1.2 - 1.3 >>1",
                "1.0.0",
                r#"improper constraint: ">= 1.2, <= 1.3 >>1""#,
            ),
            ("1.0 ||    ", "1.0.0", r#"improper constraint: "    ""#),
            ("- 1.0", "1.0.0", r#"improper constraint: "- 1.0""#),
            (
                ">=1.99999999999999999999",
                "1.0.0",
                "constraint parser error",
            ),
            (">=1.0.0-01", "1.0.0", "constraint parser error"),
            (
                ">=1.0.0",
                "1.99999999999999999999",
                r#"error parsing version segment: strconv.ParseUint: parsing "99999999999999999999": value out of range"#,
            ),
            (">=1.0.0", "1.0.0-", "invalid semantic version"),
            (">=1.0.0", "1.0.0+a..b", "invalid semantic version"),
            (">=1.0.0", "1.0.0-00", "version segment starts with 0"),
            (">=1.0.0", " 1.0.0", "invalid semantic version"),
            (">=1.0.0", "V1.0.0", "invalid semantic version"),
            (">=1.0.0", "1.0.0-a_b", "invalid semantic version"),
        ] {
            assert_eq!(
                compare(constraint, version).unwrap_err(),
                want,
                "{constraint} {version}"
            );
        }
    }

    fn method(version: &str, name: &str, args: &[Value]) -> String {
        let v = Version::parse(version).unwrap();
        v.method(name, args).unwrap().unwrap().to_string()
    }

    #[test]
    fn versions_have_masterminds_methods() {
        let v = test_call(semver, &[Value::str("v1.2.3-rc.1+b")]).unwrap();
        assert_eq!(v.type_name(), "*semver.Version");
        assert_eq!(v.kind_name(), "ptr");
        assert_eq!(v.to_string(), "1.2.3-rc.1+b");
        assert_eq!(method("v1.2.3-rc.1+b", "Original", &[]), "v1.2.3-rc.1+b");
        assert_eq!(method("1.2.3-rc.1+b", "Prerelease", &[]), "rc.1");
        assert_eq!(method("1.2.3-rc.1+b", "Metadata", &[]), "b");
        assert_eq!(method("1.2", "String", &[]), "1.2.0");
        assert_eq!(method("1.2.3-a", "IncPatch", &[]), "1.2.3");
        assert_eq!(method("1.2.3", "IncMinor", &[]), "1.3.0");
        assert_eq!(method("1.2.3", "IncMajor", &[]), "2.0.0");
        assert_eq!(
            method("1.2.3", "SetPrerelease", &[Value::str("x")]),
            "1.2.3-x"
        );
        let other = test_call(semver, &[Value::str("1.2.4")]).unwrap();
        assert_eq!(
            method("1.2.3", "Compare", std::slice::from_ref(&other)),
            "-1"
        );
        assert_eq!(
            method("1.2.3", "LessThan", std::slice::from_ref(&other)),
            "true"
        );
        assert_eq!(
            method("1.2.3", "GreaterThan", std::slice::from_ref(&other)),
            "false"
        );
        let build = test_call(semver, &[Value::str("1.2.3+x")]).unwrap();
        assert_eq!(method("1.2.3", "Equal", &[build]), "true");
        assert_eq!(v.to_json(), serde_json::json!("1.2.3-rc.1+b"));
        assert_eq!(
            test_call(semver, &[Value::str("1.2.3.4")]).unwrap_err(),
            "invalid semantic version"
        );
        assert_eq!(
            test_call(semver, &[Value::str("v1.2.3-01")]).unwrap_err(),
            "version segment starts with 0"
        );
    }

    /// Random constraints and versions, with the answers Helm v4.2.3 gave for them.
    #[test]
    fn random_cases_match_helm() {
        for (constraint, version, want) in [
            ("<0", "v1.1.0", "false"),
            ("~v0.0.1", "3.10.0", "false"),
            ("=0.10.*, =>v2.10.2", "0", "false"),
            ("<0 || >=1.X-beta.2", "3.0.0", "true"),
            ("~0", "0.0.0-0", "false"),
            (">3.10.10", "1.1.3-alpha", "false"),
            (">10.1.1-beta.2 >=2", "0.0-alpha+b1", "false"),
            ("~v0.3.3", "v1.2", "false"),
            ("!=0 || *", "0.1-alpha", "false"),
            ("=<0.3.1", "3.1.1", "false"),
            ("!=v10.1.x", "0.2.2", "true"),
            ("*", "2.2.3", "true"),
            (">=2.10, >0-rc.1", "1.1.10", "false"),
            ("=<1.*-rc.1,>=0.3.1", "0.2.0", "false"),
            ("0.1.*-beta.2", "0.1.3-1", "true"),
            ("=>3.1.3 || <1.2.10", "1", "true"),
            ("<=10.0.1", "1.3", "true"),
            ("=<0.10.1-alpha", "1.0.0-rc.1", "false"),
            (">=0.2.1", "1.1.1", "true"),
            ("!=2,!=1.1.0-1", "10.3.10", "true"),
            ("!=x", "0.2.1-1", "false"),
            ("~3.2.1, ^x.0", "1.10.3", "false"),
            ("=3.0.3", "0.10.2", "false"),
            ("~>x-beta.2", "1.1.1-rc.1", "true"),
            (">1.3", "10.0.1+b1", "true"),
            ("<=1.0.3-alpha", "0", "true"),
            ("10-beta.2 - *.3-1", "1.2.1", "false"),
            ("~>2.0.0 || >1.1", "3.1", "true"),
            ("=<v3.1.1-alpha", "1.0.1-alpha", "true"),
            ("~>vx.0.0 <0.x.1", "v0.1", "false"),
            ("* - 0.0.0", "2.0", "false"),
            ("<=0.2.0 || =<10.1.3", "v0.1", "true"),
            (">=3.0.1 || ^2", "0", "false"),
            ("X.1.1", "10.10.1-alpha", "false"),
            ("<3.3.1", "1", "true"),
            ("^0.0", "0.1", "false"),
            (">=3", "1.0", "false"),
            (">0", "0.0", "false"),
            ("~2", "10.1.1-1", "false"),
            ("<0.0.0-rc.1", "2.2.3", "false"),
            ("9x", "^.5++^51", "ERR constraint parser error"),
            (">|", "2.0.0-rc.1", "ERR constraint parser error"),
            ("=2x", "X", "ERR constraint parser error"),
            ("|99", "v1.5", "ERR constraint parser error"),
            ("4x6.x05", "0.1.0", "ERR constraint parser error"),
            ("xx 7", "=", "ERR constraint parser error"),
            ("*04", "1.2.3+b", "ERR constraint parser error"),
            (" |", "3-*27*0", "ERR constraint parser error"),
            ("5,", "1.2.3+b", "ERR improper constraint: \"5,\""),
            ("v*9", "0.1.0", "ERR constraint parser error"),
            ("23,", "v1.5", "ERR improper constraint: \"23,\""),
            ("x.", "2.0.0-rc.1", "ERR improper constraint: \"x.\""),
            ("68", "1.2.3+b", "false"),
            ("1", "1.2.3+b", "true"),
            ("12", "2.0.0-rc.1", "false"),
            ("1", "1.2.3", "true"),
            ("66", "0.1.0", "false"),
            ("0", "v1.5", "false"),
            ("82", "1.2.3+b", "false"),
            ("42", "1.2.3", "false"),
            ("*", "v1.5", "true"),
            ("2", "2.0.0-rc.1", "false"),
        ] {
            let got = match compare(constraint, version) {
                Ok(v) => v.to_string(),
                Err(e) => format!("ERR {e}"),
            };
            assert_eq!(got, want, "{constraint:?} {version:?}");
        }
    }

    #[test]
    fn prereleases_order_as_masterminds() {
        let order = [
            "1.0.0-1",
            "1.0.0-2",
            "1.0.0-10",
            "1.0.0-a",
            "1.0.0-a.1",
            "1.0.0",
        ];
        for pair in order.windows(2) {
            let a = Version::parse(pair[0]).unwrap();
            let b = Version::parse(pair[1]).unwrap();
            assert_eq!(a.compare(&b), Ordering::Less, "{pair:?}");
        }
    }

    #[test]
    fn odd_input_never_panics() {
        for text in crate::funcs::crypto::random_texts("0123456789.xX*-+v<>=!~^|, abé", 3000, 14) {
            let _ = compare(&text, "1.2.3");
            let _ = compare(">=1", &text);
        }
    }
}
