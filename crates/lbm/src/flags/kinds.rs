//! Each cell's palette index, in the narrowest integer the palette needs: none while every cell is fluid, one
//! byte a cell for up to 256 distinct cells (fluid, walls, a lid), two for up to 65 536 (an inlet profile: one
//! value a row), four beyond. Every rank of a distributed lattice holds the whole domain's (docs/scale.md).

/// Palette indices of `n` cells, row-major.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Kinds {
    /// Every cell is index 0 (fluid).
    Fluid,
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
}

impl Kinds {
    /// Cell k's index.
    pub(super) fn get(&self, k: usize) -> u32 {
        match self {
            Self::Fluid => 0,
            Self::U8(v) => u32::from(v[k]),
            Self::U16(v) => u32::from(v[k]),
            Self::U32(v) => v[k],
        }
    }

    /// Sets cell k of `n` to `index`, widening (or first allocating) the array where it does not fit.
    pub(super) fn set(&mut self, k: usize, index: u32, n: usize) {
        if self.is_fluid() {
            if index == 0 {
                return;
            }
            *self = Self::U8(vec![0; n]);
        }
        if index > self.max() {
            self.widen_to(index);
        }
        match self {
            Self::Fluid => unreachable!("allocated above"),
            Self::U8(v) => v[k] = index as u8,
            Self::U16(v) => v[k] = index as u16,
            Self::U32(v) => v[k] = index,
        }
    }

    /// The largest index the current width holds.
    fn max(&self) -> u32 {
        match self {
            Self::Fluid => 0,
            Self::U8(_) => u32::from(u8::MAX),
            Self::U16(_) => u32::from(u16::MAX),
            Self::U32(_) => u32::MAX,
        }
    }

    /// Converts the array to the width `index` needs (the old and the new array alive at once, nothing more).
    fn widen_to(&mut self, index: u32) {
        let to16 = index <= u32::from(u16::MAX);
        *self = match std::mem::replace(self, Self::Fluid) {
            Self::U8(v) if to16 => Self::U16(v.into_iter().map(u16::from).collect()),
            Self::U8(v) => Self::U32(v.into_iter().map(u32::from).collect()),
            Self::U16(v) => Self::U32(v.into_iter().map(u32::from).collect()),
            other => other,
        };
    }

    /// Every index in order (nothing while all fluid: the caller knows n).
    pub(super) fn iter(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        match self {
            Self::Fluid => Box::new(std::iter::empty()),
            Self::U8(v) => Box::new(v.iter().map(|&i| u32::from(i))),
            Self::U16(v) => Box::new(v.iter().map(|&i| u32::from(i))),
            Self::U32(v) => Box::new(v.iter().copied()),
        }
    }

    /// No array: every cell fluid.
    pub(super) fn is_fluid(&self) -> bool {
        matches!(self, Self::Fluid)
    }

    /// An empty array of `n` cells as wide as this one (for a window that copies indices).
    pub(super) fn zeroed_like(&self, n: usize) -> Self {
        match self {
            Self::Fluid => Self::Fluid,
            Self::U8(_) => Self::U8(vec![0; n]),
            Self::U16(_) => Self::U16(vec![0; n]),
            Self::U32(_) => Self::U32(vec![0; n]),
        }
    }

    /// Bytes of the array.
    #[cfg(test)]
    pub(super) fn bytes(&self) -> usize {
        match self {
            Self::Fluid => 0,
            Self::U8(v) => v.len(),
            Self::U16(v) => 2 * v.len(),
            Self::U32(v) => 4 * v.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Kinds;

    #[test]
    fn indices_widen_as_the_palette_grows_and_keep_every_cell() {
        let n = 1000;
        let mut k = Kinds::Fluid;
        k.set(3, 0, n);
        assert!(k.is_fluid());
        let mut want = vec![0u32; n];
        for (cell, index) in [
            (5, 1),
            (7, 255),
            (9, 256),
            (11, 65_535),
            (13, 65_536),
            (999, 70_000),
        ] {
            k.set(cell, index, n);
            want[cell] = index;
            assert_eq!(k.iter().collect::<Vec<_>>(), want, "after index {index}");
        }
        assert_eq!(k.bytes(), 4 * n);
        let mut k = Kinds::Fluid;
        k.set(0, 255, n);
        assert_eq!(k.bytes(), n);
        k.set(1, 256, n);
        assert_eq!(k.bytes(), 2 * n);
        assert_eq!((k.get(0), k.get(1), k.get(2)), (255, 256, 0));
        assert_eq!(k.zeroed_like(4), Kinds::U16(vec![0; 4]));
    }
}
