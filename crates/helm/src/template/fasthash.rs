//! A fast hasher for the engine's string-keyed maps that are looked up on every name a template
//! mentions (names in a parse, functions resolved, templates by name, include counts): with the
//! standard SipHash those lookups were a few percent of a large chart's render.
//!
//! Words are mixed by a folded multiply (the high and low halves of a 128-bit product, xored)
//! with a per-process random multiplier, so the keys a chart chooses cannot be made to collide
//! on purpose without knowing it (a template of many colliding names would make its parse
//! quadratic).

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// A `HashMap` keyed through [`FastState`].
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, FastState>;

/// Builds [`FastHasher`]s with the process's random keys.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FastState {
    keys: [u64; 2],
}

impl Default for FastState {
    fn default() -> Self {
        static KEYS: OnceLock<[u64; 2]> = OnceLock::new();
        let keys = *KEYS.get_or_init(|| {
            let random = std::collections::hash_map::RandomState::new();
            // Odd multipliers keep every product bit dependent on the input.
            [
                random.hash_one(0x5eed_u64) | 1,
                random.hash_one(0xfeed_u64) | 1,
            ]
        });
        FastState { keys }
    }
}

impl BuildHasher for FastState {
    type Hasher = FastHasher;

    fn build_hasher(&self) -> FastHasher {
        FastHasher {
            state: self.keys[1],
            key: self.keys[0],
        }
    }
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub(crate) struct FastHasher {
    state: u64,
    key: u64,
}

fn folded_multiply(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

impl FastHasher {
    fn mix(&mut self, word: u64) {
        self.state = folded_multiply(self.state ^ word, self.key);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            // The length keeps "a" and "a\0" apart.
            self.mix(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.mix(u64::from(i) | 0x100);
    }

    fn write_u64(&mut self, i: u64) {
        self.mix(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64);
    }

    fn finish(&self) -> u64 {
        folded_multiply(self.state, self.key.rotate_left(32) | 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_hash_equal_and_near_keys_apart() {
        let state = FastState::default();
        assert_eq!(state.hash_one("include"), state.hash_one("include"));
        let names = [
            "",
            "a",
            "a\0",
            "ab",
            "ba",
            "abcdefgh",
            "abcdefghi",
            "abcdefgh\0",
        ];
        let hashes: std::collections::HashSet<u64> =
            names.iter().map(|n| state.hash_one(n)).collect();
        assert_eq!(hashes.len(), names.len());
        let mut map: FastMap<&str, usize> = FastMap::default();
        for (i, n) in names.iter().enumerate() {
            map.insert(n, i);
        }
        assert_eq!(map.get("abcdefghi"), Some(&6));
    }
}
