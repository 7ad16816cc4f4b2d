//! Diffusion across ranks (threads of this process) is bitwise the single-domain run: every tet's update is the
//! same arithmetic on the same values, whatever the partition, the in-rank ordering, the kernel or the layout.
//! Mass is conserved as on one domain; bad partitions are errors.

use std::rc::Rc;

use bespoke_comm::{Comm, run_threads};
use bespoke_fv::distributed::{RankPart, RankSetup, partition};
use bespoke_fv::generate::BoxMesh;
use bespoke_fv::kernel::{KernelKind, Layout};
use bespoke_fv::operator::adjacency;
use bespoke_fv::ordering::OrderingKind;
use bespoke_fv::testing::{layouts_on, plain_layout};
use bespoke_fv::{Boundary, Diffusion, DistDiffusion, FvError, Operator, Real};
use bespoke_gpu::Gpu;
use bespoke_gpu::rng::{Rng, seeded};
use bespoke_gpu::testing::{fresh_seed, test_gpu};

/// A jittered, shuffled 7×5×4 box: 840 tets.
fn mesh() -> bespoke_fv::TetMesh {
    BoxMesh {
        cells: [7, 5, 4],
        jitter: 0.2,
        shuffle: Some(3),
        seed: 11,
    }
    .build()
    .expect("mesh")
}

fn mesh_op(boundary: Boundary) -> Operator {
    let mesh = mesh();
    let adj = adjacency(&mesh).expect("adjacency");
    Operator::diffusion(&mesh, &adj, 1.0, boundary).expect("operator")
}

/// As read, gather, slot-major (tet-major where `gpu` binds fewer buffers), half the largest stable Δt, overlapped.
fn plain_setup(gpu: &Gpu, op: &Operator) -> RankSetup {
    RankSetup {
        ordering: OrderingKind::AsRead,
        kind: KernelKind::Gather,
        layout: plain_layout(gpu),
        dt: op.default_dt(),
        overlap: true,
    }
}

fn field(n: usize, seed: u64) -> Vec<f64> {
    let mut r = seeded(seed);
    (0..n).map(|_| 1.0 + r.random::<f64>()).collect()
}

fn check<T: Real>(gpu: &Gpu, boundary: Boundary, kind: KernelKind, layout: Layout) {
    let op = mesh_op(boundary);
    let n = op.n();
    let seed = fresh_seed();
    let x0 = field(n, seed);
    let dt = op.default_dt();
    let steps = 23;
    let mut one = Diffusion::<T>::new(gpu, &op, kind, layout, dt).expect("one domain");
    one.set_x(&x0).expect("x");
    one.step(steps).expect("steps");
    let want: Vec<u64> = one.x().expect("x").iter().map(|v| v.to_bits()).collect();
    for p in [1, 2, 3, 4] {
        for (ordering, overlap) in [
            (OrderingKind::AsRead, true),
            (OrderingKind::Metis { block: 64 }, true),
            (OrderingKind::Rcm, false),
        ] {
            let got = run_threads(p, |comm| {
                let comm: Rc<dyn Comm> = Rc::new(comm);
                let comm_rank = comm.rank();
                let part = partition(&*comm, &op)?;
                let setup = RankSetup {
                    ordering,
                    kind,
                    layout,
                    dt,
                    overlap,
                };
                // The host part made once steps with the other overlap too (as `bespoke scale` shares it), to the
                // same bits.
                let shared = Rc::new(RankPart::new(comm.rank(), p, &op, &part, ordering)?);
                let other = RankSetup {
                    overlap: !overlap,
                    ..setup
                };
                let mut e = DistDiffusion::<T>::from_part(gpu, comm.clone(), shared, other)?;
                e.set_x(&x0)?;
                e.step(steps)?;
                // Rank 0 alone holds the operator and the field: each rank is sent its slice and its values.
                let root = (comm.rank() == 0).then_some(&op);
                let sent = Rc::new(RankPart::distribute(&*comm, root, ordering)?);
                assert_eq!(sent.whole_tets(), n);
                assert_eq!(sent.max_row_sum().to_bits(), op.max_row_sum().to_bits());
                let mut f = DistDiffusion::<T>::from_part(gpu, comm.clone(), sent, setup)?;
                f.set_x_from_root(root.map(|_| x0.as_slice()))?;
                f.step(steps)?;
                let mut d = DistDiffusion::<T>::new(gpu, comm, &op, &part, setup)?;
                d.set_x(&x0)?;
                let m0 = d.mass()?;
                // Exact sums: the ranks' mass is the bits of one domain's on the whole field.
                assert_eq!(m0.to_bits(), op.mass(&d.x()?).to_bits(), "{p} ranks: mass");
                d.step(steps)?;
                let m1 = d.mass()?;
                assert_eq!(m1.to_bits(), op.mass(&d.x()?).to_bits(), "{p} ranks: mass");
                let (root, whole) = (d.x_on_root()?, d.x()?);
                assert_eq!(
                    root.is_some(),
                    comm_rank == 0,
                    "only rank 0 holds the gathered field"
                );
                if let Some(x) = root {
                    assert!(
                        x.iter()
                            .zip(&whole)
                            .all(|(a, b)| a.to_bits() == b.to_bits())
                    );
                }
                if boundary == Boundary::ZeroFlux {
                    assert!(
                        (m1 - m0).abs() <= 1e-7 * m0,
                        "mass drift {}",
                        (m1 - m0) / m0
                    );
                }
                let (own, interior, ghosts) = d.sizes();
                let splits = overlap && p > 1 && kind == KernelKind::Gather;
                assert_eq!(d.overlapped(), splits, "{p} ranks, overlap {overlap}");
                assert!(
                    interior <= own && (p == 1) == (ghosts == 0),
                    "{own} {interior} {ghosts}"
                );
                let x = d.x()?;
                assert!(
                    x.iter()
                        .zip(e.x()?)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{p} ranks: overlap {overlap} and {} differ",
                    !overlap
                );
                assert_eq!(f.sizes(), d.sizes(), "{p} ranks: the part sent from rank 0");
                assert!(
                    x.iter()
                        .zip(f.x()?)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{p} ranks: the part sent from rank 0 steps to other bits"
                );
                Ok::<_, FvError>(x.iter().map(|v| v.to_bits()).collect::<Vec<u64>>())
            })
            .unwrap_or_else(|e| panic!("{p} ranks: {e}"));
            for (rank, g) in got.iter().enumerate() {
                let first = g.iter().zip(&want).position(|(a, b)| a != b);
                assert!(
                    first.is_none(),
                    "{boundary:?} {} {} {}: {p} ranks, {} ordering, rank {rank}: tet {first:?} differs",
                    kind.name(),
                    layout.name(),
                    std::any::type_name::<T>(),
                    ordering.name()
                );
            }
        }
    }
}

/// Every kernel and layout under one boundary condition. One test a condition, so that the harness runs them at
/// once (on lavapipe each its own device's compiles).
fn every_kernel_and_layout(boundary: Boundary) {
    let Some(gpu) = test_gpu() else { return };
    let n = mesh_op(Boundary::ZeroFlux).n();
    let plain = plain_layout(gpu);
    for layout in layouts_on(gpu, Layout::ALL, n, 4, "fv across ranks") {
        check::<f32>(gpu, boundary, KernelKind::Gather, layout);
    }
    check::<f32>(gpu, boundary, KernelKind::BlockCached { block: 256 }, plain);
    if gpu.has_f64() {
        check::<f64>(gpu, boundary, KernelKind::Gather, plain);
    } else {
        bespoke_gpu::testing::skipped("fv f64 across ranks: the adapter lacks SHADER_F64");
    }
}

#[test]
fn every_kernel_and_layout_matches_one_domain_bit_for_bit_with_zero_flux() {
    every_kernel_and_layout(Boundary::ZeroFlux);
}

#[test]
fn every_kernel_and_layout_matches_one_domain_bit_for_bit_with_a_dirichlet_value() {
    every_kernel_and_layout(Boundary::Dirichlet(0.25));
}

#[test]
fn bad_partitions_are_errors() {
    let Some(gpu) = test_gpu() else { return };
    let op = mesh_op(Boundary::ZeroFlux);
    let setup = plain_setup(gpu, &op);
    let err = run_threads(2, |comm| {
        let comm: Rc<dyn Comm> = Rc::new(comm);
        // A partition naming a rank past the job's.
        let part = vec![2u32; op.n()];
        DistDiffusion::<f32>::new(gpu, comm, &op, &part, setup).map(|_| ())
    })
    .unwrap_err();
    assert!(err.message.contains("ranks below 2"), "{err}");
    let err = run_threads(2, |comm| {
        let comm: Rc<dyn Comm> = Rc::new(comm);
        let part = partition(&*comm, &op)?;
        DistDiffusion::<f32>::new(gpu, comm, &op, &part, RankSetup { dt: 1.0, ..setup }).map(|_| ())
    })
    .unwrap_err();
    assert!(err.message.contains("explicit Euler"), "{err}");
    // A part made for another ordering, or for another rank, is refused by name.
    let err = run_threads(2, |comm| {
        let comm: Rc<dyn Comm> = Rc::new(comm);
        let part = partition(&*comm, &op)?;
        let made = RankPart::new(comm.rank(), 2, &op, &part, OrderingKind::Rcm)?;
        DistDiffusion::<f32>::from_part(gpu, comm, Rc::new(made), setup).map(|_| ())
    })
    .unwrap_err();
    assert!(err.message.contains("the part was ordered rcm"), "{err}");
    let err = run_threads(2, |comm| {
        let comm: Rc<dyn Comm> = Rc::new(comm);
        let part = partition(&*comm, &op)?;
        let made = RankPart::new(1 - comm.rank(), 2, &op, &part, setup.ordering)?;
        DistDiffusion::<f32>::from_part(gpu, comm, Rc::new(made), setup).map(|_| ())
    })
    .unwrap_err();
    assert!(err.message.contains("the part of rank"), "{err}");
    let err = RankPart::new(2, 2, &op, &vec![0; op.n()], setup.ordering).unwrap_err();
    assert!(err.to_string().contains("ranks 0 to 1"), "{err}");
}

/// Rank 0 alone holds the mesh: what it lacks or gets wrong is every rank's error, by name, never a hang.
#[test]
fn what_rank_0_sends_fails_every_rank_alike() {
    let Some(gpu) = test_gpu() else { return };
    let op = mesh_op(Boundary::ZeroFlux);
    let n = op.n();
    let setup = plain_setup(gpu, &op);
    let all_fail = |what: &str, got: Vec<Result<(), FvError>>, want: &str| {
        for (rank, r) in got.into_iter().enumerate() {
            let e = r.expect_err(what);
            assert!(e.to_string().contains(want), "{what}, rank {rank}: {e}");
        }
    };
    let run =
        |f: &(dyn Fn(Rc<dyn Comm>) -> Result<(), FvError> + Sync)| -> Vec<Result<(), FvError>> {
            // Each rank's own result (an error is a value here, so every rank reports it).
            run_threads(3, |comm| Ok::<_, FvError>(f(Rc::new(comm))))
                .expect("no rank fails the job")
        };
    all_fail(
        "no operator on rank 0",
        run(&|comm| RankPart::distribute(&*comm, None, OrderingKind::AsRead).map(|_| ())),
        "no operator to distribute",
    );
    let small = Operator {
        values: op.values[..2].to_vec(),
        indices: vec![[0; 4], [1; 4]],
        volumes: op.volumes[..2].to_vec(),
        centroids: op.centroids[..2].to_vec(),
        boundary: Boundary::ZeroFlux,
    };
    all_fail(
        "more ranks than tets",
        run(&|comm| {
            let root = (comm.rank() == 0).then_some(&small);
            RankPart::distribute(&*comm, root, OrderingKind::AsRead).map(|_| ())
        }),
        "more ranks than the mesh has tets (2)",
    );
    // As the job's failure: rank 0's own error, not the first relay of it ("rank 0 failed: …") to return, even
    // where rank 0 returns last (as when 60 ranks share the host's cores).
    for _ in 0..3 {
        let e = run_threads(3, |comm| {
            let root = (comm.rank() == 0).then_some(&small);
            let r = RankPart::distribute(&comm, root, OrderingKind::AsRead).map(|_| ());
            if comm.rank() == 0 {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            r
        })
        .unwrap_err();
        assert_eq!(e.rank, 0, "{e}");
        assert!(e.message.starts_with("ranks = 3: more ranks"), "{e}");
    }
    let mut bad = field(n, fresh_seed());
    bad[n / 2] = f64::NAN;
    for (what, x, want) in [
        ("a NaN on rank 0", Some(bad.as_slice()), "is not finite"),
        ("a short field on rank 0", Some(&bad[1..]), "values for"),
        ("no field on rank 0", None, "no field to send"),
    ] {
        all_fail(
            what,
            run(&|comm| {
                let root = (comm.rank() == 0).then_some(&op);
                let part = Rc::new(RankPart::distribute(&*comm, root, setup.ordering)?);
                let mut d = DistDiffusion::<f32>::from_part(gpu, comm.clone(), part, setup)?;
                d.set_x_from_root(if comm.rank() == 0 { x } else { None })
            }),
            want,
        );
    }
}

/// `fv run --layout auto` across ranks (`rank_layout_in`): rank 0 chooses on its device and every rank takes
/// the first layout of rank 0's order that every rank's part fits. With rank 1 on an adapter that binds one byte
/// less than rank 0's choice needs for its part, every rank moves to a layout that fits rank 1 too (or, where
/// none does, every rank says so); the layout taken steps on every rank.
#[test]
fn ranks_take_rank_0s_layout_where_every_part_fits_it() {
    use bespoke_fv::diffusion::step_layout_in;
    use bespoke_fv::distributed::rank_layout_in;
    use bespoke_gpu::testing::emulating;
    use bespoke_gpu::{DiskCache, GpuOptions};
    let Some(shared) = test_gpu() else { return };
    // Large enough that each part binds more than the launch-shape tuner's smallest operator (2048 tets).
    let mesh = BoxMesh::cube(16).build().expect("mesh");
    let adj = adjacency(&mesh).expect("adjacency");
    let op = Operator::diffusion(&mesh, &adj, 1.0, Boundary::ZeroFlux).expect("operator");
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::at(dir.path(), "fv-shape", 1);
    let choice = step_layout_in::<f32>(shared, KernelKind::Gather, Some(&cache)).unwrap();
    // Rank 1's adapter: rank 0's; one byte short of rank 0's choice for rank 1's part; 1 KiB, which nothing fits.
    for (narrow, tiny) in [(false, false), (true, false), (true, true)] {
        let got = run_threads(2, |comm| {
            let p = partition(&comm, &op)?;
            let part = RankPart::new(comm.rank(), 2, &op, &p, OrderingKind::AsRead)?;
            let local = part.local_tets();
            let small = (narrow && comm.rank() == 1).then(|| {
                let need = choice.layout.largest_binding(local, 4);
                emulating(
                    shared,
                    GpuOptions {
                        max_binding_bytes: Some(if tiny { 1024 } else { need - 1 }),
                        ..Default::default()
                    },
                )
            });
            let gpu = small.as_ref().unwrap_or(shared);
            let (layout, source) =
                match rank_layout_in::<f32>(gpu, &comm, KernelKind::Gather, &part, Some(&cache)) {
                    Ok(got) => got,
                    // Every rank finds no layout that every part fits (rank 1's adapter binds 1 KiB, or rank 0
                    // chose the smallest bindings).
                    Err(FvError::Unsupported(why)) if narrow => {
                        assert!(
                            why.contains("no layout of the gather kernel fits every rank"),
                            "{why}"
                        );
                        return Ok((Layout::SlotMajor, why, false));
                    }
                    Err(e) => return Err(e),
                };
            let fits = layout.largest_binding(local, 4) <= gpu.binding_limit();
            {
                let setup = RankSetup {
                    layout,
                    ..plain_setup(gpu, &op)
                };
                let mut d =
                    DistDiffusion::<f32>::from_part(gpu, Rc::new(comm), Rc::new(part), setup)?;
                d.set_x(&field(op.n(), 7))?;
                d.step(2)?;
            }
            Ok::<_, FvError>((layout, source, fits))
        })
        .expect("ranks");
        let (layout, source, ran) = &got[0];
        // Every rank took one layout for one reason, or every rank refused (each naming what fits it).
        assert!(
            got.iter()
                .all(|g| (g.0, g.2) == (*layout, *ran) && (!ran || g.1 == *source)),
            "{got:?}"
        );
        if !narrow {
            assert_eq!(*layout, choice.layout);
            assert_eq!(source, "cached on rank 0");
            assert!(got.iter().all(|g| g.2));
        } else if source.contains("no layout of the gather kernel fits every rank") {
            assert!(got.iter().all(|g| !g.2));
            assert!(got[1].1.contains("fit none"), "{got:?}");
        } else {
            assert!(!tiny, "{got:?}");
            assert_ne!(*layout, choice.layout, "{source}");
            assert!(source.contains("binds too much on some rank"), "{source}");
            assert!(got.iter().all(|g| g.2), "{got:?}");
        }
    }
}

/// A state saved mid-run continues bit for bit wherever it is restored: from one domain onto ranks and from ranks
/// onto one domain, in another layout and ordering (`Diffusion::stored` / `set_stored`,
/// `DistDiffusion::stored_on_root` / `set_stored_from_root`), against a run that never stopped. x alone, shifted
/// back in f64, would not round back to the stored values.
#[test]
fn a_stored_state_continues_bit_for_bit_on_any_ranks() {
    let Some(gpu) = test_gpu() else { return };
    for boundary in [Boundary::ZeroFlux, Boundary::Dirichlet(0.25)] {
        let op = mesh_op(boundary);
        let n = op.n();
        let x0 = field(n, fresh_seed());
        let setup = plain_setup(gpu, &op);
        let straight = |steps: usize| {
            let mut d = Diffusion::<f32>::new(gpu, &op, KernelKind::Gather, setup.layout, setup.dt)
                .expect("one domain");
            d.set_x(&x0).expect("x");
            d.step(steps).expect("steps");
            d
        };
        let want: Vec<u64> = straight(20)
            .x()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        // One domain saved at step 9, restored on three ranks (METIS-ordered) for the 11 steps left.
        let (stored, shift) = straight(9).stored().expect("stored");
        let got = run_threads(3, |comm| {
            let comm: Rc<dyn Comm> = Rc::new(comm);
            let root = (comm.rank() == 0).then_some(&op);
            let part = Rc::new(RankPart::distribute(
                &*comm,
                root,
                OrderingKind::Metis { block: 64 },
            )?);
            let setup = RankSetup {
                ordering: OrderingKind::Metis { block: 64 },
                ..setup
            };
            let mut d = DistDiffusion::<f32>::from_part(gpu, comm.clone(), part, setup)?;
            let mine = (comm.rank() == 0).then_some((stored.as_slice(), shift));
            d.set_stored_from_root(mine)?;
            d.step(11)?;
            // And saved again after them, onto rank 0 alone.
            let back = d.stored_on_root()?;
            assert_eq!(back.is_some(), comm.rank() == 0);
            Ok::<_, FvError>((d.x()?, back))
        })
        .expect("ranks");
        for (x, _) in &got {
            let bits: Vec<u64> = x.iter().map(|v| v.to_bits()).collect();
            assert!(
                bits == want,
                "{boundary:?}: one domain → 3 ranks differs from the straight run"
            );
        }
        // Ranks saved at step 20, restored on one domain in another layout and ordering: the straight run's 25.
        let (stored, shift) = got[0].1.clone().expect("rank 0's state");
        let mut one = Diffusion::<f32>::new(
            gpu,
            &op,
            KernelKind::BlockCached { block: 256 },
            Layout::TetMajor,
            setup.dt,
        )
        .expect("one domain");
        one.set_stored(&stored, shift).expect("set_stored");
        one.step(5).expect("steps");
        let want: Vec<u64> = straight(25)
            .x()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        let got: Vec<u64> = one.x().unwrap().iter().map(|v| v.to_bits()).collect();
        assert!(
            got == want,
            "{boundary:?}: 3 ranks → one domain differs from the straight run"
        );
        // A bad state is refused by name.
        let e = one.set_stored(&stored[1..], shift).unwrap_err().to_string();
        assert!(e.contains(&format!("{n}")), "{e}");
        let e = one.set_stored(&stored, f64::NAN).unwrap_err().to_string();
        assert!(e.contains("shift"), "{e}");
    }
}

/// [`bespoke_fv::run::run`], what `fv run` calls: a run of 12 steps on one domain, and on 2 ranks stopped at its
/// first batch and resumed from the checkpoint it saved there, end with one checkpoint's bits and one VTU's
/// bytes; a frame at step 6 of every run, the same bytes too; the report's mass is the bits of the whole field's.
#[test]
fn a_run_stopped_and_resumed_on_ranks_saves_the_bits_of_one_domain() {
    use std::sync::atomic::AtomicBool;

    use bespoke_fv::checkpoint::Checkpoint;
    use bespoke_fv::run::{RunOptions, Saves, run};
    let Some(gpu) = test_gpu() else { return };
    let mesh = mesh();
    let op = Operator::diffusion(
        &mesh,
        &adjacency(&mesh).expect("adjacency"),
        1.0,
        Boundary::ZeroFlux,
    )
    .expect("operator");
    let go = AtomicBool::new(false);
    let halt = AtomicBool::new(true);
    let opts = |dir: &std::path::Path, stop| RunOptions {
        kernel: KernelKind::Gather,
        layout: Some(plain_layout(gpu)),
        ordering: OrderingKind::Metis { block: 64 },
        steps: 12,
        overlap: true,
        checkpoint: Some(Saves {
            path: dir.join("state.ck"),
            every: Some(4),
        }),
        vtu: Some(Saves {
            path: dir.join("x.vtu"),
            every: Some(6),
        }),
        resume: None,
        stop,
    };
    let one = tempfile::tempdir().unwrap();
    let r = run::<f32>(
        gpu,
        Some((&mesh, &op)),
        None,
        &opts(one.path(), &go),
        |_| {},
    )
    .unwrap();
    assert_eq!((r.from, r.done, r.tets), (0, 12, op.n()));
    assert!(r.ranks.is_none());
    let two = tempfile::tempdir().unwrap();
    // Stopped: the first batch is one step, after which the stop is seen; its checkpoint is step 1's.
    let stopped = run_threads(2, |comm| {
        let whole = (comm.rank() == 0).then_some((&mesh, &op));
        run::<f32>(
            gpu,
            whole,
            Some(Rc::new(comm)),
            &opts(two.path(), &halt),
            |_| {},
        )
    })
    .unwrap();
    assert!(
        stopped.iter().all(|s| s.done == 1),
        "stopped at {:?}",
        stopped.iter().map(|s| s.done).collect::<Vec<_>>()
    );
    let saved = Checkpoint::read(&two.path().join("state.ck")).unwrap();
    assert_eq!(saved.step, 1);
    let resumed = run_threads(2, |comm| {
        let root = comm.rank() == 0;
        let o = RunOptions {
            resume: root.then_some(&saved),
            ..opts(two.path(), &go)
        };
        run::<f32>(
            gpu,
            root.then_some((&mesh, &op)),
            Some(Rc::new(comm)),
            &o,
            |_| {},
        )
    })
    .unwrap();
    let d = &resumed[0];
    assert_eq!((d.from, d.done), (1, 12));
    assert_eq!(d.ranks.as_ref().map(|k| k.ranks), Some(2));
    assert_eq!(
        d.mass_initial.to_bits(),
        r.mass_initial.to_bits(),
        "initial mass"
    );
    assert_eq!(d.mass_final.to_bits(), r.mass_final.to_bits(), "final mass");
    for f in ["state.ck", "x.vtu", "x_00000006.vtu", "x_00000012.vtu"] {
        let read = |dir: &tempfile::TempDir| std::fs::read(dir.path().join(f)).unwrap();
        assert!(
            read(&one) == read(&two),
            "{f} differs between one domain and 2 ranks resumed"
        );
    }
}
