//! A flat row (a struct of plain fields, the one named type of a table's
//! row) field by field, for the bulk writes of a rebuild: as PostgreSQL
//! `COPY ... FROM STDIN` text ([`CopyText`]) or as SQL parameters
//! ([`SqlValues`]). The type's serde form is the one source of its columns,
//! as everywhere else (field names are the column names, in order).

use std::fmt::{self, Write as _};

use serde::ser::{self, Impossible, Serialize};

use super::StoreError;

/// Rows of one table in COPY text, with the columns they carry.
#[derive(Default)]
pub struct CopyText {
    columns: Vec<&'static str>,
    text: String,
}

impl CopyText {
    /// Appends `row` (a struct of plain fields) as one line.
    pub fn push<T: Serialize>(&mut self, row: &T) -> Result<(), StoreError> {
        push_row(
            row,
            &mut TextSink(&mut self.text),
            &mut self.columns,
            "COPY text",
        )
    }

    /// The column list of the rows pushed, as `COPY` names it: `a, b, c`.
    pub fn columns(&self) -> String {
        self.columns.join(", ")
    }

    /// Bytes of text held.
    pub fn len(&self) -> usize {
        self.text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The text so far, leaving the buffer empty (the column list stays).
    pub fn take(&mut self) -> String {
        std::mem::take(&mut self.text)
    }
}

/// One SQL parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
}

/// Rows as SQL parameters, row after row, with the columns they carry.
#[derive(Default)]
pub struct SqlValues {
    columns: Vec<&'static str>,
    values: Vec<SqlValue>,
    rows: usize,
}

impl SqlValues {
    /// Appends `row` (a struct of plain fields) as its fields' values.
    pub fn push<T: Serialize>(&mut self, row: &T) -> Result<(), StoreError> {
        push_row(
            row,
            &mut ValueSink(&mut self.values),
            &mut self.columns,
            "SQL parameters",
        )?;
        self.rows += 1;
        Ok(())
    }

    /// The column names of the rows pushed, in order.
    pub fn columns(&self) -> &[&'static str] {
        &self.columns
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The values so far, leaving none (the column list stays).
    pub fn take(&mut self) -> Vec<SqlValue> {
        self.rows = 0;
        std::mem::take(&mut self.values)
    }
}

/// Serializes `row` into `sink`, recording its column names in `columns`
/// the first time (every row of a table has the same).
fn push_row<T: Serialize>(
    row: &T,
    sink: &mut impl Sink,
    columns: &mut Vec<&'static str>,
    form: &str,
) -> Result<(), StoreError> {
    let record = columns.is_empty();
    row.serialize(RowSerializer {
        sink,
        columns: record.then_some(columns),
    })
    .map_err(|e| StoreError::Corrupt(format!("a row as {form}: {e}")))
}

/// Where a row's fields go.
trait Sink {
    /// Before each field but the first.
    fn separate(&mut self);
    fn end_row(&mut self);
    fn null(&mut self);
    fn text(&mut self, value: &str);
    fn integer(&mut self, value: i64);
    /// An unsigned integer too large for `i64` has no SQL form here.
    fn unsigned(&mut self, value: u64) -> Result<(), FlatError> {
        let value = i64::try_from(value).map_err(|_| unsupported("an integer above i64"))?;
        self.integer(value);
        Ok(())
    }
    fn real(&mut self, value: f64);
    fn boolean(&mut self, value: bool);
}

/// COPY text: tab-separated, `\N` for NULL, one line a row.
struct TextSink<'a>(&'a mut String);

impl Sink for TextSink<'_> {
    fn separate(&mut self) {
        self.0.push('\t');
    }
    fn end_row(&mut self) {
        self.0.push('\n');
    }
    fn null(&mut self) {
        self.0.push_str("\\N");
    }
    fn text(&mut self, value: &str) {
        escape(self.0, value);
    }
    fn integer(&mut self, value: i64) {
        // Writing to a String cannot fail.
        let _ = write!(self.0, "{value}");
    }
    fn real(&mut self, value: f64) {
        let _ = write!(self.0, "{value}");
    }
    fn boolean(&mut self, value: bool) {
        self.0.push(if value { 't' } else { 'f' });
    }
}

/// SQL parameters, field after field.
struct ValueSink<'a>(&'a mut Vec<SqlValue>);

impl Sink for ValueSink<'_> {
    fn separate(&mut self) {}
    fn end_row(&mut self) {}
    fn null(&mut self) {
        self.0.push(SqlValue::Null);
    }
    fn text(&mut self, value: &str) {
        self.0.push(SqlValue::Text(value.to_owned()));
    }
    fn integer(&mut self, value: i64) {
        self.0.push(SqlValue::Integer(value));
    }
    fn real(&mut self, value: f64) {
        self.0.push(SqlValue::Real(value));
    }
    fn boolean(&mut self, value: bool) {
        self.0.push(SqlValue::Integer(i64::from(value)));
    }
}

/// Why a value is not a plain field.
#[derive(Debug)]
pub struct FlatError(String);

impl fmt::Display for FlatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FlatError {}

impl ser::Error for FlatError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        FlatError(msg.to_string())
    }
}

fn unsupported(what: &str) -> FlatError {
    FlatError(format!("{what} is not a plain field"))
}

/// `value` with the text format's escapes: the delimiter, the line ends and
/// the escape character itself.
fn escape(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
}

struct RowSerializer<'a> {
    sink: &'a mut dyn Sink,
    /// Filled with the field names while the first row is written.
    columns: Option<&'a mut Vec<&'static str>>,
}

struct RowFields<'a> {
    sink: &'a mut dyn Sink,
    columns: Option<&'a mut Vec<&'static str>>,
    first: bool,
}

impl<'a> ser::SerializeStruct for RowFields<'a> {
    type Ok = ();
    type Error = FlatError;

    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), FlatError> {
        if let Some(columns) = self.columns.as_deref_mut() {
            columns.push(key);
        }
        if !self.first {
            self.sink.separate();
        }
        self.first = false;
        value.serialize(FieldSerializer { sink: self.sink })
    }

    fn end(self) -> Result<(), FlatError> {
        self.sink.end_row();
        Ok(())
    }
}

/// Implements every `serialize_*` of a serializer that only takes a struct
/// (a row) or only plain values (a field) by refusing the rest.
macro_rules! refuse {
    ($($method:ident($($arg:ty),*) -> $ok:ty;)*) => {
        $(fn $method(self, $(_: $arg),*) -> Result<$ok, FlatError> {
            Err(unsupported(stringify!($method)))
        })*
    };
}

impl<'a> ser::Serializer for RowSerializer<'a> {
    type Ok = ();
    type Error = FlatError;
    type SerializeSeq = Impossible<(), FlatError>;
    type SerializeTuple = Impossible<(), FlatError>;
    type SerializeTupleStruct = Impossible<(), FlatError>;
    type SerializeTupleVariant = Impossible<(), FlatError>;
    type SerializeMap = Impossible<(), FlatError>;
    type SerializeStruct = RowFields<'a>;
    type SerializeStructVariant = Impossible<(), FlatError>;

    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<RowFields<'a>, FlatError> {
        Ok(RowFields {
            sink: self.sink,
            columns: self.columns,
            first: true,
        })
    }

    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<(), FlatError> {
        Err(unsupported("a row that is an option"))
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<(), FlatError> {
        Err(unsupported("a row that is a newtype"))
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), FlatError> {
        Err(unsupported("a row that is a variant"))
    }

    refuse! {
        serialize_bool(bool) -> ();
        serialize_i8(i8) -> ();
        serialize_i16(i16) -> ();
        serialize_i32(i32) -> ();
        serialize_i64(i64) -> ();
        serialize_u8(u8) -> ();
        serialize_u16(u16) -> ();
        serialize_u32(u32) -> ();
        serialize_u64(u64) -> ();
        serialize_f32(f32) -> ();
        serialize_f64(f64) -> ();
        serialize_char(char) -> ();
        serialize_str(&str) -> ();
        serialize_bytes(&[u8]) -> ();
        serialize_none() -> ();
        serialize_unit() -> ();
        serialize_unit_struct(&'static str) -> ();
        serialize_unit_variant(&'static str, u32, &'static str) -> ();
        serialize_seq(Option<usize>) -> Self::SerializeSeq;
        serialize_tuple(usize) -> Self::SerializeTuple;
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant;
        serialize_map(Option<usize>) -> Self::SerializeMap;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant;
    }
}

/// One field: a string, a number, a unit variant (its serde name), an
/// option of one of those, or a newtype around one.
struct FieldSerializer<'a> {
    sink: &'a mut dyn Sink,
}

impl FieldSerializer<'_> {
    fn signed(self, value: i64) -> Result<(), FlatError> {
        self.sink.integer(value);
        Ok(())
    }
}

impl ser::Serializer for FieldSerializer<'_> {
    type Ok = ();
    type Error = FlatError;
    type SerializeSeq = Impossible<(), FlatError>;
    type SerializeTuple = Impossible<(), FlatError>;
    type SerializeTupleStruct = Impossible<(), FlatError>;
    type SerializeTupleVariant = Impossible<(), FlatError>;
    type SerializeMap = Impossible<(), FlatError>;
    type SerializeStruct = Impossible<(), FlatError>;
    type SerializeStructVariant = Impossible<(), FlatError>;

    fn serialize_bool(self, value: bool) -> Result<(), FlatError> {
        self.sink.boolean(value);
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), FlatError> {
        self.signed(i64::from(v))
    }
    fn serialize_i16(self, v: i16) -> Result<(), FlatError> {
        self.signed(i64::from(v))
    }
    fn serialize_i32(self, v: i32) -> Result<(), FlatError> {
        self.signed(i64::from(v))
    }
    fn serialize_i64(self, v: i64) -> Result<(), FlatError> {
        self.signed(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), FlatError> {
        self.sink.unsigned(u64::from(v))
    }
    fn serialize_u16(self, v: u16) -> Result<(), FlatError> {
        self.sink.unsigned(u64::from(v))
    }
    fn serialize_u32(self, v: u32) -> Result<(), FlatError> {
        self.sink.unsigned(u64::from(v))
    }
    fn serialize_u64(self, v: u64) -> Result<(), FlatError> {
        self.sink.unsigned(v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), FlatError> {
        self.sink.real(f64::from(v));
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<(), FlatError> {
        self.sink.real(v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), FlatError> {
        self.sink.text(v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), FlatError> {
        self.sink.text(v);
        Ok(())
    }
    fn serialize_none(self) -> Result<(), FlatError> {
        self.sink.null();
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), FlatError> {
        value.serialize(self)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), FlatError> {
        self.sink.text(variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), FlatError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), FlatError> {
        Err(unsupported("a variant with data"))
    }

    refuse! {
        serialize_bytes(&[u8]) -> ();
        serialize_unit() -> ();
        serialize_unit_struct(&'static str) -> ();
        serialize_seq(Option<usize>) -> Self::SerializeSeq;
        serialize_tuple(usize) -> Self::SerializeTuple;
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant;
        serialize_map(Option<usize>) -> Self::SerializeMap;
        serialize_struct(&'static str, usize) -> Self::SerializeStruct;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;

    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    enum State {
        OnHold,
    }

    #[derive(Serialize)]
    struct Id(String);

    #[derive(Serialize)]
    struct Row {
        id: Id,
        note: Option<String>,
        gone: Option<i64>,
        count: u32,
        state: State,
    }

    #[test]
    fn a_row_is_one_line_of_escaped_fields_named_by_the_type() {
        let mut copy = CopyText::default();
        let row = |note: &str| Row {
            id: Id("a\tb".into()),
            note: Some(note.into()),
            gone: None,
            count: 7,
            state: State::OnHold,
        };
        copy.push(&row("line\nback\\slash\r")).unwrap();
        copy.push(&row("plain")).unwrap();
        assert_eq!(copy.columns(), "id, note, gone, count, state");
        assert_eq!(
            copy.take(),
            "a\\tb\tline\\nback\\\\slash\\r\t\\N\t7\ton_hold\n\
             a\\tb\tplain\t\\N\t7\ton_hold\n"
        );
    }

    #[test]
    fn a_row_is_its_fields_as_sql_parameters() {
        let mut values = SqlValues::default();
        values
            .push(&Row {
                id: Id("a\tb".into()),
                note: None,
                gone: Some(-3),
                count: 7,
                state: State::OnHold,
            })
            .unwrap();
        assert_eq!(values.columns(), ["id", "note", "gone", "count", "state"]);
        assert_eq!(values.rows(), 1);
        assert_eq!(
            values.take(),
            [
                SqlValue::Text("a\tb".into()),
                SqlValue::Null,
                SqlValue::Integer(-3),
                SqlValue::Integer(7),
                SqlValue::Text("on_hold".into()),
            ]
        );
    }

    #[test]
    fn a_value_that_is_not_plain_is_refused() {
        #[derive(Serialize)]
        struct Nested {
            inner: Vec<u8>,
        }
        let mut copy = CopyText::default();
        assert!(copy.push(&Nested { inner: vec![1] }).is_err());
    }
}
