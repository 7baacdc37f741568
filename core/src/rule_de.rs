//! A serde `Deserializer` over a [`DocTree`]: routers read their rule straight from a parsed
//! document's tree, with serde_json's behaviour and messages exactly (a scalar is handed to
//! serde_json's own `Value` deserializer; sequences and mappings are walked in place, as
//! serde_json walks a `&Value`), so no `Value` of the whole document is ever built.

use serde::Deserializer;
use serde::de::{
    self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Unexpected, Visitor,
};
use serde_json::{Error, Value};

use crate::rule::{DocNode, DocTree, tree_value};

/// Deserializes node `node` of `tree`.
#[derive(Clone, Copy)]
pub(crate) struct TreeDe<'a> {
    pub tree: &'a dyn DocTree,
    pub node: u32,
}

// Every method but these reads the node as `deserialize_any` does. For serde's derived and
// standard visitors that is `Value`'s answer, messages included: on a scalar, `Value`'s typed
// methods make the visit its `deserialize_any` makes or fail with the visitor's own type
// error, which is also what such a visitor answers a sequence or mapping it does not take.
impl<'de> Deserializer<'de> for TreeDe<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let tree = self.tree;
        // The value, with the items or entries the visitor left unread (an error, as in
        // serde_json).
        let (value, len, left, expected) = match tree.doc_node(self.node) {
            DocNode::Scalar(v) => return v.deserialize_any(visitor),
            DocNode::Seq(items) => {
                let mut access = Items {
                    tree,
                    rest: items.iter(),
                };
                let value = visitor.visit_seq(&mut access)?;
                (
                    value,
                    items.len(),
                    access.rest.len(),
                    "fewer elements in array",
                )
            }
            DocNode::Map(entries) => {
                let mut access = Entries {
                    tree,
                    rest: entries.iter(),
                    value: None,
                };
                let value = visitor.visit_map(&mut access)?;
                (
                    value,
                    entries.len(),
                    access.rest.len(),
                    "fewer elements in map",
                )
            }
        };
        match left {
            0 => Ok(value),
            _ => Err(de::Error::invalid_length(len, &expected)),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.tree.doc_node(self.node) {
            DocNode::Scalar(Value::Null) => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        // An enum's payload is small: serde_json's own rules on its value.
        tree_value(self.tree, self.node).deserialize_enum(name, variants, visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

struct Items<'a, 'b> {
    tree: &'a dyn DocTree,
    rest: std::slice::Iter<'b, u32>,
}

impl<'de> SeqAccess<'de> for Items<'_, '_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        match self.rest.next() {
            Some(&node) => seed
                .deserialize(TreeDe {
                    tree: self.tree,
                    node,
                })
                .map(Some),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.rest.len())
    }
}

struct Entries<'a, 'b> {
    tree: &'a dyn DocTree,
    rest: std::slice::Iter<'b, u32>,
    value: Option<u32>,
}

impl<'de> MapAccess<'de> for Entries<'_, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.rest.next() {
            Some(&node) => {
                self.value = Some(node);
                // serde_json reads a key as a string, a number or a bool from its text.
                let key = self.tree.doc_key(node);
                seed.deserialize(KeyDe(key)).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        match self.value.take() {
            Some(node) => seed.deserialize(TreeDe {
                tree: self.tree,
                node,
            }),
            None => Err(de::Error::custom("value is missing")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.rest.len())
    }
}

/// A mapping key: a string (numeric and boolean targets parse its text, as serde_json's
/// key deserializer does).
struct KeyDe<'a>(&'a str);

macro_rules! key_parsed {
    ($($method:ident => $ty:ty, $visit:ident);* $(;)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            match self.0.parse::<$ty>() {
                Ok(n) => visitor.$visit(n),
                Err(_) => Err(de::Error::invalid_type(Unexpected::Str(self.0), &visitor)),
            }
        }
    )*};
}

impl<'de> Deserializer<'de> for KeyDe<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_str(self.0)
    }

    key_parsed!(
        deserialize_bool => bool, visit_bool;
        deserialize_i8 => i8, visit_i8;
        deserialize_i16 => i16, visit_i16;
        deserialize_i32 => i32, visit_i32;
        deserialize_i64 => i64, visit_i64;
        deserialize_u8 => u8, visit_u8;
        deserialize_u16 => u16, visit_u16;
        deserialize_u32 => u32, visit_u32;
        deserialize_u64 => u64, visit_u64;
        deserialize_f32 => f32, visit_f32;
        deserialize_f64 => f64, visit_f64;
    );

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let key: de::value::StrDeserializer<'_, Error> = self.0.into_deserializer();
        key.deserialize_enum(name, variants, visitor)
    }

    serde::forward_to_deserialize_any! {
        i128 u128 char str string bytes byte_buf unit unit_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}
