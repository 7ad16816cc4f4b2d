//! bespoke-lbm: a D2Q9 lattice Boltzmann stepper on wgpu.
//!
//! One fused stream-collide kernel per step, generated as WGSL for the lattice's storage (f32, or f16 holding
//! (f − w)·2¹⁴, two cells per u32 word, or one f16 per cell for an odd ny), streaming pattern (two-lattice pull, or in-place AA), collision (BGK, TRT) and Guo body force;
//! cells are fluid, walls (half-way bounce-back, optionally moving), velocity inlets or density outlets. Fields
//! are read back only when asked; probes evaluate a few cells and the force on chosen wall links on the device. [`reference`] holds the f64 CPU step the tests compare against.

pub mod bench;
pub mod cases;
mod checkpoint;
mod config;
pub mod d2q9;
pub mod dist;
mod error;
mod fields;
mod flags;
pub mod kernel;
mod lattice;
pub mod output;
mod probe;
pub mod reference;
pub mod scale;
mod state;
mod storage;

pub use config::{CS, Collision, Config, Layout, MAX_MACH, Storage, Streaming, check_mach};
pub use error::{LbmError, Result};
pub use fields::Fields;
pub use flags::{Cell, EncodedFlags, Flags};
pub use lattice::{Lattice, check_fits, stored_words};
pub use probe::{Probe, ProbeValues};
