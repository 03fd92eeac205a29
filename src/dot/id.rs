//! [`Id`]: a node id, held once and shared by the node and every edge that names it.
//!
//! Edges used to own copies of both end ids: on a 100,000-node graph with 200,000 edges
//! that was 400,000 small allocations (12.8 MB) next to the 100,000 the nodes need. An
//! `Id` is a reference-counted string, so an edge end is a pointer copy. It reads like a
//! `&str` (deref, comparisons with `str` and `String`, display) and serializes as a string.
//! It must not grow meaning beyond the text (no validation: the grammar decides what an id is).

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id(Arc<str>);

impl Id {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Id {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Id {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Id {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

/// As a `String` prints, so that debug output did not change with the type.
impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id(Arc::from(s))
    }
}

impl From<String> for Id {
    fn from(s: String) -> Self {
        Id(Arc::from(s))
    }
}

impl From<&Id> for String {
    fn from(id: &Id) -> Self {
        id.0.to_string()
    }
}

impl PartialEq<str> for Id {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Id {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for Id {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<Id> for str {
    fn eq(&self, other: &Id) -> bool {
        self == &*other.0
    }
}

impl PartialEq<Id> for &str {
    fn eq(&self, other: &Id) -> bool {
        *self == &*other.0
    }
}

impl PartialEq<Id> for String {
    fn eq(&self, other: &Id) -> bool {
        **self == *other.0
    }
}

impl serde::Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_reads_compares_and_serializes_like_its_text() {
        let id = Id::from("n1");
        let copy = id.clone();
        assert!(
            std::ptr::eq(id.as_str(), copy.as_str()),
            "a clone shares the text"
        );
        let text = String::from("n1");
        assert!(id == "n1");
        assert!("n1" == id);
        assert!(id == *"n1");
        assert!(id == text);
        assert!(text == id);
        assert_eq!(format!("{id} {id:?}"), "n1 \"n1\"");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"n1\"");
        assert_eq!(String::from(&id), "n1");
    }
}
