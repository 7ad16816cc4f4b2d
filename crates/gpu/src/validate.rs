//! Device-free WGSL validation with naga, so generated kernels are checked even where no adapter exists.

use crate::error::{GpuError, Result};
pub use naga::valid::Capabilities;

/// Parses and validates `src`, returning the module or naga's rendered diagnostic (with source line and caret).
///
/// `caps` are the optional shader capabilities the source may use, e.g. `Capabilities::FLOAT64` for f64 kernels.
pub fn validate_wgsl(src: &str, caps: Capabilities) -> Result<naga::Module> {
    validate_named("<wgsl>", src, caps)
}

pub(crate) fn validate_named(name: &str, src: &str, caps: Capabilities) -> Result<naga::Module> {
    validate_with_info(name, src, caps).map(|(m, _)| m)
}

pub(crate) fn validate_with_info(
    name: &str,
    src: &str,
    caps: Capabilities,
) -> Result<(naga::Module, naga::valid::ModuleInfo)> {
    let module = naga::front::wgsl::parse_str(src).map_err(|e| GpuError::InvalidShader {
        kernel: name.to_owned(),
        diagnostic: e.emit_to_string(src),
    })?;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| GpuError::InvalidShader {
            kernel: name.to_owned(),
            diagnostic: e.emit_to_string(src),
        })?;
    crate::barrier_uniformity::check(&module, src).map_err(|diagnostic| {
        GpuError::InvalidShader {
            kernel: name.to_owned(),
            diagnostic,
        }
    })?;
    Ok((module, info))
}

/// What a kernel's entry point asks of the device's limits, read from its source without a device: a kernel past
/// one is refused with an error naming the limit before the driver sees it (wgpu's own refusal, "Validation
/// Error" at pipeline creation, names it only in its cause).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceUse {
    /// Storage buffers the entry point uses (bindings it never touches are not bound).
    pub storage_buffers: u32,
    /// Invocations per workgroup (0 where the size is an override constant, known only at pipeline creation).
    pub invocations: u32,
    /// The workgroup size, per dimension (zeros for an override).
    pub workgroup_size: [u32; 3],
    /// Bytes of workgroup memory the entry point uses.
    pub workgroup_bytes: u32,
}

impl ResourceUse {
    /// The first limit of `limits` this use passes, as (what, asked, max).
    pub fn past(&self, limits: &wgpu::Limits) -> Option<(&'static str, u64, u64)> {
        let [x, y, z] = self.workgroup_size;
        [
            (
                "storage buffers bound by one kernel",
                self.storage_buffers,
                limits.max_storage_buffers_per_shader_stage,
            ),
            (
                "invocations per workgroup",
                self.invocations,
                limits.max_compute_invocations_per_workgroup,
            ),
            ("workgroup size x", x, limits.max_compute_workgroup_size_x),
            ("workgroup size y", y, limits.max_compute_workgroup_size_y),
            ("workgroup size z", z, limits.max_compute_workgroup_size_z),
            (
                "bytes of workgroup memory",
                self.workgroup_bytes,
                limits.max_compute_workgroup_storage_size,
            ),
        ]
        .into_iter()
        .find(|&(_, asked, max)| asked > max)
        .map(|(what, asked, max)| (what, u64::from(asked), u64::from(max)))
    }
}

/// The [`ResourceUse`] of `src`'s first compute entry point (validated against `caps`; none: all zero).
pub fn resource_use(src: &str, caps: Capabilities) -> Result<ResourceUse> {
    let (module, info) = validate_with_info("<wgsl>", src, caps)?;
    Ok(resource_use_of(&module, &info))
}

pub(crate) fn resource_use_of(
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
) -> ResourceUse {
    let Some((index, ep)) = module
        .entry_points
        .iter()
        .enumerate()
        .find(|(_, e)| e.stage == naga::ShaderStage::Compute)
    else {
        return ResourceUse::default();
    };
    let used = info.get_entry_point(index);
    let mut layouter = naga::proc::Layouter::default();
    let sized = layouter.update(module.to_ctx()).is_ok();
    let mut u = ResourceUse {
        workgroup_size: ep.workgroup_size,
        invocations: ep.workgroup_size.iter().product(),
        ..ResourceUse::default()
    };
    for (handle, g) in module.global_variables.iter() {
        if used[handle].is_empty() {
            continue;
        }
        match g.space {
            naga::AddressSpace::Storage { .. } => u.storage_buffers += 1,
            naga::AddressSpace::WorkGroup if sized => {
                u.workgroup_bytes += layouter[g.ty].size;
            }
            _ => {}
        }
    }
    u
}

/// The capabilities a generator's test should validate against for a given precision. The f16 packing
/// built-ins (`pack2x16float`, `unpack2x16float`) are core WebGPU and always allowed; only downlevel GL adapters
/// lack them, and the device path validates against the adapter's own flags.
pub fn caps_for(f64: bool, f16: bool) -> Capabilities {
    let mut caps = Capabilities::SHADER_FLOAT16_IN_FLOAT32;
    caps.set(Capabilities::FLOAT64, f64);
    caps.set(Capabilities::SHADER_FLOAT16, f16);
    caps
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Storage buffers the entry point touches, its workgroup's invocations and workgroup bytes, and the first
    /// limit past which it lies.
    #[test]
    fn a_kernels_resource_use_is_read_from_its_source() {
        let src = "@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> unused: array<f32>;
@group(0) @binding(2) var<storage, read_write> b: array<f32>;
@group(0) @binding(3) var<uniform> u: vec4<f32>;
var<workgroup> tile: array<vec4<f32>, 300>;
var<workgroup> spare: array<f32, 64>;
@compute @workgroup_size(16, 32, 1)
fn main(@builtin(local_invocation_index) i: u32) {
    tile[i % 300u] = vec4<f32>(a[i]) + u;
    workgroupBarrier();
    b[i] = tile[(i + 1u) % 300u].x;
}";
        let used = resource_use(src, Capabilities::empty()).unwrap();
        assert_eq!(
            used,
            ResourceUse {
                storage_buffers: 2,
                invocations: 512,
                workgroup_size: [16, 32, 1],
                workgroup_bytes: 4800,
            }
        );
        let webgpu = wgpu::Limits::default();
        assert_eq!(
            used.past(&webgpu),
            Some(("invocations per workgroup", 512, 256))
        );
        let roomy = wgpu::Limits {
            max_compute_invocations_per_workgroup: 1024,
            max_compute_workgroup_size_y: 1024,
            ..webgpu.clone()
        };
        assert_eq!(used.past(&roomy), None);
        let few = wgpu::Limits {
            max_storage_buffers_per_shader_stage: 1,
            ..roomy.clone()
        };
        assert_eq!(
            used.past(&few),
            Some(("storage buffers bound by one kernel", 2, 1))
        );
        let small = wgpu::Limits {
            max_compute_workgroup_storage_size: 4096,
            ..roomy
        };
        assert_eq!(
            used.past(&small),
            Some(("bytes of workgroup memory", 4800, 4096))
        );
    }

    #[test]
    fn accepts_a_valid_kernel() {
        let src = "@group(0) @binding(0) var<storage, read_write> x: array<f32>;
                   @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
                       x[g.x] = 2.0 * x[g.x];
                   }";
        assert!(validate_wgsl(src, Capabilities::empty()).is_ok());
    }

    #[test]
    fn rejects_a_type_error_with_a_readable_message() {
        let src = "@compute @workgroup_size(1) fn main() {\n    let a: f32 = 1u;\n}";
        let err = validate_wgsl(src, Capabilities::empty())
            .unwrap_err()
            .to_string();
        assert!(err.contains("failed validation"), "{err}");
        // naga quotes the offending line, so a person can find it.
        assert!(err.contains("let a: f32 = 1u;"), "{err}");
    }

    #[test]
    fn f64_needs_the_capability() {
        let src = "@group(0) @binding(0) var<storage, read_write> x: array<f64>;
                   @compute @workgroup_size(1) fn main() { x[0] = x[0] * 2.0lf; }";
        assert!(validate_wgsl(src, Capabilities::empty()).is_err());
        assert!(validate_wgsl(src, caps_for(true, false)).is_ok());
    }
}
