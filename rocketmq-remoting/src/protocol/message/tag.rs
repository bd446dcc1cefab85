//! Tag hash codes: Java's `String.hashCode`.

/// Java's `String.hashCode`: `h = 31*h + c` over UTF-16 code units with wrapping `i32`
/// arithmetic.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The consume-queue tag code of a `TAGS` value (0 without a tag), sign-extended to `i64`.
pub fn tags_hash_code(tags: Option<&str>) -> i64 {
    match tags {
        Some(t) if !t.is_empty() => i64::from(java_string_hash(t)),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_java() {
        assert_eq!(java_string_hash("TagA"), 2598919);
        assert_eq!(java_string_hash("TagB"), 2598920);
        assert_eq!(java_string_hash(""), 0);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        // A supplementary character hashes as its two UTF-16 surrogates.
        assert_eq!(
            java_string_hash("😀"),
            0xD83Di32.wrapping_mul(31).wrapping_add(0xDE00)
        );
        assert_eq!(tags_hash_code(Some("polygenelubricants")), -2147483648i64);
        assert_eq!(tags_hash_code(None), 0);
    }
}
