//! Micro-benchmarks that feed the tile model. So far: the FMA peak.

use std::fmt::Write;

use bespoke_gpu::{Gpu, Grid, Kernel};

use crate::dtype::DType;
use crate::error::Result;

/// Independent FMA chains per invocation: enough to hide FMA latency on every device we know.
const CHAINS: u32 = 16;
/// Iterations of the chain loop per invocation.
const ITERS: u32 = 512;
const WG: u32 = 256;

/// WGSL of the FMA-throughput kernel: `CHAINS` independent accumulators, `ITERS` rounds, one store at the end so
/// nothing is optimised away. The operands come from the data so no compiler can fold them.
pub fn fma_wgsl(dtype: DType) -> String {
    let t = dtype.wgsl();
    let mut s = format!(
        "@group(0) @binding(0) var<storage, read_write> x: array<{t}>;
@compute @workgroup_size({WG})
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {{
    let i = g.x + g.y * nw.x * {WG}u;
    let m = x[0];
    let c = x[1];
"
    );
    for j in 0..CHAINS {
        let _ = writeln!(s, "    var a{j} = {t}(i + {j}u);");
    }
    let _ = writeln!(s, "    for (var it = 0u; it < {ITERS}u; it++) {{");
    for j in 0..CHAINS {
        let _ = writeln!(s, "        a{j} = fma(a{j}, m, c);");
    }
    s += "    }\n    var sum = a0";
    for j in 1..CHAINS {
        let _ = write!(s, " + a{j}");
    }
    s += ";\n    if sum == 12345.678 { x[2] = sum; }\n}\n";
    s
}

/// Measured FMA throughput in GFLOP/s (2 flops per FMA), median of timed runs.
pub fn fma_peak(gpu: &Gpu, dtype: DType, quick: bool) -> Result<f64> {
    // m = 1 - tiny, c = tiny keeps values bounded and finite.
    let init: Vec<f64> = vec![0.999_999, 1e-7, 0.0, 0.0];
    let groups: u32 = if quick { 256 } else { 1024 };
    let kernel = Kernel::new(format!("fma_peak_{dtype}"), fma_wgsl(dtype));
    let launch = match dtype {
        DType::F32 => {
            let b = gpu.upload(&init.iter().map(|&v| v as f32).collect::<Vec<f32>>())?;
            let l = gpu.prepare(&kernel, &[b.arg()], Grid::d1(groups))?;
            (l, None, Some(b))
        }
        DType::F64 => {
            let b = gpu.upload(&init)?;
            let l = gpu.prepare(&kernel, &[b.arg()], Grid::d1(groups))?;
            (l, Some(b), None)
        }
    };
    let t = gpu.time(&[&launch.0], 1, if quick { 3 } else { 7 })?;
    let flops = 2.0 * f64::from(groups) * f64::from(WG) * f64::from(CHAINS) * f64::from(ITERS);
    Ok(flops / t.median() / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fma_kernel_validates() {
        for d in [DType::F32, DType::F64] {
            bespoke_gpu::validate_wgsl(&fma_wgsl(d), d.caps()).unwrap();
        }
    }
}
