//! The step kernel's launch shape: every workgroup size the tuner may choose gives the default's bits, and the
//! choice is timed once per adapter and kind of lattice, then read from the cache.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::rc::Rc;

use bespoke_gpu::testing::{fresh_seed, test_gpu};
use bespoke_gpu::{DiskCache, GridLayout};
use bespoke_lbm::kernel::WG;
use bespoke_lbm::shape::{CELL_CANDIDATES, StepShape, candidates, step_shape_in};
use bespoke_lbm::{Collision, Config, Flags, Lattice, Storage, Streaming};
use rand::{Rng, SeedableRng, rngs::StdRng};

mod bits;
mod buffers;
mod cache;
