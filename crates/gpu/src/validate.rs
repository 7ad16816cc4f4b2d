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
    let module = naga::front::wgsl::parse_str(src).map_err(|e| GpuError::InvalidShader {
        kernel: name.to_owned(),
        diagnostic: e.emit_to_string(src),
    })?;
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| GpuError::InvalidShader {
            kernel: name.to_owned(),
            diagnostic: e.emit_to_string(src),
        })?;
    Ok(module)
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
