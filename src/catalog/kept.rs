//! Definitions kept parsed in memory, up to a capacity. Shows and venues
//! never change once created, so any one may be dropped to make room and
//! read again when asked for: the cache needs no invalidation.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, RwLock};

pub(crate) struct Kept<K, V> {
    capacity: usize,
    map: RwLock<HashMap<K, Arc<V>>>,
}

impl<K: Hash + Eq + Clone, V> Kept<K, V> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            map: RwLock::default(),
        }
    }

    pub(crate) fn get(&self, key: &K) -> Option<Arc<V>> {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        map.get(key).cloned()
    }

    /// Keeps `value` under `key`, dropping another one if full.
    pub(crate) fn keep(&self, key: K, value: V) -> Arc<V> {
        let value = Arc::new(value);
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        if map.len() >= self.capacity && !map.contains_key(&key) {
            if let Some(victim) = map.keys().next().cloned() {
                map.remove(&victim);
            }
        }
        map.insert(key, value.clone());
        value
    }
}
