//! The object index of a bucket and its digest, as Flux's source-controller computes it.

use std::collections::BTreeMap;

use crate::digest::Digest;

/// Object key → entity tag of every object that goes into a Bucket artifact.
///
/// Keys are the full object keys (including `spec.prefix`); values are the provider's entity
/// tags in Flux's spelling (S3: the ETag without quotes; Azure: the hex encoding of the ETag
/// string's bytes).
pub type ObjectIndex = BTreeMap<String, String>;

/// The Flux revision of an index: `sha256:<hex>` over the lines `<key> <etag>\n`, keys sorted
/// by byte order, exactly as Flux's `index.Digester.Digest(sha256)`.
///
/// An empty bucket yields the digest of the empty string.
pub fn index_digest(index: &ObjectIndex) -> String {
    let mut text = String::new();
    for (key, etag) in index {
        text.push_str(key);
        text.push(' ');
        text.push_str(etag);
        text.push('\n');
    }
    Digest::of(text.as_bytes()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(pairs: &[(&str, &str)]) -> ObjectIndex {
        pairs
            .iter()
            .map(|(key, etag)| ((*key).to_owned(), (*etag).to_owned()))
            .collect()
    }

    #[test]
    fn digest_is_sha256_of_sorted_lines() {
        // Flux's digest_test: {"foo": "bar", "bar": "baz"} renders as "bar baz\nfoo bar\n".
        let index = index(&[("foo", "bar"), ("bar", "baz")]);
        assert_eq!(
            index_digest(&index),
            Digest::of(b"bar baz\nfoo bar\n").to_string()
        );
    }

    #[test]
    fn digest_of_known_index_matches_sha256sum() {
        // `printf 'bar baz\nfoo bar\n' | sha256sum`
        let index = index(&[("foo", "bar"), ("bar", "baz")]);
        assert_eq!(
            index_digest(&index),
            "sha256:5da7dfe37b54ea1d5ebffb643d67b09d888635b2fe031763fbb856ea5290fda0"
        );
    }

    #[test]
    fn empty_index_digests_the_empty_string() {
        assert_eq!(
            index_digest(&ObjectIndex::new()),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn any_change_changes_the_digest() {
        let base = index_digest(&index(&[("a/b.yaml", "1"), ("c.yaml", "2")]));
        assert_ne!(
            base,
            index_digest(&index(&[("a/b.yaml", "1"), ("c.yaml", "3")]))
        );
        assert_ne!(base, index_digest(&index(&[("a/b.yaml", "1")])));
        assert_ne!(
            base,
            index_digest(&index(&[("a/b.yaml", "1"), ("d.yaml", "2")]))
        );
    }
}
