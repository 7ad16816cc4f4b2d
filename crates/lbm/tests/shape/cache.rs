//! The shape is timed once per adapter and kind of lattice, then read from the cache.

use super::*;

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
    // Then one buffer for all directions at that shape, where nine bindings a side and one buffer both fit the
    // tuning lattice, kept only if it beats nine by the margin; where nine do not fit, one buffer is no choice.
    let (tx, ty) = bespoke_lbm::shape::tuning_size(gpu, &cfg);
    let tcfg = Config::new(tx, ty, cfg.collision);
    let nine_fit = nine_bindings_fit(gpu, &tcfg, false);
    if nine_fit && one_buffer_fits(gpu, &tcfg) {
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
    } else {
        assert_eq!(first.timed_one_buffer, None, "{first:?}");
        assert_eq!(
            first.one_buffer,
            !nine_fit && one_buffer_fits(gpu, &cfg),
            "{first:?}"
        );
        skipped(&format!(
            "one buffer timed against nine: a {tx}x{ty} tuning lattice on `{}` binds {}",
            gpu.adapter_name(),
            if nine_fit {
                "no one buffer of nine directions"
            } else {
                "no nine directions a side"
            }
        ));
    }
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
    // Both classes emulated: on a GPU the shared device is already of the GPU class (the H200, 2026-11-28).
    let class = |c| {
        emulating(
            shared,
            GpuOptions {
                adapter_class: Some(c),
                ..Default::default()
            },
        )
    };
    let (gpu_class, cpu_class) = (
        class(bespoke_gpu::AdapterClass::Gpu),
        class(bespoke_gpu::AdapterClass::Cpu),
    );
    assert!(
        tuning_size(&gpu_class, &small(34, 34)).0 > tuning_size(&cpu_class, &small(34, 34)).0,
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
    // A GPU held to WebGPU's limits (8 storage buffers a kernel: one buffer a side; 128 MiB a binding): the
    // tuning lattice's nine directions fit one binding (on the H200 on 2026-12-04 the 2048² side's needed 151 MB).
    let webgpu = emulating(
        shared,
        GpuOptions {
            adapter_class: Some(bespoke_gpu::AdapterClass::Gpu),
            limits: Some(bespoke_gpu::LimitsProfile::WebGpu),
            ..Default::default()
        },
    );
    for streaming in [Streaming::Ab, Streaming::InPlace] {
        let cfg = Config {
            streaming,
            ..small(34, 34)
        };
        let (nx, ny) = tuning_size(&webgpu, &cfg);
        let tcfg = Config {
            streaming,
            ..small(nx, ny)
        };
        assert!(!nine_bindings_fit(&webgpu, &tcfg, true), "{streaming:?}");
        assert!(
            one_buffer_fits(&webgpu, &tcfg) && nx >= 512,
            "{streaming:?}: {nx}×{ny}"
        );
    }
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

/// A workgroup size whose step kernels the driver refuses (emulated: `GpuOptions::refuse_pipelines`, as Metal
/// refuses a pipeline past its threadgroup size) is left out of the timings and named in `failed`; the tuner
/// chooses among the others, and a lattice runs at its choice.
#[test]
fn a_refused_workgroup_is_left_out_of_the_tuning() {
    use bespoke_gpu::testing::refusing;
    let Some(shared) = test_gpu() else { return };
    let all = candidates(shared);
    let Some(&refused) = all.iter().find(|&&w| w != WG) else {
        return skipped("a refused workgroup: the adapter launches one workgroup size only");
    };
    let gpu = refusing(shared, &format!("-wg{refused}"));
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::at(dir.path(), "lbm-shape", 1);
    let cfg = Config::new(64, 48, Collision::Bgk { omega: 1.0 });
    let shape = step_shape_in(&gpu, &cfg, false, Some(&cache)).unwrap();
    let timed: Vec<u32> = shape.timed.iter().map(|t| t.0).collect();
    let want: Vec<u32> = all.iter().copied().filter(|&w| w != refused).collect();
    assert_eq!(timed, want, "{shape:?}");
    assert_ne!(shape.workgroup, refused);
    assert!(
        shape
            .failed
            .iter()
            .any(|f| f.starts_with(&format!("workgroup {refused},")) && f.contains("refused")),
        "{:?}",
        shape.failed
    );
    // Kept in the cache as it was chosen, failures included.
    let again = step_shape_in(&gpu, &cfg, false, Some(&cache)).unwrap();
    assert_eq!(
        (again.source.as_str(), &again.failed),
        ("cached", &shape.failed)
    );
    let mut lat = Lattice::new(&gpu, cfg, Rc::new(Flags::fluid(64, 48))).unwrap();
    lat.init_equilibrium(|_, _| (1.0, [0.01, 0.0])).unwrap();
    lat.step(2).unwrap();
}
