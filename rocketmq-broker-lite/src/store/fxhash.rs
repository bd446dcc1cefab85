//! A small, fast, non-cryptographic hasher (the Firefox/rustc "Fx" hash) for hot in-memory
//! tables keyed by topic names. Not for data an attacker controls the layout of at scale: topic
//! names are validated and few.

use std::hash::{BuildHasherDefault, Hasher};

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// The Fx hasher.
#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
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
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// `HashMap` with the Fx hasher.
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FxHasher>>;

#[cfg(test)]
mod tests {
    use super::FxHasher;
    use std::hash::Hasher;

    fn hash(bytes: &[u8]) -> u64 {
        let mut h = FxHasher::default();
        h.write(bytes);
        h.finish()
    }

    #[test]
    fn every_byte_of_every_length_changes_the_hash() {
        for len in 1..=24 {
            let base: Vec<u8> = (0..len as u8).map(|i| b'a' + i).collect();
            let h = hash(&base);
            for at in 0..len {
                let mut other = base.clone();
                other[at] ^= 0x01;
                assert_ne!(hash(&other), h, "length {len}, byte {at}");
            }
        }
    }
}
