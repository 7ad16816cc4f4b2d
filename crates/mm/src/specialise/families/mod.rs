//! One generator per kernel family; each writes the body of one launch's kernel into an [`Emit`].
//!
//! [`Emit`]: crate::specialise::emit::Emit

mod bstream;
mod cstream;
mod ksplit;
mod msplit;
mod rolled;

pub(crate) use bstream::bstream;
pub(crate) use cstream::cstream;
pub(crate) use ksplit::ksplit;
pub(crate) use msplit::msplit;
pub use rolled::TableSize;
pub(crate) use rolled::{PARAMS_WORDS, rolled, rolled_table};
