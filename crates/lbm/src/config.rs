//! What a lattice is: size, storage, streaming pattern, collision operator, body force; and the checks that run
//! before anything is allocated.

use crate::d2q9;
use crate::error::{LbmError, Result};

/// How populations are stored between steps (arithmetic is f32 either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Storage {
    F32,
    /// IEEE half precision storing (f − w)·2¹⁴ so rest-state deviations keep their bits. With an even ny two
    /// cells (rows y and y + ny/2) share a u32 word through pack2x16float, which needs no `SHADER_F16`; an odd ny
    /// stores one WGSL `f16` per cell and needs it (`Layout`).
    F16,
}

/// How a direction's populations sit in its buffer of u32 words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// One f32 per word, cell k in word k.
    F32,
    /// f16, word k holds cell k in its low half and cell k + n/2 (the same column, ny/2 rows up) in its high half;
    /// one invocation updates both. Even ny; no `SHADER_F16` needed.
    F16Paired,
    /// f16, one per cell in cell order (cell k in half k mod 2 of word k/2), read and written as WGSL `f16` by one
    /// invocation per cell. Any ny; needs `SHADER_F16`. Used when ny is odd, where rows cannot pair.
    F16Single,
}

impl Layout {
    /// The layout of `storage` on a lattice with `ny` rows.
    pub fn of(storage: Storage, ny: usize) -> Self {
        match storage {
            Storage::F32 => Self::F32,
            Storage::F16 if ny.is_multiple_of(2) => Self::F16Paired,
            Storage::F16 => Self::F16Single,
        }
    }
    /// u32 words per direction for `n` cells.
    pub fn words(self, n: usize) -> usize {
        match self {
            Self::F32 => n,
            // Paired: n is even (ny is). Single: an odd n leaves the last word's high half unused.
            Self::F16Paired | Self::F16Single => n.div_ceil(2),
        }
    }
}

impl Storage {
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::F16 => "f16",
        }
    }
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "f32" => Ok(Self::F32),
            "f16" => Ok(Self::F16),
            _ => Err(LbmError::param("storage", s, "expected f32 or f16")),
        }
    }
    /// Bytes per stored population.
    pub fn bytes(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::F16 => 2,
        }
    }
}

/// The streaming pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Streaming {
    /// Two lattices, fused pull stream-collide: read neighbours from one, write the cell in the other.
    Ab,
    /// One lattice, AA pattern (Bailey et al. 2009): even steps read and write the cell's own slots swapped,
    /// odd steps read and write the neighbours' slots. Half the memory, the same traffic.
    InPlace,
}

impl Streaming {
    pub fn name(self) -> &'static str {
        match self {
            Self::Ab => "ab",
            Self::InPlace => "inplace",
        }
    }
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "ab" => Ok(Self::Ab),
            "inplace" | "aa" => Ok(Self::InPlace),
            _ => Err(LbmError::param("streaming", s, "expected ab or inplace")),
        }
    }
}

/// The collision operator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Collision {
    /// Single relaxation rate ω.
    Bgk { omega: f64 },
    /// Two relaxation rates: ω for the symmetric part, ω⁻ from Λ = (1/ω − ½)(1/ω⁻ − ½) for the antisymmetric.
    Trt { omega: f64, lambda: f64 },
}

impl Collision {
    /// TRT with Λ = 3/16, which puts half-way bounce-back walls exactly half-way for any ω.
    pub fn trt(omega: f64) -> Self {
        Self::Trt {
            omega,
            lambda: 3.0 / 16.0,
        }
    }
    pub fn omega(&self) -> f64 {
        match *self {
            Self::Bgk { omega } | Self::Trt { omega, .. } => omega,
        }
    }
    /// (ω⁺, ω⁻); equal for BGK.
    pub fn rates(&self) -> (f64, f64) {
        match *self {
            Self::Bgk { omega } => (omega, omega),
            Self::Trt { omega, lambda } => (omega, d2q9::trt_omega_minus(omega, lambda)),
        }
    }
    pub fn name(&self) -> &'static str {
        match self {
            Self::Bgk { .. } => "bgk",
            Self::Trt { .. } => "trt",
        }
    }
    pub fn viscosity(&self) -> f64 {
        d2q9::viscosity(self.omega())
    }
}

/// Everything that fixes a lattice's kernels.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub nx: usize,
    pub ny: usize,
    pub storage: Storage,
    pub streaming: Streaming,
    pub collision: Collision,
    /// Uniform body force density (Guo forcing), lattice units.
    pub force: [f64; 2],
    /// Smagorinsky constant C_s of the subgrid (LES) model, 0 for none: each cell's viscosity becomes
    /// ν₀ + (C_s Δx)² |S| with |S| from its non-equilibrium momentum flux. Typical values 0.1–0.2.
    pub smagorinsky: f64,
}

/// Largest lattice Mach number |u|/c_s accepted; beyond it the second-order equilibrium is neither accurate nor
/// stable.
pub const MAX_MACH: f64 = 0.3;
/// Speed of sound c_s = 1/√3.
pub const CS: f64 = 0.577_350_269_189_625_8;

impl Config {
    pub fn new(nx: usize, ny: usize, collision: Collision) -> Self {
        Self {
            nx,
            ny,
            storage: Storage::F32,
            streaming: Streaming::Ab,
            collision,
            force: [0.0, 0.0],
            smagorinsky: 0.0,
        }
    }
    pub fn cells(&self) -> usize {
        self.nx * self.ny
    }
    /// How populations are laid out in memory (`Layout::of`).
    pub fn layout(&self) -> Layout {
        Layout::of(self.storage, self.ny)
    }

    /// Checks the parameters; returns warnings (things that run but may not mean what the user hopes).
    pub fn check(&self) -> Result<Vec<String>> {
        let mut warnings = Vec::new();
        if self.nx < 2 || self.ny < 2 {
            return Err(LbmError::param(
                "size",
                format!("{}x{}", self.nx, self.ny),
                "a lattice needs at least 2 cells in each direction",
            ));
        }
        if self
            .nx
            .checked_mul(self.ny)
            .is_none_or(|n| n > (u32::MAX as usize) / 2)
        {
            return Err(LbmError::param(
                "size",
                format!("{}x{}", self.nx, self.ny),
                "more cells than 32-bit cell indices can address",
            ));
        }
        let omega = self.collision.omega();
        if !(omega > 0.0 && omega < 2.0) {
            return Err(LbmError::param(
                "omega",
                omega,
                "the relaxation rate must lie in (0, 2) for a positive viscosity ν = (1/ω − ½)/3",
            ));
        }
        if let Collision::Trt { lambda, .. } = self.collision {
            if !(lambda > 0.0 && lambda.is_finite()) {
                return Err(LbmError::param(
                    "lambda",
                    lambda,
                    "TRT's magic parameter must be positive",
                ));
            }
            let om = self.collision.rates().1;
            if !(om > 0.0 && om < 2.0) {
                return Err(LbmError::param(
                    "lambda",
                    lambda,
                    format!(
                        "with ω = {omega:e} (ν = {:.3e}) it gives ω⁻ = {om}, outside (0, 2): raise ω (from --re: a \
                         higher Reynolds number or a smaller lattice)",
                        self.collision.viscosity()
                    ),
                ));
            }
        }
        if omega > 1.98 && self.smagorinsky == 0.0 {
            warnings.push(format!(
                "ω = {omega} is close to 2 (ν = {:.2e}): unless the lattice resolves the flow it is likely to go \
                 unstable, BGK first; a Smagorinsky subgrid model (`smagorinsky` 0.1–0.2) keeps it stable",
                self.collision.viscosity()
            ));
        }
        if !(self.force[0].is_finite() && self.force[1].is_finite()) {
            return Err(LbmError::param(
                "force",
                format!("{:?}", self.force),
                "the body force must be finite",
            ));
        }
        if !(self.smagorinsky >= 0.0 && self.smagorinsky <= 1.0) {
            return Err(LbmError::param(
                "smagorinsky",
                self.smagorinsky,
                "the Smagorinsky constant must lie in [0, 1] (0: no subgrid model; typical 0.1–0.2)",
            ));
        }
        warnings.extend(self.force_warning());
        Ok(warnings)
    }

    /// [`check`](Self::check)'s warning on a body force past 10⁻² a step, which unopposed passes the Mach limit in
    /// a few tens of steps. A case that sets the force for a steady speed it has checked against the limit (the
    /// force-driven channel, where the walls hold it) withdraws it.
    pub fn force_warning(&self) -> Option<String> {
        (self.force[0].hypot(self.force[1]) > 1e-2).then(|| {
            format!(
                "body force {:?} is large for lattice units; velocities may exceed Mach {MAX_MACH}",
                self.force
            )
        })
    }
}

/// Errors when a lattice velocity is beyond [`MAX_MACH`] (what names where it came from).
pub fn check_mach(what: &'static str, u: [f64; 2]) -> Result<()> {
    let speed = u[0].hypot(u[1]);
    if !speed.is_finite() {
        return Err(LbmError::param(
            what,
            format!("{u:?}"),
            "velocity must be finite",
        ));
    }
    if speed / CS > MAX_MACH {
        return Err(LbmError::param(
            what,
            format!("{u:?}"),
            format!(
                "lattice Mach number {:.3} exceeds {MAX_MACH}: lower the velocity (|u| ≤ {:.3}) and raise the \
                 resolution or the viscosity instead",
                speed / CS,
                MAX_MACH * CS
            ),
        ));
    }
    Ok(())
}

impl std::str::FromStr for Storage {
    type Err = LbmError;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

impl std::fmt::Display for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Streaming {
    type Err = LbmError;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

impl std::fmt::Display for Streaming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_parameters() {
        let ok = Config::new(16, 16, Collision::Bgk { omega: 1.0 });
        assert!(ok.check().is_ok());
        for omega in [0.0, 2.0, -1.0, f64::NAN, 2.5] {
            let c = Config::new(16, 16, Collision::Bgk { omega });
            let e = c.check().expect_err("bad ω accepted").to_string();
            assert!(e.contains("omega"), "{e}");
        }
        assert!(
            Config::new(1, 16, Collision::Bgk { omega: 1.0 })
                .check()
                .is_err()
        );
        let c = Config {
            force: [f64::NAN, 0.0],
            ..ok.clone()
        };
        assert!(c.check().is_err());
        for smagorinsky in [-0.1, f64::NAN, 1.5] {
            let c = Config {
                smagorinsky,
                ..ok.clone()
            };
            let e = c.check().expect_err("bad C_s accepted").to_string();
            assert!(e.contains("smagorinsky"), "{e}");
        }
        let c = Config::new(
            16,
            16,
            Collision::Trt {
                omega: 1.0,
                lambda: -1.0,
            },
        );
        assert!(c.check().is_err());
        // A legal ω too small for TRT's second rate (ν ~ 1e31, from Re = 1e-30): named with ω and ν.
        let c = Config::new(
            16,
            16,
            Collision::Trt {
                omega: 2.6e-32,
                lambda: 3.0 / 16.0,
            },
        );
        let e = c.check().expect_err("ω⁻ = 2 accepted").to_string();
        assert!(e.contains("ω = 2.6e-32") && e.contains("raise ω"), "{e}");
        assert!(check_mach("lid", [0.1, 0.0]).is_ok());
        let e = check_mach("lid", [0.2, 0.0])
            .expect_err("Mach 0.35 accepted")
            .to_string();
        assert!(e.contains("Mach"), "{e}");
    }
}
