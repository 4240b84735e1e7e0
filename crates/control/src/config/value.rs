//! The TOML value tree the config is read into: every key and value keeps its byte span, so each
//! error can name its line. Pure data and its serde visitor; no validation happens here.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;
use toml::Spanned;

#[derive(Debug)]
pub(super) enum Val {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Array(Vec<Spanned<Val>>),
    Table(Vec<(Spanned<String>, Spanned<Val>)>),
}

pub(super) type Node = Spanned<Val>;

impl<'de> Deserialize<'de> for Val {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Val, D::Error> {
        pub(super) struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Val;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a TOML value")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Val, E> {
                Ok(Val::Str(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Val, E> {
                Ok(Val::Str(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Val, E> {
                Ok(Val::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Val, E> {
                Ok(Val::Int(i64::try_from(v).unwrap_or(i64::MAX)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Val, E> {
                Ok(Val::Float(v))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Val, E> {
                Ok(Val::Bool(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Val, A::Error> {
                let mut out = Vec::new();
                while let Some(x) = a.next_element::<Node>()? {
                    out.push(x);
                }
                Ok(Val::Array(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Val, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = a.next_key::<Spanned<String>>()? {
                    let v = a.next_value::<Node>()?;
                    out.push((k, v));
                }
                Ok(Val::Table(out))
            }
        }
        d.deserialize_any(V)
    }
}

pub(super) fn kind(v: &Val) -> &'static str {
    match v {
        Val::Str(_) => "a string",
        Val::Int(_) => "an integer",
        Val::Float(_) => "a float",
        Val::Bool(_) => "a boolean",
        Val::Array(_) => "an array",
        Val::Table(_) => "a table",
    }
}

pub(super) fn show(v: &Val) -> String {
    match v {
        Val::Str(s) => format!("`{s}`"),
        Val::Int(i) => format!("`{i}`"),
        Val::Float(x) => format!("`{x}`"),
        Val::Bool(b) => format!("`{b}`"),
        Val::Array(_) => "an array".to_string(),
        Val::Table(_) => "a table".to_string(),
    }
}
