//! A hash that stays the same across builds, platforms and Rust versions (std's `DefaultHasher` promises
//! none of that), for choices that must follow from a name alone: a random answer per question id, the
//! held-out part of the furniture catalogue.

/// FNV-1a, 64 bits, of `text`'s bytes.
pub fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_fnv1a() {
        assert_eq!(stable_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash("a"), 0xaf63_dc4c_8601_ec8c);
    }
}
