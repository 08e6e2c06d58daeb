//! Flux revision strings.
//!
//! Flux reports what it fetched as `<name>@<algorithm>:<hex>` (for example
//! `main@sha1:2f1b…` for a Git branch, `v1.2.0@sha256:9c8e…` for an OCI tag), as a bare digest
//! (`sha1:2f1b…` for a pinned commit, `sha256:9c8e…` for a Bucket or an OCI digest), or as a
//! plain name (a Helm chart version such as `6.5.4`). [`Revision`] parses and prints all three.

use std::fmt;
use std::str::FromStr;

use crate::error::RevisionError;

/// A content digest in OCI form: `<algorithm>:<encoded>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Digest {
    algorithm: String,
    encoded: String,
}

impl Digest {
    /// Parses `<algorithm>:<encoded>`, checking the hex length of `sha1`, `sha256`, `sha384`
    /// and `sha512` digests and the OCI grammar for any other algorithm.
    pub fn parse(input: &str) -> Result<Self, RevisionError> {
        let Some((algorithm, encoded)) = input.split_once(':') else {
            return Err(RevisionError::InvalidDigest {
                input: input.to_owned(),
                algorithm: String::new(),
                encoded: input.to_owned(),
            });
        };
        parse_digest(input, algorithm, encoded)
    }

    /// The algorithm, e.g. `sha256`.
    pub fn algorithm(&self) -> &str {
        &self.algorithm
    }

    /// The encoded (hex) part.
    pub fn encoded(&self) -> &str {
        &self.encoded
    }

    /// The first `len` characters of the encoded part (all of it if shorter).
    pub fn short(&self, len: usize) -> &str {
        let end = self
            .encoded
            .char_indices()
            .nth(len)
            .map_or(self.encoded.len(), |(i, _)| i);
        &self.encoded[..end]
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.algorithm, self.encoded)
    }
}

/// A parsed Flux revision: a name (branch, tag, chart version), a digest, or both.
///
/// ```
/// use capstan_api::Revision;
///
/// let rev: Revision = "main@sha1:0123456789abcdef0123456789abcdef01234567".parse().unwrap();
/// assert_eq!(rev.name(), Some("main"));
/// assert_eq!(rev.digest().unwrap().algorithm(), "sha1");
/// assert_eq!(rev.to_string(), "main@sha1:0123456789abcdef0123456789abcdef01234567");
///
/// let chart: Revision = "6.5.4".parse().unwrap();
/// assert_eq!(chart.name(), Some("6.5.4"));
/// assert!(chart.digest().is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Revision {
    name: Option<String>,
    digest: Option<Digest>,
}

impl Revision {
    /// Parses a revision string; see the module docs for the accepted forms.
    ///
    /// The name is split off at the last `@`, so names that themselves contain `@` survive.
    /// A string without `@` is a bare digest when it has the form `<algorithm>:<encoded>`,
    /// and a plain name otherwise.
    pub fn parse(input: &str) -> Result<Self, RevisionError> {
        if input.is_empty() {
            return Err(RevisionError::Empty);
        }
        if let Some((name, digest)) = input.rsplit_once('@')
            && let Some((algorithm, encoded)) = digest.split_once(':')
        {
            if name.is_empty() {
                return Err(RevisionError::EmptyName(input.to_owned()));
            }
            return Ok(Self {
                name: Some(name.to_owned()),
                digest: Some(parse_digest(input, algorithm, encoded)?),
            });
        }
        if let Some((algorithm, encoded)) = input.split_once(':')
            && is_algorithm(algorithm)
        {
            return Ok(Self {
                name: None,
                digest: Some(parse_digest(input, algorithm, encoded)?),
            });
        }
        Ok(Self {
            name: Some(input.to_owned()),
            digest: None,
        })
    }

    /// A revision made of a name and a digest, as `<name>@<digest>`.
    pub fn new(name: impl Into<String>, digest: Digest) -> Self {
        Self {
            name: Some(name.into()),
            digest: Some(digest),
        }
    }

    /// The branch, tag or version part, if any.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The digest part, if any.
    pub fn digest(&self) -> Option<&Digest> {
        self.digest.as_ref()
    }

    /// The name when it is a Git branch reference (`refs/heads/x` → `x`), or the name as is.
    pub fn branch(&self) -> Option<&str> {
        self.name
            .as_deref()
            .map(|n| n.strip_prefix("refs/heads/").unwrap_or(n))
    }

    /// A short form for messages: the name plus the first 7 characters of the digest
    /// (`main@sha1:0123456`).
    pub fn short(&self) -> String {
        match (&self.name, &self.digest) {
            (Some(name), Some(d)) => format!("{name}@{}:{}", d.algorithm, d.short(7)),
            (None, Some(d)) => format!("{}:{}", d.algorithm, d.short(7)),
            (Some(name), None) => name.clone(),
            (None, None) => String::new(),
        }
    }

    /// Whether two revisions point at the same content: equal digests when both have one,
    /// equal names otherwise.
    pub fn same_content(&self, other: &Revision) -> bool {
        match (&self.digest, &other.digest) {
            (Some(a), Some(b)) => a == b,
            _ => self == other,
        }
    }
}

impl FromStr for Revision {
    type Err = RevisionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.name, &self.digest) {
            (Some(name), Some(digest)) => write!(f, "{name}@{digest}"),
            (Some(name), None) => f.write_str(name),
            (None, Some(digest)) => write!(f, "{digest}"),
            (None, None) => Ok(()),
        }
    }
}

/// OCI digest algorithm grammar: `[a-z0-9]+([+._-][a-z0-9]+)*`.
fn is_algorithm(algorithm: &str) -> bool {
    !algorithm.is_empty()
        && algorithm.split(['+', '.', '_', '-']).all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

fn parse_digest(input: &str, algorithm: &str, encoded: &str) -> Result<Digest, RevisionError> {
    if !is_algorithm(algorithm) {
        return Err(RevisionError::InvalidAlgorithm {
            input: input.to_owned(),
            algorithm: algorithm.to_owned(),
        });
    }
    let hex_len = match algorithm {
        "sha1" => Some(40),
        "sha256" | "blake3" => Some(64),
        "sha384" => Some(96),
        "sha512" => Some(128),
        _ => None,
    };
    let valid = match hex_len {
        Some(len) => {
            encoded.len() == len
                && encoded
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        }
        None => {
            !encoded.is_empty()
                && encoded
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'=' | b'_' | b'-'))
        }
    };
    if !valid {
        return Err(RevisionError::InvalidDigest {
            input: input.to_owned(),
            algorithm: algorithm.to_owned(),
            encoded: encoded.to_owned(),
        });
    }
    Ok(Digest {
        algorithm: algorithm.to_owned(),
        encoded: encoded.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA1: &str = "0123456789abcdef0123456789abcdef01234567";
    const SHA256: &str = "9c8e2c9a0d3b7f1e6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f";

    #[test]
    fn parses_branch_at_commit() {
        let rev = Revision::parse(&format!("main@sha1:{SHA1}")).unwrap();
        assert_eq!(rev.name(), Some("main"));
        assert_eq!(rev.digest().map(Digest::algorithm), Some("sha1"));
        assert_eq!(rev.digest().map(Digest::encoded), Some(SHA1));
        assert_eq!(rev.short(), "main@sha1:0123456");

        let rev = Revision::parse(&format!("refs/heads/feature/x@sha1:{SHA1}")).unwrap();
        assert_eq!(rev.branch(), Some("feature/x"));
    }

    #[test]
    fn parses_bare_digests() {
        let rev = Revision::parse(&format!("sha1:{SHA1}")).unwrap();
        assert_eq!(rev.name(), None);
        assert_eq!(rev.to_string(), format!("sha1:{SHA1}"));

        let rev = Revision::parse(&format!("sha256:{SHA256}")).unwrap();
        assert_eq!(rev.digest().unwrap().algorithm(), "sha256");
        assert_eq!(rev.short(), "sha256:9c8e2c9");
    }

    #[test]
    fn parses_oci_tag_at_digest() {
        let text = format!("v1@sha256:{SHA256}");
        let rev: Revision = text.parse().unwrap();
        assert_eq!(rev.name(), Some("v1"));
        assert_eq!(rev.to_string(), text);
        // A name that itself contains '@' is split at the last one.
        let rev = Revision::parse(&format!("user@host@sha256:{SHA256}")).unwrap();
        assert_eq!(rev.name(), Some("user@host"));
    }

    #[test]
    fn parses_plain_names() {
        for name in ["6.5.4", "1.0.0-rc.1+build.5", "main", "v2"] {
            let rev = Revision::parse(name).unwrap();
            assert_eq!(rev.name(), Some(name));
            assert!(rev.digest().is_none());
            assert_eq!(rev.to_string(), name);
        }
    }

    #[test]
    fn rejects_bad_digests() {
        assert_eq!(Revision::parse(""), Err(RevisionError::Empty));
        assert!(matches!(
            Revision::parse("main@sha1:abc"),
            Err(RevisionError::InvalidDigest { .. })
        ));
        assert!(matches!(
            Revision::parse(&format!("sha1:{}", SHA1.to_uppercase())),
            Err(RevisionError::InvalidDigest { .. })
        ));
        assert!(matches!(
            Revision::parse(&format!("sha256:{SHA1}")),
            Err(RevisionError::InvalidDigest { .. })
        ));
        assert!(matches!(
            Revision::parse("main@SHA1:abc"),
            Err(RevisionError::InvalidAlgorithm { .. })
        ));
        assert_eq!(
            Revision::parse(&format!("@sha1:{SHA1}")),
            Err(RevisionError::EmptyName(format!("@sha1:{SHA1}")))
        );
    }

    #[test]
    fn compares_content() {
        let a = Revision::parse(&format!("main@sha1:{SHA1}")).unwrap();
        let b = Revision::parse(&format!("sha1:{SHA1}")).unwrap();
        let c = Revision::parse("6.5.4").unwrap();
        assert!(a.same_content(&b));
        assert!(!a.same_content(&c));
        assert!(c.same_content(&Revision::parse("6.5.4").unwrap()));
    }

    #[test]
    fn digest_parse_requires_algorithm() {
        assert!(Digest::parse("nocolon").is_err());
        assert_eq!(
            Digest::parse(&format!("sha1:{SHA1}")).unwrap().short(4),
            "0123"
        );
        assert_eq!(Digest::parse("custom:AbC=").unwrap().encoded(), "AbC=");
    }
}
