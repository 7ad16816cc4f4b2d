//! The layout every rank steps its part in when the user names none (`fv run --layout auto` across ranks):
//! rank 0 chooses on its device ([`step_layout`]: timed once per adapter, kernel and precision, then cached)
//! while the others wait, and sends its order of preference (its choice, then the other timed layouts fastest
//! first, then slot-major); each rank says which layouts its own part's bindings take on its own adapter, and
//! every rank takes the first layout of that order which every rank's part fits. One layout for all ranks keeps
//! the run's report one line; every layout gives the same bits (tested), so the choice moves only the time. Ranks
//! on other devices than rank 0's take rank 0's measurement: a job's devices are alike in practice, and timing on
//! every rank at once would time thread ranks that share one device against each other.

use bespoke_comm::Comm;
use bespoke_gpu::{DiskCache, Gpu};

use super::RankPart;
use super::slice::{FROM_ROOT_PART, blame_root, from_root, root_failed};
use crate::diffusion::{LayoutChoice, Real, step_layout, step_layout_in};
use crate::error::{FvError, Result};
use crate::kernel::{KernelKind, Layout};

/// What rank 0 sends: the flag, the number of layouts, each as its place in [`Layout::ALL`], then why (UTF-8).
fn encode(order: &[Layout], source: &str) -> Vec<u8> {
    let mut b = vec![FROM_ROOT_PART, order.len() as u8];
    b.extend(
        order
            .iter()
            .map(|l| Layout::ALL.iter().position(|m| m == l).unwrap_or(0) as u8),
    );
    b.extend_from_slice(source.as_bytes());
    b
}

fn decode(b: &[u8]) -> Result<(Vec<Layout>, String)> {
    let bad = |why: &str| FvError::Shape(format!("a malformed layout choice from rank 0: {why}"));
    let b = from_root(b)?;
    let (&count, rest) = b.split_first().ok_or_else(|| bad("empty"))?;
    let count = usize::from(count);
    if count == 0 || rest.len() < count {
        return Err(bad("fewer layouts than it says"));
    }
    let order = rest[..count]
        .iter()
        .map(|&k| {
            Layout::ALL
                .get(usize::from(k))
                .copied()
                .ok_or_else(|| bad(&format!("no layout number {k}")))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((order, String::from_utf8_lossy(&rest[count..]).into_owned()))
}

/// The layout every rank of `comm` steps its `part` in (its operator's rows, ghosts included) with the `kind`
/// kernel and `T` values, and why (`tuned on rank 0`, `cached on rank 0`, or why it gave way). Collective: every
/// rank calls it, rank 0 first choosing on `gpu` with the user's cache. A failure on rank 0 is every rank's error,
/// and so is a job where no layout fits every rank's part (an `Unsupported` error naming what fits this rank).
pub fn rank_layout<T: Real>(
    gpu: &Gpu,
    comm: &dyn Comm,
    kind: KernelKind,
    part: &RankPart,
) -> Result<(Layout, String)> {
    rank_layout_for_tets::<T>(gpu, comm, kind, part.local_tets())
}

/// [`rank_layout`] for operators of at most `local_tets` tets on this rank (`bespoke scale`: the largest box or
/// part any of its setups gives a rank), rank 0 choosing as [`step_layout`] does (the user's cache, or the default
/// with `BESPOKE_NO_TUNING`).
pub fn rank_layout_for_tets<T: Real>(
    gpu: &Gpu,
    comm: &dyn Comm,
    kind: KernelKind,
    local_tets: usize,
) -> Result<(Layout, String)> {
    rank_layout_of::<T>(gpu, comm, kind, local_tets, || step_layout::<T>(gpu, kind))
}

/// [`rank_layout`] with rank 0's decision kept in `cache` (None: timed every time).
pub fn rank_layout_in<T: Real>(
    gpu: &Gpu,
    comm: &dyn Comm,
    kind: KernelKind,
    part: &RankPart,
    cache: Option<&DiskCache>,
) -> Result<(Layout, String)> {
    rank_layout_for::<T>(gpu, comm, kind, part.local_tets(), cache)
}

/// [`rank_layout_in`] for operators of at most `local_tets` tets on this rank (`bespoke scale`: the largest box
/// or part any of its setups gives a rank).
pub fn rank_layout_for<T: Real>(
    gpu: &Gpu,
    comm: &dyn Comm,
    kind: KernelKind,
    local_tets: usize,
    cache: Option<&DiskCache>,
) -> Result<(Layout, String)> {
    rank_layout_of::<T>(gpu, comm, kind, local_tets, || {
        step_layout_in::<T>(gpu, kind, cache)
    })
}

/// [`rank_layout_for`] with rank 0's choice from `choose`.
fn rank_layout_of<T: Real>(
    gpu: &Gpu,
    comm: &dyn Comm,
    kind: KernelKind,
    local_tets: usize,
    choose: impl FnOnce() -> Result<LayoutChoice>,
) -> Result<(Layout, String)> {
    let mut b = if comm.rank() == 0 {
        match choose() {
            Ok(c) => encode(&c.order(), &c.source),
            Err(e) => {
                let b = root_failed(&e.to_string());
                comm.broadcast_bytes(0, &mut b.clone())?;
                return Err(e);
            }
        }
    } else {
        Vec::new()
    };
    comm.broadcast_bytes(0, &mut b)?;
    let (order, source) = decode(&b).inspect_err(blame_root(comm))?;
    // Which layouts this rank's part fits, in Layout::ALL's order; then those every rank's part fits.
    let (size, limit) = (T::DTYPE.size(), gpu.binding_limit());
    let fits: Vec<u8> = Layout::ALL
        .iter()
        .map(|l| u8::from(l.misfit_on(gpu, local_tets, size).is_none()))
        .collect();
    let all = comm.all_gather_bytes(&fits)?;
    let fits_everywhere = |l: Layout| {
        Layout::ALL
            .iter()
            .position(|&m| m == l)
            .is_some_and(|k| all.iter().all(|r| r.get(k) == Some(&1)))
    };
    Ok(match order.iter().position(|&l| fits_everywhere(l)) {
        Some(0) => (order[0], format!("{source} on rank 0")),
        Some(k) => (
            order[k],
            format!(
                "{source} on rank 0: {} binds too much on some rank",
                order[0].name()
            ),
        ),
        // Every rank finds none, so every rank returns this error: no rank waits on another.
        None => {
            return Err(FvError::Unsupported(format!(
                "no layout of the {} kernel fits every rank's part: this rank's {local_tets} tets fit {} within \
                 adapter `{}`'s largest binding ({limit} bytes); more ranks make smaller parts",
                kind.name(),
                match Layout::ALL
                    .iter()
                    .zip(&fits)
                    .filter(|(_, f)| **f == 1)
                    .map(|(l, _)| l.name())
                    .collect::<Vec<_>>()
                {
                    v if v.is_empty() => "none".to_string(),
                    v => v.join(", "),
                },
                gpu.adapter_name()
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rank 0's order arrives whole; its failure is the other ranks' error; malformed bytes are named.
    #[test]
    fn the_order_travels_and_bad_bytes_are_named() {
        let order = [
            Layout::TetMajor,
            Layout::SlotMajorX4D16,
            Layout::Texture,
            Layout::SlotMajor,
        ];
        assert_eq!(
            decode(&encode(&order, "tuned")).unwrap(),
            (order.to_vec(), "tuned".into())
        );
        let e = decode(&root_failed("no f64")).unwrap_err().to_string();
        assert!(e.contains("no f64"), "{e}");
        for bad in [
            vec![FROM_ROOT_PART],
            vec![FROM_ROOT_PART, 3, 0],
            vec![FROM_ROOT_PART, 1, 99],
        ] {
            let e = decode(&bad).unwrap_err().to_string();
            assert!(e.contains("malformed layout choice"), "{bad:?}: {e}");
        }
    }
}
