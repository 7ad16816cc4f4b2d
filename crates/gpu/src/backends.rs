//! Every kernel in the shading language of each backend wgpu drives, without a device: SPIR-V (Vulkan), MSL
//! (Metal), HLSL (DX12) and GLSL ES (GL), each written by naga's writer as wgpu's backend calls it (overrides
//! resolved, runtime bounds checks off, as the trusted modules run). CI's adapters are Vulkan (lavapipe) and GL
//! (llvmpipe); a kernel that one of naga's other writers refuses fails here, not at pipeline creation on a user's
//! Mac or Windows machine. What the backend's own compiler makes of the text (Metal's, DXC or FXC) is not checked:
//! neither runs on Linux.

use crate::validate::validate_with_info;
use crate::{GpuError, Result};
use naga::back::{glsl, hlsl, msl, spv};
use naga::valid::{Capabilities, ModuleInfo, ValidationFlags, Validator};
use std::fmt;

/// A shading language wgpu translates WGSL into, one per backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// Vulkan.
    SpirV,
    /// Metal, language version [`MSL_VERSION`].
    Msl,
    /// DX12: shader model 5.1 (FXC's), or 6.2 where the kernel may use f16 (SHADER_F16).
    Hlsl,
    /// GL: GLSL ES 3.10, what wgpu's GL backend asks for compute.
    GlslEs,
}

impl Target {
    /// Every target, in the order [`translate`] writes them.
    pub const ALL: [Target; 4] = [Target::SpirV, Target::Msl, Target::Hlsl, Target::GlslEs];

    /// What the backend can offer a kernel: its writer's capabilities less what wgpu 30's backend never grants
    /// (SHADER_F64 on all but Vulkan; SHADER_F16 and SHADER_INT64 on GL).
    pub fn capabilities(self) -> Capabilities {
        match self {
            Target::SpirV => Capabilities::all(),
            Target::Msl => msl::supported_capabilities() - Capabilities::FLOAT64,
            Target::Hlsl => hlsl::supported_capabilities() - Capabilities::FLOAT64,
            Target::GlslEs => {
                glsl::supported_capabilities()
                    - Capabilities::FLOAT64
                    - Capabilities::SHADER_FLOAT16
                    - Capabilities::SHADER_INT64
            }
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Target::SpirV => "SPIR-V",
            Target::Msl => "MSL",
            Target::Hlsl => "HLSL",
            Target::GlslEs => "GLSL ES",
        })
    }
}

/// The Metal Shading Language version the MSL is written for: 2.4 (macOS 12, iOS 15), what Apple's GPUs of the
/// last five years run; wgpu asks for the newest the device has.
pub const MSL_VERSION: (u8, u8) = (2, 4);

/// What [`translate`] made of a kernel for one target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Translation {
    /// Written: the text's length in bytes (SPIR-V: 4 a word).
    Written(usize),
    /// The kernel needs what the backend does not offer (f64 anywhere but on Vulkan, f16 on GL): an adapter there refuses
    /// it by name before any translation, as wgpu grants no such feature.
    NotOffered(String),
}

/// Writes `src`'s compute entry points in every [`Target`]'s language as wgpu's backend would, after validating
/// it with `caps` (the capabilities the kernel is meant for). An error names the kernel, the target, the entry
/// point and naga's reason; a target that cannot offer what the kernel uses is [`Translation::NotOffered`].
pub fn translate(name: &str, src: &str, caps: Capabilities) -> Result<Vec<(Target, Translation)>> {
    let (module, info) = validate_with_info(name, src, caps)?;
    let fail = |target: Target, entry: &str, what: String| GpuError::InvalidShader {
        kernel: name.to_owned(),
        diagnostic: format!("{target} translation of entry point `{entry}` failed: {what}"),
    };
    let mut out = Vec::with_capacity(Target::ALL.len());
    for target in Target::ALL {
        // Validated again with only what the backend has (where it lacks some of `caps`): where that fails, the
        // kernel needs a feature the backend never grants.
        let offered = caps & target.capabilities();
        if offered != caps
            && let Err(e) = Validator::new(ValidationFlags::all(), offered).validate(&module)
        {
            out.push((target, Translation::NotOffered(e.into_inner().to_string())));
            continue;
        }
        let mut bytes = 0;
        for ep in module
            .entry_points
            .iter()
            .filter(|ep| ep.stage == naga::ShaderStage::Compute)
        {
            let entry = ep.name.as_str();
            let (module, info) = naga::back::pipeline_constants::process_overrides(
                &module,
                &info,
                Some((naga::ShaderStage::Compute, entry)),
                &Default::default(),
            )
            .map_err(|e| fail(target, entry, format!("overrides: {e}")))?;
            bytes += write(target, &module, &info, entry, offered)
                .map_err(|e| fail(target, entry, e))?;
        }
        out.push((target, Translation::Written(bytes)));
    }
    Ok(out)
}

/// [`validate_wgsl`](crate::validate_wgsl), and then every [`Target`] writes the kernel or cannot offer what it
/// needs ([`translate`]): what the generators' device-free tests call.
pub fn validate_everywhere(src: &str, caps: Capabilities) -> Result<()> {
    translate("<wgsl>", src, caps).map(|_| ())
}

/// One entry point in `target`'s language: its length in bytes, or naga's reason.
fn write(
    target: Target,
    module: &naga::Module,
    info: &ModuleInfo,
    entry: &str,
    caps: Capabilities,
) -> Result<usize, String> {
    let stage = naga::ShaderStage::Compute;
    // Runtime checks off: the trusted modules every kernel runs as (`pipeline.rs`).
    let unchecked = naga::proc::BoundsCheckPolicies {
        index: naga::proc::BoundsCheckPolicy::Unchecked,
        buffer: naga::proc::BoundsCheckPolicy::Unchecked,
        image_load: naga::proc::BoundsCheckPolicy::Unchecked,
        binding_array: naga::proc::BoundsCheckPolicy::Unchecked,
    };
    match target {
        Target::SpirV => {
            let options = spv::Options {
                lang_version: (1, 3),
                bounds_check_policies: unchecked,
                zero_initialize_workgroup_memory: spv::ZeroInitializeWorkgroupMemoryMode::None,
                force_loop_bounding: false,
                ..Default::default()
            };
            let pipeline = spv::PipelineOptions {
                shader_stage: stage,
                entry_point: entry.to_owned(),
            };
            spv::write_vec(module, info, &options, Some(&pipeline))
                .map(|words| 4 * words.len())
                .map_err(|e| e.to_string())
        }
        Target::Msl => {
            let options = msl::Options {
                lang_version: MSL_VERSION,
                bounds_check_policies: unchecked,
                zero_initialize_workgroup_memory: false,
                force_loop_bounding: false,
                emit_int_div_checks: false,
                ..Default::default()
            };
            let pipeline = msl::PipelineOptions {
                entry_point: Some((stage, entry.to_owned())),
                ..Default::default()
            };
            msl::write_string(module, info, &options, &pipeline)
                .map(|(text, _)| text.len())
                .map_err(|e| e.to_string())
        }
        Target::Hlsl => {
            // wgpu's DX12 backend grants SHADER_F16 only with shader model 6.2's 16-bit types.
            let f16 = caps.contains(Capabilities::SHADER_FLOAT16);
            let options = hlsl::Options {
                shader_model: if f16 {
                    hlsl::ShaderModel::V6_2
                } else {
                    hlsl::ShaderModel::V5_1
                },
                fake_missing_bindings: true,
                zero_initialize_workgroup_memory: false,
                restrict_indexing: false,
                force_loop_bounding: false,
                ..Default::default()
            };
            let pipeline = hlsl::PipelineOptions {
                entry_point: Some((stage, entry.to_owned())),
            };
            let mut text = String::new();
            hlsl::Writer::new(&mut text, &options, &pipeline)
                .write(module, info, None)
                .map(|_| text.len())
                .map_err(|e| e.to_string())
        }
        Target::GlslEs => {
            let options = glsl::Options {
                version: glsl::Version::Embedded {
                    version: 310,
                    is_webgl: false,
                },
                zero_initialize_workgroup_memory: false,
                ..Default::default()
            };
            let pipeline = glsl::PipelineOptions {
                shader_stage: stage,
                entry_point: entry.to_owned(),
                multiview: None,
            };
            let mut text = String::new();
            glsl::Writer::new(&mut text, module, info, &options, &pipeline, unchecked)
                .and_then(|mut w| w.write())
                .map(|_| text.len())
                .map_err(|e| e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F32: &str = "
        @group(0) @binding(0) var<storage, read_write> x: array<f32>;
        var<workgroup> tile: array<f32, 64>;
        override WG: u32 = 64u;
        @compute @workgroup_size(WG) fn main(@builtin(global_invocation_id) g: vec3<u32>,
                                             @builtin(local_invocation_index) l: u32) {
            tile[l] = x[g.x % arrayLength(&x)];
            workgroupBarrier();
            x[g.x % arrayLength(&x)] = tile[63u - l] * 2.0;
        }";

    #[test]
    fn a_kernel_is_written_for_every_backend() {
        let out = translate("f32", F32, Capabilities::empty()).expect("translates");
        assert_eq!(out.iter().map(|(t, _)| *t).collect::<Vec<_>>(), Target::ALL);
        for (t, w) in out {
            assert!(
                matches!(w, Translation::Written(n) if n > 100),
                "{t}: {w:?}"
            );
        }
    }

    #[test]
    fn f64_is_offered_on_vulkan_alone_and_f16_everywhere_but_gl() {
        let f64_src = F32.replace("f32", "f64").replace("2.0", "2.0lf");
        let out =
            translate("f64", &f64_src, Capabilities::FLOAT64).expect("translates where offered");
        let not: Vec<_> = out
            .iter()
            .filter(|(_, w)| matches!(w, Translation::NotOffered(_)))
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(not, [Target::Msl, Target::Hlsl, Target::GlslEs], "{out:?}");
        let f16_src = format!(
            "enable f16;\n{}",
            F32.replace("f32", "f16").replace("2.0", "2.0h")
        );
        let out = translate("f16", &f16_src, Capabilities::SHADER_FLOAT16)
            .expect("translates where offered");
        let not: Vec<_> = out
            .iter()
            .filter(|(_, w)| matches!(w, Translation::NotOffered(_)))
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(not, [Target::GlslEs], "{out:?}");
    }

    #[test]
    fn what_a_backend_cannot_write_is_an_error_naming_it_and_the_entry_point() {
        // An override without a default validates, but no backend can write it without a value (wgpu takes
        // one at pipeline creation; `translate` writes the overrides' defaults).
        let src = F32.replace("override WG: u32 = 64u;", "override WG: u32;");
        let e = translate("no default", &src, Capabilities::empty())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no default") && e.contains("SPIR-V translation of entry point `main`"),
            "{e}"
        );
        // i64 is offered where wgpu offers SHADER_INT64 (Vulkan, Metal, DX12), not on GL.
        let src = "
            @group(0) @binding(0) var<storage, read_write> x: array<i64>;
            @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
                x[g.x] = x[g.x] * 3li;
            }";
        let out =
            translate("i64", src, Capabilities::SHADER_INT64).expect("translates where offered");
        assert!(
            matches!(out[3], (Target::GlslEs, Translation::NotOffered(_))),
            "{out:?}"
        );
        assert!(
            out[..3]
                .iter()
                .all(|(_, w)| matches!(w, Translation::Written(_))),
            "{out:?}"
        );
    }
}
