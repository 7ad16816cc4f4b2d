//! bespoke-lbm: a D2Q9 lattice Boltzmann stepper on wgpu.
//!
//! One fused stream-collide kernel per step, generated as WGSL for the lattice's storage (f32, or f16 holding
//! (f − w)·2¹⁴, two cells per u32 word, or one f16 per cell for an odd ny), streaming pattern (two-lattice pull, or in-place AA), collision (BGK, TRT) and Guo body force;
//! cells are fluid, walls (half-way bounce-back, optionally moving), velocity inlets or density outlets. Fields
//! are read back only when asked; probes evaluate a few cells and the force on chosen wall links on the device. [`reference`](mod@reference) holds the f64 CPU step the tests compare against.
//!
//! ```no_run
//! use bespoke_gpu::Gpu;
//! use bespoke_lbm::{Collision, Config, Flags, Lattice};
//!
//! // A lid-driven cavity, 128², TRT: walls all round, the top one moving at u = 0.1.
//! let gpu = Gpu::new()?;
//! let cfg = Config::new(128, 128, Collision::trt(1.6));
//! let mut flags = Flags::fluid(128, 128);
//! flags.box_walls();
//! let mut lattice = Lattice::new(&gpu, cfg, flags)?;
//! lattice.init_equilibrium(|_, _| (1.0, [0.0, 0.0]))?;
//! lattice.step(1000)?;
//! let fields = lattice.macroscopic()?; // ρ, u_x, u_y of every cell, read back once
//! # let _ = fields;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The same step on the CPU, in f64 ([`reference::step`]), is what every kernel test compares with:
//!
//! ```
//! use bespoke_lbm::{Collision, Config, Flags, d2q9, reference};
//!
//! let (cfg, flags) = (Config::new(8, 6, Collision::Bgk { omega: 1.0 }), Flags::fluid(8, 6));
//! // Periodic fluid at rest stays at rest.
//! let n = cfg.cells();
//! let mut s = vec![0.0; 9 * n];
//! for (i, w) in d2q9::equilibrium(1.0, [0.0, 0.0]).iter().enumerate() {
//!     s[i * n..(i + 1) * n].fill(*w);
//! }
//! let next = reference::step(&cfg, &flags, &s);
//! assert!(next.iter().zip(&s).all(|(a, b)| (a - b).abs() < 1e-15));
//! ```

pub mod bench;
pub mod cases;
mod checkpoint;
mod config;
pub mod d2q9;
pub mod distributed;
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
pub use fields::{Fields, OwnFields};
pub use flags::{Cell, EncodedFlags, Flags};
pub use lattice::{Lattice, check_fits, check_fits_within, check_storage, stored_words};
/// The step kernel's launch shape, chosen on the device (`lattice/shape.rs`).
pub mod shape {
    pub use crate::lattice::{
        CELL_CANDIDATES, MAX_CELLS, STEP_WORKGROUPS, StepShape, cache_key, candidates,
        nine_bindings_fit, one_buffer_bytes, one_buffer_fits, step_shape, step_shape_in,
        tuning_size, user_cache,
    };
}
pub use probe::{Probe, ProbeValues};
