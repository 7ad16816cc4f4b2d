//! The heater: a kernel of multiply-add chains that keeps every multiprocessor of a GPU busy, run before a timing
//! to raise its clocks (`Gpu::time`, docs/gpu.md "Timing").
//!
//! Before 2026-12-04 the warm-up ran the timed launches themselves. On the H200 that day (`nvidia-smi` every
//! 200 ms beside `mm9-f32`) a warm-up of a specialised operator's 0.1 ms launches, in batches each waited for,
//! kept the card 38–49 % busy: its SM clock rose to 585 MHz, not 1980, the batches' rate was steady there, and the
//! warm-up stopped; the operators timed after it read 0.23–0.37 of copy where the same kernels read 0.82–0.99 in a
//! later call. The clock follows how busy the card is, not how long: a full load takes it from 345 MHz to 1980
//! within 200–400 ms, and it holds 1.8 s after the load ends. So the warm-up runs this kernel, whose launches are
//! long enough (~0.3 ms each on the H200 at full clocks) that the card is busy all the time it runs, and whose rate
//! says where the clocks are: after a first warm-up it is known at full clocks, and a later timing checks it with
//! one batch of [`CHECK_SECONDS`] instead of warming again.

use std::time::Instant;

use crate::{Gpu, GpuBuffer, Grid, Kernel, Result};

/// Multiply-adds per chain per invocation (four chains).
const ITERATIONS: u32 = 4096;

/// Invocations per workgroup (every limits profile launches 64).
const WORKGROUP: u32 = 64;

/// Workgroups a launch on a GPU: 524 288 invocations, twice what the H200's 132 multiprocessors hold at once
/// (270 336 threads; 1 Mi multiply-adds a workgroup, ~0.3 ms a launch there at full clocks).
const GPU_GROUPS: u32 = 8192;

/// Workgroups a launch on a CPU adapter emulating a GPU (tests): a few milliseconds a launch on lavapipe.
const CPU_GROUPS: u32 = 4;

/// Wall seconds of the batch that checks whether the clocks are still up.
pub const CHECK_SECONDS: f64 = 0.025;

/// A check passes where its batch ran within this fraction of the fastest rate seen on the device.
pub const CHECK_TOLERANCE: f64 = 0.05;

/// The heater's WGSL: four independent chains of `x · a + b` per invocation (converging, never overflowing), their
/// sum stored only where it equals a value it never takes, so the compiler keeps every multiply-add and the kernel
/// writes nothing.
pub(crate) fn source() -> String {
    format!(
        "@group(0) @binding(0) var<storage, read_write> sink: array<f32>;

@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) g: vec3<u32>) {{
    var a = 1.0 + f32(g.x & 255u) * 1e-6;
    var b = a + 0.25;
    var c = a + 0.5;
    var d = a + 0.75;
    for (var i = 0u; i < {ITERATIONS}u; i++) {{
        a = a * 0.9990234 + 0.0009765625;
        b = b * 0.9990234 + 0.0009765625;
        c = c * 0.9990234 + 0.0009765625;
        d = d * 0.9990234 + 0.0009765625;
    }}
    let s = a + b + c + d;
    if s == -1.0 {{
        sink[g.x & 255u] = s;
    }}
}}
"
    )
}

/// Whether a check's batch at `rate` seconds a launch found the clocks up, the fastest rate seen being `fastest`.
fn still_hot(rate: f64, fastest: f64) -> bool {
    rate <= fastest * (1.0 + CHECK_TOLERANCE)
}

impl Gpu {
    /// Runs the heater until the clocks are up; returns the wall seconds spent. Where an earlier warm-up saw its
    /// rate at full clocks, one batch of [`CHECK_SECONDS`] first: within [`CHECK_TOLERANCE`] of that rate, the
    /// clocks are still up and that is all. Otherwise [`crate::timing::warm_up`]'s batches of the heater. The
    /// launch is made at each call (its pipeline is cached; a call comes at most once a second of timings).
    pub(crate) fn heat(&self) -> Result<f64> {
        let mut known = self.heater_fastest.lock().map_err(|_| {
            crate::GpuError::InvalidArgument("the heater's lock is poisoned".into())
        })?;
        let sink: GpuBuffer<f32> = self.alloc_filled(256, 0.0)?;
        let groups = if self.adapter_info.device_type == wgpu::DeviceType::Cpu {
            CPU_GROUPS
        } else {
            GPU_GROUPS
        };
        let launch = self.prepare(
            &Kernel::new("bespoke_heater", source()),
            &[sink.arg()],
            Grid::d1(groups),
        )?;
        let batch = |n: usize, fastest: &mut Option<f64>| -> Result<f64> {
            let t = Instant::now();
            self.run_n(&[&launch], n)?;
            let seconds = t.elapsed().as_secs_f64();
            if seconds >= CHECK_SECONDS / 2.0 {
                let rate = seconds / n as f64;
                *fastest = Some(fastest.map_or(rate, |f: f64| f.min(rate)));
            }
            Ok(seconds)
        };
        let mut fastest = *known;
        let mut spent = 0.0;
        if let Some(f) = fastest {
            let n = ((CHECK_SECONDS / f).ceil() as usize).clamp(1, 4096);
            let seconds = batch(n, &mut fastest)?;
            spent += seconds;
            if still_hot(seconds / n as f64, f) {
                *known = fastest;
                return Ok(spent);
            }
        }
        spent += crate::timing::warm_up(|n| batch(n, &mut fastest))?;
        *known = fastest;
        Ok(spent)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_check_passes_near_the_fastest_rate_only_without_a_device() {
        // The H200's clocks: 1980 MHz full, 585 where a half-idle warm-up left them (a rate 3.4 times slower).
        let fastest = 0.3e-3;
        assert!(super::still_hot(fastest, fastest));
        assert!(super::still_hot(fastest * 1.04, fastest));
        assert!(!super::still_hot(fastest * 1.06, fastest));
        assert!(!super::still_hot(fastest * 1980.0 / 585.0, fastest));
    }

    #[test]
    fn the_heater_validates_without_a_device() {
        let module = naga::front::wgsl::parse_str(&super::source()).expect("parses");
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::empty(),
        )
        .validate(&module)
        .expect("validates");
        crate::backends::validate_everywhere(&super::source(), naga::valid::Capabilities::empty())
            .expect("every backend");
    }
}
