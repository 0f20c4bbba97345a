//! A scenario's cluster: the name of an EtcdCluster and the operator's own
//! spec type, written side by side in one YAML mapping, so a field added to
//! the spec is a scenario field too, never one the soak forgets to copy.

use std::fmt;
use std::sync::OnceLock;

use etcd_operator::crd::{EtcdCluster, EtcdClusterSpec};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::Change;

/// The cluster: the fields of an EtcdCluster spec, and its name.
///
/// Written as one mapping (`{name: demo, size: 3, version: "3.5.1"}`); a
/// field that is neither `name` nor one of the spec's is refused with its
/// name, as [`EtcdClusterSpec`] refuses it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClusterSpec {
    /// metadata.name of the EtcdCluster.
    pub name: String,
    /// The EtcdCluster spec, its fields beside `name`.
    #[serde(flatten)]
    pub spec: EtcdClusterSpec,
}

impl ClusterSpec {
    /// The resource.
    pub fn resource(&self) -> EtcdCluster {
        EtcdCluster::new(&self.name, self.spec.clone())
    }

    /// The resource as a manifest (YAML).
    pub fn manifest(&self, paused: bool) -> String {
        let mut spec = self.spec.clone();
        spec.paused = spec.paused || paused;
        let doc = serde_json::json!({
            "apiVersion": etcd_operator::crd::API_VERSION,
            "kind": etcd_operator::crd::KIND,
            "metadata": {"name": self.name},
            "spec": spec,
        });
        // JSON is YAML; the operator's parser reads it as such.
        serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
    }

    /// Number of voting members.
    pub fn members(&self) -> usize {
        usize::try_from(self.spec.size).unwrap_or(0)
    }

    /// The cluster after `change`.
    pub fn changed(&self, change: &Change) -> ClusterSpec {
        let mut c = self.clone();
        if let Some(n) = change.size {
            c.spec.size = n;
        }
        if let Some(v) = &change.version {
            c.spec.version.clone_from(v);
        }
        c
    }
}

// serde cannot refuse unknown fields beside a flattened one, so the
// mapping is read here: `name` is taken out, every other key goes straight
// to the spec's own (strict) deserializer. Nothing is buffered, so errors
// keep the line and column of the key or value they are about.
impl<'de> Deserialize<'de> for ClusterSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ClusterVisitor)
    }
}

struct ClusterVisitor;

impl<'de> Visitor<'de> for ClusterVisitor {
    type Value = ClusterSpec;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the cluster: its name and the fields of an EtcdCluster spec")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ClusterSpec, A::Error> {
        let mut fields = WithoutName { map, name: None };
        let spec =
            EtcdClusterSpec::deserialize(de::value::MapAccessDeserializer::new(&mut fields))?;
        let name = fields
            .name
            .ok_or_else(|| de::Error::missing_field("name"))?;
        Ok(ClusterSpec { name, spec })
    }
}

/// The cluster's mapping without its `name`, which it keeps aside.
struct WithoutName<A> {
    map: A,
    name: Option<String>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for WithoutName<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        mut seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        loop {
            match self.map.next_key_seed(NameOr(seed))? {
                // Said before the spec's own missing fields, as `name`
                // comes first.
                None if self.name.is_none() => return Err(de::Error::missing_field("name")),
                None => return Ok(None),
                Some(Key::Spec(key)) => return Ok(Some(key)),
                Some(Key::Name(unused)) => {
                    if self.name.is_some() {
                        return Err(de::Error::duplicate_field("name"));
                    }
                    self.name = Some(self.map.next_value()?);
                    seed = unused;
                }
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// A key of the cluster's mapping: `name`, or one of the spec's keys as
/// the spec's deserializer reads it.
enum Key<K, V> {
    /// `name`, with the spec's key reader, unused.
    Name(K),
    /// A key the spec's reader accepted.
    Spec(V),
}

/// Reads a key: `name`, or a key for the spec's reader `K`.
struct NameOr<K>(K);

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for NameOr<K> {
    type Value = Key<K, K::Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl<'de, K: DeserializeSeed<'de>> Visitor<'de> for NameOr<K> {
    type Value = Key<K, K::Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        if key == "name" {
            return Ok(Key::Name(self.0));
        }
        self.0
            .deserialize(de::value::StrDeserializer::<KeyError>::new(key))
            .map(Key::Spec)
            .map_err(KeyError::into_error)
    }
}

/// An error of the spec's key reader, kept apart so that an unknown field
/// lists `name` among the expected ones too.
#[derive(Debug)]
enum KeyError {
    /// A key that is not one of the spec's fields.
    Unknown {
        field: String,
        expected: &'static [&'static str],
    },
    /// Anything else, in words.
    Other(String),
}

impl KeyError {
    fn into_error<E: de::Error>(self) -> E {
        match self {
            KeyError::Unknown { field, expected } => E::unknown_field(&field, with_name(expected)),
            KeyError::Other(message) => E::custom(message),
        }
    }
}

/// `name` and the spec's fields (as the spec's deserializer lists them, so
/// never out of date). Only [`EtcdClusterSpec`]'s reader comes here, so
/// the list is made once.
fn with_name(spec_fields: &'static [&'static str]) -> &'static [&'static str] {
    static FIELDS: OnceLock<&'static [&'static str]> = OnceLock::new();
    FIELDS.get_or_init(|| {
        let all: Vec<&'static str> = std::iter::once("name")
            .chain(spec_fields.iter().copied())
            .collect();
        Box::leak(all.into_boxed_slice())
    })
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            KeyError::Unknown { field, .. } => write!(f, "unknown field `{field}`"),
            KeyError::Other(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for KeyError {}

impl de::Error for KeyError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        KeyError::Other(msg.to_string())
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        KeyError::Unknown {
            field: field.into(),
            expected,
        }
    }
}

#[cfg(test)]
mod tests;
