//! Money: a currency (an ISO 4217 code, parsed once) and amounts in it.
//!
//! Prices are integer cents throughout the service (hundredths of the
//! currency's main unit, as the API says). A payment provider wants the
//! currency's minor unit, which is a hundredth for most currencies, the unit
//! itself for some (JPY, KRW: exponent 0) and a thousandth for others (KWD,
//! BHD: exponent 3). [`Currency::minor_units`] converts, and refuses an
//! amount the currency cannot express (¥500.50), which a show's validation
//! refuses first.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Active ISO 4217 codes with their minor-unit exponent (the number of
/// decimals). Funds and precious metals (XAU, XDR, ...) are left out: no
/// ticket is sold in them.
#[rustfmt::skip]
const CURRENCIES: &[(&str, u8)] = &[
    ("AED", 2), ("AFN", 2), ("ALL", 2), ("AMD", 2), ("ANG", 2), ("AOA", 2), ("ARS", 2),
    ("AUD", 2), ("AWG", 2), ("AZN", 2), ("BAM", 2), ("BBD", 2), ("BDT", 2), ("BGN", 2),
    ("BHD", 3), ("BIF", 0), ("BMD", 2), ("BND", 2), ("BOB", 2), ("BRL", 2), ("BSD", 2),
    ("BTN", 2), ("BWP", 2), ("BYN", 2), ("BZD", 2), ("CAD", 2), ("CDF", 2), ("CHF", 2),
    ("CLP", 0), ("CNY", 2), ("COP", 2), ("CRC", 2), ("CUP", 2), ("CVE", 2), ("CZK", 2),
    ("DJF", 0), ("DKK", 2), ("DOP", 2), ("DZD", 2), ("EGP", 2), ("ERN", 2), ("ETB", 2),
    ("EUR", 2), ("FJD", 2), ("FKP", 2), ("GBP", 2), ("GEL", 2), ("GHS", 2), ("GIP", 2),
    ("GMD", 2), ("GNF", 0), ("GTQ", 2), ("GYD", 2), ("HKD", 2), ("HNL", 2), ("HTG", 2),
    ("HUF", 2), ("IDR", 2), ("ILS", 2), ("INR", 2), ("IQD", 3), ("IRR", 2), ("ISK", 0),
    ("JMD", 2), ("JOD", 3), ("JPY", 0), ("KES", 2), ("KGS", 2), ("KHR", 2), ("KMF", 0),
    ("KPW", 2), ("KRW", 0), ("KWD", 3), ("KYD", 2), ("KZT", 2), ("LAK", 2), ("LBP", 2),
    ("LKR", 2), ("LRD", 2), ("LSL", 2), ("LYD", 3), ("MAD", 2), ("MDL", 2), ("MGA", 2),
    ("MKD", 2), ("MMK", 2), ("MNT", 2), ("MOP", 2), ("MRU", 2), ("MUR", 2), ("MVR", 2),
    ("MWK", 2), ("MXN", 2), ("MYR", 2), ("MZN", 2), ("NAD", 2), ("NGN", 2), ("NIO", 2),
    ("NOK", 2), ("NPR", 2), ("NZD", 2), ("OMR", 3), ("PAB", 2), ("PEN", 2), ("PGK", 2),
    ("PHP", 2), ("PKR", 2), ("PLN", 2), ("PYG", 0), ("QAR", 2), ("RON", 2), ("RSD", 2),
    ("RUB", 2), ("RWF", 0), ("SAR", 2), ("SBD", 2), ("SCR", 2), ("SDG", 2), ("SEK", 2),
    ("SGD", 2), ("SHP", 2), ("SLE", 2), ("SOS", 2), ("SRD", 2), ("SSP", 2), ("STN", 2),
    ("SVC", 2), ("SYP", 2), ("SZL", 2), ("THB", 2), ("TJS", 2), ("TMT", 2), ("TND", 3),
    ("TOP", 2), ("TRY", 2), ("TTD", 2), ("TWD", 2), ("TZS", 2), ("UAH", 2), ("UGX", 0),
    ("USD", 2), ("UYU", 2), ("UZS", 2), ("VES", 2), ("VND", 0), ("VUV", 0), ("WST", 2),
    ("XAF", 0), ("XCD", 2), ("XOF", 0), ("XPF", 0), ("YER", 2), ("ZAR", 2), ("ZMW", 2),
    ("ZWL", 2),
];

/// A currency, by its ISO 4217 code. Written and shown in lower case, as
/// Stripe does (`"eur"`); parsed in either case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Currency {
    code: &'static str,
    exponent: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    #[error("{0:?} is not an ISO 4217 currency code (three letters, e.g. \"eur\")")]
    UnknownCurrency(String),
    #[error("{cents} cents cannot be paid in {currency}, which has no hundredths")]
    NotExpressible { cents: i64, currency: Currency },
}

impl Currency {
    /// The euro: a show's currency until one is set (`Show::with_currency`).
    pub const EUR: Currency = Currency {
        code: "EUR",
        exponent: 2,
    };

    pub fn parse(code: &str) -> Result<Self, MoneyError> {
        let upper = code.to_ascii_uppercase();
        CURRENCIES
            .iter()
            .find(|(known, _)| *known == upper)
            .map(|&(code, exponent)| Currency { code, exponent })
            .ok_or_else(|| MoneyError::UnknownCurrency(code.to_owned()))
    }

    /// The code in lower case (`eur`).
    pub fn code(&self) -> String {
        self.code.to_ascii_lowercase()
    }

    /// Decimals of the minor unit (2 for EUR, 0 for JPY, 3 for KWD).
    pub fn exponent(&self) -> u8 {
        self.exponent
    }

    /// `cents` (hundredths of the main unit) in the currency's minor unit,
    /// as a payment provider takes amounts.
    pub fn minor_units(&self, cents: i64) -> Result<i64, MoneyError> {
        match self.exponent {
            2 => Ok(cents),
            e if e > 2 => Ok(cents * 10_i64.pow(u32::from(e - 2))),
            e => {
                let per = 10_i64.pow(u32::from(2 - e));
                if cents % per == 0 {
                    Ok(cents / per)
                } else {
                    Err(MoneyError::NotExpressible {
                        cents,
                        currency: *self,
                    })
                }
            }
        }
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.code())
    }
}

impl Serialize for Currency {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.code())
    }
}

impl<'de> Deserialize<'de> for Currency {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let code = String::deserialize(deserializer)?;
        Currency::parse(&code).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_currency_is_parsed_in_either_case_and_written_in_lower_case() {
        let eur = Currency::parse("EUR").unwrap();
        assert_eq!(eur, Currency::parse("eur").unwrap());
        assert_eq!(eur.code(), "eur");
        assert_eq!(serde_json::to_string(&eur).unwrap(), "\"eur\"");
    }

    #[test]
    fn an_unknown_or_malformed_code_is_refused() {
        for bad in ["", "eu", "euro", "XYZ", "e1r", "XAU"] {
            assert!(Currency::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cents_become_the_minor_unit_of_the_currency() {
        assert_eq!(
            Currency::parse("eur").unwrap().minor_units(5_000),
            Ok(5_000)
        );
        assert_eq!(Currency::parse("jpy").unwrap().minor_units(50_000), Ok(500));
        assert_eq!(
            Currency::parse("kwd").unwrap().minor_units(1_250),
            Ok(12_500)
        );
    }

    #[test]
    fn an_amount_a_currency_cannot_express_is_refused() {
        let jpy = Currency::parse("jpy").unwrap();
        assert!(matches!(
            jpy.minor_units(50_050),
            Err(MoneyError::NotExpressible { .. })
        ));
    }

    #[test]
    fn every_code_is_three_upper_case_letters_and_listed_once() {
        let mut seen = std::collections::HashSet::new();
        for (code, exponent) in CURRENCIES {
            assert!(code.len() == 3 && code.chars().all(|c| c.is_ascii_uppercase()));
            assert!(*exponent <= 3, "{code}");
            assert!(seen.insert(code), "{code} twice");
        }
    }
}
