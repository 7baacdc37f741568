//! The health table: thresholds, cool-downs, probation, lazy counters, ejection by rate,
//! the ejection cap and growing cool-downs.

use super::*;

#[test]
fn any_follows_marks_and_clears_including_repeats() {
    let set = DegradedSet::new(130);
    assert!(!set.any());
    set.mark(200); // out of range: ignored
    assert!(!set.any());
    set.mark(3);
    set.mark(3);
    set.mark(129);
    assert!(set.any());
    set.clear(3);
    assert!(set.any(), "129 is still degraded");
    set.clear(3);
    set.clear(7); // never marked
    assert!(set.any());
    set.clear(129);
    assert!(!set.any());
    assert!(!set.contains(3) && !set.contains(129));
    set.mark(64);
    assert!(set.any() && set.contains(64));
}

#[test]
fn threshold_cooldown_probation() {
    let config = HealthConfig {
        failure_threshold: 3,
        cooldown: Duration::from_secs(10),
        ..HealthConfig::default()
    };
    let t = HealthTable::new(Arc::new(DegradedSet::new(2)));
    let now = Duration::from_secs(1);
    assert_eq!(t.failure(0, now, &config), HealthChange::None);
    assert_eq!(t.failure(0, now, &config), HealthChange::None);
    t.success(0, now, &config); // resets the count
    assert_eq!(t.failure(0, now, &config), HealthChange::None);
    assert_eq!(t.failure(0, now, &config), HealthChange::None);
    assert!(!t.degraded().contains(0));
    assert_eq!(t.failure(0, now, &config), HealthChange::Degraded);
    assert!(t.degraded().contains(0));
    assert_eq!(t.next_expiry(), Some(Duration::from_secs(11)));
    assert_eq!(t.expire(Duration::from_secs(10)), 0);
    assert!(t.degraded().contains(0));
    assert_eq!(t.expire(Duration::from_secs(11)), 1);
    assert!(!t.degraded().contains(0));
    assert!(t.get(0).probation);
    assert_eq!(t.next_expiry(), None);
    // On probation one failure degrades again.
    assert_eq!(
        t.failure(0, Duration::from_secs(12), &config),
        HealthChange::Degraded
    );
    // The second ejection lasts two cool-downs.
    assert_eq!(t.expire(Duration::from_secs(31)), 0);
    assert_eq!(t.expire(Duration::from_secs(32)), 1);
    assert_eq!(t.success(0, now, &config), HealthChange::Recovered);
    // Healthy, and remembered as ejected twice (until healthy windows take it off).
    assert_eq!(
        t.get(0),
        ProviderHealth {
            ejections: 2,
            ..ProviderHealth::default()
        }
    );
    assert!(!t.degraded().contains(1));
}

#[test]
fn counters_are_allocated_by_the_first_report_that_records_something() {
    let config = HealthConfig {
        failure_threshold: 2,
        cooldown: Duration::from_secs(10),
        ..HealthConfig::default()
    };
    let now = Duration::from_secs(1);
    let t = HealthTable::new(Arc::new(DegradedSet::new(3)));
    // Reads, successes, sweeps and default carry-overs record nothing.
    assert_eq!(t.success(1, now, &config), HealthChange::None);
    assert_eq!(t.get(1), ProviderHealth::default());
    assert_eq!(t.expire(Duration::from_secs(100)), 0);
    t.set(2, ProviderHealth::default());
    assert_eq!(t.failure(7, now, &config), HealthChange::None); // past the end
    assert!(!t.has_cells());
    // A quiet table carries over as a fresh one.
    let edit = routechain_core::SnapshotEdit::new(3, vec![0], 1);
    let e = t.edited(&edit, Arc::new(DegradedSet::new(3)));
    assert!(!e.has_cells());
    // The first failure allocates them.
    assert_eq!(t.failure(1, now, &config), HealthChange::None);
    assert!(t.has_cells());
    assert_eq!(t.get(1).failures, 1);
    assert_eq!(t.failure(1, now, &config), HealthChange::Degraded);
    assert!(t.degraded().contains(1));
    // A carried-over health that is not the default allocates them too.
    let u = HealthTable::new(Arc::new(DegradedSet::new(3)));
    u.set(0, t.get(1));
    assert!(u.has_cells() && u.degraded().contains(0));
    assert_eq!(u.next_expiry(), Some(Duration::from_secs(11)));
    // The edit carries the counters: provider 1 is at 0 once provider 0 is removed.
    let e = t.edited(&edit, Arc::new(DegradedSet::new(3)));
    assert!(e.has_cells());
    assert_eq!(e.get(0).degraded_until, t.get(1).degraded_until);
    assert_eq!(e.get(2), ProviderHealth::default());
}

#[test]
fn a_cooldown_too_long_for_nanoseconds_degrades_until_the_clock_ends() {
    let config = HealthConfig {
        failure_threshold: 1,
        cooldown: Duration::MAX,
        ..HealthConfig::default()
    };
    let t = HealthTable::new(Arc::new(DegradedSet::new(2)));
    let now = Duration::from_secs(1);
    assert_eq!(t.failure(0, now, &config), HealthChange::Degraded);
    assert_eq!(t.degrade(1, now, &config), HealthChange::Degraded);
    assert_eq!(t.next_expiry(), Some(Duration::from_nanos(u64::MAX - 1)));
    assert_eq!(t.expire(Duration::from_secs(1 << 40)), 0);
    assert!(t.degraded().contains(0) && t.degraded().contains(1));
}

fn rates() -> HealthConfig {
    HealthConfig {
        failure_threshold: 1000,
        cooldown: Duration::from_secs(10),
        max_cooldown: Duration::from_secs(25),
        window: Duration::from_secs(10),
        min_requests: 10,
        failure_percentage: Some(50),
        ..HealthConfig::default()
    }
}

#[test]
fn an_error_rate_ejects_once_the_window_has_enough_calls() {
    let config = rates();
    let t = HealthTable::new(Arc::new(DegradedSet::new(4)));
    let now = Duration::from_secs(1);
    // 4 failures in 9 calls: under the minimum, whatever the rate.
    for k in 0..9 {
        let change = if k % 2 == 0 {
            t.success(0, now, &config)
        } else {
            t.failure(0, now, &config)
        };
        assert_eq!(change, HealthChange::None, "call {k}");
    }
    // The tenth call, a failure: 5 of 10, the rate is reached.
    assert_eq!(t.failure(0, now, &config), HealthChange::Degraded);
    assert!(t.degraded().contains(0));
    assert_eq!(t.ejected(), 1);
    // 40% stays in.
    for k in 0..10 {
        let _ = if k < 4 {
            t.failure(1, now, &config)
        } else {
            t.success(1, now, &config)
        };
    }
    assert!(!t.degraded().contains(1));
}

#[test]
fn a_window_ends_and_its_counts_start_again() {
    let config = rates();
    let t = HealthTable::new(Arc::new(DegradedSet::new(2)));
    for k in 0..9 {
        if k < 4 {
            t.failure(0, Duration::from_secs(1), &config);
        } else {
            t.success(0, Duration::from_secs(1), &config);
        }
    }
    // One more failure would make 5 of 10, but the window of those nine calls has ended.
    let mut later = Duration::from_secs(12);
    for _ in 0..4 {
        assert_eq!(t.failure(0, later, &config), HealthChange::None);
        t.success(0, later, &config);
        later += Duration::from_millis(1);
    }
    assert!(!t.degraded().contains(0));
}

#[test]
fn a_slow_call_rate_ejects_on_a_success() {
    let config = HealthConfig {
        failure_percentage: None,
        slow_call: Some(Duration::from_millis(100)),
        slow_call_percentage: 80,
        ..rates()
    };
    let t = HealthTable::new(Arc::new(DegradedSet::new(2)));
    let now = Duration::from_secs(1);
    for k in 0..10 {
        if k >= 2 {
            t.slow(0, now, &config);
        }
        let change = t.success(0, now, &config);
        assert_eq!(
            change,
            if k == 9 {
                HealthChange::Degraded
            } else {
                HealthChange::None
            },
            "call {k}"
        );
    }
}

#[test]
fn each_ejection_lasts_longer_up_to_the_maximum_and_healthy_windows_shorten_it() {
    let config = HealthConfig {
        failure_threshold: 1,
        ..rates()
    };
    let t = HealthTable::new(Arc::new(DegradedSet::new(2)));
    let mut now = Duration::from_secs(1);
    let mut lengths = Vec::new();
    for _ in 0..4 {
        assert_eq!(t.failure(0, now, &config), HealthChange::Degraded);
        let until = Duration::from_nanos(t.get(0).degraded_until);
        lengths.push((until - now).as_secs());
        now = until;
        assert_eq!(t.expire(now), 1);
        assert!(t.get(0).probation);
    }
    assert_eq!(lengths, [10, 20, 25, 25]);
    assert_eq!(t.get(0).ejections, 4);
    // Back in and healthy: each window that ends healthy takes one ejection off.
    assert_eq!(t.success(0, now, &config), HealthChange::Recovered);
    for k in 1..=2 {
        now += Duration::from_secs(11);
        t.success(0, now, &config);
        assert_eq!(t.get(0).ejections, 4 - k);
    }
    assert_eq!(t.failure(0, now, &config), HealthChange::Degraded);
    assert_eq!(t.get(0).ejections, 3);
    assert_eq!(
        Duration::from_nanos(t.get(0).degraded_until) - now,
        Duration::from_secs(25)
    );
}

#[test]
fn the_cap_keeps_most_providers_in_and_at_least_one_may_go() {
    let config = HealthConfig {
        failure_threshold: 1,
        max_ejection_percent: 30,
        ..rates()
    };
    let t = HealthTable::new(Arc::new(DegradedSet::new(10)));
    let now = Duration::from_secs(1);
    let ejected: Vec<_> = (0..10)
        .filter(|&i| t.failure(i, now, &config) == HealthChange::Degraded)
        .collect();
    assert_eq!(ejected, [0, 1, 2]);
    assert_eq!(t.ejected(), 3);
    // One comes back: another may go.
    t.expire(now + Duration::from_secs(10));
    assert_eq!(t.ejected(), 0);
    assert_eq!(
        t.failure(5, now + Duration::from_secs(10), &config),
        HealthChange::Degraded
    );
    // 10% of two providers is none: one may still go, as in Envoy.
    let small = HealthTable::new(Arc::new(DegradedSet::new(2)));
    let c = HealthConfig {
        max_ejection_percent: 10,
        ..config
    };
    assert_eq!(small.failure(0, now, &c), HealthChange::Degraded);
    assert_eq!(small.failure(1, now, &c), HealthChange::None);
    // An operator's decision is not capped.
    assert_eq!(small.degrade(1, now, &c), HealthChange::Degraded);
    assert_eq!(small.ejected(), 2);
}
