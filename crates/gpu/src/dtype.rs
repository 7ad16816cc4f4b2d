//! The element precision kernels are generated for: its WGSL name, size, exact literals and what the adapter
//! must support. Shared by every generator (bespoke-mm, bespoke-fv).

use crate::{Capabilities, Gpu, GpuError, caps_for};

/// Precision of a kernel's storage and arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F64,
}

impl DType {
    pub fn wgsl(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::F64 => "f64",
        }
    }
    pub fn size(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::F64 => 8,
        }
    }
    /// An exact WGSL literal: f32 as the shortest string that round-trips, f64 with 17 significant digits and
    /// the `lf` suffix.
    pub fn literal(self, v: f64) -> String {
        match self {
            Self::F32 => {
                let s = format!("{:?}", v as f32);
                if s.contains('.') || s.contains('e') {
                    s
                } else {
                    format!("{s}.0")
                }
            }
            Self::F64 => format!("{v:.16e}lf"),
        }
    }
    /// naga capabilities a kernel of this type needs.
    pub fn caps(self) -> Capabilities {
        caps_for(self == Self::F64, false)
    }
    /// Whether `gpu` can run kernels of this type.
    pub fn supported(self, gpu: &Gpu) -> bool {
        self == Self::F32 || gpu.has_f64()
    }
    /// Err(MissingFeature) naming `what` when `gpu` cannot run this type.
    pub fn require(self, gpu: &Gpu, what: &str) -> Result<(), GpuError> {
        if self.supported(gpu) {
            return Ok(());
        }
        Err(GpuError::MissingFeature {
            kernel: format!("{what} {self}"),
            feature: "SHADER_F64",
            adapter: gpu.adapter_name().into(),
        })
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "f32" => Some(Self::F32),
            "f64" => Some(Self::F64),
            _ => None,
        }
    }
}

/// The Rust types kernels store and compute in, tied to their [`DType`]: the one element trait of every crate
/// (bespoke-mm's GEMMs, bespoke-fv's steps).
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    const DTYPE: DType;
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    /// The NaN tests poison outputs with.
    fn nan() -> Self;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn nan() -> Self {
        f32::NAN
    }
}

impl Element for f64 {
    const DTYPE: DType = DType::F64;
    fn from_f64(v: f64) -> Self {
        v
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn nan() -> Self {
        f64::NAN
    }
}

impl std::str::FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s).ok_or_else(|| format!("`{s}` is not a precision: expected f32 or f64"))
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.wgsl())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_round_trip() {
        for v in [
            1.0,
            -0.36602540378443854,
            1.3660254037844386,
            1e-30,
            3.0e38,
            0.1,
        ] {
            let s = DType::F32.literal(v);
            assert_eq!(s.parse::<f32>().unwrap(), v as f32, "{s}");
            let d = DType::F64.literal(v);
            assert!(d.ends_with("lf"));
            assert_eq!(d.trim_end_matches("lf").parse::<f64>().unwrap(), v, "{d}");
        }
        assert_eq!(DType::F32.literal(2.0), "2.0");
    }
}
