//! Meshes, adjacency, orderings and the device kernels against the CPU reference: the device here, meshes and
//! adjacency in `mesh`, orderings in `ordering`.

mod mesh;
mod ordering;

use std::path::PathBuf;

use bespoke_fv::generate::BoxMesh;
use bespoke_fv::gmsh::read_msh;
use bespoke_fv::kernel::{DType, KernelKind, Layout};
use bespoke_fv::operator::{BOUNDARY, adjacency};
use bespoke_fv::ordering::{OrderingKind, in_block_fraction, metis_partition, order};
use bespoke_fv::testing::{binds, layouts_on, plain_layout};
use bespoke_fv::{Boundary, Diffusion, FvError, Operator, Real, TetMesh};
use bespoke_gpu::rng::{Rng, seeded};
use bespoke_gpu::testing::{differing_bits, fresh_seed, test_gpu};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("data")
        .join(name)
}

fn sphere() -> TetMesh {
    read_msh(&data("sphere_h0.2_v2.2.msh")).expect("sphere reads")
}

fn jittered_box() -> TetMesh {
    BoxMesh {
        cells: [7, 5, 6],
        jitter: 0.2,
        shuffle: Some(3),
        seed: 11,
    }
    .build()
    .expect("box builds")
}

fn check_device<T: Real>(
    gpu: &bespoke_gpu::Gpu,
    mesh: &TetMesh,
    boundary: Boundary,
    seed: u64,
    tol: f64,
) {
    let adj = adjacency(mesh).expect("adjacency");
    let op = Operator::diffusion(mesh, &adj, 1.0, boundary).expect("operator");
    let n = op.n();
    let dt = 0.9 / op.max_row_sum();
    let mut rng = seeded(seed);
    let x0: Vec<f64> = (0..n).map(|_| rng.random::<f64>() * 2.0 - 0.5).collect();
    let mut want = x0.clone();
    want.push(op.ghost());
    for _ in 0..3 {
        want = op.step_reference(&want, dt);
    }
    want.truncate(n);
    let mut ran = 0;
    // Each kernel × layout the device binds (the others reported as skipped once, not once per ordering).
    let configs: Vec<(KernelKind, Layout)> = [
        (KernelKind::Gather, Layout::SlotMajor),
        (KernelKind::Gather, Layout::TetMajor),
        (KernelKind::Gather, Layout::TetMajorD16),
        (KernelKind::Gather, Layout::SlotMajorX4),
        (KernelKind::Gather, Layout::SlotMajorX4D16),
        (KernelKind::BlockCached { block: 256 }, Layout::SlotMajor),
        (KernelKind::BlockCached { block: 512 }, Layout::TetMajor),
        (KernelKind::BlockCached { block: 512 }, Layout::TetMajorD16),
        (KernelKind::Gather, Layout::Texture),
        (KernelKind::BlockCached { block: 256 }, Layout::Texture),
    ]
    .into_iter()
    .filter(|&(_, layout)| layout != Layout::Texture || T::DTYPE == DType::F32)
    .filter(|&(kernel, layout)| {
        let what = format!("{} {:?} {boundary:?}", kernel.name(), T::DTYPE);
        binds(gpu, layout, n, T::DTYPE.size(), &what)
    })
    .collect();
    for kind in OrderingKind::all(256) {
        let (p, _) = order(&op, kind).expect("ordering");
        let permuted = p.apply_operator(&op);
        for &(kernel, layout) in &configs {
            let label = format!(
                "{} {} {} {:?} {:?}",
                kind.name(),
                kernel.name(),
                layout.name(),
                T::DTYPE,
                boundary
            );
            // What the device cannot bind was left out above: any refusal here is a failure.
            let mut d = Diffusion::<T>::new(gpu, &permuted, kernel, layout, dt)
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            d.set_x(&p.apply(&x0)).expect("set x");
            for _ in 0..3 {
                d.poison_spare().expect("poison");
                d.step(1).expect("step");
            }
            let got = p.undo(&d.x().expect("read"));
            let err = got
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(
                    0.0,
                    |m: f64, e| if e.is_nan() { f64::INFINITY } else { m.max(e) },
                );
            assert!(err <= tol, "{label}: max error {err:e}");
            ran += 1;
        }
    }
    assert!(ran > 0, "no kernel × layout ran in {:?}", T::DTYPE);
}

#[test]
fn device_matches_cpu_under_every_ordering() {
    let Some(gpu) = test_gpu() else { return };
    let seed = fresh_seed();
    let (s, b) = (sphere(), jittered_box());
    for mesh in [&s, &b] {
        check_device::<f32>(gpu, mesh, Boundary::ZeroFlux, seed, 1e-5);
        check_device::<f32>(gpu, mesh, Boundary::Dirichlet(0.7), seed, 1e-5);
        if gpu.has_f64() {
            check_device::<f64>(gpu, mesh, Boundary::ZeroFlux, seed, 1e-12);
        } else {
            bespoke_gpu::testing::skipped("fv f64 against the CPU: the adapter lacks SHADER_F64");
        }
    }
}

/// The 16-bit offset layouts give their full-index layouts' bits (the same values, the same neighbours):
/// tet-major-d16 tet-major's, slot-major-x4-d16 slot-major-x4's, on a mesh past 32 768 tets where offsets
/// overflow and whose tets are not a multiple of 4 (the four-tet layouts' pads): numbered as gmsh numbers (near
/// and far tets mixed), METIS-ordered, zero-flux and Dirichlet (the ghost as an offset or a row), both kernels
/// (the four-tet layouts: gather only), f32 and f64.
#[test]
fn d16_layouts_give_their_full_index_bits() {
    let Some(gpu) = test_gpu() else { return };
    let mesh = BoxMesh {
        cells: [19, 17, 17],
        jitter: 0.1,
        shuffle: Some(5),
        seed: 6,
    }
    .build()
    .expect("box");
    let adj = adjacency(&mesh).expect("adjacency");
    let mut rng = seeded(fresh_seed());
    for boundary in [Boundary::ZeroFlux, Boundary::Dirichlet(0.25)] {
        let op = Operator::diffusion(&mesh, &adj, 1.0, boundary).expect("operator");
        let n = op.n();
        assert!(n > 32_768, "{n} tets: offsets must overflow somewhere");
        assert_ne!(n % 4, 0, "{n} tets: the four-tet layouts pad");
        let x: Vec<f64> = (0..n).map(|_| rng.random::<f64>()).collect();
        for kind in [OrderingKind::AsRead, OrderingKind::Metis { block: 2048 }] {
            let (p, _) = order(&op, kind).expect("ordering");
            let op = p.apply_operator(&op);
            let (near, far) = bespoke_fv::kernel::d16_indices(&op.indices);
            let far_tets = near
                .iter()
                .filter(|d| d[0] == bespoke_fv::kernel::D16_FAR)
                .count();
            assert_eq!(far.len(), far_tets.max(1));
            if kind == OrderingKind::AsRead {
                assert!(
                    far_tets > 0 && far_tets < n,
                    "as read: {far_tets} of {n} far"
                );
            }
            fn bits<T: Real>(gpu: &bespoke_gpu::Gpu, op: &Operator, x: &[f64], what: &str) {
                let dt = op.default_dt();
                for (kernel, full, d16) in [
                    (KernelKind::Gather, Layout::TetMajor, Layout::TetMajorD16),
                    (
                        KernelKind::BlockCached { block: 512 },
                        Layout::TetMajor,
                        Layout::TetMajorD16,
                    ),
                    (
                        KernelKind::Gather,
                        Layout::SlotMajorX4,
                        Layout::SlotMajorX4D16,
                    ),
                ] {
                    let both = layouts_on(gpu, [full, d16], op.n(), T::DTYPE.size(), what);
                    if both.len() < 2 {
                        continue;
                    }
                    let run = |layout| {
                        let mut d =
                            Diffusion::<T>::new(gpu, op, kernel, layout, dt).expect("upload");
                        d.set_x(x).expect("set x");
                        d.step(3).expect("step");
                        d.x().expect("read")
                    };
                    let (want, got) = (run(full), run(d16));
                    let differ = bespoke_gpu::testing::differing_bits(&want, &got);
                    assert_eq!(
                        differ,
                        0,
                        "{what} {} {} {:?}: {differ} tets differ",
                        kernel.name(),
                        d16.name(),
                        T::DTYPE
                    );
                }
            }
            let what = format!("{} {boundary:?}", kind.name());
            bits::<f32>(gpu, &op, &x, &what);
            if gpu.has_f64() {
                bits::<f64>(gpu, &op, &x, &what);
            }
        }
    }
}

fn weighted_mass(op: &Operator, x: &[f64]) -> f64 {
    op.volumes.iter().zip(x).map(|(v, x)| v * x).sum()
}

#[test]
fn zero_flux_conserves_and_dirichlet_converges() {
    let Some(gpu) = test_gpu() else { return };
    let mesh = sphere();
    let adj = adjacency(&mesh).expect("adjacency");
    let op = Operator::diffusion(&mesh, &adj, 1.0, Boundary::ZeroFlux).expect("operator");
    let dt = 0.9 / op.max_row_sum();
    let mut rng = seeded(fresh_seed());
    let x0: Vec<f64> = (0..op.n()).map(|_| rng.random::<f64>()).collect();
    let m0 = weighted_mass(&op, &x0);
    let plain = plain_layout(gpu);
    let mut d = Diffusion::<f32>::new(gpu, &op, KernelKind::Gather, plain, dt).expect("f32");
    d.set_x(&x0).expect("set");
    d.step(1000).expect("steps");
    let drift = ((weighted_mass(&op, &d.x().expect("read")) - m0) / m0).abs();
    // The issue asks for 1e-6. Stored unshifted, the near-steady field repeated the same roundings every step and
    // drifted 3e-7 typically, 1.2e-6 at worst over 160 draws; shifted by the mean, 8e-9 at worst.
    assert!(drift < 1e-7, "f32 mass drift {drift:e}");
    if gpu.has_f64() {
        let mut d =
            Diffusion::<f64>::new(gpu, &op, KernelKind::BlockCached { block: 512 }, plain, dt)
                .expect("f64");
        d.set_x(&x0).expect("set");
        d.step(1000).expect("steps");
        let drift = ((weighted_mass(&op, &d.x().expect("read")) - m0) / m0).abs();
        assert!(drift < 1e-12, "f64 mass drift {drift:e}");
    } else {
        bespoke_gpu::testing::skipped("fv f64 mass conservation: the adapter lacks SHADER_F64");
    }
    let op = Operator::diffusion(&mesh, &adj, 1.0, Boundary::Dirichlet(2.5)).expect("operator");
    let dt = 0.9 / op.max_row_sum();
    let mut d = Diffusion::<f32>::new(gpu, &op, KernelKind::Gather, plain, dt).expect("f32");
    d.set_x(&x0).expect("set");
    d.step(4000).expect("steps");
    let worst = d
        .x()
        .expect("read")
        .iter()
        .map(|v| (v - 2.5).abs())
        .fold(0.0, f64::max);
    assert!(worst < 1e-3, "Dirichlet: still {worst} from 2.5");
    assert!(
        Diffusion::<f32>::new(gpu, &op, KernelKind::Gather, plain, 2.0 / op.max_row_sum()).is_err()
    );
    assert!(
        Diffusion::<f32>::new(gpu, &op, KernelKind::BlockCached { block: 100 }, plain, dt).is_err()
    );
}

#[test]
fn a_layout_past_the_binding_limit_is_refused_and_the_bench_says_so() {
    use bespoke_fv::bench::bench_operator;
    use bespoke_gpu::GpuOptions;
    use bespoke_gpu::testing::emulating;
    let Some(shared) = test_gpu() else { return };
    let mesh = jittered_box();
    let adj = adjacency(&mesh).unwrap();
    let op = Operator::diffusion(&mesh, &adj, 1.0, Boundary::ZeroFlux).unwrap();
    let n = op.n();
    // x and each slot-major array fit (4 (n + 1) bytes); the tet-major operator (16 n bytes) does not, as 16.5 M
    // tets in tet-major did not on lavapipe's 128 MiB bindings.
    let limit = (8 * n) as u64;
    assert!(Layout::SlotMajor.largest_binding(n, 4) <= limit);
    assert!(Layout::TetMajor.largest_binding(n, 4) > limit);
    let small = emulating(
        shared,
        GpuOptions {
            max_binding_bytes: Some(limit),
            ..Default::default()
        },
    );
    let dt = op.default_dt();
    let e =
        Diffusion::<f32>::new(&small, &op, KernelKind::Gather, Layout::TetMajor, dt).unwrap_err();
    assert!(matches!(e, FvError::Unsupported(_)), "{e}");
    assert!(e.to_string().contains("largest binding"), "{e}");
    let runs = bench_operator::<f32>(&small, &op, &[OrderingKind::AsRead], 2048, 1, |_| {})
        .expect("the bench runs what fits");
    for r in &runs {
        // Past the binding limit, or (on a device held to fewer storage buffers) past those.
        let over = Layout::parse(r.layout)
            .unwrap()
            .misfit_on(&small, n, 4)
            .is_some();
        assert_eq!(r.skipped.is_some(), over, "{} {}", r.kernel, r.layout);
        assert_eq!(r.gbps.is_finite(), !over, "{} {}", r.kernel, r.layout);
    }
    assert!(runs.iter().any(|r| r.skipped.is_some()));
    assert!(runs.iter().any(|r| r.skipped.is_none()));
    // `fv run --layout auto` on that adapter: the tuning operator shrinks (to a block of 2048 tets at least); the
    // layouts that bind too much even there are left out, the others timed; the choice for this mesh is one whose
    // bindings fit (the chosen one, or the fastest timed that fits).
    let dir = tempfile::tempdir().unwrap();
    let cache = bespoke_gpu::DiskCache::at(dir.path(), "fv-shape", 1);
    let choice =
        bespoke_fv::diffusion::step_layout_in::<f32>(&small, KernelKind::Gather, Some(&cache))
            .unwrap();
    let timed: Vec<Layout> = choice.timed.iter().map(|t| t.0).collect();
    for l in Layout::ALL {
        let binds = l.misfit_on(&small, 2048, 4).is_none();
        assert_eq!(timed.contains(&l), binds, "{l:?} in {choice:?}");
    }
    let (layout, _) = choice.for_tets(
        n,
        4,
        small.binding_limit(),
        small.limits().max_storage_buffers_per_shader_stage,
    );
    assert!(
        layout.largest_binding(n, 4) <= limit,
        "{choice:?} gave {layout:?}"
    );
    Diffusion::<f32>::new(&small, &op, KernelKind::Gather, layout, dt)
        .expect("the fitting layout runs");
}

/// On a device held to WebGPU's limits (8 storage buffers a kernel) a layout that binds more (slot-major 10, the
/// four-tet layouts 11 and 9) is refused by name before anything is uploaded, the bench reports it as not timed,
/// the layout tuner leaves it out, and the layout chosen steps the bits slot-major steps on the shared device.
#[test]
fn layouts_binding_more_storage_buffers_than_the_device_allows_are_left_out() {
    use bespoke_fv::bench::bench_operator;
    use bespoke_gpu::testing::emulating;
    use bespoke_gpu::{GpuOptions, LimitsProfile};
    let Some(shared) = test_gpu() else { return };
    let held = emulating(
        shared,
        GpuOptions {
            limits: Some(LimitsProfile::WebGpu),
            ..Default::default()
        },
    );
    let max = held.limits().max_storage_buffers_per_shader_stage;
    assert_eq!(max, 8);
    let mesh = jittered_box();
    let adj = adjacency(&mesh).unwrap();
    let op = Operator::diffusion(&mesh, &adj, 1.0, Boundary::ZeroFlux).unwrap();
    let dt = op.default_dt();
    for layout in [
        Layout::SlotMajor,
        Layout::SlotMajorX4,
        Layout::SlotMajorX4D16,
    ] {
        let e = Diffusion::<f32>::new(&held, &op, KernelKind::Gather, layout, dt).unwrap_err();
        assert!(matches!(e, FvError::Unsupported(_)), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("{} storage buffers", layout.storage_buffers()))
                && msg.contains("allows 8")
                && msg.contains("tet-major 4"),
            "{msg}"
        );
    }
    let runs = bench_operator::<f32>(&held, &op, &[OrderingKind::AsRead], 2048, 1, |_| {})
        .expect("the bench runs what binds");
    for r in &runs {
        let over = Layout::parse(r.layout).unwrap().storage_buffers() > max;
        assert_eq!(r.skipped.is_some(), over, "{} {}", r.kernel, r.layout);
        assert_eq!(r.gbps.is_finite(), !over, "{} {}", r.kernel, r.layout);
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = bespoke_gpu::DiskCache::at(dir.path(), "fv-shape", 1);
    let choice =
        bespoke_fv::diffusion::step_layout_in::<f32>(&held, KernelKind::Gather, Some(&cache))
            .unwrap();
    let timed: Vec<Layout> = choice.timed.iter().map(|t| t.0).collect();
    for l in Layout::ALL {
        assert_eq!(
            timed.contains(&l),
            l.storage_buffers() <= max,
            "{l:?} in {choice:?}"
        );
    }
    let (layout, _) = choice.for_tets(op.n(), 4, held.binding_limit(), max);
    assert!(layout.storage_buffers() <= max, "{choice:?}");
    let mut rng = seeded(fresh_seed());
    let x: Vec<f64> = (0..op.n()).map(|_| rng.random_range(-1.0..1.0)).collect();
    let run = |gpu, layout| {
        let mut d = Diffusion::<f32>::new(gpu, &op, KernelKind::Gather, layout, dt).unwrap();
        d.set_x(&x).unwrap();
        d.step(3).unwrap();
        d.x().unwrap()
    };
    let got = run(&held, layout);
    let plain = plain_layout(shared);
    let want = run(shared, plain);
    assert!(
        got.iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "{layout:?} on the held device differs from {plain:?} on the shared one"
    );
}

/// A device whose 2-D textures are smaller than the 8192 texels a side the texture layout assumes (wgpu's downlevel
/// limits: 2048): an operator whose rows of 64 texels pass 2048 is refused by name before anything is uploaded, one
/// within it runs, and the layout chosen for it gives way to one that fits.
#[test]
fn a_texture_past_the_devices_texture_side_is_refused_by_name() {
    use bespoke_fv::diffusion::LayoutChoice;
    use bespoke_gpu::testing::emulating;
    use bespoke_gpu::{GpuOptions, LimitsProfile};
    let Some(shared) = test_gpu() else { return };
    let held = emulating(
        shared,
        GpuOptions {
            limits: Some(LimitsProfile::Downlevel),
            ..Default::default()
        },
    );
    assert_eq!(held.limits().max_texture_dimension_2d, 2048);
    // 64 texels a row (the width texture_width takes up to 64 × 8192 tets): 2048 rows hold 131 072.
    let side = Layout::Texture
        .misfit_on(&held, 64 * 2048 + 1, 4)
        .expect("past 2048 rows");
    assert!(
        side.contains("64 × 2049") && side.contains("2048 × 2048"),
        "{side}"
    );
    assert_eq!(Layout::Texture.misfit_on(&held, 64 * 2048, 4), None);
    assert_eq!(Layout::Texture.misfit_on(shared, 64 * 2048 + 1, 4), None);
    // A 28³-cube box: 131 712 tets, 2058 rows.
    let (mesh, adj) = BoxMesh::cube(28).build_with_adjacency().unwrap();
    let op = Operator::diffusion(&mesh, &adj, 1.0, Boundary::ZeroFlux).unwrap();
    let n = op.n();
    assert!(n > 64 * 2048, "{n}");
    let dt = op.default_dt();
    let e = Diffusion::<f32>::new(&held, &op, KernelKind::Gather, Layout::Texture, dt).unwrap_err();
    assert!(
        matches!(e, FvError::Unsupported(_)) && e.to_string().contains("2048 × 2048"),
        "{e}"
    );
    let choice = LayoutChoice {
        layout: Layout::Texture,
        timed: vec![(Layout::Texture, 1.0), (Layout::TetMajor, 2.0)],
        source: "tuned".into(),
        failed: Vec::new(),
    };
    assert_eq!(
        choice.fitting(|l| l.misfit_on(&held, n, 4).is_none()),
        (Layout::TetMajor, true)
    );
    // The sphere's 2 694 tets fit: the texture layout steps there as on the shared device.
    let s = sphere();
    let op = Operator::diffusion(&s, &adjacency(&s).unwrap(), 1.0, Boundary::ZeroFlux).unwrap();
    let dt = op.default_dt();
    let mut rng = seeded(fresh_seed());
    let x: Vec<f64> = (0..op.n()).map(|_| rng.random_range(-1.0..1.0)).collect();
    let run = |gpu| {
        let mut d =
            Diffusion::<f32>::new(gpu, &op, KernelKind::Gather, Layout::Texture, dt).unwrap();
        d.set_x(&x).unwrap();
        d.step(3).unwrap();
        d.x().unwrap()
    };
    assert_eq!(differing_bits(&run(&held), &run(shared)), 0);
}
