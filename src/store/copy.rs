//! Rows as PostgreSQL `COPY ... FROM STDIN` text, for the bulk write of a
//! rebuild. A row type's serde form is the one source of its columns, as
//! everywhere else (field names are the column names): one flat struct
//! becomes one line of tab-separated fields, `\N` for `None`, with the text
//! format's escapes; the field names, in order, are the COPY column list.

use std::fmt::{self, Write as _};

use serde::ser::{self, Impossible, Serialize};

use super::StoreError;

/// Rows of one table in COPY text, with the columns they carry.
#[derive(Default)]
pub struct CopyText {
    columns: Vec<&'static str>,
    text: String,
    rows: usize,
}

impl CopyText {
    /// Appends `row` (a struct of plain fields) as one line.
    pub fn push<T: Serialize>(&mut self, row: &T) -> Result<(), StoreError> {
        let record = self.rows == 0;
        row.serialize(RowSerializer {
            out: &mut self.text,
            columns: record.then_some(&mut self.columns),
        })
        .map_err(|e| StoreError::Corrupt(format!("a row as COPY text: {e}")))?;
        self.rows += 1;
        Ok(())
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

/// Why a value has no COPY text form.
#[derive(Debug)]
pub struct CopyError(String);

impl fmt::Display for CopyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CopyError {}

impl ser::Error for CopyError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        CopyError(msg.to_string())
    }
}

fn unsupported(what: &str) -> CopyError {
    CopyError(format!("{what} has no COPY text form"))
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
    out: &'a mut String,
    /// Filled with the field names while the first row is written.
    columns: Option<&'a mut Vec<&'static str>>,
}

struct RowFields<'a> {
    out: &'a mut String,
    columns: Option<&'a mut Vec<&'static str>>,
    first: bool,
}

impl<'a> ser::SerializeStruct for RowFields<'a> {
    type Ok = ();
    type Error = CopyError;

    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), CopyError> {
        if let Some(columns) = self.columns.as_deref_mut() {
            columns.push(key);
        }
        if !self.first {
            self.out.push('\t');
        }
        self.first = false;
        value.serialize(FieldSerializer { out: self.out })
    }

    fn end(self) -> Result<(), CopyError> {
        self.out.push('\n');
        Ok(())
    }
}

/// Implements every `serialize_*` of a serializer that only takes a struct
/// (a row) or only plain values (a field) by refusing the rest.
macro_rules! refuse {
    ($($method:ident($($arg:ty),*) -> $ok:ty;)*) => {
        $(fn $method(self, $(_: $arg),*) -> Result<$ok, CopyError> {
            Err(unsupported(stringify!($method)))
        })*
    };
}

impl<'a> ser::Serializer for RowSerializer<'a> {
    type Ok = ();
    type Error = CopyError;
    type SerializeSeq = Impossible<(), CopyError>;
    type SerializeTuple = Impossible<(), CopyError>;
    type SerializeTupleStruct = Impossible<(), CopyError>;
    type SerializeTupleVariant = Impossible<(), CopyError>;
    type SerializeMap = Impossible<(), CopyError>;
    type SerializeStruct = RowFields<'a>;
    type SerializeStructVariant = Impossible<(), CopyError>;

    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<RowFields<'a>, CopyError> {
        Ok(RowFields {
            out: self.out,
            columns: self.columns,
            first: true,
        })
    }

    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<(), CopyError> {
        Err(unsupported("a row that is an option"))
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<(), CopyError> {
        Err(unsupported("a row that is a newtype"))
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), CopyError> {
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
    out: &'a mut String,
}

impl FieldSerializer<'_> {
    fn number(self, value: impl fmt::Display) -> Result<(), CopyError> {
        write!(self.out, "{value}").map_err(|e| CopyError(e.to_string()))
    }
}

impl ser::Serializer for FieldSerializer<'_> {
    type Ok = ();
    type Error = CopyError;
    type SerializeSeq = Impossible<(), CopyError>;
    type SerializeTuple = Impossible<(), CopyError>;
    type SerializeTupleStruct = Impossible<(), CopyError>;
    type SerializeTupleVariant = Impossible<(), CopyError>;
    type SerializeMap = Impossible<(), CopyError>;
    type SerializeStruct = Impossible<(), CopyError>;
    type SerializeStructVariant = Impossible<(), CopyError>;

    fn serialize_bool(self, value: bool) -> Result<(), CopyError> {
        self.out.push(if value { 't' } else { 'f' });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), CopyError> {
        self.number(v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), CopyError> {
        self.number(v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), CopyError> {
        self.number(v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), CopyError> {
        self.number(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), CopyError> {
        self.number(v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), CopyError> {
        self.number(v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), CopyError> {
        self.number(v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), CopyError> {
        self.number(v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), CopyError> {
        self.number(v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), CopyError> {
        self.number(v)
    }
    fn serialize_char(self, v: char) -> Result<(), CopyError> {
        escape(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), CopyError> {
        escape(self.out, v);
        Ok(())
    }
    fn serialize_none(self) -> Result<(), CopyError> {
        self.out.push_str("\\N");
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), CopyError> {
        value.serialize(self)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), CopyError> {
        escape(self.out, variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), CopyError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), CopyError> {
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
    fn a_value_that_is_not_plain_is_refused() {
        #[derive(Serialize)]
        struct Nested {
            inner: Vec<u8>,
        }
        let mut copy = CopyText::default();
        assert!(copy.push(&Nested { inner: vec![1] }).is_err());
    }
}
