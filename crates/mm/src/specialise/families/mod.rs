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

use super::emit::Work;
use super::partition::Row;

/// The rows of a launch's `work` as the partition sees them (no stores: what bstream's blocks and msplit's
/// invocation rows are cut from, both within one launch).
fn work_rows(work: &Work) -> Vec<Row> {
    work.iter()
        .map(|(_, t)| Row::new(t.iter().map(|(p, _)| *p), 0))
        .collect()
}
