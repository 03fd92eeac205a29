//! [`Text`]: the text of an attribute value, stored inline when it is short.
//!
//! Most attribute values are a few bytes (`900s`, `diamond`, `Stage 12`, `retry`); on the
//! heap each took a 32-byte allocation whatever its length. Up to 22 bytes live inside the
//! value itself; longer text is one exact allocation. It reads like a `&str` (deref,
//! comparisons, display, debug as a string). It must not grow meaning beyond the text.

use std::fmt;
use std::ops::Deref;

/// Longest text kept inline: the value stays 24 bytes, as a `Box<str>` plus a tag would be.
const INLINE: usize = 22;

#[derive(Clone)]
pub struct Text(Repr);

#[derive(Clone)]
enum Repr {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<str>),
}

impl Text {
    pub fn as_str(&self) -> &str {
        match &self.0 {
            // Only ever filled from a `&str` cut at its end, so always UTF-8.
            Repr::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            Repr::Heap(s) => s,
        }
    }
}

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Self {
        if s.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..s.len()].copy_from_slice(s.as_bytes());
            Text(Repr::Inline {
                len: s.len() as u8,
                bytes,
            })
        } else {
            Text(Repr::Heap(s.into()))
        }
    }
}

impl From<String> for Text {
    fn from(s: String) -> Self {
        if s.len() <= INLINE {
            Text::from(s.as_str())
        } else {
            Text(Repr::Heap(s.into_boxed_str()))
        }
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

/// As the text prints, like the `String` it replaced.
impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_text_read_back_the_same() {
        for s in [
            "",
            "900s",
            "é and ü",
            &"x".repeat(22),
            &"y".repeat(23),
            &"z".repeat(300),
        ] {
            let a = Text::from(s);
            let b = Text::from(s.to_string());
            assert_eq!(a.as_str(), s);
            assert_eq!(a, b);
            assert!(a == s);
            assert_eq!(format!("{a} {a:?}"), format!("{s} {s:?}"));
        }
        assert!(matches!(Text::from("x".repeat(22)).0, Repr::Inline { .. }));
        assert!(matches!(Text::from("x".repeat(23)).0, Repr::Heap(_)));
        assert_eq!(std::mem::size_of::<Text>(), 24);
    }
}
