//! A lattice across ranks (threads of this process, each rank its own block and halo) is bitwise identical to
//! the same lattice on one domain: every cell type, both streamings, f32 and both f16 layouts, 1–4 ranks with
//! uneven blocks along either axis or both, overlap on and off; probes, fields and checkpoints too. Bad
//! decompositions and disagreeing ranks are errors on every rank, and a failing rank never hangs the others.

use std::rc::Rc;

use bespoke_comm::{Comm, ThreadComm, run_threads};
use bespoke_gpu::testing::{emulating, fresh_seed, test_gpu};
use bespoke_gpu::{Gpu, GpuOptions, Quirks};
use bespoke_lbm::distributed::Ranks;
use bespoke_lbm::shape::StepShape;
use bespoke_lbm::{Cell, Collision, Config, Flags, Lattice, Storage, Streaming};

/// What a run reads: populations after `steps - 1` (an even count), fields and a probe after `steps`.
#[derive(Debug, PartialEq)]
struct Seen {
    pops: Vec<u64>,
    rho: Vec<u32>,
    ux: Vec<u32>,
    uy: Vec<u32>,
    probe: Vec<u64>,
}

#[derive(Clone, Copy, Debug)]
enum Domain {
    /// Box walls, a moving lid, an interpolated circle, a body force and the subgrid model.
    Cavity,
    /// Channel walls, a parabolic inlet, an outlet, an interpolated circle.
    Channel,
    /// Periodic, no flags, a body force.
    Periodic,
}

fn setup(
    domain: Domain,
    nx: usize,
    ny: usize,
    storage: Storage,
    streaming: Streaming,
) -> (Config, Flags) {
    let mut flags = Flags::fluid(nx, ny);
    let mut cfg = Config {
        storage,
        streaming,
        ..Config::new(nx, ny, Collision::trt(1.6))
    };
    let (cx, cy) = (nx as f64 / 2.0 - 0.3, ny as f64 / 2.0 + 0.2);
    match domain {
        Domain::Cavity => {
            flags.box_walls();
            for x in 1..nx - 1 {
                flags.set(x, ny - 1, Cell::MovingWall([0.05, 0.0]));
            }
            flags.add_circle([cx, cy], 2.3, true);
            cfg.force = [2e-5, -1e-5];
            cfg.smagorinsky = 0.14;
        }
        Domain::Channel => {
            flags.channel_walls();
            let h = (ny - 2) as f64;
            for y in 1..ny - 1 {
                let s = (y as f64 - 0.5) / h;
                flags.set(0, y, Cell::Inlet([0.06 * 4.0 * s * (1.0 - s), 0.0]));
                flags.set(nx - 1, y, Cell::Outlet(1.0));
            }
            flags.add_circle([cx, cy], 2.6, true);
            cfg.collision = Collision::Bgk { omega: 1.7 };
        }
        Domain::Periodic => {
            cfg.force = [1e-5, 3e-6];
        }
    }
    (cfg, flags)
}

fn init(seed: u64) -> impl Fn(usize, usize) -> (f64, [f64; 2]) {
    move |x, y| {
        let h = |k: u64| {
            let v = (x as u64 * 7919 + y as u64 * 104_729 + k)
                .wrapping_mul(seed | 1)
                .wrapping_add(seed >> 7);
            ((v >> 11) % 10_000) as f64 / 10_000.0 - 0.5
        };
        (1.0 + 0.02 * h(1), [0.04 * h(2), 0.04 * h(3)])
    }
}

/// Reads what `Seen` holds from a lattice stepped to `steps` (odd), probing a point near the circle and the
/// links into every solid cell.
fn observe(lat: &mut Lattice<'_>, steps: u64) -> Seen {
    lat.step(steps - 1).expect("steps");
    let pops = lat
        .populations()
        .expect("populations")
        .iter()
        .map(|v| v.to_bits())
        .collect();
    lat.step(1).expect("step");
    let f = lat.macroscopic().expect("fields");
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let (nx, ny) = (lat.config().nx, lat.config().ny);
    let links = lat.flags().links_into(|_, _| true);
    let probe = lat
        .probe(&[(nx / 2 + 3, ny / 2), (1, 1)], &links)
        .expect("probe");
    let p = lat.read_probe(&probe).expect("read probe");
    let mut probe = vec![p.force[0].to_bits(), p.force[1].to_bits()];
    for (rho, u) in p.points {
        probe.extend([rho.to_bits(), u[0].to_bits(), u[1].to_bits()]);
    }
    Seen {
        pops,
        rho: bits(&f.rho),
        ux: bits(&f.ux),
        uy: bits(&f.uy),
        probe,
    }
}

/// The same run on `p` thread ranks sharing `gpu`; every rank's view of the whole domain. Runs on three ranks
/// keep each block's nine directions in one buffer, bound once by the step (the other launch-shape layout), and
/// walk every other step backwards (`StepShape::alternate`: the whole block's steps where overlap is off; its
/// inner cells and ring walk forward).
fn distributed(
    gpu: &Gpu,
    p: usize,
    grid: Option<[usize; 2]>,
    overlap: bool,
    setup: &(Config, Flags),
    seed: u64,
    steps: u64,
) -> Vec<Seen> {
    run_threads(p, |comm: ThreadComm| {
        let ranks = Ranks {
            grid,
            overlap,
            shape: (p == 3).then(|| StepShape {
                one_buffer: true,
                alternate: true,
                ..StepShape::given()
            }),
            ..Ranks::new(Rc::new(comm))
        };
        let mut lat = Lattice::new_distributed(gpu, setup.0.clone(), setup.1.clone(), &ranks)?;
        // Three ranks are given one buffer; the others step in the tuned shape, which may be either.
        assert!(p != 3 || (lat.step_shape().one_buffer && lat.step_shape().alternate));
        lat.init_equilibrium(init(seed))?;
        Ok::<_, bespoke_lbm::LbmError>(observe(&mut lat, steps))
    })
    .unwrap_or_else(|e| panic!("{p} ranks {grid:?}: {e}"))
}

fn check(
    gpu: &Gpu,
    domain: Domain,
    nx: usize,
    ny: usize,
    storage: Storage,
    streaming: Streaming,
    runs: &[(usize, Option<[usize; 2]>, bool)],
) {
    if storage == Storage::F16 && ny % 2 == 1 && !gpu.has_f16() {
        bespoke_gpu::testing::skipped(&format!(
            "{domain:?} {nx}x{ny} f16 across ranks: one f16 per cell needs SHADER_F16, which the adapter lacks"
        ));
        return;
    }
    let seed = fresh_seed();
    let s = setup(domain, nx, ny, storage, streaming);
    let steps = 9;
    let mut one = Lattice::new(gpu, s.0.clone(), s.1.clone()).expect("single domain");
    one.init_equilibrium(init(seed)).expect("init");
    let want = observe(&mut one, steps);
    assert!(
        want.rho.iter().all(|r| f32::from_bits(*r).is_finite()),
        "{domain:?}: the reference diverged"
    );
    for &(p, grid, overlap) in runs {
        for (rank, got) in distributed(gpu, p, grid, overlap, &s, seed, steps)
            .iter()
            .enumerate()
        {
            let what = format!(
                "{domain:?} {nx}x{ny} {} {} on {p} ranks {grid:?}, overlap {overlap}, rank {rank}",
                storage.name(),
                streaming.name()
            );
            let first = |a: &[u64], b: &[u64]| a.iter().zip(b).position(|(x, y)| x != y);
            assert!(
                got.pops == want.pops,
                "{what}: populations differ first at {:?}",
                first(&got.pops, &want.pops)
            );
            assert!(
                got.rho == want.rho && got.ux == want.ux && got.uy == want.uy,
                "{what}: fields differ"
            );
            assert_eq!(got.probe, want.probe, "{what}: probe differs");
        }
    }
}

/// Every storage and streaming on one kind of domain, uneven blocks: 25 columns in 2 or 3, 13 or 12 rows in 2.
/// One test a domain, so that the harness runs them at once (on lavapipe each its own device's compiles).
fn every_cell_type_layout_and_streaming(domain: Domain) {
    let Some(gpu) = test_gpu() else { return };
    for (storage, ny) in [(Storage::F32, 13), (Storage::F16, 12), (Storage::F16, 13)] {
        for streaming in [Streaming::Ab, Streaming::InPlace] {
            check(
                gpu,
                domain,
                25,
                ny,
                storage,
                streaming,
                &[(2, None, true), (3, Some([3, 1]), false)],
            );
        }
    }
}

#[test]
fn every_cell_type_layout_and_streaming_matches_one_domain_in_a_cavity() {
    every_cell_type_layout_and_streaming(Domain::Cavity);
}

#[test]
fn every_cell_type_layout_and_streaming_matches_one_domain_in_a_channel() {
    every_cell_type_layout_and_streaming(Domain::Channel);
}

#[test]
fn every_cell_type_layout_and_streaming_matches_one_domain_when_periodic() {
    every_cell_type_layout_and_streaming(Domain::Periodic);
}

#[test]
fn cuts_along_y_and_both_axes_with_and_without_overlap() {
    let Some(gpu) = test_gpu() else { return };
    for (storage, ny) in [(Storage::F32, 22), (Storage::F16, 22)] {
        for streaming in [Streaming::Ab, Streaming::InPlace] {
            check(
                gpu,
                Domain::Channel,
                19,
                ny,
                storage,
                streaming,
                &[
                    (1, None, true),
                    (2, Some([1, 2]), true),
                    (4, Some([2, 2]), true),
                    (4, Some([2, 2]), false),
                ],
            );
        }
    }
    // The lid on the cut between two blocks stacked along y, and the circle straddling it.
    check(
        gpu,
        Domain::Cavity,
        16,
        21,
        Storage::F32,
        Streaming::InPlace,
        &[(3, Some([1, 3]), true)],
    );
}

/// On a device held to WebGPU's limits (8 storage buffers a kernel) the lattice binds its directions as one
/// buffer, and so does the halo exchange (nine bindings and two more before): two ranks match one domain.
#[test]
fn ranks_on_a_device_held_to_webgpus_limits_match_one_domain() {
    let Some(shared) = test_gpu() else { return };
    let held = emulating(
        shared,
        GpuOptions {
            limits: Some(bespoke_gpu::LimitsProfile::WebGpu),
            ..Default::default()
        },
    );
    assert_eq!(held.limits().max_storage_buffers_per_shader_stage, 8);
    for streaming in [Streaming::Ab, Streaming::InPlace] {
        check(
            &held,
            Domain::Channel,
            19,
            22,
            Storage::F32,
            streaming,
            &[(2, Some([1, 2]), true), (2, None, false)],
        );
    }
}

/// On a device allowing four storage buffers a kernel (wgpu's downlevel limits: GL ES, WebGPU compatibility, older
/// mobile drivers) the macroscopic kernel writes its three fields into one buffer, a probe's entries and values
/// share one, and the in-place stash of interpolated links lies after the boundary table: populations, fields and
/// probes match the plain device's bit for bit, both streamings, on one domain and on two ranks.
#[test]
fn a_device_with_four_storage_buffers_packs_its_buffers_and_matches_the_plain_device() {
    let Some(shared) = test_gpu() else { return };
    let held = emulating(
        shared,
        GpuOptions {
            max_storage_buffers_per_stage: Some(4),
            ..Default::default()
        },
    );
    assert_eq!(held.limits().max_storage_buffers_per_shader_stage, 4);
    for streaming in [Streaming::Ab, Streaming::InPlace] {
        for (domain, storage) in [
            (Domain::Channel, Storage::F32),
            (Domain::Cavity, Storage::F16),
        ] {
            let seed = fresh_seed();
            let s = setup(domain, 19, 22, storage, streaming);
            let what = format!("{domain:?} {} {}", storage.name(), streaming.name());
            let run = |gpu: &Gpu| {
                let mut lat = Lattice::new(gpu, s.0.clone(), s.1.clone())
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                lat.init_equilibrium(init(seed)).expect("init");
                observe(&mut lat, 9)
            };
            let want = run(shared);
            assert!(
                want.rho.iter().all(|r| f32::from_bits(*r).is_finite()),
                "{what}: the reference diverged"
            );
            assert!(
                run(&held) == want,
                "{what}: four storage buffers gave other bits"
            );
        }
        check(
            &held,
            Domain::Channel,
            19,
            22,
            Storage::F32,
            streaming,
            &[(2, Some([1, 2]), true)],
        );
    }
}

#[test]
fn devices_of_their_own_and_checkpoints_across_ranks() {
    let Some(shared) = test_gpu() else { return };
    let seed = fresh_seed();
    let dir = std::env::temp_dir().join(format!("bespoke-lbm-dist-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // Also where the kernels keep the in-place stash unrounded, as NVIDIA's driver 580 did: a resume that
    // rebuilt the stash from the stored words differed there.
    let folded_opts = || GpuOptions {
        quirks: Quirks {
            folds_f16_round_trip: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let folded = emulating(shared, folded_opts());
    for (gpu, streaming) in [
        (shared, Streaming::Ab),
        (shared, Streaming::InPlace),
        (&folded, Streaming::InPlace),
    ] {
        let quirks = gpu.quirks();
        let s = setup(Domain::Cavity, 24, 14, Storage::F16, streaming);
        let mut one = Lattice::new(gpu, s.0.clone(), s.1.clone()).expect("lattice");
        one.init_equilibrium(init(seed)).expect("init");
        one.step(12).expect("steps");
        let want = one.populations().expect("populations");
        let path = dir.join(format!("{}.ckpt", streaming.name()));
        // Each rank opens its own device; the run checkpoints after an odd step count on 2 ranks, and resumes on
        // 2 ranks and on one domain.
        run_threads(2, |comm| {
            let gpu = Gpu::with_options(GpuOptions {
                quirks,
                ..Default::default()
            })?;
            // The emulated driver's ranks keep their directions in one buffer each.
            let ranks = Ranks {
                shape: quirks.folds_f16_round_trip.then(|| StepShape {
                    one_buffer: true,
                    ..StepShape::given()
                }),
                ..Ranks::new(Rc::new(comm))
            };
            let mut lat = Lattice::new_distributed(&gpu, s.0.clone(), s.1.clone(), &ranks)?;
            lat.init_equilibrium(init(seed))?;
            lat.step(7)?;
            lat.checkpoint(&path, "dist")?;
            ranks.comm.barrier()?;
            // A write that fails half-way through the words (a full disk) on rank 0: every rank still takes part
            // in every gather after it (none waits for ever), rank 0 reports it, the checkpoint before stays.
            let failed = lat.checkpoint_failing(&path, "dist", 5000);
            match ranks.comm.rank() {
                0 => assert!(
                    failed
                        .as_ref()
                        .is_err_and(|e| e.to_string().contains("simulated failure")),
                    "{failed:?}"
                ),
                _ => assert!(failed.is_ok(), "{failed:?}"),
            }
            ranks.comm.barrier()?;
            let (mut again, meta) = Lattice::resume_distributed(&gpu, &path, &ranks)?;
            assert_eq!(meta, "dist");
            again.step(5)?;
            assert!(
                again.populations()? == want,
                "{} ({quirks:?}): resumed on 2 ranks differs",
                streaming.name()
            );
            Ok::<_, bespoke_lbm::LbmError>(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
        let (mut again, _) = Lattice::resume(gpu, &path).expect("resume on one domain");
        again.step(5).expect("steps");
        assert!(
            again.populations().expect("read") == want,
            "{} ({quirks:?}): resumed on one domain differs",
            streaming.name()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_decompositions_and_disagreeing_ranks_fail_on_every_rank() {
    let Some(gpu) = test_gpu() else { return };
    let s = setup(Domain::Cavity, 10, 8, Storage::F32, Streaming::Ab);
    let try_run =
        |p: usize, grid: Option<[usize; 2]>, per_rank: &(dyn Fn(usize, &mut Config) + Sync)| {
            run_threads(p, |comm: ThreadComm| {
                let mut cfg = s.0.clone();
                per_rank(comm.rank(), &mut cfg);
                let ranks = Ranks {
                    grid,
                    ..Ranks::new(Rc::new(comm))
                };
                Lattice::new_distributed(gpu, cfg, s.1.clone(), &ranks).map(|_| ())
            })
            .expect_err("must fail")
            .to_string()
        };
    let e = try_run(3, Some([2, 2]), &|_, _| {});
    assert!(e.contains("4 blocks but the job has 3 ranks"), "{e}");
    let e = try_run(5, Some([1, 5]), &|_, _| {});
    assert!(
        e.contains("more ranks than the lattice can be cut into"),
        "{e}"
    );
    let e = try_run(6, None, &|_, _| {});
    assert!(
        e.contains("more ranks than the lattice can be cut into"),
        "{e}"
    );
    let e = try_run(2, None, &|r, cfg| {
        cfg.collision = Collision::trt(1.0 + 0.1 * r as f64)
    });
    assert!(e.contains("disagree on the lattice"), "{e}");
    // Cells that differ on one rank, each keeping every row's count of runs: a wall cell moved along its row
    // (the runs' lengths differ), a lid's velocity (a run's value), a wall distance. The ranks compare each
    // row's runs, not each cell.
    let with_flags = |change: &(dyn Fn(&mut Flags) + Sync)| {
        run_threads(2, |comm: ThreadComm| {
            let mut flags = s.1.clone();
            if comm.rank() == 1 {
                change(&mut flags);
            }
            let ranks = Ranks::new(Rc::new(comm));
            Lattice::new_distributed(gpu, s.0.clone(), flags, &ranks).map(|_| ())
        })
    };
    with_flags(&|_| {}).expect("the same cells on both ranks");
    let changes: [&(dyn Fn(&mut Flags) + Sync); 3] = [
        &|f| f.set(1, 1, Cell::Wall),
        &|f| {
            for x in 1..9 {
                f.set(x, 7, Cell::MovingWall([0.05000000000000001, 0.0]));
            }
        },
        &|f| {
            let ((x, y, d), q) = f.wall_distances().next().expect("the body's links");
            f.set_wall_distance(x, y, d, q * 0.5).expect("a link");
        },
    ];
    for (i, change) in changes.iter().enumerate() {
        let e = with_flags(*change).expect_err("must fail").to_string();
        assert!(e.contains("disagree on the lattice"), "change {i}: {e}");
    }
    // A rank that stops mid-run (here: an error of its own after 3 steps) ends the others' steps with an error
    // naming it instead of a hang.
    let e = run_threads(3, |comm: ThreadComm| {
        let rank = comm.rank();
        let ranks = Ranks::new(Rc::new(comm));
        let mut lat = Lattice::new_distributed(gpu, s.0.clone(), s.1.clone(), &ranks)?;
        lat.step(3)?;
        if rank == 1 {
            return Err(bespoke_lbm::LbmError::State("rank 1 gives up".into()));
        }
        lat.step(1000)
    })
    .expect_err("must fail");
    assert_eq!(e.rank, 1, "{e}");
}

/// A distributed timing on a GPU warms its clocks first, as a single-domain one does, with every rank stepping the
/// same count (the exchange is collective: a count that differed would hang or corrupt the halo), and the state
/// after it is still the single domain's after as many steps. The GPU class is emulated; a CPU adapter and the
/// shared test device (which skips the warm-up) are not warmed.
#[test]
fn a_distributed_timing_warms_a_gpu_with_every_rank_in_step() {
    use bespoke_gpu::{AdapterClass, WARM_SECONDS};
    let Some(shared) = test_gpu() else { return };
    let seed = fresh_seed();
    let gpu_class = bespoke_gpu::testing::emulating_with_warm_up(
        shared,
        GpuOptions {
            adapter_class: Some(AdapterClass::Gpu),
            ..Default::default()
        },
    );
    let s = setup(Domain::Periodic, 40, 18, Storage::F32, Streaming::Ab);
    for gpu in [&gpu_class, shared] {
        let seen = run_threads(3, |comm: ThreadComm| {
            // A given shape: the emulated GPU class would tune on a GPU-sized lattice. One buffer for the nine
            // directions where nine in and nine out pass the adapter's storage buffers a kernel (GL's 16).
            let one_buffer = gpu.limits().max_storage_buffers_per_shader_stage < 18;
            let ranks = Ranks {
                shape: Some(StepShape {
                    one_buffer,
                    ..StepShape::given()
                }),
                ..Ranks::new(Rc::new(comm))
            };
            let mut lat = Lattice::new_distributed(gpu, s.0.clone(), s.1.clone(), &ranks)?;
            lat.init_equilibrium(init(seed))?;
            let t = lat.time_pairs(1, 2)?;
            Ok::<_, bespoke_lbm::LbmError>((t.warmed_seconds, lat.steps_done(), lat.populations()?))
        })
        .unwrap_or_else(|e| panic!("{e}"));
        let steps = seen[0].1;
        for (rank, (warmed, done, pops)) in seen.iter().enumerate() {
            assert_eq!(*done, steps, "rank {rank} stepped {done}, rank 0 {steps}");
            assert_eq!(pops, &seen[0].2, "rank {rank} sees another state");
            if gpu.warms_up() {
                // Each rank stops when the one that stepped least has had its minimum.
                assert!(*warmed >= WARM_SECONDS, "rank {rank} warmed {warmed} s");
            } else {
                // A CPU adapter, or the shared test device (opened to skip the warm-up, a GPU on a GPU
                // machine: on the H200 on 2026-12-04 this asked it to warm as a GPU and failed).
                assert_eq!(
                    *warmed, 0.0,
                    "rank {rank}: a device that skips the warm-up was warmed"
                );
            }
        }
        let mut one = Lattice::new(shared, s.0.clone(), s.1.clone()).expect("lattice");
        one.init_equilibrium(init(seed)).expect("init");
        one.step(steps).expect("steps");
        assert!(
            one.populations().expect("read") == seen[0].2,
            "after {steps} steps the ranks' state is not the single domain's"
        );
    }
}

mod fields;
mod resume;
