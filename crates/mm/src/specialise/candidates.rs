//! The candidates the tuner times for an operator: every variant a GPU may run well, and on a CPU adapter the
//! few that compile in bounded time there.

use bespoke_gpu::Gpu;

use super::generate::terms_per_launch;
use super::operator::Operator;
use super::run::Panel;
use super::variant::{Family, ROLLED_ROWS, Variant};
use crate::dtype::DType;

/// Unrolled terms up to which CPU adapters also try cstream (with and without folding): llvmpipe compiles it at
/// 5–17 ms per term cold, against 1.5–3 ms for bstream-v2 (docs/perf.md), and bstream is as fast or faster
/// wherever it applies — also where its rows go in blocks past the register budget (hex p3–p5 M6 on Mesa
/// 22.3.6: blocked bstream-v2 1.3–1.6× faster than cstream-v2, which took 4–16 s to compile).
pub const CPU_CSTREAM_TERMS: usize = 512;

/// Rows of A past which a GPU also tries bstream-msplit at 8 invocation rows (at 4, more than 32 accumulators an
/// invocation in one launch).
pub const MSPLIT_S8_ROWS: usize = 128;

/// Variants worth timing for `op` against `panel` in `dtype` on `gpu`. GPUs try every variant the panel's
/// alignment allows (bstream-msplit at 8 invocation rows only past [`MSPLIT_S8_ROWS`] rows), and for an operator
/// past one default launch ([`terms_per_launch`]) each unrolled variant's long twin ([`Variant::long_twin`]) and
/// mid twin ([`Variant::mid_twin`]). On a CPU adapter one workgroup runs on one thread, so the families that split rows or K
/// across invocation rows add barriers without parallelism (llvmpipe compiles each barrier as a coroutine
/// split: a 384-term cstream-ksplit-s4-v4 took 36.7 s to compile against 0.05 s for cstream-v4); and unrolled
/// kernels compile slowly there, so the candidates are the ones that won on llvmpipe at a bounded compile cost:
/// bstream at vec2 (as fast as vec4, half the compile time), cstream at vec2 for short operators (on hex p3 m3
/// cstream-v2 ran in 12.3 ms against cstream-v4's 18.3 on Mesa 22.3.6, and Mesa 25.0.7 compiles a vec4 launch
/// 4.6× slower than a vec2 one: docs/perf.md), and the rolled family, which compiles once for any A. (`dtype`
/// does not change the list today: the register budget is met by blocking, not by dropping bstream.)
pub fn default_variants(gpu: &Gpu, op: &Operator, _dtype: DType, panel: Panel) -> Vec<Variant> {
    let align = panel.alignment() as u32;
    if !gpu.is_cpu() {
        // A GPU pays `-touch`'s extra read of C and gains nothing from it. Where the default launch length
        // splits the operator, each unrolled variant's long twin too (one launch reads each row of B once), then
        // its mid twin (fewer launches than the default, fewer accumulators an invocation than the long one;
        // the tuner compiles a twin whose kernels another candidate has once).
        // Eight invocation rows only where four would keep many accumulators each (hex-p6-m132's 343 rows; 12
        // compiles less for each of the small operators, whose tuning `mm9-f32` times on a lent GPU).
        let mut out: Vec<Variant> = Variant::all()
            .into_iter()
            .filter(|v| align.is_multiple_of(v.vec) && !v.touch)
            .filter(|v| {
                !(v.family == Family::BStreamMsplit && v.split == 8) || op.m > MSPLIT_S8_ROWS
            })
            .collect();
        if op.nnz() > terms_per_launch(gpu) {
            let long: Vec<Variant> = out.iter().filter_map(|v| v.long_twin()).collect();
            let mid: Vec<Variant> = out.iter().filter_map(|v| v.mid_twin()).collect();
            out.extend(long);
            out.extend(mid);
        }
        return out;
    }
    let widest = |cap: u32| {
        [4, 2, 1]
            .into_iter()
            .find(|v| *v <= cap && align.is_multiple_of(*v))
            .unwrap_or(1)
    };
    let bstream = Variant::new(Family::BStream, widest(2), 1, false);
    // At β = 0 also its `-touch` twin (skipped at other β, and by the tuner where the access floor says the read
    // does not pay, `floor::touch_check`): on an Intel Xeon VM lavapipe's β = 0 bstream ran 2× faster reading each
    // row of C before storing it (hex-p4-m0 14.9 → 6.7 ms, docs/perf.md).
    let mut out = vec![bstream];
    out.extend(bstream.with_touch());
    if op.nnz() <= CPU_CSTREAM_TERMS {
        out.push(Variant::new(Family::CStream, widest(2), 1, false));
        out.push(Variant::new(Family::CStream, widest(2), 1, true));
    }
    for r in ROLLED_ROWS {
        out.push(Variant::new(Family::Rolled, widest(4), r, false));
    }
    out
}
