//! Every shape and ablation gives the bits it promises.

use super::*;

#[test]
fn every_step_workgroup_gives_the_default_bits() {
    let Some(gpu) = test_gpu() else { return };
    let wgs = candidates(gpu);
    assert!(wgs.len() >= 3, "only {wgs:?} can be launched");
    let seed = fresh_seed();
    let mut cases = vec![
        (Storage::F32, Streaming::Ab, 22, false),
        (Storage::F32, Streaming::InPlace, 22, true),
        (Storage::F16, Streaming::Ab, 22, true),
        (Storage::F16, Streaming::InPlace, 22, false),
    ];
    if gpu.has_f16() {
        cases.push((Storage::F16, Streaming::InPlace, 21, true));
    }
    for (storage, streaming, ny, walls) in cases {
        let cfg = Config {
            storage,
            streaming,
            force: [1e-5, 0.0],
            ..Config::new(37, ny, Collision::trt(0.8))
        };
        let mut flags = Flags::fluid(37, ny);
        if walls {
            flags.channel_walls();
            flags.add_circle([12.3, ny as f64 / 2.0], 4.2, true);
        }
        // Nine bindings a side, or one buffer for all directions, where the adapter allows it (GL's 16 storage
        // buffers a kernel do not bind nine a side; its 48 KiB bindings may not hold nine directions).
        let nine = nine_bindings_fit(gpu, &cfg, walls);
        let one = one_buffer_fits(gpu, &cfg);
        let case = format!("{storage:?} {streaming:?} ny {ny} walls {walls}");
        if !nine || !one {
            skipped(&format!(
                "step shapes of {case}: {} on `{}` ({} storage buffers a kernel, {} bytes a binding)",
                match (nine, one) {
                    (false, false) =>
                        "neither nine bindings a side nor one buffer for all directions",
                    (false, true) => "no nine bindings a side, only one buffer",
                    _ => "no one buffer for all directions, only nine bindings a side",
                },
                gpu.adapter_name(),
                gpu.limits().max_storage_buffers_per_shader_stage,
                gpu.binding_limit()
            ));
            if !nine && !one {
                continue;
            }
        }
        let flags = Rc::new(flags);
        let run = |(wg, grid, cells, one_buffer, alternate): (u32, GridLayout, u32, bool, bool)| {
            let shape = StepShape {
                workgroup: wg,
                grid,
                cells,
                one_buffer,
                alternate,
                ..StepShape::given()
            };
            let mut lat =
                Lattice::with_given_shape(gpu, cfg.clone(), flags.clone(), shape).unwrap();
            assert_eq!(
                (
                    lat.step_shape().workgroup,
                    lat.step_shape().grid,
                    lat.step_shape().cells,
                    lat.step_shape().one_buffer,
                    lat.step_shape().alternate
                ),
                (wg, grid, cells, one_buffer, alternate)
            );
            let mut rng = StdRng::seed_from_u64(seed);
            let cells = random_cells(&mut rng, 37 * ny);
            lat.init_equilibrium(|x, y| cells[y * 37 + x]).unwrap();
            lat.step(8).unwrap();
            // The populations, then ρ and u from the macroscopic kernel (bound as the shape binds them).
            let mut out = lat.populations().unwrap();
            let m = lat.macroscopic().unwrap();
            for f in [&m.rho, &m.ux, &m.uy] {
                out.extend(f.iter().map(|&v| f64::from(v)));
            }
            out
        };
        let default = (WG, GridLayout::Split, 1, !nine, false);
        let want = run(default);
        assert!(want.iter().all(|v| v.is_finite()));
        // Every workgroup size in the default layout (one row here), and 2-D grids of rows of 3 and 7 workgroups
        // (what an 8192² lattice gets past the per-dimension limit) beside the split 1-D grid.
        // Every number of cells per invocation the tuner tries, at two workgroup sizes, in the default layout and
        // in rows of 2 workgroups (a ragged last block past the lattice's cells).
        // One buffer for all directions, bound once, at one and several cells per invocation.
        // Every other step walking backwards (`alternate`): one and several cells (a ragged group of blocks, then
        // taken first), surplus workgroups in rows of 7, either buffer layout.
        let shapes = wgs
            .iter()
            .map(|&w| (w, GridLayout::Rows, 1, false, false))
            .chain([
                (WG, GridLayout::RowsOf(7), 1, false, false),
                (256, GridLayout::RowsOf(3), 1, false, false),
                (256, GridLayout::Rows, 3, false, false),
                (WG, GridLayout::Rows, 1, true, false),
                (256, GridLayout::Rows, 3, true, false),
                (WG, GridLayout::Rows, 1, false, true),
                (WG, GridLayout::RowsOf(7), 1, false, true),
                (256, GridLayout::Rows, 3, false, true),
                (WG, GridLayout::Rows, 1, true, true),
                (128, GridLayout::RowsOf(2), 2, true, true),
            ])
            .chain(CELL_CANDIDATES.into_iter().flat_map(|c| {
                [
                    (WG, GridLayout::Rows, c, false, false),
                    (128, GridLayout::RowsOf(2), c, false, false),
                    (128, GridLayout::RowsOf(2), c, true, false),
                ]
            }))
            .filter(|&(_, _, _, one_buffer, _)| if one_buffer { one } else { nine });
        let differing = |a: &[f64], b: &[f64]| {
            a.iter()
                .zip(b)
                .filter(|(x, y)| x.to_bits() != y.to_bits())
                .fold((0usize, 0.0f64), |(n, m), (x, y)| {
                    (n + 1, m.max((x - y).abs()))
                })
        };
        for shape in shapes {
            let (wg, grid, cells, one_buffer, alternate) = shape;
            let got = run(shape);
            let (differ, largest) = differing(&want, &got);
            if differ > 0 {
                // Say what kind of difference it is: a shape that differs from itself run to run races; one that
                // repeats its own bits computes differently (the driver compiled the other code otherwise).
                let (again, _) = differing(&got, &run(shape));
                let (base_again, _) = differing(&want, &run(default));
                panic!(
                    "{case}: workgroup {wg} {grid:?} {cells} cells \
                     one buffer {one_buffer} alternate {alternate} differs from {WG} split in {differ} of {} populations, by at most \
                     {largest:e}; run again, it differs from itself in {again} and the {WG} split from itself in \
                     {base_again}",
                    want.len()
                );
            }
        }
    }
}

/// The lab's ablations do what they say: the mask wrap gives the default's bits on a lattice whose sides are
/// powers of two (and is refused on others); without collision the populations only stream.
#[test]
fn ablations_wrap_alike_and_stream_without_colliding() {
    use bespoke_lbm::kernel::Ablation;
    let Some(gpu) = test_gpu() else { return };
    let seed = fresh_seed();
    for (storage, streaming) in [
        (Storage::F32, Streaming::Ab),
        (Storage::F16, Streaming::InPlace),
    ] {
        let (nx, ny) = (32, 16);
        let cfg = Config {
            storage,
            streaming,
            ..Config::new(nx, ny, Collision::Bgk { omega: 1.2 })
        };
        let flags = Rc::new(Flags::fluid(nx, ny));
        let mut rng = StdRng::seed_from_u64(seed);
        let cells = random_cells(&mut rng, nx * ny);
        let start = |lat: &mut Lattice<'_>| {
            lat.init_equilibrium(|x, y| cells[y * nx + x]).unwrap();
        };
        let mut plain = Lattice::with_step_workgroup(gpu, cfg.clone(), flags.clone(), WG).unwrap();
        start(&mut plain);
        let initial = plain.populations().unwrap();
        plain.step(4).unwrap();
        let mut masked = Lattice::with_step_shape(
            gpu,
            cfg.clone(),
            flags.clone(),
            128,
            GridLayout::Rows,
            Some(Ablation::MaskWrap),
        )
        .unwrap();
        start(&mut masked);
        masked.step(4).unwrap();
        assert!(
            plain.populations().unwrap() == masked.populations().unwrap(),
            "{storage:?} {streaming:?}: the mask wrap changed the result"
        );
        let mut streamed = Lattice::with_step_shape(
            gpu,
            cfg.clone(),
            flags.clone(),
            WG,
            GridLayout::Rows,
            Some(Ablation::NoCollision),
        )
        .unwrap();
        start(&mut streamed);
        streamed.step(4).unwrap();
        let got = streamed.populations().unwrap();
        // Population i of cell x after t steps is population i of cell x − t·c_i at the start.
        let c = bespoke_lbm::d2q9::C;
        for y in 0..ny {
            for x in 0..nx {
                for (i, ci) in c.iter().enumerate() {
                    let sx = (x as i64 - 4 * ci[0] as i64).rem_euclid(nx as i64) as usize;
                    let sy = (y as i64 - 4 * ci[1] as i64).rem_euclid(ny as i64) as usize;
                    // Direction-major: direction i's populations, cell after cell.
                    let n = nx * ny;
                    let (want, have) = (initial[i * n + sy * nx + sx], got[i * n + y * nx + x]);
                    assert!(
                        want.to_bits() == have.to_bits(),
                        "{storage:?} {streaming:?}: cell ({x}, {y}) direction {i}: {have} streamed, {want} expected"
                    );
                }
            }
        }
        let odd = Config {
            storage,
            streaming,
            ..Config::new(30, 16, Collision::Bgk { omega: 1.2 })
        };
        let e = Lattice::with_step_shape(
            gpu,
            odd,
            Flags::fluid(30, 16),
            WG,
            GridLayout::Rows,
            Some(Ablation::MaskWrap),
        )
        .unwrap_err();
        assert!(e.to_string().contains("powers of two"), "{e}");
    }
}

/// The no-pull ablation collides every cell where it is: on a uniform state (where streaming moves nothing) it
/// gives the full step's bits; on a random one, a uniform field stepped alone per cell — each cell's populations
/// after the ablated steps are those a uniform lattice of that cell's state reaches.
#[test]
fn no_pull_collides_in_place_and_streams_nothing() {
    use bespoke_lbm::kernel::Ablation;
    let Some(gpu) = test_gpu() else { return };
    let mut rng = StdRng::seed_from_u64(fresh_seed());
    for (storage, streaming) in [
        (Storage::F32, Streaming::Ab),
        (Storage::F16, Streaming::InPlace),
        (Storage::F32, Streaming::InPlace),
    ] {
        let (nx, ny) = (16, 8);
        let cfg = Config {
            storage,
            streaming,
            force: [1e-5, 0.0],
            ..Config::new(nx, ny, Collision::trt(0.9))
        };
        let flags = Rc::new(Flags::fluid(nx, ny));
        let ablated = |state: &(dyn Fn(usize, usize) -> (f64, [f64; 2]) + Sync)| {
            let mut lat = Lattice::with_step_shape(
                gpu,
                cfg.clone(),
                flags.clone(),
                WG,
                GridLayout::Rows,
                Some(Ablation::NoPull),
            )
            .unwrap();
            lat.init_equilibrium(state).unwrap();
            lat.step(4).unwrap();
            lat.populations().unwrap()
        };
        let full = |state: &(dyn Fn(usize, usize) -> (f64, [f64; 2]) + Sync)| {
            let mut lat =
                Lattice::with_step_workgroup(gpu, cfg.clone(), flags.clone(), WG).unwrap();
            lat.init_equilibrium(state).unwrap();
            lat.step(4).unwrap();
            lat.populations().unwrap()
        };
        let n = nx * ny;
        // A random state: each cell alone must match a uniform lattice of its own state, fully stepped.
        let cells = random_cells(&mut rng, n);
        let got = ablated(&|x, y| cells[y * nx + x]);
        assert!(got.iter().all(|v| v.is_finite()));
        for probe in [0, 37, n - 1] {
            let uniform = full(&|_, _| cells[probe]);
            for i in 0..9 {
                assert!(
                    got[i * n + probe].to_bits() == uniform[i * n + probe].to_bits(),
                    "{storage:?} {streaming:?}: cell {probe} direction {i}: {} without pulls, {} uniform",
                    got[i * n + probe],
                    uniform[i * n + probe]
                );
            }
        }
    }
}

/// `Lattice::reshape` makes the step kernels again on the same state: a lattice reshaped between steps ends with
/// the bits of one that never was (every shape gives the default's bits), a reshape to the no-collision ablation
/// really changes the kernels (the next steps only stream), and a refused reshape leaves the lattice as it was.
#[test]
fn a_reshaped_lattice_carries_on_in_its_new_shape() {
    use bespoke_lbm::kernel::Ablation;
    let Some(gpu) = test_gpu() else { return };
    let seed = fresh_seed();
    // f32 in place without walls beside f16's: the H200 on 2026-12-04 gave 1 of f16's 6480 populations other
    // bits; were the reshaped kernels' arithmetic another (a compiler's choice per shape), f32, whose every bit
    // shows, would differ in most of them.
    for (storage, streaming, walls) in [
        (Storage::F32, Streaming::Ab, false),
        (Storage::F32, Streaming::InPlace, true),
        (Storage::F32, Streaming::InPlace, false),
        (Storage::F16, Streaming::InPlace, false),
        (Storage::F16, Streaming::Ab, true),
    ] {
        let (nx, ny) = (36, 20);
        let cfg = Config {
            storage,
            streaming,
            force: [1e-5, 0.0],
            ..Config::new(nx, ny, Collision::trt(0.85))
        };
        let mut flags = Flags::fluid(nx, ny);
        if walls {
            flags.channel_walls();
        }
        let flags = Rc::new(flags);
        let mut rng = StdRng::seed_from_u64(seed);
        let cells = random_cells(&mut rng, nx * ny);
        let what = format!("{storage:?} {streaming:?} walls {walls}");
        let mut want = Lattice::with_step_workgroup(gpu, cfg.clone(), flags.clone(), WG).unwrap();
        want.init_equilibrium(|x, y| cells[y * nx + x]).unwrap();
        want.step(8).unwrap();
        let want = want.populations().unwrap();

        let mut lat = Lattice::with_step_workgroup(gpu, cfg.clone(), flags.clone(), WG).unwrap();
        lat.init_equilibrium(|x, y| cells[y * nx + x]).unwrap();
        // An odd count first, so the reshaped in-place kernels must pick up the other parity.
        lat.step(3).unwrap();
        // The lattice's own allocations (one buffer where nine bindings a side pass the adapter's limit).
        let given = StepShape {
            one_buffer: lat.step_shape().one_buffer,
            ..StepShape::given()
        };
        // Every other step backwards too: the reshaped pair's second launch walks backwards from the parity the
        // lattice is at.
        let two = StepShape {
            workgroup: 128,
            cells: 2,
            alternate: true,
            ..given.clone()
        };
        lat.reshape(two.clone()).unwrap();
        assert_eq!(
            (lat.step_shape().workgroup, lat.step_shape().cells),
            (128, 2),
            "{what}"
        );
        // Refused: another allocation, cells past the limit, a workgroup the adapter does not launch. The
        // lattice keeps its shape and its kernels.
        for (bad, says) in [
            (
                StepShape {
                    one_buffer: !given.one_buffer,
                    ..given.clone()
                },
                "allocations differ",
            ),
            (
                StepShape {
                    cells: 99,
                    ..given.clone()
                },
                "cells per invocation",
            ),
            (
                StepShape {
                    workgroup: 96,
                    ..given.clone()
                },
                "workgroup of 96",
            ),
        ] {
            let e = lat.reshape(bad).unwrap_err();
            assert!(e.to_string().contains(says), "{what}: {e}");
            assert_eq!(
                (lat.step_shape().workgroup, lat.step_shape().cells),
                (128, 2),
                "{what}: a refused reshape changed the shape"
            );
        }
        lat.step(5).unwrap();
        let got = lat.populations().unwrap();
        let differ = bespoke_gpu::testing::differing_bits(&want, &got);
        if differ > 0 {
            // Say what kind of difference it is (the H200 on 2026-12-04: F16 InPlace, 1 of 6480): which
            // populations; whether each path repeats its own bits (a path that does not races); whether the new
            // shape from the start gives the default's bits (then the switch of parity or kernels is at fault).
            let run = |first: Option<StepShape>, then: Option<StepShape>| {
                let mut l = match first {
                    Some(shape) => {
                        Lattice::with_given_shape(gpu, cfg.clone(), flags.clone(), shape)
                    }
                    None => Lattice::with_step_workgroup(gpu, cfg.clone(), flags.clone(), WG),
                }
                .unwrap();
                l.init_equilibrium(|x, y| cells[y * nx + x]).unwrap();
                l.step(3).unwrap();
                if let Some(t) = then {
                    l.reshape(t).unwrap();
                }
                l.step(5).unwrap();
                l.populations().unwrap()
            };
            let n = nx * ny;
            let which: Vec<String> = want
                .iter()
                .zip(&got)
                .enumerate()
                .filter(|(_, (a, b))| a.to_bits() != b.to_bits())
                .take(8)
                .map(|(k, (a, b))| {
                    format!("direction {} cell {}: {a:e} against {b:e}", k / n, k % n)
                })
                .collect();
            let again = bespoke_gpu::testing::differing_bits(&got, &run(None, Some(two.clone())));
            let want_again = bespoke_gpu::testing::differing_bits(&want, &run(None, None));
            let from_start =
                bespoke_gpu::testing::differing_bits(&want, &run(Some(two.clone()), None));
            panic!(
                "{what}: reshaped after 3 steps, {differ} populations differ after 8 ({which:?}); reshaped again: \
                 {again} differ from the first reshaped run; unreshaped again: {want_again} from the first; in the \
                 new shape from the start: {from_start} from the default's"
            );
        }

        if walls {
            continue;
        }
        // Without collision the next two steps only stream what the lattice holds now.
        lat.reshape(StepShape {
            ablation: Some(Ablation::NoCollision),
            ..given
        })
        .unwrap();
        lat.step(2).unwrap();
        let streamed = lat.populations().unwrap();
        let n = nx * ny;
        for (i, ci) in bespoke_lbm::d2q9::C.iter().enumerate() {
            for y in 0..ny {
                for x in 0..nx {
                    let sx = (x as i64 - 2 * ci[0] as i64).rem_euclid(nx as i64) as usize;
                    let sy = (y as i64 - 2 * ci[1] as i64).rem_euclid(ny as i64) as usize;
                    let (w, h) = (got[i * n + sy * nx + sx], streamed[i * n + y * nx + x]);
                    assert!(
                        w.to_bits() == h.to_bits(),
                        "{what}: after the reshape to no collision, cell ({x}, {y}) direction {i} holds {h}, \
                         {w} streamed"
                    );
                }
            }
        }
    }
}

/// f16 stores rounded explicitly to their nearest f16 before the pack (`StepShape::exact_f16`, what a device
/// whose pack rounds otherwise gets) give the bits of the plain stores on a device whose pack rounds to nearest
/// even (and on one that does not, both round explicitly): both streamings, interpolated walls in place (whose
/// stash is rounded the same way), raw words and fields alike.
#[test]
fn explicitly_rounded_f16_stores_give_the_default_bits() {
    let Some(gpu) = test_gpu() else { return };
    let seed = fresh_seed();
    for (streaming, walls) in [(Streaming::Ab, false), (Streaming::InPlace, true)] {
        let (nx, ny) = (33, 18);
        let cfg = Config {
            storage: Storage::F16,
            streaming,
            force: [1e-5, -2e-6],
            ..Config::new(nx, ny, Collision::trt(0.9))
        };
        let mut flags = Flags::fluid(nx, ny);
        if walls {
            flags.channel_walls();
            flags.add_circle([11.2, 8.7], 3.9, true);
        }
        let flags = Rc::new(flags);
        // One buffer a side where nine bindings a side pass the adapter's storage buffers (GL's 16).
        let one_buffer = !nine_bindings_fit(gpu, &cfg, walls);
        let run = |exact_f16: bool| {
            let shape = StepShape {
                exact_f16,
                one_buffer,
                ..StepShape::given()
            };
            let mut lat =
                Lattice::with_given_shape(gpu, cfg.clone(), flags.clone(), shape).unwrap();
            assert_eq!(lat.step_shape().exact_f16, exact_f16);
            let mut rng = StdRng::seed_from_u64(seed);
            let cells = random_cells(&mut rng, nx * ny);
            lat.init_equilibrium(|x, y| cells[y * nx + x]).unwrap();
            lat.step(6).unwrap();
            let m = lat.macroscopic().unwrap();
            (lat.populations().unwrap(), [m.rho, m.ux, m.uy].concat())
        };
        let (plain, exact) = (run(false), run(true));
        let what = format!("{streaming:?} walls {walls}");
        assert_eq!(
            bespoke_gpu::testing::differing_bits(&plain.0, &exact.0),
            0,
            "{what}"
        );
        assert_eq!(
            bespoke_gpu::testing::differing_bits(&plain.1, &exact.1),
            0,
            "{what}"
        );
    }
}
