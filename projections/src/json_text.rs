//! A column holding a value as JSON text (`holds.items` is the first such
//! column and keeps its own type; later ones use this one): the row's serde
//! form carries the text, so the append document, the COPY of a replay and
//! a read back all see one string column.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JsonText<T>(pub T);

impl<T: Serialize> Serialize for JsonText<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = serde_json::to_string(&self.0).map_err(serde::ser::Error::custom)?;
        s.serialize_str(&text)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for JsonText<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        serde_json::from_str(&text)
            .map(JsonText)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn a_value_round_trips_through_its_text() {
        let value = JsonText(BTreeMap::from([("partner-x".to_string(), 40u32)]));
        let json = serde_json::to_string(&value).unwrap();
        assert_eq!(json, r#""{\"partner-x\":40}""#);
        let back: JsonText<BTreeMap<String, u32>> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, value);
    }
}
