//! Checkpoints of a diffusion run: the stored values and shift (what the device holds, so a restart continues bit
//! for bit), the step reached, and what the state belongs to (the operator's fingerprint, its tets, the
//! precision, Δt), on one domain or gathered from any number of ranks and restored onto any number.
//!
//! Layout (little-endian): magic `BSPKFV01`; u64 tets; u64 operator fingerprint; u8 precision (4: f32, 8: f64);
//! f64 Δt; u64 step; f64 the initial mass (the run's report is then the uninterrupted run's); f64 shift; the
//! stored values in the operator's tet numbering, in the precision (exact: they are the device's words); a CRC-32
//! (IEEE) of everything before it, u32. Written to a temporary file in the same folder and renamed over the old
//! one (`bespoke_gpu::write_atomic`): a crash or a full disk during a write leaves the previous checkpoint.

use std::path::Path;

use bespoke_gpu::{DType, StableHasher};

use crate::error::{FvError, Result};
use crate::operator::{Boundary, Operator};

const MAGIC: &[u8; 8] = b"BSPKFV01";
/// Bytes before the values: magic, tets, fingerprint, precision, Δt, step, initial mass, shift.
const HEADER: usize = 8 + 8 + 8 + 1 + 8 + 8 + 8 + 8;

/// A diffusion run's state at a step.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    /// The operator's [`fingerprint`].
    pub fingerprint: u64,
    pub dtype: DType,
    pub dt: f64,
    /// Steps done since the run's start.
    pub step: u64,
    /// The mass of the run's initial state, as the run reports it.
    pub mass_initial: f64,
    pub shift: f64,
    /// x − shift as the device holds it, one value a tet in the operator's numbering (each exact in `dtype`).
    pub stored: Vec<f64>,
}

/// A fingerprint of what a diffusion's state belongs to: the operator's tets, neighbours, coefficients,
/// volumes and boundary (not its centroids, which only set the initial state). Tets numbered otherwise give
/// another fingerprint.
pub fn fingerprint(op: &Operator) -> u64 {
    let mut h = StableHasher::new();
    h.part(&(op.n() as u64).to_le_bytes());
    for ((v, i), vol) in op.values.iter().zip(&op.indices).zip(&op.volumes) {
        for (a, j) in v.iter().zip(i) {
            h.part(&a.to_le_bytes());
            h.part(&j.to_le_bytes());
        }
        h.part(&vol.to_le_bytes());
    }
    match op.boundary {
        Boundary::ZeroFlux => h.part(b"zero-flux"),
        Boundary::Dirichlet(v) => {
            h.part(b"dirichlet");
            h.part(&v.to_le_bytes());
        }
    }
    h.finish()
}

fn bad(path: &Path, why: impl Into<String>) -> FvError {
    FvError::Checkpoint {
        path: path.display().to_string(),
        why: why.into(),
    }
}

impl Checkpoint {
    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let size = self.dtype.size();
        let mut b = Vec::with_capacity(HEADER + size * self.stored.len() + 4);
        b.extend(MAGIC);
        b.extend((self.stored.len() as u64).to_le_bytes());
        b.extend(self.fingerprint.to_le_bytes());
        b.push(size as u8);
        b.extend(self.dt.to_le_bytes());
        b.extend(self.step.to_le_bytes());
        b.extend(self.mass_initial.to_le_bytes());
        b.extend(self.shift.to_le_bytes());
        for &v in &self.stored {
            match self.dtype {
                DType::F32 => b.extend((v as f32).to_le_bytes()),
                DType::F64 => b.extend(v.to_le_bytes()),
            }
        }
        let crc = crc32fast::hash(&b);
        b.extend(crc.to_le_bytes());
        b
    }

    /// Writes the checkpoint to `path`, atomically.
    pub fn write(&self, path: &Path) -> Result<()> {
        bespoke_gpu::write_atomic(path, &self.to_bytes()).map_err(|e| FvError::io(path, e))
    }

    /// Reads a checkpoint; a file that is not one, truncated, damaged (its checksum) or of an unknown precision is
    /// an error naming the file and what is wrong.
    pub fn read(path: &Path) -> Result<Self> {
        let b = std::fs::read(path).map_err(|e| FvError::io(path, e))?;
        Self::from_bytes(path, &b)
    }

    /// [`read`](Self::read) from the bytes of `path`.
    pub fn from_bytes(path: &Path, b: &[u8]) -> Result<Self> {
        if b.len() < MAGIC.len() || &b[..MAGIC.len()] != MAGIC {
            return Err(bad(path, "not a bespoke-fv checkpoint (bad magic)"));
        }
        if b.len() < HEADER + 4 {
            return Err(bad(path, format!("truncated at byte {}", b.len())));
        }
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let f64_at = |o: usize| f64::from_bits(u64_at(o));
        let tets = u64_at(8);
        let dtype = match b[24] {
            4 => DType::F32,
            8 => DType::F64,
            s => {
                return Err(bad(
                    path,
                    format!("values of {s} bytes: neither f32 nor f64"),
                ));
            }
        };
        let size = dtype.size();
        let want = (tets as u128) * size as u128 + HEADER as u128 + 4;
        if (b.len() as u128) < want {
            return Err(bad(
                path,
                format!("truncated: {} bytes where {tets} tets take {want}", b.len()),
            ));
        }
        if (b.len() as u128) > want {
            return Err(bad(
                path,
                format!("{} bytes where {tets} tets take {want}", b.len()),
            ));
        }
        let body = b.len() - 4;
        let crc = u32::from_le_bytes(b[body..].try_into().expect("4 bytes"));
        if crc32fast::hash(&b[..body]) != crc {
            return Err(bad(
                path,
                "damaged: its checksum does not match its contents",
            ));
        }
        let stored = b[HEADER..body]
            .chunks_exact(size)
            .map(|c| match dtype {
                DType::F32 => f64::from(f32::from_le_bytes(c.try_into().expect("4 bytes"))),
                DType::F64 => f64::from_le_bytes(c.try_into().expect("8 bytes")),
            })
            .collect();
        Ok(Self {
            fingerprint: u64_at(16),
            dtype,
            dt: f64_at(25),
            step: u64_at(33),
            mass_initial: f64_at(41),
            shift: f64_at(49),
            stored,
        })
    }

    /// Refuses, naming what differs, a checkpoint of another operator, precision or Δt than the run's (`op`,
    /// `dtype`, `dt`), or one at or past the run's `steps`.
    pub fn check_fits(
        &self,
        path: &Path,
        op: &Operator,
        dtype: DType,
        dt: f64,
        steps: u64,
    ) -> Result<()> {
        if self.stored.len() != op.n() {
            return Err(bad(
                path,
                format!(
                    "a state of {} tets; this mesh has {}",
                    self.stored.len(),
                    op.n()
                ),
            ));
        }
        if self.fingerprint != fingerprint(op) {
            return Err(bad(
                path,
                "a state of another mesh or boundary (the operator's fingerprint differs)",
            ));
        }
        if self.dtype != dtype {
            return Err(bad(
                path,
                format!(
                    "a state in {}; this run is in {} (--dtype)",
                    self.dtype.wgsl(),
                    dtype.wgsl()
                ),
            ));
        }
        if self.dt.to_bits() != dt.to_bits() {
            return Err(bad(
                path,
                format!(
                    "a state stepped with Δt = {:e}; this run's is {dt:e}",
                    self.dt
                ),
            ));
        }
        if self.step >= steps {
            return Err(bad(
                path,
                format!(
                    "a state at step {}: at or past the run's end ({steps} steps); ask for more steps",
                    self.step
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::BoxMesh;
    use crate::operator::adjacency;

    fn op(n: usize, boundary: Boundary) -> Operator {
        let mesh = BoxMesh::cube(n).build().unwrap();
        Operator::diffusion(&mesh, &adjacency(&mesh).unwrap(), 1.0, boundary).unwrap()
    }

    fn saved(op: &Operator, dtype: DType) -> Checkpoint {
        let stored = (0..op.n())
            .map(|i| {
                let v = (i as f64 * 0.37).sin() * 1e-3;
                if dtype == DType::F32 {
                    f64::from(v as f32)
                } else {
                    v
                }
            })
            .collect();
        Checkpoint {
            fingerprint: fingerprint(op),
            dtype,
            dt: op.default_dt(),
            step: 17,
            mass_initial: 0.125,
            shift: 0.3,
            stored,
        }
    }

    #[test]
    fn a_checkpoint_reads_back_bit_for_bit_without_a_device() {
        let o = op(3, Boundary::ZeroFlux);
        let p = Path::new("c.fv");
        for dtype in [DType::F32, DType::F64] {
            let c = saved(&o, dtype);
            let b = c.to_bytes();
            assert_eq!(b.len(), HEADER + dtype.size() * o.n() + 4);
            assert_eq!(Checkpoint::from_bytes(p, &b).unwrap(), c);
            c.check_fits(p, &o, dtype, c.dt, 18).unwrap();
        }
    }

    #[test]
    fn damaged_truncated_and_foreign_files_are_refused_by_name_without_a_device() {
        let o = op(3, Boundary::ZeroFlux);
        let p = Path::new("c.fv");
        let b = saved(&o, DType::F32).to_bytes();
        let err = |bytes: &[u8]| Checkpoint::from_bytes(p, bytes).unwrap_err().to_string();
        assert!(err(b"hello world, not a checkpoint").contains("bad magic"));
        assert!(err(&b[..20]).contains("truncated"));
        assert!(err(&b[..b.len() - 9]).contains("truncated"));
        let mut longer = b.clone();
        longer.push(0);
        assert!(err(&longer).contains("bytes where"));
        // A flipped bit anywhere past the magic: the header's or a value's or the checksum's.
        for at in [9, 24, 30, 45, HEADER + 5, b.len() - 2] {
            let mut d = b.clone();
            d[at] ^= 0x10;
            let e = err(&d);
            assert!(
                e.contains("checksum") || e.contains("truncated") || e.contains("bytes"),
                "byte {at}: {e}"
            );
            assert!(e.starts_with("c.fv"), "{e}");
        }
    }

    #[test]
    fn a_state_of_another_run_is_refused_naming_what_differs_without_a_device() {
        let o = op(3, Boundary::ZeroFlux);
        let p = Path::new("c.fv");
        let c = saved(&o, DType::F32);
        let e = |r: Result<()>| r.unwrap_err().to_string();
        assert!(
            e(c.check_fits(p, &op(2, Boundary::ZeroFlux), DType::F32, c.dt, 99)).contains("tets")
        );
        assert!(
            e(c.check_fits(p, &op(3, Boundary::Dirichlet(1.0)), DType::F32, c.dt, 99))
                .contains("fingerprint")
        );
        assert!(e(c.check_fits(p, &o, DType::F64, c.dt, 99)).contains("f32"));
        assert!(e(c.check_fits(p, &o, DType::F32, c.dt * 0.5, 99)).contains("Δt"));
        assert!(e(c.check_fits(p, &o, DType::F32, c.dt, 17)).contains("at or past"));
    }
}
