//! The request value: everything one call knows about itself.
//!
//! Routing takes the request as an explicit argument. Nothing request-scoped travels in
//! thread-locals or task-locals, so a call fanned out to many tasks (Dubbo's merging invoker)
//! routes each task by the attributes it was given.

use std::fmt::Write as _;

use crate::url::Url;

/// A small string map kept in insertion order; a key set twice keeps the last value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes(Vec<(String, String)>);

impl Attributes {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    /// Sets `key` to `value`, replacing an earlier value.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }
    /// Replaces the entries with `entries` (a key given twice keeps the last value),
    /// reusing this map's strings: once they have grown, no allocation. For callers that
    /// keep one `Request` per task and refill it per call (the tower layer does).
    pub fn assign<'a>(&mut self, entries: impl IntoIterator<Item = (&'a str, &'a str)>) {
        let mut n = 0;
        for (k, v) in entries {
            if let Some(e) = self.0[..n].iter_mut().find(|(ek, _)| ek == k) {
                e.1.clear();
                e.1.push_str(v);
                continue;
            }
            match self.0.get_mut(n) {
                Some(e) => {
                    e.0.clear();
                    e.0.push_str(k);
                    e.1.clear();
                    e.1.push_str(v);
                }
                None => self.0.push((k.to_owned(), v.to_owned())),
            }
            n += 1;
        }
        self.0.truncate(n);
    }
    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(i).1)
    }
    /// The entries in insertion order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
    /// The number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Attributes {
    fn from_iter<T: IntoIterator<Item = (K, V)>>(iter: T) -> Self {
        let mut a = Attributes::new();
        for (k, v) in iter {
            a.insert(k, v);
        }
        a
    }
}

/// One call: consumer, service, method, arguments, attachments and attributes.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The service (interface) called, if the caller names it.
    pub service: Option<String>,
    /// The caller's own URL; `None` uses the consumer the chain was built for.
    pub consumer: Option<Url>,
    /// The method called (`None`: no invocation, as Dubbo's null invocation).
    pub method: Option<String>,
    /// The arguments, as JSON values.
    pub arguments: Vec<serde_json::Value>,
    /// The declared parameter types, as Java's `Class.getName()` writes them (`int`,
    /// `java.lang.String`, `[Ljava.lang.String;`); empty when the caller does not say. The
    /// mesh router's `argp` matches them.
    pub parameter_types: Vec<String>,
    /// Attachments: strings sent to the provider with the call (`dubbo.tag`...).
    pub attachments: Attributes,
    /// Attributes: strings local to the caller, never sent (the group of this call...).
    pub attributes: Attributes,
}

impl Request {
    /// An empty request.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the method.
    pub fn with_method(mut self, method: impl Into<String>) -> Self {
        self.method = Some(method.into());
        self
    }
    /// Sets the service.
    pub fn with_service(mut self, service: impl Into<String>) -> Self {
        self.service = Some(service.into());
        self
    }
    /// Sets the consumer URL.
    pub fn with_consumer(mut self, consumer: Url) -> Self {
        self.consumer = Some(consumer);
        self
    }
    /// Appends an argument.
    pub fn with_argument(mut self, value: serde_json::Value) -> Self {
        self.arguments.push(value);
        self
    }
    /// Appends a parameter type (Java's `Class.getName()` form).
    pub fn with_parameter_type(mut self, type_name: impl Into<String>) -> Self {
        self.parameter_types.push(type_name.into());
        self
    }
    /// Sets an attachment.
    pub fn with_attachment(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.attachments.insert(key, value);
        self
    }
    /// Sets an attribute.
    pub fn with_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.attributes.insert(key, value);
        self
    }

    /// Calls `f` with the string form of argument `n` as Dubbo's condition router sees it
    /// (`String.valueOf`): a string as it is, a number as written, `true`/`false`, `null` as
    /// `"null"`, arrays and objects as JSON text. `None` when there is no argument `n`.
    /// Scalars are formatted on the stack: no allocation.
    pub fn with_argument_str<R>(&self, n: usize, f: impl FnOnce(&str) -> R) -> Option<R> {
        let value = self.arguments.get(n)?;
        Some(match value {
            serde_json::Value::String(s) => f(s),
            serde_json::Value::Bool(true) => f("true"),
            serde_json::Value::Bool(false) => f("false"),
            serde_json::Value::Null => f("null"),
            serde_json::Value::Number(num) => {
                let mut buf = StackStr::<48>::new();
                if write!(buf, "{num}").is_ok() {
                    f(buf.as_str())
                } else {
                    f(&num.to_string())
                }
            }
            other => f(&other.to_string()),
        })
    }
}

/// A fixed-capacity string on the stack.
struct StackStr<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> StackStr<N> {
    fn new() -> Self {
        StackStr {
            buf: [0; N],
            len: 0,
        }
    }
    fn as_str(&self) -> &str {
        // Only whole `&str`s are ever copied in, so the bytes are valid UTF-8.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl<const N: usize> std::fmt::Write for StackStr<N> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > N {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn argument_string_forms_follow_string_value_of() {
        let r = Request::new()
            .with_argument(json!("a"))
            .with_argument(json!(1))
            .with_argument(json!(true))
            .with_argument(json!(null))
            .with_argument(json!(-2.5))
            .with_argument(json!([1, 2]));
        let s = |n| r.with_argument_str(n, |s| s.to_string());
        assert_eq!(s(0).as_deref(), Some("a"));
        assert_eq!(s(1).as_deref(), Some("1"));
        assert_eq!(s(2).as_deref(), Some("true"));
        assert_eq!(s(3).as_deref(), Some("null"));
        assert_eq!(s(4).as_deref(), Some("-2.5"));
        assert_eq!(s(5).as_deref(), Some("[1,2]"));
        assert_eq!(s(6), None);
    }

    #[test]
    fn attributes_keep_the_last_value() {
        let mut a: Attributes = [("g", "1"), ("h", "2"), ("g", "3")].into_iter().collect();
        assert_eq!(a.get("g"), Some("3"));
        assert_eq!(a.len(), 2);
        assert_eq!(a.remove("g").as_deref(), Some("3"));
        assert_eq!(a.get("g"), None);
    }

    #[test]
    fn assign_replaces_the_entries_and_keeps_the_last_value() {
        let mut a: Attributes = [("x", "1"), ("y", "2"), ("z", "3")].into_iter().collect();
        a.assign([("g", "a"), ("h", "b"), ("g", "c")]);
        let want: Attributes = [("g", "c"), ("h", "b")].into_iter().collect();
        assert_eq!(a, want);
        a.assign([]);
        assert!(a.is_empty());
        a.assign([("k", "v")]);
        assert_eq!(a.iter().collect::<Vec<_>>(), [("k", "v")]);
    }
}
