//! The initial state made in chunks of words is the state made at once, and the populations the CPU gives.

use super::*;

/// Every layout (f32, paired f16, single f16 where the adapter has it) and both streaming patterns, with walls
/// and interpolated links (in place: the stash is rebuilt from the chunks' words): the lattice holds another
/// random state first, then `init_equilibrium_in_chunks` at chunk sizes that split words, rows and the paired
/// halves unevenly must give the bits of `set_populations` with the CPU's equilibria, before and after steps.
#[test]
fn the_initial_state_made_in_chunks_is_the_cpu_equilibrium() {
    let Some(gpu) = test_gpu() else { return };
    let mut rng = StdRng::seed_from_u64(fresh_seed());
    let nx = 37;
    let mut cases = vec![
        (Storage::F32, Streaming::Ab, 22, false),
        (Storage::F32, Streaming::InPlace, 22, true),
        (Storage::F16, Streaming::Ab, 22, true),
        (Storage::F16, Streaming::InPlace, 22, true),
    ];
    if gpu.has_f16() {
        cases.push((Storage::F16, Streaming::InPlace, 21, false));
    }
    for (storage, streaming, ny, walls) in cases {
        let n = nx * ny;
        let cfg = Config {
            storage,
            streaming,
            ..Config::new(nx, ny, Collision::trt(0.9))
        };
        let flags = if walls {
            curved_flags(&mut rng, nx, ny, 0.0)
        } else {
            Flags::fluid(nx, ny)
        };
        let cells: Vec<(f64, [f64; 2])> = (0..n)
            .map(|_| {
                (
                    1.0 + rng.random_range(-0.03..0.03),
                    [rng.random_range(-0.05..0.05), rng.random_range(-0.05..0.05)],
                )
            })
            .collect();
        // The CPU's state: each fluid cell's equilibrium, solid cells at rest.
        let mut s = vec![0.0; 9 * n];
        for c in 0..n {
            let (rho, u) = if flags.cell(c).is_solid() {
                (1.0, [0.0, 0.0])
            } else {
                cells[c]
            };
            for (i, e) in d2q9::equilibrium(rho, u).into_iter().enumerate() {
                s[i * n + c] = e;
            }
        }
        let mut want = Lattice::new(gpu, cfg.clone(), flags.clone()).expect("lattice");
        want.set_populations(&s).expect("set");
        let want0 = want.populations().expect("read");
        want.step(6).expect("step");
        let want6 = want.populations().expect("read");
        let words = cfg.layout().words(n);
        for chunk in [1, 5, 64, 333, words - 1, words, usize::MAX] {
            let what =
                format!("{storage:?} {streaming:?} ny {ny} walls {walls}, chunks of {chunk} words");
            let mut lat = Lattice::new(gpu, cfg.clone(), flags.clone()).expect("lattice");
            lat.set_populations(&random_state(&mut rng, nx, ny))
                .expect("another state first");
            lat.init_equilibrium_in_chunks(chunk, |x, y| cells[y * nx + x])
                .expect("init");
            let got = lat.populations().expect("read");
            let differ = (0..9 * n)
                .filter(|&k| got[k].to_bits() != want0[k].to_bits())
                .count();
            assert_eq!(
                differ, 0,
                "{what}: {differ} populations differ after the init"
            );
            lat.step(6).expect("step");
            let got = lat.populations().expect("read");
            let differ = (0..9 * n)
                .filter(|&k| got[k].to_bits() != want6[k].to_bits())
                .count();
            assert_eq!(
                differ, 0,
                "{what}: {differ} populations differ after 6 steps"
            );
        }
        let mut lat = Lattice::new(gpu, cfg, flags).expect("lattice");
        let e = lat
            .init_equilibrium_in_chunks(0, |_, _| (1.0, [0.0, 0.0]))
            .expect_err("chunks of 0 words");
        assert!(e.to_string().contains("chunk_words"), "{e}");
    }
}
