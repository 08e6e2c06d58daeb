//! `sha256:<hex>` digests, and readers/writers that compute them on the way.

use std::fmt;
use std::io::{self, Read, Write};
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

use crate::error::{Error, Result};

/// A SHA-256 content digest, written `sha256:<64 lower-case hex digits>` as in Flux's
/// `status.artifact.digest` and in OCI descriptors.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; 32]);

impl Digest {
    /// The algorithm prefix, without the colon.
    pub const ALGORITHM: &'static str = "sha256";

    /// The digest of `data`.
    pub fn of(data: &[u8]) -> Self {
        Self(Sha256::digest(data).into())
    }

    /// The 64 lower-case hex digits, without the algorithm prefix.
    pub fn hex(&self) -> String {
        use fmt::Write as _;
        self.0
            .iter()
            .fold(String::with_capacity(64), |mut out, byte| {
                let _ = write!(out, "{byte:02x}");
                out
            })
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", Self::ALGORITHM, self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Digest {
    type Err = Error;

    fn from_str(value: &str) -> Result<Self> {
        let invalid = |reason| Error::InvalidDigest {
            value: value.to_owned(),
            reason,
        };
        let (algorithm, hex) = value
            .split_once(':')
            .ok_or_else(|| invalid("expected <algorithm>:<hex>"))?;
        if algorithm != Self::ALGORITHM {
            return Err(invalid("only sha256 is supported"));
        }
        if hex.len() != 64 {
            return Err(invalid("expected 64 hex digits"));
        }
        let mut bytes = [0u8; 32];
        for (slot, pair) in bytes.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
            let high =
                hex_value(pair[0]).ok_or_else(|| invalid("expected lower-case hex digits"))?;
            let low =
                hex_value(pair[1]).ok_or_else(|| invalid("expected lower-case hex digits"))?;
            *slot = high << 4 | low;
        }
        Ok(Self(bytes))
    }
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        value.parse().map_err(serde::de::Error::custom)
    }
}

/// A writer that hashes and counts everything written through it.
#[derive(Debug)]
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    written: u64,
}

impl<W> HashingWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
            written: 0,
        }
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The inner writer, the digest and the byte count.
    pub fn finish(self) -> (W, Digest, u64) {
        (
            self.inner,
            Digest(self.hasher.finalize().into()),
            self.written,
        )
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The digest and size of everything `reader` yields.
pub fn digest_reader(mut reader: impl Read) -> io::Result<(Digest, u64)> {
    let mut writer = HashingWriter::new(io::sink());
    io::copy(&mut reader, &mut writer)?;
    let (_, digest, size) = writer.finish();
    Ok((digest, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input_has_the_well_known_digest() {
        assert_eq!(
            Digest::of(b"").to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn parse_round_trips() {
        let digest = Digest::of(b"hello");
        assert_eq!(digest.to_string().parse::<Digest>().unwrap(), digest);
    }

    #[test]
    fn parse_rejects_bad_input() {
        for bad in [
            "",
            "sha256",
            "sha512:00",
            "sha256:abc",
            &format!("sha256:{}", "G".repeat(64)),
        ] {
            let error = bad.parse::<Digest>().unwrap_err();
            assert!(
                error.to_string().starts_with("invalid digest"),
                "{bad}: {error}"
            );
        }
        assert!(
            format!("sha256:{}", "A".repeat(64))
                .parse::<Digest>()
                .is_err(),
            "upper case is refused"
        );
    }

    #[test]
    fn hashing_writer_matches_one_shot_digest() {
        let mut writer = HashingWriter::new(Vec::new());
        writer.write_all(b"hel").unwrap();
        writer.write_all(b"lo").unwrap();
        let (inner, digest, size) = writer.finish();
        assert_eq!(inner, b"hello");
        assert_eq!(digest, Digest::of(b"hello"));
        assert_eq!(size, 5);
        assert_eq!(
            digest_reader(&b"hello"[..]).unwrap(),
            (Digest::of(b"hello"), 5)
        );
    }
}
