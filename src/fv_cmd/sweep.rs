//! `bespoke fv sweep`: throughput against block size on ideal block-diagonal operators, a real mesh's orderings
//! marked beside them.

use super::*;

/// Marker colours of the orderings on the sweep plot (printed as the legend).
const ORDER_COLOURS: [(&str, [u8; 3]); 6] = [
    ("as-read", [0, 0, 0]),
    ("random", [140, 140, 140]),
    ("rcm", [230, 159, 0]),
    ("hilbert", [0, 158, 115]),
    ("metis", [204, 121, 167]),
    ("metis-nd", [86, 180, 233]),
];

pub(super) fn sweep_cmd<T: Real>(
    gpu: &Gpu,
    a: SweepArgs,
    json_file: JsonOut,
    mesh: Option<(String, TetMesh)>,
) -> Result<(), Error> {
    use bespoke::fv::plot::{Series, write_plot};
    use bespoke::fv::sweep::{buffer_layout, default_blocks, equivalent_block, sweep};

    // The real mesh runs the block-cached kernel at this block after the sweep: refuse a bad one first.
    bespoke::fv::diffusion::check_kernel_block::<T>(gpu, a.block_size)?;
    let n = a
        .tets
        .unwrap_or(if gpu.is_cpu() { 1 << 20 } else { 8 << 20 });
    let probe = gpu.copy_bandwidth(&probe_options(false))?;
    let blocks = default_blocks(n);
    let bar = progress_bar(blocks.len() as u64 + 1);
    let points = sweep::<T>(gpu, n, &blocks, a.reps, |b| {
        bar.set_message(format!("block {b}"));
        bar.inc(1);
    })?;
    bar.set_message("real mesh");
    let (name, mesh) = if let Some(m) = mesh {
        m
    } else {
        let side = ((n as f64 / 6.0).cbrt().round() as usize).max(2);
        MeshArgs {
            mesh: None,
            r#box: Some(side),
            lexicographic: false,
        }
        .load()?
    };
    let op = operator(&mesh, None)?;
    drop(mesh);
    let real = bench_operator::<T>(
        gpu,
        &op,
        &OrderingKind::all(a.block_size as usize),
        a.block_size,
        a.reps,
        |_| {},
    )?;
    bar.finish_and_clear();

    bespoke::say!(
        "ideal operators, {n} tets, {} B/tet minimum, copy {:.2} GB/s:",
        min_bytes_per_tet(T::DTYPE.size()),
        probe.gbps
    );
    bespoke::say!(
        "{:>9} {:>13} {:>11} {:>12} {:>10} {:>8} {:>8}",
        "block",
        "kernel",
        "layout",
        "kernel block",
        "ms/step",
        "GB/s",
        "of copy"
    );
    for p in &points {
        bespoke::say!(
            "{:>9} {:>13} {:>11} {:>12} {:>10.3} {:>8.2} {:>8.3}",
            p.block,
            p.kernel,
            p.layout,
            p.kernel_block,
            p.seconds_per_step * 1e3,
            p.gbps,
            p.gbps / probe.gbps
        );
    }
    // Slot-major, or tet-major on an adapter that binds fewer storage buffers (`buffer_layout`).
    let slots = buffer_layout(gpu).name();
    bespoke::say!(
        "{name} ({} tets), gather ({slots}; texture where measured), placed at the ideal block size with the \
         same in-block fraction:",
        op.n()
    );
    // An ideal operator of block b keeps every reference in its block; a real ordering with in-block fraction f
    // is drawn at the block size where f of an ideal block's references would fall inside a `block_size` window.
    let curve = |kernel: &str, layout: &str, colour: [u8; 3]| Series {
        points: points
            .iter()
            .filter(|p| p.kernel == kernel && p.layout == layout)
            .map(|p| ((p.block as f64).log2(), p.gbps))
            .collect(),
        colour,
        line: true,
        hollow: false,
    };
    let mut series = vec![
        curve("gather", slots, [0, 114, 178]),
        curve("block-cached", slots, [213, 94, 0]),
        curve("gather", "texture", [178, 34, 34]),
    ];
    let mut marks = Vec::new();
    // Real orderings under gather: filled markers in the buffer layout, outlines in the texture layout.
    for r in real.iter().filter(|r| {
        r.skipped.is_none() && r.kernel == "gather" && (r.layout == slots || r.layout == "texture")
    }) {
        let hollow = r.layout == "texture";
        let x = equivalent_block(r.in_block_fraction, a.block_size as f64, n as f64).log2();
        let colour = ORDER_COLOURS
            .iter()
            .find(|(o, _)| *o == r.ordering)
            .map_or([0, 0, 0], |c| c.1);
        series.push(Series {
            points: vec![(x, r.gbps)],
            colour,
            line: false,
            hollow,
        });
        bespoke::say!(
            "  {:<9} {:<10} in-block {:.3} → x = 2^{x:.1}: {:.2} GB/s ({:.3} of copy), colour {colour:?}",
            r.ordering,
            r.layout,
            r.in_block_fraction,
            r.gbps,
            r.gbps / probe.gbps
        );
        marks.push(
            json!({"ordering": r.ordering, "layout": r.layout, "in_block_fraction": r.in_block_fraction, "gbps": r.gbps,
            "copy_fraction": r.gbps / probe.gbps, "plot_log2_block": x}),
        );
    }
    if let Some(p) = &a.png {
        let y_max = points
            .iter()
            .map(|p| p.gbps)
            .chain(real.iter().map(|r| r.gbps).filter(|g| g.is_finite()))
            .fold(probe.gbps, f64::max)
            * 1.1;
        // Wide enough for the marks too: a ragged ordering sits at an equivalent block up to the mesh's size.
        let x_max = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .fold((*blocks.last().unwrap_or(&32) as f64).log2(), f64::max);
        write_plot(p, &series, (5.0, x_max), y_max, probe.gbps)?;
        bespoke::say!(
            "plot: {} (blue gather, orange block-cached, red gather with the operator in textures (f32), dashed grey \
             copy bandwidth, squares the real orderings under gather: filled slot-major, outlined texture)",
            p.display()
        );
    }
    let pts = with_copy_fraction(&points, |p| p.gbps, probe.gbps)?;
    write_json(
        json_file,
        &json!({"tets": n, "dtype": T::DTYPE.wgsl(), "copy_gbps": probe.gbps, "ideal": pts,
            "mesh": name, "mesh_tets": op.n(), "block_size": a.block_size, "orderings": marks,
            "adapter": adapter_json(gpu)}),
    )
}
