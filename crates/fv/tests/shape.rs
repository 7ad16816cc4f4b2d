//! The FV step's launch shape: every workgroup size the tuner may choose gives the default's bits for every
//! kernel and layout; the choice is timed once per adapter, kernel, layout and precision, then read from the
//! cache; the lab's no-gather ablation runs and is not the physics, and its no-index ablation is the step of a
//! nearby operator.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use bespoke_fv::bench::CONFIGS;
use bespoke_fv::diffusion::{TET_CANDIDATES, candidates, step_layout_in, step_shape_in};
use bespoke_fv::generate::BoxMesh;
use bespoke_fv::kernel::{KernelKind, Layout, Shape, WG};
use bespoke_fv::operator::adjacency;
use bespoke_fv::testing::{binds, layouts_on, plain_layout};
use bespoke_fv::{Boundary, Diffusion, Operator, Real};
use bespoke_gpu::testing::{differing_bits, fresh_seed, test_gpu};
use bespoke_gpu::{DiskCache, Gpu, GridLayout};
use rand::{Rng, SeedableRng, rngs::StdRng};

fn operator() -> Operator {
    let mesh = BoxMesh {
        cells: [7, 6, 5],
        jitter: 0.1,
        shuffle: Some(3),
        seed: 4,
    }
    .build()
    .unwrap();
    let adj = adjacency(&mesh).unwrap();
    Operator::diffusion(&mesh, &adj, 1.0, Boundary::ZeroFlux).unwrap()
}

fn run<T: Real>(
    gpu: &Gpu,
    op: &Operator,
    kind: KernelKind,
    layout: Layout,
    shape: Shape,
    x: &[f64],
) -> Vec<f64> {
    let dt = op.default_dt();
    let mut d = Diffusion::<T>::with_shape(gpu, op, kind, layout, dt, shape).unwrap();
    assert_eq!(d.shape(), shape);
    d.set_x(x).unwrap();
    d.step(5).unwrap();
    d.x().unwrap()
}

/// The bench's kernel × layout configurations precision `T` runs (the texture layout in f32 only), the
/// block-cached kernel at blocks of 512; on a device that cannot bind a layout for [`operator`], each of its
/// configurations is reported as skipped.
fn configs<T: Real>(gpu: &Gpu) -> impl Iterator<Item = (&'static str, KernelKind, Layout)> {
    let n = operator().n();
    CONFIGS
        .into_iter()
        .filter(|&(_, layout)| {
            layout != Layout::Texture || T::DTYPE == bespoke_fv::kernel::DType::F32
        })
        .filter(move |&(name, layout)| {
            binds(
                gpu,
                layout,
                n,
                T::DTYPE.size(),
                &format!("{name} {:?}", T::DTYPE),
            )
        })
        .map(|(name, layout)| {
            let kind = if name == "gather" {
                KernelKind::Gather
            } else {
                KernelKind::BlockCached { block: 512 }
            };
            (name, kind, layout)
        })
}

fn every_shape_alike<T: Real>(gpu: &Gpu, op: &Operator, x: &[f64]) {
    for (name, kind, layout) in configs::<T>(gpu) {
        let split = Shape {
            grid: GridLayout::Split,
            ..Shape::default()
        };
        let want = run::<T>(gpu, op, kind, layout, split, x);
        assert!(want.iter().all(|v| v.is_finite()));
        let wgs = candidates(gpu, kind);
        assert!(wgs.len() >= 3, "{name} {layout:?}: only {wgs:?}");
        // Every workgroup size in the default layout, and a 2-D grid of rows of 5 workgroups.
        let shapes = wgs
            .iter()
            .map(|&workgroup| Shape {
                workgroup,
                ..Default::default()
            })
            .chain([
                Shape {
                    workgroup: 64,
                    grid: GridLayout::RowsOf(5),
                    ..Default::default()
                },
                // Every other step walking backwards, at two sizes and in rows (surplus workgroups).
                Shape {
                    alternate: true,
                    ..Default::default()
                },
                Shape {
                    workgroup: 64,
                    grid: GridLayout::RowsOf(5),
                    alternate: true,
                    ..Default::default()
                },
            ])
            // Tets per invocation (the gather kernel outside the four-tet layout): every count the tuner tries,
            // and 3 in rows of 2 workgroups (ragged last blocks).
            .chain(
                TET_CANDIDATES
                    .into_iter()
                    .map(|tets| (tets, GridLayout::Rows))
                    .chain([(3, GridLayout::RowsOf(2))])
                    .filter(|_| kind == KernelKind::Gather && !layout.four_tets())
                    .flat_map(|(tets, grid)| {
                        [(64, false), (256, false), (64, true)].map(|(workgroup, alternate)| {
                            Shape {
                                workgroup,
                                tets,
                                grid,
                                alternate,
                                ..Default::default()
                            }
                        })
                    }),
            );
        for shape in shapes {
            let got = run::<T>(gpu, op, kind, layout, shape, x);
            let differ = differing_bits(&want, &got);
            assert_eq!(
                differ,
                0,
                "{name} {layout:?} {:?}: {} differs in {differ} tets",
                T::DTYPE,
                shape.name()
            );
        }
        if kind == KernelKind::Gather {
            let ablated = run::<T>(
                gpu,
                op,
                kind,
                layout,
                Shape {
                    workgroup: WG,
                    no_gather: true,
                    ..Default::default()
                },
                x,
            );
            assert!(ablated.iter().all(|v| v.is_finite()));
            assert!(
                ablated != want,
                "{layout:?}: the no-gather ablation changed nothing"
            );
        }
    }
}

#[test]
fn every_workgroup_gives_the_default_bits() {
    let Some(gpu) = test_gpu() else { return };
    let op = operator();
    let mut rng = StdRng::seed_from_u64(fresh_seed());
    let x: Vec<f64> = (0..op.n()).map(|_| rng.random_range(-1.0..1.0)).collect();
    every_shape_alike::<f32>(gpu, &op, &x);
    if gpu.has_f64() {
        every_shape_alike::<f64>(gpu, &op, &x);
    }
}

/// The no-index ablation (the lab's row that drops the 16 B a tet of neighbour indices) is, bit for bit, the step
/// of the operator whose k-th neighbour of tet i is min(i + k + 1, n), the same values: in every layout of both
/// kernels, f32 and f64, with and without the gather ablation's partner. So its time is that step's, nothing less,
/// and it is not this operator's step.
#[test]
fn the_no_index_ablation_is_the_step_of_the_nearby_operator() {
    let Some(gpu) = test_gpu() else { return };
    let op = operator();
    let n = op.n();
    let mut near = op.clone();
    for (i, row) in near.indices.iter_mut().enumerate() {
        *row = std::array::from_fn(|k| (i + k + 1).min(n) as u32);
    }
    let mut rng = StdRng::seed_from_u64(fresh_seed());
    let x: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    fn check<T: Real>(gpu: &Gpu, op: &Operator, near: &Operator, x: &[f64]) {
        for (name, kind, layout) in configs::<T>(gpu) {
            let ablation = Shape {
                no_index: true,
                ..Default::default()
            };
            let got = run::<T>(gpu, op, kind, layout, ablation, x);
            let want = run::<T>(gpu, near, kind, layout, Shape::default(), x);
            let what = format!("{name} {layout:?} {:?}", T::DTYPE);
            assert!(want.iter().all(|v| v.is_finite()), "{what}");
            let differ = differing_bits(&want, &got);
            assert_eq!(
                differ, 0,
                "{what}: no-index differs from the nearby operator's step in {differ} tets"
            );
            let physics = run::<T>(gpu, op, kind, layout, Shape::default(), x);
            assert!(
                physics != got,
                "{what}: the no-index ablation gave the operator's own step"
            );
        }
    }
    check::<f32>(gpu, &op, &near, &x);
    if gpu.has_f64() {
        check::<f64>(gpu, &op, &near, &x);
    }
}

/// `fv run --layout auto`: every layout the kernel and precision take is timed, each in its own tuned shape (kept
/// in the same cache), the fastest kept unless the measured prior is within the margin; then read from the cache.
#[test]
fn the_layout_is_timed_once_then_read_from_the_cache() {
    let Some(gpu) = test_gpu() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::at(dir.path(), "fv-shape", 1);
    let first = step_layout_in::<f32>(gpu, KernelKind::Gather, Some(&cache)).unwrap();
    assert_eq!(first.source, "tuned");
    let timed: Vec<Layout> = first.timed.iter().map(|t| t.0).collect();
    // Every layout the device binds at the tuner's smallest operator (a block of 2048 tets).
    let bound = layouts_on(gpu, Layout::ALL, 2048, 4, "the layout tuner");
    assert_eq!(timed, bound, "every layout of the gather kernel in f32");
    assert!(first.timed.iter().all(|t| t.1 > 0.0 && t.1.is_finite()));
    let prior = Layout::default_for(
        bespoke_fv::kernel::DType::F32,
        gpu.is_cpu(),
        KernelKind::Gather,
    );
    let time = |l: Layout| first.timed.iter().find(|t| t.0 == l).unwrap().1;
    let fastest = first
        .timed
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    assert!(
        first.layout == fastest.0 || (first.layout == prior && fastest.1 >= 0.97 * time(prior)),
        "{first:?} (prior {prior:?})"
    );
    // Each layout's shape was tuned on the way and is in the cache now.
    for l in bound {
        let shape = step_shape_in::<f32>(gpu, KernelKind::Gather, l, Some(&cache)).unwrap();
        assert_eq!(shape.source, "cached", "{l:?}");
    }
    let again = step_layout_in::<f32>(gpu, KernelKind::Gather, Some(&cache)).unwrap();
    assert_eq!(
        (again.source.as_str(), again.layout),
        ("cached", first.layout)
    );
    // The block-cached kernel takes no four-tet layout; f64 no texture: each its own entry.
    let block =
        step_layout_in::<f32>(gpu, KernelKind::BlockCached { block: 256 }, Some(&cache)).unwrap();
    assert_eq!(block.source, "tuned");
    assert!(block.timed.iter().all(|t| !t.0.four_tets()), "{block:?}");
    if gpu.has_f64() {
        let f64s = step_layout_in::<f64>(gpu, KernelKind::Gather, Some(&cache)).unwrap();
        assert!(
            f64s.timed.iter().all(|t| t.0 != Layout::Texture),
            "{f64s:?}"
        );
        assert_ne!(f64s.layout, Layout::Texture);
    }
}

#[test]
fn the_shape_is_timed_once_then_read_from_the_cache() {
    let Some(gpu) = test_gpu() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::at(dir.path(), "fv-shape", 1);
    let plain = plain_layout(gpu);
    let first = step_shape_in::<f32>(gpu, KernelKind::Gather, plain, Some(&cache)).unwrap();
    assert_eq!(first.source, "tuned");
    let timed: Vec<u32> = first.timed.iter().map(|t| t.0).collect();
    assert_eq!(timed, candidates(gpu, KernelKind::Gather));
    assert!(first.timed.iter().all(|t| t.1 > 0.0 && t.1.is_finite()));
    // Then tets per invocation at the chosen workgroup; the choice is the fastest or one within the margin.
    let tets: Vec<u32> = first.timed_tets.iter().map(|t| t.0).collect();
    assert_eq!(tets, TET_CANDIDATES);
    let fastest = first
        .timed_tets
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    assert!(
        first.shape.tets == fastest.0
            || (first.shape.tets == 1 && fastest.1 >= 0.97 * first.timed_tets[0].1),
        "{first:?}"
    );
    let again = step_shape_in::<f32>(gpu, KernelKind::Gather, plain, Some(&cache)).unwrap();
    assert_eq!(
        (again.source.as_str(), again.shape),
        ("cached", first.shape)
    );
    let other =
        step_shape_in::<f32>(gpu, KernelKind::Gather, Layout::TetMajorD16, Some(&cache)).unwrap();
    assert_eq!(other.source, "tuned", "another layout is its own entry");
    // A workgroup the block-cached kernel's block does not divide is refused.
    let op = operator();
    let e = Diffusion::<f32>::with_shape(
        gpu,
        &op,
        KernelKind::BlockCached { block: 256 },
        plain,
        0.1 / op.max_row_sum(),
        Shape {
            workgroup: 512,
            no_gather: false,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("512"), "{e}");
    // Tets per invocation where the kernel takes one, or past the most, are refused by name.
    for (kind, layout, tets) in [
        (KernelKind::BlockCached { block: 256 }, plain, 2),
        (KernelKind::Gather, Layout::SlotMajorX4, 2),
        (KernelKind::Gather, Layout::SlotMajorX4D16, 2),
        (KernelKind::Gather, plain, 0),
        (KernelKind::Gather, plain, 9),
    ]
    .into_iter()
    .filter(|&(_, layout, tets)| binds(gpu, layout, op.n(), 4, &format!("{tets} tets")))
    {
        let made = Diffusion::<f32>::with_shape(
            gpu,
            &op,
            kind,
            layout,
            0.1 / op.max_row_sum(),
            Shape {
                workgroup: 256,
                tets,
                ..Default::default()
            },
        );
        let Err(e) = made else {
            panic!("{kind:?} {layout:?} accepted {tets} tets per invocation");
        };
        assert!(e.to_string().contains("tets per invocation"), "{e}");
    }
}

/// `Diffusion::reshape` makes the step kernel again on the same buffers and x: reshaped between steps, every
/// kernel and layout ends with the bits of an operator that never was; a reshape to the no-gather ablation really
/// changes the kernel; a refused shape leaves the operator as it was.
#[test]
fn a_reshaped_operator_carries_on_in_its_new_shape() {
    let Some(gpu) = test_gpu() else { return };
    let op = operator();
    let mut rng = StdRng::seed_from_u64(fresh_seed());
    let x: Vec<f64> = (0..op.n()).map(|_| rng.random::<f64>()).collect();
    let dt = op.default_dt();
    for (name, kind, layout) in configs::<f32>(gpu) {
        let several = kind == KernelKind::Gather && !layout.four_tets();
        let want = run::<f32>(gpu, &op, kind, layout, Shape::default(), &x);
        let mut d =
            Diffusion::<f32>::with_shape(gpu, &op, kind, layout, dt, Shape::default()).unwrap();
        d.set_x(&x).unwrap();
        d.step(2).unwrap();
        // Every other step backwards too, from the parity the operator is at.
        let other = Shape {
            workgroup: 128,
            tets: if several { 2 } else { 1 },
            grid: GridLayout::RowsOf(3),
            alternate: true,
            ..Default::default()
        };
        d.reshape(other).unwrap();
        assert_eq!(d.shape(), other);
        // Refused: a workgroup the adapter does not launch; tets where the kernel takes one.
        let bad = [
            Shape {
                workgroup: 96,
                ..Default::default()
            },
            Shape {
                tets: if several { 99 } else { 2 },
                ..Default::default()
            },
        ];
        for shape in bad {
            assert!(
                d.reshape(shape).is_err(),
                "{name} {layout:?}: {shape:?} accepted"
            );
            assert_eq!(
                d.shape(),
                other,
                "{name} {layout:?}: a refused reshape changed the shape"
            );
        }
        d.step(3).unwrap();
        let got = d.x().unwrap();
        let differ = differing_bits(&want, &got);
        assert_eq!(
            differ, 0,
            "{name} {layout:?}: reshaped after 2 steps, {differ} tets differ after 5"
        );
        if kind == KernelKind::Gather {
            d.reshape(Shape {
                no_gather: true,
                ..Default::default()
            })
            .unwrap();
            d.step(1).unwrap();
            let ablated = d.x().unwrap();
            let mut full =
                Diffusion::<f32>::with_shape(gpu, &op, kind, layout, dt, Shape::default()).unwrap();
            full.set_x(&got).unwrap();
            full.step(1).unwrap();
            // Not a rounding apart: the full step's neighbour terms are O(Δt·L·x) on random x.
            let apart = ablated
                .iter()
                .zip(full.x().unwrap())
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(
                apart > 1e-3,
                "{name} {layout:?}: the reshape to no-gather gave the full step (at most {apart:e} apart)"
            );
        }
    }
}

/// Kernels the driver refuses (emulated: `GpuOptions::refuse_pipelines`) cost their candidate, not the tuning: a
/// refused workgroup size is left out of the shape's timings and named in `failed`, and a layout refused at every
/// shape is left out of the layout tuner's, named in its `failed`; each tuner chooses among the rest.
#[test]
fn refused_kernels_are_left_out_of_the_tunings() {
    use bespoke_gpu::testing::refusing;
    let Some(shared) = test_gpu() else { return };
    let refusing = |pattern: &str| refusing(shared, pattern);
    let all = candidates(shared, KernelKind::Gather);
    let Some(&wg) = all.iter().find(|&&w| w != WG) else {
        return;
    };
    let gpu = refusing(&format!("-wg{wg}"));
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::at(dir.path(), "fv-shape", 1);
    let layout = plain_layout(&gpu);
    let shape = step_shape_in::<f32>(&gpu, KernelKind::Gather, layout, Some(&cache)).unwrap();
    let timed: Vec<u32> = shape.timed.iter().map(|t| t.0).collect();
    let want: Vec<u32> = all.iter().copied().filter(|&w| w != wg).collect();
    assert_eq!(timed, want, "{shape:?}");
    assert_ne!(shape.shape.workgroup, wg);
    assert!(
        shape
            .failed
            .iter()
            .any(|f| f.starts_with(&format!("workgroup {wg},")) && f.contains("refused")),
        "{:?}",
        shape.failed
    );
    // A layout whose every kernel is refused.
    let gpu = refusing("gather-texture-");
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::at(dir.path(), "fv-shape", 1);
    let choice = step_layout_in::<f32>(&gpu, KernelKind::Gather, Some(&cache)).unwrap();
    assert!(
        choice.timed.iter().all(|t| t.0 != Layout::Texture),
        "{choice:?}"
    );
    assert_ne!(choice.layout, Layout::Texture);
    let bound = layouts_on(&gpu, Layout::ALL, 2048, 4, "the layout tuner");
    if bound.contains(&Layout::Texture) {
        assert!(
            choice
                .failed
                .iter()
                .any(|f| f.starts_with("texture:") && f.contains("refused")),
            "{:?}",
            choice.failed
        );
        assert_eq!(choice.timed.len(), bound.len() - 1, "{choice:?}");
    } else {
        eprintln!(
            "NOTE: no texture layout on this adapter: the layout half checks only the choice"
        );
    }
}
