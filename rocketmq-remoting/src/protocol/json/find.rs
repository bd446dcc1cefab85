//! Finding the bytes a JSON string's reader or writer must stop at, eight bytes at a time.
//!
//! Headers are mostly runs of plain ASCII (topics, groups, the properties between their
//! separators); looking at each byte in turn was most of the cost of reading and writing one.
//! Each eight-byte word is tested at once with the classic "has a zero byte" arithmetic: for
//! `v = x ^ repeated(c)`, `(v - 0x01..01) & !v & 0x80..80` is non-zero exactly when a byte of
//! `x` equals `c`, and its lowest set bit marks the first such byte (borrows only reach the
//! bytes above a match). The same form with `x` itself finds bytes below a bound.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The bytes of `x` below `n` (`n` ≤ 0x80), as high bits; the lowest one is exact.
const fn below(x: u64, n: u8) -> u64 {
    x.wrapping_sub(ONES * n as u64) & !x & HIGHS
}

/// The bytes of `x` equal to `c`, as high bits; the lowest one is exact.
const fn equal(x: u64, c: u8) -> u64 {
    below(x ^ (ONES * c as u64), 1)
}

/// The first index at or after `from` whose byte satisfies `exact`, using `word` to skip
/// eight-byte words that hold none (`word` may report bytes `exact` refuses: they are
/// checked one by one).
#[inline]
fn find_by(
    b: &[u8],
    from: usize,
    word: impl Fn(u64) -> u64,
    exact: impl Fn(u8) -> bool,
) -> Option<usize> {
    let mut i = from;
    while let Some(chunk) = b.get(i..i + 8) {
        let x = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        let hits = word(x);
        if hits != 0 {
            let at = i + (hits.trailing_zeros() / 8) as usize;
            if exact(b[at]) {
                return Some(at);
            }
            i = at + 1;
        } else {
            i += 8;
        }
    }
    b.get(i..)?.iter().position(|&c| exact(c)).map(|p| i + p)
}

/// The first `"`, `\` or control character (below 0x20) at or after `from`: where a JSON
/// string's plain run ends.
#[inline]
pub(crate) fn string_stop(b: &[u8], from: usize) -> Option<usize> {
    find_by(
        b,
        from,
        |x| equal(x, b'"') | equal(x, b'\\') | below(x, 0x20),
        |c| c == b'"' || c == b'\\' || c < 0x20,
    )
}

/// The first byte at or after `from` that fastjson's escaper must look at: a control
/// character, `"`, `\`, or a byte from 0x7F up (DEL, and the lead byte of U+0080..U+009F among
/// them; `special` decides). `b.len()` when there is none.
pub(crate) fn fastjson_stop(b: &[u8], from: usize, special: impl Fn(u8) -> bool) -> usize {
    find_by(
        b,
        from,
        // Bytes from 0x7F up: 0x7F + 1 carries into the high bit, as every byte from 0x80 has.
        |x| {
            equal(x, b'"') | equal(x, b'\\') | below(x, 0x20) | ((x | x.wrapping_add(ONES)) & HIGHS)
        },
        special,
    )
    .unwrap_or(b.len())
}

/// The first index at or after `from` whose byte is `a` or `b` (two control characters, say:
/// a properties string's separators), `b.len()` when there is none.
#[inline]
pub(crate) fn either_byte(b: &[u8], from: usize, x: u8, y: u8) -> usize {
    find_by(b, from, |w| equal(w, x) | equal(w, y), |c| c == x || c == y).unwrap_or(b.len())
}

/// The first index at or after `from` whose byte is `x`, `b.len()` when there is none (a
/// properties string's item separator, say).
#[inline]
pub fn byte(b: &[u8], from: usize, x: u8) -> usize {
    find_by(b, from, |w| equal(w, x), |c| c == x).unwrap_or(b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stop_is_found_at_every_position_and_alignment() {
        for len in 0..40 {
            for at in 0..=len {
                for &c in &[b'"', b'\\', 0x00, 0x01, 0x1F] {
                    let mut b = vec![b'a'; len];
                    if at < len {
                        b[at] = c;
                    }
                    let want = (at < len).then_some(at);
                    for from in 0..=at.min(len) {
                        assert_eq!(string_stop(&b, from), want, "{len} {at} {c} {from}");
                    }
                }
            }
        }
    }

    #[test]
    fn bytes_are_found_at_every_position_and_alignment() {
        for len in 0..40 {
            for at in 0..=len {
                for &c in &[0x01u8, 0x02, 0x00, 0x03, 0x81, 0x82] {
                    let mut b = vec![b'a'; len];
                    if at < len {
                        b[at] = c;
                    }
                    for from in 0..=at.min(len) {
                        let one = b[from..]
                            .iter()
                            .position(|&v| v == 0x01)
                            .map_or(len, |p| from + p);
                        assert_eq!(byte(&b, from, 0x01), one, "{len} {at} {c} {from}");
                        let two = b[from..]
                            .iter()
                            .position(|&v| v == 0x01 || v == 0x02)
                            .map_or(len, |p| from + p);
                        assert_eq!(
                            either_byte(&b, from, 0x01, 0x02),
                            two,
                            "{len} {at} {c} {from}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_word_test_agrees_with_the_byte_test_on_every_byte_pair() {
        let special = |c: u8| c < 0x20 || c == b'"' || c == b'\\' || c == 0x7F || c == 0xC2;
        for a in 0..=255u8 {
            for b in [
                0u8, 0x1F, 0x20, b'"', b'\\', 0x7E, 0x7F, 0x80, 0xC2, 0xFF, a,
            ] {
                // Plain bytes around the pair, the pair at each offset of a word.
                for at in 0..10 {
                    let mut text = vec![b'x'; 20];
                    text[at] = a;
                    text[at + 1] = b;
                    let want = text.iter().position(|&c| special(c)).unwrap_or(text.len());
                    assert_eq!(
                        fastjson_stop(&text, 0, special),
                        want,
                        "{a:#x} {b:#x} @{at}"
                    );
                    let want = text
                        .iter()
                        .position(|&c| c == b'"' || c == b'\\' || c < 0x20);
                    assert_eq!(string_stop(&text, 0), want, "{a:#x} {b:#x} @{at}");
                }
            }
        }
    }
}
