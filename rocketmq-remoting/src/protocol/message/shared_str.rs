//! [`SharedStr`]: an immutable string that is cloned by a reference count.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An immutable string shared by reference count: cloning it copies no text. A
/// [`MessageQueue`](super::MessageQueue)'s topic and broker name are `SharedStr`s, so every
/// send result, rebalance and offset entry that copies a queue copies two pointers, not two
/// strings.
///
/// It reads as a `&str` (`Deref`, `AsRef<str>`, `Borrow<str>`, so a map keyed by it is looked
/// up with a `&str`), compares with `str`, `&str` and `String`, and is made from either.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SharedStr(Arc<str>);

impl SharedStr {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for SharedStr {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SharedStr {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for SharedStr {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for SharedStr {
    fn from(s: &str) -> Self {
        Self(Arc::from(s))
    }
}

impl From<&String> for SharedStr {
    fn from(s: &String) -> Self {
        Self(Arc::from(s.as_str()))
    }
}

impl From<String> for SharedStr {
    fn from(s: String) -> Self {
        Self(Arc::from(s))
    }
}

impl From<&SharedStr> for SharedStr {
    fn from(s: &SharedStr) -> Self {
        s.clone()
    }
}

impl From<SharedStr> for String {
    fn from(s: SharedStr) -> Self {
        s.0.to_string()
    }
}

impl From<&SharedStr> for String {
    fn from(s: &SharedStr) -> Self {
        s.0.to_string()
    }
}

impl PartialEq<str> for SharedStr {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for SharedStr {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for SharedStr {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<SharedStr> for str {
    fn eq(&self, other: &SharedStr) -> bool {
        self == &*other.0
    }
}

impl PartialEq<SharedStr> for &str {
    fn eq(&self, other: &SharedStr) -> bool {
        *self == &*other.0
    }
}

impl PartialEq<SharedStr> for String {
    fn eq(&self, other: &SharedStr) -> bool {
        **self == *other.0
    }
}

impl Serialize for SharedStr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SharedStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn a_clone_shares_the_text() {
        let a = SharedStr::from("TopicA");
        let b = a.clone();
        assert!(std::ptr::eq(a.as_str(), b.as_str()));
        assert_eq!(a, "TopicA");
        assert_eq!("TopicA", a);
        assert_eq!(a, "TopicA".to_string());
        assert_eq!(String::from(&a), "TopicA");
        assert_eq!(format!("{a} {a:?}"), "TopicA \"TopicA\"");
    }

    #[test]
    fn it_orders_hashes_and_serializes_as_its_text() {
        let mut v = vec![SharedStr::from("b"), SharedStr::from("a")];
        v.sort();
        assert_eq!(v, ["a", "b"]);
        let m: HashMap<SharedStr, i32> = [(SharedStr::from("k"), 1)].into_iter().collect();
        assert_eq!(m.get("k"), Some(&1));
        let json = serde_json::to_string(&SharedStr::from("x\"y")).unwrap();
        assert_eq!(json, r#""x\"y""#);
        let back: SharedStr = serde_json::from_str(&json).unwrap();
        assert_eq!(back, "x\"y");
    }
}
