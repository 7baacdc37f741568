//! [`AppCounts`]: the providers' applications counted as providers come and go, so that a
//! change reads the changed providers only.

use std::collections::{BTreeMap, BTreeSet};

use routechain_core::Url;

/// The providers' applications, counted: tag rules are read under the providers'
/// application ([`AppCounts::application`]) and a mesh entry without `app` reads the mesh
/// rule of every application present ([`AppCounts::applications`]). Kept up to date as
/// providers come and go, at the cost of the changed providers only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AppCounts {
    /// Providers per `application` (non-empty).
    app: Counts,
    /// Providers per `remote.application`, else `application` (non-empty, not `unknown`):
    /// the mesh router's application of a provider.
    each: Counts,
}

/// Counts by key, in key order: a sorted vector of exactly its entries while there are at
/// most [`SMALL_COUNTS`] keys (a service's providers have one application or a few, and a
/// map would allocate its first node, a few hundred bytes, in every live chain), a map
/// beyond (a list of many applications costs a logarithm per change, never a shift of a
/// long vector).
#[derive(Debug, Clone)]
enum Counts {
    Small(Vec<(Box<str>, usize)>),
    Large(BTreeMap<Box<str>, usize>),
}

/// The most keys [`Counts`] keeps in a vector.
const SMALL_COUNTS: usize = 8;

impl Default for Counts {
    fn default() -> Self {
        Counts::Small(Vec::new())
    }
}

impl PartialEq for Counts {
    /// The same keys with the same counts, whatever the form.
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Counts {}

impl Counts {
    /// Every key with its count, in key order.
    fn iter(&self) -> Box<dyn Iterator<Item = (&str, usize)> + '_> {
        match self {
            Counts::Small(v) => Box::new(v.iter().map(|(k, n)| (&**k, *n))),
            Counts::Large(m) => Box::new(m.iter().map(|(k, n)| (&**k, *n))),
        }
    }

    /// Counts `key` in.
    fn up(&mut self, key: &str) {
        match self {
            Counts::Small(v) => match v.binary_search_by(|(k, _)| (**k).cmp(key)) {
                Ok(i) => v[i].1 += 1,
                Err(_) if v.len() >= SMALL_COUNTS => {
                    let mut m: BTreeMap<Box<str>, usize> = std::mem::take(v).into_iter().collect();
                    m.insert(key.into(), 1);
                    *self = Counts::Large(m);
                }
                Err(i) => {
                    v.reserve_exact(1);
                    v.insert(i, (key.into(), 1));
                }
            },
            Counts::Large(m) => match m.get_mut(key) {
                Some(n) => *n += 1,
                None => {
                    m.insert(key.into(), 1);
                }
            },
        }
    }

    /// Counts `key` out (a key no longer counted leaves).
    fn down(&mut self, key: &str) {
        match self {
            Counts::Small(v) => {
                if let Ok(i) = v.binary_search_by(|(k, _)| (**k).cmp(key)) {
                    v[i].1 -= 1;
                    if v[i].1 == 0 {
                        v.remove(i);
                    }
                }
            }
            Counts::Large(m) => {
                if let Some(n) = m.get_mut(key) {
                    *n -= 1;
                    if *n == 0 {
                        m.remove(key);
                    }
                }
            }
        }
    }
}

impl AppCounts {
    /// The counts of `providers`.
    pub(crate) fn of<'a>(providers: impl IntoIterator<Item = &'a Url>) -> Self {
        let mut counts = AppCounts::default();
        for p in providers {
            counts.add(p);
        }
        counts
    }

    /// A provider's `application`, and its application as the mesh router sees it
    /// (`remote.application`, else `application`; the mesh router's `application_of`,
    /// restated here: the live crate does not depend on the routers).
    fn keys(p: &Url) -> (Option<&str>, Option<&str>) {
        let app = p.param("application").filter(|a| !a.is_empty());
        let each = p
            .param("remote.application")
            .filter(|a| !a.is_empty())
            .or(app)
            .filter(|a| !a.is_empty() && *a != "unknown");
        (app, each)
    }

    /// Counts provider `p` in.
    pub(crate) fn add(&mut self, p: &Url) {
        let (app, each) = Self::keys(p);
        if let Some(k) = app {
            self.app.up(k);
        }
        if let Some(k) = each {
            self.each.up(k);
        }
    }

    /// Counts provider `p` out.
    pub(crate) fn remove(&mut self, p: &Url) {
        let (app, each) = Self::keys(p);
        if let Some(k) = app {
            self.app.down(k);
        }
        if let Some(k) = each {
            self.each.down(k);
        }
    }

    /// The providers' application: the `application` of the most providers, the
    /// alphabetically first on a tie (see [`crate::providers_application`]).
    pub(crate) fn application(&self) -> Option<String> {
        most(self.app.iter())
    }

    /// Every provider application present.
    pub(crate) fn applications(&self) -> BTreeSet<String> {
        self.each.iter().map(|(k, _)| k.to_string()).collect()
    }
}

/// The key with the largest count, the first one on a tie (`counts` in key order).
fn most<'a>(counts: impl Iterator<Item = (&'a str, usize)>) -> Option<String> {
    let mut best: Option<(&str, usize)> = None;
    for (k, n) in counts {
        if best.is_none_or(|(_, m)| n > m) {
            best = Some((k, n));
        }
    }
    best.map(|(k, _)| k.to_string())
}

#[cfg(test)]
mod tests;
