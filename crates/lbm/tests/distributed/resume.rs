//! Resuming on any decomposition, and a lattice past one binding split over ranks on the same adapter.

use super::*;

/// A resume on ranks reads each block's words of the checkpoint (a few ranges a row, wrapping around the
/// domain's x edge where a block's halo does) and continues as one domain does: every layout, cuts along x, y and
/// both, uneven blocks.
#[test]
fn a_resume_on_any_decomposition_continues_as_one_domain() {
    let Some(gpu) = test_gpu() else { return };
    let seed = fresh_seed();
    let dir = tempfile::tempdir().expect("temp dir");
    for (storage, ny) in [(Storage::F32, 13), (Storage::F16, 12), (Storage::F16, 13)] {
        if storage == Storage::F16 && ny % 2 == 1 && !gpu.has_f16() {
            bespoke_gpu::testing::skipped(
                "one f16 per cell needs SHADER_F16, which the adapter lacks",
            );
            continue;
        }
        let s = setup(Domain::Channel, 23, ny, storage, Streaming::Ab);
        let mut one = Lattice::new(gpu, s.0.clone(), s.1.clone()).expect("lattice");
        one.init_equilibrium(init(seed)).expect("init");
        one.step(6).expect("steps");
        let path = dir.path().join(format!("{}-{ny}.ckpt", storage.name()));
        one.checkpoint(&path, "saved").expect("checkpoint");
        one.step(4).expect("steps");
        let want = one.populations().expect("populations");
        for (p, grid) in [
            (2, None),
            (3, Some([3, 1])),
            (2, Some([1, 2])),
            (4, Some([2, 2])),
        ] {
            let got = run_threads(p, |comm: ThreadComm| {
                let ranks = Ranks {
                    grid,
                    ..Ranks::new(Rc::new(comm))
                };
                let (mut lat, _) = Lattice::resume_distributed(gpu, &path, &ranks)?;
                lat.step(4)?;
                lat.populations()
            })
            .unwrap_or_else(|e| panic!("{p} ranks {grid:?}: {e}"));
            for (rank, pops) in got.iter().enumerate() {
                assert!(
                    *pops == want,
                    "{} ny {ny} on {p} ranks {grid:?}, rank {rank}: the resumed run differs",
                    storage.name()
                );
            }
        }
    }
}

/// A lattice whose directions are past the adapter's binding limit cannot run as one domain; split over thread
/// ranks that share the adapter, each block within the limit, it runs, with one domain's bits (the one domain
/// stepped on a device without the limit). What the refusal tells a user to do.
#[test]
fn a_lattice_past_one_binding_runs_split_over_ranks_on_the_same_adapter() {
    let Some(shared) = test_gpu() else { return };
    // Two lattices' nine directions and the flags bound apart: with fewer storage buffers a kernel (GL's 16) a
    // block binds its directions as one buffer, which the binding limit below refuses too.
    let buffers = shared.limits().max_storage_buffers_per_shader_stage;
    if buffers < 19 {
        bespoke_gpu::testing::skipped(&format!(
            "a lattice split over ranks past the binding limit: nine directions in and out and the flags need 19 \
             storage buffers a kernel, `{}` allows {buffers}",
            shared.adapter_name()
        ));
        return;
    }
    let (nx, ny) = (16, 64);
    // One f32 direction: 4096 bytes; each of two blocks cut along y (33 rows with its halo row): 2112; the halo
    // pack's entries (16 bytes a population sent, 3 a cut's cell): about 800.
    let limited = emulating(
        shared,
        GpuOptions {
            max_binding_bytes: Some(3072),
            ..Default::default()
        },
    );
    let s = setup(Domain::Channel, nx, ny, Storage::F32, Streaming::Ab);
    let e = Lattice::new(&limited, s.0.clone(), s.1.clone())
        .expect_err("one domain past the binding limit")
        .to_string();
    assert!(e.contains("binding limit") && e.contains("--ranks"), "{e}");
    let seed = fresh_seed();
    let mut one = Lattice::new(shared, s.0.clone(), s.1.clone()).expect("one domain");
    one.init_equilibrium(init(seed)).expect("init");
    let want = observe(&mut one, 9);
    for (rank, got) in distributed(&limited, 2, Some([1, 2]), true, &s, seed, 9)
        .iter()
        .enumerate()
    {
        assert!(got == &want, "rank {rank}: differs from one domain");
    }
}
