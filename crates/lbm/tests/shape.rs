//! The step kernel's launch shape: every workgroup size the tuner may choose gives the default's bits, and the
//! choice is timed once per adapter and kind of lattice, then read from the cache.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::rc::Rc;

use bespoke_gpu::testing::{fresh_seed, test_gpu};
use bespoke_gpu::{DiskCache, GridLayout};
use bespoke_lbm::kernel::WG;
use bespoke_lbm::shape::{CELL_CANDIDATES, StepShape, candidates, step_shape_in};
use bespoke_lbm::{Collision, Config, Flags, Lattice, Storage, Streaming};
use rand::{Rng, SeedableRng, rngs::StdRng};

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
        let flags = Rc::new(flags);
        let run = |(wg, grid, cells, one_buffer): (u32, GridLayout, u32, bool)| {
            let shape = StepShape {
                workgroup: wg,
                grid,
                cells,
                one_buffer,
                ..StepShape::given()
            };
            let mut lat =
                Lattice::with_given_shape(gpu, cfg.clone(), flags.clone(), shape).unwrap();
            assert_eq!(
                (
                    lat.step_shape().workgroup,
                    lat.step_shape().grid,
                    lat.step_shape().cells,
                    lat.step_shape().one_buffer
                ),
                (wg, grid, cells, one_buffer)
            );
            let mut rng = StdRng::seed_from_u64(seed);
            let cells: Vec<(f64, [f64; 2])> = (0..37 * ny)
                .map(|_| {
                    (
                        rng.random_range(0.97..1.03),
                        [rng.random_range(-0.05..0.05), rng.random_range(-0.05..0.05)],
                    )
                })
                .collect();
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
        let default = (WG, GridLayout::Split, 1, false);
        let want = run(default);
        assert!(want.iter().all(|v| v.is_finite()));
        // Every workgroup size in the default layout (one row here), and 2-D grids of rows of 3 and 7 workgroups
        // (what an 8192² lattice gets past the per-dimension limit) beside the split 1-D grid.
        // Every number of cells per invocation the tuner tries, at two workgroup sizes, in the default layout and
        // in rows of 2 workgroups (a ragged last block past the lattice's cells).
        // One buffer for all directions, bound once, at one and several cells per invocation.
        let shapes = wgs
            .iter()
            .map(|&w| (w, GridLayout::Rows, 1, false))
            .chain([
                (WG, GridLayout::RowsOf(7), 1, false),
                (256, GridLayout::RowsOf(3), 1, false),
                (256, GridLayout::Rows, 3, false),
                (WG, GridLayout::Rows, 1, true),
                (256, GridLayout::Rows, 3, true),
            ])
            .chain(CELL_CANDIDATES.into_iter().flat_map(|c| {
                [
                    (WG, GridLayout::Rows, c, false),
                    (128, GridLayout::RowsOf(2), c, false),
                    (128, GridLayout::RowsOf(2), c, true),
                ]
            }));
        let differing = |a: &[f64], b: &[f64]| {
            a.iter()
                .zip(b)
                .filter(|(x, y)| x.to_bits() != y.to_bits())
                .fold((0usize, 0.0f64), |(n, m), (x, y)| {
                    (n + 1, m.max((x - y).abs()))
                })
        };
        for shape in shapes {
            let (wg, grid, cells, one_buffer) = shape;
            let got = run(shape);
            let (differ, largest) = differing(&want, &got);
            if differ > 0 {
                // Say what kind of difference it is: a shape that differs from itself run to run races; one that
                // repeats its own bits computes differently (the driver compiled the other code otherwise).
                let (again, _) = differing(&got, &run(shape));
                let (base_again, _) = differing(&want, &run(default));
                panic!(
                    "{storage:?} {streaming:?} ny {ny} walls {walls}: workgroup {wg} {grid:?} {cells} cells \
                     one buffer {one_buffer} differs from {WG} split in {differ} of {} populations, by at most \
                     {largest:e}; run again, it differs from itself in {again} and the {WG} split from itself in \
                     {base_again}",
                    want.len()
                );
            }
        }
    }
}

#[test]
fn the_shape_is_timed_once_then_read_from_the_cache() {
    let Some(gpu) = test_gpu() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::at(dir.path(), "lbm-shape", 1);
    let cfg = Config::new(64, 48, Collision::Bgk { omega: 1.0 });
    let first = step_shape_in(gpu, &cfg, false, Some(&cache)).unwrap();
    assert_eq!(first.source, "tuned");
    let timed: Vec<u32> = first.timed.iter().map(|t| t.0).collect();
    assert_eq!(timed, candidates(gpu), "every candidate is timed");
    assert!(first.timed.iter().all(|t| t.1 > 0.0 && t.1.is_finite()));
    let fastest = first
        .timed
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    let default = first.timed.iter().find(|t| t.0 == WG).unwrap();
    // The choice is the fastest, or the default where nothing beat it by the margin.
    assert!(
        first.workgroup == fastest.0 || (first.workgroup == WG && fastest.1 >= 0.97 * default.1),
        "{first:?}"
    );
    // Then cells per invocation at that workgroup size, the same rule against one cell.
    let cells: Vec<u32> = first.timed_cells.iter().map(|t| t.0).collect();
    assert_eq!(cells, CELL_CANDIDATES, "every number of cells is timed");
    assert!(
        first
            .timed_cells
            .iter()
            .all(|t| t.1 > 0.0 && t.1.is_finite())
    );
    let fastest = first
        .timed_cells
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    assert!(
        first.cells == fastest.0
            || (first.cells == 1 && fastest.1 >= 0.97 * first.timed_cells[0].1),
        "{first:?}"
    );
    // Then one buffer for all directions at that shape (it fits here), kept only if it beats nine by the margin.
    let nine = first
        .timed_cells
        .iter()
        .find(|t| t.0 == first.cells)
        .unwrap()
        .1;
    let one = first
        .timed_one_buffer
        .expect("one buffer is timed where it fits");
    assert!(one > 0.0 && one.is_finite());
    assert_eq!(first.one_buffer, one < 0.97 * nine, "{first:?}");
    let again = step_shape_in(gpu, &cfg, false, Some(&cache)).unwrap();
    assert_eq!(
        (
            again.source.as_str(),
            again.workgroup,
            again.cells,
            again.one_buffer
        ),
        ("cached", first.workgroup, first.cells, first.one_buffer)
    );
    // A shape past the cells a kernel may take is refused by name.
    for cells in [0, bespoke_lbm::shape::MAX_CELLS + 1] {
        let shape = StepShape {
            cells,
            ..StepShape::given()
        };
        let e =
            Lattice::with_given_shape(gpu, cfg.clone(), Flags::fluid(64, 48), shape).unwrap_err();
        assert!(e.to_string().contains("cells per invocation"), "{e}");
    }
    // Another kind of lattice is its own entry.
    let flagged = step_shape_in(gpu, &cfg, true, Some(&cache)).unwrap();
    assert_eq!(flagged.source, "tuned");
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
        let cells: Vec<(f64, [f64; 2])> = (0..nx * ny)
            .map(|_| {
                (
                    rng.random_range(0.97..1.03),
                    [rng.random_range(-0.05..0.05), rng.random_range(-0.05..0.05)],
                )
            })
            .collect();
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
        let cells: Vec<(f64, [f64; 2])> = (0..n)
            .map(|_| {
                (
                    rng.random_range(0.97..1.03),
                    [rng.random_range(-0.05..0.05), rng.random_range(-0.05..0.05)],
                )
            })
            .collect();
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

/// One buffer for all directions where nine fit one binding; refused by name, and never timed, where they do not;
/// and where the adapter allows few storage buffers per kernel, a two-lattice step with flags (20 bindings as
/// nine buffers each) runs with one buffer per lattice.
#[test]
fn one_buffer_for_all_directions_follows_the_limits() {
    use bespoke_gpu::GpuOptions;
    use bespoke_gpu::testing::emulating;
    let Some(shared) = test_gpu() else { return };
    let cfg = Config::new(64, 48, Collision::Bgk { omega: 1.0 });
    let dir_bytes = 64 * 48 * 4;
    // One direction fits a binding, nine do not.
    let small = emulating(
        shared,
        GpuOptions {
            max_binding_bytes: Some(4 * dir_bytes),
            ..Default::default()
        },
    );
    let one = StepShape {
        one_buffer: true,
        ..StepShape::given()
    };
    let e = Lattice::with_given_shape(&small, cfg.clone(), Flags::fluid(64, 48), one.clone())
        .unwrap_err();
    assert!(
        e.to_string().contains("one buffer for all nine directions"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::at(dir.path(), "lbm-shape", 1);
    let tuned = step_shape_in(&small, &cfg, false, Some(&cache)).unwrap();
    assert_eq!((tuned.one_buffer, tuned.timed_one_buffer), (false, None));
    assert!(!bespoke_lbm::shape::one_buffer_fits(&small, &cfg));
    assert!(bespoke_lbm::shape::one_buffer_fits(shared, &cfg));
    // The lab's fallback side: where 512² f32 (9 MiB) does not fit one buffer of 6 MiB, 256² does; f16 (4.5 MiB) fits.
    let six_mib = emulating(
        shared,
        GpuOptions {
            max_binding_bytes: Some(6 << 20),
            ..Default::default()
        },
    );
    use bespoke_lbm::bench::one_buffer_side;
    assert_eq!(one_buffer_side(&six_mib, 512, Storage::F32), Some(256));
    assert_eq!(one_buffer_side(&six_mib, 512, Storage::F16), Some(512));
    assert_eq!(one_buffer_side(shared, 512, Storage::F32), Some(512));
    assert_eq!(one_buffer_side(&small, 512, Storage::F32), None);

    // Eight storage buffers per kernel: nine buffers per lattice cannot step two lattices, one buffer each can.
    let few = emulating(
        shared,
        GpuOptions {
            max_storage_buffers_per_stage: Some(8),
            ..Default::default()
        },
    );
    let ab = Config {
        storage: Storage::F32,
        streaming: Streaming::Ab,
        ..cfg.clone()
    };
    let mut walls = Flags::fluid(64, 48);
    walls.channel_walls();
    let walls = Rc::new(walls);
    let e =
        Lattice::with_given_shape(&few, ab.clone(), walls.clone(), StepShape::given()).unwrap_err();
    assert!(e.to_string().contains("storage buffers per kernel"), "{e}");
    let mut lat = Lattice::with_given_shape(&few, ab.clone(), walls.clone(), one).unwrap();
    // Chosen, not given (wgpu's GL backend on llvmpipe allows 16 storage buffers, WebGPU's default 8): every
    // candidate the tuner times binds one buffer per side, and so does the lattice that takes its choice.
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::at(dir.path(), "lbm-shape", 1);
    let chosen = step_shape_in(&few, &ab, true, Some(&cache)).unwrap();
    assert!(chosen.one_buffer, "{chosen:?}");
    assert_eq!(chosen.timed_one_buffer, None, "not a choice there");
    let mut auto = Lattice::new(&few, ab.clone(), walls.clone()).unwrap();
    assert!(auto.step_shape().one_buffer);
    let mut whole = Lattice::with_given_shape(shared, ab, walls, StepShape::given()).unwrap();
    let mut rng = StdRng::seed_from_u64(fresh_seed());
    let cells: Vec<(f64, [f64; 2])> = (0..64 * 48)
        .map(|_| {
            (
                rng.random_range(0.97..1.03),
                [rng.random_range(-0.05..0.05), rng.random_range(-0.05..0.05)],
            )
        })
        .collect();
    for l in [&mut lat, &mut auto, &mut whole] {
        l.init_equilibrium(|x, y| cells[y * 64 + x]).unwrap();
        l.step(6).unwrap();
    }
    let (a, b) = (lat.populations().unwrap(), whole.populations().unwrap());
    assert!(a.iter().all(|v| v.is_finite()));
    assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
    let c = auto.populations().unwrap();
    assert!(c.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
    let (ma, mb) = (lat.macroscopic().unwrap(), whole.macroscopic().unwrap());
    assert_eq!(ma.rho, mb.rho);
}

/// The populations take one allocation per lattice buffer where the adapter's buffer limit allows (on an H200 the
/// same step ran at 0.97 of copy on one allocation per side and 0.67 on 18), else as few as the limit allows; the
/// step is the same bit for bit either way (two lattices with flags: nine bindings each, windows of 3 allocations).
#[test]
fn populations_take_as_few_allocations_as_the_limit_allows() {
    use bespoke_gpu::GpuOptions;
    use bespoke_gpu::testing::emulating;
    let Some(shared) = test_gpu() else { return };
    let (nx, ny) = (128, 96);
    let cfg = Config {
        storage: Storage::F32,
        streaming: Streaming::Ab,
        ..Config::new(nx, ny, Collision::Bgk { omega: 1.2 })
    };
    let dir_bytes = (nx * ny * 4) as u64;
    // Four directions per allocation: 4 + 4 + 1.
    let four = emulating(
        shared,
        GpuOptions {
            max_buffer_bytes: Some(4 * dir_bytes),
            ..Default::default()
        },
    );
    let mut walls = Flags::fluid(nx, ny);
    walls.channel_walls();
    let walls = Rc::new(walls);
    let mut spread =
        Lattice::with_given_shape(&four, cfg.clone(), walls.clone(), StepShape::given()).unwrap();
    let mut whole = Lattice::with_given_shape(shared, cfg, walls, StepShape::given()).unwrap();
    assert_eq!(spread.population_allocations(), 6);
    assert_eq!(whole.population_allocations(), 2);
    let mut rng = StdRng::seed_from_u64(fresh_seed());
    let cells: Vec<(f64, [f64; 2])> = (0..nx * ny)
        .map(|_| {
            (
                rng.random_range(0.97..1.03),
                [rng.random_range(-0.05..0.05), rng.random_range(-0.05..0.05)],
            )
        })
        .collect();
    for l in [&mut spread, &mut whole] {
        l.init_equilibrium(|x, y| cells[y * nx + x]).unwrap();
        l.poison_spare().unwrap();
        l.step(7).unwrap();
    }
    let (a, b) = (spread.populations().unwrap(), whole.populations().unwrap());
    // Every fluid cell's nine populations were written (the walls' keep the poison in both).
    let n = nx * ny;
    let fluid = (0..n).filter(|&k| (1..ny - 1).contains(&(k / nx)));
    assert!(
        fluid
            .clone()
            .all(|k| (0..9).all(|i| a[i * n + k].is_finite()))
    );
    assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
    let (ma, mb) = (spread.macroscopic().unwrap(), whole.macroscopic().unwrap());
    assert!(fluid.clone().all(|k| ma.rho[k].is_finite()));
    assert_eq!(ma.rho.len(), n);
    assert!(
        ma.rho
            .iter()
            .zip(&mb.rho)
            .all(|(x, y)| x.to_bits() == y.to_bits())
    );
    assert!(
        ma.ux
            .iter()
            .zip(&mb.ux)
            .all(|(x, y)| x.to_bits() == y.to_bits())
    );
}

/// The adapter's choice does not depend on the lattice it was first asked for: the tuning lattice has the
/// adapter's tuning side whatever the lattice's size (keeping ny's parity, so the f16 layout), and a cached choice
/// of one buffer applies to a lattice only where it fits, without tuning again.
#[test]
fn the_choice_is_the_adapters_not_the_first_lattices() {
    use bespoke_gpu::GpuOptions;
    use bespoke_gpu::testing::emulating;
    use bespoke_lbm::shape::{cache_key, tuning_size};
    let Some(shared) = test_gpu() else { return };
    let small = |nx, ny| Config::new(nx, ny, Collision::Bgk { omega: 1.0 });
    let (side, _) = tuning_size(shared, &small(4096, 4096));
    assert_eq!(tuning_size(shared, &small(34, 34)), (side, side));
    assert_eq!(tuning_size(shared, &small(8, 24)), (side, side));
    assert_eq!(
        tuning_size(shared, &small(35, 33)).1 % 2,
        1,
        "an odd ny stays odd"
    );
    let gpu_class = emulating(
        shared,
        GpuOptions {
            adapter_class: Some(bespoke_gpu::AdapterClass::Gpu),
            ..Default::default()
        },
    );
    assert!(
        tuning_size(&gpu_class, &small(34, 34)).0 > side,
        "a GPU tunes on a larger lattice"
    );

    // Where the device's buffers cannot hold the tuning side, it is halved until they can.
    let tiny = emulating(
        shared,
        GpuOptions {
            max_binding_bytes: Some(64 * 48 * 4 * 4),
            ..Default::default()
        },
    );
    let (nx, ny) = tuning_size(&tiny, &small(64, 48));
    assert!(nx < side && nx * ny * 4 <= 64 * 48 * 4 * 4, "{nx}x{ny}");
    // A cached choice of one buffer, on a device where a 64×48 lattice fits one and a 512² one does not.
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::at(dir.path(), "lbm-shape", 1);
    let limited = emulating(
        shared,
        GpuOptions {
            max_binding_bytes: Some(1 << 20),
            ..Default::default()
        },
    );
    let (fits, too_big) = (small(64, 48), small(512, 512));
    assert_eq!(
        cache_key(&limited, &fits, false),
        cache_key(&limited, &too_big, false)
    );
    let chosen = StepShape {
        workgroup: candidates(&limited)[0],
        one_buffer: true,
        ..StepShape::given()
    };
    cache
        .put_json(&cache_key(&limited, &fits, false), &chosen)
        .unwrap();
    let a = step_shape_in(&limited, &fits, false, Some(&cache)).unwrap();
    let b = step_shape_in(&limited, &too_big, false, Some(&cache)).unwrap();
    assert_eq!((a.source.as_str(), a.one_buffer), ("cached", true));
    assert_eq!((b.source.as_str(), b.one_buffer), ("cached", false));
    assert_eq!(a.workgroup, b.workgroup);
}
