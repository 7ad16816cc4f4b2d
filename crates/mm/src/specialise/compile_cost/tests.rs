//! The compile laws: fitting, the envelope, extrapolation past a law's reach, the margin.

use super::*;

#[test]
fn law_fits_a_power_and_predicts_per_launch() {
    // t = 2e-9 · b^2 exactly.
    let t = |b: f64| 2e-9 * b * b;
    let law = Law::fit((3000, t(3000.0)), (6000, t(6000.0))).unwrap();
    assert!((law.p - 2.0).abs() < 1e-9, "{law:?}");
    assert!((law.predict(&[4500]) - t(4500.0)).abs() < 1e-9);
    // Two launches of half the size cost half of one launch of the whole under p = 2 (no reach: as fitted).
    let open = Law { reach: 0, ..law };
    assert!((open.predict(&[12000]) - t(12000.0)).abs() < 1e-9);
    assert!((open.predict(&[6000, 6000]) - t(12000.0) / 2.0).abs() < 1e-9);
}

#[test]
fn law_clamps_noise_and_outliers() {
    // Shorter than the timer resolves: linear through the larger point.
    let l = Law::fit((1000, 0.001), (2000, 0.004)).unwrap();
    assert_eq!(l.p, 1.0);
    assert!((l.a - 0.004 / 2000.0).abs() < 1e-15);
    // The larger kernel compiled faster (noise): linear, and the smaller point still covered.
    let l = Law::fit((1000, 0.5), (2000, 0.3)).unwrap();
    assert_eq!(l.p, 1.0);
    assert!(l.predict(&[1000]) >= 0.5 - 1e-12);
    // A 100× jump for 2× the size is capped at 2.5.
    let l = Law::fit((1000, 0.1), (2000, 10.0)).unwrap();
    assert_eq!(l.p, 2.5);
    assert!(l.predict(&[2000]) >= 10.0 - 1e-9);
    // Degenerate sizes give no law.
    assert!(Law::fit((2000, 0.1), (2000, 0.2)).is_none());
    assert!(Law::fit((2000, 0.1), (2400, 0.2)).is_none());
    assert!(Law::fit((0, 0.1), (2000, 0.2)).is_none());
}

fn pt(b: usize, t: f64) -> Point {
    Point {
        launches: vec![b],
        seconds: t,
    }
}

#[test]
fn the_envelope_of_two_points_is_the_fit_through_them() {
    let t = |b: f64| 2e-7 * b * b;
    let l = envelope(&[pt(1000, t(1000.0)), pt(2000, t(2000.0))]).unwrap();
    assert!((l.p - 2.0).abs() < 0.006, "{l:?}");
    assert!((l.predict(&[1500]) / t(1500.0) - 1.0).abs() < 0.02, "{l:?}");
    // Too close, or too short, to fit an exponent.
    assert!(envelope(&[pt(1000, 0.5), pt(1100, 0.7)]).is_none());
    assert!(envelope(&[pt(1000, 0.001), pt(2000, 0.004)]).is_none());
}

#[test]
fn real_compiles_correct_a_noisy_probe_exponent_and_stay_covered() {
    // Probes at 64 and 128 accesses whose smaller one came out fast: p = 2.42 (Mesa 25.0.7's bstream-v2 law
    // of one run), against real compiles that grow as b^1.7.
    let probes = [(64, 0.2), (128, 1.07)];
    let probe_law = Law::fit(probes[0], probes[1]).unwrap();
    assert!(probe_law.p > 2.3, "{probe_law:?}");
    let real = |b: f64| 1.07 * (b / 128.0).powf(1.7);
    let mut laws = detached("test-envelope");
    // No law yet: a real compile is ignored, not fitted alone.
    laws.record_compile("f", &[300], real(300.0), None);
    assert!(laws.get("f").is_none());
    assert_eq!(laws.record_probes("f", probes), Some(probe_law));
    for b in [300, 400, 520] {
        laws.record_compile("f", &[b], real(b as f64), None);
    }
    let l = laws.get("f").unwrap();
    assert!(l.p < probe_law.p - 0.3, "{l:?}");
    // Never below a measured compile (the budget needs an upper bound)…
    for (b, t) in [
        (64, 0.2),
        (128, 1.07),
        (300, real(300.0)),
        (400, real(400.0)),
        (520, real(520.0)),
    ] {
        assert!(
            l.predict(&[b]) >= t * (1.0 - 1e-9),
            "{b}: {} < {t}",
            l.predict(&[b])
        );
    }
    // …and far closer to the real compiles than the probes' law was at 520 accesses.
    let (now, before) = (l.predict(&[520]), probe_law.predict(&[520]));
    assert!(
        now / real(520.0) < 1.3 && before / real(520.0) > 1.8,
        "{now} {before}"
    );
}

#[test]
fn past_its_largest_compile_a_law_grows_at_the_steepest_exponent() {
    // p = 1.5 through 64 and 128: within reach as fitted, past it as size^2.5 from the largest point.
    let t = |b: f64| 1e-3 * b.powf(1.5);
    let law = Law::fit((64, t(64.0)), (128, t(128.0))).unwrap();
    assert_eq!(law.reach, 128);
    assert!((law.predict(&[100]) / t(100.0) - 1.0).abs() < 1e-9);
    let beyond = law.predict(&[512]);
    assert!(
        (beyond / (t(128.0) * 4f64.powf(2.5)) - 1.0).abs() < 1e-9,
        "{beyond}"
    );
    // A steeper law keeps its own exponent past its reach; no reach: as fitted.
    let steep = Law {
        a: 1e-6,
        p: 2.5,
        reach: 100,
    };
    assert!((steep.predict(&[400]) / (1e-6 * 400f64.powf(2.5)) - 1.0).abs() < 1e-9);
    let open = Law { reach: 0, ..law };
    assert!((open.predict(&[512]) / t(512.0) - 1.0).abs() < 1e-9);
    // The envelope's reach is its largest launch; covering a larger compile moves it.
    let l = envelope(&[pt(100, 0.5), pt(300, 4.0)]).unwrap();
    assert_eq!(l.reach, 300);
    let mut c = l;
    c.cover(&[400], 1.0);
    assert_eq!(c.reach, 400);
}

#[test]
fn the_margin_is_the_worst_recent_miss_within_bounds() {
    let mut laws = detached("test-margin");
    // No law: the least margin (nothing is predicted). A law not yet checked against MIN_CHECKED real
    // compiles: the cap.
    assert_eq!(laws.margin("f"), MIN_MARGIN);
    laws.record_probes("f", [(64, 0.5), (128, 2.0)]).unwrap();
    assert_eq!(laws.margin("f"), MAX_MARGIN);
    for _ in 0..MIN_CHECKED - 1 {
        laws.record_compile("f", &[200], 3.0, Some(5.0));
    }
    assert_eq!(laws.margin("f"), MAX_MARGIN);
    // Over-predicted compiles, once enough are checked, leave the least margin.
    laws.record_compile("f", &[200], 3.0, Some(5.0));
    assert_eq!(laws.margin("f"), MIN_MARGIN);
    // A compile 1.6× its prediction raises it; a sub-second one (timer noise) does not.
    laws.record_compile("f", &[220], 8.0, Some(5.0));
    assert!((laws.margin("f") - 1.6).abs() < 1e-12);
    laws.record_compile("f", &[30], 0.5, Some(0.05));
    assert!((laws.margin("f") - 1.6).abs() < 1e-12);
    // Never past 2 (one stall must not price the family out for good)…
    laws.record_compile("f", &[230], 50.0, Some(5.0));
    assert_eq!(laws.margin("f"), MAX_MARGIN);
    // …and the oldest misses give way to newer ones.
    for _ in 0..MAX_MISSES {
        laws.record_compile("f", &[230], 50.0, Some(50.0));
    }
    assert_eq!(laws.margin("f"), MIN_MARGIN);
}

#[test]
fn cover_raises_only() {
    let mut l = Law {
        a: 1e-6,
        p: 1.5,
        reach: 0,
    };
    l.cover(&[1000], 1e-9);
    assert_eq!(l.a, 1e-6);
    l.cover(&[1000, 1000], 1.0);
    assert!((l.predict(&[1000, 1000]) - 1.0).abs() < 1e-9);
}

#[test]
fn leading_rows_take_a_prefix() {
    let a: Vec<f64> = (0..6 * 4).map(|i| i as f64 + 1.0).collect();
    let op = Operator::from_dense("t", 6, 4, a).unwrap();
    let s = leading_rows(&op, 3).unwrap();
    assert_eq!((s.m, s.k), (3, 4));
    assert_eq!(s.get(2, 3), 12.0);
    assert_eq!(leading_rows(&op, 100).unwrap().m, 6);
    assert_eq!(leading_rows(&op, 0).unwrap().m, 1);
}

#[test]
fn the_law_key_ignores_the_launch_cap_and_touch() {
    let key = |n: &str| family_key(Variant::parse(n).unwrap());
    assert_eq!(key("bstream-a128-v2"), "bstream-v2");
    assert_eq!(key("bstream-v2-touch"), "bstream-v2");
    assert_eq!(key("cstream-v4-fold-touch"), "cstream-v4-fold");
}

/// Probing is timed apart (the tuner keeps it off the operator's budget): the seconds the probe compiles took
/// are counted whether they make a law, make none, or fail, and a law they make is kept.
#[test]
fn probing_a_family_is_timed_apart() {
    let mut laws = detached("test-probe-time");
    let slow = |result| {
        move || {
            std::thread::sleep(std::time::Duration::from_millis(30));
            result
        }
    };
    let law = laws
        .probe_family("f", slow(Ok(Some([(64, 0.5), (128, 2.0)]))))
        .unwrap();
    assert_eq!(law, Law::fit((64, 0.5), (128, 2.0)));
    assert_eq!(laws.get("f"), law);
    assert!(laws.probe_seconds() >= 0.03, "{}", laws.probe_seconds());
    // Probes too close in size to fit: no law, still timed.
    assert_eq!(
        laws.probe_family("g", slow(Ok(Some([(64, 0.5), (70, 0.6)]))))
            .unwrap(),
        None
    );
    assert!(laws.get("g").is_none());
    assert!(laws.probe_seconds() >= 0.06, "{}", laws.probe_seconds());
    // A failed probe is reported, and timed.
    let failed = laws.probe_family(
        "h",
        slow(Err(crate::error::MmError::NotApplicable {
            variant: "probe".into(),
            reason: "test".into(),
        })),
    );
    assert!(failed.is_err());
    assert!(laws.get("h").is_none());
    assert!(laws.probe_seconds() >= 0.09, "{}", laws.probe_seconds());
}

/// Laws for a named test adapter, none known, nothing on disk.
fn detached(adapter: &str) -> CompileLaws {
    CompileLaws {
        adapter: adapter.into(),
        disk: None,
        known: Vec::new(),
        probe_seconds: 0.0,
    }
}
