//! What a case's metrics read on ranks, as one domain has them.

use super::*;

/// What a case's metrics read on ranks: each rank's own cells (together the domain, once each, the bits of one
/// domain's fields), exact sums and maxima over ranks, a few cells' values (a probe), the first non-finite value, and the
/// whole fields on rank 0 alone, all as one domain has them.
#[test]
fn own_fields_reductions_and_the_root_gather_match_one_domain() {
    use bespoke_comm::ExactSum;
    let Some(gpu) = test_gpu() else { return };
    let seed = fresh_seed();
    let s = setup(Domain::Channel, 23, 14, Storage::F32, Streaming::Ab);
    let n = 23 * 14;
    // Two cells whose density overflows f32 (on different ranks of every decomposition below): the domain's
    // first non-finite value is the lower of the two in row-major order.
    let start = |lat: &mut Lattice<'_>| -> Result<(), bespoke_lbm::LbmError> {
        lat.init_equilibrium(init(seed))?;
        lat.step(3)
    };
    let poison = |lat: &mut Lattice<'_>| -> Result<(), bespoke_lbm::LbmError> {
        let mut p = lat.populations()?;
        for cell in [11 * 23 + 20, 2 * 23 + 1] {
            p[n + cell] = 3e38;
            p[3 * n + cell] = 3e38;
        }
        lat.set_populations(&p)
    };
    let mut one = Lattice::new(gpu, s.0.clone(), s.1.clone()).unwrap();
    start(&mut one).unwrap();
    let f = one.macroscopic().unwrap();
    let sum = |v: &[f32]| {
        let mut e = ExactSum::new();
        v.iter().for_each(|&x| e.add(f64::from(x)));
        e.value()
    };
    let want_sums = [sum(&f.rho), sum(&f.ux), sum(&f.uy)];
    let want_max = f.ux.iter().map(|v| f64::from(v.abs())).fold(0.0, f64::max);
    let cells = [(0, 0), (22, 13), (11, 7), (5, 12), (17, 1), (11, 7)];
    poison(&mut one).unwrap();
    let want_nan = one.macroscopic().unwrap().first_non_finite();
    // (The fields are those the next step's pull reads: the overflow shows in a neighbour of the cell.)
    assert!(matches!(want_nan, Some(("rho", _, 2))), "{want_nan:?}");
    for (p, grid) in [(2, None), (3, Some([1, 3])), (4, Some([2, 2]))] {
        let seen = run_threads(p, |comm: ThreadComm| {
            let ranks = Ranks {
                grid,
                ..Ranks::new(Rc::new(comm))
            };
            let mut lat = Lattice::new_distributed(gpu, s.0.clone(), s.1.clone(), &ranks)?;
            start(&mut lat)?;
            let own = lat.own_fields()?;
            assert_eq!(own.domain, [23, 14]);
            assert!(
                own.size[0] * own.size[1] < n,
                "{p} ranks: a rank holds the whole domain"
            );
            for (x, y, k) in own.cells() {
                let i = y * 23 + x;
                let same = |a: f32, b: f32| a.to_bits() == b.to_bits();
                assert!(
                    same(own.rho[k], f.rho[i])
                        && same(own.ux[k], f.ux[i])
                        && same(own.uy[k], f.uy[i]),
                    "{p} ranks: cell ({x}, {y}) differs from one domain"
                );
            }
            let count = own.cells().count();
            let mut sums = [&own.rho, &own.ux, &own.uy].map(|v| {
                let mut e = ExactSum::new();
                v.iter().for_each(|&x| e.add(f64::from(x)));
                e
            });
            lat.sum_over_ranks(&mut sums)?;
            let mut covered = [ExactSum::new()];
            covered[0].add(count as f64);
            lat.sum_over_ranks(&mut covered)?;
            let local_max = own
                .ux
                .iter()
                .map(|v| f64::from(v.abs()))
                .fold(0.0, f64::max);
            let max = lat.max_over_ranks(local_max)?;
            // A few cells' values (the cavity's centreline samples) come from a probe on the owning ranks: the
            // macroscopic pass's bits.
            let probe = lat.probe(&cells, &[])?;
            let values: Vec<[f32; 3]> = (lat.read_probe(&probe)?.points.iter())
                .map(|&(rho, u)| [rho as f32, u[0] as f32, u[1] as f32])
                .collect();
            let outside = lat.probe(&[(23, 0)], &[]).unwrap_err().to_string();
            let whole = lat.macroscopic_on_root()?;
            poison(&mut lat)?;
            let own = lat.own_fields()?;
            let nan = lat.first_non_finite(&own)?;
            let agree = lat.all_ranks(lat.is_root())?;
            Ok::<_, bespoke_lbm::LbmError>((
                sums.map(|s| s.value()),
                covered[0].value(),
                max,
                values,
                outside,
                whole.map(|w| (w.rho, w.ux, w.uy)),
                nan,
                agree,
            ))
        })
        .unwrap_or_else(|e| panic!("{p} ranks: {e}"));
        for (rank, (sums, covered, max, values, outside, whole, nan, agree)) in
            seen.into_iter().enumerate()
        {
            let what = format!("{p} ranks {grid:?}, rank {rank}");
            assert_eq!(
                sums.map(f64::to_bits),
                want_sums.map(f64::to_bits),
                "{what}: sums"
            );
            assert_eq!(
                covered, n as f64,
                "{what}: own cells do not tile the domain"
            );
            assert_eq!(max, want_max, "{what}: max");
            for (&(x, y), v) in cells.iter().zip(&values) {
                let i = y * 23 + x;
                assert_eq!(
                    v.map(f32::to_bits),
                    [f.rho[i], f.ux[i], f.uy[i]].map(f32::to_bits),
                    "{what}: cell ({x}, {y})"
                );
            }
            assert!(
                outside.contains("(23, 0)") && outside.contains("outside"),
                "{what}: {outside}"
            );
            match (rank, whole) {
                (0, Some((rho, ux, uy))) => {
                    assert!(
                        rho == f.rho && ux == f.ux && uy == f.uy,
                        "{what}: the root's fields"
                    )
                }
                (0, None) => panic!("{what}: rank 0 got no fields"),
                (_, w) => assert!(w.is_none(), "{what}: only rank 0 holds the whole fields"),
            }
            assert_eq!(nan, want_nan, "{what}: the first non-finite value");
            assert!(!agree, "{what}: every rank says it is the root");
        }
    }
}
