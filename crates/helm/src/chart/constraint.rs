//! Masterminds semver versions and constraints (`>=1.2.0 <2.0.0`, `^1.2 || ~2.0`, `1.2 - 1.4`,
//! `1.x`), as Helm matches dependency versions against the charts in `charts/`.

use std::cmp::Ordering;

/// A loosely parsed version: `v1`, `1.2`, `1.2.3-rc.1+build`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    pre: String,
}

impl Version {
    pub(crate) fn parse(text: &str) -> Option<Version> {
        let text = text.trim();
        let text = text.strip_prefix('v').unwrap_or(text);
        let text = text.split_once('+').map_or(text, |(v, _)| v);
        let (core, pre) = text.split_once('-').unwrap_or((text, ""));
        let mut parts = core.split('.');
        let mut next = |required: bool| -> Option<u64> {
            match parts.next() {
                Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => p.parse().ok(),
                None if !required => Some(0),
                _ => None,
            }
        };
        let version = Version {
            major: next(true)?,
            minor: next(false)?,
            patch: next(false)?,
            pre: pre.to_string(),
        };
        if parts.next().is_some() {
            return None;
        }
        Some(version)
    }

    fn compare(&self, other: &Version) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| compare_pre(&self.pre, &other.pre))
    }
}

fn compare_pre(a: &str, b: &str) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    let mut left = a.split('.');
    let mut right = b.split('.');
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let order = match (x.parse::<u64>(), y.parse::<u64>()) {
                    (Ok(x), Ok(y)) => x.cmp(&y),
                    (Ok(_), Err(_)) => Ordering::Less,
                    (Err(_), Ok(_)) => Ordering::Greater,
                    _ => x.cmp(y),
                };
                if order != Ordering::Equal {
                    return order;
                }
            }
        }
    }
}

/// One comparison: an operator and a version with possibly wildcard parts.
#[derive(Debug, Clone)]
struct Term {
    op: String,
    version: Version,
    /// How many leading parts were given as numbers (1 for `1.x`, 3 for `1.2.3`).
    fixed: u8,
}

impl Term {
    fn parse(op: &str, text: &str) -> Option<Term> {
        let text = text.strip_prefix('v').unwrap_or(text);
        let text = text.split_once('+').map_or(text, |(v, _)| v);
        let (core, pre) = text.split_once('-').unwrap_or((text, ""));
        let mut numbers = [0_u64; 3];
        let mut fixed = 0_u8;
        let mut wild = false;
        let parts: Vec<&str> = core.split('.').collect();
        if parts.len() > 3 || parts.first().is_none_or(|p| p.is_empty()) {
            return None;
        }
        for (i, part) in parts.iter().enumerate() {
            if matches!(*part, "x" | "X" | "*") {
                wild = true;
                continue;
            }
            if wild || part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            numbers[i] = part.parse().ok()?;
            fixed += 1;
        }
        Some(Term {
            op: op.to_string(),
            version: Version {
                major: numbers[0],
                minor: numbers[1],
                patch: numbers[2],
                pre: pre.to_string(),
            },
            fixed,
        })
    }

    /// The first version past the wildcard range (`1.2.x` → `1.3.0`).
    fn ceiling(&self) -> Version {
        let v = &self.version;
        let (major, minor, patch) = match self.fixed {
            0 => (u64::MAX, 0, 0),
            1 => (v.major.saturating_add(1), 0, 0),
            2 => (v.major, v.minor.saturating_add(1), 0),
            _ => (v.major, v.minor, v.patch.saturating_add(1)),
        };
        Version {
            major,
            minor,
            patch,
            pre: String::new(),
        }
    }

    fn matches(&self, v: &Version) -> bool {
        // Pre-releases only satisfy constraints that mention one.
        if !v.pre.is_empty() && self.version.pre.is_empty() {
            return false;
        }
        let base = &self.version;
        let ge = v.compare(base) != Ordering::Less;
        match self.op.as_str() {
            "" | "=" => {
                if self.fixed == 3 {
                    v.compare(base) == Ordering::Equal
                } else {
                    ge && v.compare(&self.ceiling()) == Ordering::Less
                }
            }
            "!=" => {
                if self.fixed == 3 {
                    v.compare(base) != Ordering::Equal
                } else {
                    !(ge && v.compare(&self.ceiling()) == Ordering::Less)
                }
            }
            ">" => {
                if self.fixed == 3 {
                    v.compare(base) == Ordering::Greater
                } else {
                    v.compare(&self.ceiling()) != Ordering::Less
                }
            }
            ">=" | "=>" => ge,
            "<" => v.compare(base) == Ordering::Less,
            "<=" | "=<" => {
                if self.fixed == 3 {
                    v.compare(base) != Ordering::Greater
                } else {
                    v.compare(&self.ceiling()) == Ordering::Less
                }
            }
            "~" | "~>" => {
                let ceiling = if self.fixed <= 1 {
                    self.ceiling()
                } else {
                    Version {
                        major: base.major,
                        minor: base.minor.saturating_add(1),
                        patch: 0,
                        pre: String::new(),
                    }
                };
                ge && v.compare(&ceiling) == Ordering::Less
            }
            "^" => {
                let ceiling = if base.major > 0 || self.fixed <= 1 {
                    Version {
                        major: base.major.saturating_add(1),
                        minor: 0,
                        patch: 0,
                        pre: String::new(),
                    }
                } else if base.minor > 0 || self.fixed == 2 {
                    Version {
                        major: 0,
                        minor: base.minor.saturating_add(1),
                        patch: 0,
                        pre: String::new(),
                    }
                } else {
                    Version {
                        major: 0,
                        minor: 0,
                        patch: base.patch.saturating_add(1),
                        pre: String::new(),
                    }
                };
                ge && v.compare(&ceiling) == Ordering::Less
            }
            _ => false,
        }
    }
}

const OPERATORS: &[&str] = &["!=", ">=", "=>", "<=", "=<", "~>", "=", ">", "<", "~", "^"];

/// Parses one `||` alternative into terms joined by AND.
fn parse_group(text: &str) -> Option<Vec<Term>> {
    let tokens: Vec<&str> = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .collect();
    let mut terms = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        // A hyphen range: `1.2 - 1.4.5`.
        if tokens.get(i + 1) == Some(&"-") {
            let low = Term::parse(">=", tokens[i])?;
            let high = Term::parse("<=", tokens.get(i + 2)?)?;
            terms.push(low);
            terms.push(high);
            i += 3;
            continue;
        }
        let mut token = tokens[i];
        let mut op = OPERATORS.iter().find(|op| token.starts_with(**op)).copied();
        if let Some(found) = op {
            token = &token[found.len()..];
            if token.is_empty() {
                // The operator stands apart from its version: `>= 1.2`.
                i += 1;
                token = tokens.get(i)?;
            }
        }
        let op = op.take().unwrap_or("");
        terms.push(Term::parse(op, token)?);
        i += 1;
    }
    if terms.is_empty() {
        return None;
    }
    Some(terms)
}

/// Whether `version` satisfies `constraint`; `None` when either does not parse (Helm's
/// `IsCompatibleRange` then answers false).
pub(crate) fn satisfies(constraint: &str, version: &str) -> Option<bool> {
    let version = Version::parse(version)?;
    let mut any = false;
    for group in constraint.split("||") {
        let terms = parse_group(group)?;
        if terms.iter().all(|t| t.matches(&version)) {
            any = true;
        }
    }
    Some(any)
}

#[cfg(test)]
mod tests {
    use super::satisfies;

    #[test]
    fn constraints() {
        let cases = [
            ("1.2.3", "1.2.3", true),
            ("1.2.x", "1.2.9", true),
            ("1.2.x", "1.3.0", false),
            ("~1.2.0", "1.2.5", true),
            ("~1.2.0", "1.3.0", false),
            ("^1.2.0", "1.9.0", true),
            ("^1.2.0", "2.0.0", false),
            ("^0.2.3", "0.2.9", true),
            ("^0.2.3", "0.3.0", false),
            (">=1.2.0 <2.0.0", "1.5.0", true),
            (">=1.2.0, <2.0.0", "2.0.0", false),
            ("^1 || ^2", "2.3.0", true),
            ("1.2 - 1.4.5", "1.4.5", true),
            ("1.2 - 1.4.5", "1.4.6", false),
            (">= 1.20", "1.29.0", true),
            (">=1.0.0", "1.1.0-rc.1", false),
            ("*", "3.1.0", true),
            ("2.x.x", "2.31.4", true),
        ];
        for (constraint, version, want) in cases {
            assert_eq!(
                satisfies(constraint, version),
                Some(want),
                "{constraint} {version}"
            );
        }
        assert_eq!(satisfies("", "1.0.0"), None);
        assert_eq!(satisfies("nonsense", "1.0.0"), None);
    }
}
