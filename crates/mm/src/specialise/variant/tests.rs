//! Variant names, twins, chains and stages.

use super::*;

#[test]
fn touch_twins_only_for_the_streaming_families_and_without_a_chain() {
    let t = Variant::parse("bstream-v2-touch").unwrap();
    assert!(t.touch && t.family == Family::BStream && t.vec == 2);
    assert_eq!(t.cheaper_compile(), None);
    assert!(Variant::parse("cstream-v4-fold-touch").is_some());
    for bad in [
        "rolled-r4-touch",
        "bstream-msplit-s2-touch",
        "bstream-touch-v2",
        "cstream-touch-touch",
    ] {
        assert_eq!(Variant::parse(bad), None, "{bad}");
    }
}

#[test]
fn names_round_trip() {
    let all = Variant::all();
    // cstream 6 and bstream 3, each with a -touch twin; msplit 18 with two larger stages for each split at
    // vec1 unfolded, ksplit 12, rolled 9.
    assert_eq!(all.len(), 12 + 6 + (18 + 6) + 12 + 9);
    for v in all {
        assert_eq!(Variant::parse(&v.name()), Some(v), "{}", v.name());
    }
    for bad in [
        "",
        "cstream-s2",
        "bstream-fold",
        "cstream-v3",
        "bstream-msplit",
        "cstream-fold-v4",
        "dense",
        "rolled",
        "rolled-r3-v4",
        "rolled-r4-fold",
        "cstream-r4",
        "bstream-a512",
        "bstream-a0",
        "cstream-a256",
        "bstream-v2-a256",
    ] {
        assert_eq!(Variant::parse(bad), None, "{bad}");
    }
    for bad in [
        "rolled-r4-a4096",
        "cstream-a4096-a4096",
        "bstream-msplit-s4-a256",
        "cstream-ksplit-a4096-s2",
        "cstream-ksplit-s8",
        "bstream-msplit-s16",
        "bstream-msplit-s4-smem16",
        "bstream-msplit-s4-smem64",
        "bstream-msplit-s4-smem0",
        "cstream-ksplit-s4-smem32",
        "bstream-smem32",
        "bstream-msplit-s4-smem32-a4096",
        "rolled-r4-a1024",
        "bstream-a1024-a4096",
    ] {
        assert_eq!(Variant::parse(bad), None, "{bad}");
    }
    for good in [
        "bstream-a256",
        "bstream-a128-v2",
        "bstream-a256-v4",
        "cstream-a4096",
        "cstream-a4096-v2-fold",
        "bstream-a4096-v4",
        "bstream-msplit-s4-a4096",
        "cstream-ksplit-s2-a4096-v2",
        "cstream-a4096-touch",
        "bstream-msplit-s8",
        "bstream-msplit-s8-a4096-smem48",
        "bstream-msplit-s4-a1024-smem32-v2-fold",
        "cstream-a1024-v2",
        "bstream-a1024",
    ] {
        assert_eq!(
            Variant::parse(good).map(|v| v.name()),
            Some(good.to_owned())
        );
    }
}

/// bstream's chain: narrower vectors first, then shorter launches at vec1; it ends, and other families
/// have none.
#[test]
fn cheaper_compile_chain() {
    let mut v = Variant::new(Family::BStream, 4, 1, false);
    let mut names = vec![v.name()];
    while let Some(n) = v.cheaper_compile() {
        v = n;
        names.push(v.name());
    }
    assert_eq!(
        names,
        [
            "bstream-v4",
            "bstream-v2",
            "bstream",
            "bstream-a256",
            "bstream-a128"
        ]
    );
    for f in [Family::CStream, Family::Rolled, Family::BStreamMsplit] {
        assert_eq!(Variant::new(f, 2, 4, false).cheaper_compile(), None);
    }
    let cs = Variant::new(Family::CStream, 1, 1, false);
    assert_eq!(cs.with_launch_cap(256), None);
    assert_eq!(cs.with_launch_cap(0), Some(cs));
    let bs = Variant::new(Family::BStream, 2, 1, false);
    assert_eq!(bs.with_launch_cap(512), None);
    assert_eq!(bs.with_launch_cap(128).map(Variant::uncapped), Some(bs));
    // A long twin narrows its vector and stops: its shorter launches are the default variant.
    let long = bs.long_twin().unwrap();
    assert_eq!(long.name(), "bstream-a4096-v2");
    assert_eq!(
        long.cheaper_compile().map(|v| v.name()),
        Some("bstream-a4096".into())
    );
    assert_eq!(long.cheaper_compile().unwrap().cheaper_compile(), None);
}

/// A stage is msplit's alone and counts its bytes; a twin keeps its stage.
#[test]
fn stages_of_bstream_msplit() {
    let v = Variant::new(Family::BStreamMsplit, 1, 8, false);
    assert_eq!(v.stage_bytes(), DEFAULT_STAGE_BYTES);
    let big = v.with_stage(48).unwrap();
    assert_eq!(big.stage_bytes(), 48 * 1024);
    assert_eq!(big.workgroup(), (WG_X, 8));
    assert_eq!(
        big.long_twin().unwrap().name(),
        "bstream-msplit-s8-a4096-smem48"
    );
    assert_eq!(
        big.mid_twin().unwrap().name(),
        "bstream-msplit-s8-a1024-smem48"
    );
    assert_eq!(v.with_stage(24), None);
    assert_eq!(
        Variant::new(Family::CStreamKsplit, 1, 4, false).with_stage(32),
        None
    );
    assert_eq!(
        Variant::new(Family::BStream, 1, 1, false)
            .with_stage(0)
            .map(|v| v.stage),
        Some(0)
    );
    // Only msplit splits 8 ways (rolled-r8's 8 is rows per block).
    let eight = |v: &Variant| v.split == 8 && v.family.splits();
    assert!(
        Variant::all()
            .iter()
            .any(|v| eight(v) && v.family == Family::BStreamMsplit)
    );
    assert!(
        !Variant::all()
            .iter()
            .any(|v| eight(v) && v.family != Family::BStreamMsplit)
    );
}

/// Every unrolled family has a long twin, the rolled family none, and a capped variant none.
#[test]
fn long_twins_of_the_unrolled_families() {
    for v in Variant::all() {
        let twin = v.long_twin();
        assert_eq!(twin.is_some(), v.family.unrolled(), "{v}");
        if let Some(t) = twin {
            assert_eq!((t.launch, t.uncapped()), (LONG_LAUNCH, v), "{v}");
            assert_eq!(Variant::parse(&t.name()), Some(t), "{}", t.name());
            assert_eq!(t.long_twin(), None);
        }
        let mid = v.mid_twin();
        assert_eq!(mid.is_some(), v.family.unrolled(), "{v}");
        if let Some(t) = mid {
            assert_eq!((t.launch, t.uncapped()), (MID_LAUNCH, v), "{v}");
            assert_eq!(Variant::parse(&t.name()), Some(t), "{}", t.name());
            assert_eq!((t.long_twin(), t.mid_twin()), (None, None));
            assert_eq!(
                t.cheaper_compile().map(|c| c.launch),
                t.cheaper_compile().map(|_| MID_LAUNCH)
            );
        }
    }
    let capped = Variant::new(Family::BStream, 1, 1, false)
        .with_launch_cap(256)
        .unwrap();
    assert_eq!(capped.long_twin(), None);
}
