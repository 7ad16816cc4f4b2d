//! Element types the generators emit: the device layer's [`DType`].

pub use bespoke_gpu::DType;
