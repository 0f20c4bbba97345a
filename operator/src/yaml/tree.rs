//! A YAML document as written: every node with its kind and where it was
//! defined, so that a value serde accepted can be compared with how it was
//! spelled (`"3"` is a string, `0x3` a hexadecimal number), and an error's
//! position can be turned into the field it points at.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{Location, Spanned};

/// A node as YAML resolved it.
#[derive(Debug)]
pub(crate) enum Node {
    /// `null`, `~` or nothing.
    Null,
    /// A boolean.
    Bool,
    /// An integer (in any spelling YAML takes: `3`, `0x3`, `+3`).
    Int,
    /// A floating-point number.
    Float,
    /// A string (quoted, or plain and not a number or boolean).
    Str(String),
    /// A sequence.
    Seq(Vec<Spanned<Node>>),
    /// A mapping, keys as text.
    Map(Vec<(String, Spanned<Node>)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Node, E> {
        Ok(Node::Bool)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Node, E> {
        Ok(Node::Int)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Node, E> {
        Ok(Node::Int)
    }
    fn visit_i128<E>(self, _: i128) -> Result<Node, E> {
        Ok(Node::Int)
    }
    fn visit_u128<E>(self, _: u128) -> Result<Node, E> {
        Ok(Node::Int)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Node, E> {
        Ok(Node::Float)
    }
    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }
    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut out = Vec::new();
        while let Some(n) = seq.next_element::<Spanned<Node>>()? {
            out.push(n);
        }
        Ok(Node::Seq(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut out = Vec::new();
        while let Some(k) = map.next_key::<Key>()? {
            out.push((k.0, map.next_value::<Spanned<Node>>()?));
        }
        Ok(Node::Map(out))
    }
}

/// A mapping key as text, whatever scalar it is.
struct Key(String);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping key")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_unit<E>(self) -> Result<Key, E> {
                Ok(Key("null".into()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Key, A::Error> {
                Err(de::Error::custom("a mapping key must be a plain value"))
            }
            fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Key, A::Error> {
                Err(de::Error::custom("a mapping key must be a plain value"))
            }
        }
        d.deserialize_any(KeyVisitor)
    }
}

/// The source text of a node (empty when unknown).
pub(crate) fn raw<'a>(source: &'a str, at: &Location) -> &'a str {
    let span = at.span();
    let (Some(start), Some(len)) = (span.byte_offset(), span.byte_len()) else {
        return "";
    };
    let (Ok(start), Ok(len)) = (usize::try_from(start), usize::try_from(len)) else {
        return "";
    };
    source.get(start..start.saturating_add(len)).unwrap_or("")
}

/// `path.key`, or `key` at the top.
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The field a position points at: the deepest node that starts there.
pub(crate) fn field_at(node: &Spanned<Node>, at: &Location) -> Option<String> {
    fn walk(node: &Spanned<Node>, path: &str, at: &Location, best: &mut Option<String>) {
        let here = &node.referenced;
        if here.line() == at.line() && here.column() == at.column() && !path.is_empty() {
            *best = Some(path.to_string());
        }
        match &node.value {
            Node::Map(entries) => {
                for (k, v) in entries {
                    walk(v, &join(path, k), at, best);
                }
            }
            Node::Seq(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, &format!("{path}[{i}]"), at, best);
                }
            }
            _ => {}
        }
    }
    let mut best = None;
    walk(node, "", at, &mut best);
    best
}
