//! The block of C a configuration is timed on when a whole shape would take too long: whole workgroup tiles, the
//! full K and strides, enough work to fill the device. The screened sweep (`sweep.rs`) and the checked pick
//! (`choose.rs`) both time on it.

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

/// The sub-shape a screened sweep times `p` on: the top-left block of C made of whole `bm × bn` tiles, with the
/// full K and strides, holding at least [`SAMPLE_FILLS`] times the workgroups that fill the device and at least
/// `sample_gflop` GFLOP (never more than the full shape, and the full shape past [`WHOLE_FRACTION`] of its tiles).
pub fn sample_shape(
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
