//! Building regorus values without a JSON detour.
//!
//! Entry points: [`to_rego`] (from `serde_json::Value`) and [`serialize`] (from anything
//! `Serialize`, e.g. JobView). Converting the input document is the largest fixed cost of an
//! admission request, so it is done in one pass with no intermediate `serde_json::Value`.

use std::collections::BTreeMap;

use regorus::Value as RegoValue;
use serde::ser::{self, Serialize};
use serde_json::Value;

/// serde_json → regorus, walking the tree directly.
pub fn to_rego(v: &Value) -> RegoValue {
    match v {
        Value::Null => RegoValue::Null,
        Value::Bool(b) => RegoValue::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => RegoValue::from(i),
            (None, Some(u), _) => RegoValue::from(u),
            (None, None, Some(f)) if f.is_finite() => RegoValue::from(f),
            _ => RegoValue::Undefined,
        },
        Value::String(s) => RegoValue::String(s.as_str().into()),
        Value::Array(items) => RegoValue::from(items.iter().map(to_rego).collect::<Vec<_>>()),
        Value::Object(map) => RegoValue::from(
            map.iter()
                .map(|(k, v)| (RegoValue::String(k.as_str().into()), to_rego(v)))
                .collect::<BTreeMap<_, _>>(),
        ),
    }
}

/// Any `Serialize` value as a regorus value. `None` fields become null unless the type skips
/// them (JobView skips them, so they are undefined in Rego).
pub fn serialize(v: &impl Serialize) -> Result<RegoValue, Error> {
    v.serialize(RegoSerializer)
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Error(String);

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

struct RegoSerializer;

fn text(s: &str) -> RegoValue {
    RegoValue::String(s.into())
}

impl ser::Serializer for RegoSerializer {
    type Ok = RegoValue;
    type Error = Error;
    type SerializeSeq = SeqBuilder;
    type SerializeTuple = SeqBuilder;
    type SerializeTupleStruct = SeqBuilder;
    type SerializeTupleVariant = ser::Impossible<RegoValue, Error>;
    type SerializeMap = MapBuilder;
    type SerializeStruct = MapBuilder;
    type SerializeStructVariant = ser::Impossible<RegoValue, Error>;

    fn serialize_bool(self, v: bool) -> Result<RegoValue, Error> {
        Ok(RegoValue::Bool(v))
    }
    fn serialize_i8(self, v: i8) -> Result<RegoValue, Error> {
        Ok(RegoValue::from(i64::from(v)))
    }
    fn serialize_i16(self, v: i16) -> Result<RegoValue, Error> {
        Ok(RegoValue::from(i64::from(v)))
    }
    fn serialize_i32(self, v: i32) -> Result<RegoValue, Error> {
        Ok(RegoValue::from(i64::from(v)))
    }
    fn serialize_i64(self, v: i64) -> Result<RegoValue, Error> {
        Ok(RegoValue::from(v))
    }
    fn serialize_u8(self, v: u8) -> Result<RegoValue, Error> {
        Ok(RegoValue::from(u64::from(v)))
    }
    fn serialize_u16(self, v: u16) -> Result<RegoValue, Error> {
        Ok(RegoValue::from(u64::from(v)))
    }
    fn serialize_u32(self, v: u32) -> Result<RegoValue, Error> {
        Ok(RegoValue::from(u64::from(v)))
    }
    fn serialize_u64(self, v: u64) -> Result<RegoValue, Error> {
        Ok(RegoValue::from(v))
    }
    fn serialize_f32(self, v: f32) -> Result<RegoValue, Error> {
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<RegoValue, Error> {
        if v.is_finite() {
            Ok(RegoValue::from(v))
        } else {
            Err(Error(format!("non-finite number {v}")))
        }
    }
    fn serialize_char(self, v: char) -> Result<RegoValue, Error> {
        Ok(text(&v.to_string()))
    }
    fn serialize_str(self, v: &str) -> Result<RegoValue, Error> {
        Ok(text(v))
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<RegoValue, Error> {
        Ok(RegoValue::from(
            v.iter()
                .map(|b| RegoValue::from(u64::from(*b)))
                .collect::<Vec<_>>(),
        ))
    }
    fn serialize_none(self) -> Result<RegoValue, Error> {
        Ok(RegoValue::Null)
    }
    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Result<RegoValue, Error> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<RegoValue, Error> {
        Ok(RegoValue::Null)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<RegoValue, Error> {
        Ok(RegoValue::Null)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<RegoValue, Error> {
        Ok(text(variant))
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<RegoValue, Error> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<RegoValue, Error> {
        let mut map = BTreeMap::new();
        map.insert(text(variant), v.serialize(RegoSerializer)?);
        Ok(RegoValue::from(map))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<SeqBuilder, Error> {
        Ok(SeqBuilder(Vec::with_capacity(len.unwrap_or(0))))
    }
    fn serialize_tuple(self, len: usize) -> Result<SeqBuilder, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<SeqBuilder, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(Error(format!("tuple variants of {name} have no Rego form")))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<MapBuilder, Error> {
        Ok(MapBuilder::default())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<MapBuilder, Error> {
        Ok(MapBuilder::default())
    }
    fn serialize_struct_variant(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(Error(format!(
            "struct variants of {name} have no Rego form"
        )))
    }
}

struct SeqBuilder(Vec<RegoValue>);

impl SeqBuilder {
    fn push<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Error> {
        self.0.push(v.serialize(RegoSerializer)?);
        Ok(())
    }
}

/// Sequences, tuples and tuple structs all become Rego arrays; only the trait and the name
/// of the element method differ.
macro_rules! seq_impl {
    ($trait:ident, $method:ident) => {
        impl ser::$trait for SeqBuilder {
            type Ok = RegoValue;
            type Error = Error;
            fn $method<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Error> {
                self.push(v)
            }
            fn end(self) -> Result<RegoValue, Error> {
                Ok(RegoValue::from(self.0))
            }
        }
    };
}

seq_impl!(SerializeSeq, serialize_element);
seq_impl!(SerializeTuple, serialize_element);
seq_impl!(SerializeTupleStruct, serialize_field);

#[derive(Default)]
struct MapBuilder {
    map: BTreeMap<RegoValue, RegoValue>,
    key: Option<RegoValue>,
}

impl ser::SerializeMap for MapBuilder {
    type Ok = RegoValue;
    type Error = Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, k: &T) -> Result<(), Error> {
        self.key = Some(k.serialize(RegoSerializer)?);
        Ok(())
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Error> {
        let key = self
            .key
            .take()
            .ok_or_else(|| Error("map value without a key".into()))?;
        self.map.insert(key, v.serialize(RegoSerializer)?);
        Ok(())
    }
    fn end(self) -> Result<RegoValue, Error> {
        Ok(RegoValue::from(self.map))
    }
}

impl ser::SerializeStruct for MapBuilder {
    type Ok = RegoValue;
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        self.map.insert(text(key), v.serialize(RegoSerializer)?);
        Ok(())
    }
    fn end(self) -> Result<RegoValue, Error> {
        Ok(RegoValue::from(self.map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use serde_json::json;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Sample {
        name: &'static str,
        gpus_per_pod: i64,
        #[serde(skip_serializing_if = "Option::is_none")]
        absent: Option<u8>,
        tags: Vec<&'static str>,
        labels: serde_json::Map<String, Value>,
    }

    #[test]
    fn serializing_matches_the_json_round_trip() {
        let s = Sample {
            name: "job",
            gpus_per_pod: 8,
            absent: None,
            tags: vec!["a", "b"],
            labels: json!({"k": "v", "n": 1.5})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        };
        let direct = serialize(&s).ok();
        let via_json = serde_json::to_value(&s).ok().map(|v| to_rego(&v));
        assert!(direct.is_some());
        assert_eq!(direct, via_json);
    }
}
