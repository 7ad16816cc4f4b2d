//! The part of a shape a configuration is timed on when the whole shape would take too long. The screened sweep
//! (`sweep.rs`) and the checked pick (`choose.rs`) both time on it.
//!
//! The sample is C whole with K cut wherever its budget (the caller's least work, or [`SAMPLE_SECONDS`] of the
//! device's FMA peak where that is more: on a GPU nearly always) leaves [`SAMPLE_MIN_DEPTH`] of K: the full shape's
//! grid of workgroups, each doing a slice of its K loop. Otherwise (a wide C on a slow device: lavapipe's screens,
//! its checks past ~1050²) it is a block of C made of whole tiles with the full K.
//!
//! Why C whole on a GPU: a workgroup count is run in waves of as many workgroups as the device holds at once, and
//! a block of C holding about two of them times the tail of its last wave. On an NVIDIA H200 (132
//! multiprocessors) the blocks of 2026-11-27/28 held 512–529 workgroups: 529 = 23² tiles of 128×128 ran as four
//! waves of 132 and one workgroup alone where two per multiprocessor fit, and t8x8v4-w16x16-k8-s1-b2 sampled at
//! 26.9 TFLOP/s ran the whole 4096³ at 33.5 (1.25×; k16: 23.3 against 28.0), while 128×256 tiles (512
//! workgroups) sampled as they ran (31.97 against 31.93): the screen and the check ranked tile shapes by how the
//! block's count fell on the device, not by how they run C. The full grid falls as the full shape does.

use super::model::Machine;
use super::params::DenseParams;
use super::run::GemmShape;

/// How many times over the sample must fill the device (workgroups the FMA curve needs for 90 % of its
/// plateau), so that tail effects and load balance do not rank configurations.
pub const SAMPLE_FILLS: u64 = 2;

/// The fraction of C's tiles past which a sample is the whole shape. On an H200 (2026-11-28) the 96×100 000×64
/// panel's samples of 0.5 GFLOP (two fifths of it, 26 MB: inside the 60 MB L2 once warm) ranked two tilings at
/// 21.8 and 21.5 TFLOP/s that ran the whole panel (64 MB) at 16.9 and 17.8, where the best ran 21.7.
pub const WHOLE_FRACTION: f64 = 0.25;

/// Seconds of work at the device's measured FMA peak a sample may hold (or `sample_gflop`, the caller's least
/// work, where that is more): 60 GFLOP on an H200 (4096² × 1792 f32), 0.08 on lavapipe (less than the callers'
/// least work: the check's 0.5 GFLOP, a screen's 0.02–0.05, which size the samples there).
pub const SAMPLE_SECONDS: f64 = 1e-3;

/// The least depth a sample with C whole keeps: 256, and at least eight K tiles, so that staging the first tile
/// and writing C stay a small part of each workgroup's time.
pub const SAMPLE_MIN_DEPTH: usize = 256;

/// The sub-shape `p` is timed on for `shape`, at least `sample_gflop` GFLOP of work, same strides:
/// - the shape itself where its work is within the budget (`sample_gflop`, or [`SAMPLE_SECONDS`] at the device's
///   peak where that is more);
/// - else C whole and K cut to the depth the budget allows (rounded up to a multiple of 32 and of `p`'s kc, per
///   split-K slice), where that is at least [`SAMPLE_MIN_DEPTH`];
/// - else the top-left block of C made of whole `bm × bn` tiles with the full K, holding at least [`SAMPLE_FILLS`]
///   times the workgroups that fill the device and at least `sample_gflop` GFLOP (the full shape past
///   [`WHOLE_FRACTION`] of its tiles).
pub fn sample_shape(
    machine: &Machine,
    p: &DenseParams,
    shape: &GemmShape,
    sample_gflop: f64,
) -> GemmShape {
    let budget = (machine.peak_gflops() * SAMPLE_SECONDS).max(sample_gflop) * 1e9;
    if shape.flops() <= budget {
        return *shape;
    }
    // C whole, K cut: every split-K slice a whole number of every kc's tiles (kc is a power of two ≤ 32).
    let split = p.split_k.max(1) as usize;
    let unit = (p.kc as usize).max(32) * split;
    let per_depth = 2.0 * (shape.m * shape.n) as f64;
    let depth = ((budget / per_depth).ceil() as usize).div_ceil(unit) * unit;
    if depth >= SAMPLE_MIN_DEPTH.max(8 * p.kc as usize) && depth < shape.k {
        return GemmShape { k: depth, ..*shape };
    }
    block_of_c(machine, p, shape, sample_gflop)
}

/// The top-left block of C of whole tiles, full K (see [`sample_shape`]).
fn block_of_c(
    machine: &Machine,
    p: &DenseParams,
    shape: &GemmShape,
    sample_gflop: f64,
) -> GemmShape {
    let (bm, bn) = (p.bm() as usize, p.bn() as usize);
    let (gm, gn) = (shape.m.div_ceil(bm), shape.n.div_ceil(bn));
    // Workgroups that fill the device; for a size the micro-benchmark did not measure, the most it ran.
    let fill = match machine.groups_to_fill(p.threads()) {
        0 => machine.fma_by_groups.iter().map(|g| g.1).max().unwrap_or(1),
        g => g,
    };
    let split = u64::from(p.split_k.max(1));
    let by_groups = (SAMPLE_FILLS * fill).div_ceil(split);
    let tile_flops = 2.0 * (bm.min(shape.m) * bn.min(shape.n) * shape.k) as f64;
    let by_flops = (sample_gflop.max(0.0) * 1e9 / tile_flops).ceil() as u64;
    let tiles = (by_groups.max(by_flops).max(1) as usize).min(gm * gn);
    // A block past [`WHOLE_FRACTION`] of C is C: the whole shape costs at most a few times more, and a block
    // holds less data than C, so it may sit in a cache C does not fit.
    if tiles as f64 > WHOLE_FRACTION * (gm * gn) as f64 {
        return *shape;
    }
    // As square a block of tiles as C allows.
    let mut sm = ((tiles as f64).sqrt().ceil() as usize).clamp(1, gm);
    let sn = tiles.div_ceil(sm).min(gn);
    sm = tiles.div_ceil(sn).min(gm);
    GemmShape {
        m: (sm * bm).min(shape.m),
        n: (sn * bn).min(shape.n),
        ..*shape
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu_like() -> Machine {
        // Four workgroups of 256 fill it, sixteen of 64; 128 was not measured (the most measured is 16).
        serde_json::from_str(
            r#"{"version":6,"adapter":"test","dtype":"f32",
                "fma_by_accumulators":[[1,10.0],[8,80.0]],"fma_latency_ns":2.0,
                "fma_by_groups":[[256,1,40.0],[256,4,80.0],[64,1,20.0],[64,4,45.0],[64,16,60.0]],
                "smem_scalar_gwords":0.2,"smem_vec4_gwords":0.25,"smem_scalar_paired_gwords":0.2,"smem_vec4_paired_gwords":0.25,
                "copy_gbps":2.0,"launch_us":50.0,"overlap_penalty":0.9}"#,
        )
        .expect("machine parses")
    }

    fn p(tm: u32, wgm: u32, split_k: u32) -> DenseParams {
        DenseParams {
            tm,
            tn: 8,
            wgm,
            wgn: 16,
            kc: 8,
            vec: 4,
            split_k,
            stages: 1,
            unroll: false,
            lanes: crate::dense::Lanes::Paired,
        }
    }

    #[test]
    fn samples_are_whole_tiles_with_full_k_and_enough_workgroups() {
        let m = cpu_like();
        let shape = GemmShape::packed(4096, 4096, 4096);
        // 128×128 tiles, 256 invocations: 2 × 4 groups; 8 tiles of 134 MFLOP already pass 0.25 GFLOP.
        let s = sample_shape(&m, &p(8, 16, 1), &shape, 0.25);
        assert_eq!((s.k, s.lda, s.ldb, s.ldc), (4096, 4096, 4096, 4096));
        assert_eq!(s.m % 128, 0);
        assert_eq!(s.n % 128, 0);
        assert_eq!(
            (s.m / 128) * (s.n / 128),
            9,
            "3×3 tiles: the squarest block of ≥ 8"
        );
        // A larger flop target wins over the workgroup count.
        let s = sample_shape(&m, &p(8, 16, 1), &shape, 4.0);
        assert!(s.flops() >= 4e9 && s.flops() < 4e9 + 3.0 * 2.0 * 128.0 * 128.0 * 4096.0 * 8.0);
        // Split-K counts each tile's `split` workgroups.
        let s = sample_shape(&m, &p(8, 16, 4), &shape, 0.0);
        assert_eq!((s.m / 128) * (s.n / 128), 2);
        // 64-invocation groups: 16 × 2, as a 6×6 block.
        let s = sample_shape(&m, &p(4, 4, 1), &shape, 0.0);
        assert_eq!((s.m / 16, s.n / 128), (6, 6));
        // 128 invocations, not measured: the most measured (16) × 2 again.
        let s = sample_shape(&m, &p(4, 8, 1), &shape, 0.0);
        assert_eq!((s.m / 32, s.n / 128), (6, 6));
    }

    #[test]
    fn samples_never_exceed_the_shape() {
        let m = cpu_like();
        let shape = GemmShape {
            lda: 70,
            ldb: 100,
            ldc: 104,
            ..GemmShape::packed(50, 100, 60)
        };
        let s = sample_shape(&m, &p(8, 16, 1), &shape, 100.0);
        assert_eq!(s, shape);
        // A long panel: the block runs along N once M is used up.
        let panel = GemmShape::packed(96, 100_000, 64);
        let s = sample_shape(&m, &p(8, 16, 1), &panel, 0.25);
        assert_eq!(s.m, 96);
        assert!(s.n.is_multiple_of(128) && s.n < panel.n);
        assert!(s.flops() >= 0.25e9 && s.flops() < 0.25e9 + 2.0 * 96.0 * 128.0 * 64.0);
        // Past a quarter of C's tiles (the checked pick's 0.5 GFLOP: two fifths of the panel) the sample is the
        // panel: a block's data may sit in a cache the panel's does not.
        assert!(panel.flops() < 2.5e9);
        assert_eq!(sample_shape(&m, &p(8, 16, 1), &panel, 0.5), panel);
        assert_ne!(sample_shape(&m, &p(8, 16, 1), &panel, 0.3), panel);
    }

    /// An H200-like f32 machine: 60 TFLOP/s, 256 workgroups of any size fill it.
    fn gpu_like() -> Machine {
        serde_json::from_str(
            r#"{"version":6,"adapter":"test","dtype":"f32",
                "fma_by_accumulators":[[1,20000.0],[16,60000.0],[256,20000.0]],"fma_latency_ns":3.6,
                "fma_by_groups":[[256,1,200.0],[256,256,55000.0],[256,1024,59000.0],
                                 [64,1,50.0],[64,1024,58000.0]],
                "smem_scalar_gwords":3900.0,"smem_vec4_gwords":7900.0,"smem_scalar_paired_gwords":3900.0,"smem_vec4_paired_gwords":7900.0,
                "copy_gbps":3900.0,"launch_us":4.6,"overlap_penalty":0.3}"#,
        )
        .expect("machine parses")
    }

    #[test]
    fn on_a_gpu_samples_keep_c_whole_and_cut_k() {
        let m = gpu_like();
        // 4096³ (137 GFLOP) is past 1 ms at 60 TFLOP/s: C whole, K cut to 60 GFLOP's depth, a multiple of 32.
        let shape = GemmShape::packed(4096, 4096, 4096);
        for q in [p(8, 16, 1), p(4, 4, 1), p(8, 16, 4)] {
            let s = sample_shape(&m, &q, &shape, 0.5);
            assert_eq!(
                (s.m, s.n, s.lda, s.ldb, s.ldc),
                (4096, 4096, 4096, 4096, 4096)
            );
            assert!(s.k < 4096 && s.k >= SAMPLE_MIN_DEPTH, "{s:?}");
            assert!(s.k.is_multiple_of(32 * q.split_k as usize), "{s:?}");
            assert!(
                s.flops() >= 60e9 && s.flops() < 60e9 + 2.0 * 4096.0 * 4096.0 * 128.0,
                "{s:?}"
            );
            // Every split-K slice a whole number of the kc's tiles.
            let per_split = s.k / q.split_k as usize;
            assert!(per_split.is_multiple_of(q.kc as usize));
        }
        // A larger least work than the budget wins.
        let s = sample_shape(&m, &p(8, 16, 1), &shape, 100.0);
        assert_eq!((s.m, s.n), (4096, 4096));
        assert!(s.flops() >= 100e9 && s.k < 4096);
        // Within the budget: the shape itself (2048³, 17 GFLOP; the 96×100 000×64 panel, 1.2).
        let small = GemmShape::packed(2048, 2048, 2048);
        assert_eq!(sample_shape(&m, &p(8, 16, 1), &small, 0.5), small);
        let panel = GemmShape::packed(96, 100_000, 64);
        assert_eq!(sample_shape(&m, &p(8, 16, 1), &panel, 0.05), panel);
        // A wide C whose budget leaves less than the least depth: a block of C with the full K.
        let wide = GemmShape::packed(65_536, 65_536, 4096);
        let s = sample_shape(&m, &p(8, 16, 1), &wide, 0.5);
        assert_eq!(s.k, 4096);
        assert!(
            s.m < wide.m && s.m.is_multiple_of(128) && s.n.is_multiple_of(128),
            "{s:?}"
        );
        // Strided operands keep their strides.
        let strided = GemmShape {
            lda: 4100,
            ldb: 4104,
            ldc: 4108,
            ..shape
        };
        let s = sample_shape(&m, &p(8, 16, 1), &strided, 0.5);
        assert_eq!(
            (s.m, s.n, s.lda, s.ldb, s.ldc),
            (4096, 4096, 4100, 4104, 4108)
        );
        assert!(s.k < 4096);
    }

    /// A CPU adapter's peak (80 GFLOP/s) gives 0.08 GFLOP a millisecond, less than the callers' least work, which
    /// then sets the budget: C whole where that leaves the least depth, else a block of C with the full K.
    #[test]
    fn on_a_cpu_adapter_the_least_work_sets_the_sample() {
        let m = cpu_like();
        let shape = GemmShape::packed(1024, 1024, 1024);
        // The check's 0.5 GFLOP at 1024³: 239 of depth, 256 rounded up.
        let s = sample_shape(&m, &p(8, 16, 1), &shape, 0.5);
        assert_eq!((s.m, s.n, s.k), (1024, 1024, 256));
        // A screen's 0.05 GFLOP: 24 of depth, too shallow; a block.
        let s = sample_shape(&m, &p(8, 16, 1), &shape, 0.05);
        assert_eq!(s.k, 1024);
        assert!(s.m < 1024 || s.n < 1024, "{s:?}");
        let s = sample_shape(&m, &p(8, 16, 1), &GemmShape::packed(4096, 4096, 4096), 0.5);
        assert_eq!(s.k, 4096);
        assert!(s.m < 4096 || s.n < 4096, "{s:?}");
    }
}
