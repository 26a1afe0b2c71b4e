//! Database names a registry accepts: nothing that can reach outside its directory.

use crate::{Error, Result};

/// Longest name a registry accepts, in bytes: [`Registry::MAX_NAME_LEN`](crate::Registry::MAX_NAME_LEN).
pub(crate) const MAX_NAME_LEN: usize = 128;

/// Checks a database name (see [`Registry::get`](crate::Registry::get)).
pub(crate) fn validate_name(name: &str) -> Result<()> {
    let refuse = |reason: &'static str| {
        let shown: String = name.chars().take(MAX_NAME_LEN + 8).collect();
        Err(Error::InvalidName {
            name: shown,
            reason,
        })
    };
    if name.is_empty() {
        return refuse("empty");
    }
    if name.len() > MAX_NAME_LEN {
        return refuse("longer than 128 bytes");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return refuse("only ASCII letters, digits, '_', '-' and '.' are allowed");
    }
    if !name.as_bytes()[0].is_ascii_alphanumeric() {
        return refuse("must start with a letter or a digit");
    }
    if name.contains("..") {
        return refuse("must not contain '..'");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["acme", "tenant-42", "a.b_c", "0", &"x".repeat(MAX_NAME_LEN)] {
            assert!(validate_name(good).is_ok(), "{good}");
        }
        let long = "x".repeat(MAX_NAME_LEN + 1);
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/../../etc/passwd",
            "/etc/passwd",
            "a/b",
            "a\\b",
            "a\0b",
            ".hidden",
            "-rf",
            "a..b",
            "a b",
            "naïve",
            "C:x",
            long.as_str(),
        ] {
            assert!(
                matches!(validate_name(bad), Err(Error::InvalidName { .. })),
                "{bad:?}"
            );
        }
    }
}
