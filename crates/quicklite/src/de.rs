//! Rows deserialized into the caller's types with serde (`serde` feature): a [`serde::Deserializer`] over a
//! [`rusqlite::Row`].
//!
//! A struct or a map takes its fields from the columns by name (the order of the columns does not matter; a
//! column no field names is skipped, as serde skips unknown fields); a tuple or a tuple struct takes the columns by
//! position; anything else (a number, a string, `Option`, a newtype) takes the first column. A value becomes what
//! SQLite stored: `INTEGER` an `i64` (narrower integers are range-checked by serde, and floats accept it), `REAL` an
//! `f64`, `TEXT` a string (or a unit enum variant by name), `BLOB` a `Vec<u8>` or bytes; `NULL` is `None` for an
//! `Option` and `()` for a unit, and, for a float, NaN; into anything else it is an error. `bool` takes an
//! `INTEGER` or a `REAL`: zero is false.
//!
//! serde_rusqlite did this before, with the same rules (this module keeps them so that the same types read the same
//! rows); its releases follow rusqlite's a while later, and quicklite accepts a rusqlite as soon as it is out. A
//! value that does not fit fails with [`Error::Decode`] naming its column.

use std::fmt;

use rusqlite::types::ValueRef;
use rusqlite::{Row, Statement};
use serde::de::value::{SeqDeserializer, StrDeserializer};
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, EnumAccess, IntoDeserializer, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};
use serde::forward_to_deserialize_any;

use crate::Error;

/// The names of a statement's columns, read once for all its rows.
// rusqlite 0.40's `column_names` returns a `Vec`, 0.41's an iterator: `into_iter` takes either.
#[allow(clippy::useless_conversion)]
pub(crate) fn column_names(stmt: &Statement<'_>) -> Vec<String> {
    stmt.column_names().into_iter().map(str::to_owned).collect()
}

/// Deserializes `row`, whose columns are named `columns` ([`column_names`]), into a `T`.
pub(crate) fn from_row<T: DeserializeOwned>(row: &Row<'_>, columns: &[String]) -> Result<T, Error> {
    T::deserialize(RowDeserializer { row, columns }).map_err(Error::from)
}

/// What went wrong while deserializing a row, as serde needs it (an error type of the deserializer's own).
#[derive(Debug)]
enum DeError {
    /// SQLite or rusqlite failed to hand over a value (a column out of range).
    Sqlite(rusqlite::Error),
    /// A value does not fit its field, or a field has no column.
    Decode {
        /// The column, when the error came from one.
        column: Option<String>,
        /// What did not fit, in serde's words.
        message: String,
    },
}

impl DeError {
    /// The error with the column it came from, unless it already names one (the innermost is the one to blame).
    fn in_column(self, name: &str) -> DeError {
        match self {
            DeError::Decode {
                column: None,
                message,
            } => DeError::Decode {
                column: Some(name.to_owned()),
                message,
            },
            other => other,
        }
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeError::Sqlite(e) => e.fmt(f),
            DeError::Decode {
                column: Some(column),
                message,
            } => write!(f, "column {column:?}: {message}"),
            DeError::Decode {
                column: None,
                message,
            } => f.write_str(message),
        }
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError::Decode {
            column: None,
            message: msg.to_string(),
        }
    }
}

impl From<DeError> for Error {
    fn from(e: DeError) -> Error {
        match e {
            DeError::Sqlite(e) => Error::Sqlite(e),
            DeError::Decode { column, message } => Error::Decode { column, message },
        }
    }
}

/// A whole row: a struct or map by column name, a tuple by position, anything else from the first column.
struct RowDeserializer<'a, 'stmt> {
    row: &'a Row<'stmt>,
    columns: &'a [String],
}

impl<'a, 'stmt> RowDeserializer<'a, 'stmt> {
    /// The row's first column, for a type that is one value.
    fn first(&self) -> ValueDeserializer<'a, 'stmt> {
        ValueDeserializer {
            row: self.row,
            index: 0,
        }
    }

    /// `e` with the first column's name, the value it came from.
    fn in_first(&self, e: DeError) -> DeError {
        match self.columns.first() {
            Some(name) => e.in_column(name),
            None => e,
        }
    }

    /// The columns in order, for a tuple.
    fn by_position<'de, V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_seq(Columns {
            row: self.row,
            columns: self.columns,
            next: 0,
        })
    }
}

/// Each method that reads one value reads the first column, and names it in its errors.
macro_rules! from_first_column {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
                self.first().$method(visitor).map_err(|e| self.in_first(e))
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for RowDeserializer<'_, '_> {
    type Error = DeError;

    from_first_column! {
        deserialize_any deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64 deserialize_char deserialize_str deserialize_string deserialize_bytes
        deserialize_byte_buf deserialize_option deserialize_unit deserialize_seq deserialize_identifier
        deserialize_ignored_any
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.first()
            .deserialize_unit_struct(name, visitor)
            .map_err(|e| self.in_first(e))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor
            .visit_newtype_struct(self.first())
            .map_err(|e| self.in_first(e))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.by_position(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.by_position(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_map(Columns {
            row: self.row,
            columns: self.columns,
            next: 0,
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.first()
            .deserialize_enum(name, variants, visitor)
            .map_err(|e| self.in_first(e))
    }
}

/// A row's columns one after the other: by name for a map or a struct, by position for a tuple.
struct Columns<'a, 'stmt> {
    row: &'a Row<'stmt>,
    columns: &'a [String],
    /// The next column to hand over.
    next: usize,
}

impl<'a, 'stmt> Columns<'a, 'stmt> {
    /// Deserializes the next column with `seed`, naming the column in any error; the column is then done.
    fn next_value<'de, S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, DeError> {
        let index = self.next;
        self.next += 1;
        seed.deserialize(ValueDeserializer {
            row: self.row,
            index,
        })
        .map_err(|e| e.in_column(&self.columns[index]))
    }
}

impl<'de> MapAccess<'de> for Columns<'_, '_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some(name) = self.columns.get(self.next) else {
            return Ok(None);
        };
        let key: StrDeserializer<'_, DeError> = name.as_str().into_deserializer();
        seed.deserialize(key)
            .map(Some)
            .map_err(|e| e.in_column(name))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        self.next_value(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.columns.len() - self.next)
    }
}

impl<'de> SeqAccess<'de> for Columns<'_, '_> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        if self.next == self.columns.len() {
            return Ok(None);
        }
        self.next_value(seed).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.columns.len() - self.next)
    }
}

/// One column's value.
struct ValueDeserializer<'a, 'stmt> {
    row: &'a Row<'stmt>,
    index: usize,
}

impl ValueDeserializer<'_, '_> {
    /// The value as SQLite stored it.
    fn value(&self) -> Result<ValueRef<'_>, DeError> {
        self.row.get_ref(self.index).map_err(DeError::Sqlite)
    }
}

/// Hands `value` to `visitor` as the type SQLite stored it as.
fn visit<'de, V: Visitor<'de>>(value: ValueRef<'_>, visitor: V) -> Result<V::Value, DeError> {
    match value {
        ValueRef::Null => visitor.visit_none(),
        ValueRef::Integer(i) => visitor.visit_i64(i),
        ValueRef::Real(f) => visitor.visit_f64(f),
        ValueRef::Text(_) => visitor.visit_str(text(value)?),
        // A sequence of bytes, which is what `Vec<u8>` asks for.
        ValueRef::Blob(bytes) => visitor.visit_seq(SeqDeserializer::new(bytes.iter().copied())),
    }
}

/// A `TEXT` value as a string: SQLite does not check that text is UTF-8.
fn text<'v>(value: ValueRef<'v>) -> Result<&'v str, DeError> {
    value.as_str().map_err(de::Error::custom)
}

impl<'de> de::Deserializer<'de> for ValueDeserializer<'_, '_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visit(self.value()?, visitor)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.value()? {
            ValueRef::Integer(i) => visitor.visit_bool(i != 0),
            ValueRef::Real(f) => visitor.visit_bool(f != 0.0),
            other => visit(other, visitor),
        }
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.value()? {
            ValueRef::Null => visitor.visit_f32(f32::NAN),
            other => visit(other, visitor),
        }
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.value()? {
            ValueRef::Null => visitor.visit_f64(f64::NAN),
            other => visit(other, visitor),
        }
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.value()? {
            ValueRef::Blob(bytes) => visitor.visit_bytes(bytes),
            other => visit(other, visitor),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.value()? {
            ValueRef::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.value()? {
            ValueRef::Null => visitor.visit_unit(),
            other => visit(other, visitor),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self.value()? {
            value @ ValueRef::Text(_) if text(value)? == name => visitor.visit_unit(),
            other => visit(other, visitor),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self.value()? {
            value @ ValueRef::Text(_) => visitor.visit_enum(UnitVariant(text(value)?)),
            other => Err(de::Error::invalid_type(
                unexpected(&other),
                &"a variant's name",
            )),
        }
    }

    forward_to_deserialize_any! {
        i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 char str string seq tuple tuple_struct map struct identifier
        ignored_any
    }
}

/// How serde names a value of the wrong type in its message.
fn unexpected<'v>(value: &'v ValueRef<'_>) -> de::Unexpected<'v> {
    match value {
        ValueRef::Null => de::Unexpected::Option,
        ValueRef::Integer(i) => de::Unexpected::Signed(*i),
        ValueRef::Real(f) => de::Unexpected::Float(*f),
        ValueRef::Text(_) => de::Unexpected::Other("text"),
        ValueRef::Blob(bytes) => de::Unexpected::Bytes(bytes),
    }
}

/// An enum stored as its variant's name: only unit variants have nothing else to read.
struct UnitVariant<'v>(&'v str);

impl<'de> EnumAccess<'de> for UnitVariant<'_> {
    type Error = DeError;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), DeError> {
        let name: StrDeserializer<'_, DeError> = self.0.into_deserializer();
        seed.deserialize(name).map(|v| (v, self))
    }
}

impl<'de> VariantAccess<'de> for UnitVariant<'_> {
    type Error = DeError;

    fn unit_variant(self) -> Result<(), DeError> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _seed: T) -> Result<T::Value, DeError> {
        Err(de::Error::invalid_type(
            de::Unexpected::UnitVariant,
            &"a newtype variant",
        ))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _visitor: V) -> Result<V::Value, DeError> {
        Err(de::Error::invalid_type(
            de::Unexpected::UnitVariant,
            &"a tuple variant",
        ))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, DeError> {
        Err(de::Error::invalid_type(
            de::Unexpected::UnitVariant,
            &"a struct variant",
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rusqlite::Connection;
    use serde::Deserialize;

    use super::*;

    /// Runs `sql` (one row) and deserializes its row into a `T`.
    fn row<T: DeserializeOwned>(sql: &str) -> Result<T, Error> {
        let conn = Connection::open_in_memory().unwrap();
        let mut stmt = conn.prepare(sql).unwrap();
        let columns = column_names(&stmt);
        let mut rows = stmt.query([]).unwrap();
        let row = rows.next().unwrap().expect("one row");
        from_row(row, &columns)
    }

    /// The column and message of a decode error.
    fn decode_error<T: DeserializeOwned + fmt::Debug>(sql: &str) -> (Option<String>, String) {
        match row::<T>(sql) {
            Err(Error::Decode { column, message }) => (column, message),
            other => panic!("expected a decode error, got {other:?}"),
        }
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Item {
        id: i64,
        price: f64,
        name: String,
        payload: Vec<u8>,
        note: Option<String>,
        in_stock: bool,
    }

    #[test]
    fn a_struct_takes_its_fields_by_column_name_in_any_order() {
        let item: Item = row(
            "SELECT 'tea' AS name, x'00ff' AS payload, NULL AS note, 1 AS in_stock, 2.5 AS price, 7 AS id",
        )
        .unwrap();
        assert_eq!(
            item,
            Item {
                id: 7,
                price: 2.5,
                name: "tea".into(),
                payload: vec![0, 255],
                note: None,
                in_stock: true
            }
        );
    }

    #[test]
    fn columns_no_field_names_are_skipped_and_a_missing_one_is_an_error() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Id {
            id: i64,
        }
        assert_eq!(row::<Id>("SELECT 1 AS other, 2 AS id").unwrap().id, 2);
        let (column, message) = decode_error::<Id>("SELECT 1 AS other");
        assert_eq!(column, None);
        assert_eq!(message, "missing field `id`");
    }

    #[test]
    fn a_value_that_does_not_fit_names_its_column() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Strict {
            id: i64,
            price: i64,
        }
        let (column, message) = decode_error::<Strict>("SELECT 1 AS id, 'free' AS price");
        assert_eq!(column.as_deref(), Some("price"));
        assert_eq!(message, "invalid type: string \"free\", expected i64");
        let (column, message) = decode_error::<Strict>("SELECT 1 AS id, 2.5 AS price");
        assert_eq!(column.as_deref(), Some("price"));
        assert_eq!(message, "invalid type: floating point `2.5`, expected i64");
        let (column, message) = decode_error::<Strict>("SELECT NULL AS id, 1 AS price");
        assert_eq!(column.as_deref(), Some("id"));
        assert_eq!(message, "invalid type: Option value, expected i64");
    }

    #[test]
    fn narrow_integers_are_range_checked_and_floats_take_integers() {
        #[derive(Debug, Deserialize)]
        struct Narrow {
            small: u8,
            ratio: f32,
        }
        let n: Narrow = row("SELECT 200 AS small, 3 AS ratio").unwrap();
        assert_eq!((n.small, n.ratio), (200, 3.0));
        let (column, message) = decode_error::<Narrow>("SELECT 300 AS small, 3 AS ratio");
        assert_eq!(column.as_deref(), Some("small"));
        assert_eq!(message, "invalid value: integer `300`, expected u8");
        let (column, _) = decode_error::<Narrow>("SELECT -1 AS small, 3 AS ratio");
        assert_eq!(column.as_deref(), Some("small"));
    }

    #[test]
    fn null_is_none_for_an_option_nan_for_a_float_and_an_error_otherwise() {
        assert_eq!(row::<Option<i64>>("SELECT NULL").unwrap(), None);
        assert_eq!(row::<Option<i64>>("SELECT 4").unwrap(), Some(4));
        assert!(row::<f64>("SELECT NULL").unwrap().is_nan());
        row::<()>("SELECT NULL").unwrap();
        let (column, message) = decode_error::<String>("SELECT NULL AS s");
        // A single value is the first column, and its errors name it too.
        assert_eq!(column.as_deref(), Some("s"), "{message}");
        assert_eq!(message, "invalid type: Option value, expected a string");
    }

    #[test]
    fn bool_takes_integers_and_reals_zero_being_false() {
        assert!(!row::<bool>("SELECT 0").unwrap());
        assert!(row::<bool>("SELECT -3").unwrap());
        assert!(!row::<bool>("SELECT 0.0").unwrap());
        assert!(row::<bool>("SELECT 0.5").unwrap());
        assert!(matches!(
            row::<bool>("SELECT 'yes'"),
            Err(Error::Decode { .. })
        ));
    }

    #[test]
    fn blobs_are_vectors_of_bytes_and_text_is_not() {
        assert_eq!(row::<Vec<u8>>("SELECT x'010203'").unwrap(), vec![1, 2, 3]);
        assert_eq!(row::<Vec<u8>>("SELECT x''").unwrap(), Vec::<u8>::new());
        assert!(matches!(
            row::<Vec<u8>>("SELECT 'abc'"),
            Err(Error::Decode { .. })
        ));
        // Text that is not UTF-8 (SQLite does not check) is refused, not mangled.
        let (column, message) = decode_error::<Item>(
            "SELECT 1 AS id, 1.0 AS price, CAST(x'ff' AS TEXT) AS name, x'' AS payload, NULL AS note, 0 AS in_stock",
        );
        assert_eq!(column.as_deref(), Some("name"));
        assert!(message.contains("utf-8"), "{message}");
    }

    #[test]
    fn tuples_take_the_columns_by_position() {
        let t: (i64, String, Option<f64>) = row("SELECT 1, 'a', NULL").unwrap();
        assert_eq!(t, (1, "a".to_string(), None));
        #[derive(Debug, PartialEq, Deserialize)]
        struct Pair(i64, String);
        assert_eq!(row::<Pair>("SELECT 2, 'b'").unwrap(), Pair(2, "b".into()));
        // Too few columns for the tuple is serde's length error.
        let (_, message) = decode_error::<(i64, i64, i64)>("SELECT 1, 2");
        assert!(message.contains("invalid length 2"), "{message}");
    }

    #[test]
    fn newtypes_and_unit_enums_read_through() {
        #[derive(Debug, PartialEq, Deserialize)]
        struct UserId(i64);
        #[derive(Debug, PartialEq, Deserialize)]
        #[serde(rename_all = "lowercase")]
        enum Status {
            Active,
            Closed,
        }
        #[derive(Debug, PartialEq, Deserialize)]
        struct Account {
            id: UserId,
            status: Status,
        }
        assert_eq!(row::<UserId>("SELECT 9").unwrap(), UserId(9));
        assert_eq!(
            row::<Account>("SELECT 3 AS id, 'closed' AS status").unwrap(),
            Account {
                id: UserId(3),
                status: Status::Closed
            }
        );
        assert_eq!(row::<Status>("SELECT 'active'").unwrap(), Status::Active);
        let (column, message) = decode_error::<Account>("SELECT 3 AS id, 'gone' AS status");
        assert_eq!(column.as_deref(), Some("status"));
        assert_eq!(
            message,
            "unknown variant `gone`, expected `active` or `closed`"
        );
        let (column, message) = decode_error::<Account>("SELECT 3 AS id, 1 AS status");
        assert_eq!(column.as_deref(), Some("status"));
        assert_eq!(
            message,
            "invalid type: integer `1`, expected a variant's name"
        );
    }

    #[test]
    fn a_map_takes_every_column_by_name() {
        let map: BTreeMap<String, Option<i64>> = row("SELECT 1 AS a, NULL AS b").unwrap();
        assert_eq!(
            map,
            BTreeMap::from([("a".into(), Some(1)), ("b".into(), None)])
        );
    }

    #[test]
    fn a_flattened_structs_error_still_says_what_did_not_fit() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Outer {
            #[serde(flatten)]
            inner: Inner,
        }
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Inner {
            n: u8,
        }
        // Flattening buffers the columns, so serde reports the field; the message still says what did not fit.
        match row::<Outer>("SELECT 999 AS n") {
            Err(e @ Error::Decode { .. }) => assert!(e.to_string().contains("999"), "{e}"),
            other => panic!("expected a decode error, got {other:?}"),
        }
    }
}
