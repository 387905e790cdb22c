//! Venues: seating charts created once by an admin, immutable after, cached
//! by every instance like shows.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use domain::ids::VenueId;
use domain::venue::Venue;
use projections::time::to_micros;

use super::definition::VenueDefinition;
use super::kept::Kept;
use super::{CreateShowError, Created};
use crate::store::{ShowInsert, Shows, StoreError};

/// Venues kept parsed in memory: a show on a venue is resolved through it
/// when it is loaded, and an arena's tours put many shows on one chart.
pub const VENUE_CACHE_CAPACITY: usize = 32;

/// A venue as the service holds it: validated, plus its canonical JSON.
pub struct VenueEntry {
    pub venue: Venue,
    pub definition_json: String,
}

impl VenueEntry {
    /// The venue as `GET /v1/venues/{id}` answers it: the definition with
    /// its id first.
    pub fn to_json(&self) -> String {
        let rest = self.definition_json.strip_prefix('{').unwrap_or("}");
        let id = serde_json::Value::String(self.venue.venue_id.to_string());
        format!("{{\"venue_id\":{id},{rest}")
    }
}

fn parse_venue(venue_id: &VenueId, json: String) -> Result<VenueEntry, StoreError> {
    let definition: VenueDefinition = serde_json::from_str(&json)
        .map_err(|e| StoreError::Corrupt(format!("venue {venue_id}: {e}")))?;
    let venue = definition
        .to_venue(venue_id.clone())
        .map_err(|e| StoreError::Corrupt(format!("venue {venue_id}: {e}")))?;
    Ok(VenueEntry {
        venue,
        definition_json: json,
    })
}

pub struct VenueCatalog {
    shows: Shows,
    cache: Kept<VenueId, VenueEntry>,
}

impl VenueCatalog {
    pub fn new(shows: Shows) -> Self {
        Self {
            shows,
            cache: Kept::new(VENUE_CACHE_CAPACITY),
        }
    }

    fn cached(&self, venue_id: &VenueId) -> Option<Arc<VenueEntry>> {
        self.cache.get(venue_id)
    }

    fn remember(&self, entry: VenueEntry) -> Arc<VenueEntry> {
        self.cache.keep(entry.venue.venue_id.clone(), entry)
    }

    pub async fn get(&self, venue_id: &VenueId) -> Result<Option<Arc<VenueEntry>>, StoreError> {
        if let Some(entry) = self.cached(venue_id) {
            return Ok(Some(entry));
        }
        match self.shows.venue_definition(venue_id).await? {
            Some(json) => Ok(Some(self.remember(parse_venue(venue_id, json)?))),
            None => Ok(None),
        }
    }

    /// `PUT /v1/venues/{id}`: the same definition again is `Same`, another
    /// one `Exists`.
    pub async fn create(
        &self,
        venue_id: VenueId,
        definition: &VenueDefinition,
        now: DateTime<Utc>,
    ) -> Result<(Created, Arc<VenueEntry>), CreateShowError> {
        let venue = definition.to_venue(venue_id.clone())?;
        let json = serde_json::to_string(definition)
            .map_err(|e| StoreError::Corrupt(format!("cannot serialize venue: {e}")))?;
        match self
            .shows
            .insert_venue(&venue_id, &json, to_micros(now))
            .await?
        {
            ShowInsert::Created => {
                let entry = self.remember(VenueEntry {
                    venue,
                    definition_json: json,
                });
                Ok((Created::New, entry))
            }
            ShowInsert::Exists(stored) => {
                let same = serde_json::from_str::<serde_json::Value>(&stored).ok()
                    == serde_json::from_str::<serde_json::Value>(&json).ok();
                if !same {
                    return Err(CreateShowError::VenueExists);
                }
                let entry = match self.cached(&venue_id) {
                    Some(entry) => entry,
                    None => self.remember(parse_venue(&venue_id, stored)?),
                };
                Ok((Created::Same, entry))
            }
        }
    }
}
