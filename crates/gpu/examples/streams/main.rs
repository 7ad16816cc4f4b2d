//! Diagnostic, not a supported path: how fast this adapter streams the LBM step's memory pattern with nothing else
//! in the kernel (issue 35). Every row moves the same bytes (`TOTAL` f32 read and written; 1.2 GB each way by
//! default), as K streams in and K out, each invocation copying one element of type f32, vec2 or vec4 of every
//! stream; the rows vary one thing each against the 9-stream scalar row (the D2Q9 step's loads and stores without
//! the pulls' offsets and the collision): the streams' count, the element's width, separate bindings or one
//! buffer, the streams' addresses staggered, wgpu's bounds checks kept, two cells per invocation, the
//! workgroup size, in place, reads only; then the D2Q9 step built up on the same buffers (the pulls' index
//! arithmetic and offsets, a BGK collision, both), and on 18 allocations of their own as a lattice's buffers are
//! (at the lattice's workgroup of 64 too); each on a constant, random words, a smooth field and that field less
//! its mean (as a lattice stores its populations), then the plain
//! streams and the step with the random and smooth contents swapped between their allocations. Printed: time, GB/s (bytes read
//! and written), and the fraction of the copy probe and of the fastest copy walk measured in the same process. A
//! row whose bindings pass the adapter's limits at this size says so and is not run.
//!
//! `cargo run --release -p bespoke-gpu --example streams [CELLS [NX]]` (CELLS per stream of the 9-stream rows, a
//! multiple of 4096; default 2^25; NX the pulls' row length, 4096 by default); `--wgsl ROW` prints a row's kernel

mod rows;
mod source;

use bespoke_gpu::{
    Arg, CopyVariant, Gpu, GpuBuffer, GridLayout, Kernel, Launch, ProbeOptions, Window,
};

use bespoke_gpu::rng::Rng;

use rows::{Binding, PULL_NX, Pattern, Row, pull_nx, rows};
use source::source;

type Res<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Where a row's streams live: windows of one allocation per side, or one allocation per stream.
enum Side<'a> {
    Whole(&'a GpuBuffer<f32>),
    PerStream(&'a [GpuBuffer<f32>]),
}

/// The bindings of row `r` reading `from` and writing `to` (`words` f32 per stream).
fn bindings<'a>(r: &Row, words: usize, from: &Side<'a>, to: &Side<'a>) -> Vec<Arg<'a>> {
    let pad = match r.binding {
        Binding::Separate { pad } => pad,
        _ => 0,
    };
    let stream = |k: usize, side: &Side<'a>| match side {
        Side::Whole(buf) => buf.window_arg(Window {
            offset: k * (words + pad),
            len: words,
        }),
        Side::PerStream(bufs) => bufs[k].arg(),
    };
    match (r.binding, from, to) {
        (Binding::One { .. }, Side::Whole(a), Side::Whole(b)) => vec![a.arg(), b.arg()],
        _ => {
            let mut args: Vec<Arg> = (0..r.k).map(|k| stream(k, from)).collect();
            match r.pattern {
                Pattern::Copy => args.extend((0..r.k).map(|k| stream(k, to))),
                Pattern::Reduce => args.push(stream(0, to)),
                Pattern::InPlace => {}
            }
            args
        }
    }
}

/// A data set the rows run on: its name, its device buffer and its host words (None: the constant 1).
type DataSet<'a> = (&'static str, &'a GpuBuffer<f32>, Option<&'a [f32]>);

/// Seconds per launch of row `r` on `src`, or on allocations of its own holding the same words (`words`, the
/// host copy; None: the constant 1).
fn time_row(
    gpu: &Gpu,
    r: &Row,
    src: &GpuBuffer<f32>,
    dst: &GpuBuffer<f32>,
    words: Option<&[f32]>,
    total: usize,
) -> Res<f64> {
    let n = total / r.k / r.width; // elements per stream
    let src_text = source(r, n);
    let kernel = Kernel::new(format!("streams {}", r.name), src_text);
    let kernel = if r.checked {
        kernel
    } else {
        // SAFETY: every index is below PER·cells = n elements of its stream, and each bound window (or the
        // one binding, k·stride + n ≤ total + max_pad) holds them.
        unsafe { kernel.without_bounds_checks() }
    };
    let per = n * r.width; // f32 per stream
    // A row of allocations of its own: each stream the same words as its window of the shared buffers.
    let (own_src, own_dst) = if matches!(r.binding, Binding::Buffers) {
        let from = |k: usize| match words {
            None => gpu.alloc_filled::<f32>(per, 1.0),
            Some(w) => gpu.upload(&w[k * per..(k + 1) * per]),
        };
        (
            (0..r.k).map(from).collect::<Result<Vec<_>, _>>()?,
            (0..r.k)
                .map(|_| gpu.alloc_filled::<f32>(per, 0.0))
                .collect::<Result<Vec<_>, _>>()?,
        )
    } else {
        (Vec::new(), Vec::new())
    };
    let (from, to) = if own_src.is_empty() {
        (Side::Whole(src), Side::Whole(dst))
    } else {
        (Side::PerStream(&own_src), Side::PerStream(&own_dst))
    };
    let args = |from, to| bindings(r, per, from, to);
    let grid = gpu.grid_for((n / r.cells) as u64, r.wg, GridLayout::Rows)?;
    let launch = gpu.prepare(&kernel, &args(&from, &to), grid)?;
    Ok(if r.pair {
        let back = gpu.prepare(&kernel, &args(&to, &from), grid)?;
        gpu.time(&[&launch, &back], 2, 10)?.median() / 2.0
    } else {
        gpu.time(&[&launch], 2, 10)?.median()
    })
}

fn main() -> Res<()> {
    // `--wgsl ROW`: print that row's kernel (0-based, at the default size) for a look at what naga makes of it.
    if std::env::args().nth(1).as_deref() == Some("--wgsl") {
        let k: usize = std::env::args().nth(2).ok_or("--wgsl ROW")?.parse()?;
        let r = *rows().get(k).ok_or("no such row")?;
        print!("{}", source(&r, 9 * (1 << 25) / r.k / r.width));
        return Ok(());
    }
    let cells: usize = match std::env::args().nth(1) {
        Some(a) => a.parse()?,
        None => 1 << 25,
    };
    if let Some(a) = std::env::args().nth(2) {
        let nx: usize = a.parse()?;
        if nx < 2 {
            return Err("the pulls' row length must be at least 2".into());
        }
        PULL_NX
            .set(nx)
            .map_err(|_| "the row length was set twice")?;
    }
    if cells == 0 || !cells.is_multiple_of(pull_nx()) || !cells.is_multiple_of(4096) {
        return Err(format!(
            "CELLS must be a positive multiple of 4096 and of the pulls' row length {}",
            pull_nx()
        )
        .into());
    }
    let total = 9 * cells; // f32 per side
    let gpu = Gpu::new()?;
    let probe = gpu.copy_bandwidth(&ProbeOptions::default())?;
    let mut best_copy = (0.0f64, String::new());
    {
        let n = (probe.bytes / 16) as usize;
        let src = gpu.alloc_filled::<[f32; 4]>(n, [1.0; 4])?;
        let dst = gpu.alloc::<[f32; 4]>(n)?;
        for v in CopyVariant::CANDIDATES {
            let l = gpu.copy_launches(&src, &dst, v)?;
            let refs: Vec<&Launch> = l.iter().collect();
            let gbps = 2.0 * probe.bytes as f64 / gpu.time(&refs, 2, 10)?.median() / 1e9;
            println!(
                "copy {} at {} MiB: {gbps:.0} GB/s",
                v.name(),
                probe.bytes >> 20
            );
            if gbps > best_copy.0 {
                best_copy = (gbps, v.name());
            }
        }
    }
    println!(
        "{}: probe {:.0} GB/s ({}), fastest walk {:.0} GB/s ({}); {} f32 read and written per row",
        gpu.adapter_name(),
        probe.gbps,
        probe.variant,
        best_copy.0,
        best_copy.1,
        total
    );
    let max_pad = 1056 * 9;
    // Every row three times: on a constant (as the probe copies), on random words and on a smooth field (as a
    // simulation's state is), in case the memory system moves the one faster than the other.
    let constant = gpu.alloc_filled::<f32>(total + max_pad, 1.0)?;
    let mut words = vec![0f32; total + max_pad];
    bespoke_gpu::par_fill(&mut words, |i, w| {
        let mut rng = bespoke_gpu::rng::seeded(i as u64);
        *w = 0.5 + (rng.random::<u64>() >> 40) as f32 / (1u64 << 24) as f32;
    });
    let random = gpu.upload(&words)?;
    // A smooth field like a lattice's populations (1/9 plus a small Taylor–Green-like wave over rows of the pulls'
    // length): on an H200 (2026-11-27) the f16 step's bare memory traffic ran at 0.37 of copy on such a state and
    // 0.84–0.92 on random populations, the same kernel: whether the memory system moves smooth data slower shows
    // here. "shifted" is the wave alone, as the lattice stores its populations (less their weights): small values
    // of both signs crossing zero.
    let wave = |i: usize| {
        let (nx, tau) = (pull_nx(), std::f32::consts::TAU);
        let (x, y) = (
            (i % nx) as f32 / nx as f32,
            ((i / nx) % nx) as f32 / nx as f32,
        );
        0.01 * (tau * x).sin() * (tau * y).cos()
    };
    let mut smooth_words = vec![0f32; total + max_pad];
    bespoke_gpu::par_fill(&mut smooth_words, |i, w| *w = 1.0 / 9.0 + wave(i));
    let smooth = gpu.upload(&smooth_words)?;
    let mut shifted_words = vec![0f32; total + max_pad];
    bespoke_gpu::par_fill(&mut shifted_words, |i, w| *w = wave(i));
    let shifted = gpu.upload(&shifted_words)?;
    // NaN until a kernel writes it: the check after the rows.
    let dst = gpu.alloc_filled::<f32>(total + max_pad, f32::NAN)?;
    println!(
        "{:<36} {:>12} {:>10} {:>9} {:>8} {:>8}",
        "row", "data", "ms", "GB/s", "of probe", "of best"
    );
    let run = |r: &Row, data: &str, src: &GpuBuffer<f32>, host: Option<&[f32]>| -> Res<()> {
        let t = match time_row(&gpu, r, src, &dst, host, total) {
            Ok(t) => t,
            Err(e) => {
                println!("{:<36} {:>12} not run: {e}", r.name, data);
                return Ok(());
            }
        };
        let bytes = match r.pattern {
            Pattern::Reduce => (total + total / r.k) * 4,
            _ => 2 * total * 4,
        } as f64;
        let gbps = bytes / t / 1e9;
        println!(
            "{:<36} {:>12} {:>10.4} {:>9.0} {:>8.3} {:>8.3}",
            r.name,
            data,
            t * 1e3,
            gbps,
            gbps / probe.gbps,
            gbps / best_copy.0
        );
        Ok(())
    };
    let data_sets: [DataSet<'_>; 4] = [
        ("constant", &constant, None),
        ("random", &random, Some(&words)),
        ("smooth", &smooth, Some(&smooth_words)),
        ("shifted", &shifted, Some(&shifted_words)),
    ];
    for (r, (data, src, host)) in rows().into_iter().flat_map(|r| data_sets.map(|d| (r, d))) {
        run(&r, data, src, host)?;
    }
    // The kernels ran: the rows wrote numbers over the NaN dst was filled with.
    let first = gpu.read_range(&dst, 0..1)?;
    if !first[0].is_finite() {
        return Err(format!("the kernels did not run: dst[0] = {}", first[0]).into());
    }
    // The data sets are also three allocations: a row that runs slower on one of them may follow its data or its
    // allocation. The plain streams and the step again with the contents swapped (smooth words in the random
    // set's allocation, random words in the smooth set's): the time that follows the data names the data.
    gpu.write(&random, 0, &smooth_words)?;
    gpu.write(&smooth, 0, &words)?;
    let swapped: [DataSet<'_>; 2] = [
        ("smooth@rnd", &random, Some(&smooth_words)),
        ("random@smth", &smooth, Some(&words)),
    ];
    // The plain streams first: they leave their input as it was; the step pair writes its input's side.
    let probes = ["k9 f32 (LBM's pattern, no pulls)", "a step, a→b, b→a"];
    for (r, (data, src, host)) in rows()
        .into_iter()
        .filter(|r| probes.contains(&r.name))
        .flat_map(|r| swapped.map(|d| (r, d)))
    {
        run(&r, data, src, host)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bespoke_gpu::{Capabilities, validate_everywhere};

    #[test]
    fn every_row_validates_without_a_device() {
        for r in rows() {
            let n = 9 * 4096 / r.k / r.width;
            validate_everywhere(&source(&r, n), Capabilities::empty())
                .unwrap_or_else(|e| panic!("{}: {e}", r.name));
        }
    }
}
