//! A fast hasher for the small maps of the request path (pending requests by opaque, peers by
//! address, the client's maps by topic or broker name) and the broker store's tables keyed by
//! topic names (validated, and few).
//!
//! SipHash, the standard library's default, resists keys chosen to collide; these maps are keyed
//! by this process's own request counter or by names from the application and the name server,
//! and hold a handful of entries, so a multiply-rotate hash in the manner of rustc's `FxHasher`
//! does: a few instructions a word instead of ~180 a short key. Do not use it for maps whose keys
//! a remote peer chooses freely.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// Builds [`FastHasher`]s (a [`BuildHasher`] for `HashMap::default()`).
#[derive(Debug, Clone, Copy, Default)]
pub struct FastHash;

/// A `HashMap` hashed with [`FastHash`].
pub type FastHashMap<K, V> = HashMap<K, V, FastHash>;

impl BuildHasher for FastHash {
    type Hasher = FastHasher;
    fn build_hasher(&self) -> FastHasher {
        FastHasher(0)
    }
}

/// The hasher of [`FastHash`]: each word is folded in with a rotation, an xor and a
/// multiplication by an odd constant; the result is a folded full-width product.
#[derive(Debug, Clone, Copy, Default)]
pub struct FastHasher(u64);

const SEED: u64 = 0xf135_7aea_2e62_a9c5;
const FOLD: u64 = 0x9e37_79b9_7f4a_7c15;

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn finish(&self) -> u64 {
        // The multiplications mix upwards only: a full-width product folded in half gives every
        // bit of the state a say in the low bits, where hashbrown takes the bucket index (and
        // in the top 7 bits, its tag).
        let r = u128::from(self.0) * u128::from(FOLD);
        (r as u64) ^ ((r >> 64) as u64)
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        // The remainder as at most one 4-, one 2- and one 1-byte word: fixed-size reads the
        // compiler inlines (a copy of `rest.len()` bytes into a word is a `memcpy` call).
        let mut rest = chunks.remainder();
        if let Some((w, tail)) = rest.split_first_chunk::<4>() {
            self.add(u64::from(u32::from_le_bytes(*w)));
            rest = tail;
        }
        if let Some((w, tail)) = rest.split_first_chunk::<2>() {
            self.add(u64::from(u16::from_le_bytes(*w)));
            rest = tail;
        }
        if let Some(&b) = rest.first() {
            self.add(u64::from(b));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_i32(&mut self, n: i32) {
        self.add(u64::from(n as u32));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_i64(&mut self, n: i64) {
        self.add(n as u64);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn consecutive_opaques_spread_over_buckets_and_tags() {
        let h = FastHash;
        let hashes: Vec<u64> = (1000..2024).map(|o: i32| h.hash_one(o)).collect();
        // 1024 random keys in 1024 buckets fill ~63 %; these fill at least that.
        let buckets: HashSet<u64> = hashes.iter().map(|x| x & 1023).collect();
        assert!(buckets.len() > 600, "{}", buckets.len());
        let small: HashSet<u64> = hashes[..64].iter().map(|x| x & 127).collect();
        assert!(small.len() > 40, "{}", small.len());
        let tags: HashSet<u64> = hashes.iter().map(|x| x >> 57).collect();
        assert!(tags.len() > 100, "{}", tags.len());
        assert_ne!(h.hash_one(-1i32), h.hash_one(i32::MAX));
    }

    #[test]
    fn strings_differing_anywhere_hash_apart() {
        let h = FastHash;
        let base = "127.0.0.1:10911-broker-a%TopicTest";
        let mut seen = HashSet::new();
        assert!(seen.insert(h.hash_one(base)));
        for i in 0..base.len() {
            let mut b = base.as_bytes().to_vec();
            b[i] ^= 1;
            assert!(
                seen.insert(h.hash_one(String::from_utf8(b).unwrap())),
                "{i}"
            );
        }
        // Lengths that leave a partial word, and a prefix, hash apart.
        for n in 0..base.len() {
            assert!(seen.insert(h.hash_one(&base[..n])), "{n}");
        }
        // Topic names numbered as applications number them spread over buckets.
        let buckets: HashSet<u64> = (0..256)
            .map(|i| h.hash_one(format!("Topic{i}")) & 255)
            .collect();
        assert!(buckets.len() > 140, "{}", buckets.len());
    }

    #[test]
    fn every_byte_of_every_length_changes_the_hash() {
        for len in 1..=24 {
            let base: Vec<u8> = (0..len as u8).map(|i| b'a' + i).collect();
            let hash = |bytes: &[u8]| {
                let mut h = FastHasher::default();
                h.write(bytes);
                h.finish()
            };
            let h = hash(&base);
            for at in 0..len {
                let mut other = base.clone();
                other[at] ^= 0x01;
                assert_ne!(hash(&other), h, "length {len}, byte {at}");
            }
        }
    }

    #[test]
    fn works_as_a_map() {
        let mut m: FastHashMap<i32, i32> = FastHashMap::default();
        for o in -500..500 {
            m.insert(o, o * 2);
        }
        assert!((-500..500).all(|o| m.remove(&o) == Some(o * 2)));
        assert!(m.is_empty());
        let mut s: FastHashMap<String, usize> = FastHashMap::default();
        for i in 0..300 {
            s.insert(format!("broker-{i}"), i);
        }
        assert!((0..300).all(|i| s.get(format!("broker-{i}").as_str()) == Some(&i)));
    }
}
